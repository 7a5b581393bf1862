//! The gRPC link: one HTTP/2 connection per node, Name and Info as unary
//! calls, and all queries on one long-lived bidirectional `Infer` stream.
//! Queries go out as buffers ([`super::query_body`]): the request side of
//! `Infer` is written here rather than by tonic's generated client, whose
//! encoder copies every sample into one buffer first.

use std::sync::{Arc, Mutex};

use netdiv_proto::pb::{self, sut_node_client::SutNodeClient};
use netdiv_proto::transport::{
    HTTP2_CONNECTION_WINDOW, HTTP2_KEEP_ALIVE_INTERVAL, HTTP2_KEEP_ALIVE_TIMEOUT,
    HTTP2_MAX_FRAME_SIZE, HTTP2_STREAM_WINDOW, RPC_TIMEOUT,
};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::mpsc::{self, UnboundedSender};
use tonic::codec::Streaming;
use tonic::transport::{Channel, Endpoint};
use tower::ServiceExt;

use super::query_body::QueryBody;
use super::{Call, LinkError, LinkEvents};
use crate::node_url::NodeUrl;
use crate::tls::ClientTls;

/// The Infer method's path.
const INFER_PATH: &str = "/netdiv.v1.SutNode/Infer";

pub(crate) struct GrpcLink {
    client: SutNodeClient<Channel>,
    channel: Channel,
    max_message: usize,
    /// The Infer stream's sending half; `None` before start and after
    /// close.
    queries: Mutex<Option<UnboundedSender<pb::Query>>>,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// A request carrying the protocol-version header every call needs.
fn versioned<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        netdiv_proto::VERSION_HEADER,
        tonic::metadata::MetadataValue::from(netdiv_proto::PROTOCOL_VERSION),
    );
    request
}

/// An error status of `call`.
fn status(call: Call) -> impl FnOnce(tonic::Status) -> LinkError {
    move |status| LinkError::Status { call, status }
}

impl GrpcLink {
    pub(crate) async fn connect(
        url: &NodeUrl,
        tls: Option<&ClientTls>,
        max_message: usize,
    ) -> Result<GrpcLink, LinkError> {
        let authority = url.to_string();
        let authority = authority.trim_start_matches("grpc://");
        // The URI's scheme only names the protocol to tonic; TLS, when on,
        // is the connector's (netdiv's record layer, not tonic's).
        let endpoint = Endpoint::from_shared(format!("http://{authority}"))
            .map_err(LinkError::GrpcConnect)?
            .tcp_nodelay(true)
            .connect_timeout(RPC_TIMEOUT)
            .initial_stream_window_size(HTTP2_STREAM_WINDOW)
            .initial_connection_window_size(HTTP2_CONNECTION_WINDOW)
            .max_frame_size(HTTP2_MAX_FRAME_SIZE)
            // A node that vanishes without closing its socket (power, cable)
            // is noticed within seconds, and its samples re-sent.
            .http2_keep_alive_interval(HTTP2_KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(HTTP2_KEEP_ALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        let channel = match tls {
            None => endpoint.connect().await,
            Some(tls) => {
                let config = tls.grpc()?;
                // The name node certificates are checked against: the one
                // given, else the one the address was found under, else
                // the host.
                let name = tls
                    .server_name
                    .as_deref()
                    .or(url.server_name.as_deref())
                    .unwrap_or(&url.host);
                let name = ServerName::try_from(name.to_string())
                    .map_err(|_| LinkError::ServerName(name.to_string()))?;
                let (host, port) = (url.host.clone(), url.port);
                let connector = tower::service_fn(move |_: http::Uri| {
                    let (config, name, host) = (config.clone(), name.clone(), host.clone());
                    async move {
                        let tcp = TcpStream::connect((host.as_str(), port)).await?;
                        tcp.set_nodelay(true)?;
                        let tls = netdiv_proto::tls_stream::connect(config, name, tcp).await?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
                    }
                });
                endpoint.connect_with_connector(connector).await
            }
        }
        .map_err(LinkError::GrpcConnect)?;
        Ok(GrpcLink {
            client: SutNodeClient::new(channel.clone())
                .max_decoding_message_size(max_message)
                .max_encoding_message_size(max_message),
            channel,
            max_message,
            queries: Mutex::new(None),
            reader: Mutex::new(None),
        })
    }

    pub(crate) async fn name(&self) -> Result<String, LinkError> {
        let request = pb::NameRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        };
        let answer = self
            .client
            .clone()
            .name(versioned(request))
            .await
            .map_err(status(Call::Name))?;
        Ok(answer.into_inner().name)
    }

    pub(crate) async fn info(&self) -> Result<pb::NodeInfo, LinkError> {
        let answer = self
            .client
            .clone()
            .info(versioned(pb::InfoRequest {}))
            .await
            .map_err(status(Call::Info))?;
        Ok(answer.into_inner())
    }

    pub(crate) async fn start(
        &self,
        node: usize,
        events: Arc<dyn LinkEvents>,
    ) -> Result<(), LinkError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut completions = self.open_infer(rx).await?;
        let reader = tokio::spawn(async move {
            loop {
                match completions.message().await {
                    Ok(Some(batch)) => {
                        if batch.tokens_generated > 0 {
                            events.token_progress(node, batch.tokens_generated);
                        }
                        if !batch.completions.is_empty() {
                            events.completions(node, batch.completions);
                        }
                    }
                    Ok(None) => {
                        events.failed(node, LinkError::InferEnded);
                        break;
                    }
                    Err(status) => {
                        events.failed(
                            node,
                            LinkError::Status {
                                call: Call::Infer,
                                status,
                            },
                        );
                        break;
                    }
                }
            }
        });
        *self.queries.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        *self.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(reader);
        Ok(())
    }

