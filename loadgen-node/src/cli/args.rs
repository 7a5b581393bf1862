//! Command-line arguments of `loadgen-node` (clap derive: the doc comments
//! are the `--help` text).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::run::progress::ProgressMode;
use loadgen_node::engine::rng::UniformIntVariant;
use loadgen_node::engine::settings::{Scenario, TestMode};
use loadgen_node::qsl::DType;
use loadgen_node::round::Round;
use netdiv_proto::Benchmark;
use qdl::DispatchPolicy;
use qdl::NodeUrl;

/// The netdiv LoadGen node: runs MLPerf Inference benchmarks.
#[derive(Debug, Parser)]
#[command(name = "loadgen-node", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    #[command(flatten)]
    pub(crate) log: netdiv_proto::logging::LogArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a test and write the four MLPerf log files. Without --sut-node
    /// or --sut, runs the embedded default: two local sut-nodes on
    /// loopback, a short Offline and Server test through the QDL.
    Run(Box<RunArgs>),
    /// Write the Network-division fields of the system description (JSON)
    /// from this node's NICs and each sut-node's Info; fields only a
    /// person can know are marked "TODO: fill in".
    Sysdesc(Box<SysdescArgs>),
    /// Run a benchmark for a Network-division submission with the official
    /// LoadGen (performance, accuracy, the compliance tests the round's
    /// checker expects, each verified) and write the results tree
    /// `OUTPUT/network/SUBMITTER/...`; `--check` then runs the official
    /// submission checker on it. Takes the flags of `run` too.
    Submission(Box<SubmissionArgs>),
    /// Check in seconds what a multi-hour submission needs, with the flags
    /// of `submission`: the nodes answer (benchmark, backend, engine and
    /// version), the data set loads, user.conf's lines apply, every
    /// Network-division rule netdiv can check holds (separate machines,
    /// real data path, backends and data, fabric, compression, bandwidth,
    /// Offline floor, diagram), the scenario set, and a short Offline
    /// trial. One line per check; fails on any the submission would refuse
    /// or the checker reject.
    Preflight(Box<SubmissionArgs>),
    /// Run the official submission checker of a mlcommons/inference
    /// checkout on a submission tree and print its verdict, errors grouped.
    Check(CheckArgs),
    /// Pack a submission tree for upload: runs the official checker and,
    /// when it passes and the tree is not a rehearsal, writes
    /// `network/SUBMITTER` alone (not netdiv's work files) as ARCHIVE
    /// (.tar.gz) with its sha256 in ARCHIVE.sha256.
    Pack(PackArgs),
    /// Show an auditor, against the real sut-nodes, that the system keeps
    /// the Network-division rules: each node's Name() round trip, Name()
    /// failing while a node is cut off, the bytes per sample on the wire,
    /// a delay on the fabric raising the measured latency, and TEST04
    /// (nothing cached). Each step says what it proves and which rule it
    /// serves. Takes the flags of `run` too (nodes, TLS, benchmark, data).
    Audit(Box<AuditArgs>),
    /// Score a classifier's accuracy log: each response is the top-1 class
    /// (as a sut-node with `postprocess = "argmax"` sends it), compared
    /// with the label of its sample.
    Accuracy(AccuracyArgs),
    /// Write a run's report: one self-contained HTML page (LOGDIR/
    /// netdiv_report.html, plots also in LOGDIR/report/*.svg) with the
    /// verdict and why, latency and throughput plots, TTFT/TPOT for token
    /// models, and for network runs the nodes and the Network-division
    /// checks. `run` writes it after each run unless --no-report.
    Report(ReportArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// A run's log folder (mlperf_log_*, and netdiv_run.json for network
    /// runs), or a folder of such folders (the embedded default's).
    #[arg(value_name = "LOGDIR")]
    pub(crate) logdir: PathBuf,
    /// Write the page here instead [default: LOGDIR/netdiv_report.html];
    /// the plots go to report/ beside it.
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct SubmissionArgs {
    /// Submitter (organisation) name: the tree is OUTPUT/network/SUBMITTER.
    #[arg(long)]
    pub(crate) submitter: String,
    /// The system's name: systems/SYSTEM.json and results/SYSTEM/.
    #[arg(long)]
    pub(crate) system: String,
    /// The system description fields only a person knows (a JSON object:
    /// system_name, status, host processors, accelerators, ... and the
    /// network fields netdiv cannot measure); merged with the measured
    /// ones. Any field left "TODO" stops the submission with the list.
    #[arg(long, value_name = "FILE")]
    pub(crate) system_json: PathBuf,
    /// The benchmark's accuracy script, run after each accuracy run on
    /// the exact mlperf_log_accuracy.json that goes into the tree: a shell
    /// command where {log} stands for that file (and {scenario} for the
    /// scenario), e.g. 'python3 evaluation.py --mlperf-accuracy-file {log}
    /// --dataset-file cnn_eval.json --dtype int32'. Its output becomes
    /// accuracy.txt, with the log's sha256.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) accuracy_script: Option<String>,
    /// A precomputed accuracy.txt (FILE for every scenario, or
    /// SCENARIO=FILE): only with --rehearsal, since it cannot be the score
    /// of the accuracy log this submission writes.
    #[arg(long, value_name = "[SCENARIO=]FILE")]
    pub(crate) accuracy_output: Vec<String>,
    /// The system diagram the rules require (how the LoadGen node, the
    /// fabric and the SUT nodes connect; an image or PDF), copied into the
    /// tree's documentation/. Required unless --rehearsal; `sysdesc
    /// --diagram` draws a starting point from the measured nodes.
    #[arg(long, value_name = "FILE")]
    pub(crate) diagram: Option<PathBuf>,
    /// The working group's approval of the compression on the wire
    /// (e.g. the meeting and date it was approved): required when samples
    /// or answers travel compressed (lz4), and written into the tree.
    #[arg(long, value_name = "TEXT")]
    pub(crate) compression_approved: Option<String>,
    /// The submitter's statement that the machines are separate although
    /// the LoadGen node or a SUT node runs under a hypervisor (e.g. each
    /// host's serial number): without it a virtual machine at either end
    /// refuses the submission; with it, the text goes into the tree.
    #[arg(long, value_name = "TEXT")]
    pub(crate) attest_virtual_machines: Option<String>,
    /// The submitter's statement of where a node's serving engine runs
    /// when it is not on the node's own machine (e.g. the engine host's
    /// serial and how it is part of the SUT): written into the tree. An
    /// engine on the LoadGen node's machine is refused regardless.
    #[arg(long, value_name = "TEXT")]
    pub(crate) attest_remote_engine: Option<String>,
    /// The submitter's statement that `--accuracy-script` gives the
    /// benchmark's official score although it does not run the official
    /// script from the `--inference` checkout by its path: written into
    /// the tree.
    #[arg(long, value_name = "TEXT")]
    pub(crate) attest_scorer: Option<String>,
    /// measurements.json: the model's weights file (starting_weights_filename).
    #[arg(long, value_name = "NAME", default_value = "N/A")]
    pub(crate) weights_file: String,
    /// measurements.json: the weights' data types (weight_data_types).
    #[arg(long, value_name = "TYPES", default_value = "N/A")]
    pub(crate) weight_data_types: String,
    /// A mlcommons/inference checkout: its compliance tests and submission
    /// checker are used from there.
    #[arg(long, value_name = "DIR", env = "NETDIV_INFERENCE_REPO")]
    pub(crate) inference: Option<PathBuf>,
    /// Python 3 (with numpy) for the official verification and checker.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub(crate) python: PathBuf,
    /// Run the official submission checker on the tree at the end.
    #[arg(long)]
    pub(crate) check: bool,
    /// Stop at an INVALID run in a rehearsal too (a submission always
    /// stops there; a rehearsal otherwise carries it into the tree).
    #[arg(long)]
    pub(crate) stop_on_invalid: bool,
    /// Start over: drop this benchmark's earlier runs and results for
    /// this system, or only one scenario's (`--fresh Offline`, or
    /// `--fresh BENCHMARK/SCENARIO`); other benchmarks' stay. Without it,
    /// finished runs are kept, unless what they ran with changed, and an
    /// interrupted submission resumes.
    #[arg(long, num_args = 0..=1, value_name = "[BENCHMARK/]SCENARIO")]
    pub(crate) fresh: Option<Option<String>>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Where the audit's runs, logs and audit.json go.
    #[arg(long, value_name = "DIR", default_value = "netdiv-audit")]
    pub(crate) audit_dir: PathBuf,
    /// A shell command that cuts this LoadGen node off from the first
    /// sut-node (NODE_HOST, NODE_PORT and NODE_URL are set), e.g.
    /// 'iptables -I OUTPUT -d "$NODE_HOST" -j DROP'. Without it the
    /// partition step is skipped.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) partition_cmd: Option<String>,
    /// The shell command that undoes --partition-cmd, e.g.
    /// 'iptables -D OUTPUT -d "$NODE_HOST" -j DROP'.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) heal_cmd: Option<String>,
    /// Delay added each way on the fabric in the latency step
    /// (milliseconds; the audit's relay holds every chunk this long).
    #[arg(long, value_name = "MS", default_value_t = 10.0, value_parser = positive_number)]
    pub(crate) delay_ms: f64,
    /// A mlcommons/inference checkout: TEST04 and its official
    /// verification are used from there.
    #[arg(long, value_name = "DIR", env = "NETDIV_INFERENCE_REPO")]
    pub(crate) inference: Option<PathBuf>,
    /// Python 3 for the official verification.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub(crate) python: PathBuf,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The submission root (the folder holding network/).
    #[arg(long, value_name = "DIR", default_value = "submission")]
    pub(crate) input: PathBuf,
    /// The round whose checker version applies [default: the current].
    #[arg(long, value_name = "ROUND")]
    pub(crate) round: Option<Round>,
    /// Only this submitter's results.
    #[arg(long)]
    pub(crate) submitter: String,
    /// A mlcommons/inference checkout holding the checker.
    #[arg(long, value_name = "DIR", env = "NETDIV_INFERENCE_REPO")]
    pub(crate) inference: Option<PathBuf>,
    /// Python 3 for the checker.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub(crate) python: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct PackArgs {
    /// The tree, its round and submitter, and the checker run on it first.
    #[command(flatten)]
    pub(crate) check: CheckArgs,
    /// The archive to write [default: SUBMITTER.tar.gz].
    #[arg(long, value_name = "FILE")]
    pub(crate) archive: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct AccuracyArgs {
    /// mlperf_log_accuracy.json, or the output folder holding it.
    #[arg(long, value_name = "PATH", default_value = "mlperf-logs")]
    pub(crate) log: PathBuf,
    /// Labels, one integer per line in sample order (the order of the
    /// --data-dir files).
    #[arg(long, value_name = "FILE")]
    pub(crate) labels: PathBuf,
    /// Element type of each response's class index.
    #[arg(long, value_name = "DTYPE", default_value = "int64")]
    pub(crate) class_dtype: DType,
    /// Exit with failure when top-1 accuracy is below this fraction.
    #[arg(long, value_name = "FRACTION")]
    pub(crate) min_top1: Option<f64>,
}

#[derive(Debug, Args)]
pub(crate) struct SysdescArgs {
    #[command(flatten)]
    pub(crate) network: NetworkArgs,
    /// Write the JSON to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Write every field the round's checker requires of a system
    /// description, not only the network ones: the host and accelerator
    /// fields filled from what the nodes report (machines counted once),
    /// "TODO: fill in" where only a person knows. Give the result, filled
    /// in, to `submission --system-json`.
    #[arg(long)]
    pub(crate) template: bool,
    /// Draw the measured system (the LoadGen node, the fabric, each SUT
    /// machine with its interfaces and nodes) as an SVG to FILE: the
    /// starting point of the diagram `submission --diagram` takes.
    #[arg(long, value_name = "FILE")]
    pub(crate) diagram: Option<PathBuf>,
}

/// Which in-process system under test to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum SutKind {
    /// In this process: answers every sample at once (measures the LoadGen
    /// itself).
    Null,
    /// In this process: the sut-node's synthetic backend and batcher, with
    /// the --synthetic-* cost model (the in-process side of the network
    /// tax).
    Synthetic,
    /// In this process: the backend and batcher a sut-node config file
    /// (--node-config) describes, e.g. an ONNX model, without the network.
    Local,
}

/// Which LoadGen runs the test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Engine {
    /// netdiv's Rust LoadGen (the same samples, schedule and logs as the
    /// official one).
    Netdiv,
    /// The official MLPerf LoadGen, as a submission requires (needs a build
    /// with `--features official`; network SUTs only).
    Official,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The MLPerf round the run is for (v5.0, v5.1, v6.0, v6.1): picks the
    /// official LoadGen release, the embedded mlperf.conf (seeds) and the
    /// Datacenter suite a network run's benchmark and scenario must be in
    /// [default: the current round, v6.1, without the suite check; --sut
    /// runs are never checked].
    #[arg(long, value_name = "ROUND")]
    pub(crate) round: Option<Round>,
    /// The LoadGen that runs the test.
    #[arg(long, value_enum, default_value = "netdiv")]
    pub(crate) loadgen: Engine,
    /// Keep the Network-division rules of a submission run: nodes across a
    /// network (no loopback, link-local or own-host node), the round's
    /// official mlperf.conf (no --mlperf-conf), and a node failure or a
    /// failed Name() ends the run instead of failing over.
    #[arg(long)]
    pub(crate) submission_mode: bool,
    /// A rehearsal of a submission: where submission mode (or
    /// `submission`) would refuse for a Network-division rule it can
    /// check (a node on this machine, virtual links, synthetic data or
    /// backends, ...), go on and mark the run and the tree as a rehearsal,
    /// with every reason. A rehearsal is never a result.
    #[arg(long)]
    pub(crate) rehearsal: bool,
    /// An in-process SUT instead of sut-nodes.
    #[arg(long, value_enum, conflicts_with = "sut_node")]
    pub(crate) sut: Option<SutKind>,
    /// SingleStream, MultiStream, Server or Offline, or Interactive (an
    /// LLM's interactive scenario: Server with the `<model>-interactive`
    /// settings of mlperf.conf) [the embedded default runs Offline then
    /// Server when this is not given].
    #[arg(long, value_parser = parse_scenario)]
    pub(crate) scenario: Option<ScenarioArg>,
    /// PerformanceOnly, AccuracyOnly, SubmissionRun or FindPeakPerformance
    /// [default: the config's `mode` key, else PerformanceOnly].
    #[arg(long, value_parser = parse_mode)]
    pub(crate) mode: Option<TestMode>,
    /// Model name used to look up `model.scenario.key` config lines
    /// [default: the benchmark's name].
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Replaces the embedded mlperf.conf (the only file seeds are read from).
    #[arg(long, value_name = "FILE")]
    pub(crate) mlperf_conf: Option<PathBuf>,
    /// Per-system settings applied after mlperf.conf.
    #[arg(long, value_name = "FILE")]
    pub(crate) user_conf: Option<PathBuf>,
    /// Compliance-test overrides [default: ./audit.config if it exists].
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_conf: Option<PathBuf>,
    /// Samples in the QSL [default: the number of .npy files, or the
    /// benchmark's data set size].
    #[arg(long, value_name = "N")]
    pub(crate) total_sample_count: Option<usize>,
    /// Samples that fit in memory at once [default: the benchmark's].
    #[arg(long, value_name = "N")]
    pub(crate) performance_sample_count: Option<usize>,
    /// Directory for the mlperf_log_* files (created if missing); the
    /// embedded default writes one subdirectory per scenario.
    #[arg(long, value_name = "DIR", default_value = "mlperf-logs")]
    pub(crate) output: PathBuf,
    /// Also write every issued QSL index, in issue order, one per line.
    #[arg(long, value_name = "FILE")]
    pub(crate) record_issued: Option<PathBuf>,
    /// Leave mlperf_log_trace.json empty.
    #[arg(long)]
    pub(crate) no_trace: bool,
    /// Do not write the run's report (netdiv_report.html beside the logs;
    /// see `loadgen-node report`).
    #[arg(long)]
    pub(crate) no_report: bool,
    /// Name the in-process SUT reports.
    #[arg(long, default_value = "null-sut")]
    pub(crate) sut_name: String,
    /// `--sut null` for token models (the LLM benchmarks): answer every
    /// sample with a first token, then complete it with N tokens.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub(crate) null_output_tokens: Option<i64>,
    /// libstdc++ uniform_int algorithm to reproduce: lemire (GCC >= 11) or
    /// division (older toolchains).
    #[arg(long, default_value = "lemire")]
    pub(crate) uniform_int: UniformIntVariant,
    /// Live progress on stderr: a bar on a terminal, else a line every
    /// --progress-interval.
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) progress: ProgressMode,
    /// Seconds between two progress lines (when no bar is drawn).
    #[arg(long, value_name = "SECONDS", default_value_t = Seconds(Duration::from_secs(10)), value_parser = positive_seconds)]
    pub(crate) progress_interval: Seconds,
    /// Serve Prometheus metrics of a network run at http://ADDR/metrics
    /// while it lasts (per node: outstanding, sent, completed, bytes,
    /// failed; the LoadGen's issued and completed; re-sent samples). Off
    /// unless given; port 0 picks a free port (logged).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
    /// Keep serving the final metrics this long after the run ends, so a
    /// scraper's next visit sees them (seconds).
    #[arg(long, value_name = "SECONDS", default_value_t = Seconds(Duration::ZERO))]
    pub(crate) metrics_linger: Seconds,
    /// While the run lasts, ask the kernel that no CPU of this machine take
    /// more than US µs to wake (its CPU latency QoS, /dev/cpu_dma_latency;
    /// root); the run record keeps it. 0 keeps idle CPUs polling instead
    /// of halting: lower, steadier per-query latency for more power. A
    /// sut-node asks for its own machine with the same flag.
    #[arg(long, value_name = "US")]
    pub(crate) cpu_latency_us: Option<u32>,
    #[command(flatten)]
    pub(crate) data: DataArgs,
    #[command(flatten)]
    pub(crate) network: NetworkArgs,
    #[command(flatten)]
    pub(crate) synthetic: SyntheticArgs,
    /// A sut-node config file (backend, [onnx], [synthetic], [batching])
    /// whose node runs in this process.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "In-process node (--sut local)"
    )]
    pub(crate) node_config: Option<PathBuf>,
    /// How many nodes run in this process behind the QDL's local links:
    /// sut-node cores with `--sut local` or `--sut synthetic` (each its own
    /// backend, devices and batcher), or null nodes with `--sut null`
    /// (each answers on the thread that sends to it: the QDL measured
    /// alone). Named SUT-NAME-1 to SUT-NAME-N where more than one; a fleet
    /// without the processes, so what the QDL spends per node is measured
    /// apart from what the machine spends running them (1 to 4096)
    /// [default: 1; `--sut null` without it answers directly].
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=4096),
        help_heading = "In-process node (--sut local)"
    )]
    pub(crate) local_nodes: Option<u32>,
}

