//! A `run` resolved from its flags once: [`RunPlan::from_args`] checks the
//! flags, settles the round, the benchmark and the model, what the run is
//! against ([`Target`]), where its samples come from, the QDL's
//! configuration and what the run writes. Everything after it takes the
//! plan, not the flags; a bad flag fails here, before anything starts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadgen_node::engine::rng::UniformIntVariant;
use loadgen_node::engine::settings::{
    apply_config, ConfKind, ConfigFile, Scenario, TestMode, TestSettings,
};
use loadgen_node::engine::EngineOptions;
use loadgen_node::qsl::{DType, SampleSource, SampleStore};
use loadgen_node::round::Round;
use loadgen_node::sut::local::{LocalSut, NodeInProcess};
use loadgen_node::sut::network::QdlSut;
use loadgen_node::sut::network::StoreQsl;
use loadgen_node::sut::Counters;
use netdiv_proto::codec::Codec;
use netdiv_proto::transport;
use netdiv_proto::Benchmark;
use qdl::NodeUrl;
use sut_node::backend::BackendConfig;
use sut_node::batcher::BatchPolicy;

use super::progress::ProgressMode;
use crate::cli::args::{Engine, NetworkArgs, RunArgs, ScenarioArg, SutKind};

/// What a run drives.
#[derive(Debug)]
pub(crate) enum Target {
    /// No SUT flags: two local sut-nodes this program starts.
    Embedded {
        /// The sut-node program to start, if given.
        sut_node_bin: Option<PathBuf>,
    },
    /// `--sut null`: answers at once.
    Null {
        /// Tokens per answer for token models.
        output_tokens: Option<i64>,
        /// `--local-nodes N`: N null nodes behind the QDL's local links.
        nodes: Option<usize>,
    },
    /// `--sut synthetic` or `--sut local`: a sut-node core in this
    /// process, with this backend and batching.
    InProcess {
        /// The backend.
        backend: Box<BackendConfig>,
        /// SUT-side batching.
        batching: BatchPolicy,
        /// Where it came from, for errors (`--node-config FILE`).
        origin: String,
        /// How many such cores (`--local-nodes`).
        nodes: usize,
    },
    /// `--sut-node URL...`: through the QDL.
    Network {
        /// The nodes, as given.
        nodes: Vec<NodeUrl>,
    },
}

/// The config files a test's settings come from.
#[derive(Debug)]
pub(crate) struct ConfigFiles {
    /// Replaces the round's embedded mlperf.conf.
    pub(crate) mlperf: Option<PathBuf>,
    /// Applied after mlperf.conf.
    pub(crate) user: Option<PathBuf>,
    /// Compliance-test overrides.
    pub(crate) audit: Option<PathBuf>,
    /// `--mode`, over the config files' `mode`.
    pub(crate) mode: Option<TestMode>,
}

/// Where samples come from and how many there are.
#[derive(Debug)]
pub(crate) struct SamplesPlan {
    /// A folder of `.npy` files, else synthetic data.
    pub(crate) data_dir: Option<PathBuf>,
    /// Synthetic data's seed, shape and element type.
    pub(crate) seed: u64,
    pub(crate) shape: Option<Vec<usize>>,
    pub(crate) dtype: Option<DType>,
    /// The codec samples are stored and sent in.
    pub(crate) codec: Codec,
    /// `--npy-int64-as-int32`: int64 `.npy` prompts are sent as int32.
    pub(crate) int64_as_int32: bool,
    /// `--total-sample-count` and `--performance-sample-count`.
    pub(crate) total: Option<usize>,
    pub(crate) performance: Option<usize>,
}

/// A run's Prometheus endpoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MetricsPlan {
    pub(crate) listen: std::net::SocketAddr,
    /// How long the final metrics stay up after the run.
    pub(crate) linger: Duration,
}

