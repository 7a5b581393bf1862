//! Wire limits, transport settings and shutdown policy that both ends
//! share, in one place (docs/session-layer.md §"Limits and timeouts" lists
//! them for readers). The QDL and the sut-node take every size, window and
//! timeout of their links from here, so the two ends cannot drift apart.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::Benchmark;

/// Largest protobuf message either end sends or accepts, in bytes, for
/// benchmarks whose samples are smaller (see [`message_limit`]): a gRPC
/// message, a QUIC frame, a decoded response. The QDL cuts queries into
/// pieces far smaller than this (4 MiB by default); the room is for one
/// large sample, or a large batch of completions, in one message.
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Room a message needs beside one sample's bytes: ids, sizes, framing.
pub const MESSAGE_OVERHEAD_BYTES: u64 = 1 << 20;

/// Largest decoded sample a node accepts unless its config says otherwise
/// (`max_sample_bytes`), for benchmarks whose samples are smaller (see
/// [`default_max_sample_bytes`]), in bytes.
pub const DEFAULT_MAX_SAMPLE_BYTES: u64 = 64 << 20;

/// Bytes of samples the QDL lets one node hold at once, for benchmarks
/// whose samples are smaller (see [`default_window_bytes`]).
pub const DEFAULT_WINDOW_BYTES: u64 = 64 << 20;

/// The largest message for `benchmark`: [`MAX_MESSAGE_BYTES`], or one of
/// its largest samples with room to spare (a 3D-UNet volume), whichever is
/// larger. Both ends derive it from the benchmark, so they agree.
pub fn message_limit(benchmark: &Benchmark) -> usize {
    let one_sample = benchmark.largest_sample_bytes() + MESSAGE_OVERHEAD_BYTES;
    usize::try_from(one_sample).map_or(usize::MAX, |n| n.max(MAX_MESSAGE_BYTES))
}

/// The largest decoded sample a node of `benchmark` accepts by default:
/// [`DEFAULT_MAX_SAMPLE_BYTES`], or its largest sample.
pub fn default_max_sample_bytes(benchmark: &Benchmark) -> u64 {
    DEFAULT_MAX_SAMPLE_BYTES.max(benchmark.largest_sample_bytes())
}

/// Bytes of samples one node may hold at once by default: room for two of
/// the benchmark's largest samples, so a node works on one while the next
/// arrives, and at least [`DEFAULT_WINDOW_BYTES`]. A sample larger than
/// the window still goes, alone, to a node that holds nothing.
pub fn default_window_bytes(benchmark: &Benchmark) -> u64 {
    DEFAULT_WINDOW_BYTES.max(2 * benchmark.largest_sample_bytes())
}

/// HTTP/2 flow-control window of one gRPC stream, bytes. A 150 KB sample
/// would stall on HTTP/2's 64 KB default, a window update per sample.
pub const HTTP2_STREAM_WINDOW: u32 = 8 << 20;
/// HTTP/2 flow-control window of a gRPC connection, bytes.
pub const HTTP2_CONNECTION_WINDOW: u32 = 32 << 20;
/// Largest HTTP/2 frame either end accepts, bytes. Each DATA frame costs
/// the receiver a decode, a buffer and a wake-up: at HTTP/2's 16 KiB
/// default, a 150 KB sample is ten of them.
pub const HTTP2_MAX_FRAME_SIZE: u32 = 256 << 10;
/// How often the QDL pings an idle gRPC connection, so a node that
/// vanished without closing its socket (power, cable) is noticed.
pub const HTTP2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// How long the QDL waits for a ping's answer before the node is lost.
pub const HTTP2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// QUIC flow-control window of one stream, bytes: as much as the
/// connection's, so one large sample may use all of it.
pub const QUIC_STREAM_WINDOW: u32 = QUIC_CONNECTION_WINDOW;
/// QUIC flow-control window of a connection, bytes: the most that is in
/// flight to one node. Cubic grows its congestion window until a loss, and
/// a veth or LAN loses nothing, so this window is what bounds the queue of
/// received datagrams waiting for the node; at 128 MiB the node copied and
/// decrypted them cold from memory, and at MTU 1500 it moved 10 % fewer
/// bytes per CPU-second than at 8 MiB (docs/benchmarks.md). 8 MiB still
/// fills 100 Gbit/s at a 500 µs round trip.
pub const QUIC_CONNECTION_WINDOW: u32 = 8 << 20;
/// Congestion window a QUIC connection starts with, bytes. quinn's default
/// (about 14 KB, for the open Internet) makes a fresh connection ramp up
/// over many round trips, and its pacing spreads a burst of small queries
/// over time; a benchmark fabric is a data-centre LAN, where a start like
/// TCP's on loopback costs nothing. Loss still shrinks it (Cubic).
pub const QUIC_INITIAL_CONGESTION_WINDOW: u64 = 1 << 20;
/// Largest UDP payload MTU discovery may try (and each end accepts).
/// Discovery probes, so smaller paths are safe. Not a whole 9000-byte
/// jumbo frame: quinn hands the kernel up to [`QUIC_GSO_DATAGRAMS`]
/// datagrams in one segmentation-offload send, and the kernel refuses a
/// send over 64 KiB (IPv4: 65,507 bytes of UDP payload), which QUIC would
/// see as loss and answer by falling back to its 1,200-byte minimum.
pub const QUIC_MTU_UPPER_BOUND: u16 = 6500;
/// Datagrams quinn puts in one send at most (its `MAX_TRANSMIT_SEGMENTS`).
pub const QUIC_GSO_DATAGRAMS: usize = 10;
/// How often the QDL's QUIC connection sends a keep-alive.
pub const QUIC_KEEP_ALIVE_INTERVAL: Duration = Duration::from_millis(500);
/// A QUIC connection silent this long is lost (QDL side).
pub const QUIC_IDLE_TIMEOUT: Duration = Duration::from_secs(3);
/// Streams a node lets one QDL keep open at once: the query streams, plus
/// Name and Info requests, plus room for clients that open a stream per
/// query (the protocol allows one query per stream).
pub const QUIC_MAX_CONCURRENT_STREAMS: u32 = 1 << 16;

