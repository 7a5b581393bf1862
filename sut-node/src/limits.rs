//! How much a node takes on at once, whoever its clients are: connections,
//! streams per connection, samples and bytes held, and answers a client
//! has not taken yet. Past a limit the node declines samples with the
//! retryable reply (the QDL sends them elsewhere and tries the node again
//! later), refuses connections, or stops reading a stream until its client
//! reads; it never grows without bound. The QDL's own window keeps a sound
//! client well below every default.

use serde::{Deserialize, Serialize};

use netdiv_proto::Benchmark;

/// The `[limits]` table of the config file.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Open connections per transport; more are refused \[256\].
    pub max_connections: Option<usize>,
    /// Concurrent streams per connection \[256\].
    pub max_streams_per_connection: Option<u32>,
    /// Samples held (received, not yet answered) across all clients;
    /// more are declined \[65536\].
    pub max_samples_held: Option<u64>,
    /// Decoded sample bytes held across all clients; more are declined
    /// [the larger of 1 GiB and 8 QDL windows of the benchmark].
    pub max_bytes_held: Option<u64>,
    /// Answers of one stream its client has not read yet; the node stops
    /// reading that stream's queries until it does \[16384\].
    pub max_unread_answers: Option<usize>,
    /// Requests (gRPC calls, QUIC streams) not yet started, per transport,
    /// across all clients; more are shed with "unavailable" \[1024\].
    pub max_pending_requests: Option<usize>,
    /// Longest a request may take to start its answer, in ms (a unary call
    /// to answer, a query stream to be taken by the node); past it the
    /// request ends with a deadline error \[10000\].
    pub request_timeout_ms: Option<u64>,
}

/// The limits a node runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Open connections per transport.
    pub max_connections: usize,
    /// Concurrent streams per connection.
    pub max_streams_per_connection: u32,
    /// Samples held across all clients.
    pub max_samples_held: u64,
    /// Decoded sample bytes held across all clients.
    pub max_bytes_held: u64,
    /// Unread answers of one stream.
    pub max_unread_answers: usize,
    /// Requests not yet started, per transport.
    pub max_pending_requests: usize,
    /// Longest a request may take to start its answer.
    pub request_timeout: std::time::Duration,
}

impl Limits {
    /// The defaults for `benchmark`.
    pub fn defaults(benchmark: &Benchmark) -> Limits {
        Limits {
            max_connections: 256,
            max_streams_per_connection: 256,
            max_samples_held: 65_536,
            max_bytes_held: (1u64 << 30)
                .max(8 * netdiv_proto::transport::default_window_bytes(benchmark)),
            max_unread_answers: 16_384,
            max_pending_requests: 1024,
            request_timeout: std::time::Duration::from_secs(10),
        }
    }

    /// `config` over the defaults for `benchmark`; a limit of 0 is an
    /// error naming the key.
    pub fn from_config(config: &LimitsConfig, benchmark: &Benchmark) -> anyhow::Result<Limits> {
        let d = Limits::defaults(benchmark);
        let limits = Limits {
            max_connections: config.max_connections.unwrap_or(d.max_connections),
            max_streams_per_connection: config
                .max_streams_per_connection
                .unwrap_or(d.max_streams_per_connection),
            max_samples_held: config.max_samples_held.unwrap_or(d.max_samples_held),
            max_bytes_held: config.max_bytes_held.unwrap_or(d.max_bytes_held),
            max_unread_answers: config.max_unread_answers.unwrap_or(d.max_unread_answers),
            max_pending_requests: config
                .max_pending_requests
                .unwrap_or(d.max_pending_requests),
            request_timeout: config
                .request_timeout_ms
                .map_or(d.request_timeout, std::time::Duration::from_millis),
        };
        for (key, value) in [
            ("max_connections", limits.max_connections as u64),
            (
                "max_streams_per_connection",
                limits.max_streams_per_connection as u64,
            ),
            ("max_samples_held", limits.max_samples_held),
            ("max_bytes_held", limits.max_bytes_held),
            ("max_unread_answers", limits.max_unread_answers as u64),
            ("max_pending_requests", limits.max_pending_requests as u64),
            (
                "request_timeout_ms",
                limits.request_timeout.as_millis() as u64,
            ),
        ] {
            if value == 0 {
                anyhow::bail!("config file key limits.{key} must be at least 1");
            }
        }
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_overrides_defaults_and_zero_is_refused_by_name() {
        let benchmark = Benchmark::parse("resnet50").unwrap();
        let config = LimitsConfig {
            max_connections: Some(4),
            ..LimitsConfig::default()
        };
        let limits = Limits::from_config(&config, &benchmark).unwrap();
        assert_eq!(limits.max_connections, 4);
        assert_eq!(limits.max_samples_held, 65_536);
        assert!(limits.max_bytes_held >= 1 << 30);
        let zero = LimitsConfig {
            max_unread_answers: Some(0),
            ..LimitsConfig::default()
        };
        let e = Limits::from_config(&zero, &benchmark)
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.max_unread_answers"), "{e}");
    }
}
