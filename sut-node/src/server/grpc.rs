//! gRPC: the `netdiv.v1.SutNode` service. Handlers are thin: check the
//! version, hand the query to the node, stream completions back.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use netdiv_proto::pb::sut_node_server::SutNodeServer;
use netdiv_proto::transport::{
    message_limit, HTTP2_CONNECTION_WINDOW, HTTP2_MAX_FRAME_SIZE, HTTP2_STREAM_WINDOW,
};
use netdiv_proto::{pb, VERSION_HEADER};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tonic_health::pb::health_server::{Health, HealthServer};

use tower::{BoxError, ServiceBuilder};

use super::connections::{self, ConnectionLimit};
use super::infer_route::{CompletionStream, InferHandler, InferRoute, QueryFrames, QuerySource};
use super::policy::{PolicyRequest, PolicyResponse, Refused, RequestPolicy};
use super::{version_mismatch, Answers, Unread};

/// How often the node pings an idle client connection.
const SERVER_KEEP_ALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);
/// How long it waits for the answer before it closes the connection.
const SERVER_KEEP_ALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
use crate::node::{Node, ReplyTo};
use crate::tls::TlsFiles;

/// The service; `closing` flips when the node has drained for shutdown.
#[derive(Debug)]
pub struct GrpcService {
    /// The node queries go to.
    pub node: Arc<Node>,
    /// Flips to `true` when the node closes its servers.
    pub closing: watch::Receiver<bool>,
}

/// Binds `listen` on TCP and serves the node's gRPC service and `health`
/// there (over TLS when `tls` is given) until `closing` flips. Returns the
/// bound address and the server's task.
pub async fn start(
    listen: SocketAddr,
    tls: Option<&TlsFiles>,
    node: Arc<Node>,
    closing: watch::Receiver<bool>,
    health: HealthServer<impl Health>,
) -> Result<(SocketAddr, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on tcp {listen}"))?;
    let addr = listener.local_addr()?;
    let limits = node.settings().limits;
    let builder = tonic::transport::Server::builder()
        .initial_stream_window_size(Some(HTTP2_STREAM_WINDOW))
        .initial_connection_window_size(Some(HTTP2_CONNECTION_WINDOW))
        .max_frame_size(Some(HTTP2_MAX_FRAME_SIZE))
        // Streams a client may open on one connection: HTTP/2 refuses more.
        .max_concurrent_streams(Some(limits.max_streams_per_connection))
        // A client that vanished without closing is noticed, and its
        // connection's slot comes back.
        .http2_keepalive_interval(Some(SERVER_KEEP_ALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(SERVER_KEEP_ALIVE_TIMEOUT));
    // TLS is netdiv's record layer over rustls's handshake, not tonic's.
    let tls = tls
        .map(|tls| tls.rustls_server(b"h2").context("gRPC TLS configuration"))
        .transpose()?
        .map(netdiv_proto::tls_stream::server_config);
    let name = node.settings().name.clone();
    let node_metrics = node.metrics().clone();
    let limit = ConnectionLimit::new(limits.max_connections, "grpc", &name);
    let max_message = message_limit(&node.settings().benchmark);
    let service = Arc::new(GrpcService {
        node,
        closing: closing.clone(),
    });
    let generated = SutNodeServer::from_arc(service.clone())
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message);
    let service = InferRoute::new(generated, service, max_message);
    // Every call, health checks included, passes the node's request
    // policy; its refusals reach the client as gRPC statuses.
    let policy = RequestPolicy::from_limits(&limits).layers("grpc", node_metrics);
    let router = builder
        .layer(ServiceBuilder::new().map_err(grpc_status).layer(policy))
        .add_service(health)
        .add_service(service);
    let mut stop = closing;
    let task = tokio::spawn(async move {
        let incoming = connections::incoming(listener, limit);
        let stopped = async move {
            let _ = stop.wait_for(|c| *c).await;
        };
        let result = match tls {
            None => router.serve_with_incoming_shutdown(incoming, stopped).await,
            Some(config) => {
                let incoming = connections::with_tls(incoming, config, name.clone());
                router.serve_with_incoming_shutdown(incoming, stopped).await
            }
        };
        if let Err(e) = result {
            tracing::error!(node = %name, "gRPC server failed: {e}");
        }
    });
    Ok((addr, task))
}

/// The policy's refusals as the gRPC statuses a client acts on:
/// "unavailable" (try again, elsewhere) when shed, "deadline exceeded"
/// when the answer did not start in time.
fn grpc_status(e: BoxError) -> BoxError {
    match e.downcast::<Refused>() {
        Ok(refused) => Box::new(match *refused {
            Refused::Overloaded(_) => Status::unavailable(refused.to_string()),
            Refused::TimedOut(_) => Status::deadline_exceeded(refused.to_string()),
        }),
        Err(e) => e,
    }
}

