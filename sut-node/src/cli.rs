//! The daemon's command line: its flags, written over the config file's
//! settings (flags win), and the settings the library resolves from them.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;
use netdiv_proto::codec::Codec;
use netdiv_proto::Benchmark;
use sut_node::backend::onnx::Provider;
use sut_node::backend::openai::api::EngineApi;
use sut_node::backend::synthetic_llm::LlmConfig;
use sut_node::backend::BackendKind;
use sut_node::config::{FileConfig, NodeConfig, Transport};

/// Where `--help` lists the flags of the LLM cost model.
const LLM_FLAGS: &str = "LLM cost model (benchmarks with token latencies)";

/// netdiv sut-node: serves inference queries from the LoadGen node.
#[derive(Debug, Parser)]
#[command(name = "sut-node", version, about)]
pub(crate) struct Cli {
    /// Address to listen on; port 0 picks a free port (gRPC on TCP, QUIC
    /// on UDP, the same port number when it is free on both).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) listen: SocketAddr,
    /// This node's name; unique among the nodes of a SUT.
    #[arg(long)]
    pub(crate) name: String,
    /// Once listening, write FILE (atomically): one JSON object with the
    /// node's name, its gRPC and QUIC addresses, TLS mode, backend and
    /// process id, for scripts and tests that start a node on port 0.
    #[arg(long, value_name = "FILE")]
    pub(crate) ready_file: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (queries, samples,
    /// bytes, batch sizes, inference times, queue depth, declines, errors,
    /// connections); off unless given. Port 0 picks a free port (the
    /// ready file and log say which).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// Diagnostics: --log-level and --log-format.
    #[command(flatten)]
    pub(crate) log: netdiv_proto::logging::LogArgs,
    /// What runs the model [default: the config file's `backend`, else
    /// synthetic]. For a benchmark that measures token latencies (the
    /// LLMs, Whisper) synthetic is the LLM cost model (`[llm]`, the --llm-*
    /// flags), which sends each sample's first token, then its completion
    /// with the token count; onnx cannot serve those benchmarks.
    #[arg(long, value_enum)]
    pub(crate) backend: Option<BackendKind>,
    /// ONNX model file (implies --backend onnx).
    #[arg(long, value_name = "FILE")]
    pub(crate) model: Option<PathBuf>,
    /// The model input that samples feed [default: its only input].
    #[arg(long, value_name = "NAME")]
    pub(crate) input_name: Option<String>,
    /// The ONNX Runtime shared library [default: $ORT_DYLIB_PATH, then
    /// libonnxruntime.so on the loader's path].
    #[arg(long, value_name = "FILE")]
    pub(crate) onnxruntime_lib: Option<PathBuf>,
    /// Where the ONNX model runs.
    #[arg(long, value_enum)]
    pub(crate) execution_provider: Option<Provider>,
    /// Which transports to serve [default: the config file's, else both].
    #[arg(long, value_enum)]
    pub(crate) transport: Option<Transport>,
    /// TOML file with backend, `[synthetic]`, `[llm]`, `[onnx]`, `[batching]` and
    /// other settings.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Benchmark whose codec rules apply (resnet50, bert-99, gptj, ...)
    /// [default: the config file's, else resnet50].
    #[arg(long)]
    pub(crate) benchmark: Option<Benchmark>,
    /// Codec of responses: none or lz4 (if the benchmark allows it).
    #[arg(long)]
    pub(crate) response_codec: Option<Codec>,
    /// Largest batch the backend runs (along the model's batch dimension).
    #[arg(long, visible_alias = "max-batch", value_name = "N")]
    pub(crate) max_batch_size: Option<usize>,
    /// Longest a batch's first sample waits for more, in microseconds.
    #[arg(long)]
    pub(crate) max_batch_wait_us: Option<u64>,
    /// Threads that run the node's network I/O [default: one per CPU].
    /// 1 suits the latency-bound scenarios (SingleStream, MultiStream):
    /// a query's answer is not handed between I/O threads.
    #[arg(long, value_name = "N")]
    pub(crate) io_threads: Option<usize>,
    /// Run each query's samples on the I/O thread that received it, as
    /// batches of the query's own samples, not on device threads: two
    /// thread hand-offs fewer per query, for SingleStream and MultiStream.
    /// Implies --io-threads 1; batch backends (synthetic, onnx) of one
    /// device only.
    #[arg(long)]
    pub(crate) run_on_io_thread: bool,
    /// LLM cost model: prefill time per prompt token, in microseconds
    /// [default: 20].
    #[arg(long, value_name = "US", help_heading = LLM_FLAGS)]
    pub(crate) llm_prefill_us_per_token: Option<f64>,
    /// LLM cost model: one decode step, in microseconds; every running
    /// sequence gains a token per step, so this is the time per output
    /// token [default: 2000].
    #[arg(long, value_name = "US", help_heading = LLM_FLAGS)]
    pub(crate) llm_decode_us_per_token: Option<f64>,
    /// LLM cost model: sequences a device runs at once (continuous
    /// batching); more wait in a queue [default: 64].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub(crate) llm_max_sequences: Option<usize>,
    /// LLM answers: every answer this many tokens (at least 2) [default:
    /// lengths drawn from each input's bytes, as the benchmark's data set].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS,
          conflicts_with_all = ["llm_output_tokens_mean", "llm_output_tokens_min", "llm_output_tokens_max"])]
    pub(crate) llm_output_tokens: Option<u32>,
    /// LLM answers: mean length in tokens [default: the benchmark's; with
    /// only --llm-output-tokens-min/max, halfway: uniform].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub(crate) llm_output_tokens_mean: Option<u32>,
    /// LLM answers: shortest, in tokens (at least 2) [default: the
    /// benchmark's].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub(crate) llm_output_tokens_min: Option<u32>,
    /// LLM answers: longest, in tokens [default: the benchmark's].
    #[arg(long, value_name = "N", help_heading = LLM_FLAGS)]
    pub(crate) llm_output_tokens_max: Option<u32>,
    /// A serving engine's base URL, e.g. http://127.0.0.1:8080 (implies
    /// --backend openai; `[openai]` holds its other settings).
    #[arg(long, value_name = "URL")]
    pub(crate) engine_url: Option<String>,
    /// Which engine answers at --engine-url [default: the config file's
    /// `openai.api`, else llama.cpp].
    #[arg(long, value_name = "ENGINE", value_parser = ["llama.cpp", "vllm", "sglang", "trtllm"])]
    pub(crate) engine_api: Option<String>,
    /// TLS certificate chain (PEM); with --tls-key enables TLS on gRPC.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Accept only clients with a certificate signed by this CA (mTLS).
    #[arg(long, value_name = "FILE")]
    pub(crate) client_ca: Option<PathBuf>,
    /// Development TLS: generate (or reuse) a CA, server and client pair in DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "tls_cert")]
    pub(crate) dev_tls: Option<PathBuf>,
    /// With --dev-tls: require the generated client certificate (mTLS).
    #[arg(long, requires = "dev_tls")]
    pub(crate) require_client_cert: bool,
    /// While the node runs, ask the kernel that no CPU of this machine take
    /// more than US µs to wake (its CPU latency QoS, /dev/cpu_dma_latency;
    /// root). 0 keeps idle CPUs polling instead of halting: lower, steadier
    /// per-query latency for more power. Off unless given.
    #[arg(long, value_name = "US")]
    pub(crate) cpu_latency_us: Option<u32>,
}

