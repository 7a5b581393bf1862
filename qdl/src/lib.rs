//! # qdl
//!
//! The Query Dispatch Library on the LoadGen node: it presents several
//! sut-node daemons to a LoadGen as one SUT, [`NetworkSut`]. Its modules
//! are private; what a LoadGen node uses is re-exported here. It does only
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
//! * [`loaded`]: what the QDL reads of the QSL, the samples loaded at
//!   LoadSamplesToRam as they travel (the QSL itself is the LoadGen
//!   node's);
//! * [`tls`]: client TLS and mTLS for both transports;
//! * [`link`]: the gRPC and QUIC connections, the in-process link to a
//!   node in this process, and their typed errors.
//!
//! Benchmarks, codecs and wire limits come from `netdiv-proto`, shared with
//! the sut-node.

// Library crates never print: diagnostics are `tracing` events, and the
// binaries decide where they go (netdiv_proto::logging).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod dispatch;
mod link;
mod loaded;
mod name;
mod network;
mod node_url;
mod pool;
mod sink;
mod tls;

pub use dispatch::DispatchPolicy;
pub use link::{Call, InProcessNode, LinkError, NodeAnswers, QueryPath};
pub use loaded::{LoadedView, QslBytes, StoredSample};
pub use name::NameError;
pub use network::traffic::{LatencySummary, NodeTrafficReport};
pub use network::{
    defaults, describe_nodes, Backoff, NetworkObserver, NetworkSut, NodeCounts, NodeState,
    NodeStateChange, QdlConfig, QdlError, QdlSettings, QdlStats,
};
pub use node_url::{DnsExpansionError, InvalidNodeUrl, NodeUrl, Transport};
pub use sink::{CompletionSink, Response};
pub use tls::{ClientTls, TlsError};
