//! # qdl
//!
//! The Query Dispatch Library on the LoadGen node: it presents several
//! sut-node daemons to a LoadGen as one SUT. This crate grows in steps; it
//! holds so far the parts that decide, free of I/O and tested without
//! sockets:
//!
//! * [`node_url`]: the `grpc://host:port` / `quic://host:port` node
//!   addresses users give;
//! * [`name`]: the aggregated `Name()` the rules require (every node's
//!   unique name, "Network SUT");
//! * [`dispatch`]: which node gets the next query (round robin, or the less
//!   loaded of two random choices) and how a large Offline query is split
//!   across nodes without merging queries.
//!
//! Transports, the node pool and completion bookkeeping come next (see the
//! QDL issue); it will know nothing of which LoadGen drives it.

pub mod dispatch;
pub mod name;
pub mod node_url;
