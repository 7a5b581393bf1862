//! What crossed the fabric, per node: samples and bytes each way (as they
//! travelled and decoded), when the first piece left and the last answer
//! came, and each Name() round trip. For the run record and the
//! Network-division bandwidth check, and each node's sample round trips
//! ([`super::latency`]); counting never blocks the timed path (relaxed
//! atomics, one short lock for the Name() times).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::latency::LatencyHistogram;
pub use super::latency::LatencySummary;

/// Counters of one node.
#[derive(Default)]
pub(super) struct NodeTraffic {
    samples_sent: AtomicU64,
    bytes_sent: AtomicU64,
    decoded_bytes_sent: AtomicU64,
    answers: AtomicU64,
    bytes_received: AtomicU64,
    decoded_bytes_received: AtomicU64,
    name_round_trips_us: Mutex<Vec<u64>>,
    latency: LatencyHistogram,
}

/// When traffic started and last moved, relative to the QDL's start.
pub(super) struct Window {
    origin: Instant,
    first_send_ns: AtomicU64,
    last_answer_ns: AtomicU64,
}

impl Window {
    pub(super) fn new() -> Window {
        Window {
            origin: Instant::now(),
            first_send_ns: AtomicU64::new(u64::MAX),
            last_answer_ns: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    pub(super) fn sent(&self) {
        self.first_send_ns
            .fetch_min(self.now_ns(), Ordering::Relaxed);
    }

    pub(super) fn answered(&self) {
        self.last_answer_ns
            .fetch_max(self.now_ns(), Ordering::Relaxed);
    }

    /// Seconds from the first piece sent to the last answer received.
    pub(super) fn seconds(&self) -> f64 {
        let first = self.first_send_ns.load(Ordering::Relaxed);
        let last = self.last_answer_ns.load(Ordering::Relaxed);
        if first == u64::MAX || last <= first {
            0.0
        } else {
            (last - first) as f64 / 1e9
        }
    }
}

impl NodeTraffic {
    pub(super) fn sent(&self, samples: u64, wire: u64, decoded: u64) {
        self.samples_sent.fetch_add(samples, Ordering::Relaxed);
        self.bytes_sent.fetch_add(wire, Ordering::Relaxed);
        self.decoded_bytes_sent
            .fetch_add(decoded, Ordering::Relaxed);
    }

    pub(super) fn received(&self, answers: u64, wire: u64, decoded: u64) {
        self.answers.fetch_add(answers, Ordering::Relaxed);
        self.bytes_received.fetch_add(wire, Ordering::Relaxed);
        self.decoded_bytes_received
            .fetch_add(decoded, Ordering::Relaxed);
    }

    /// A completion that counts arrived, `us` after its sample was sent.
    pub(super) fn round_trip(&self, us: u64) {
        self.latency.record(us);
    }

    pub(super) fn name_round_trip(&self, us: u64) {
        self.name_round_trips_us
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(us);
    }

    pub(super) fn snapshot(&self) -> NodeTrafficReport {
        NodeTrafficReport {
            samples_sent: self.samples_sent.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            decoded_bytes_sent: self.decoded_bytes_sent.load(Ordering::Relaxed),
            answers: self.answers.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            decoded_bytes_received: self.decoded_bytes_received.load(Ordering::Relaxed),
            name_round_trips_us: self
                .name_round_trips_us
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            latency: self.latency.snapshot(),
        }
    }
}

/// One node's traffic so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeTrafficReport {
    /// Samples sent (re-sent ones count again).
    pub samples_sent: u64,
    /// Sample bytes as they travelled (compressed where a codec was used).
    pub bytes_sent: u64,
    /// The same samples' decoded size.
    pub decoded_bytes_sent: u64,
    /// Answers received: completions and first tokens.
    pub answers: u64,
    /// Answer bytes as they travelled.
    pub bytes_received: u64,
    /// The same answers decoded.
    pub decoded_bytes_received: u64,
    /// Each Name() round trip to this node, in microseconds.
    pub name_round_trips_us: Vec<u64>,
    /// Sample round trips to this node (sent until completed).
    pub latency: LatencySummary,
}
