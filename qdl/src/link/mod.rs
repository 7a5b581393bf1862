//! One connection to one sut-node, over gRPC or QUIC. A link sends queries
//! without waiting and reports what comes back through [`LinkEvents`]; what
//! those events mean for exactly-once completion is the pool's business.

mod grpc;
mod quic;

use std::sync::Arc;
use std::time::Duration;

use netdiv_proto::pb;

use crate::node_url::{NodeUrl, Transport};
use crate::tls::ClientTls;

/// What a link reports from its I/O tasks.
pub(crate) trait LinkEvents: Send + Sync + 'static {
    /// Completions (outputs or per-sample errors) arrived from `node`.
    fn completions(&self, node: usize, completions: Vec<pb::Completion>);
    /// The connection to `node` is unusable.
    fn failed(&self, node: usize, reason: String);
    /// `node` refused a whole query as malformed: retrying cannot help.
    fn refused(&self, node: usize, ids: Vec<u64>, reason: String);
}

/// How long to wait for a node to connect or answer Name/Info.
pub(crate) const RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest message a node may send back.
pub(crate) const MAX_MESSAGE: usize = 256 << 20;

/// A connected node.
pub(crate) enum Link {
    Grpc(grpc::GrpcLink),
    Quic(quic::QuicLink),
}

impl Link {
    /// Connects; the error text says what failed (the caller names the
    /// node).
    pub async fn connect(url: &NodeUrl, tls: Option<&ClientTls>) -> Result<Link, String> {
        // Resolve first, so an unknown host name says so instead of
        // ending as a connect timeout.
        let resolving = tokio::net::lookup_host((url.host.as_str(), url.port));
        let addr = tokio::time::timeout(RPC_TIMEOUT, resolving)
            .await
            .map_err(|_| format!("cannot resolve {} within {RPC_TIMEOUT:?}", url.host))?
            .map_err(|e| format!("cannot resolve {}: {e}", url.host))?
            .next()
            .ok_or_else(|| format!("cannot resolve {}: it has no address", url.host))?;
        let connecting = async {
            match url.transport {
                Transport::Grpc => grpc::GrpcLink::connect(url, tls).await.map(Link::Grpc),
                Transport::Quic => {
                    let tls = tls.ok_or(
                        "QUIC always runs over TLS: give the CA of the nodes' certificates \
                         (--tls-ca, or --dev-tls DIR)",
                    )?;
                    quic::QuicLink::connect(url, addr, tls)
                        .await
                        .map(Link::Quic)
                }
            }
        };
        tokio::time::timeout(RPC_TIMEOUT, connecting)
            .await
            .map_err(|_| format!("no connection within {RPC_TIMEOUT:?}"))?
    }

    /// The node's Name, by a live round trip.
    pub async fn name(&self) -> Result<String, String> {
        let asking = async {
            match self {
                Link::Grpc(l) => l.name().await,
                Link::Quic(l) => l.name().await,
            }
        };
        tokio::time::timeout(RPC_TIMEOUT, asking)
            .await
            .map_err(|_| format!("no Name answer within {RPC_TIMEOUT:?}"))?
    }

    /// The node's Info.
    pub async fn info(&self) -> Result<pb::NodeInfo, String> {
        let asking = async {
            match self {
                Link::Grpc(l) => l.info().await,
                Link::Quic(l) => l.info().await,
            }
        };
        tokio::time::timeout(RPC_TIMEOUT, asking)
            .await
            .map_err(|_| format!("no Info answer within {RPC_TIMEOUT:?}"))?
    }

    /// Opens the query path; from now on events for `node` go to `events`.
    pub async fn start(&self, node: usize, events: Arc<dyn LinkEvents>) -> Result<(), String> {
        match self {
            Link::Grpc(l) => l.start(node, events).await,
            Link::Quic(l) => {
                l.start(node, events);
                Ok(())
            }
        }
    }

    /// Ends the query path cleanly (at the end of a run).
    pub async fn close(&self) {
        match self {
            Link::Grpc(l) => l.close().await,
            Link::Quic(l) => l.close(),
        }
    }

    /// Sends a query without waiting. Failures surface as events.
    pub fn send(&self, query: pb::Query) {
        match self {
            Link::Grpc(l) => l.send(query),
            Link::Quic(l) => l.send(query),
        }
    }
}
