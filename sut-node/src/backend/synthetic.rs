//! A synthetic accelerator: it takes as long as a configured cost model and
//! answers with a deterministic function of the input bytes, so a response
//! delivered to the wrong sample is detectable end to end.

use super::hash::{lane_hash, word_hash};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::device::SampleError;
use super::Backend;

/// Cost model and output shape of the synthetic backend.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticConfig {
    /// Fixed cost of running one batch, in microseconds.
    pub batch_cost_us: u64,
    /// Added cost per sample in a batch, in microseconds.
    pub sample_cost_us: u64,
    /// Batches that can run at once.
    pub devices: usize,
    /// Output size per sample in bytes (at least 8).
    pub output_bytes: usize,
    /// When set, outputs are this fraction of their input's size instead
    /// (at least `output_bytes`): 0.25 for a one-byte class per float32
    /// voxel of a 3D-UNet volume.
    pub output_fraction: Option<f64>,
    /// TEST ONLY, breaks the rules on purpose: answer an input equal to the
    /// one before it at once from a cache, without its cost. The
    /// compliance test TEST04 (the same sample over and over) exists to
    /// catch such a SUT; netdiv's tests show that it does.
    pub test_only_response_cache: bool,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        Self {
            batch_cost_us: 0,
            sample_cost_us: 0,
            devices: 1,
            output_bytes: 8,
            output_fraction: None,
            test_only_response_cache: false,
        }
    }
}

/// The synthetic backend.
#[derive(Debug)]
pub struct SyntheticBackend {
    config: SyntheticConfig,
    /// The hash of the last input answered (`test_only_response_cache`).
    last: std::sync::Mutex<Option<u64>>,
}

impl SyntheticBackend {
    /// A backend that simulates the costs and output size of `config`.
    pub fn new(config: SyntheticConfig) -> Self {
        Self {
            config,
            last: Default::default(),
        }
    }

    /// How many of `inputs` cost their time: all, unless the test-only
    /// cache holds them (each equal to the input before it).
    fn costly(&self, inputs: &[&[u8]]) -> usize {
        if !self.config.test_only_response_cache {
            return inputs.len();
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        inputs
            .iter()
            .filter(|i| last.replace(word_hash(i)) != Some(word_hash(i)))
            .count()
    }

    /// Bytes of the output for an input of `input_len` bytes.
    fn output_len(&self, input_len: usize) -> usize {
        let fixed = self.config.output_bytes;
        match self.config.output_fraction {
            Some(f) if f.is_finite() && f > 0.0 => fixed.max((input_len as f64 * f) as usize),
            _ => fixed,
        }
    }
}

/// The output the synthetic backend gives for `input`: a hash of every
/// byte of it (little endian), then that hash repeated to `output_bytes`
/// (so outputs compress well, to exercise response codecs).
pub fn expected_output(input: &[u8], output_bytes: usize) -> Vec<u8> {
    let hash = lane_hash(input).to_le_bytes();
    let len = output_bytes.max(8);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let n = (len - out.len()).min(8);
        out.extend_from_slice(&hash[..n]);
    }
    out
}

/// Waits `d`: sleeps for long waits, spins for short ones so small costs
/// are not inflated by timer slack.
fn busy_for(d: Duration) {
    wait_until(Instant::now() + d);
}

/// Waits until `until`: sleeps while it is far, spins the last 100 µs so
/// small costs are not inflated by timer slack.
pub(crate) fn wait_until(until: Instant) {
    let left = until.saturating_duration_since(Instant::now());
    if left > Duration::from_micros(200) {
        std::thread::sleep(left - Duration::from_micros(100));
    }
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

impl Backend for SyntheticBackend {
    fn kind(&self) -> &'static str {
        "synthetic"
    }

    fn detail(&self) -> String {
        let c = &self.config;
        format!(
            "batch_cost_us={} sample_cost_us={} devices={} output_bytes={}{}{}",
            c.batch_cost_us,
            c.sample_cost_us,
            c.devices,
            c.output_bytes,
            c.output_fraction
                .map_or(String::new(), |f| format!(" output_fraction={f}")),
            if c.test_only_response_cache {
                " TEST-ONLY-RESPONSE-CACHE (breaks the rules)"
            } else {
                ""
            }
        )
    }

    fn devices(&self) -> usize {
        self.config.devices.max(1)
    }

    fn run(&self, _device: usize, inputs: &[&[u8]]) -> Vec<Result<Vec<u8>, SampleError>> {
        let costly = self.costly(inputs) as u64;
        let batch = if costly > 0 {
            self.config.batch_cost_us
        } else {
            0
        };
        let cost = batch + self.config.sample_cost_us * costly;
        if cost > 0 {
            busy_for(Duration::from_micros(cost));
        }
        inputs
            .iter()
            .map(|i| Ok(expected_output(i, self.output_len(i.len()))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_a_function_of_the_input() {
        let a = expected_output(b"abc", 8);
        assert_eq!(a, expected_output(b"abc", 8));
        assert_ne!(a, expected_output(b"abd", 8));
        assert_eq!(expected_output(b"abc", 20).len(), 20);
        assert_eq!(&expected_output(b"abc", 20)[..8], &a[..]);
    }

    /// A change anywhere in a large input (every lane, the tail) or in its
    /// length changes the output: the backend read every byte.
    #[test]
    fn every_byte_of_a_large_input_counts() {
        let input: Vec<u8> = (0..150_531u32).map(|i| (i % 253) as u8).collect();
        let base = expected_output(&input, 8);
        for at in [0, 9, 17, 31, 75_000, 150_527, 150_530] {
            let mut changed = input.clone();
            changed[at] ^= 1;
            assert_ne!(expected_output(&changed, 8), base, "byte {at}");
        }
        assert_ne!(expected_output(&input[..150_528], 8), base);
    }

    #[test]
    fn cost_model_takes_its_time() {
        let b = SyntheticBackend::new(SyntheticConfig {
            batch_cost_us: 1000,
            sample_cost_us: 500,
            ..Default::default()
        });
        let t = Instant::now();
        let out = b.run(0, &[b"x", b"y"]);
        assert!(t.elapsed() >= Duration::from_micros(2000));
        assert_eq!(out.len(), 2);
    }

    /// The test-only cache answers an input equal to the one before it
    /// without its cost, and only that.
    #[test]
    fn the_test_only_cache_skips_the_cost_of_a_repeat() {
        // A cost far above any scheduling delay, so a repeat that paid it
        // cannot pass for one that skipped it on a busy machine.
        let b = SyntheticBackend::new(SyntheticConfig {
            sample_cost_us: 500_000,
            test_only_response_cache: true,
            ..Default::default()
        });
        let timed = |input: &[u8]| {
            let t = Instant::now();
            let out: Vec<Vec<u8>> = b.run(0, &[input]).into_iter().map(Result::unwrap).collect();
            (t.elapsed(), out)
        };
        let (first, a) = timed(b"same");
        let (repeat, a2) = timed(b"same");
        let (other, _) = timed(b"other");
        assert_eq!(a, a2, "a cached answer is the same answer");
        assert!(first >= Duration::from_millis(500) && other >= Duration::from_millis(500));
        assert!(repeat < Duration::from_millis(250), "{repeat:?}");
        assert!(b.detail().contains("TEST-ONLY-RESPONSE-CACHE"));
    }
}