/// Long-lived query streams the QDL keeps open to each node over QUIC; a
/// query's pieces go round-robin over them. More than one, so a lost
/// packet delays only the queries of its stream.
pub const QUIC_QUERY_STREAMS: usize = 4;

/// Token models: how often at most a query stream holding unanswered
/// samples tells the QDL that the node's token count grew
/// (`CompletionBatch.tokens_generated`). The QDL's node timeout must be a
/// few of these long ([`MIN_TOKEN_NODE_TIMEOUT`]).
pub const TOKEN_PROGRESS_INTERVAL: Duration = Duration::from_millis(500);
/// The shortest node timeout the QDL takes for a token model: four
/// progress intervals, so a late message or two does not fail a node.
pub const MIN_TOKEN_NODE_TIMEOUT: Duration = Duration::from_secs(2);

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

/// Transport settings of the QDL's QUIC connection to a node at `peer`:
/// keep-alives and a short idle timeout, so a node that is gone without a
/// word (killed, unplugged) is noticed in seconds, and MTU discovery
/// bounded by the route toward `peer` ([`quic_mtu_upper_bound_toward`]).
pub fn quic_client_config(peer: SocketAddr) -> Arc<quinn::TransportConfig> {
    Arc::new(quic_transport(true, quic_mtu_upper_bound_toward(peer)))
}

/// The node's QUIC transport toward a client at `peer`: at most
/// `max_streams` concurrent streams per connection, an idle timeout after
/// which a client that vanished without closing is let go, and MTU
/// discovery bounded by the route toward `peer` (by
/// [`QUIC_MTU_UPPER_BOUND`] alone when no peer is named: an endpoint's
/// default).
pub fn quic_server_config(
    max_streams: u32,
    peer: Option<SocketAddr>,
) -> Arc<quinn::TransportConfig> {
    let bound = peer.map_or(QUIC_MTU_UPPER_BOUND, quic_mtu_upper_bound_toward);
    let mut t = quic_transport(false, bound);
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(max_streams))
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(QUIC_SERVER_IDLE_TIMEOUT).expect("seconds fit"),
        ));
    Arc::new(t)
}

/// The largest datagram MTU discovery tries toward `peer`:
/// [`QUIC_MTU_UPPER_BOUND`], or less when the kernel's route toward `peer`
/// leaves its interface with a smaller MTU. quinn's search starts halfway
/// to its upper bound and needs three lost probes to step down; over a
/// standard 1500-byte link, from 6500 it never got past four steps in a
/// whole run and carried every byte in 1200-byte datagrams, a fifth more
/// packets (each a seal, an open and a header) than the 1472 it reaches
/// when bounded by the link.
pub fn quic_mtu_upper_bound_toward(peer: SocketAddr) -> u16 {
    // IP and UDP headers: 20 + 8 bytes over IPv4, 40 + 8 over IPv6.
    let headers = if peer.is_ipv4() { 28 } else { 48 };
    route_mtu(peer)
        .map(|mtu| mtu.saturating_sub(headers))
        .map_or(QUIC_MTU_UPPER_BOUND, |payload| {
            payload.clamp(QUIC_MIN_UDP_PAYLOAD, QUIC_MTU_UPPER_BOUND)
        })
}