/// What the samples are.
#[derive(Debug, Args)]
#[command(next_help_heading = "Samples")]
pub(crate) struct DataArgs {
    /// Benchmark whose sample shape, data set size and allowed codecs apply
    /// (resnet50, retinanet, bert, 3d-unet, dlrm-v2, gptj, llama2-70b,
    /// mixtral-8x7b, stable-diffusion-xl, digits, null; with an accuracy
    /// target, e.g. bert-99.9, or llama2-70b-interactive) [default: null
    /// with --sut null or synthetic, resnet50 otherwise].
    #[arg(long)]
    pub(crate) benchmark: Option<Benchmark>,
    /// Real samples instead of synthetic data: the benchmark's preprocessed
    /// data set as its MLPerf reference reads it (an LLM's token-id pandas
    /// pickle .pkl/.pkl.gz or JSON file, e.g. llama2-70b's
    /// open_orca_gpt4_tokenized_llama.sampled_24576.pkl or llama3.1-8b's
    /// cnn_eval.json; 3D-UNet's folder with preprocessed_files.pkl), or a
    /// folder of .npy files, one sample each in file-name order.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["sample_shape", "sample_dtype"])]
    pub(crate) data_dir: Option<PathBuf>,
    /// Shape of synthetic samples, e.g. 3,224,224 [default: the benchmark's].
    #[arg(long, value_name = "DIMS", value_delimiter = ',')]
    pub(crate) sample_shape: Option<Vec<usize>>,
    /// Element type of synthetic samples (uint8, int8, int32, int64,
    /// float16, float32) [default: the benchmark's].
    #[arg(long, value_name = "TYPE")]
    pub(crate) sample_dtype: Option<DType>,
    /// Seed of the synthetic data.
    #[arg(long, default_value_t = 0)]
    pub(crate) sample_seed: u64,
    /// Compress samples when they are loaded (untimed), if the benchmark
    /// allows it: none or lz4.
    #[arg(long, value_name = "CODEC", default_value = "none")]
    pub(crate) sample_codec: netdiv_proto::codec::Codec,
    /// A --data-dir folder of int64 .npy token ids (what np.save of Python
    /// ints writes) is sent as int32, each value checked to fit; without
    /// it such a folder is refused.
    #[arg(long)]
    pub(crate) npy_int64_as_int32: bool,
}