/// What a run writes and shows.
#[derive(Debug)]
pub(crate) struct Outputs {
    /// The MLPerf logs' folder.
    pub(crate) dir: PathBuf,
    /// Every issued QSL index, one per line.
    pub(crate) record_issued: Option<PathBuf>,
    /// Whether the trace log is written.
    pub(crate) trace: bool,
    /// Whether the HTML report is written after the run.
    pub(crate) report: bool,
    /// Live progress, and how often a line is logged without a bar.
    pub(crate) progress: ProgressMode,
    pub(crate) progress_interval: Duration,
    pub(crate) metrics: Option<MetricsPlan>,
}

/// A `run`, resolved.
#[derive(Debug)]
pub(crate) struct RunPlan {
    /// The round: `--round`, else the current one.
    pub(crate) round: Round,
    /// `--round` was given: the benchmark and each scenario must be in its
    /// Datacenter suite.
    pub(crate) round_given: bool,
    /// Which LoadGen runs the test.
    pub(crate) engine: Engine,
    /// The rules of a submission run apply.
    pub(crate) submission_mode: bool,
    /// Submission mode's refusals become a rehearsal's marks.
    pub(crate) rehearsal: bool,
    pub(crate) target: Target,
    /// `--scenario`, if given.
    pub(crate) scenario: Option<ScenarioArg>,
    /// The benchmark (its interactive variant for `--scenario
    /// Interactive`).
    pub(crate) benchmark: Benchmark,
    /// The model config lines are looked up for.
    pub(crate) model: String,
    /// The name an in-process SUT reports.
    pub(crate) sut_name: String,
    pub(crate) configs: ConfigFiles,
    pub(crate) samples: SamplesPlan,
    pub(crate) outputs: Outputs,
    /// The QDL's configuration, less the nodes and the per-scenario I/O
    /// threads.
    pub(crate) qdl: QdlPlan,
    pub(crate) uniform_int: UniformIntVariant,
    /// The CPU wake-up latency bound to hold while the run lasts (µs).
    pub(crate) cpu_latency_us: Option<u32>,
}

impl RunPlan {
    /// The plan of `run ARGS`; every flag problem is found here.
    pub(crate) fn from_args(args: &RunArgs) -> Result<RunPlan> {
        let target = target(args)?;
        let benchmark = benchmark_for(args)?;
        let model = args
            .model
            .clone()
            .unwrap_or_else(|| benchmark.config_model());
        let plan = RunPlan {
            round: args.round.unwrap_or(Round::CURRENT),
            round_given: args.round.is_some(),
            engine: args.loadgen,
            submission_mode: args.submission_mode,
            rehearsal: args.rehearsal,
            scenario: args.scenario,
            benchmark,
            model,
            sut_name: args.sut_name.clone(),
            configs: ConfigFiles {
                mlperf: args.mlperf_conf.clone(),
                user: args.user_conf.clone(),
                audit: args.audit_conf.clone(),
                mode: args.mode,
            },
            samples: SamplesPlan {
                data_dir: args.data.data_dir.clone(),
                seed: args.data.sample_seed,
                shape: args.data.sample_shape.clone(),
                dtype: args.data.sample_dtype,
                codec: args.data.sample_codec,
                int64_as_int32: args.data.npy_int64_as_int32,
                total: args.total_sample_count,
                performance: args.performance_sample_count,
            },
            outputs: Outputs {
                dir: args.output.clone(),
                record_issued: args.record_issued.clone(),
                trace: !args.no_trace,
                report: !args.no_report,
                progress: args.progress,
                progress_interval: args.progress_interval.0,
                metrics: args.metrics_listen.map(|listen| MetricsPlan {
                    listen,
                    linger: args.metrics_linger.0,
                }),
            },
            qdl: QdlPlan::from_args(&args.network)?,
            uniform_int: args.uniform_int,
            cpu_latency_us: args.cpu_latency_us,
            target,
        };
        plan.check()?;
        Ok(plan)
    }

    /// What a submission run refuses of a plan: settings other than the
    /// round's official ones, and a SUT that is not sut-nodes.
    pub(crate) fn check_submission_mode(&self) -> Result<()> {
        if self.configs.mlperf.is_some() {
            bail!(
                "submission mode: --mlperf-conf is refused; a submission runs with the official \
                 mlperf.conf of its round (choose the round with --round)"
            );
        }
        if matches!(self.target, Target::Null { .. } | Target::InProcess { .. }) {
            bail!("submission mode: a submission runs against sut-nodes (--sut-node), not --sut");
        }
        Ok(())
    }