/// The smallest datagram QUIC allows a path to carry (RFC 9000 §14).
const QUIC_MIN_UDP_PAYLOAD: u16 = 1200;

/// The MTU of the route the kernel would take toward `peer`: a UDP socket
/// connected there (nothing is sent) reads it with `IP_MTU` / `IPV6_MTU`.
/// `None` where the kernel does not say.
#[cfg(target_os = "linux")]
fn route_mtu(peer: SocketAddr) -> Option<u16> {
    use std::os::fd::AsRawFd;
    let local: SocketAddr = if peer.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(local).ok()?;
    socket.connect(peer).ok()?;
    let (level, name) = if peer.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid socket, and `mtu`/`len` describe a c_int the call
    // writes at most `len` bytes into.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && mtu > 0).then(|| mtu.min(i32::from(u16::MAX)) as u16)
}

#[cfg(not(target_os = "linux"))]
fn route_mtu(_peer: SocketAddr) -> Option<u16> {
    None
}

/// Receive and send buffer asked for on every QUIC socket. With the
/// kernel's default (208 KiB on the machines measured), a node's socket
/// dropped datagrams under a small-query Server load on loopback (UDP
/// `RcvbufErrors`, hundreds per 5 s run), and each drop cost QUIC a loss
/// recovery and a cut of its congestion window. The kernel caps the
/// request at `net.core.rmem_max` / `wmem_max` (docs/deploy.md).
pub const QUIC_SOCKET_BUFFER_BYTES: usize = 8 << 20;

/// A QUIC endpoint on a UDP socket bound to `addr` with
/// [`QUIC_SOCKET_BUFFER_BYTES`] buffers (or as large as the kernel
/// allows): a server when `server` is given, else a client.
pub fn quic_endpoint(
    addr: std::net::SocketAddr,
    server: Option<quinn::ServerConfig>,
) -> std::io::Result<quinn::Endpoint> {
    let runtime = quinn::default_runtime()
        .ok_or_else(|| std::io::Error::other("QUIC needs a tokio runtime"))?;
    let mut config = quinn::EndpointConfig::default();
    // The largest datagram this end accepts, announced to the peer. MTU
    // discovery never goes above it: at quinn's default (1472) a jumbo
    // frame fabric carried six times the packets it needs, and each
    // packet is a seal, an open and a header to build and parse. quinn
    // sizes the endpoint's receive buffer from it (x 64 GRO segments x 32
    // datagrams: 13 MB, zeroed lazily, so resident only as traffic fills
    // it).
    config
        .max_udp_payload_size(QUIC_MTU_UPPER_BOUND)
        .map_err(std::io::Error::other)?;
    quinn::Endpoint::new(config, server, quic_socket(addr)?, runtime)
}

/// A UDP socket bound to `addr` with [`QUIC_SOCKET_BUFFER_BYTES`] buffers.
fn quic_socket(addr: std::net::SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(addr)?;
    let state = quinn::udp::UdpSocketState::new((&socket).into())?;
    // A request above the kernel's maximum is capped, not refused.
    state.set_recv_buffer_size((&socket).into(), QUIC_SOCKET_BUFFER_BYTES)?;
    state.set_send_buffer_size((&socket).into(), QUIC_SOCKET_BUFFER_BYTES)?;
    Ok(socket)
}

/// How long a node keeps a QUIC connection that shows no life (the QDL's
/// keep-alives come every [`QUIC_KEEP_ALIVE_INTERVAL`]).
pub const QUIC_SERVER_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

fn quic_transport(client: bool, mtu_upper_bound: u16) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(QUIC_STREAM_WINDOW.into())
        .receive_window(QUIC_CONNECTION_WINDOW.into())
        .send_window(QUIC_CONNECTION_WINDOW.into())
        // Streams in the order they were written: with fair sharing, a
        // node's first piece would arrive only after every queued piece had
        // been interleaved with it, leaving the node idle meanwhile.
        .send_fairness(false);
    let mut congestion = quinn::congestion::CubicConfig::default();
    congestion.initial_window(QUIC_INITIAL_CONGESTION_WINDOW);
    t.congestion_controller_factory(Arc::new(congestion));
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.upper_bound(mtu_upper_bound);
    t.mtu_discovery_config(Some(mtu));
    if client {
        t.keep_alive_interval(Some(QUIC_KEEP_ALIVE_INTERVAL));
        t.max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(QUIC_IDLE_TIMEOUT).expect("a few seconds fit"),
        ));
    } else {
        t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(QUIC_MAX_CONCURRENT_STREAMS));
    }
    t
}

