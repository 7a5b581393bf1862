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
        let address =
            |key: &str| -> Option<SocketAddr> { ready[key].as_str().and_then(|v| v.parse().ok()) };
        Ok(NodeProcess {
            grpc: address("grpc"),
            quic: address("quic"),
            metrics: address("metrics"),
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
}

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
pub async fn grpc_client(node: &NodeProcess, cert: ClientCert) -> Result<SutNodeClient<Channel>> {
    let addr = node
        .grpc
        .ok_or_else(|| anyhow!("node has no gRPC listener"))?;
    let channel = match &node.certs {
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
    };
    Ok(SutNodeClient::new(channel)
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
    }
}
