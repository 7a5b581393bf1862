//! `loadgen-node run`: one test against the SUT the flags choose, through
//! our engine or (feature `official`) the official LoadGen, then the
//! summary and where the logs are.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadgen_node::engine::logs::LogSettings;
use loadgen_node::engine::settings::{Scenario, TestSettings};
use loadgen_node::engine::{start_test, EngineOptions};
use loadgen_node::sut::network::{QdlSut, StoreQsl};
use loadgen_node::sut::null::{NullSut, SyntheticQsl};
use loadgen_node::sut::{Counters, QuerySampleLibrary, SystemUnderTest};
use qdl::node_url::NodeUrl;

use super::args::{Engine, RunArgs, SutKind};
use super::progress::{NodeView, ProgressLine};
use super::{embedded, setup, submission_mode};

/// Runs what the flags ask for: the embedded default without a SUT, else
/// one test against `--sut` or the `--sut-node`s.
pub fn command(args: &RunArgs) -> Result<()> {
    if args.submission_mode {
        submission_mode::check_flags(args)?;
    }
    let _cpu_latency = sut_node::cpu_latency::hold_requested(args.cpu_latency_us)?;
    if args.sut.is_none() && args.network.sut_node.is_empty() {
        return embedded::run_default(args);
    }
    let scenario = args
        .scenario
        .context("--scenario is required with --sut or --sut-node")?
        .scenario;
    setup::check_interactive(args)?;
    setup::check_round(args, scenario)?;
    if args.sut.is_some() && args.loadgen == Engine::Official {
        bail!("--loadgen official drives network SUTs (--sut-node or the embedded default), not --sut null, synthetic or local");
    }
    if args.null_output_tokens.is_some() && args.sut != Some(SutKind::Null) {
        bail!("--null-output-tokens sets how --sut null answers token models; it has no effect on other SUTs");
    }
    if args.synthetic.any() && args.sut != Some(SutKind::Synthetic) {
        bail!("the --synthetic-* flags set the cost model of --sut synthetic; --sut null answers at once");
    }
    let ran = match args.sut {
        Some(SutKind::Null) => run_null(args, scenario),
        Some(SutKind::Synthetic) => run_synthetic(args, scenario),
        Some(SutKind::Local) => run_local_node(args, scenario),
        None => {
            let nodes = args.network.sut_node.clone();
            run_network(args, scenario, nodes, None, &args.output)
        }
    };
    report_after(args, &args.output);
    ran
}

/// The run's report beside its logs, if it wrote a summary (a run that
/// failed late still gets one: its logs say why).
pub fn report_after(args: &RunArgs, output: &Path) {
    if !args.no_report && output.join(super::report::logs::SUMMARY).is_file() {
        super::report::after_run(output);
    }
}

/// `--sut null`: the engine alone, answered at once.
fn run_null(args: &RunArgs, scenario: Scenario) -> Result<()> {
    // No data and no cost: the engine measured on its own.
    let benchmark = setup::benchmark(args);
    let (total, performance) = setup::counts(args, &benchmark, None)?;
    let settings = setup::settings(args, scenario, None)?;
    let qsl = SyntheticQsl::new(total, performance);
    let mut sut = NullSut::new(args.sut_name.clone());
    match args.null_output_tokens {
        Some(n) => sut = sut.with_output_tokens(n),
        None if settings.use_token_latencies => bail!(
            "{} measures token latencies (use_token_latencies = 1): give --null-output-tokens N \
             (tokens per answer, at least 2) so the null SUT sends first tokens and token counts",
            setup::model(args)
        ),
        None => {}
    }
    run_test(args, &sut, &qsl, &settings, &args.output, None, None)
}

/// `--sut synthetic`: the sut-node's synthetic backend in this process.
fn run_synthetic(args: &RunArgs, scenario: Scenario) -> Result<()> {
    let qsl = setup::qsl(args)?;
    let settings = setup::settings(args, scenario, None)?;
    let counters = Arc::new(Counters::default());
    let sut = setup::synthetic_node_sut(args, qsl.store.clone(), counters.clone())?;
    run_test(
        args,
        &sut,
        &qsl,
        &settings,
        &args.output,
        Some(counters),
        None,
    )
}