// Relations the values above must keep, checked when the crate compiles.
const _: () = assert!(HTTP2_STREAM_WINDOW <= HTTP2_CONNECTION_WINDOW);
const _: () = assert!(QUIC_STREAM_WINDOW <= QUIC_CONNECTION_WINDOW);
const _: () = assert!(DEFAULT_MAX_SAMPLE_BYTES <= MAX_MESSAGE_BYTES as u64);
// One segmentation-offload send of full datagrams stays within what the
// kernel accepts in one IPv4 UDP send.
const _: () = assert!(QUIC_MTU_UPPER_BOUND as usize * QUIC_GSO_DATAGRAMS <= 65_507);
// A closing QUIC server's grace and wait end before the node gives up on it.
const _: () = assert!(
    QUIC_DELIVERY_GRACE.as_secs() + QUIC_CLOSE_WAIT.as_secs() < NODE_SERVER_CLOSE_TIMEOUT.as_secs()
);

/// The longest a stopping node takes: the drain, then each server's close.
pub const NODE_STOP_WORST_CASE: Duration =
    Duration::from_secs(NODE_DRAIN_TIMEOUT.as_secs() + 2 * NODE_SERVER_CLOSE_TIMEOUT.as_secs());

#[cfg(test)]
mod tests {
    use super::*;

    /// A real 3D-UNet volume fits in a message, a node's default limit
    /// and a window; small benchmarks keep the fixed limits.
    #[test]
    fn limits_follow_the_benchmark() {
        let unet = Benchmark::parse("3d-unet-99").unwrap();
        let largest = unet.largest_sample_bytes();
        assert!(largest > DEFAULT_MAX_SAMPLE_BYTES);
        assert!(message_limit(&unet) as u64 >= largest + MESSAGE_OVERHEAD_BYTES);
        assert_eq!(default_max_sample_bytes(&unet), largest);
        assert_eq!(default_window_bytes(&unet), 2 * largest);
        let resnet = Benchmark::parse("resnet50").unwrap();
        assert_eq!(message_limit(&resnet), MAX_MESSAGE_BYTES);
        assert_eq!(default_max_sample_bytes(&resnet), DEFAULT_MAX_SAMPLE_BYTES);
        assert_eq!(default_window_bytes(&resnet), DEFAULT_WINDOW_BYTES);
    }

    /// A QUIC socket's receive buffer is as large as asked, or as the
    /// kernel allows (which then grants twice its maximum).
    #[test]
    fn quic_sockets_get_large_buffers() {
        let socket = quic_socket("127.0.0.1:0".parse().unwrap()).expect("bind");
        let state = quinn::udp::UdpSocketState::new((&socket).into()).unwrap();
        let granted = state.recv_buffer_size((&socket).into()).unwrap();
        let max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .expect("rmem_max")
            .trim()
            .parse()
            .expect("a number");
        assert!(
            granted >= QUIC_SOCKET_BUFFER_BYTES.min(2 * max),
            "granted {granted} bytes, rmem_max {max}"
        );
    }

    /// MTU discovery is bounded by the route: loopback's 64 KiB MTU leaves
    /// the fixed bound, and an address no route leads to stays within the
    /// bounds. (A 1500-byte link gives 1472:
    /// `wire.rs::bytes_per_cpu_smoke_fills_its_table`.)
    #[test]
    fn the_mtu_bound_follows_the_route() {
        let loopback: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert!(route_mtu(loopback).is_some_and(|mtu| mtu > QUIC_MTU_UPPER_BOUND + 28));
        assert_eq!(quic_mtu_upper_bound_toward(loopback), QUIC_MTU_UPPER_BOUND);
        // TEST-NET-1 with no route on a test machine, or the default
        // route's interface: either way within the bounds.
        let far: SocketAddr = "192.0.2.1:9".parse().unwrap();
        let bound = quic_mtu_upper_bound_toward(far);
        assert!((QUIC_MIN_UDP_PAYLOAD..=QUIC_MTU_UPPER_BOUND).contains(&bound));
    }

    /// The systemd unit must give a stopping node its whole drain and
    /// close before SIGKILL, or samples held at SIGTERM are lost.
    #[test]
    fn the_systemd_unit_waits_for_a_whole_stop() {
        let unit = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/systemd/sut-node@.service"
        );
        let text = std::fs::read_to_string(unit).expect("the unit file");
        let stop = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("TimeoutStopSec="))
            .expect("TimeoutStopSec is set");
        let seconds: u64 = stop
            .trim_end_matches('s')
            .parse()
            .expect("TimeoutStopSec in seconds");
        assert!(
            Duration::from_secs(seconds) > NODE_STOP_WORST_CASE,
            "TimeoutStopSec={stop} does not cover {NODE_STOP_WORST_CASE:?}"
        );
    }
}
