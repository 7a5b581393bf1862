//! # netdiv-proto
//!
//! The session-layer API between the LoadGen node and the sut-nodes: the
//! protobuf messages and gRPC service of `netdiv.v1` (compiled with protox,
//! no system protoc), the QUIC framing that carries the same messages, the
//! lossless codecs, the one benchmark table (samples, data-set sizes and
//! the codecs the rules allow per direction), and the wire limits,
//! transport settings and shutdown timeouts both ends share.
//!
//! It owns the wire and its validation; it knows nothing of LoadGens or
//! backends. Wire types stay under [`pb`]; the rest of netdiv converts them
//! at the edge with the checks in [`sample`].
//!
//! * [`benchmark`]: every benchmark by any of its names, and its codecs;
//! * [`codec`]: encoding and size-limited decoding;
//! * [`dtype`]: tensor element types, as numpy names them;
//! * [`framing`]: QUIC's length-prefixed frames;
//! * `logging` (feature `logging`): the diagnostics setup and flags every
//!   netdiv binary shares, apart so that speaking the protocol does not
//!   pull clap and tracing-subscriber;
//! * [`sample`]: samples and completions checked at the edge;
//! * [`segments`]: a message as buffers, its large fields not copied;
//! * [`tls_stream`]: gRPC's TLS, rustls's handshake and netdiv's records;
//! * [`transport`]: limits, windows, keep-alives and timeouts.

// Library crates never print: diagnostics are `tracing` events, and the
// binaries decide where they go (netdiv_proto::logging).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod bandwidth;
pub mod benchmark;
pub mod codec;
pub mod dtype;
pub mod framing;
#[cfg(feature = "logging")]
pub mod logging;
pub mod sample;
pub mod segments;
pub mod tls_stream;
pub mod transport;

/// Generated protobuf types and the gRPC client and server of `netdiv.v1`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("netdiv.v1");
}

pub use benchmark::{Benchmark, Direction};

/// The protocol version of this package. Version 2 added first-token
/// messages and `n_tokens` (token latencies); version 3 token progress
/// (`CompletionBatch.tokens_generated`), cancels (`Query.cancel`,
/// `Completion.cancelled`) and `NodeInfo.concurrent_sequences`. A peer of
/// another version would miss them silently (a version-2 node sends no
/// progress, so its long answers would look stuck), so the versions refuse
/// each other by name instead.
pub const PROTOCOL_VERSION: u32 = 3;

/// The QUIC application protocol (ALPN) of this version.
pub const ALPN: &[u8] = b"netdiv/1";

/// gRPC metadata key carrying the client's protocol version.
pub const VERSION_HEADER: &str = "netdiv-protocol-version";
