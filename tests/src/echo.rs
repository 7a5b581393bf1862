//! The floor of a query's round trip on a machine: a bare echo of one
//! message over the transports netdiv uses, with the same runtime and the
//! same transport settings, between two processes, with nothing of netdiv
//! in between. `wire-bench` measures it in the same run as the query
//! through the QDL and reports what netdiv adds above it.
//!
//! * TCP (what gRPC runs on): one connection, `TCP_NODELAY`, each message
//!   a 4-byte big-endian length and its bytes, echoed whole.
//! * QUIC (quinn): one connection with netdiv's transport settings and
//!   TLS 1.3, one long-lived bidirectional stream carrying the same
//!   frames (the QDL's QUIC link also keeps its streams open).
//!
//! The server is a separate process ([`EchoServer::start`] runs the
//! calling program again with `--echo-server`), on a multi-threaded tokio
//! runtime as the sut-node's servers are, with as many threads as the
//! node it stands beside (`--io-threads`); the client runs where it
//! waits, on a single-threaded runtime, as the bare Name() probe does.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The ALPN of the echo server.
const ALPN: &[u8] = b"netdiv-echo";

/// Which transport an echo runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoTransport {
    /// TCP, as gRPC's HTTP/2 runs on.
    Tcp,
    /// QUIC (quinn), with TLS 1.3.
    Quic,
}

impl EchoTransport {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            EchoTransport::Tcp => "tcp",
            EchoTransport::Quic => "quic",
        }
    }

    /// The transport named `name`.
    pub fn parse(name: &str) -> Result<EchoTransport> {
        match name {
            "tcp" => Ok(EchoTransport::Tcp),
            "quic" => Ok(EchoTransport::Quic),
            other => bail!("unknown echo transport {other:?} (expected tcp or quic)"),
        }
    }
}

/// An echo server in a process of its own; killed when dropped.
#[derive(Debug)]
pub struct EchoServer {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl EchoServer {
    /// Runs this program again as `PROGRAM --echo-server TRANSPORT
    /// --echo-dir DIR [--echo-io-threads N]` (QUIC's development
    /// certificates go in `dir`; `io_threads` as a sut-node's, one per
    /// CPU when `None`) and waits for the address it prints.
    pub fn start(
        transport: EchoTransport,
        dir: &Path,
        io_threads: Option<usize>,
    ) -> Result<EchoServer> {
        let program = std::env::current_exe().context("this program's path")?;
        let mut command = Command::new(program);
        command
            .args(["--echo-server", transport.name(), "--echo-dir"])
            .arg(dir);
        if let Some(n) = io_threads {
            command.args(["--echo-io-threads", &n.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the echo server")?;
        let stdout = child.stdout.take().context("the echo server's stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .context("reading the echo server's address")?;
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok());
        match addr {
            Some(addr) => Ok(EchoServer { child, addr }),
            None => {
                let _ = child.kill();
                bail!("the echo server said {line:?}, not \"listening ADDR\"")
            }
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's side, run by the program when given `--echo-server`:
/// listens on loopback port 0, prints `listening ADDR`, and echoes until
/// its stdin closes (the parent ended). `io_threads`: the runtime's
/// threads, one per CPU when `None`, as a sut-node's.
pub fn serve(transport: EchoTransport, dir: &Path, io_threads: Option<usize>) -> Result<()> {
    let runtime = sut_node::server::io_runtime(io_threads)?;
    runtime.block_on(async {
        let addr: SocketAddr = "127.0.0.1:0".parse()?;
        let server = match transport {
            EchoTransport::Tcp => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                println!("listening {}", listener.local_addr()?);
                tokio::spawn(serve_tcp(listener))
            }
            EchoTransport::Quic => {
                let endpoint = quic_server(addr, dir)?;
                println!("listening {}", endpoint.local_addr()?);
                tokio::spawn(serve_quic(endpoint))
            }
        };
        // The parent holds our stdin: its end is ours.
        tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
        })
        .await?;
        server.abort();
        Ok(())
    })
}

async fn serve_tcp(listener: tokio::net::TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        tokio::spawn(echo_frames(read, write));
    }
}

async fn serve_quic(endpoint: quinn::Endpoint) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            let Ok(connection) = incoming.await else {
                return;
            };
            while let Ok((send, recv)) = connection.accept_bi().await {
                tokio::spawn(echo_frames(recv, send));
            }
        });
    }
}

