//! `sut-node`: the SUT-side daemon. Its life in four steps: start the node
//! core, start the servers, report ready, and on SIGTERM drain and close.

mod cli;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;
use cli::{node_config, Cli};
use netdiv_proto::transport::{NODE_DRAIN_TIMEOUT, NODE_SERVER_CLOSE_TIMEOUT};
use sut_node::config::{NodeConfig, Transport};
use sut_node::node::{Node, NodeSettings};
use sut_node::server::{grpc, quic};
use sut_node::tls::{dev_certificates, TlsFiles};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

/// The gRPC health service name the node reports under.
const HEALTH_SERVICE: &str = "netdiv.v1.SutNode";

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let identifier = format!("sut-node-{}", cli.name);
    if let Err(e) = netdiv_proto::logging::init(&cli.log, &identifier) {
        eprintln!("sut-node: error: {e}");
        return std::process::ExitCode::from(2);
    }
    // The settings come first: they say how many I/O threads to start.
    let config = match node_config(&cli) {
        Ok(config) => config,
        Err(e) => {
            tracing::error!("{e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime = sut_node::server::io_runtime(config.io_threads).expect("tokio runtime");
    let result = runtime.block_on(run(cli, config));
    // A stop while a serving engine was still loading leaves the wait for
    // it on a blocking thread: do not wait for that thread.
    runtime.shutdown_background();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn tls_files(cli: &Cli) -> Result<Option<TlsFiles>> {
    if cli.client_ca.is_some() && cli.tls_cert.is_none() {
        bail!("--client-ca needs --tls-cert and --tls-key");
    }
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

/// The servers a node runs, and how to stop them.
struct Servers {
    grpc: Option<SocketAddr>,
    quic: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    closing: watch::Sender<bool>,
    health: HealthReporter,
}

async fn run(cli: Cli, config: NodeConfig) -> Result<()> {
    let mut stop = StopSignals::install()?;
    let tls = tls_files(&cli)?;
    let _cpu_latency = sut_node::host::cpu_latency::hold_requested(cli.cpu_latency_us)?;
    let settings = NodeSettings {
        name: cli.name.clone(),
        benchmark: config.benchmark,
        response_codec: config.response_codec,
        max_sample_bytes: config.max_sample_bytes,
        batching: config.batching,
        limits: config.limits,
        run_on_io_thread: config.run_on_io_thread,
    };
    // A serving engine may take minutes to load its model: wait for it
    // off the runtime's threads, and let a stop signal end the wait.
    let backend = config.backend.clone();
    let starting = tokio::task::spawn_blocking(move || Node::from_config(settings, &backend));
    let node = tokio::select! {
        node = starting => node.context("starting the node")??,
        _ = stop.recv() => bail!("stopped while the backend was starting"),
    };
    let servers = start_servers(&cli, &config, tls.as_ref(), &node).await?;
    report_ready(&cli, tls.as_ref(), &node, &servers)?;
    let engine_health = watch_engine_health(&node, servers.health.clone());
    stop.recv().await;
    if let Some(task) = engine_health {
        task.abort();
    }
    drain_and_close(&node, servers).await;
    tracing::info!(node = %node.settings().name, event = "stopped", "stopped");
    Ok(())
}

/// Starts gRPC and QUIC as configured, on one port number where it is
/// free on both TCP and UDP, and marks the node serving.
async fn start_servers(
    cli: &Cli,
    config: &NodeConfig,
    tls: Option<&TlsFiles>,
    node: &Arc<Node>,
) -> Result<Servers> {
    let listen = cli.listen;
    let (closing_tx, closing) = watch::channel(false);
    let (health, health_service) = tonic_health::server::health_reporter();
    let mut servers = Servers {
        grpc: None,
        quic: None,
        metrics: None,
        tasks: Vec::new(),
        closing: closing_tx,
        health,
    };
    if config.transport != Transport::Quic {
        let (addr, task) =
            grpc::start(listen, tls, node.clone(), closing.clone(), health_service).await?;
        servers.grpc = Some(addr);
        servers.tasks.push(task);
    }
    if config.transport != Transport::Grpc {
        let Some(tls) = tls else {
            bail!("QUIC always runs over TLS: give --tls-cert/--tls-key or --dev-tls DIR (or --transport grpc)");
        };
        let preferred = servers.grpc.unwrap_or(listen);
        let (addr, task) = quic::start(listen, preferred, tls, node.clone(), closing)?;
        servers.quic = Some(addr);
        servers.tasks.push(task);
    }
    if let Some(listen) = cli.metrics_listen {
        let info = node.info(Vec::new());
        let registry = node
            .metrics()
            .registry(&info.name, &info.backend, &info.benchmark);
        let (addr, task) =
            sut_node::metrics::serve(listen, Arc::new(registry), servers.closing.subscribe())
                .await
                .with_context(|| format!("--metrics-listen {listen}"))?;
        servers.metrics = Some(addr);
        servers.tasks.push(task);
    }
    for service in [HEALTH_SERVICE, ""] {
        servers
            .health
            .set_service_status(service, ServingStatus::Serving)
            .await;
    }
    Ok(servers)
}

/// Time between two health checks of a serving engine.
const ENGINE_HEALTH_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// For a device with its own health (a serving engine): the node's health
/// follows it, checked every [`ENGINE_HEALTH_POLL`], and a change is logged.
fn watch_engine_health(node: &Arc<Node>, health: HealthReporter) -> Option<JoinHandle<()>> {
    let probe = node.device().clone().health()?;
    let name = node.settings().name.clone();
    Some(tokio::spawn(async move {
        let mut serving = true;
        loop {
            tokio::time::sleep(ENGINE_HEALTH_POLL).await;
            let healthy = probe().await;
            if healthy != serving {
                serving = healthy;
                if healthy {
                    tracing::info!(node = %name, engine_healthy = true, "the serving engine is healthy again");
                } else {
                    tracing::warn!(node = %name, engine_healthy = false, "the serving engine is not answering /health");
                }
                let status = if healthy {
                    ServingStatus::Serving
                } else {
                    ServingStatus::NotServing
                };
                health.set_service_status(HEALTH_SERVICE, status).await;
            }
        }
    }))
}

/// Readiness, for whoever waits on it: the `--ready-file` (JSON) for
/// scripts and tests, READY=1 for systemd, and a log event for people.
fn report_ready(cli: &Cli, tls: Option<&TlsFiles>, node: &Node, servers: &Servers) -> Result<()> {
    // The runtime's own count: what `--io-threads` (or one per CPU) made.
    let io_threads = tokio::runtime::Handle::current().metrics().num_workers();
    let show = |a: Option<SocketAddr>| a.map_or("off".to_string(), |a| a.to_string());
    let name = &cli.name;
    let tls_mode = match tls {
        None => "off",
        Some(t) if t.client_ca.is_some() => "mtls",
        Some(_) => "on",
    };
    let backend = node.info(Vec::new()).backend_detail;
    if let Some(path) = &cli.ready_file {
        let ready = sut_node::ready::Ready {
            name: name.clone(),
            grpc: servers.grpc,
            quic: servers.quic,
            metrics: servers.metrics,
            tls: tls_mode.to_string(),
            backend: backend.clone(),
            io_threads,
            run_on_io_thread: node.settings().run_on_io_thread,
            pid: std::process::id(),
        };
        sut_node::ready::write(path, &ready)?;
    }
    tracing::info!(
        node = %name,
        event = "ready",
        grpc = %show(servers.grpc),
        quic = %show(servers.quic),
        metrics = %show(servers.metrics),
        tls = tls_mode,
        backend = %backend,
        io_threads,
        run_on_io_thread = node.settings().run_on_io_thread,
        "listening"
    );
    let status = format!(
        "READY=1\nSTATUS=listening grpc={} quic={}",
        show(servers.grpc),
        show(servers.quic)
    );
    if let Err(e) = sut_node::notify::notify(&status) {
        tracing::warn!(node = %name, "cannot notify the service manager: {e}");
    }
    Ok(())
}

/// Stops taking samples (declined as retryable, so the QDL sends them
/// elsewhere), lets those held finish, then closes the servers and the
/// device threads, each step within its timeout.
async fn drain_and_close(node: &Node, servers: Servers) {
    let name = &node.settings().name;
    let _ = sut_node::notify::notify("STOPPING=1\nSTATUS=draining in-flight samples");
    tracing::info!(node = %name, event = "draining", "shutting down, draining in-flight samples");
    servers
        .health
        .set_service_status(HEALTH_SERVICE, ServingStatus::NotServing)
        .await;
    node.begin_shutdown();
    if tokio::time::timeout(NODE_DRAIN_TIMEOUT, node.drained())
        .await
        .is_err()
    {
        tracing::warn!(
            node = %name,
            "samples still in flight after {NODE_DRAIN_TIMEOUT:?}; stopping anyway"
        );
    }
    servers.closing.send_replace(true);
    for task in servers.tasks {
        let _ = tokio::time::timeout(NODE_SERVER_CLOSE_TIMEOUT, task).await;
    }
    node.stop_devices();
}