    /// The checks that need more than one flag.
    fn check(&self) -> Result<()> {
        if self.submission_mode {
            self.check_submission_mode()?;
        }
        let in_process = !matches!(
            self.target,
            Target::Embedded { .. } | Target::Network { .. }
        );
        if in_process && self.engine == Engine::Official {
            bail!("--loadgen official drives network SUTs (--sut-node or the embedded default), not --sut null, synthetic or local");
        }
        if matches!(self.target, Target::Embedded { .. })
            && self.outputs.record_issued.is_some()
            && self.scenario.is_none()
        {
            bail!("--record-issued with the embedded default needs --scenario (it runs two tests)");
        }
        // Without --scenario only the embedded default knows its
        // scenarios; `submission` and `audit` check their own.
        let scenarios = match (&self.target, self.scenario) {
            (_, Some(s)) => vec![s.scenario],
            (Target::Embedded { .. }, None) => self.scenarios(),
            _ => Vec::new(),
        };
        for scenario in scenarios {
            self.check_in_round(scenario)?;
        }
        Ok(())
    }

    /// The scenarios to run: the one `--scenario` names, else (the
    /// embedded default) Offline then Server.
    pub(crate) fn scenarios(&self) -> Vec<Scenario> {
        match self.scenario {
            Some(s) => vec![s.scenario],
            None => vec![Scenario::Offline, Scenario::Server],
        }
    }

    /// With `--round`, a run against sut-nodes must be of a benchmark and
    /// scenario of that round's Datacenter suite (Interactive is a
    /// scenario from v5.1, a model of its own in v5.0). The in-process
    /// SUTs measure the harness, with any model, and are not checked.
    fn check_in_round(&self, scenario: Scenario) -> Result<()> {
        let network = matches!(
            self.target,
            Target::Embedded { .. } | Target::Network { .. }
        );
        if !self.round_given || !network {
            return Ok(());
        }
        let scenario = if self.benchmark.is_interactive() && !self.round.interactive_is_a_model() {
            "Interactive"
        } else {
            scenario.name()
        };
        self.round.check_in_suite(&self.benchmark, scenario)?;
        Ok(())
    }

    /// The scenario as the rules name it (Interactive for an interactive
    /// run).
    pub(crate) fn scenario_name(&self, scenario: Scenario) -> String {
        match self.scenario {
            Some(s) if s.interactive => "Interactive".into(),
            _ => scenario.name().into(),
        }
    }

    /// mlperf.conf (embedded or replaced), then user.conf (or, for the
    /// embedded default, its own short-run settings), then `--mode`.
    pub(crate) fn settings(
        &self,
        scenario: Scenario,
        embedded_user_conf: Option<&str>,
    ) -> Result<TestSettings> {
        let mut settings = TestSettings {
            scenario,
            ..TestSettings::default()
        };
        let mlperf = self.mlperf_conf()?;
        let user = match (&self.configs.user, embedded_user_conf) {
            (Some(path), _) => Some(ConfigFile::load(path)?),
            (None, Some(text)) => Some(ConfigFile::parse(text, "embedded default user.conf")?),
            (None, None) => None,
        };
        for (cfg, kind) in [
            (Some(&mlperf), ConfKind::Mlperf),
            (user.as_ref(), ConfKind::User),
        ] {
            let Some(cfg) = cfg else { continue };
            apply_config(&mut settings, cfg, &self.model, scenario, kind)?;
        }
        if let Some(mode) = self.configs.mode {
            settings.mode = mode;
        }
        Ok(settings)
    }

    /// The mlperf.conf the run reads: `--mlperf-conf`, else the round's.
    fn mlperf_conf(&self) -> Result<ConfigFile> {
        Ok(match &self.configs.mlperf {
            Some(path) => ConfigFile::load(path)?,
            None => ConfigFile::parse(
                self.round.mlperf_conf(),
                &format!("embedded mlperf.conf of round {}", self.round),
            )?,
        })
    }

