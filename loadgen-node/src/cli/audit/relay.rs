//! A TCP relay the audit puts between the LoadGen node and each gRPC
//! sut-node: it counts the bytes that cross it each way (what really goes
//! on the wire above TCP) and can hold every chunk for a fixed delay each
//! way, the userspace stand-in for a longer fabric where netem is missing.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Bytes that crossed a relay, each way.
#[derive(Debug, Default)]
pub(crate) struct Crossed {
    /// LoadGen node to sut-node (queries).
    pub(crate) to_node: AtomicU64,
    /// sut-node to LoadGen node (answers).
    pub(crate) from_node: AtomicU64,
}

/// A running relay: connections to `listen` are forwarded to the node.
pub(crate) struct Relay {
    /// Where the LoadGen node connects instead of the node.
    pub(crate) listen: SocketAddr,
    /// What crossed it so far.
    pub(crate) crossed: Arc<Crossed>,
    task: JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a relay on loopback to `node`, holding each chunk `delay` in
/// each direction.
pub(crate) async fn start(node: SocketAddr, delay: Duration) -> std::io::Result<Relay> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let listen = listener.local_addr()?;
    let crossed = Arc::new(Crossed::default());
    let counts = crossed.clone();
    let task = tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let counts = counts.clone();
            tokio::spawn(async move {
                let Ok(upstream) = TcpStream::connect(node).await else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let (client_read, client_write) = client.into_split();
                let (node_read, node_write) = upstream.into_split();
                let up = pump(client_read, node_write, delay, counts.clone(), true);
                let down = pump(node_read, client_write, delay, counts, false);
                let _ = tokio::join!(up, down);
            });
        }
    });
    Ok(Relay {
        listen,
        crossed,
        task,
    })
}

/// Copies one direction, each chunk written `delay` after it was read,
/// in order.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    delay: Duration,
    counts: Arc<Crossed>,
    to_node: bool,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let counter = if to_node {
                    &counts.to_node
                } else {
                    &counts.from_node
                };
                counter.fetch_add(n as u64, Ordering::Relaxed);
                let due = tokio::time::Instant::now() + delay;
                if tx.send((due, buffer[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}
