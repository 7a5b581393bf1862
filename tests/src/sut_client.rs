//! Test and benchmark clients of a real `sut-node` process: start one on
//! port 0 and read where it listens, then talk gRPC or QUIC to it. The
//! QDL will have its own production clients; these stay minimal.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use netdiv_proto::framing::{self, FrameDecoder};
use netdiv_proto::pb::{self, quic_request, quic_response, sut_node_client::SutNodeClient};
use netdiv_proto::transport::MAX_MESSAGE_BYTES;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A running sut-node; killed when dropped.
pub struct NodeProcess {
    pub child: Child,
    pub name: String,
    pub grpc: Option<SocketAddr>,
    pub quic: Option<SocketAddr>,
    /// Its metrics endpoint, when started with `--metrics-listen`.
    pub metrics: Option<SocketAddr>,
    /// The threads its network I/O runs on, as its ready file says.
    pub io_threads: usize,
    /// Whether it runs samples on its I/O thread, as its ready file says.
    pub run_on_io_thread: bool,
    /// The --dev-tls directory, when TLS is on.
    pub certs: Option<PathBuf>,
    /// The node's stderr (JSON log records), a file removed with the node
    /// (see [`crate::files::test_file`]).
    stderr: tempfile::TempPath,
}

/// How long a node may take to report ready (a node in front of a
/// serving engine waits for the engine first).
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl NodeProcess {
    /// Starts `sut-node --name NAME ARGS...` and waits until it is ready
    /// (its `--ready-file`). `certs` adds `--dev-tls certs`.
    pub fn start(name: &str, certs: Option<&Path>, args: &[&str]) -> Result<NodeProcess> {
        let mut all = vec!["--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        NodeProcess::start_with(name, certs, &all, None)
    }

    /// Starts `sut-node --name NAME ARGS...` (ARGS say where it listens),
    /// inside network namespace `netns` when one is given.
    pub fn start_with(
        name: &str,
        certs: Option<&Path>,
        args: &[&str],
        netns: Option<&Path>,
    ) -> Result<NodeProcess> {
        let bin = crate::sut_node_bin()?;
        let stderr_file = crate::files::test_file(&format!("sut-node-{name}"), ".stderr")?;
        let ready_file =
            crate::files::test_file(&format!("sut-node-{name}"), ".ready.json")?.into_temp_path();
        // The node writes it once listening; it must not exist before.
        std::fs::remove_file(&ready_file)?;
        let mut cmd = match netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec"]).arg(ns).arg(&bin);
                cmd
            }
            None => Command::new(&bin),
        };
        cmd.args(["--name", name, "--log-format", "json", "--ready-file"])
            .arg(&ready_file)
            .args(args);
        if let Some(dir) = certs {
            cmd.arg("--dev-tls").arg(dir);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr_file.reopen()?)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let ready = match sut_node::ready::wait(&mut child, &ready_file, READY_TIMEOUT) {
            Ok(ready) => ready,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "sut-node {name} did not start: {e}\n{}",
                    std::fs::read_to_string(stderr_file.path()).unwrap_or_default()
                );
            }
        };
        Ok(NodeProcess {
            grpc: ready.grpc,
            quic: ready.quic,
            metrics: ready.metrics,
            io_threads: ready.io_threads,
            run_on_io_thread: ready.run_on_io_thread,
            name: name.to_string(),
            certs: certs.map(Path::to_path_buf),
            child,
            stderr: stderr_file.into_temp_path(),
        })
    }

    /// What the node wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The node's log records so far (its `--log-format json` lines).
    pub fn events(&self) -> Vec<serde_json::Value> {
        crate::log_records::parse(&self.stderr())
    }

    /// `step`'s result, or an error naming `step` and ending with the
    /// node's last log lines if it takes longer than [`STEP_LIMIT`]: a
    /// client that waits on a node without a bound would turn a lost
    /// answer into the test runner's anonymous timeout.
    pub async fn within<T>(
        &self,
        step: &str,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(STEP_LIMIT, work).await {
            Ok(result) => result.with_context(|| format!("{step} (node {})", self.name)),
            Err(_) => Err(StepTimedOut {
                step: step.to_string(),
                node: self.name.clone(),
                log_tail: crate::text::tail(&self.stderr(), 20),
            }
            .into()),
        }
    }

    /// Waits (up to `limit`) until the node's gRPC health says `wanted`
    /// for its service, asking every 200 ms; blocks the calling thread.
    pub fn wait_for_health(
        &self,
        wanted: tonic_health::pb::health_check_response::ServingStatus,
        limit: std::time::Duration,
    ) -> Result<()> {
        use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
        let addr = self.grpc.context("no gRPC address")?;
        tokio::runtime::Runtime::new()?.block_on(async {
            let channel = Channel::from_shared(format!("http://{addr}"))?
                .connect()
                .await?;
            let mut health = HealthClient::new(channel);
            let start = std::time::Instant::now();
            loop {
                let asked = HealthCheckRequest {
                    service: "netdiv.v1.SutNode".into(),
                };
                let status = health.check(asked).await?.into_inner().status;
                if status == wanted as i32 {
                    return Ok(());
                }
                anyhow::ensure!(
                    start.elapsed() < limit,
                    "node {} health is {status}, not {wanted:?}, after {limit:?}",
                    self.name
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        })
    }
}

/// How long one step of a test's talk with a node may take (a handshake,
/// a query of a few samples): far above what it takes on a loaded CI
/// machine, far below the test runner's hang guard.
pub const STEP_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A step of [`NodeProcess::within`] that outlived [`STEP_LIMIT`]: a
/// type of its own, so a test that expects a step to fail can tell a
/// refusal from a hang.
#[derive(Debug)]
pub struct StepTimedOut {
    pub step: String,
    pub node: String,
    pub log_tail: String,
}

impl std::fmt::Display for StepTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} did not finish within {} s; node {}'s log ends:\n{}",
            self.step,
            STEP_LIMIT.as_secs(),
            self.node,
            self.log_tail
        )
    }
}