/// Echoes each length-prefixed frame back until the stream ends.
async fn echo_frames(mut read: impl AsyncRead + Unpin, mut write: impl AsyncWrite + Unpin) {
    let mut frame = Vec::new();
    while read_frame(&mut read, &mut frame).await.is_ok() {
        if write_frame(&mut write, &frame).await.is_err() {
            return;
        }
    }
}

async fn read_frame(read: &mut (impl AsyncRead + Unpin), frame: &mut Vec<u8>) -> Result<()> {
    let length = read.read_u32().await? as usize;
    frame.resize(length, 0);
    read.read_exact(frame).await?;
    Ok(())
}

async fn write_frame(write: &mut (impl AsyncWrite + Unpin), frame: &[u8]) -> Result<()> {
    let mut message = Vec::with_capacity(4 + frame.len());
    message.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    message.extend_from_slice(frame);
    write.write_all(&message).await?;
    write.flush().await?;
    Ok(())
}

/// A QUIC server endpoint with netdiv's transport settings and the
/// development certificates in `dir`.
fn quic_server(addr: SocketAddr, dir: &Path) -> Result<quinn::Endpoint> {
    let tls = sut_node::tls::dev_certificates(dir, false)?.rustls_server(ALPN)?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(netdiv_proto::transport::quic_server_config(16, None));
    Ok(netdiv_proto::transport::quic_endpoint(addr, Some(config))?)
}

/// `count` round trips of a `size`-byte message to the echo server at
/// `addr` (QUIC: its certificates in `dir`), each timed from the first
/// byte written to the last byte read back.
pub fn round_trips(
    transport: EchoTransport,
    addr: SocketAddr,
    dir: &Path,
    size: usize,
    count: usize,
) -> Result<Vec<Duration>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match transport {
            EchoTransport::Tcp => {
                let stream = tokio::net::TcpStream::connect(addr).await?;
                stream.set_nodelay(true)?;
                let (read, write) = stream.into_split();
                time_round_trips(read, write, size, count).await
            }
            EchoTransport::Quic => {
                let connection = quic_client(addr, dir).await?;
                let (send, recv) = connection.open_bi().await?;
                time_round_trips(recv, send, size, count).await
            }
        }
    })
}

async fn time_round_trips(
    mut read: impl AsyncRead + Unpin,
    mut write: impl AsyncWrite + Unpin,
    size: usize,
    count: usize,
) -> Result<Vec<Duration>> {
    let message = vec![7u8; size];
    let mut back = Vec::with_capacity(size);
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        write_frame(&mut write, &message).await?;
        read_frame(&mut read, &mut back).await?;
        times.push(started.elapsed());
        if back != message {
            bail!("the echo changed the message");
        }
    }
    Ok(times)
}

async fn quic_client(addr: SocketAddr, dir: &Path) -> Result<quinn::Connection> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem"))? {
        roots.add(c?)?;
    }
    let mut crypto = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    crypto.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(crypto)?,
    ));
    config.transport_config(netdiv_proto::transport::quic_client_config(addr));
    let mut endpoint = netdiv_proto::transport::quic_endpoint("127.0.0.1:0".parse()?, None)?;
    endpoint.set_default_client_config(config);
    endpoint
        .connect(addr, "localhost")?
        .await
        .map_err(|e| anyhow!("connecting to the QUIC echo at {addr}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both transports echo in this process too (the server on its own
    /// runtime thread).
    #[test]
    fn both_transports_echo_their_frames() {
        let dir = tempfile::tempdir().unwrap();
        for transport in [EchoTransport::Tcp, EchoTransport::Quic] {
            let (tx, rx) = std::sync::mpsc::channel();
            let certs = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
                    match transport {
                        EchoTransport::Tcp => {
                            let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
                            tx.send(listener.local_addr().unwrap()).unwrap();
                            serve_tcp(listener).await;
                        }
                        EchoTransport::Quic => {
                            let endpoint = quic_server(addr, &certs).unwrap();
                            tx.send(endpoint.local_addr().unwrap()).unwrap();
                            serve_quic(endpoint).await;
                        }
                    }
                });
            });
            let addr = rx.recv().unwrap();
            let times = round_trips(transport, addr, dir.path(), 57, 20).unwrap();
            assert_eq!(times.len(), 20, "{transport:?}");
        }
        assert!(EchoTransport::parse("udp").is_err());
    }
}