/// Where the sut-nodes are and how the QDL talks to them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Network SUT (the QDL)")]
pub(crate) struct NetworkArgs {
    /// A sut-node, as grpc://host:port or quic://host:port (repeat for each
    /// node).
    #[arg(long = "sut-node", value_name = "URL")]
    pub(crate) sut_node: Vec<NodeUrl>,
    /// CA certificate (PEM) the nodes' certificates chain to; turns on TLS.
    #[arg(long, value_name = "FILE", conflicts_with = "dev_tls")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for nodes that require mTLS.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub(crate) tls_cert: Option<PathBuf>,
    /// Key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Name to check node certificates against instead of each URL's host.
    #[arg(long, value_name = "NAME")]
    pub(crate) tls_server_name: Option<String>,
    /// A sut-node --dev-tls directory: trust its CA, present its client
    /// certificate.
    #[arg(long, value_name = "DIR")]
    pub(crate) dev_tls: Option<PathBuf>,
    /// How pieces of queries are assigned to nodes: round-robin,
    /// least-outstanding, or tokens (a node with room whose first token
    /// would come soonest, by its recent first-token times and the
    /// prompts it has not started; else by prompt tokens and running
    /// sequences over each node's measured rate) [default: tokens for
    /// benchmarks with token latencies, else least-outstanding].
    #[arg(long, value_name = "POLICY")]
    pub(crate) dispatch: Option<DispatchPolicy>,
    /// Most samples one node may hold at once; more wait in the QDL.
    #[arg(long, value_name = "N", default_value_t = qdl::defaults::WINDOW_SAMPLES)]
    pub(crate) window: u64,
    /// Largest piece a query is cut into, in samples: small pieces keep
    /// nodes evenly loaded to the end of an Offline run.
    #[arg(long, value_name = "N", default_value_t = qdl::defaults::MAX_PIECE_SAMPLES)]
    pub(crate) max_piece_samples: usize,
    /// Seconds a node may hold samples without any sign of progress (a
    /// completion, a first token, or for LLMs a token streamed) before it
    /// is treated as failed, its samples cancelled there and sent to the
    /// others (0: never). At least 2 for LLM benchmarks.
    #[arg(long, value_name = "SECONDS", default_value_t = Seconds(qdl::defaults::NODE_TIMEOUT))]
    pub(crate) node_timeout: Seconds,
    /// Leave a failed node out for the rest of the run instead of
    /// reconnecting it (with backoff, checked to be the same node) and
    /// giving it work again. Submission mode never brings nodes back.
    #[arg(long)]
    pub(crate) no_rejoin: bool,
    /// Treat each --sut-node host name as a group of nodes: one node per
    /// address it resolves to (a Kubernetes headless Service, compose
    /// replicas). Each must still answer Name() with a unique name; TLS
    /// checks the certificate against the name, not the address.
    #[arg(long)]
    pub(crate) expand_dns: bool,
    /// Longest wait between attempts to bring a failed node back, in
    /// seconds (0.1 to 3600); the wait starts at 0.1 s and doubles.
    #[arg(long, value_name = "SECONDS", default_value_t = Seconds(qdl::defaults::REJOIN_MAX_BACKOFF), value_parser = backoff_seconds)]
    pub(crate) rejoin_max_backoff: Seconds,
    /// Threads for network I/O [default: 1 for SingleStream and
    /// MultiStream, whose one query in flight gains nothing from a second
    /// thread and loses a hand-off between them to each answer; else 2].
    #[arg(long, value_name = "N")]
    pub(crate) io_threads: Option<usize>,
    /// How long the QDL's I/O thread polls for the LoadGen's next query
    /// after handing over the last answer in flight, in microseconds
    /// (0: it sleeps at once) [default: 50 for SingleStream and
    /// MultiStream, whose next query follows at once; 0 for Server and
    /// Offline].
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub(crate) poll_next_query_us: Option<u64>,
    /// The sut-node program the embedded default starts [default:
    /// $NETDIV_SUT_NODE, else sut-node next to this program, else on PATH].
    #[arg(long, value_name = "FILE")]
    pub(crate) sut_node_bin: Option<PathBuf>,
}