    /// The lines of user.conf (and setting names of mlperf.conf) the
    /// LoadGen would skip without a word ([`super::conf_keys`]).
    pub(crate) fn conf_warnings(&self) -> Result<Vec<String>> {
        let mlperf = self.mlperf_conf()?;
        let mut warnings: Vec<String> = mlperf
            .unknown_keys
            .iter()
            .map(|(line, key)| format!("{}:{line}: {key:?} names no setting", mlperf.origin()))
            .collect();
        if let Some(path) = &self.configs.user {
            let user = ConfigFile::load(path)?;
            warnings.extend(super::conf_keys::unmatched(&user, &mlperf));
        }
        Ok(warnings)
    }

    /// Total and performance sample counts: the flags, else the data
    /// folder's size (`files`), else the benchmark's.
    pub(crate) fn counts(&self, files: Option<usize>) -> Result<(usize, usize)> {
        let spec = self.benchmark.spec();
        let total = self
            .samples
            .total
            .or(files)
            .unwrap_or(spec.total_sample_count);
        let performance = self
            .samples
            .performance
            .unwrap_or(spec.performance_sample_count.min(total));
        if total == 0 || performance == 0 {
            bail!("--total-sample-count and --performance-sample-count must be at least 1");
        }
        if total > u32::MAX as usize {
            bail!("--total-sample-count {total} is larger than 2^32-1");
        }
        if let (Some(files), Some(dir)) = (files, &self.samples.data_dir) {
            if total > files {
                bail!(
                    "--total-sample-count {total} is more than the {files} samples in {}",
                    dir.display()
                );
            }
        }
        Ok((total, performance))
    }

    /// The sample store the plan describes, as a QSL.
    pub(crate) fn qsl(&self) -> Result<StoreQsl> {
        let source = match &self.samples.data_dir {
            Some(path) => self.dataset(path)?,
            // LLMs: unpadded prompts of the data set's lengths, unless a
            // shape is given.
            None => SampleSource::synthetic_with(
                &self.benchmark,
                self.samples.seed,
                self.samples.shape.clone(),
                self.samples.dtype,
            ),
        };
        let (total, performance) = self.counts(source.count())?;
        let store = SampleStore::new(self.benchmark, source, self.samples.codec, total)
            .context("--sample-codec")?;
        Ok(StoreQsl {
            store: Arc::new(store),
            performance_sample_count: performance,
        })
    }

    /// The data at `--data-dir PATH`, checked to be this benchmark's kind
    /// of sample (token-id prompts for an LLM, volumes for 3D-UNet).
    fn dataset(&self, path: &std::path::Path) -> Result<SampleSource> {
        let mut source = SampleSource::from_path(path)
            .with_context(|| format!("--data-dir {}", path.display()))?;
        if let SampleSource::NpyDir {
            files,
            int64_as_int32,
            ..
        } = &mut source
        {
            *int64_as_int32 = self.samples.int64_as_int32;
            loadgen_node::qsl::check_npy_folder(files, &self.benchmark, *int64_as_int32)
                .with_context(|| format!("--data-dir {}", path.display()))?;
        }
        if let SampleSource::Dataset(data) = &source {
            let wants_prompts = self.benchmark.prompt_tokens().is_some();
            let wants_volumes = self.benchmark.volumes().is_some();
            if data.is_prompts() != wants_prompts || (!data.is_prompts() && !wants_volumes) {
                bail!(
                    "--data-dir {}: {} is not {}'s input ({})",
                    path.display(),
                    data.describe(),
                    self.benchmark,
                    if wants_prompts {
                        "token-id prompts"
                    } else if wants_volumes {
                        "3D-UNet volumes"
                    } else {
                        "a folder of .npy files"
                    }
                );
            }
        }
        Ok(source)
    }

