//! # netdiv-proto
//!
//! The session-layer API between the LoadGen node and the sut-nodes: the
//! protobuf messages and gRPC service of `netdiv.v1` (compiled with protox,
//! no system protoc), the QUIC framing that carries the same messages, and
//! the lossless codecs the rules approve per benchmark, and the QUIC
//! transport parameters both ends share.
//!
//! It owns the wire and its validation; it knows nothing of LoadGens or
//! backends. Wire types stay under [`pb`]; the rest of netdiv converts them
//! at the edge with the checks in [`sample`].

pub mod codec;
pub mod dtype;
pub mod framing;
pub mod quic;
pub mod sample;

/// Generated protobuf types and the gRPC client and server of `netdiv.v1`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("netdiv.v1");
}

/// The protocol version of this package.
pub const PROTOCOL_VERSION: u32 = 1;

/// The QUIC application protocol (ALPN) of this version.
pub const ALPN: &[u8] = b"netdiv/1";

/// gRPC metadata key carrying the client's protocol version.
pub const VERSION_HEADER: &str = "netdiv-protocol-version";
