//! What crossed the fabric, per node: samples and bytes each way (as they
//! travelled and decoded), when the first piece left and the last answer
//! came, and each Name() round trip. For the run record and the
//! Network-division bandwidth check, and each node's sample round trips,
//! time to first token, time per output token and output tokens
//! ([`super::latency`]); counting never blocks the timed path (relaxed
//! atomics, one short lock for the Name() times).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::latency::LatencyHistogram;
pub use super::latency::LatencySummary;
use crate::pool::SampleTiming;

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
    first_token: LatencyHistogram,
    per_output_token: LatencyHistogram,
    output_tokens: AtomicU64,
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

    /// A completion that counts arrived at `now`, with `n_tokens` tokens
    /// (0: not a token model): its round trip and, for a token model whose
    /// first token came, its time per output token as the LoadGen reckons
    /// it (first token to completion over the tokens after the first).
    pub(super) fn completed(&self, timing: SampleTiming, now: Instant, n_tokens: i64) {
        let since = |t: Instant| now.saturating_duration_since(t).as_micros() as u64;
        self.latency.record(since(timing.sent_at));
        if n_tokens > 0 {
            self.output_tokens
                .fetch_add(n_tokens as u64, Ordering::Relaxed);
        }
        if let (Some(first), true) = (timing.first_token_at, n_tokens > 1) {
            self.per_output_token
                .record(since(first) / (n_tokens as u64 - 1));
        }
    }

    /// A first token that counts arrived, `us` after its sample was sent.
    pub(super) fn first_token(&self, us: u64) {
        self.first_token.record(us);
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
            first_token: self.first_token.snapshot(),
            time_per_output_token: self.per_output_token.snapshot(),
            output_tokens: self.output_tokens.load(Ordering::Relaxed),
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
    /// Token models: time to first token on this node (sent until its
    /// first token came).
    #[serde(default)]
    pub first_token: LatencySummary,
    /// Token models: time per output token on this node (first token to
    /// completion over the tokens after the first), in microseconds.
    #[serde(default)]
    pub time_per_output_token: LatencySummary,
    /// Token models: output tokens this node answered with (completions
    /// that counted).
    #[serde(default)]
    pub output_tokens: u64,
}