impl<B> PolicyRequest for http::Request<B> {
    fn method(&self) -> &'static str {
        let path = self.uri().path();
        match path.rsplit_once('/') {
            Some((service, _)) if service.ends_with("grpc.health.v1.Health") => "Health",
            Some((_, "Infer")) => "Infer",
            Some((_, "Name")) => "Name",
            Some((_, "Info")) => "Info",
            _ => "other",
        }
    }
}

impl<B> PolicyResponse for http::Response<B> {
    /// A call the handler refused has its status in the headers (a
    /// trailers-only response); a stream's later errors are the stream's.
    fn failed(&self) -> bool {
        self.headers()
            .get("grpc-status")
            .is_some_and(|status| status.as_bytes() != b"0")
    }
}

fn check_header<T>(request: &Request<T>) -> Result<(), Status> {
    let version = request
        .metadata()
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u32>().ok());
    match version {
        None => Err(Status::failed_precondition(format!(
            "missing {VERSION_HEADER} metadata (this node speaks version {})",
            netdiv_proto::PROTOCOL_VERSION
        ))),
        Some(v) => match version_mismatch(v) {
            Some(msg) => Err(Status::failed_precondition(msg)),
            None => Ok(()),
        },
    }
}

impl QuerySource for Streaming<pb::Query> {
    async fn message(&mut self) -> Result<Option<pb::Query>, Status> {
        Streaming::message(self).await
    }
}

#[tonic::async_trait]
impl pb::sut_node_server::SutNode for GrpcService {
    async fn name(
        &self,
        request: Request<pb::NameRequest>,
    ) -> Result<Response<pb::NameResponse>, Status> {
        if let Some(msg) = version_mismatch(request.get_ref().protocol_version) {
            return Err(Status::failed_precondition(msg));
        }
        Ok(Response::new(pb::NameResponse {
            name: self.node.settings().name.clone(),
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        }))
    }

    async fn info(
        &self,
        _request: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::NodeInfo>, Status> {
        Ok(Response::new(
            self.node.info(crate::host::nic::interfaces()),
        ))
    }

    type InferStream = CompletionStream;

    async fn infer(
        &self,
        request: Request<Streaming<pb::Query>>,
    ) -> Result<Response<Self::InferStream>, Status> {
        self.serve_infer(request).map(Response::new)
    }
}

impl InferHandler for GrpcService {
    fn open_infer(&self, request: Request<QueryFrames>) -> Result<CompletionStream, Status> {
        self.serve_infer(request)
    }
}

impl GrpcService {
    /// Starts an Infer call: checks its version header, then reads its
    /// queries into the node and streams the answers back.
    fn serve_infer<Q: QuerySource>(&self, request: Request<Q>) -> Result<CompletionStream, Status> {
        check_header(&request)?;
        let peer = request
            .remote_addr()
            .map_or("unknown".into(), |a| a.to_string());
        let mut inbound = request.into_inner();
        let (reply_tx, reply_rx) = mpsc::unbounded_channel::<pb::Completion>();
        let reply_tx = ReplyTo::new(reply_tx);
        let unread = Arc::new(Unread::new(self.node.settings().limits.max_unread_answers));
        let taken = unread.clone();
        let (out_tx, out_rx) = mpsc::channel::<Result<pb::CompletionBatch, Status>>(64);
        let node = self.node.clone();
        let mut closing = self.closing.clone();
        let errors = out_tx.clone();
        let open = node.metrics().connection("grpc");
        tokio::spawn(async move {
            let _open = open;
            loop {
                // A client that does not read its answers is not read
                // either: HTTP/2 flow control then holds it back.
                tokio::select! {
                    _ = unread.room() => {}
                    _ = async { let _ = closing.wait_for(|c| *c).await; } => break,
                }
                tokio::select! {
                    message = inbound.message() => match message {
                        Ok(Some(query)) => {
                            unread.submitted(query.samples.len());
                            node.submit_query(query, &reply_tx);
                        }
                        Ok(None) => break,
                        Err(status) => {
                            tracing::warn!(node = %node.settings().name, %peer, "gRPC query stream ended: {}", status.message());
                            let _ = errors.send(Err(Status::invalid_argument(format!("bad query message: {}", status.message())))).await;
                            break;
                        }
                    },
                    _ = async { let _ = closing.wait_for(|c| *c).await; } => break,
                }
            }
            // Dropping the last sender here lets the stream end once every
            // queued sample has been answered.
            drop(reply_tx);
        });
        let writer_node = self.node.clone();
        tokio::spawn(async move {
            let mut answers = Answers::new(reply_rx, &writer_node);
            loop {
                // A client gone (its connection closed or reset) is seen
                // at once, not at the next answer minutes later: the
                // answers' receiver is dropped, and the token samples it
                // sent are dropped with it (`crate::reply`).
                let batch = tokio::select! {
                    batch = answers.next(&taken) => batch,
                    _ = out_tx.closed() => break,
                };
                let Some(batch) = batch else { break };
                let owed = Unread::answers(&batch);
                if out_tx.send(Ok(batch)).await.is_err() {
                    break;
                }
                taken.written(owed);
            }
        });
        Ok(Box::pin(ReceiverStream::new(out_rx)))
    }
}
