//! QUIC (ALPN [`netdiv_proto::ALPN`]: a client offering another fails the
//! handshake; a request of another protocol version gets an error frame
//! naming both versions). A Name or Info request has a bidirectional stream
//! of its own: one frame each way. A query stream starts with a `Query`
//! frame and may carry many more, written as the client has them; the node
//! submits each as it arrives and sends completions back in `completions`
//! frames as they come (token models' first tokens in the same frames,
//! always ahead of their sample's), so a busy link needs neither a stream
//! nor a task per query. The node finishes a query stream once the client
//! has finished its side and every sample is answered. A bad stream gets an
//! error frame and ends alone; the connection and everyone else go on.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use netdiv_proto::framing::{self, FrameDecoder, FrameError};
use netdiv_proto::pb::{self, quic_request, quic_response};
use netdiv_proto::transport::{message_limit, quic_endpoint, QUIC_CLOSE_WAIT, QUIC_DELIVERY_GRACE};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use tower::{BoxError, Service, ServiceExt};

use super::connections::ConnectionLimit;
use super::policy::{PolicyRequest, PolicyResponse, RequestPolicy};
use super::{version_mismatch, Answers, Unread};
use crate::node::{Node, ReplyTo};
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
    #[error("a query stream carries only queries")]
    NotAQuery,
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
    let limits = node.settings().limits;
    server_config.transport_config(netdiv_proto::transport::quic_server_config(
        limits.max_streams_per_connection,
        None,
    ));
    let endpoint = quic_endpoint(preferred, Some(server_config.clone()))
        .or_else(|_| quic_endpoint(listen, Some(server_config.clone())))
        .with_context(|| format!("cannot listen on udp {listen}"))?;
    let addr = endpoint.local_addr()?;
    Ok((
        addr,
        tokio::spawn(serve(endpoint, server_config, node, closing)),
    ))
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

/// A QUIC stream as a request to the node's policy. The send half stays
/// in a slot until the node answers, so a stream the policy refuses (shed,
/// or its request not read in time) still gets an error frame naming why.
struct QuicCall {
    recv: quinn::RecvStream,
    send: ReplySlot,
    open: OpenStream,
}

type ReplySlot = Arc<Mutex<Option<quinn::SendStream>>>;

fn take(slot: &ReplySlot) -> Option<quinn::SendStream> {
    slot.lock().unwrap_or_else(|e| e.into_inner()).take()
}

impl PolicyRequest for QuicCall {
    /// A QUIC stream names its request in its first frame, read inside
    /// the policy; the answer names it ([`Served`]).
    fn method(&self) -> &'static str {
        "stream"
    }
}

/// The request a stream carried, once the node has taken it.
struct Served(&'static str);

impl PolicyResponse for Served {
    fn method(&self) -> Option<&'static str> {
        Some(self.0)
    }
}

