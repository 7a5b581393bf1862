//! The settings a QDL ran with, as the run record keeps them: what an
//! auditor needs to see how queries were cut and held (pieces, windows),
//! how the LoadGen node's side was tuned (I/O threads, the poll for the
//! next query) and what happened to a node that stopped (timeout,
//! failover, rejoin). Taken after the QDL adjusted its configuration to
//! the run (a token model's pieces of one sample and windows of each
//! node's sequences), so they are the settings used, not the ones asked
//! for.

use serde::{Deserialize, Serialize};

use super::QdlConfig;

/// The settings a QDL ran with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QdlSettings {
    /// Whether the links were encrypted (gRPC over TLS, or QUIC).
    pub tls: bool,
    /// Most samples one node held at once.
    pub window_samples: u64,
    /// Most sample bytes one node held at once.
    pub window_bytes: u64,
    /// A token model's windows, in samples, in node order: each node's
    /// sequences side by side, or the sample window if smaller (empty
    /// where the sample window above applied to every node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window_sequences: Vec<u64>,
    /// Largest piece of a query sent as one message, in samples.
    pub max_piece_samples: usize,
    /// Largest piece of a query sent as one message, in bytes.
    pub max_piece_bytes: u64,
    /// Largest message either way, in bytes.
    pub max_message_bytes: usize,
    /// Threads for network I/O and response decoding.
    pub io_threads: usize,
    /// How long the thread that handed over the last answer in flight
    /// polled for the next query, µs (0: it did not).
    pub poll_next_query_us: u64,
    /// Whether a failed node's samples went to the others (off in
    /// submission mode: a failed node ends the run).
    pub failover: bool,
    /// How long a node holding samples could complete none before it was
    /// failed, seconds (`None`: never).
    pub node_timeout_s: Option<f64>,
    /// Whether a failed node was brought back into the run.
    pub rejoin: bool,
}

impl QdlSettings {
    /// The settings of a QDL opened with `config` whose links are
    /// encrypted if `tls`, after it set its pieces to `max_piece_samples`
    /// and, for a token model, each node's window to `window_sequences`
    /// (empty for other models).
    pub(super) fn used(
        config: &QdlConfig,
        tls: bool,
        max_piece_samples: usize,
        window_sequences: Vec<u64>,
    ) -> QdlSettings {
        QdlSettings {
            tls,
            window_samples: config.window.samples,
            window_bytes: config.window.bytes,
            window_sequences,
            max_piece_samples,
            max_piece_bytes: config.max_piece_bytes,
            max_message_bytes: config.max_message_bytes,
            io_threads: config.io_threads,
            poll_next_query_us: config.poll_next_query.as_micros() as u64,
            failover: !config.no_failover,
            node_timeout_s: config.node_timeout.map(|t| t.as_secs_f64()),
            rejoin: config.rejoin_backoff().is_some(),
        }
    }
}

impl std::fmt::Display for QdlSettings {
    /// One line for a report: `TLS; windows of 1024 samples / 64 MiB per
    /// node; pieces of at most 16 samples / 4 MiB; 2 I/O threads; ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; ", if self.tls { "TLS" } else { "no TLS" })?;
        if self.window_sequences.is_empty() {
            write!(
                f,
                "windows of {} samples / {} per node; ",
                self.window_samples,
                size(self.window_bytes)
            )?;
        } else {
            write!(
                f,
                "windows of {:?} sequences per node; ",
                self.window_sequences
            )?;
        }
        write!(
            f,
            "pieces of at most {} samples / {}; {} I/O threads; ",
            self.max_piece_samples,
            size(self.max_piece_bytes),
            self.io_threads
        )?;
        match self.poll_next_query_us {
            0 => write!(f, "no poll for the next query; ")?,
            us => write!(f, "polls {us} µs for the next query; ")?,
        }
        match self.node_timeout_s {
            Some(s) => write!(f, "node timeout {s} s; ")?,
            None => write!(f, "no node timeout; ")?,
        }
        write!(
            f,
            "failover {}, rejoin {}",
            if self.failover { "on" } else { "off" },
            if self.rejoin { "on" } else { "off" }
        )
    }
}

/// `bytes` in MiB where it is a whole number of them, else in bytes, so the
/// line never rounds a setting.
fn size(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} B")
    }
}
