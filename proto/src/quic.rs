//! QUIC transport parameters both ends use: windows large enough for a
//! node's worth of 150 KB samples in flight, and path-MTU discovery up to
//! jumbo frames so a sample is tens of datagrams, not a hundred.

use std::sync::Arc;
use std::time::Duration;

/// Flow-control window of one stream (one query), bytes.
const STREAM_WINDOW: u32 = 16 << 20;
/// Flow-control window of a connection, bytes.
const CONNECTION_WINDOW: u32 = 128 << 20;
/// Largest UDP payload MTU discovery may try: a 9000-byte jumbo frame less
/// IPv6 and UDP headers. Discovery probes, so smaller paths are safe.
const MTU_UPPER_BOUND: u16 = 8952;

/// Transport settings of a netdiv QUIC endpoint. `client` adds keep-alives
/// and a short idle timeout, so a node that is gone without a word (killed,
/// unplugged) is noticed in seconds.
pub fn transport_config(client: bool) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(STREAM_WINDOW.into())
        .receive_window(CONNECTION_WINDOW.into())
        .send_window(CONNECTION_WINDOW.into())
        // Streams in the order they were written: with fair sharing, a
        // node's first piece would arrive only after every queued piece had
        // been interleaved with it, leaving the node idle meanwhile.
        .send_fairness(false);
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.upper_bound(MTU_UPPER_BOUND);
    t.mtu_discovery_config(Some(mtu));
    if client {
        t.keep_alive_interval(Some(Duration::from_millis(500)));
        t.max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(Duration::from_secs(3)).expect("small timeout"),
        ));
    } else {
        // One stream per query: the QDL keeps up to its window of queries
        // in flight, far more than quinn's default of 100 streams.
        t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(1 << 16));
    }
    Arc::new(t)
}