impl std::error::Error for StepTimedOut {}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The stderr file goes when `self.stderr` is dropped, after this.
    }
}

/// A client certificate to present, from a --dev-tls directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCert {
    None,
    Dev,
}

/// A gRPC channel to `node` (TLS when the node has certificates).
pub async fn grpc_channel(node: &NodeProcess, cert: ClientCert) -> Result<Channel> {
    let addr = node
        .grpc
        .ok_or_else(|| anyhow!("node has no gRPC listener"))?;
    Ok(match &node.certs {
        None => {
            Channel::from_shared(format!("http://{addr}"))?
                .connect()
                .await?
        }
        Some(dir) => {
            let mut tls = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(std::fs::read(dir.join("ca.pem"))?))
                .domain_name("localhost");
            if cert == ClientCert::Dev {
                tls = tls.identity(Identity::from_pem(
                    std::fs::read(dir.join("client.pem"))?,
                    std::fs::read(dir.join("client.key"))?,
                ));
            }
            Channel::from_shared(format!("https://{addr}"))?
                .tls_config(tls)?
                .connect()
                .await?
        }
    })
}

/// The node's gRPC client over [`grpc_channel`].
pub async fn grpc_client(node: &NodeProcess, cert: ClientCert) -> Result<SutNodeClient<Channel>> {
    Ok(SutNodeClient::new(grpc_channel(node, cert).await?)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// A request with the protocol-version header set.
pub fn versioned<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        netdiv_proto::VERSION_HEADER,
        netdiv_proto::PROTOCOL_VERSION
            .to_string()
            .parse()
            .expect("ascii"),
    );
    request
}

/// Whether `text` says a TLS server refused a client for not presenting a
/// certificate: TLS 1.3's `certificate_required` alert (116), as rustls
/// names it ("CertificateRequired") or as QUIC carries it ("the
/// cryptographic handshake failed: error 116").
pub fn is_certificate_refusal(text: &str) -> bool {
    let said = text.to_lowercase().replace(['_', ' '], "");
    said.contains("certificaterequired") || said.contains("error116")
}