/// `--sut local`: a configured sut-node (backend and batcher) in-process.
fn run_local_node(args: &RunArgs, scenario: Scenario) -> Result<()> {
    let Some(path) = &args.node_config else {
        bail!("--sut local needs --node-config FILE (a sut-node config file)");
    };
    let node_config = sut_node::config::FileConfig::load(path)?;
    let qsl = setup::qsl(args)?;
    let settings = setup::settings(args, scenario, None)?;
    let counters = Arc::new(Counters::default());
    let sut = setup::configured_node_sut(args, &node_config, qsl.store.clone(), counters.clone())
        .with_context(|| format!("node config {}", path.display()))?;
    run_test(
        args,
        &sut,
        &qsl,
        &settings,
        &args.output,
        Some(counters),
        None,
    )
}

/// Through the QDL to sut-nodes.
pub fn run_network(
    args: &RunArgs,
    scenario: Scenario,
    nodes: Vec<NodeUrl>,
    embedded_conf: Option<&str>,
    output: &Path,
) -> Result<()> {
    let qsl = setup::qsl(args)?;
    let settings = setup::settings(args, scenario, embedded_conf)?;
    let mut config = setup::qdl_config(&args.network, nodes, qsl.store.benchmark())?;
    config.no_failover = args.submission_mode;
    config.io_threads = setup::io_threads(&args.network, scenario);
    // With --expand-dns, one node per address.
    let nodes = config.nodes.clone();
    let network = qdl::NetworkSut::connect(config, qsl.store.clone())?;
    if args.submission_mode {
        let own = sut_node::nic::host_identity();
        submission_mode::check_nodes(&nodes, network.node_infos(), &own)?;
    }
    for (url, info) in network.node_urls().iter().zip(network.node_infos()) {
        tracing::info!(
            node = %url,
            name = %info.name,
            backend = %info.backend,
            host = %info.hostname,
            "node {url}: {} ({} {}) on {}",
            info.name,
            info.backend,
            info.backend_detail,
            info.hostname
        );
    }
    tracing::info!(
        event = "nodes_connected",
        nodes = nodes.len(),
        "connected to every node"
    );
    let counters = Arc::new(Counters::default());
    let sut = QdlSut {
        network,
        counters: counters.clone(),
    };
    let metrics = match args.metrics_listen {
        Some(listen) => Some(super::metrics::RunMetrics::start(
            listen,
            Duration::try_from_secs_f64(args.metrics_linger)
                .context("--metrics-linger takes a number of seconds, 0 or more")?,
            &sut.network,
            counters.clone(),
        )?),
        None => None,
    };
    let ran = match args.loadgen {
        Engine::Netdiv => run_test(
            args,
            &sut,
            &qsl,
            &settings,
            output,
            Some(counters),
            Some(node_view(&sut)),
        ),
        Engine::Official => {
            run_official(args, &sut, &qsl, &settings, output, embedded_conf, counters)
        }
    };
    if let Some(metrics) = &metrics {
        metrics.finish();
    }
    // The record is written whatever the run's outcome.
    let (record, bandwidth) = super::record::write(
        args,
        &sut.network,
        &qsl.store,
        &scenario_name(args, scenario),
        output,
    )?;
    if let Some(line) = bandwidth {
        tracing::info!("{line}");
    }
    tracing::info!(path = %record.display(), "run record written");
    ran?;
    let stats = sut.network.stats();
    if args.submission_mode && (stats.nodes_failed > 0 || stats.resent > 0) {
        bail!(
            "submission mode: {} node(s) failed during the run; its logs are not a result",
            stats.nodes_failed
        );
    }
    if stats.nodes_failed > 0 || stats.resent > 0 {
        tracing::warn!(
            nodes_failed = stats.nodes_failed,
            resent = stats.resent,
            rejoins = stats.rejoins,
            "{} node(s) failed during the run; {} samples were re-sent to the others; \
             nodes rejoined {} time(s)",
            stats.nodes_failed,
            stats.resent,
            stats.rejoins
        );
    }
    if stats.late_first_tokens > 0 {
        tracing::warn!(
            late_first_tokens = stats.late_first_tokens,
            first_tokens = stats.first_tokens,
            "{} first tokens were dropped (late, or a re-sent sample's second; \
             {} went to the LoadGen, one per sample)",
            stats.late_first_tokens,
            stats.first_tokens
        );
    }
    Ok(())
}

/// The scenario as the rules name it (Interactive for an interactive
/// run).
fn scenario_name(args: &RunArgs, scenario: Scenario) -> String {
    match args.scenario {
        Some(s) if s.interactive => "Interactive".into(),
        _ => scenario.name().into(),
    }
}