/// Accepts connections on `endpoint`, each with `server_config` and a
/// transport of its own, until `closing` flips, then closes once every
/// stream's answers have been delivered (or the grace time is over):
/// closing at once would discard completions still in flight, and the
/// client would send those samples again elsewhere.
async fn serve(
    endpoint: quinn::Endpoint,
    server_config: quinn::ServerConfig,
    node: Arc<Node>,
    mut closing: watch::Receiver<bool>,
) {
    let open_streams = Arc::new(watch::channel(0usize).0);
    let limit = ConnectionLimit::new(
        node.settings().limits.max_connections,
        "quic",
        &node.settings().name,
    );
    // One service for the whole endpoint: its clones share the policy's
    // limit on requests being started.
    let streams = {
        let node = node.clone();
        let closing = closing.clone();
        RequestPolicy::from_limits(&node.settings().limits)
            .layers("quic", node.metrics().clone())
            .service_fn(move |call: QuicCall| serve_stream(call, node.clone(), closing.clone()))
    };
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                let Some(slot) = limit.admit() else {
                    incoming.refuse();
                    continue;
                };
                let node = node.clone();
                let open_streams = open_streams.clone();
                let streams = streams.clone();
                // Each connection's MTU discovery bounded by the route
                // toward its client.
                let remote = incoming.remote_address();
                let mut config = server_config.clone();
                config.transport_config(netdiv_proto::transport::quic_server_config(
                    node.settings().limits.max_streams_per_connection,
                    Some(remote),
                ));
                let connecting = match incoming.accept_with(Arc::new(config)) {
                    Ok(connecting) => connecting,
                    Err(e) => {
                        tracing::warn!(node = %node.settings().name, %remote, "QUIC connection refused: {e}");
                        continue;
                    }
                };
                tokio::spawn(async move {
                    let _slot = slot;
                    match connecting.await {
                        Ok(conn) => serve_connection(conn, &node, open_streams, streams).await,
                        Err(e) => tracing::warn!(node = %node.settings().name, %remote, "QUIC handshake failed: {e}"),
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

async fn serve_connection<S>(
    conn: quinn::Connection,
    node: &Node,
    open_streams: Arc<watch::Sender<usize>>,
    streams: S,
) where
    S: Service<QuicCall, Response = Served, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send,
{
    let _open = node.metrics().connection("quic");
    loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                let slot: ReplySlot = Arc::new(Mutex::new(Some(send)));
                let call = QuicCall {
                    recv,
                    send: slot.clone(),
                    open: OpenStream::open(&open_streams),
                };
                let name = node.settings().name.clone();
                let streams = streams.clone();
                tokio::spawn(async move {
                    if let Err(e) = streams.oneshot(call).await {
                        if let Some(mut send) = take(&slot) {
                            let _ = refuse(&mut send, e.to_string()).await;
                        }
                        tracing::warn!(node = %name, "QUIC stream ended: {e}");
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

/// Writes one error frame and finishes the stream; the error to report is
/// the refusal, or why it could not be written.
async fn refuse(send: &mut quinn::SendStream, reason: String) -> anyhow::Error {
    let written = send
        .write_all(&response(quic_response::Kind::Error(reason.clone())))
        .await;
    if let Err(e) = written {
        return e.into();
    }
    match send.finish() {
        Ok(()) => anyhow::anyhow!("refused: {reason}"),
        Err(e) => e.into(),
    }
}

/// Reads the next frame of a stream: `Ok(None)` at a clean end.
async fn next_frame(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
) -> Result<Option<pb::QuicRequest>, BadRequest> {
    loop {
        if let Some(frame) = decoder.next_frame()? {
            return Ok(Some(framing::decode::<pb::QuicRequest>(
                frame,
                "QuicRequest",
            )?));
        }
        match recv.read_chunk(READ_CHUNK, true).await? {
            Some(chunk) => decoder.push(&chunk.bytes),
            None => {
                decoder.finish()?;
                return Ok(None);
            }
        }
    }
}

/// Most bytes taken from a stream per read.
const READ_CHUNK: usize = 1 << 20;

/// Reads a stream's request and starts its answer: a Name or Info answer
/// written, a query stream handed to its own task. Runs inside the
/// policy's time limit, which therefore bounds a client slow to send its
/// request too.
async fn serve_stream(
    call: QuicCall,
    node: Arc<Node>,
    closing: watch::Receiver<bool>,
) -> Result<Served, BoxError> {
    let QuicCall {
        mut recv,
        send: slot,
        open,
    } = call;
    let max_message = message_limit(&node.settings().benchmark);
    let mut decoder = FrameDecoder::new(max_message);
    let request = next_frame(&mut recv, &mut decoder).await;
    let Some(mut send) = take(&slot) else {
        return Err("the stream's reply was already taken".into());
    };
    let request = match request {
        Ok(Some(request)) => request,
        Ok(None) => return refused(&mut send, BadRequest::Missing.to_string()).await,
        Err(reason) => return refused(&mut send, reason.to_string()).await,
    };
    if let Some(msg) = version_mismatch(request.protocol_version) {
        return refused(&mut send, msg).await;
    }
    let (method, answer) = match request.kind {
        Some(quic_request::Kind::Query(query)) => {
            tokio::spawn(async move {
                let _open = open;
                if let Err(e) = serve_queries(query, send, recv, decoder, &node, closing).await {
                    tracing::warn!(node = %node.settings().name, "QUIC stream ended: {e:#}");
                }
            });
            return Ok(Served("Infer"));
        }
        Some(quic_request::Kind::Name(_)) => (
            "Name",
            quic_response::Kind::Name(pb::NameResponse {
                name: node.settings().name.clone(),
                protocol_version: netdiv_proto::PROTOCOL_VERSION,
            }),
        ),
        Some(quic_request::Kind::Info(_)) => (
            "Info",
            quic_response::Kind::Info(node.info(crate::host::nic::interfaces())),
        ),
        None => ("other", quic_response::Kind::Error("empty request".into())),
    };
    // A Name or Info stream carries that one request and nothing more.
    match next_frame(&mut recv, &mut decoder).await {
        Ok(None) => {}
        Ok(Some(_)) => return refused(&mut send, BadRequest::MoreThanOne.to_string()).await,
        Err(reason) => return refused(&mut send, reason.to_string()).await,
    }
    send.write_all(&response(answer)).await?;
    // Delivery is waited for outside the time limit.
    tokio::spawn(async move {
        let _open = open;
        let _ = finish(send).await;
    });
    Ok(Served(method))
}

/// [`refuse`] for the policy: the error, as the request's outcome.
async fn refused(send: &mut quinn::SendStream, reason: String) -> Result<Served, BoxError> {
    Err(format!("{:#}", refuse(send, reason).await).into())
}

/// Finishes a stream and waits until the client has every byte (the
/// connection may close next).
async fn finish(mut send: quinn::SendStream) -> Result<()> {
    send.finish()?;
    let _ = tokio::time::timeout(QUIC_DELIVERY_GRACE, send.stopped()).await;
    Ok(())
}

/// A query stream: `first` and every further `Query` frame the client
/// writes are submitted as they arrive, and completions go back as they
/// come, batched into frames. Once the client finishes its side (or the
/// node closes) and every submitted sample is answered, the node finishes
/// too. A bad frame stops the reading: the samples already submitted are
/// still answered, then an error frame ends the stream.
async fn serve_queries(
    first: pb::Query,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut decoder: FrameDecoder,
    node: &Node,
    mut closing: watch::Receiver<bool>,
) -> Result<()> {
    let (reply, replies) = mpsc::unbounded_channel();
    let reply = ReplyTo::new(reply);
    let unread = Unread::new(node.settings().limits.max_unread_answers);
    unread.submitted(first.samples.len());
    node.submit_query(first, &reply);
    let unread = &unread;
    // Owns `reply`: once reading ends and every submitted sample has been
    // answered, the channel closes and the writer ends.
    let reading = async move {
        loop {
            // A client that does not read its answers is not read either:
            // QUIC flow control then holds it back.
            tokio::select! {
                _ = unread.room() => {}
                _ = closing.wait_for(|c| *c) => return Ok(()),
            }
            let request = tokio::select! {
                request = next_frame(&mut recv, &mut decoder) => request,
                _ = closing.wait_for(|c| *c) => return Ok(()),
            };
            let request = match request {
                Ok(Some(request)) => request,
                Ok(None) => return Ok(()),
                Err(reason) => return Err(reason.to_string()),
            };
            if let Some(msg) = version_mismatch(request.protocol_version) {
                return Err(msg);
            }
            match request.kind {
                Some(quic_request::Kind::Query(query)) => {
                    unread.submitted(query.samples.len());
                    node.submit_query(query, &reply);
                }
                _ => return Err(BadRequest::NotAQuery.to_string()),
            }
        }
    };
    let gone = send.stopped();
    let writing = async {
        let mut answers = Answers::new(replies, node);
        tokio::pin!(gone);
        loop {
            // A client gone (the stream stopped, the connection lost) is
            // seen at once, not at the next answer minutes later: the
            // answers' receiver is dropped, and the token samples sent on
            // this stream are dropped with it (`crate::reply`).
            let batch = tokio::select! {
                batch = answers.next(unread) => batch,
                _ = &mut gone => anyhow::bail!("the client stopped the stream or left"),
            };
            let Some(batch) = batch else { break };
            let owed = Unread::answers(&batch);
            send.write_all_chunks(&mut [response(quic_response::Kind::Completions(batch))])
                .await?;
            unread.written(owed);
        }
        anyhow::Ok(())
    };
    let (read, written) = tokio::join!(reading, writing);
    written?;
    if let Err(reason) = read {
        return Err(refuse(&mut send, reason).await);
    }
    finish(send).await
}