/// The cost model of the in-process synthetic backend (`--sut synthetic`).
#[derive(Debug, Args)]
#[command(next_help_heading = "In-process synthetic backend (--sut synthetic)")]
pub(crate) struct SyntheticArgs {
    /// Time one batch takes, in microseconds.
    #[arg(long, value_name = "US")]
    pub(crate) synthetic_batch_cost_us: Option<u64>,
    /// Time each sample adds to its batch, in microseconds.
    #[arg(long, value_name = "US")]
    pub(crate) synthetic_sample_cost_us: Option<u64>,
    /// Batches that run at once.
    #[arg(long, value_name = "N")]
    pub(crate) synthetic_devices: Option<usize>,
    /// Largest batch.
    #[arg(long, value_name = "N")]
    pub(crate) synthetic_max_batch: Option<usize>,
}

impl SyntheticArgs {
    /// Whether any cost-model flag was given.
    pub(crate) fn any(&self) -> bool {
        self.synthetic_batch_cost_us.is_some()
            || self.synthetic_sample_cost_us.is_some()
            || self.synthetic_devices.is_some()
            || self.synthetic_max_batch.is_some()
    }
}

/// `--scenario`: a LoadGen scenario, and whether it was asked for as
/// Interactive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScenarioArg {
    /// The scenario the LoadGen runs (Server for Interactive).
    pub(crate) scenario: Scenario,
    /// Interactive: the benchmark's `-interactive` settings apply.
    pub(crate) interactive: bool,
}