/// The same test under the official LoadGen, from the same flags and
/// config files; it prints its own summary.
#[cfg(feature = "official")]
fn run_official(
    args: &RunArgs,
    sut: &QdlSut,
    qsl: &StoreQsl,
    settings: &TestSettings,
    output: &Path,
    embedded_conf: Option<&str>,
    counters: Arc<Counters>,
) -> Result<()> {
    use loadgen_node::sut::official::{self, OfficialRun};
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    // The official LoadGen reads config files only, so the embedded
    // default's settings go to one next to the logs.
    let embedded_path = output.join("embedded-user.conf");
    let user_conf = match (&args.user_conf, embedded_conf) {
        (Some(path), _) => Some(path.as_path()),
        (None, Some(text)) => {
            std::fs::write(&embedded_path, text)
                .with_context(|| format!("cannot write {}", embedded_path.display()))?;
            Some(embedded_path.as_path())
        }
        (None, None) => None,
    };
    let model = setup::model(args);
    let audit = args
        .audit_conf
        .clone()
        .unwrap_or_else(official::default_audit_conf);
    let _progress = start_progress(
        args,
        format!("{} (official LoadGen)", settings.scenario.name()),
        settings,
        counters.clone(),
        Some(node_view(sut)),
    );
    let issued = official::run(
        &sut.network,
        qsl,
        counters,
        &OfficialRun {
            round: setup::round(args).name(),
            scenario: settings.scenario,
            mode: settings.mode,
            model: &model,
            mlperf_conf: args.mlperf_conf.as_deref(),
            user_conf,
            audit_conf: &audit,
            outdir: output,
            enable_trace: !args.no_trace,
            record_issued: args.record_issued.is_some(),
            token_latencies: settings.use_token_latencies
                || qsl.store.benchmark().uses_token_latencies(),
            submission_mode: args.submission_mode,
        },
    )?;
    drop(_progress);
    if let Some(path) = &args.record_issued {
        write_issued(path, &issued)?;
    }
    println!(
        "Logs written to {} (by the official MLPerf LoadGen)",
        output.display()
    );
    Ok(())
}

#[cfg(not(feature = "official"))]
fn run_official(
    _: &RunArgs,
    _: &QdlSut,
    _: &StoreQsl,
    _: &TestSettings,
    _: &Path,
    _: Option<&str>,
    _: Arc<Counters>,
) -> Result<()> {
    bail!(
        "this loadgen-node was built without the official LoadGen: rebuild with \
         `cargo build --release -p loadgen-node --features official` (needs g++)"
    )
}

fn write_issued(path: &Path, issued: &[usize]) -> Result<()> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for index in issued {
        writeln!(out, "{index}")?;
    }
    out.flush()?;
    Ok(())
}

/// The nodes of a network run, for the progress display.
fn node_view(sut: &QdlSut) -> NodeView {
    NodeView {
        observer: sut.network.observer(),
        names: sut
            .network
            .node_infos()
            .iter()
            .map(|i| i.name.clone())
            .collect(),
    }
}

/// Progress as the flags ask, against the run's minimum duration.
fn start_progress(
    args: &RunArgs,
    label: String,
    settings: &TestSettings,
    counters: Arc<Counters>,
    nodes: Option<NodeView>,
) -> ProgressLine {
    ProgressLine::start(
        args.progress,
        Duration::try_from_secs_f64(args.progress_interval).unwrap_or(Duration::from_secs(10)),
        label,
        Duration::from_millis(settings.min_duration_ms),
        counters,
        nodes,
    )
}

/// Runs one test, then prints the summary and where the logs are.
fn run_test(
    args: &RunArgs,
    sut: &dyn SystemUnderTest,
    qsl: &dyn QuerySampleLibrary,
    settings: &TestSettings,
    output: &Path,
    counters: Option<Arc<Counters>>,
    nodes: Option<NodeView>,
) -> Result<()> {
    let logs = LogSettings {
        outdir: output.to_path_buf(),
        enable_trace: !args.no_trace,
        ..LogSettings::default()
    };
    let options = EngineOptions {
        uniform_int: args.uniform_int,
        audit_config: args.audit_conf.clone(),
        record_issued: args.record_issued.is_some(),
        release: setup::round(args).release(),
    };
    let _progress = counters.map(|c| {
        start_progress(
            args,
            settings.scenario.name().to_string(),
            settings,
            c,
            nodes,
        )
    });
    let outcome = start_test(sut, qsl, settings, &logs, options)?;
    drop(_progress);
    if let Some(path) = &args.record_issued {
        write_issued(path, &outcome.issued)?;
    }
    print!("{}", outcome.summary_text);
    println!("Logs written to {}", output.display());
    if outcome.error_count > 0 {
        bail!(
            "the run logged {} errors; see {}",
            outcome.error_count,
            output.join("mlperf_log_detail.txt").display()
        );
    }
    Ok(())
}
