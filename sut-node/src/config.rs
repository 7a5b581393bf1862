//! Command line and config file of the daemon. Flags win over the file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use netdiv_proto::codec::Codec;
use netdiv_proto::transport;
use netdiv_proto::{Benchmark, Direction};
use serde::{Deserialize, Serialize};

use crate::backend::llm::LlmConfig;
use crate::backend::onnx::{OnnxConfig, Provider};
use crate::backend::openai::api::EngineApi;
use crate::backend::openai::OpenaiConfig;
use crate::backend::synthetic::SyntheticConfig;
use crate::backend::{BackendConfig, BackendKind};
use crate::batcher::BatchPolicy;
use crate::limits::{Limits, LimitsConfig};

/// Which transports to serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// gRPC over HTTP/2 over TCP only.
    Grpc,
    /// QUIC over UDP only.
    Quic,
    /// Both, on the same port number.
    Both,
}

/// Where `--help` lists the flags of the LLM cost model.
const LLM_FLAGS: &str = "LLM cost model (benchmarks with token latencies)";

/// netdiv sut-node: serves inference queries from the LoadGen node.
#[derive(Debug, Parser)]
#[command(name = "sut-node", version, about)]
pub struct Cli {
    /// Address to listen on; port 0 picks a free port (gRPC on TCP, QUIC
    /// on UDP, the same port number when it is free on both).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// This node's name; unique among the nodes of a SUT.
    #[arg(long)]
    pub name: String,
    /// Once listening, write FILE (atomically): one JSON object with the
    /// node's name, its gRPC and QUIC addresses, TLS mode, backend and
    /// process id, for scripts and tests that start a node on port 0.
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (queries, samples,
    /// bytes, batch sizes, inference times, queue depth, declines, errors,
    /// connections); off unless given. Port 0 picks a free port (the
    /// ready file and log say which).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Diagnostics: --log-level and --log-format.
    #[command(flatten)]
    pub log: netdiv_proto::logging::LogArgs,
    /// What runs the model [default: the config file's `backend`, else
    /// synthetic]. For a benchmark that measures token latencies (the
    /// LLMs, Whisper) synthetic is the LLM cost model (`[llm]`, the --llm-*
    /// flags), which sends each sample's first token, then its completion
    /// with the token count; onnx cannot serve those benchmarks.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// ONNX model file (implies --backend onnx).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// The model input that samples feed [default: its only input].
    #[arg(long, value_name = "NAME")]
    pub input_name: Option<String>,
    /// The ONNX Runtime shared library [default: $ORT_DYLIB_PATH, then
    /// libonnxruntime.so on the loader's path].
    #[arg(long, value_name = "FILE")]
    pub onnxruntime_lib: Option<PathBuf>,
    /// Where the ONNX model runs.
    #[arg(long, value_enum)]
    pub execution_provider: Option<Provider>,
    /// Which transports to serve [default: the config file's, else both].
    #[arg(long, value_enum)]
    pub transport: Option<Transport>,
    /// TOML file with backend, `[synthetic]`, `[llm]`, `[onnx]`, `[batching]` and
    /// other settings.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Benchmark whose codec rules apply (resnet50, bert-99, gptj, ...)
    /// [default: the config file's, else resnet50].
    #[arg(long)]
    pub benchmark: Option<Benchmark>,
    /// Codec of responses: none or lz4 (if the benchmark allows it).
    #[arg(long)]
    pub response_codec: Option<Codec>,
    /// Largest batch the backend runs (along the model's batch dimension).
    #[arg(long, visible_alias = "max-batch", value_name = "N")]
    pub max_batch_size: Option<usize>,
    /// Longest a batch's first sample waits for more, in microseconds.
    #[arg(long)]
    pub max_batch_wait_us: Option<u64>,
    /// LLM cost model: prefill time per prompt token, in microseconds
    /// [default: 20].
    #[arg(long, value_name = "US", help_heading = LLM_FLAGS)]
    pub llm_prefill_us_per_token: Option<f64>,
    /// LLM cost model: one decode step, in microseconds; every running
    /// sequence gains a token per step, so this is the time per output
    /// token [default: 2000].
    #[arg(long, value_name = "US", help_heading = LLM_FLAGS)]
    pub llm_decode_us_per_token: Option<f64>,
    /// LLM cost model: sequences a device runs at once (continuous
    /// batching); more wait in a queue [default: 64].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub llm_max_sequences: Option<usize>,
    /// LLM answers: every answer this many tokens (at least 2) [default:
    /// lengths drawn from each input's bytes, as the benchmark's data set].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS,
          conflicts_with_all = ["llm_output_tokens_mean", "llm_output_tokens_min", "llm_output_tokens_max"])]
    pub llm_output_tokens: Option<u32>,
    /// LLM answers: mean length in tokens [default: the benchmark's; with
    /// only --llm-output-tokens-min/max, halfway: uniform].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub llm_output_tokens_mean: Option<u32>,
    /// LLM answers: shortest, in tokens (at least 2) [default: the
    /// benchmark's].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub llm_output_tokens_min: Option<u32>,
    /// LLM answers: longest, in tokens [default: the benchmark's].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub llm_output_tokens_max: Option<u32>,
    /// A serving engine's base URL, e.g. http://127.0.0.1:8080 (implies
    /// --backend openai; `[openai]` holds its other settings).
    #[arg(long, value_name = "URL")]
    pub engine_url: Option<String>,
    /// Which engine answers at --engine-url [default: the config file's
    /// `openai.api`, else llama.cpp].
    #[arg(long, value_name = "ENGINE", value_parser = ["llama.cpp", "vllm", "sglang", "trtllm"])]
    pub engine_api: Option<String>,
    /// TLS certificate chain (PEM); with --tls-key enables TLS on gRPC.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept only clients with a certificate signed by this CA (mTLS).
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Development TLS: generate (or reuse) a CA, server and client pair in DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "tls_cert")]
    pub dev_tls: Option<PathBuf>,
    /// With --dev-tls: require the generated client certificate (mTLS).
    #[arg(long, requires = "dev_tls")]
    pub require_client_cert: bool,
    /// While the node runs, ask the kernel that no CPU of this machine take
    /// more than US µs to wake (its CPU latency QoS, /dev/cpu_dma_latency;
    /// root). 0 keeps idle CPUs polling instead of halting: lower, steadier
    /// per-query latency for more power. Off unless given.
    #[arg(long, value_name = "US")]
    pub cpu_latency_us: Option<u32>,
}