    /// The QDL's configuration for `nodes` in `scenario`.
    pub(crate) fn qdl_config(
        &self,
        nodes: Vec<NodeUrl>,
        scenario: Scenario,
    ) -> Result<qdl::QdlConfig> {
        let mut config = self.qdl.config(nodes, &self.benchmark)?;
        config.no_failover = self.submission_mode;
        config.io_threads = self.qdl.io_threads_for(scenario);
        config.poll_next_query = self.qdl.poll_next_query_for(scenario);
        Ok(config)
    }

    /// The engine's options for a test of this plan.
    pub(crate) fn engine_options(&self) -> EngineOptions {
        EngineOptions {
            uniform_int: self.uniform_int,
            audit_config: self.configs.audit.clone(),
            record_issued: self.outputs.record_issued.is_some(),
            release: self.round.release(),
        }
    }

    /// `nodes` sut-node cores with `backend` and `batching` in this
    /// process, driven through the QDL's local link on the store's
    /// samples; one is named as the SUT, more are numbered after it.
    pub(crate) fn in_process_nodes(
        &self,
        nodes: usize,
        backend: &BackendConfig,
        batching: BatchPolicy,
        store: Arc<SampleStore>,
        counters: Arc<Counters>,
        scenario: Scenario,
    ) -> Result<LocalSut> {
        use sut_node::node::{Node, NodeSettings};
        let mut cores = Vec::with_capacity(nodes);
        for i in 1..=nodes {
            let name = if nodes == 1 {
                self.sut_name.clone()
            } else {
                format!("{}-{i}", self.sut_name)
            };
            let node = Node::from_config(
                NodeSettings {
                    name,
                    benchmark: *store.benchmark(),
                    response_codec: Codec::None,
                    max_sample_bytes: u64::MAX,
                    batching,
                    limits: sut_node::limits::Limits::defaults(store.benchmark()),
                    run_on_io_thread: false,
                },
                backend,
            )?;
            cores.push(node);
        }
        let local: Vec<Arc<dyn qdl::InProcessNode>> = cores
            .iter()
            .map(|node| Arc::new(NodeInProcess::new(node.clone())) as Arc<dyn qdl::InProcessNode>)
            .collect();
        self.behind_local_links(local, cores, store, counters, scenario)
    }

    /// `nodes` null nodes behind the QDL's local links (`--sut null
    /// --local-nodes N`): the LoadGen and the QDL measured without a node
    /// thread to wake.
    pub(crate) fn null_nodes(
        &self,
        nodes: usize,
        output_tokens: Option<i64>,
        store: Arc<SampleStore>,
        counters: Arc<Counters>,
        scenario: Scenario,
    ) -> Result<LocalSut> {
        use loadgen_node::sut::null::NullNode;
        let local = (1..=nodes)
            .map(|i| {
                let name = if nodes == 1 {
                    self.sut_name.clone()
                } else {
                    format!("{}-{i}", self.sut_name)
                };
                Arc::new(NullNode::new(name, *store.benchmark(), output_tokens))
                    as Arc<dyn qdl::InProcessNode>
            })
            .collect();
        self.behind_local_links(local, Vec::new(), store, counters, scenario)
    }

    /// The QDL over `local`, as a SUT named as the plan says; `cores`
    /// stop with it.
    fn behind_local_links(
        &self,
        local: Vec<Arc<dyn qdl::InProcessNode>>,
        cores: Vec<Arc<sut_node::node::Node>>,
        store: Arc<SampleStore>,
        counters: Arc<Counters>,
        scenario: Scenario,
    ) -> Result<LocalSut> {
        let config = self.qdl_config(Vec::new(), scenario)?;
        let network = qdl::NetworkSut::in_process(local, config, store)?;
        Ok(LocalSut::new(
            self.sut_name.clone(),
            QdlSut::new(network, counters),
            cores,
        ))
    }
}

