//! At most so many open connections per transport: one past the limit is
//! closed at once (gRPC) or refused (QUIC), so a flood of connections costs
//! the node a socket each for an instant, not a connection's buffers and
//! tasks for as long as the flood goes on. Refusals are logged at most once
//! a second, with their count, so the flood does not fill the log either.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use netdiv_proto::tls_stream::{self, TlsStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The open-connection budget of one transport.
#[derive(Debug)]
pub(super) struct ConnectionLimit {
    slots: Arc<Semaphore>,
    limit: usize,
    transport: &'static str,
    node: String,
    refused: AtomicU64,
    last_logged: Mutex<Option<Instant>>,
}

impl ConnectionLimit {
    /// At most `limit` connections of `transport` on node `node`.
    pub(super) fn new(limit: usize, transport: &'static str, node: &str) -> Arc<ConnectionLimit> {
        Arc::new(ConnectionLimit {
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            transport,
            node: node.to_string(),
            refused: AtomicU64::new(0),
            last_logged: Mutex::new(None),
        })
    }

    /// A slot for one more connection, held until it is dropped; `None`
    /// (and the refusal counted) when every slot is taken.
    pub(super) fn admit(&self) -> Option<OwnedSemaphorePermit> {
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                self.refused(1);
                None
            }
        }
    }

    fn refused(&self, n: u64) {
        let total = self.refused.fetch_add(n, Ordering::Relaxed) + n;
        let mut last = self.last_logged.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            *last = Some(Instant::now());
            tracing::warn!(
                node = %self.node,
                transport = self.transport,
                event = "connection_refused",
                refused = total,
                "{} connections refused so far: the node holds {} {} connections, its limit",
                total,
                self.limit,
                self.transport
            );
        }
    }
}

/// A TCP connection that holds one slot of its transport's budget while
/// it is open.
#[derive(Debug)]
pub(super) struct CountedTcp {
    io: TcpStream,
    _slot: OwnedSemaphorePermit,
}

impl Connected for CountedTcp {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

impl AsyncRead for CountedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The connections `listener` accepts within `limit`, with Nagle off (it
/// would hold small writes for the peer's delayed ACK). Connections past
/// the limit are closed as soon as they are accepted; accept errors (out
/// of file descriptors, a connection reset before it was taken) are
/// waited out, not fatal.
pub(super) fn incoming(
    listener: TcpListener,
    limit: Arc<ConnectionLimit>,
) -> impl Stream<Item = io::Result<CountedTcp>> {
    futures::stream::unfold((listener, limit), |(listener, limit)| async move {
        loop {
            match listener.accept().await {
                Ok((io, _peer)) => {
                    let Some(slot) = limit.admit() else {
                        drop(io);
                        continue;
                    };
                    let _ = io.set_nodelay(true);
                    return Some((Ok(CountedTcp { io, _slot: slot }), (listener, limit)));
                }
                Err(e) => {
                    tracing::debug!(node = %limit.node, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    })
}

/// A TLS client that has not finished its handshake by then is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes run side by side, so that a slow or silent client holds up
/// no other; at most so many at once.
const TLS_HANDSHAKES_AT_ONCE: usize = 64;

/// The connections of `incoming` after each one's TLS handshake. A failed
/// handshake (wrong certificate, not TLS, too slow) is logged and its
/// connection closed; the server goes on.
pub(super) fn with_tls(
    incoming: impl Stream<Item = io::Result<CountedTcp>>,
    config: Arc<rustls::ServerConfig>,
    node: String,
) -> impl Stream<Item = io::Result<TlsStream<CountedTcp>>> {
    incoming
        .map(move |tcp| {
            let config = config.clone();
            async move {
                let tcp = tcp.map_err(|e| (None, e))?;
                let peer = tcp.io.peer_addr().ok();
                tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls_stream::accept(config, tcp))
                    .await
                    .unwrap_or_else(|_| {
                        Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("no TLS handshake within {TLS_HANDSHAKE_TIMEOUT:?}"),
                        ))
                    })
                    .map_err(|e| (peer, e))
            }
        })
        .buffer_unordered(TLS_HANDSHAKES_AT_ONCE)
        .filter_map(move |handshake| {
            let accepted = match handshake {
                Ok(stream) => Some(Ok(stream)),
                Err((peer, e)) => {
                    tracing::info!(
                        node = %node,
                        event = "tls_handshake_failed",
                        peer = ?peer,
                        "a gRPC client's TLS handshake failed: {e}"
                    );
                    None
                }
            };
            std::future::ready(accepted)
        })
}
