//! One connection to one sut-node, over gRPC or QUIC, or to a node in this
//! process ([`local`]). A link sends queries without waiting and reports
//! what comes back through [`LinkEvents`]; what those events mean for
//! exactly-once completion is the pool's business.

mod error;
mod grpc;
mod local;
mod query_body;
mod quic;

use std::future::Future;
use std::sync::Arc;

use netdiv_proto::pb;
use netdiv_proto::transport::RPC_TIMEOUT;

pub use error::{Call, LinkError};
pub use local::{InProcessNode, NodeAnswers, QueryPath};

use crate::node_url::{NodeUrl, Transport};
use crate::tls::ClientTls;

/// What a link reports from its I/O tasks.
pub(crate) trait LinkEvents: Send + Sync + 'static {
    /// Completions (outputs or per-sample errors) arrived from `node`.
    fn completions(&self, node: usize, completions: Vec<pb::Completion>);
    /// `node` says it has generated `tokens_generated` tokens since it
    /// started (token models): a sign of life between completions.
    fn token_progress(&self, node: usize, tokens_generated: u64);
    /// The connection to `node` is unusable.
    fn failed(&self, node: usize, error: LinkError);
    /// `node` refused a whole query as malformed: retrying cannot help.
    fn refused(&self, node: usize, ids: Vec<u64>, error: LinkError);
}

/// A connected node.
pub(crate) enum Link {
    Grpc(grpc::GrpcLink),
    Quic(quic::QuicLink),
    Local(local::LocalLink),
}

/// How to reach one node, the first time and again after it failed.
#[derive(Clone)]
pub(crate) enum Target {
    /// A sut-node across the network.
    Network {
        url: NodeUrl,
        tls: Option<ClientTls>,
        max_message: usize,
    },
    /// A node in this process.
    InProcess(Arc<dyn InProcessNode>),
}

impl Target {
    /// Connects (a network node) or attaches (a node in this process).
    pub(crate) async fn connect(&self) -> Result<Link, LinkError> {
        match self {
            Target::Network {
                url,
                tls,
                max_message,
            } => Link::connect(url, tls.as_ref(), *max_message).await,
            Target::InProcess(node) => Ok(Link::Local(local::LocalLink::new(node.clone()))),
        }
    }
}

/// `future`, or a timeout error naming `call`.
async fn within<T>(
    call: Call,
    future: impl Future<Output = Result<T, LinkError>>,
) -> Result<T, LinkError> {
    tokio::time::timeout(RPC_TIMEOUT, future)
        .await
        .map_err(|_| LinkError::Timeout {
            call,
            after: RPC_TIMEOUT,
        })?
}

impl Link {
    /// Connects to the node at `url`; messages up to `max_message` bytes.
    pub(crate) async fn connect(
        url: &NodeUrl,
        tls: Option<&ClientTls>,
        max_message: usize,
    ) -> Result<Link, LinkError> {
        // Resolve first, so an unknown host name says so instead of
        // ending as a connect timeout.
        let addr = within(Call::Resolve, async {
            tokio::net::lookup_host((url.host.as_str(), url.port))
                .await
                .map_err(|source| LinkError::Resolve {
                    host: url.host.clone(),
                    source,
                })?
                .next()
                .ok_or_else(|| LinkError::NoAddress {
                    host: url.host.clone(),
                })
        })
        .await?;
        within(Call::Connect, async {
            match url.transport {
                Transport::Grpc => grpc::GrpcLink::connect(url, tls, max_message)
                    .await
                    .map(Link::Grpc),
                Transport::Quic => {
                    let tls = tls.ok_or(LinkError::TlsRequired)?;
                    quic::QuicLink::connect(url, addr, tls, max_message)
                        .await
                        .map(Link::Quic)
                }
            }
        })
        .await
    }

    /// The node's Name, by a live round trip.
    pub(crate) async fn name(&self) -> Result<String, LinkError> {
        within(Call::Name, async {
            match self {
                Link::Grpc(l) => l.name().await,
                Link::Quic(l) => l.name().await,
                Link::Local(l) => Ok(l.name()),
            }
        })
        .await
    }

    /// The node's Info.
    pub(crate) async fn info(&self) -> Result<pb::NodeInfo, LinkError> {
        within(Call::Info, async {
            match self {
                Link::Grpc(l) => l.info().await,
                Link::Quic(l) => l.info().await,
                Link::Local(l) => Ok(l.info()),
            }
        })
        .await
    }

    /// Opens the query path; from now on events for `node` go to `events`.
    pub(crate) async fn start(
        &self,
        node: usize,
        events: Arc<dyn LinkEvents>,
    ) -> Result<(), LinkError> {
        match self {
            Link::Grpc(l) => l.start(node, events).await,
            Link::Quic(l) => l.start(node, events).await,
            Link::Local(l) => {
                l.start(node, events);
                Ok(())
            }
        }
    }

    /// Ends the query path cleanly (at the end of a run).
    pub(crate) async fn close(&self) {
        match self {
            Link::Grpc(l) => l.close().await,
            Link::Quic(l) => l.close().await,
            Link::Local(l) => l.close().await,
        }
    }

    /// Asks the node to drop samples it was sent on this connection (their
    /// node is failed, or the run ends): it aborts them at its engine and
    /// answers each with a `cancelled` completion, which the pool drops
    /// as late. Without waiting; a closed connection has cancelled them
    /// already.
    pub(crate) fn cancel(&self, ids: &[u64]) {
        if ids.is_empty() {
            return;
        }
        match self {
            Link::Grpc(l) => l.cancel(ids),
            Link::Quic(l) => l.cancel(ids),
            Link::Local(l) => l.cancel(ids),
        }
    }

    /// Sends a query without waiting. Failures surface as events.
    pub(crate) fn send(&self, query: pb::Query) {
        match self {
            Link::Grpc(l) => l.send(query),
            Link::Quic(l) => l.send(query),
            Link::Local(l) => l.send(query),
        }
    }
}
