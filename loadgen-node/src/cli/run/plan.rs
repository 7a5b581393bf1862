//! Turning `run` flags into the pieces of a test: settings from the config
//! files, the sample store and its QSL, the QDL's configuration and the
//! in-process node.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use loadgen_node::engine::settings::{apply_config, ConfKind, ConfigFile, Scenario, TestSettings};
use loadgen_node::round::Round;
use loadgen_node::sut::local::LocalNodeSut;
use loadgen_node::sut::network::StoreQsl;
use loadgen_node::sut::Counters;
use netdiv_proto::codec::Codec;
use netdiv_proto::transport;
use netdiv_proto::Benchmark;
use qdl::samples::{SampleSource, SampleStore};
use sut_node::batcher::BatchPolicy;

use super::args::{NetworkArgs, RunArgs, SutKind};

/// The benchmark named by `--benchmark`, or the default for this SUT: the
/// 4-byte `null` samples for the in-process SUTs that measure the harness,
/// ResNet-50 (a sut-node's default) otherwise.
/// With `--scenario Interactive`, the benchmark's interactive variant.
pub fn benchmark(args: &RunArgs) -> Benchmark {
    let benchmark = named_benchmark(args);
    match args.scenario {
        Some(s) if s.interactive => interactive_variant(&benchmark).unwrap_or(benchmark),
        _ => benchmark,
    }
}

/// The benchmark `--benchmark` names, or the SUT's default.
fn named_benchmark(args: &RunArgs) -> Benchmark {
    match (args.data.benchmark, args.sut) {
        (Some(b), _) => b,
        (None, Some(SutKind::Null | SutKind::Synthetic)) => parse_known("null"),
        (None, _) => parse_known("resnet50"),
    }
}

/// `llama2-70b` → `llama2-70b-interactive` (keeping an accuracy target).
fn interactive_variant(
    b: &Benchmark,
) -> Result<Benchmark, netdiv_proto::benchmark::BenchmarkError> {
    if b.is_interactive() {
        return Ok(*b);
    }
    let name = match b.accuracy_target() {
        Some(target) => format!("{}-interactive-{target}", b.name()),
        None => format!("{}-interactive", b.name()),
    };
    Benchmark::parse(&name)
}

/// The round the run is for: `--round`, else the current one.
pub fn round(args: &RunArgs) -> Round {
    args.round.unwrap_or(Round::CURRENT)
}

/// With `--round`, a run against sut-nodes must be of a benchmark and
/// scenario of that round's Datacenter suite (Interactive is a scenario
/// from v5.1, a model of its own in v5.0). The in-process SUTs (`--sut`)
/// measure the harness, with any model, and are not checked.
pub fn check_round(args: &RunArgs, scenario: Scenario) -> Result<()> {
    let (Some(round), None) = (args.round, args.sut) else {
        return Ok(());
    };
    let benchmark = benchmark(args);
    let scenario = if benchmark.is_interactive() && !round.interactive_is_a_model() {
        "Interactive"
    } else {
        scenario.name()
    };
    round.check_in_suite(&benchmark, scenario)?;
    Ok(())
}

/// `--scenario Interactive` needs a benchmark the rules run interactively.
pub fn check_interactive(args: &RunArgs) -> Result<()> {
    if !args.scenario.is_some_and(|s| s.interactive) || args.model.is_some() {
        return Ok(());
    }
    let plain = named_benchmark(args);
    interactive_variant(&plain)
        .map(|_| ())
        .with_context(|| format!("--scenario Interactive with --benchmark {plain}"))
}

/// A name of the benchmark table.
fn parse_known(name: &str) -> Benchmark {
    Benchmark::parse(name).expect("the table has it")
}

/// Total and performance sample counts: the flags, else the data folder's
/// size, else the benchmark's.
pub fn counts(
    args: &RunArgs,
    benchmark: &Benchmark,
    files: Option<usize>,
) -> Result<(usize, usize)> {
    let spec = benchmark.spec();
    let total = args
        .total_sample_count
        .or(files)
        .unwrap_or(spec.total_sample_count);
    let performance = args
        .performance_sample_count
        .unwrap_or(spec.performance_sample_count.min(total));
    if total == 0 || performance == 0 {
        bail!("--total-sample-count and --performance-sample-count must be at least 1");
    }
    if total > u32::MAX as usize {
        bail!("--total-sample-count {total} is larger than 2^32-1");
    }
    if let Some(files) = files {
        if total > files {
            bail!(
                "--total-sample-count {total} is more than the {files} .npy files in {}",
                args.data
                    .data_dir
                    .as_ref()
                    .expect("files come from a folder")
                    .display()
            );
        }
    }
    Ok((total, performance))
}

