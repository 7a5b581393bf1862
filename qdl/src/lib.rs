//! # qdl
//!
//! The Query Dispatch Library on the LoadGen node: it presents several
//! sut-node daemons to a LoadGen as one SUT, [`NetworkSut`]. It does only
//! what the Network-division rules allow a QDL to do: forward queries
//! (split when large, never merged), send the QSL's bytes unchanged,
//! decode the lossless compression of responses the rules' table allows, and complete every
//! sample exactly once. Batching and all pre- and post-processing happen on
//! the nodes. It knows nothing of which LoadGen drives it: completions go
//! to a [`CompletionSink`].
//!
//! * [`network`]: the Network SUT (connect, Name, issue, stats);
//! * [`pool`]: exactly-once bookkeeping, windows and failover, without I/O;
//! * [`dispatch`]: which node gets the next piece (round robin, or the less
//!   loaded of two random choices) and how a query is cut into pieces;
//! * [`name`]: the aggregated `Name()` the rules require;
//! * [`node_url`]: `grpc://host:port` / `quic://host:port` addresses;
//! * [`samples`]: the QSL's sample store (synthetic or `.npy` data, loaded
//!   and compressed at LoadSamplesToRam);
//! * [`tls`]: client TLS and mTLS for both transports;
//! * [`link`]: the gRPC and QUIC connections, the in-process link to a
//!   node in this process, and their typed errors.
//!
//! Benchmarks, codecs and wire limits come from `netdiv-proto`, shared with
//! the sut-node.

// Library crates never print: diagnostics are `tracing` events, and the
// binaries decide where they go (netdiv_proto::logging).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod dispatch;
pub mod link;
pub mod name;
pub mod network;
pub mod node_url;
pub mod pool;
pub mod samples;
pub mod sink;
pub mod tls;

pub use link::{Call, InProcessNode, LinkError, NodeAnswers, QueryPath};
pub use network::{
    defaults, describe_nodes, Backoff, NetworkSut, NodeState, NodeStateChange, QdlConfig, QdlError,
    QdlStats,
};
pub use sink::{CompletionSink, Response};
