//! # sut-node
//!
//! The daemon that runs on each SUT chassis of a Network-division system:
//! it accepts queries from the LoadGen node's QDL over gRPC and QUIC,
//! decodes inputs (timed, SUT side), batches samples for its backend, and
//! sends exactly one completion per sample back.
//!
//! It owns transports' servers ([`server`]), the node core ([`node`]),
//! where answers go and how clients cancel ([`reply`]),
//! batching ([`batcher`]), backends ([`backend`]), TLS ([`tls`]), what
//! it reads of its machine ([`host`]: NICs, hardware, a hypervisor, a CPU
//! wake-up latency request), readiness for systemd
//! ([`notify`]) and for scripts ([`ready`]), and Prometheus metrics
//! ([`metrics`]). It knows nothing of LoadGen
//! internals: samples arrive as response ids and bytes.

// Library crates never print: diagnostics are `tracing` events, and the
// binaries decide where they go (netdiv_proto::logging).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod backend;
pub mod batcher;
pub mod config;
pub mod host;
pub mod limits;
pub mod metrics;
pub mod node;
pub mod notify;
pub mod ready;
mod reply;
pub mod server;
pub mod tls;
