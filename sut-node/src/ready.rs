//! The `--ready-file`: once a node listens it writes one JSON object (its
//! name, addresses, TLS mode, backend, I/O threads and whether samples
//! run on them, pid) there, atomically; whoever started it (a script, the
//! embedded default, the tests) waits for it.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What a node writes once it listens: the one shape of the ready file,
/// for the node that writes it and everyone who reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// The node's name.
    pub name: String,
    /// Where its gRPC server listens, if it runs one.
    pub grpc: Option<SocketAddr>,
    /// Where its QUIC server listens, if it runs one.
    pub quic: Option<SocketAddr>,
    /// Where its `/metrics` endpoint listens, if it has one.
    pub metrics: Option<SocketAddr>,
    /// `off`, `on` or `mtls`.
    pub tls: String,
    /// Its backend, as `NodeInfo.backend_detail` says it.
    pub backend: String,
    /// The threads its network I/O runs on (`--io-threads`), as its
    /// runtime counts them.
    pub io_threads: usize,
    /// Whether it runs samples on its I/O thread (`--run-on-io-thread`).
    pub run_on_io_thread: bool,
    /// Its process id.
    pub pid: u32,
}

/// Why a node's readiness was not seen.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The file could not be written.
    #[error("cannot write --ready-file {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The file does not hold a ready record.
    #[error("ready file {path} holds {text:?}: {error}")]
    Garbled {
        /// The file.
        path: String,
        /// What it holds.
        text: String,
        /// What is wrong with it.
        error: String,
    },
    /// The node exited before it was ready.
    #[error("it exited ({0}) before it was ready")]
    Exited(std::process::ExitStatus),
    /// The node was not ready in time.
    #[error("not ready after {0:?}")]
    Timeout(Duration),
    /// Its state could not be read.
    #[error("cannot check the node process: {0}")]
    Process(std::io::Error),
}

/// Writes `ready` to `path` through a temporary file in the same folder,
/// so a reader sees nothing or all of it.
pub fn write(path: &Path, ready: &Ready) -> Result<(), ReadyError> {
    let failed = |source| ReadyError::Write {
        path: path.display().to_string(),
        source,
    };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    let text = serde_json::to_string(ready).expect("a ready record is plain data");
    std::fs::write(&temporary, text + "\n").map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

/// Waits up to `timeout` for the ready file of the node `child`, which
/// must go on running meanwhile; returns what the node wrote.
pub fn wait(child: &mut Child, path: &Path, timeout: Duration) -> Result<Ready, ReadyError> {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return read(path, text);
        }
        if let Some(status) = child.try_wait().map_err(ReadyError::Process)? {
            return Err(ReadyError::Exited(status));
        }
        if started.elapsed() > timeout {
            return Err(ReadyError::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The ready record `text` (read from `path`).
pub fn read(path: &Path, text: String) -> Result<Ready, ReadyError> {
    serde_json::from_str(&text).map_err(|e| ReadyError::Garbled {
        path: path.display().to_string(),
        text,
        error: e.to_string(),
    })
}
