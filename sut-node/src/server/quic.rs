//! QUIC: one bidirectional stream per request (ALPN `netdiv/1`, so a
//! client of another protocol version fails the handshake). The client
//! writes one `QuicRequest` frame and finishes; the node answers with
//! `QuicResponse` frames and finishes. A bad stream gets an error frame and
//! ends alone; the connection and everyone else go on.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use netdiv_proto::framing::{self, FrameDecoder, DEFAULT_MAX_FRAME};
use netdiv_proto::pb::{self, quic_request, quic_response};
use tokio::sync::{mpsc, watch};

use super::{next_batch, version_mismatch};
use crate::node::Node;

/// How long closing waits for answers already written to reach clients.
const DELIVERY_GRACE: Duration = Duration::from_secs(5);

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
pub async fn serve(endpoint: quinn::Endpoint, node: Arc<Node>, mut closing: watch::Receiver<bool>) {
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
    let _ = tokio::time::timeout(DELIVERY_GRACE, open.wait_for(|n| *n == 0)).await;
    endpoint.close(0u32.into(), b"node shutting down");
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
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
    let request = match read_request(&mut recv).await {
        Ok(r) => r,
        Err(reason) => {
            send.write_all(&response(quic_response::Kind::Error(reason.clone())))
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
                let Some(batch) = next_batch(&mut rx, 4096).await else {
                    break;
                };
                left -= batch.completions.len().min(left);
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
    let _ = tokio::time::timeout(DELIVERY_GRACE, send.stopped()).await;
    Ok(())
}

/// Reads the stream's one request frame; an error text for the client if
/// it is oversized, truncated, malformed or followed by more data.
async fn read_request(recv: &mut quinn::RecvStream) -> Result<pb::QuicRequest, String> {
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME);
    let mut frame = None;
    loop {
        match recv.read_chunk(64 << 10, true).await {
            Ok(Some(chunk)) => decoder.push(&chunk.bytes),
            Ok(None) => break,
            Err(e) => return Err(format!("stream read failed: {e}")),
        }
        match decoder.next_frame() {
            Ok(Some(f)) if frame.is_none() => frame = Some(f),
            Ok(Some(_)) => return Err("more than one request frame on a stream".into()),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    if let Ok(Some(_)) = decoder.next_frame() {
        return Err("more than one request frame on a stream".into());
    }
    decoder.finish().map_err(|e| e.to_string())?;
    let frame = frame.ok_or("stream ended without a request frame")?;
    framing::decode::<pb::QuicRequest>(&frame, "QuicRequest").map_err(|e| e.to_string())
}