/// The model name config lines are looked up for: `--model`, else the
/// benchmark's (`llama2-70b-interactive` for the interactive variant).
pub fn model(args: &RunArgs) -> String {
    match &args.model {
        Some(m) => m.clone(),
        None => benchmark(args).config_model(),
    }
}

/// mlperf.conf (embedded or replaced), then user.conf (or, for the
/// embedded default, its own short-run settings), then the flags.
pub fn settings(
    args: &RunArgs,
    scenario: Scenario,
    embedded_user_conf: Option<&str>,
) -> Result<TestSettings> {
    let model = model(args);
    let mut settings = TestSettings {
        scenario,
        ..TestSettings::default()
    };
    let mlperf = match &args.mlperf_conf {
        Some(path) => ConfigFile::load(path)?,
        None => {
            let round = round(args);
            ConfigFile::parse(
                round.mlperf_conf(),
                &format!("embedded mlperf.conf of round {round}"),
            )?
        }
    };
    let user = match (&args.user_conf, embedded_user_conf) {
        (Some(path), _) => Some(ConfigFile::load(path)?),
        (None, Some(text)) => Some(ConfigFile::parse(text, "embedded default user.conf")?),
        (None, None) => None,
    };
    for (cfg, kind) in [
        (Some(&mlperf), ConfKind::Mlperf),
        (user.as_ref(), ConfKind::User),
    ] {
        let Some(cfg) = cfg else { continue };
        for (line, key) in &cfg.unknown_keys {
            tracing::warn!("{}:{line}: {key:?} names no setting; ignored", cfg.origin());
        }
        apply_config(&mut settings, cfg, &model, scenario, kind)?;
    }
    if let Some(mode) = args.mode {
        settings.mode = mode;
    }
    Ok(settings)
}

/// The sample store the flags describe, as a QSL.
pub fn qsl(args: &RunArgs) -> Result<StoreQsl> {
    let benchmark = benchmark(args);
    let source = match &args.data.data_dir {
        Some(dir) => SampleSource::npy_dir(dir)?,
        // LLMs: unpadded prompts of the data set's lengths, unless a
        // shape is given.
        None => SampleSource::synthetic_with(
            &benchmark,
            args.data.sample_seed,
            args.data.sample_shape.clone(),
            args.data.sample_dtype,
        ),
    };
    let (total, performance) = counts(args, &benchmark, source.count())?;
    let store = SampleStore::new(benchmark, source, args.data.sample_codec, total)
        .context("--sample-codec")?;
    Ok(StoreQsl {
        store: Arc::new(store),
        performance_sample_count: performance,
    })
}

/// The QDL's I/O threads when `--io-threads` is not given, for Server and
/// Offline (and calls outside a run): the links' reading and writing
/// spread over two threads.
const THROUGHPUT_IO_THREADS: usize = 2;

/// The QDL's I/O threads for `scenario`: `--io-threads`, else one for
/// SingleStream and MultiStream. With one query in flight, a second thread
/// only adds a wake-up between the two to each answer (measured on a
/// 2-CPU VM: SingleStream p99 about 40 µs lower with one thread, on both
/// transports; docs/benchmarks.md, "Wire speed").
pub fn io_threads(n: &NetworkArgs, scenario: Scenario) -> usize {
    n.io_threads.unwrap_or(match scenario {
        Scenario::SingleStream | Scenario::MultiStream => 1,
        Scenario::Server | Scenario::Offline => THROUGHPUT_IO_THREADS,
    })
}