fn parse_scenario(s: &str) -> Result<ScenarioArg, String> {
    if s.eq_ignore_ascii_case("Interactive") {
        return Ok(ScenarioArg {
            scenario: Scenario::Server,
            interactive: true,
        });
    }
    s.parse::<Scenario>()
        .map(|scenario| ScenarioArg {
            scenario,
            interactive: false,
        })
        .map_err(|e| e.replace("or Offline)", "Offline or Interactive)"))
}

fn parse_mode(s: &str) -> Result<TestMode, String> {
    s.parse()
}

/// A duration given in seconds (`1.5`), shown back in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seconds(pub Duration);

impl std::str::FromStr for Seconds {
    type Err = String;
    fn from_str(text: &str) -> Result<Seconds, String> {
        match text.parse::<f64>() {
            Ok(s) if s >= 0.0 => Duration::try_from_secs_f64(s)
                .map(Seconds)
                .map_err(|_| format!("{text:?} is too many seconds")),
            _ => Err(format!("{text:?} is not a number of seconds, 0 or more")),
        }
    }
}

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.as_secs_f64())
    }
}

/// Seconds above zero.
fn positive_seconds(text: &str) -> Result<Seconds, String> {
    let seconds: Seconds = text.parse()?;
    if seconds.0.is_zero() {
        return Err(format!("{text:?} is not a number of seconds above 0"));
    }
    Ok(seconds)
}