    /// Ends the Infer stream cleanly: the node answers what it holds, then
    /// ends its side, and the reader finishes.
    pub(crate) async fn close(&self) {
        self.queries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let reader = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(reader) = reader {
            let _ = reader.await;
        }
    }

    pub(crate) fn send(&self, query: pb::Query) {
        // A closed stream is reported by the reader task; the pool then
        // takes these samples back.
        if let Some(tx) = &*self.queries.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = tx.send(query);
        }
    }

    /// Cancels samples at the node, on the one stream they all went on.
    pub(crate) fn cancel(&self, ids: &[u64]) {
        self.send(pb::Query {
            cancel: ids.to_vec(),
            ..Default::default()
        });
    }

    /// Opens the Infer stream with `queries` as its request body, and
    /// returns its completions: what tonic's generated `infer` does, with
    /// the request body ours.
    async fn open_infer(
        &self,
        queries: mpsc::UnboundedReceiver<pb::Query>,
    ) -> Result<Streaming<pb::CompletionBatch>, LinkError> {
        let failed = |status| LinkError::Status {
            call: Call::Infer,
            status,
        };
        let request = http::Request::builder()
            .method(http::Method::POST)
            .uri(INFER_PATH)
            .version(http::Version::HTTP_2)
            .header(http::header::TE, "trailers")
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(
                netdiv_proto::VERSION_HEADER,
                netdiv_proto::PROTOCOL_VERSION.to_string(),
            )
            .body(tonic::body::Body::new(QueryBody::new(queries)))
            .expect("a fixed path and headers are valid");
        let response = self
            .channel
            .clone()
            .oneshot(request)
            .await
            .map_err(|e| failed(tonic::Status::from_error(e.into())))?;
        // A node that refuses at once answers with headers only.
        if let Some(status) = tonic::Status::from_header_map(response.headers()) {
            if status.code() != tonic::Code::Ok {
                return Err(failed(status));
            }
        }
        let status_code = response.status();
        Ok(Streaming::new_response(
            tonic_prost::ProstDecoder::<pb::CompletionBatch>::default(),
            response.into_body(),
            status_code,
            None,
            Some(self.max_message),
        ))
    }
}