/// The QDL's configuration from the network flags.
/// Message and window limits follow `benchmark`'s largest sample.
pub fn qdl_config(
    n: &NetworkArgs,
    nodes: Vec<qdl::node_url::NodeUrl>,
    benchmark: &Benchmark,
) -> Result<qdl::QdlConfig> {
    let tls = match (&n.dev_tls, &n.tls_ca) {
        (Some(dir), _) => Some(qdl::tls::ClientTls::dev(dir)),
        (None, Some(ca)) => Some(qdl::tls::ClientTls {
            ca: ca.clone(),
            identity: n.tls_cert.clone().zip(n.tls_key.clone()),
            server_name: None,
        }),
        (None, None) => None,
    }
    .map(|mut tls| {
        tls.server_name = n.tls_server_name.clone().or(tls.server_name);
        tls
    });
    let nodes = if n.expand_dns {
        let mut expanded = Vec::new();
        for url in &nodes {
            expanded.extend(url.expand_dns()?);
        }
        tracing::info!(
            event = "nodes_expanded",
            nodes = expanded.len(),
            "--expand-dns: {}",
            expanded
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        expanded
    } else {
        nodes
    };
    if n.window == 0 || n.max_piece_samples == 0 || n.io_threads == Some(0) {
        bail!("--window, --max-piece-samples and --io-threads must be at least 1");
    }
    let mut config = qdl::QdlConfig::new(nodes);
    config.tls = tls;
    config.policy = n.dispatch;
    config.window.samples = n.window;
    config.max_piece_samples = n.max_piece_samples;
    config.max_message_bytes = transport::message_limit(benchmark);
    config.window.bytes = transport::default_window_bytes(benchmark);
    config.io_threads = n.io_threads.unwrap_or(THROUGHPUT_IO_THREADS);
    if !(n.node_timeout >= 0.0 && n.node_timeout.is_finite()) {
        bail!(
            "--node-timeout {} is not a number of seconds",
            n.node_timeout
        );
    }
    config.node_timeout =
        (n.node_timeout > 0.0).then(|| std::time::Duration::from_secs_f64(n.node_timeout));
    if !(n.rejoin_max_backoff >= 0.1 && n.rejoin_max_backoff <= 3600.0) {
        bail!(
            "--rejoin-max-backoff {} is not between 0.1 and 3600 seconds",
            n.rejoin_max_backoff
        );
    }
    config.rejoin = (!n.no_rejoin).then(|| qdl::Backoff {
        first: std::time::Duration::from_millis(100),
        max: std::time::Duration::from_secs_f64(n.rejoin_max_backoff),
    });
    Ok(config)
}

/// The node a sut-node config file describes, in this process (for a
/// benchmark with token latencies, `synthetic` is its LLM cost model).
pub fn configured_node_sut(
    args: &RunArgs,
    file: &sut_node::config::FileConfig,
    store: Arc<SampleStore>,
    counters: Arc<Counters>,
) -> Result<LocalNodeSut> {
    in_process_node(args, &file.backend_config(), file.batching, store, counters)
}

/// The sut-node's synthetic backend and batcher, in this process (the
/// LLM cost model with its defaults for a benchmark with token latencies).
pub fn synthetic_node_sut(
    args: &RunArgs,
    store: Arc<SampleStore>,
    counters: Arc<Counters>,
) -> Result<LocalNodeSut> {
    use sut_node::backend::synthetic::SyntheticConfig;
    use sut_node::backend::{BackendConfig, BackendKind};
    let s = &args.synthetic;
    let backend = BackendConfig {
        kind: BackendKind::Synthetic,
        synthetic: SyntheticConfig {
            batch_cost_us: s.synthetic_batch_cost_us.unwrap_or(0),
            sample_cost_us: s.synthetic_sample_cost_us.unwrap_or(0),
            devices: s.synthetic_devices.unwrap_or(1),
            ..SyntheticConfig::default()
        },
        ..BackendConfig::default()
    };
    let batching = BatchPolicy {
        max_batch_size: s
            .synthetic_max_batch
            .unwrap_or(BatchPolicy::default().max_batch_size),
        ..BatchPolicy::default()
    };
    in_process_node(args, &backend, batching, store, counters)
}

/// A sut-node core with `backend` and `batching`, driven in this process.
fn in_process_node(
    args: &RunArgs,
    backend: &sut_node::backend::BackendConfig,
    batching: BatchPolicy,
    store: Arc<SampleStore>,
    counters: Arc<Counters>,
) -> Result<LocalNodeSut> {
    use sut_node::node::{Node, NodeSettings};
    let node = Node::from_config(
        NodeSettings {
            name: args.sut_name.clone(),
            benchmark: *store.benchmark(),
            response_codec: Codec::None,
            max_sample_bytes: u64::MAX,
            batching,
            limits: sut_node::limits::Limits::defaults(store.benchmark()),
        },
        backend,
    )?;
    Ok(LocalNodeSut::new(
        args.sut_name.clone(),
        node,
        store,
        counters,
    ))
}