/// A rejoin backoff: from 0.1 s to an hour.
fn backoff_seconds(text: &str) -> Result<Seconds, String> {
    let seconds: Seconds = text.parse()?;
    if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&seconds.0) {
        return Err(format!("{text:?} is not between 0.1 and 3600 seconds"));
    }
    Ok(seconds)
}

/// A number above zero (seconds, milliseconds).
fn positive_number(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(s),
        _ => Err(format!("{text:?} is not a number above 0")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_are_seconds_checked_where_they_are_parsed() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).map_err(|e| e.to_string());
        let Command::Run(run) = parse(&["loadgen-node", "run", "--node-timeout", "1.5"])
            .unwrap()
            .command
        else {
            panic!("run")
        };
        assert_eq!(run.network.node_timeout.0, Duration::from_millis(1500));
        assert_eq!(
            run.network.rejoin_max_backoff.0,
            qdl::defaults::REJOIN_MAX_BACKOFF
        );
        let err = parse(&["loadgen-node", "run", "--node-timeout=-1"]).unwrap_err();
        assert!(err.contains("not a number of seconds, 0 or more"), "{err}");
        let err = parse(&["loadgen-node", "run", "--rejoin-max-backoff", "0.01"]).unwrap_err();
        assert!(err.contains("not between 0.1 and 3600 seconds"), "{err}");
        let err = parse(&["loadgen-node", "run", "--progress-interval", "0"]).unwrap_err();
        assert!(err.contains("above 0"), "{err}");
        let err = parse(&["loadgen-node", "run", "--metrics-linger", "NaN"]).unwrap_err();
        assert!(err.contains("not a number of seconds"), "{err}");
    }

    #[test]
    fn bad_flags_are_named() {
        let err = Cli::try_parse_from(["loadgen-node", "run", "--scenario", "Sever"]).unwrap_err();
        assert!(
            err.to_string().contains("unknown scenario \"Sever\""),
            "{err}"
        );
        let err =
            Cli::try_parse_from(["loadgen-node", "run", "--sut-node", "tcp://a:1"]).unwrap_err();
        assert!(err.to_string().contains("unknown scheme \"tcp\""), "{err}");
        let err = Cli::try_parse_from([
            "loadgen-node",
            "run",
            "--sut",
            "null",
            "--sut-node",
            "grpc://a:1",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("cannot be used with"), "{err}");
    }
}
