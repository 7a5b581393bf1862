//! The QUIC link: one connection per node (TLS 1.3, ALPN `netdiv/1`) and
//! one bidirectional stream per query, so queries never wait behind one
//! another's bytes (no head-of-line blocking across queries).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};

use netdiv_proto::framing::{self, FrameDecoder};
use netdiv_proto::pb::{self, quic_request, quic_response};

use super::{Call, LinkError, LinkEvents};
use crate::node_url::NodeUrl;
use crate::tls::ClientTls;

pub(crate) struct QuicLink {
    conn: quinn::Connection,
    /// Kept so the client socket lives as long as the link.
    _endpoint: quinn::Endpoint,
    runtime: tokio::runtime::Handle,
    events: OnceLock<(usize, Arc<dyn LinkEvents>)>,
    /// Largest frame accepted (the benchmark's message limit).
    max_message: usize,
}

/// The kind of an answer, for errors about unexpected ones.
fn kind_name(kind: &quic_response::Kind) -> &'static str {
    match kind {
        quic_response::Kind::Name(_) => "a Name answer",
        quic_response::Kind::Info(_) => "an Info answer",
        quic_response::Kind::Completions(_) => "completions",
        quic_response::Kind::Error(_) => "an error",
    }
}

impl QuicLink {
    /// Connects to `url`'s node at `addr` (its host, resolved).
    pub async fn connect(
        url: &NodeUrl,
        addr: SocketAddr,
        tls: &ClientTls,
        max_message: usize,
    ) -> Result<QuicLink, LinkError> {
        let crypto = tls.rustls(netdiv_proto::ALPN)?;
        let mut config = quinn::ClientConfig::new(Arc::new(
            quinn::crypto::rustls::QuicClientConfig::try_from(crypto)?,
        ));
        config.transport_config(netdiv_proto::transport::quic_config(true));
        let local: SocketAddr = if addr.is_ipv6() {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let mut endpoint = quinn::Endpoint::client(local).map_err(LinkError::Socket)?;
        endpoint.set_default_client_config(config);
        let server_name = tls.server_name.as_deref().unwrap_or(&url.host);
        let conn = endpoint.connect(addr, server_name)?.await?;
        Ok(QuicLink {
            conn,
            _endpoint: endpoint,
            runtime: tokio::runtime::Handle::current(),
            events: OnceLock::new(),
            max_message,
        })
    }

    async fn request(
        &self,
        call: Call,
        kind: quic_request::Kind,
    ) -> Result<quic_response::Kind, LinkError> {
        let (mut send, mut recv) = self.conn.open_bi().await?;
        let request = pb::QuicRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            kind: Some(kind),
        };
        send.write_chunk(framing::encode(&request)).await?;
        send.finish()?;
        let bytes = recv.read_to_end(self.max_message).await?;
        let mut decoder = FrameDecoder::new(self.max_message);
        decoder.push(&bytes);
        let frame = decoder.next_frame()?.ok_or(LinkError::UnexpectedAnswer {
            call,
            got: "nothing",
        })?;
        let response: pb::QuicResponse = framing::decode(&frame, "QuicResponse")?;
        match response.kind {
            Some(quic_response::Kind::Error(reason)) => Err(LinkError::Refused { call, reason }),
            Some(kind) => Ok(kind),
            None => Err(LinkError::UnexpectedAnswer {
                call,
                got: "an empty answer",
            }),
        }
    }

    pub async fn name(&self) -> Result<String, LinkError> {
        let request = pb::NameRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        };
        match self
            .request(Call::Name, quic_request::Kind::Name(request))
            .await?
        {
            quic_response::Kind::Name(n) => Ok(n.name),
            other => Err(LinkError::UnexpectedAnswer {
                call: Call::Name,
                got: kind_name(&other),
            }),
        }
    }

    pub async fn info(&self) -> Result<pb::NodeInfo, LinkError> {
        match self
            .request(Call::Info, quic_request::Kind::Info(pb::InfoRequest {}))
            .await?
        {
            quic_response::Kind::Info(info) => Ok(info),
            other => Err(LinkError::UnexpectedAnswer {
                call: Call::Info,
                got: kind_name(&other),
            }),
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
        let max_message = self.max_message;
        self.runtime.spawn(async move {
            let ids: Vec<u64> = query.samples.iter().map(|s| s.response_id).collect();
            match run_query(&conn, query, node, &*events, max_message).await {
                Ok(answered) if answered >= ids.len() => {}
                Ok(answered) => events.failed(
                    node,
                    LinkError::Unanswered {
                        missing: ids.len() - answered,
                        total: ids.len(),
                    },
                ),
                Err(e @ LinkError::Refused { .. }) => events.refused(node, ids, e),
                Err(e) => events.failed(node, e),
            }
        });
    }
}

/// Sends one query on its own stream and reports completions as their
/// frames arrive. Returns how many completions (not first tokens) came
/// back; a
/// [`LinkError::Refused`] means the node refused the query itself.
async fn run_query(
    conn: &quinn::Connection,
    query: pb::Query,
    node: usize,
    events: &dyn LinkEvents,
    max_message: usize,
) -> Result<usize, LinkError> {
    let (mut send, mut recv) = conn.open_bi().await?;
    let request = pb::QuicRequest {
        protocol_version: netdiv_proto::PROTOCOL_VERSION,
        kind: Some(quic_request::Kind::Query(query)),
    };
    send.write_chunk(framing::encode(&request)).await?;
    send.finish()?;
    let mut decoder = FrameDecoder::new(max_message);
    let mut answered = 0;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await? {
        decoder.push(&chunk.bytes);
        while let Some(frame) = decoder.next_frame()? {
            let response: pb::QuicResponse = framing::decode(&frame, "QuicResponse")?;
            match response.kind {
                Some(quic_response::Kind::Completions(batch)) => {
                    // A first token is not an answer: a stream that ends
                    // after first tokens alone leaves its samples unanswered.
                    answered += batch.completions.iter().filter(|c| !c.first_token).count();
                    events.completions(node, batch.completions);
                }
                Some(quic_response::Kind::Error(reason)) => {
                    return Err(LinkError::Refused {
                        call: Call::Infer,
                        reason,
                    })
                }
                other => {
                    return Err(LinkError::UnexpectedAnswer {
                        call: Call::Infer,
                        got: other.as_ref().map_or("an empty answer", kind_name),
                    })
                }
            }
        }
    }
    decoder.finish()?;
    Ok(answered)
}
