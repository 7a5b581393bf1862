//! `sut-node`: the SUT-side daemon.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use netdiv_proto::pb::sut_node_server::SutNodeServer;
use sut_node::config::{Cli, NodeConfig, Transport};
use sut_node::node::{Node, NodeSettings};
use sut_node::server::{grpc::GrpcService, quic};
use sut_node::tls::{dev_certificates, TlsFiles};
use tokio::sync::watch;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sut-node: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn tls_files(cli: &Cli) -> Result<Option<TlsFiles>> {
    if let Some(dir) = &cli.dev_tls {
        return dev_certificates(dir, cli.require_client_cert).map(Some);
    }
    Ok(match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: cli.client_ca.clone(),
        }),
        _ => None,
    })
}

/// SIGTERM and SIGINT, caught from before the node reports ready: a stop
/// that comes right after readiness must drain, not kill, the node.
struct StopSignals {
    term: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("SIGTERM handler")?,
            interrupt: signal(SignalKind::interrupt()).context("SIGINT handler")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let mut stop = StopSignals::install()?;
    let config = NodeConfig::from_cli(cli)?;
    let cli = &config.cli;
    if cli.client_ca.is_some() && cli.tls_cert.is_none() {
        bail!("--client-ca needs --tls-cert and --tls-key");
    }
    let tls = tls_files(cli)?;
    let backend = config.backend.build()?;
    let node = Node::start(
        NodeSettings {
            name: cli.name.clone(),
            benchmark: config.benchmark.clone(),
            response_codec: config.response_codec,
            max_sample_bytes: config.max_sample_bytes,
            batching: config.batching,
        },
        backend,
    );
    let (closing_tx, closing) = watch::channel(false);
    let (health, health_service) = tonic_health::server::health_reporter();

    let mut grpc_addr: Option<SocketAddr> = None;
    let mut tasks = Vec::new();
    if config.transport != Transport::Quic {
        let listener = tokio::net::TcpListener::bind(cli.listen)
            .await
            .with_context(|| format!("cannot listen on tcp {}", cli.listen))?;
        let addr = listener.local_addr()?;
        grpc_addr = Some(addr);
        // Large HTTP/2 windows: 150 KB samples would otherwise stall on
        // the 64 KB default, a window update per sample.
        let mut builder = tonic::transport::Server::builder()
            .initial_stream_window_size(Some(8 << 20))
            .initial_connection_window_size(Some(32 << 20));
        if let Some(tls) = &tls {
            let pem = tls.pem()?;
            let mut server_tls = tonic::transport::ServerTlsConfig::new()
                .identity(tonic::transport::Identity::from_pem(&pem.cert, &pem.key));
            if let Some(ca) = &pem.client_ca {
                server_tls = server_tls.client_ca_root(tonic::transport::Certificate::from_pem(ca));
            }
            builder = builder
                .tls_config(server_tls)
                .context("gRPC TLS configuration")?;
        }
        let service = SutNodeServer::new(GrpcService {
            node: node.clone(),
            closing: closing.clone(),
        })
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(256 << 20);
        let mut stop = closing.clone();
        let router = builder.add_service(health_service).add_service(service);
        tasks.push(tokio::spawn(async move {
            // Nagle would hold small writes (completions, window updates)
            // for the peer's delayed ACK: tens of milliseconds per query.
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            let result = router
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = stop.wait_for(|c| *c).await;
                })
                .await;
            if let Err(e) = result {
                eprintln!("sut-node: gRPC server: {e}");
            }
        }));
    }
    let mut quic_addr: Option<SocketAddr> = None;
    if config.transport != Transport::Grpc {
        let Some(tls) = &tls else {
            bail!("QUIC always runs over TLS: give --tls-cert/--tls-key or --dev-tls DIR (or --transport grpc)");
        };
        let crypto = tls.rustls_server(netdiv_proto::ALPN)?;
        let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(
            quinn::crypto::rustls::QuicServerConfig::try_from(crypto)
                .context("QUIC TLS configuration")?,
        ));
        server_config.transport_config(netdiv_proto::quic::transport_config(false));
        // Prefer the gRPC port number on UDP too: one port per node.
        let preferred = grpc_addr.unwrap_or(cli.listen);
        let endpoint = quinn::Endpoint::server(server_config.clone(), preferred)
            .or_else(|_| quinn::Endpoint::server(server_config, cli.listen))
            .with_context(|| format!("cannot listen on udp {}", cli.listen))?;
        quic_addr = Some(endpoint.local_addr()?);
        tasks.push(tokio::spawn(quic::serve(
            endpoint,
            node.clone(),
            closing.clone(),
        )));
    }
    health
        .set_service_status("netdiv.v1.SutNode", tonic_health::ServingStatus::Serving)
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let show = |a: Option<SocketAddr>| a.map_or("off".to_string(), |a| a.to_string());
    println!(
        "sut-node {} listening grpc={} quic={} tls={} backend={}",
        cli.name,
        show(grpc_addr),
        show(quic_addr),
        match &tls {
            None => "off",
            Some(t) if t.client_ca.is_some() => "mtls",
            Some(_) => "on",
        },
        node.info(Vec::new()).backend_detail
    );
    std::io::stdout().flush()?;
    let status = format!(
        "READY=1\nSTATUS=listening grpc={} quic={}",
        show(grpc_addr),
        show(quic_addr)
    );
    if let Err(e) = sut_node::notify::notify(&status) {
        eprintln!(
            "sut-node {}: cannot notify the service manager: {e}",
            cli.name
        );
    }

    stop.recv().await;
    let _ = sut_node::notify::notify("STOPPING=1\nSTATUS=draining in-flight samples");
    eprintln!(
        "sut-node {}: shutting down, draining in-flight samples",
        cli.name
    );
    health
        .set_service_status("netdiv.v1.SutNode", tonic_health::ServingStatus::NotServing)
        .await;
    node.begin_shutdown();
    if tokio::time::timeout(Duration::from_secs(30), node.drained())
        .await
        .is_err()
    {
        eprintln!(
            "sut-node {}: samples still in flight after 30 s; stopping anyway",
            cli.name
        );
    }
    closing_tx.send_replace(true);
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(8), task).await;
    }
    node.stop_devices();
    eprintln!("sut-node {}: stopped", cli.name);
    Ok(())
}
