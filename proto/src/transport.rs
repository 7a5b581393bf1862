//! Wire limits, transport settings and shutdown policy that both ends
//! share, in one place (docs/session-layer.md §"Limits and timeouts" lists
//! them for readers). The QDL and the sut-node take every size, window and
//! timeout of their links from here, so the two ends cannot drift apart.

use std::sync::Arc;
use std::time::Duration;

/// Largest protobuf message either end sends or accepts, in bytes: a gRPC
/// message, a QUIC frame, a decoded response. The QDL cuts queries into
/// pieces far smaller than this (4 MiB by default); the room is for one
/// large sample, or a large batch of completions, in one message.
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Largest decoded sample a node accepts unless its config says otherwise
/// (`max_sample_bytes`), in bytes.
pub const DEFAULT_MAX_SAMPLE_BYTES: u64 = 64 << 20;

/// HTTP/2 flow-control window of one gRPC stream, bytes. A 150 KB sample
/// would stall on HTTP/2's 64 KB default, a window update per sample.
pub const HTTP2_STREAM_WINDOW: u32 = 8 << 20;
/// HTTP/2 flow-control window of a gRPC connection, bytes.
pub const HTTP2_CONNECTION_WINDOW: u32 = 32 << 20;
/// How often the QDL pings an idle gRPC connection, so a node that
/// vanished without closing its socket (power, cable) is noticed.
pub const HTTP2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// How long the QDL waits for a ping's answer before the node is lost.
pub const HTTP2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// QUIC flow-control window of one stream (one query), bytes.
pub const QUIC_STREAM_WINDOW: u32 = 16 << 20;
/// QUIC flow-control window of a connection, bytes: a node's worth of
/// 150 KB samples in flight.
pub const QUIC_CONNECTION_WINDOW: u32 = 128 << 20;
/// Largest UDP payload MTU discovery may try: a 9000-byte jumbo frame less
/// IPv6 and UDP headers. Discovery probes, so smaller paths are safe.
pub const QUIC_MTU_UPPER_BOUND: u16 = 8952;
/// How often the QDL's QUIC connection sends a keep-alive.
pub const QUIC_KEEP_ALIVE_INTERVAL: Duration = Duration::from_millis(500);
/// A QUIC connection silent this long is lost (QDL side).
pub const QUIC_IDLE_TIMEOUT: Duration = Duration::from_secs(3);
/// Query streams a node lets one QDL keep open at once: one stream per
/// query piece, and the QDL keeps up to its window of pieces in flight, far
/// more than quinn's default of 100.
pub const QUIC_MAX_CONCURRENT_STREAMS: u32 = 1 << 16;

/// How long the QDL waits for a node to resolve, connect, or answer Name
/// or Info.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stopping node (SIGTERM) waits for the samples it holds to
/// finish before it closes its servers.
pub const NODE_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a closing QUIC server waits for answers already written to
/// reach clients: closing at once would discard them, and the QDL would
/// send those samples again elsewhere.
pub const QUIC_DELIVERY_GRACE: Duration = Duration::from_secs(5);
/// How long a closed QUIC endpoint waits for its peers to acknowledge.
pub const QUIC_CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long a stopping node waits for each server to close: the QUIC
/// delivery grace and close wait, plus room for the gRPC server to finish
/// its streams.
pub const NODE_SERVER_CLOSE_TIMEOUT: Duration = Duration::from_secs(8);
/// How long the QDL waits for its links to close at the end of a run.
pub const QDL_CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Transport settings of a netdiv QUIC endpoint. `client` (the QDL) adds
/// keep-alives and a short idle timeout, so a node that is gone without a
/// word (killed, unplugged) is noticed in seconds; a server (a node) allows
/// many concurrent query streams.
pub fn quic_config(client: bool) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(QUIC_STREAM_WINDOW.into())
        .receive_window(QUIC_CONNECTION_WINDOW.into())
        .send_window(QUIC_CONNECTION_WINDOW.into())
        // Streams in the order they were written: with fair sharing, a
        // node's first piece would arrive only after every queued piece had
        // been interleaved with it, leaving the node idle meanwhile.
        .send_fairness(false);
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.upper_bound(QUIC_MTU_UPPER_BOUND);
    t.mtu_discovery_config(Some(mtu));
    if client {
        t.keep_alive_interval(Some(QUIC_KEEP_ALIVE_INTERVAL));
        t.max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(QUIC_IDLE_TIMEOUT).expect("a few seconds fit"),
        ));
    } else {
        t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(QUIC_MAX_CONCURRENT_STREAMS));
    }
    Arc::new(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_fits_in_the_systemd_stop_timeout() {
        // deploy/systemd/sut-node@.service: TimeoutStopSec=60s covers the
        // drain and both servers' close.
        let worst = NODE_DRAIN_TIMEOUT + 2 * NODE_SERVER_CLOSE_TIMEOUT;
        assert!(worst < Duration::from_secs(60), "{worst:?}");
        assert!(QUIC_DELIVERY_GRACE + QUIC_CLOSE_WAIT < NODE_SERVER_CLOSE_TIMEOUT);
    }

    #[test]
    fn windows_hold_what_they_must() {
        assert!(HTTP2_STREAM_WINDOW <= HTTP2_CONNECTION_WINDOW);
        assert!(QUIC_STREAM_WINDOW <= QUIC_CONNECTION_WINDOW);
        assert!(DEFAULT_MAX_SAMPLE_BYTES <= MAX_MESSAGE_BYTES as u64);
    }
}