/// A TLS 1.3 handshake with a node's gRPC listener (`grpc`, its
/// `--dev-tls` folder `certs`) without a client
/// certificate, then one read: the error the node's TLS answered with
/// (e.g. "received fatal alert: CertificateRequired"), or `None` if the
/// node let the connection stand. A plain rustls client, because gRPC
/// clients report a refused handshake only as "connection closed".
pub fn grpc_tls_refusal_at(
    grpc: Option<SocketAddr>,
    certs: Option<&Path>,
) -> Result<Option<String>> {
    use std::io::{Read, Write};
    let addr = grpc.ok_or_else(|| anyhow!("node has no gRPC listener"))?;
    let dir = certs.ok_or_else(|| anyhow!("the node has no certificates"))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem"))? {
        roots.add(c?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let mut tls = rustls::ClientConnection::new(Arc::new(config), name)?;
    let mut tcp = std::net::TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
    // The HTTP/2 preface: the server judges the client's (empty)
    // certificate when the handshake finishes, and answers with an alert.
    if let Err(e) = stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") {
        return Ok(Some(e.to_string()));
    }
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Err(e) => Ok(Some(e.to_string())),
        Ok(0) => Ok(Some("closed without an alert".into())),
        Ok(_) => Ok(None),
    }
}

/// A QUIC connection to `node`, offering `alpn`.
pub async fn quic_connect(
    node: &NodeProcess,
    cert: ClientCert,
    alpn: &[u8],
) -> Result<quinn::Connection> {
    let addr = node
        .quic
        .ok_or_else(|| anyhow!("node has no QUIC listener"))?;
    let dir = node
        .certs
        .as_ref()
        .ok_or_else(|| anyhow!("QUIC needs the node's certificates"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem"))? {
        roots.add(c?)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots);
    let mut crypto = match cert {
        ClientCert::None => builder.with_no_client_auth(),
        ClientCert::Dev => builder.with_client_auth_cert(
            CertificateDer::pem_file_iter(dir.join("client.pem"))?
                .collect::<Result<Vec<_>, _>>()?,
            PrivateKeyDer::from_pem_file(dir.join("client.key"))?,
        )?,
    };
    crypto.alpn_protocols = vec![alpn.to_vec()];
    let config = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(crypto)?,
    ));
    let mut endpoint = netdiv_proto::transport::quic_endpoint("127.0.0.1:0".parse()?, None)?;
    endpoint.set_default_client_config(config);
    Ok(endpoint.connect(addr, "localhost")?.await?)
}

/// Sends raw bytes on a new stream and reads every response frame.
pub async fn quic_raw(conn: &quinn::Connection, bytes: &[u8]) -> Result<Vec<pb::QuicResponse>> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(bytes).await?;
    send.finish()?;
    let mut decoder = FrameDecoder::new(MAX_MESSAGE_BYTES);
    let mut responses = Vec::new();
    while let Some(chunk) = recv.read_chunk(1 << 20, true).await? {
        decoder.push(&chunk.bytes);
        while let Some(frame) = decoder.next_frame()? {
            responses.push(framing::decode(frame, "QuicResponse")?);
        }
    }
    decoder.finish()?;
    Ok(responses)
}

/// One request over QUIC, framed properly.
pub async fn quic_request(
    conn: &quinn::Connection,
    kind: quic_request::Kind,
) -> Result<Vec<pb::QuicResponse>> {
    let request = pb::QuicRequest {
        protocol_version: netdiv_proto::PROTOCOL_VERSION,
        kind: Some(kind),
    };
    quic_raw(conn, &framing::encode(&request)).await
}

/// The completions of a query sent over QUIC; errors on an error frame.
pub async fn quic_query(conn: &quinn::Connection, query: pb::Query) -> Result<Vec<pb::Completion>> {
    let mut completions = Vec::new();
    for r in quic_request(conn, quic_request::Kind::Query(query)).await? {
        match r.kind {
            Some(quic_response::Kind::Completions(b)) => completions.extend(b.completions),
            Some(quic_response::Kind::Error(e)) => bail!("node refused the query: {e}"),
            other => bail!("unexpected response {other:?}"),
        }
    }
    Ok(completions)
}

