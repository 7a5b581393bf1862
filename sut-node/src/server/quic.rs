//! QUIC: one bidirectional stream per request (ALPN
//! [`netdiv_proto::ALPN`]: a client offering another fails the handshake;
//! a request of another protocol version gets an error frame naming both
//! versions). Token models' first tokens travel in the same `completions`
//! frames as completions, always ahead of their sample's. The client
//! writes one `QuicRequest` frame and finishes; the node answers with
//! `QuicResponse` frames and finishes. A bad stream gets an error frame and
//! ends alone; the connection and everyone else go on.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use netdiv_proto::framing::{self, FrameDecoder, FrameError};
use netdiv_proto::pb::{self, quic_request, quic_response};
use netdiv_proto::transport::{message_limit, QUIC_CLOSE_WAIT, QUIC_DELIVERY_GRACE};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::{next_batch, version_mismatch, COMPLETIONS_PER_MESSAGE};
use crate::node::Node;
use crate::tls::TlsFiles;

/// Why a stream's request could not be read; the client gets the text in
/// an error frame.
#[derive(Debug, thiserror::Error)]
enum BadRequest {
    #[error("stream read failed: {0}")]
    Read(#[from] quinn::ReadError),
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("more than one request frame on a stream")]
    MoreThanOne,
    #[error("stream ended without a request frame")]
    Missing,
}

/// Binds `listen` on UDP (preferring `preferred`, the gRPC port, so a node
/// has one port number) and serves QUIC there until `closing` flips.
/// Returns the bound address and the server's task.
pub fn start(
    listen: SocketAddr,
    preferred: SocketAddr,
    tls: &TlsFiles,
    node: Arc<Node>,
    closing: watch::Receiver<bool>,
) -> Result<(SocketAddr, JoinHandle<()>)> {
    let crypto = tls.rustls_server(netdiv_proto::ALPN)?;
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(
        quinn::crypto::rustls::QuicServerConfig::try_from(crypto)
            .context("QUIC TLS configuration")?,
    ));
    server_config.transport_config(netdiv_proto::transport::quic_config(false));
    let endpoint = quinn::Endpoint::server(server_config.clone(), preferred)
        .or_else(|_| quinn::Endpoint::server(server_config, listen))
        .with_context(|| format!("cannot listen on udp {listen}"))?;
    let addr = endpoint.local_addr()?;
    Ok((addr, tokio::spawn(serve(endpoint, node, closing))))
}

/// Counts streams still being answered; dropping it marks one done.
struct OpenStream(Arc<watch::Sender<usize>>);

impl OpenStream {
    fn open(count: &Arc<watch::Sender<usize>>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// Accepts connections until `closing` flips, then closes once every
/// stream's answers have been delivered (or the grace time is over):
/// closing at once would discard completions still in flight, and the
/// client would send those samples again elsewhere.
async fn serve(endpoint: quinn::Endpoint, node: Arc<Node>, mut closing: watch::Receiver<bool>) {
    let open_streams = Arc::new(watch::channel(0usize).0);
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                let node = node.clone();
                let open_streams = open_streams.clone();
                tokio::spawn(async move {
                    let remote = incoming.remote_address();
                    match incoming.await {
                        Ok(conn) => serve_connection(conn, node, open_streams).await,
                        Err(e) => eprintln!("sut-node {}: QUIC handshake with {remote} failed: {e}", node.settings().name),
                    }
                });
            }
            _ = async { let _ = closing.wait_for(|c| *c).await; } => break,
        }
    }
    let mut open = open_streams.subscribe();
    let _ = tokio::time::timeout(QUIC_DELIVERY_GRACE, open.wait_for(|n| *n == 0)).await;
    endpoint.close(0u32.into(), b"node shutting down");
    let _ = tokio::time::timeout(QUIC_CLOSE_WAIT, endpoint.wait_idle()).await;
}

async fn serve_connection(
    conn: quinn::Connection,
    node: Arc<Node>,
    open_streams: Arc<watch::Sender<usize>>,
) {
    loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                let node = node.clone();
                let open = OpenStream::open(&open_streams);
                tokio::spawn(async move {
                    let _open = open;
                    if let Err(e) = serve_stream(send, recv, &node).await {
                        eprintln!("sut-node {}: QUIC stream: {e:#}", node.settings().name);
                    }
                });
            }
            Err(_) => return,
        }
    }
}

fn response(kind: quic_response::Kind) -> bytes::Bytes {
    framing::encode(&pb::QuicResponse { kind: Some(kind) })
}

async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    node: &Node,
) -> Result<()> {
    let max_message = message_limit(&node.settings().benchmark);
    let request = match read_request(&mut recv, max_message).await {
        Ok(r) => r,
        Err(reason) => {
            send.write_all(&response(quic_response::Kind::Error(reason.to_string())))
                .await?;
            send.finish()?;
            anyhow::bail!("refused: {reason}");
        }
    };
    if let Some(msg) = version_mismatch(request.protocol_version) {
        send.write_all(&response(quic_response::Kind::Error(msg.clone())))
            .await?;
        send.finish()?;
        anyhow::bail!("refused: {msg}");
    }
    match request.kind {
        Some(quic_request::Kind::Name(_)) => {
            let name = pb::NameResponse {
                name: node.settings().name.clone(),
                protocol_version: netdiv_proto::PROTOCOL_VERSION,
            };
            send.write_all(&response(quic_response::Kind::Name(name)))
                .await?;
        }
        Some(quic_request::Kind::Info(_)) => {
            let info = node.info(crate::nic::interfaces());
            send.write_all(&response(quic_response::Kind::Info(info)))
                .await?;
        }
        Some(quic_request::Kind::Query(query)) => {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let mut left = node.submit_query(query, &tx);
            drop(tx);
            while left > 0 {
                let Some(batch) = next_batch(&mut rx, COMPLETIONS_PER_MESSAGE).await else {
                    break;
                };
                // First tokens (token models) come ahead of completions
                // and do not answer a sample.
                let answered = batch.completions.iter().filter(|c| !c.first_token).count();
                left -= answered.min(left);
                send.write_all(&response(quic_response::Kind::Completions(batch)))
                    .await?;
            }
        }
        None => {
            send.write_all(&response(quic_response::Kind::Error(
                "empty request".into(),
            )))
            .await?;
        }
    }
    send.finish()?;
    // Done once the client has every byte (the connection may close next).
    let _ = tokio::time::timeout(QUIC_DELIVERY_GRACE, send.stopped()).await;
    Ok(())
}

/// Reads the stream's one request frame; an error for the client if it is
/// oversized, truncated, malformed or followed by more data.
async fn read_request(
    recv: &mut quinn::RecvStream,
    max_message: usize,
) -> Result<pb::QuicRequest, BadRequest> {
    let mut decoder = FrameDecoder::new(max_message);
    let mut frame = None;
    while let Some(chunk) = recv.read_chunk(64 << 10, true).await? {
        decoder.push(&chunk.bytes);
        match decoder.next_frame()? {
            Some(f) if frame.is_none() => frame = Some(f),
            Some(_) => return Err(BadRequest::MoreThanOne),
            None => {}
        }
    }
    if let Ok(Some(_)) = decoder.next_frame() {
        return Err(BadRequest::MoreThanOne);
    }
    decoder.finish()?;
    let frame = frame.ok_or(BadRequest::Missing)?;
    Ok(framing::decode::<pb::QuicRequest>(&frame, "QuicRequest")?)
}