/// The node's settings: the config file `--config` names (or none), the
/// flags written over it, resolved and checked by the library.
pub(crate) fn node_config(cli: &Cli) -> Result<NodeConfig> {
    if cli.name.trim().is_empty() {
        bail!("--name must not be empty");
    }
    let mut file = cli
        .config
        .as_deref()
        .map(FileConfig::load)
        .transpose()?
        .unwrap_or_default();
    flags_over_file(cli, &mut file)?;
    NodeConfig::from_file(file)
}

/// Writes each flag given over the file's setting.
fn flags_over_file(cli: &Cli, file: &mut FileConfig) -> Result<()> {
    if let Some(benchmark) = cli.benchmark {
        file.benchmark = Some(benchmark.to_string());
    }
    if let Some(codec) = cli.response_codec {
        file.response_codec = Some(codec.to_string());
    }
    if let Some(transport) = cli.transport {
        file.transport = Some(transport);
    }
    if let Some(kind) = cli.backend {
        file.backend = Some(kind);
    }
    if let Some(model) = &cli.model {
        if cli.backend == Some(BackendKind::Synthetic) {
            bail!("--model needs --backend onnx, not synthetic");
        }
        file.backend = Some(BackendKind::Onnx);
        file.onnx.model = Some(model.clone());
    }
    if let Some(name) = &cli.input_name {
        file.onnx.input_name = Some(name.clone());
    }
    if let Some(lib) = &cli.onnxruntime_lib {
        file.onnx.runtime_library = Some(lib.clone());
    }
    if let Some(provider) = cli.execution_provider {
        file.onnx.execution_provider = provider;
    }
    apply_llm_flags(cli, &mut file.llm);
    if let Some(url) = &cli.engine_url {
        if cli.backend.is_some_and(|b| b != BackendKind::Openai) {
            bail!("--engine-url needs --backend openai");
        }
        file.backend = Some(BackendKind::Openai);
        file.openai.url = Some(url.clone());
    }
    if let Some(api) = &cli.engine_api {
        file.openai.api = match api.as_str() {
            "vllm" => EngineApi::Vllm,
            "sglang" => EngineApi::Sglang,
            "trtllm" => EngineApi::Trtllm,
            _ => EngineApi::LlamaCpp,
        };
    }
    if let Some(n) = cli.max_batch_size {
        file.batching.max_batch_size = n;
    }
    if let Some(us) = cli.max_batch_wait_us {
        file.batching.max_wait_us = us;
    }
    if let Some(n) = cli.io_threads {
        file.io_threads = Some(n);
    }
    if cli.run_on_io_thread {
        file.run_on_io_thread = Some(true);
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn node(args: &[&str]) -> Result<NodeConfig> {
        let mut argv = vec!["sut-node", "--name", "a"];
        argv.extend_from_slice(args);
        node_config(&Cli::try_parse_from(argv)?)
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn aliases_get_their_benchmark_s_codecs() {
        let node = |benchmark: &str| {
            node_config(&Cli::parse_from([
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
        assert_eq!(
            llm.token_ids,
            Some(sut_node::backend::synthetic_llm::TokenIds::Int64)
        );
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

    #[test]
    fn flags_win_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "benchmark = \"resnet50\"\ntransport = \"grpc\"\n[batching]\nmax_batch_size = 8\n",
        )
        .unwrap();
        let file = path.to_str().unwrap();
        let c = node(&["--config", file]).unwrap();
        assert_eq!(
            (
                c.benchmark.to_string().as_str(),
                c.transport,
                c.batching.max_batch_size
            ),
            ("resnet50", Transport::Grpc, 8)
        );
        let c = node(&[
            "--config",
            file,
            "--benchmark",
            "3d-unet-99.9",
            "--response-codec",
            "lz4",
            "--transport",
            "quic",
            "--max-batch-size",
            "2",
        ])
        .unwrap();
        assert_eq!(
            (
                c.benchmark.to_string().as_str(),
                c.response_codec,
                c.transport,
                c.batching.max_batch_size
            ),
            ("3d-unet-99.9", Codec::Lz4, Transport::Quic, 2)
        );
        let blank = Cli::parse_from(["sut-node", "--name", " "]);
        let e = node_config(&blank).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("--name"), "{e}");
    }
}