/// What `run`'s flags ask to run against.
fn target(args: &RunArgs) -> Result<Target> {
    if args.null_output_tokens.is_some() && args.sut != Some(SutKind::Null) {
        bail!("--null-output-tokens sets how --sut null answers token models; it has no effect on other SUTs");
    }
    if args.synthetic.any() && args.sut != Some(SutKind::Synthetic) {
        bail!("the --synthetic-* flags set the cost model of --sut synthetic; --sut null answers at once");
    }
    if let (Some(SutKind::Null), Some(dir)) = (args.sut, &args.data.data_dir) {
        bail!(
            "--data-dir {}: --sut null answers without reading any sample (it measures the \
             LoadGen alone), so the data set would be ignored: drop --data-dir, or send it to a \
             SUT (--sut local, --sut synthetic or --sut-node URL)",
            dir.display()
        );
    }
    if args.local_nodes.is_some() && args.sut.is_none() {
        bail!("--local-nodes sets how many nodes run in this process behind the QDL: it needs --sut local, --sut synthetic or --sut null");
    }
    let local_nodes = args.local_nodes.unwrap_or(1) as usize;
    Ok(match args.sut {
        Some(SutKind::Null) => Target::Null {
            output_tokens: args.null_output_tokens,
            nodes: args.local_nodes.map(|n| n as usize),
        },
        Some(SutKind::Synthetic) => synthetic_target(args, local_nodes),
        Some(SutKind::Local) => {
            let Some(path) = &args.node_config else {
                bail!("--sut local needs --node-config FILE (a sut-node config file)");
            };
            let file = sut_node::config::FileConfig::load(path)?;
            Target::InProcess {
                backend: Box::new(file.backend_config()),
                batching: file.batching,
                origin: format!("node config {}", path.display()),
                nodes: local_nodes,
            }
        }
        None if args.network.sut_node.is_empty() => Target::Embedded {
            sut_node_bin: args.network.sut_node_bin.clone(),
        },
        None => Target::Network {
            nodes: args.network.sut_node.clone(),
        },
    })
}

/// `--sut synthetic`: the sut-node's synthetic backend with the
/// `--synthetic-*` cost model (the LLM cost model with its defaults for a
/// benchmark with token latencies).
fn synthetic_target(args: &RunArgs, nodes: usize) -> Target {
    use sut_node::backend::synthetic::SyntheticConfig;
    use sut_node::backend::BackendKind;
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
    Target::InProcess {
        backend: Box::new(backend),
        batching,
        origin: "--sut synthetic".into(),
        nodes,
    }
}