/// The config file. It serializes back to TOML, so tools and tests build
/// configs from values.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    /// Which transports to serve.
    pub transport: Option<Transport>,
    /// The benchmark, by any of its names.
    pub benchmark: Option<String>,
    /// The codec of responses.
    pub response_codec: Option<String>,
    /// Largest decoded sample accepted, in bytes.
    pub max_sample_bytes: Option<u64>,
    /// What runs the model.
    pub backend: Option<BackendKind>,
    /// The synthetic backend's cost model.
    pub synthetic: SyntheticConfig,
    /// The LLM cost model, for benchmarks with token latencies.
    pub llm: LlmConfig,
    /// The ONNX backend's model and hooks.
    pub onnx: OnnxConfig,
    /// The serving engine of backend openai.
    pub openai: OpenaiConfig,
    /// SUT-side batching.
    pub batching: BatchPolicy,
    /// What the node takes on at once.
    pub limits: LimitsConfig,
}

impl FileConfig {
    /// Reads a config file; paths in it are relative to its folder.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let mut file: FileConfig =
            toml::from_str(&text).with_context(|| format!("config file {}", path.display()))?;
        // join keeps absolute paths as they are.
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [&mut file.onnx.model, &mut file.onnx.runtime_library]
            .into_iter()
            .flatten()
        {
            *p = base.join(&*p);
        }
        Ok(file)
    }

    /// The benchmark the file names, if any.
    pub fn benchmark(&self) -> Result<Option<Benchmark>> {
        self.benchmark
            .as_deref()
            .map(Benchmark::parse)
            .transpose()
            .context("config file key benchmark")
    }

    /// The backend this file configures.
    pub fn backend_config(&self) -> BackendConfig {
        BackendConfig {
            kind: self.backend.unwrap_or_default(),
            synthetic: self.synthetic.clone(),
            llm: self.llm.clone(),
            onnx: self.onnx.clone(),
            openai: self.openai.clone(),
        }
    }
}

