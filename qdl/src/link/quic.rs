//! The QUIC link: one connection per node (TLS 1.3, ALPN `netdiv/1`) and
//! one bidirectional stream per query, so queries never wait behind one
//! another's bytes (no head-of-line blocking across queries).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};

use netdiv_proto::framing::{self, FrameDecoder};
use netdiv_proto::pb::{self, quic_request, quic_response};

use super::{LinkEvents, MAX_MESSAGE};
use crate::node_url::NodeUrl;
use crate::tls::ClientTls;

pub(crate) struct QuicLink {
    conn: quinn::Connection,
    /// Kept so the client socket lives as long as the link.
    _endpoint: quinn::Endpoint,
    runtime: tokio::runtime::Handle,
    events: OnceLock<(usize, Arc<dyn LinkEvents>)>,
}

/// Why a query stream did not deliver all of its completions.
enum StreamError {
    /// The node answered with an error frame: the query itself is bad.
    Refused(String),
    /// The stream or connection broke.
    Transport(String),
}

impl QuicLink {
    /// Connects to `url`'s node at `addr` (its host, resolved).
    pub async fn connect(
        url: &NodeUrl,
        addr: SocketAddr,
        tls: &ClientTls,
    ) -> Result<QuicLink, String> {
        let crypto = tls.rustls(netdiv_proto::ALPN).map_err(|e| e.to_string())?;
        let mut config = quinn::ClientConfig::new(Arc::new(
            quinn::crypto::rustls::QuicClientConfig::try_from(crypto)
                .map_err(|e| format!("QUIC TLS configuration: {e}"))?,
        ));
        config.transport_config(netdiv_proto::quic::transport_config(true));
        let local: SocketAddr = if addr.is_ipv6() {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let mut endpoint =
            quinn::Endpoint::client(local).map_err(|e| format!("cannot open a UDP socket: {e}"))?;
        endpoint.set_default_client_config(config);
        let server_name = tls.server_name.as_deref().unwrap_or(&url.host);
        let conn = endpoint
            .connect(addr, server_name)
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| format!("QUIC handshake: {e}"))?;
        Ok(QuicLink {
            conn,
            _endpoint: endpoint,
            runtime: tokio::runtime::Handle::current(),
            events: OnceLock::new(),
        })
    }

    async fn request(&self, kind: quic_request::Kind) -> Result<quic_response::Kind, String> {
        let (mut send, mut recv) = self.conn.open_bi().await.map_err(|e| e.to_string())?;
        let request = pb::QuicRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            kind: Some(kind),
        };
        send.write_chunk(framing::encode(&request))
            .await
            .map_err(|e| e.to_string())?;
        send.finish().map_err(|e| e.to_string())?;
        let bytes = recv
            .read_to_end(MAX_MESSAGE)
            .await
            .map_err(|e| e.to_string())?;
        let mut decoder = FrameDecoder::new(MAX_MESSAGE);
        decoder.push(&bytes);
        let frame = decoder
            .next_frame()
            .map_err(|e| e.to_string())?
            .ok_or("the node closed the stream without an answer")?;
        let response: pb::QuicResponse =
            framing::decode(&frame, "QuicResponse").map_err(|e| e.to_string())?;
        match response.kind {
            Some(quic_response::Kind::Error(e)) => Err(format!("the node refused: {e}")),
            Some(kind) => Ok(kind),
            None => Err("empty answer".into()),
        }
    }

    pub async fn name(&self) -> Result<String, String> {
        let request = pb::NameRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        };
        match self.request(quic_request::Kind::Name(request)).await? {
            quic_response::Kind::Name(n) => Ok(n.name),
            other => Err(format!("answered Name with {other:?}")),
        }
    }

    pub async fn info(&self) -> Result<pb::NodeInfo, String> {
        match self
            .request(quic_request::Kind::Info(pb::InfoRequest {}))
            .await?
        {
            quic_response::Kind::Info(info) => Ok(info),
            other => Err(format!("answered Info with {other:?}")),
        }
    }

    pub fn start(&self, node: usize, events: Arc<dyn LinkEvents>) {
        let _ = self.events.set((node, events));
    }

    /// Closes the connection; the node sees a clean close.
    pub fn close(&self) {
        self.conn.close(0u32.into(), b"done");
    }

    pub fn send(&self, query: pb::Query) {
        let Some((node, events)) = self.events.get().cloned() else {
            return;
        };
        let conn = self.conn.clone();
        self.runtime.spawn(async move {
            let ids: Vec<u64> = query.samples.iter().map(|s| s.response_id).collect();
            match run_query(&conn, query, node, &*events).await {
                Ok(answered) if answered >= ids.len() => {}
                Ok(answered) => events.failed(
                    node,
                    format!(
                        "a query stream ended with {} of its {} samples unanswered",
                        ids.len() - answered,
                        ids.len()
                    ),
                ),
                Err(StreamError::Refused(reason)) => events.refused(node, ids, reason),
                Err(StreamError::Transport(reason)) => events.failed(node, reason),
            }
        });
    }
}

/// Sends one query on its own stream and reports completions as their
/// frames arrive. Returns how many completions came back.
async fn run_query(
    conn: &quinn::Connection,
    query: pb::Query,
    node: usize,
    events: &dyn LinkEvents,
) -> Result<usize, StreamError> {
    let transport = |e: &dyn std::fmt::Display| StreamError::Transport(e.to_string());
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| transport(&e))?;
    let request = pb::QuicRequest {
        protocol_version: netdiv_proto::PROTOCOL_VERSION,
        kind: Some(quic_request::Kind::Query(query)),
    };
    send.write_chunk(framing::encode(&request))
        .await
        .map_err(|e| transport(&e))?;
    send.finish().map_err(|e| transport(&e))?;
    let mut decoder = FrameDecoder::new(MAX_MESSAGE);
    let mut answered = 0;
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .map_err(|e| transport(&e))?
    {
        decoder.push(&chunk.bytes);
        while let Some(frame) = decoder.next_frame().map_err(|e| transport(&e))? {
            let response: pb::QuicResponse =
                framing::decode(&frame, "QuicResponse").map_err(|e| transport(&e))?;
            match response.kind {
                Some(quic_response::Kind::Completions(batch)) => {
                    answered += batch.completions.len();
                    events.completions(node, batch.completions);
                }
                Some(quic_response::Kind::Error(e)) => return Err(StreamError::Refused(e)),
                other => {
                    return Err(StreamError::Transport(format!(
                        "unexpected answer to a query: {other:?}"
                    )))
                }
            }
        }
    }
    decoder.finish().map_err(|e| transport(&e))?;
    Ok(answered)
}