/// Sends `queries` on one Infer stream and collects the messages that
/// come back, in order, until `enough` says so (or the node ends the
/// stream); each message must come within 30 s.
pub async fn grpc_collect(
    node: &NodeProcess,
    cert: ClientCert,
    queries: Vec<pb::Query>,
    enough: impl Fn(&[pb::Completion]) -> bool,
) -> Result<Vec<pb::Completion>> {
    use tokio_stream::StreamExt;
    let mut client = grpc_client(node, cert).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(queries.len().max(1));
    for q in queries {
        tx.send(q).await?;
    }
    let mut stream = client
        .infer(versioned(tokio_stream::wrappers::ReceiverStream::new(rx)))
        .await?
        .into_inner();
    let mut got = Vec::new();
    while !enough(&got) {
        match tokio::time::timeout(std::time::Duration::from_secs(30), stream.next()).await? {
            Some(batch) => got.extend(batch?.completions),
            None => break,
        }
    }
    drop(tx);
    Ok(got)
}

/// A query of plain samples with ids `first..` and the given inputs.
pub fn plain_query(query_id: u64, first_id: u64, inputs: &[Vec<u8>]) -> pb::Query {
    pb::Query {
        query_id,
        samples: inputs
            .iter()
            .enumerate()
            .map(|(i, data)| pb::Sample {
                response_id: first_id + i as u64,
                data: data.clone().into(),
                codec: 0,
                decoded_size: 0,
            })
            .collect(),
        ..Default::default()
    }
}

/// What a fault test waits for at a node before it strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Busy {
    /// A sample in flight at the node.
    InFlight,
    /// A sample in flight at the node, and a first token already sent
    /// (a token stream is under way).
    Streaming,
}

/// Sends `signal` to process `pid` at the moment the sut-node whose
/// metrics endpoint is `metrics` is `busy` (its `netdiv_node_*` metrics,
/// polled every 5 ms), instead of after a guessed sleep; how long that
/// took. An error when the moment does not come within `within`.
pub fn signal_when_busy(
    pid: u32,
    metrics: SocketAddr,
    busy: Busy,
    signal: libc::c_int,
    within: std::time::Duration,
) -> Result<std::time::Duration> {
    let waited = wait_until_busy(metrics, busy, within)?;
    // SAFETY: kill(2) on a process the caller started and has not reaped.
    if unsafe { libc::kill(pid as libc::pid_t, signal) } != 0 {
        bail!("cannot signal {pid}: {}", std::io::Error::last_os_error());
    }
    Ok(waited)
}

/// Waits until the sut-node whose metrics endpoint is `metrics` is
/// `busy` (polled every 5 ms); how long that took. An error when the
/// moment does not come within `within`.
pub fn wait_until_busy(
    metrics: SocketAddr,
    busy: Busy,
    within: std::time::Duration,
) -> Result<std::time::Duration> {
    let start = std::time::Instant::now();
    loop {
        if let Ok(scrape) = crate::prometheus::scrape(metrics) {
            let in_flight = scrape.sum("netdiv_node_in_flight_samples") > 0.0;
            let streaming = scrape.sum("netdiv_node_first_tokens_total") > 0.0;
            if in_flight && (busy == Busy::InFlight || streaming) {
                return Ok(start.elapsed());
            }
        }
        if start.elapsed() > within {
            bail!("the node at {metrics} was not {busy:?} within {within:?}: nothing to strike");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::is_certificate_refusal;

    #[test]
    fn only_the_missing_certificate_counts_as_that_refusal() {
        assert!(is_certificate_refusal(
            "received fatal alert: CertificateRequired"
        ));
        assert!(is_certificate_refusal(
            "aborted by peer: the cryptographic handshake failed: error 116: peer sent no certificates"
        ));
        // Other TLS failures, and plain network ones, are not it.
        assert!(!is_certificate_refusal(
            "invalid peer certificate: UnknownIssuer"
        ));
        assert!(!is_certificate_refusal(
            "the cryptographic handshake failed: error 42: bad certificate"
        ));
        assert!(!is_certificate_refusal("connection refused (os error 111)"));
        assert!(!is_certificate_refusal(
            "operation was canceled: connection closed"
        ));
    }
}