/// Everything the daemon runs with.
#[derive(Debug)]
pub struct NodeConfig {
    /// The command line as given.
    pub cli: Cli,
    /// Which transports to serve.
    pub transport: Transport,
    /// The benchmark whose codec rules apply.
    pub benchmark: Benchmark,
    /// The codec of responses, one the benchmark allows for outputs.
    pub response_codec: Codec,
    /// Largest decoded sample accepted, in bytes.
    pub max_sample_bytes: u64,
    /// What runs the model.
    pub backend: BackendConfig,
    /// SUT-side batching.
    pub batching: BatchPolicy,
    /// What the node takes on at once.
    pub limits: Limits,
}

impl NodeConfig {
    /// The flags, then the config file they name, then the defaults.
    pub fn from_cli(cli: Cli) -> Result<Self> {
        let file = cli
            .config
            .as_deref()
            .map(FileConfig::load)
            .transpose()?
            .unwrap_or_default();
        let mut backend = file.backend_config();
        let benchmark = match cli.benchmark {
            Some(b) => b,
            None => file.benchmark()?.unwrap_or(default_benchmark()),
        };
        let response_codec = match (cli.response_codec, &file.response_codec) {
            (Some(c), _) => c,
            (None, Some(s)) => s.parse().context("config file key response_codec")?,
            (None, None) => Codec::None,
        };
        benchmark
            .check_codec(Direction::Output, response_codec)
            .context("response codec")?;
        if let Some(kind) = cli.backend {
            backend.kind = kind;
        }
        if let Some(model) = &cli.model {
            if cli.backend == Some(BackendKind::Synthetic) {
                bail!("--model needs --backend onnx, not synthetic");
            }
            backend.kind = BackendKind::Onnx;
            backend.onnx.model = Some(model.clone());
        }
        if let Some(name) = &cli.input_name {
            backend.onnx.input_name = Some(name.clone());
        }
        if let Some(lib) = &cli.onnxruntime_lib {
            backend.onnx.runtime_library = Some(lib.clone());
        }
        if let Some(provider) = cli.execution_provider {
            backend.onnx.execution_provider = provider;
        }
        apply_llm_flags(&cli, &mut backend.llm);
        if let Some(url) = &cli.engine_url {
            if cli.backend.is_some_and(|b| b != BackendKind::Openai) {
                bail!("--engine-url needs --backend openai");
            }
            backend.kind = BackendKind::Openai;
            backend.openai.url = Some(url.clone());
        }
        if let Some(api) = &cli.engine_api {
            backend.openai.api = match api.as_str() {
                "vllm" => EngineApi::Vllm,
                "sglang" => EngineApi::Sglang,
                "trtllm" => EngineApi::Trtllm,
                _ => EngineApi::LlamaCpp,
            };
        }
        backend.check(&benchmark)?;
        let mut batching = file.batching;
        if let Some(n) = cli.max_batch_size {
            batching.max_batch_size = n;
        }
        if let Some(us) = cli.max_batch_wait_us {
            batching.max_wait_us = us;
        }
        if batching.max_batch_size == 0 {
            bail!("max batch size must be at least 1");
        }
        if cli.name.trim().is_empty() {
            bail!("--name must not be empty");
        }
        let limits = Limits::from_config(&file.limits, &benchmark)?;
        let max_sample_bytes = file
            .max_sample_bytes
            .unwrap_or_else(|| transport::default_max_sample_bytes(&benchmark));
        // A sample announces its decoded size; the node allocates it. One
        // sample may not be larger than everything the node may hold.
        if max_sample_bytes > limits.max_bytes_held {
            bail!(
                "config file key max_sample_bytes ({max_sample_bytes}) is larger than \
                 limits.max_bytes_held ({})",
                limits.max_bytes_held
            );
        }
        Ok(Self {
            transport: cli.transport.or(file.transport).unwrap_or(Transport::Both),
            benchmark,
            response_codec,
            max_sample_bytes,
            limits,
            backend,
            batching,
            cli,
        })
    }
}