/// The benchmark `--benchmark` names, or the SUT's default: the 4-byte
/// `null` samples for the in-process SUTs that measure the harness,
/// ResNet-50 (a sut-node's default) otherwise. With `--scenario
/// Interactive`, the benchmark's interactive variant.
fn benchmark_for(args: &RunArgs) -> Result<Benchmark> {
    let named = match (args.data.benchmark, args.sut) {
        (Some(b), _) => b,
        (None, Some(SutKind::Null | SutKind::Synthetic)) => parse_known("null"),
        (None, _) => parse_known("resnet50"),
    };
    match args.scenario {
        Some(s) if s.interactive => match interactive_variant(&named) {
            Ok(b) => Ok(b),
            // --model names the config lines itself: the plain benchmark.
            Err(_) if args.model.is_some() => Ok(named),
            Err(e) => {
                Err(e).with_context(|| format!("--scenario Interactive with --benchmark {named}"))
            }
        },
        _ => Ok(named),
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

/// A name of the benchmark table.
fn parse_known(name: &str) -> Benchmark {
    Benchmark::parse(name).expect("the table has it")
}

/// The QDL's side of the plan: everything from the network flags but the
/// nodes.
#[derive(Clone, Debug)]
pub(crate) struct QdlPlan {
    /// The configuration without nodes (limits follow the benchmark).
    base: qdl::QdlConfig,
    /// `--dispatch`, if given (else the benchmark's default).
    dispatch: Option<qdl::DispatchPolicy>,
    /// `--io-threads`, if given.
    io_threads: Option<usize>,
    /// `--poll-next-query-us`, if given.
    poll_next_query: Option<Duration>,
    /// `--expand-dns`: one node per address a name resolves to.
    expand_dns: bool,
}

/// The QDL's I/O threads for SingleStream and MultiStream: with one query
/// in flight, a second thread only adds a wake-up between the two to each
/// answer (measured on a 2-CPU VM: SingleStream p99 about 40 µs lower with
/// one thread, on both transports; docs/benchmarks.md, "Wire speed").
const LATENCY_IO_THREADS: usize = 1;

impl QdlPlan {
    /// The QDL's side of the network flags.
    pub(crate) fn from_args(n: &NetworkArgs) -> Result<QdlPlan> {
        let tls = match (&n.dev_tls, &n.tls_ca) {
            (Some(dir), _) => Some(qdl::ClientTls::dev(dir)),
            (None, Some(ca)) => Some(qdl::ClientTls {
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
        if n.window == 0 || n.max_piece_samples == 0 || n.io_threads == Some(0) {
            bail!("--window, --max-piece-samples and --io-threads must be at least 1");
        }
        let mut base = qdl::QdlConfig::new(Vec::new());
        base.tls = tls;
        base.window.samples = n.window;
        base.max_piece_samples = n.max_piece_samples;
        base.node_timeout = (!n.node_timeout.0.is_zero()).then_some(n.node_timeout.0);
        base.rejoin = (!n.no_rejoin).then(|| qdl::Backoff {
            max: n.rejoin_max_backoff.0,
            ..qdl::Backoff::default()
        });
        Ok(QdlPlan {
            base,
            dispatch: n.dispatch,
            io_threads: n.io_threads,
            poll_next_query: n.poll_next_query_us.map(Duration::from_micros),
            expand_dns: n.expand_dns,
        })
    }

    /// The configuration for `nodes` (each name expanded to its addresses
    /// with `--expand-dns`), its message and window limits following
    /// `benchmark`'s largest sample.
    pub(crate) fn config(
        &self,
        nodes: Vec<NodeUrl>,
        benchmark: &Benchmark,
    ) -> Result<qdl::QdlConfig> {
        let nodes = if self.expand_dns {
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
        if let Some(timeout) = self.base.node_timeout {
            if benchmark.uses_token_latencies() && timeout < transport::MIN_TOKEN_NODE_TIMEOUT {
                bail!(
                    "--node-timeout {}: {benchmark} streams tokens, and a node reports its token \
                     progress every {} ms at most; the timeout must be at least {} s (or 0: never)",
                    timeout.as_secs_f64(),
                    transport::TOKEN_PROGRESS_INTERVAL.as_millis(),
                    transport::MIN_TOKEN_NODE_TIMEOUT.as_secs()
                );
            }
        }
        let mut config = self.base.clone();
        config.nodes = nodes;
        config.max_message_bytes = transport::message_limit(benchmark);
        config.window.bytes = transport::default_window_bytes(benchmark);
        config.io_threads = self.io_threads.unwrap_or(qdl::defaults::IO_THREADS);
        config.policy = self
            .dispatch
            .unwrap_or_else(|| qdl::defaults::policy_for(benchmark));
        Ok(config)
    }

    /// The I/O threads for `scenario`: `--io-threads`, else one for
    /// SingleStream and MultiStream and the default for the others.
    pub(crate) fn io_threads_for(&self, scenario: Scenario) -> usize {
        self.io_threads.unwrap_or(match scenario {
            Scenario::SingleStream | Scenario::MultiStream => LATENCY_IO_THREADS,
            Scenario::Server | Scenario::Offline => qdl::defaults::IO_THREADS,
        })
    }

    /// How long the QDL polls for the next query after the last answer in
    /// flight: `--poll-next-query-us`, else a short while in SingleStream
    /// and MultiStream (the next query follows at once) and not at all in
    /// Server and Offline (queries overlap, or there is one).
    pub(crate) fn poll_next_query_for(&self, scenario: Scenario) -> Duration {
        self.poll_next_query.unwrap_or(match scenario {
            Scenario::SingleStream | Scenario::MultiStream => {
                qdl::defaults::LATENCY_POLL_NEXT_QUERY
            }
            Scenario::Server | Scenario::Offline => Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Command};
    use clap::Parser;

    /// `loadgen-node run` with `flags`, parsed.
    fn run_args(flags: &[&str]) -> Box<RunArgs> {
        let args = ["loadgen-node", "run"].iter().chain(flags);
        let Command::Run(run) = Cli::try_parse_from(args).unwrap().command else {
            panic!("run")
        };
        run
    }

    fn target_of(flags: &[&str]) -> Result<Target> {
        target(&run_args(flags))
    }

    #[test]
    fn the_qdl_polls_for_the_next_query_only_in_the_latency_bound_scenarios() {
        let plan = |flags: &[&str]| QdlPlan::from_args(&run_args(flags).network).unwrap();
        let default = plan(&[]);
        for (scenario, poll) in [
            (
                Scenario::SingleStream,
                qdl::defaults::LATENCY_POLL_NEXT_QUERY,
            ),
            (
                Scenario::MultiStream,
                qdl::defaults::LATENCY_POLL_NEXT_QUERY,
            ),
            (Scenario::Server, Duration::ZERO),
            (Scenario::Offline, Duration::ZERO),
        ] {
            assert_eq!(default.poll_next_query_for(scenario), poll, "{scenario:?}");
        }
        let off = plan(&["--poll-next-query-us", "0"]);
        assert_eq!(
            off.poll_next_query_for(Scenario::SingleStream),
            Duration::ZERO
        );
        let set = plan(&["--poll-next-query-us", "75"]);
        assert_eq!(
            set.poll_next_query_for(Scenario::Offline),
            Duration::from_micros(75)
        );
        let args = ["loadgen-node", "run", "--poll-next-query-us", "1001"];
        let err = Cli::try_parse_from(args).unwrap_err().to_string();
        assert!(err.contains("--poll-next-query-us"), "{err}");
    }

    #[test]
    fn a_data_set_given_to_the_null_sut_is_refused_not_ignored() {
        let Err(err) = target_of(&["--sut", "null", "--data-dir", "prompts.pkl"]) else {
            panic!("the data set was not refused")
        };
        let text = format!("{err:#}");
        assert!(
            text.contains("--data-dir prompts.pkl: --sut null answers without reading"),
            "{text}"
        );
        assert!(matches!(
            target_of(&["--sut", "null"]),
            Ok(Target::Null { .. })
        ));
    }

    #[test]
    fn local_nodes_count_the_nodes_behind_the_local_links_and_need_an_in_process_sut() {
        let nodes = |flags: &[&str]| match target_of(flags) {
            Ok(Target::InProcess { nodes, .. }) => Ok(nodes),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(format!("{e:#}")),
        };
        assert_eq!(nodes(&["--sut", "synthetic"]), Ok(1));
        assert_eq!(
            nodes(&["--sut", "synthetic", "--local-nodes", "1024"]),
            Ok(1024)
        );
        // The null SUT answers directly unless nodes are asked for.
        let null_nodes = |flags: &[&str]| match target_of(flags) {
            Ok(Target::Null { nodes, .. }) => nodes,
            other => panic!("{other:?}"),
        };
        assert_eq!(null_nodes(&["--sut", "null"]), None);
        assert_eq!(
            null_nodes(&["--sut", "null", "--local-nodes", "8"]),
            Some(8)
        );
        for other in [
            &["--sut-node", "grpc://127.0.0.1:1", "--local-nodes", "4"][..],
            &["--local-nodes", "4"],
        ] {
            let err = nodes(other).unwrap_err();
            assert!(
                err.contains("--local-nodes")
                    && err.contains("--sut local, --sut synthetic or --sut null"),
                "{other:?}: {err}"
            );
        }
        for out_of_range in ["0", "4097", "-1", "many"] {
            let flag = format!("--local-nodes={out_of_range}");
            let args = ["loadgen-node", "run", "--sut", "synthetic", &flag];
            let err = Cli::try_parse_from(args).err().map(|e| e.to_string());
            assert!(
                err.as_deref().is_some_and(|e| e.contains("--local-nodes")),
                "--local-nodes {out_of_range}: {err:?}"
            );
        }
    }
}
