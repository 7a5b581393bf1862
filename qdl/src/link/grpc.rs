//! The gRPC link: one HTTP/2 connection per node, Name and Info as unary
//! calls, and all queries on one long-lived bidirectional `Infer` stream.

use std::sync::{Arc, Mutex};

use netdiv_proto::pb::{self, sut_node_client::SutNodeClient};
use netdiv_proto::transport::{
    HTTP2_CONNECTION_WINDOW, HTTP2_KEEP_ALIVE_INTERVAL, HTTP2_KEEP_ALIVE_TIMEOUT,
    HTTP2_STREAM_WINDOW, RPC_TIMEOUT,
};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::{Channel, Endpoint};

use super::{Call, LinkError, LinkEvents};
use crate::node_url::NodeUrl;
use crate::tls::ClientTls;

pub(crate) struct GrpcLink {
    client: SutNodeClient<Channel>,
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
    pub async fn connect(
        url: &NodeUrl,
        tls: Option<&ClientTls>,
        max_message: usize,
    ) -> Result<GrpcLink, LinkError> {
        let authority = url.to_string();
        let authority = authority.trim_start_matches("grpc://");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{authority}"))
            .map_err(LinkError::GrpcConnect)?
            .tcp_nodelay(true)
            .connect_timeout(RPC_TIMEOUT)
            .initial_stream_window_size(HTTP2_STREAM_WINDOW)
            .initial_connection_window_size(HTTP2_CONNECTION_WINDOW)
            // A node that vanishes without closing its socket (power, cable)
            // is noticed within seconds, and its samples re-sent.
            .http2_keep_alive_interval(HTTP2_KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(HTTP2_KEEP_ALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        if let Some(tls) = tls {
            endpoint = endpoint
                .tls_config(tls.tonic(url.server_name.as_deref().unwrap_or(&url.host))?)
                .map_err(LinkError::GrpcConnect)?;
        }
        let channel = endpoint.connect().await.map_err(LinkError::GrpcConnect)?;
        Ok(GrpcLink {
            client: SutNodeClient::new(channel)
                .max_decoding_message_size(max_message)
                .max_encoding_message_size(max_message),
            queries: Mutex::new(None),
            reader: Mutex::new(None),
        })
    }

    pub async fn name(&self) -> Result<String, LinkError> {
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

    pub async fn info(&self) -> Result<pb::NodeInfo, LinkError> {
        let answer = self
            .client
            .clone()
            .info(versioned(pb::InfoRequest {}))
            .await
            .map_err(status(Call::Info))?;
        Ok(answer.into_inner())
    }

    pub async fn start(&self, node: usize, events: Arc<dyn LinkEvents>) -> Result<(), LinkError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let response = self
            .client
            .clone()
            .infer(versioned(UnboundedReceiverStream::new(rx)))
            .await
            .map_err(status(Call::Infer))?;
        let mut completions = response.into_inner();
        let reader = tokio::spawn(async move {
            loop {
                match completions.message().await {
                    Ok(Some(batch)) => events.completions(node, batch.completions),
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
    pub async fn close(&self) {
        self.queries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let reader = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(reader) = reader {
            let _ = reader.await;
        }
    }

    pub fn send(&self, query: pb::Query) {
        // A closed stream is reported by the reader task; the pool then
        // takes these samples back.
        if let Some(tx) = &*self.queries.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = tx.send(query);
        }
    }
}