/// The `--llm-*` flags over the file's `[llm]`. A fixed answer length
/// on the command line replaces the file's range, and a range its fixed
/// length.
fn apply_llm_flags(cli: &Cli, llm: &mut LlmConfig) {
    let ranged = [
        cli.llm_output_tokens_mean,
        cli.llm_output_tokens_min,
        cli.llm_output_tokens_max,
    ];
    if cli.llm_output_tokens.is_some() {
        (
            llm.output_tokens_mean,
            llm.output_tokens_min,
            llm.output_tokens_max,
        ) = (None, None, None);
        llm.output_tokens = cli.llm_output_tokens;
    } else if ranged.iter().any(Option::is_some) {
        llm.output_tokens = None;
        let fields = [
            &mut llm.output_tokens_mean,
            &mut llm.output_tokens_min,
            &mut llm.output_tokens_max,
        ];
        for (field, flag) in fields.into_iter().zip(ranged) {
            if flag.is_some() {
                *field = flag;
            }
        }
    }
    if let Some(us) = cli.llm_prefill_us_per_token {
        llm.prefill_us_per_token = us;
    }
    if let Some(us) = cli.llm_decode_us_per_token {
        llm.decode_us_per_token = us;
    }
    if let Some(n) = cli.llm_max_sequences {
        llm.max_sequences = n;
    }
}

