//! A bound on how long this machine's CPUs may take to wake up, requested
//! from the kernel (its CPU latency QoS, `/dev/cpu_dma_latency`) and held
//! while the process runs.
//!
//! Why: one query through the network wakes a chain of sleeping threads
//! (the QDL's I/O, the node's I/O, its device thread, the answer back). A
//! CPU that went into a deep idle state, or a VM's vCPU that halted, takes
//! 15-25 µs to wake on the machines this project measures on, a large share
//! of a SingleStream query. While a bound of 0 is held, idle CPUs poll
//! instead of halting. That costs power, so it is off unless asked for; it
//! is a machine setting (tuned's `latency-performance` profile makes the
//! same request), which is why a run records it. The kernel drops the
//! request when the file is closed, so it ends with the process, even
//! after a crash.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

/// The kernel's device for CPU latency requests.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// The bound this process holds now, in µs, or -1: what a node's `Info`
/// reports, so the run record shows every machine's setting.
static HELD_MICROS: AtomicI64 = AtomicI64::new(-1);

/// The bound this process holds for its machine, in µs (`None` when it
/// holds none).
pub fn held_micros() -> Option<u32> {
    u32::try_from(HELD_MICROS.load(Ordering::Relaxed)).ok()
}

/// A held request; dropping it withdraws the request.
#[derive(Debug)]
pub struct CpuLatencyRequest {
    _file: File,
    micros: u32,
}

/// Why a request could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CpuLatencyError {
    #[error(
        "--cpu-latency-us {micros}: cannot open {}: {source} (the request \
         needs root, or write access to the device; a container needs the \
         device passed in)",
        path.display()
    )]
    /// The device could not be opened for writing.
    Open {
        /// The bound asked for, in µs.
        micros: u32,
        /// The device.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("--cpu-latency-us {micros}: {} refused the request: {source}", path.display())]
    /// The kernel did not take the value.
    Write {
        /// The bound asked for, in µs.
        micros: u32,
        /// The device.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error(
        "--cpu-latency-us {micros} is more than {}, the largest the kernel takes",
        i32::MAX
    )]
    /// More than an `s32`, the kernel's type for the bound.
    TooLarge {
        /// The bound asked for, in µs.
        micros: u32,
    },
}

impl CpuLatencyRequest {
    /// Asks that no CPU of this machine take more than `micros` µs to
    /// wake, for as long as the returned request lives.
    pub fn hold(micros: u32) -> Result<CpuLatencyRequest, CpuLatencyError> {
        Self::hold_at(Path::new(DEVICE), micros)
    }

    fn hold_at(path: &Path, micros: u32) -> Result<CpuLatencyRequest, CpuLatencyError> {
        let value = i32::try_from(micros).map_err(|_| CpuLatencyError::TooLarge { micros })?;
        let mut file =
            File::options()
                .write(true)
                .open(path)
                .map_err(|source| CpuLatencyError::Open {
                    micros,
                    path: path.to_owned(),
                    source,
                })?;
        // Four bytes are read as a binary s32; anything else as hex text.
        file.write_all(&value.to_ne_bytes())
            .map_err(|source| CpuLatencyError::Write {
                micros,
                path: path.to_owned(),
                source,
            })?;
        HELD_MICROS.store(i64::from(micros), Ordering::Relaxed);
        Ok(CpuLatencyRequest {
            _file: file,
            micros,
        })
    }

    /// The bound this request asked for, in µs.
    pub fn micros(&self) -> u32 {
        self.micros
    }
}

impl Drop for CpuLatencyRequest {
    fn drop(&mut self) {
        HELD_MICROS.store(-1, Ordering::Relaxed);
    }
}

/// Holds a request when `micros` asks for one, and logs it.
pub fn hold_requested(micros: Option<u32>) -> Result<Option<CpuLatencyRequest>, CpuLatencyError> {
    let Some(micros) = micros else {
        return Ok(None);
    };
    let request = CpuLatencyRequest::hold(micros)?;
    tracing::info!(
        event = "cpu_latency_held",
        cpu_latency_us = micros,
        "holding a CPU wake-up latency bound of {micros} µs for this machine ({DEVICE})"
    );
    Ok(Some(request))
}

/// The bound in force on this machine now (the lowest of every process's
/// request, or the kernel's default when none is held), in µs.
pub fn effective_micros() -> std::io::Result<i32> {
    let mut value = [0u8; 4];
    File::open(DEVICE)?.read_exact(&mut value)?;
    Ok(i32::from_ne_bytes(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_device_is_named_with_the_flag() {
        let path = Path::new("/nonexistent/cpu_dma_latency");
        let err = CpuLatencyRequest::hold_at(path, 0).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("--cpu-latency-us 0"), "{text}");
        assert!(text.contains("/nonexistent/cpu_dma_latency"), "{text}");
    }

    #[test]
    fn a_bound_the_kernel_cannot_take_is_refused() {
        let err = CpuLatencyRequest::hold_at(Path::new(DEVICE), u32::MAX).unwrap_err();
        assert!(matches!(err, CpuLatencyError::TooLarge { .. }), "{err}");
    }
}
