//! A node's settings: the config file and what it resolves to. The
//! daemon's flags are the binary's (`src/cli.rs`); they win over the file.

use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use netdiv_proto::codec::Codec;
use netdiv_proto::transport;
use netdiv_proto::{Benchmark, Direction};
use serde::{Deserialize, Serialize};

use crate::backend::onnx::OnnxConfig;
use crate::backend::openai::OpenaiConfig;
use crate::backend::synthetic::SyntheticConfig;
use crate::backend::synthetic_llm::LlmConfig;
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
    /// Threads that run the node's network I/O (its servers' async
    /// runtime); one per CPU by default.
    pub io_threads: Option<usize>,
    /// Run each query's samples on the I/O thread that received it
    /// (batch backends; implies one I/O thread).
    pub run_on_io_thread: Option<bool>,
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

/// Everything the node runs with, resolved from a config file (the
/// daemon writes its flags into the file's fields first: flags win).
#[derive(Debug)]
pub struct NodeConfig {
    /// Which transports to serve.
    pub transport: Transport,
    /// The benchmark whose codec rules apply.
    pub benchmark: Benchmark,
    /// The codec of responses, one the benchmark allows for outputs.
    pub response_codec: Codec,
    /// Largest decoded sample accepted, in bytes.
    pub max_sample_bytes: u64,
    /// Threads that run the node's network I/O: `None`, one per CPU.
    /// One thread saves a latency-bound scenario the hand-offs between
    /// I/O threads; more decode large inputs side by side.
    pub io_threads: Option<usize>,
    /// Run each query's samples on the I/O thread that received it, not
    /// on device threads: two thread hand-offs fewer per query.
    pub run_on_io_thread: bool,
    /// What runs the model.
    pub backend: BackendConfig,
    /// SUT-side batching.
    pub batching: BatchPolicy,
    /// What the node takes on at once.
    pub limits: Limits,
}

impl NodeConfig {
    /// The file's settings, then the defaults, each checked: a codec the
    /// benchmark allows for outputs, a backend that can serve the
    /// benchmark, a batch of at least one, limits that hold a sample.
    pub fn from_file(file: FileConfig) -> Result<Self> {
        let backend = file.backend_config();
        let benchmark = file.benchmark()?.unwrap_or(default_benchmark());
        let response_codec = match &file.response_codec {
            Some(s) => s.parse().context("config file key response_codec")?,
            None => Codec::None,
        };
        benchmark
            .check_codec(Direction::Output, response_codec)
            .context("response codec")?;
        backend.check(&benchmark)?;
        if file.batching.max_batch_size == 0 {
            bail!("max batch size must be at least 1");
        }
        if file.io_threads == Some(0) {
            bail!("io_threads (--io-threads) must be at least 1");
        }
        let run_on_io_thread = file.run_on_io_thread.unwrap_or(false);
        let io_threads = match run_on_io_thread {
            true => Some(io_threads_for_samples(&file, &benchmark)?),
            false => file.io_threads,
        };
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
            transport: file.transport.unwrap_or(Transport::Both),
            benchmark,
            response_codec,
            max_sample_bytes,
            io_threads,
            run_on_io_thread,
            limits,
            backend,
            batching: file.batching,
        })
    }
}

/// The I/O threads of a node that runs its samples on its I/O thread:
/// one, so that a query and its batch stay on the thread that received
/// it. Refused: another thread count, a batching wait (a batch is the
/// query's own samples; nothing waits for company), a benchmark whose
/// samples stream tokens.
fn io_threads_for_samples(file: &FileConfig, benchmark: &Benchmark) -> Result<usize> {
    const KEY: &str = "run_on_io_thread (--run-on-io-thread)";
    if let Some(n) = file.io_threads.filter(|&n| n != 1) {
        bail!("{KEY} runs samples on the node's one I/O thread, but io_threads (--io-threads) is {n}: give 1 or leave it out");
    }
    if file.batching.max_wait_us != 0 {
        bail!(
            "{KEY} batches each query's own samples and waits for no others, but \
             batching.max_wait_us (--max-batch-wait-us) is {}: leave it out",
            file.batching.max_wait_us
        );
    }
    if benchmark.uses_token_latencies() {
        bail!("{KEY} runs whole batches, but benchmark {benchmark} streams tokens from device threads");
    }
    Ok(1)
}

/// The benchmark of a node started without one.
fn default_benchmark() -> Benchmark {
    Benchmark::parse("resnet50").expect("in the table")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings of `text`, a config file.
    fn resolved(text: &str) -> Result<NodeConfig> {
        NodeConfig::from_file(toml::from_str(text)?)
    }

    #[test]
    fn a_sample_larger_than_the_node_may_hold_is_refused_by_key() {
        let e = resolved("max_sample_bytes = 9000000000000000000\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("max_sample_bytes") && e.contains("limits.max_bytes_held"),
            "{e}"
        );
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
    fn samples_on_the_io_thread_take_one_io_thread_and_no_batching_wait() {
        let config = resolved("run_on_io_thread = true\n").unwrap();
        assert!(config.run_on_io_thread);
        assert_eq!(config.io_threads, Some(1));
        let config = resolved("run_on_io_thread = true\nio_threads = 1\n").unwrap();
        assert_eq!(config.io_threads, Some(1));
        assert!(!resolved("").unwrap().run_on_io_thread);
        for (text, names) in [
            ("run_on_io_thread = true\nio_threads = 2\n", "io_threads"),
            (
                "run_on_io_thread = true\n[batching]\nmax_wait_us = 100\n",
                "max_wait_us",
            ),
            (
                "run_on_io_thread = true\nbenchmark = \"llama2-70b\"\n",
                "llama2-70b",
            ),
        ] {
            let e = resolved(text).unwrap_err().to_string();
            assert!(e.contains("run_on_io_thread") && e.contains(names), "{e}");
        }
    }

    #[test]
    fn io_threads_are_at_least_one_and_one_per_cpu_unless_given() {
        assert_eq!(resolved("").unwrap().io_threads, None);
        assert_eq!(resolved("io_threads = 1\n").unwrap().io_threads, Some(1));
        let e = resolved("io_threads = 0\n").unwrap_err().to_string();
        assert!(e.contains("io_threads"), "{e}");
    }

    #[test]
    fn disallowed_response_codec_is_refused() {
        let err = format!(
            "{:#}",
            resolved("benchmark = \"gptj\"\nresponse_codec = \"lz4\"\n").unwrap_err()
        );
        assert_eq!(
            err,
            "response codec: the rules allow no lz4 outputs for gptj (allowed: none)"
        );
    }

    #[test]
    fn file_benchmark_is_parsed_and_named() {
        let err = format!(
            "{:#}",
            resolved("benchmark = \"bert-99.9\"\nresponse_codec = \"lz4\"\n").unwrap_err()
        );
        assert!(err.contains("no lz4 outputs for bert-99.9"), "{err}");
        assert_eq!(
            format!("{:#}", resolved("benchmark = \"bert-98\"\n").unwrap_err()),
            "config file key benchmark: benchmark bert has no accuracy target 98 (its targets: 99, 99.9)"
        );
    }
}