/// The benchmark of a node started without one.
fn default_benchmark() -> Benchmark {
    Benchmark::parse("resnet50").expect("in the table")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_sample_larger_than_the_node_may_hold_is_refused_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "max_sample_bytes = 9000000000000000000\n").unwrap();
        let cli = Cli::parse_from([
            "sut-node",
            "--name",
            "a",
            "--config",
            path.to_str().unwrap(),
        ]);
        let e = NodeConfig::from_cli(cli).unwrap_err().to_string();
        assert!(
            e.contains("max_sample_bytes") && e.contains("limits.max_bytes_held"),
            "{e}"
        );
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn file_errors_name_the_file_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "[synthetic]\nbatch_cost = 5\n").unwrap();
        let err = format!("{:#}", FileConfig::load(&path).unwrap_err());
        assert!(
            err.contains("node.toml") && err.contains("batch_cost"),
            "{err}"
        );
        std::fs::write(
            &path,
            "[synthetic]\nbatch_cost_us = 5\ndevices = 2\n[batching]\nmax_batch_size = 8\n",
        )
        .unwrap();
        let f = FileConfig::load(&path).unwrap();
        assert_eq!(
            (
                f.synthetic.batch_cost_us,
                f.synthetic.devices,
                f.batching.max_batch_size
            ),
            (5, 2, 8)
        );
    }

    #[test]
    fn disallowed_response_codec_is_refused() {
        let cli = Cli::parse_from([
            "sut-node",
            "--name",
            "a",
            "--benchmark",
            "gptj",
            "--response-codec",
            "lz4",
        ]);
        let err = format!("{:#}", NodeConfig::from_cli(cli).unwrap_err());
        assert_eq!(
            err,
            "response codec: the rules allow no lz4 outputs for gptj (allowed: none)"
        );
    }

    #[test]
    fn aliases_get_their_benchmark_s_codecs() {
        let node = |benchmark: &str| {
            NodeConfig::from_cli(Cli::parse_from([
                "sut-node",
                "--name",
                "a",
                "--benchmark",
                benchmark,
                "--response-codec",
                "lz4",
            ]))
        };
        let unet = node("3d-unet-99").unwrap();
        assert_eq!(unet.benchmark.to_string(), "3d-unet-99");
        assert_eq!(unet.response_codec, Codec::Lz4);
        assert!(node("resnet50").is_err());
        let err = Cli::try_parse_from(["sut-node", "--name", "a", "--benchmark", "resnet"])
            .map(|cli| cli.benchmark.unwrap().to_string());
        assert_eq!(err.unwrap(), "resnet50");
        let err = Cli::try_parse_from(["sut-node", "--name", "a", "--benchmark", "resnt50"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown benchmark \"resnt50\""), "{err}");
    }

    #[test]
    fn a_file_serializes_back_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        let file = FileConfig {
            benchmark: Some("bert-99".into()),
            backend: Some(BackendKind::Onnx),
            synthetic: SyntheticConfig {
                batch_cost_us: 7,
                ..SyntheticConfig::default()
            },
            onnx: OnnxConfig {
                model: Some("/models/m.onnx".into()),
                ..OnnxConfig::default()
            },
            ..FileConfig::default()
        };
        std::fs::write(&path, toml::to_string(&file).unwrap()).unwrap();
        let back = FileConfig::load(&path).unwrap();
        assert_eq!(back.benchmark.as_deref(), Some("bert-99"));
        assert_eq!(back.backend, Some(BackendKind::Onnx));
        assert_eq!(back.synthetic, file.synthetic);
        assert_eq!(back.onnx, file.onnx);
    }

    #[test]
    fn file_benchmark_is_parsed_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        let config_error = |text: &str| {
            std::fs::write(&path, text).unwrap();
            let cli = Cli::parse_from([
                "sut-node",
                "--name",
                "a",
                "--config",
                path.to_str().unwrap(),
            ]);
            format!("{:#}", NodeConfig::from_cli(cli).unwrap_err())
        };
        let err = config_error("benchmark = \"bert-99.9\"\nresponse_codec = \"lz4\"\n");
        assert!(err.contains("no lz4 outputs for bert-99.9"), "{err}");
        assert_eq!(
            config_error("benchmark = \"bert-98\"\n"),
            "config file key benchmark: benchmark bert has no accuracy target 98 (its targets: 99, 99.9)"
        );
    }

    fn node(args: &[&str]) -> Result<NodeConfig> {
        let mut argv = vec!["sut-node", "--name", "a"];
        argv.extend_from_slice(args);
        NodeConfig::from_cli(Cli::try_parse_from(argv)?)
    }

    #[test]
    fn token_benchmarks_run_the_llm_cost_model() {
        let c = node(&["--benchmark", "llama2-70b"]).unwrap();
        assert_eq!(c.backend.kind, BackendKind::Synthetic);
        assert!(c.backend.streams_tokens(&c.benchmark));
        assert_eq!(c.backend.llm, LlmConfig::default());
        let c = node(&[
            "--benchmark",
            "llama3.1-405b-interactive",
            "--llm-prefill-us-per-token",
            "0.5",
            "--llm-decode-us-per-token",
            "0",
            "--llm-max-sequences",
            "8",
            "--llm-output-tokens",
            "16",
        ])
        .unwrap();
        let llm = &c.backend.llm;
        assert_eq!(
            (
                llm.prefill_us_per_token,
                llm.decode_us_per_token,
                llm.max_sequences
            ),
            (0.5, 0.0, 8)
        );
        assert_eq!(llm.output_tokens, Some(16));
        assert!(!c
            .backend
            .streams_tokens(&Benchmark::parse("resnet50").unwrap()));
    }

    #[test]
    fn backends_that_cannot_serve_the_benchmark_are_refused_at_startup() {
        let e = format!(
            "{:#}",
            node(&["--benchmark", "gpt-oss-120b", "--backend", "onnx"]).unwrap_err()
        );
        assert!(
            e.starts_with("benchmark gpt-oss-120b measures token latencies")
                && e.contains("backend onnx answers whole samples only"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            node(&["--benchmark", "resnet50", "--backend", "synthetic-llm"]).unwrap_err()
        );
        assert!(
            e.starts_with("backend synthetic-llm streams tokens, but benchmark resnet50"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            node(&["--benchmark", "llama2-70b", "--llm-output-tokens", "1"]).unwrap_err()
        );
        assert!(e.contains("at least 2 are needed"), "{e}");
        assert!(node(&["--llm-output-tokens", "5", "--llm-output-tokens-max", "9"]).is_err());
    }

    #[test]
    fn llm_section_and_flags_combine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "benchmark = \"deepseek-r1\"\n[llm]\ndecode_us_per_token = 500\n\
             max_sequences = 128\ndevices = 2\noutput_tokens = 300\ntoken_ids = \"int64\"\n",
        )
        .unwrap();
        let file = path.to_str().unwrap();
        let c = node(&["--config", file]).unwrap();
        let llm = &c.backend.llm;
        assert_eq!(
            (llm.decode_us_per_token, llm.max_sequences, llm.devices),
            (500.0, 128, 2)
        );
        assert_eq!(llm.output_tokens, Some(300));
        assert_eq!(llm.token_ids, Some(crate::backend::llm::TokenIds::Int64));
        // A range on the command line replaces the file's fixed length.
        let c = node(&["--config", file, "--llm-output-tokens-max", "1000"]).unwrap();
        let llm = &c.backend.llm;
        assert_eq!(
            (llm.output_tokens, llm.output_tokens_max),
            (None, Some(1000))
        );
        std::fs::write(&path, "[llm]\nprefill_us = 5\n").unwrap();
        let e = format!("{:#}", FileConfig::load(&path).unwrap_err());
        assert!(e.contains("prefill_us"), "{e}");
    }
}
