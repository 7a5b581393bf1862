//! Accelerator backends. A batch backend takes a batch of decoded inputs
//! and gives one output (or a per-sample error) per input; the synthetic
//! LLM backend ([`synthetic_llm`]) and a serving engine over HTTP ([`openai`])
//! instead stream each sample's tokens, for the benchmarks that measure
//! token latencies. Each is a [`device::Device`], the one interface the
//! node's device threads run; backends know nothing of transports or
//! batching policy.

pub mod device;
mod hash;
pub mod onnx;
pub mod openai;
pub mod prepost;
pub mod synthetic;
pub mod synthetic_llm;

use std::sync::Arc;

use netdiv_proto::Benchmark;
use serde::{Deserialize, Serialize};

pub use self::device::Backend;
use self::device::{BatchDevice, Device, Work};
use self::onnx::{OnnxBackend, OnnxConfig, OnnxError};
use self::openai::{OpenaiBackend, OpenaiConfig, OpenaiError};
use self::synthetic::{SyntheticBackend, SyntheticConfig};
use self::synthetic_llm::{LlmConfig, LlmConfigError, SyntheticLlmBackend};

/// Which backend a node runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// A cost model with a deterministic output (tests, benchmarks); for a
    /// benchmark that measures token latencies, the LLM cost model
    /// (`[llm]`), which streams tokens.
    #[default]
    Synthetic,
    /// The LLM cost model (`[llm]`) only: refused for benchmarks without
    /// token latencies.
    SyntheticLlm,
    /// An ONNX model run by ONNX Runtime (CUDA or CPU); whole samples
    /// only, so not for benchmarks with token latencies.
    Onnx,
    /// A serving engine on the node's host, over HTTP (`[openai]`):
    /// llama.cpp, vLLM or SGLang; token-id prompts with token latencies
    /// only.
    Openai,
}

impl BackendKind {
    /// The name in config files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Synthetic => "synthetic",
            BackendKind::SyntheticLlm => synthetic_llm::KIND,
            BackendKind::Onnx => "onnx",
            BackendKind::Openai => openai::KIND,
        }
    }
}

/// A backend and the settings of each kind.
#[derive(Clone, Debug, Default)]
pub struct BackendConfig {
    /// Which backend runs.
    pub kind: BackendKind,
    /// The synthetic backend's settings.
    pub synthetic: SyntheticConfig,
    /// The synthetic LLM backend's settings.
    pub llm: LlmConfig,
    /// The ONNX backend's settings.
    pub onnx: OnnxConfig,
    /// The serving engine's address and request settings.
    pub openai: OpenaiConfig,
}

/// `Ok` if `device` answers the way `benchmark` is measured: streamed
/// tokens exactly for benchmarks with token latencies, from a device built
/// for that benchmark.
pub fn check_benchmark<T: Work>(
    device: &dyn Device<T>,
    benchmark: &Benchmark,
) -> Result<(), BackendError> {
    let built_for = device.streams_tokens_for();
    pairing(device.kind(), built_for.is_some(), benchmark)?;
    match built_for {
        Some(built_for) if !built_for.same_benchmark(benchmark) => {
            Err(LlmConfigError::OtherBenchmark {
                node: benchmark.to_string(),
                backend: built_for.to_string(),
            }
            .into())
        }
        _ => Ok(()),
    }
}

/// Why a backend cannot start, or not for this benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The ONNX model or runtime could not be loaded.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// The `[llm]` settings cannot run.
    #[error(transparent)]
    Llm(#[from] LlmConfigError),
    /// The serving engine cannot be used.
    #[error(transparent)]
    Openai(#[from] OpenaiError),
    /// A benchmark with token latencies and a backend that answers whole
    /// samples only.
    #[error(
        "benchmark {benchmark} measures token latencies (each sample's first token, then its \
         completion with n_tokens), but backend {backend} answers whole samples only: use \
         backend synthetic (its LLM cost model, [llm]) or synthetic-llm"
    )]
    NotStreaming {
        /// The benchmark as named.
        benchmark: String,
        /// The backend kind.
        backend: &'static str,
    },
    /// A token-streaming backend and a benchmark without token latencies.
    #[error(
        "backend {backend} streams tokens, but benchmark {benchmark} does not measure token \
         latencies: use backend synthetic or onnx"
    )]
    NotATokenModel {
        /// The benchmark as named.
        benchmark: String,
        /// The backend kind.
        backend: &'static str,
    },
    /// A batch was asked of a backend that only streams tokens.
    #[error("backend {0} streams tokens: start the node with Node::from_config")]
    StreamsTokens(&'static str),
    /// Samples on the I/O thread asked of a device that streams tokens on
    /// its own threads.
    #[error(
        "run_on_io_thread (--run-on-io-thread) runs whole batches on the node's I/O thread, \
         but backend {0} streams tokens on its own threads"
    )]
    NotOnIoThread(&'static str),
    /// Samples on the I/O thread run on one device; the backend has more.
    #[error(
        "run_on_io_thread (--run-on-io-thread) runs every batch on the node's one I/O thread, \
         on one device, but backend {backend} has {devices} devices: give it one, or leave \
         run_on_io_thread off"
    )]
    IoThreadDevices {
        /// The backend kind.
        backend: &'static str,
        /// Its devices.
        devices: usize,
    },
}

/// Streaming backends for token benchmarks, batch backends for the rest.
fn pairing(
    backend: &'static str,
    streams: bool,
    benchmark: &Benchmark,
) -> Result<(), BackendError> {
    match (streams, benchmark.uses_token_latencies()) {
        (true, false) => Err(BackendError::NotATokenModel {
            benchmark: benchmark.to_string(),
            backend,
        }),
        (false, true) => Err(BackendError::NotStreaming {
            benchmark: benchmark.to_string(),
            backend,
        }),
        _ => Ok(()),
    }
}

impl BackendConfig {
    /// Starts the configured batch backend (whatever the benchmark). For
    /// a node, [`BackendConfig::build_for`] picks the backend its
    /// benchmark needs.
    pub fn build(&self) -> Result<Arc<dyn Backend>, BackendError> {
        Ok(match self.kind {
            BackendKind::Synthetic => Arc::new(SyntheticBackend::new(self.synthetic.clone())),
            BackendKind::SyntheticLlm => {
                return Err(BackendError::StreamsTokens(synthetic_llm::KIND))
            }
            BackendKind::Openai => return Err(BackendError::StreamsTokens(openai::KIND)),
            BackendKind::Onnx => Arc::new(OnnxBackend::load(&self.onnx)?),
        })
    }

    /// Whether this kind streams tokens for `benchmark`: `synthetic-llm`,
    /// and `synthetic` for benchmarks with token latencies.
    pub fn streams_tokens(&self, benchmark: &Benchmark) -> bool {
        match self.kind {
            BackendKind::SyntheticLlm | BackendKind::Openai => true,
            BackendKind::Synthetic => benchmark.uses_token_latencies(),
            BackendKind::Onnx => false,
        }
    }

    /// Checks, without starting anything, that this backend can serve
    /// `benchmark` (see [`BackendConfig::build_for`]).
    pub fn check(&self, benchmark: &Benchmark) -> Result<(), BackendError> {
        if self.kind == BackendKind::Openai {
            self.openai.check(benchmark)?;
        } else if self.paired_streaming(benchmark)? {
            SyntheticLlmBackend::new(self.llm.clone(), benchmark)?;
        }
        Ok(())
    }

    /// Whether this backend streams tokens for `benchmark`, refusing a
    /// pairing that cannot serve it (checked before anything is built, so
    /// that error comes first).
    fn paired_streaming(&self, benchmark: &Benchmark) -> Result<bool, BackendError> {
        let streams = self.streams_tokens(benchmark);
        let kind = match self.kind {
            BackendKind::Synthetic if streams => synthetic_llm::KIND,
            kind => kind.name(),
        };
        pairing(kind, streams, benchmark)?;
        Ok(streams)
    }

    /// Starts the backend a node of `benchmark` runs: `synthetic` is the
    /// LLM cost model for a benchmark with token latencies and the batch
    /// cost model otherwise; a streaming backend for a benchmark without
    /// token latencies, or a batch one (ONNX) for one with, is refused.
    /// For `openai` it waits for the engine (blocking the calling thread,
    /// up to `startup_timeout_s`) and probes it.
    pub fn build_for<T: Work>(
        &self,
        benchmark: &Benchmark,
    ) -> Result<Arc<dyn Device<T>>, BackendError> {
        if self.kind == BackendKind::Openai {
            self.paired_streaming(benchmark)?;
            let engine = OpenaiBackend::connect(self.openai.clone(), benchmark)?;
            return Ok(Arc::new(engine));
        }
        Ok(if self.paired_streaming(benchmark)? {
            Arc::new(SyntheticLlmBackend::new(self.llm.clone(), benchmark)?)
        } else {
            Arc::new(BatchDevice::new(self.build()?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn benchmark(name: &str) -> Benchmark {
        Benchmark::parse(name).unwrap()
    }

    fn config(kind: BackendKind) -> BackendConfig {
        BackendConfig {
            kind,
            ..BackendConfig::default()
        }
    }

    #[test]
    fn synthetic_streams_tokens_exactly_for_token_benchmarks() {
        let synthetic = config(BackendKind::Synthetic);
        for (name, kind) in [
            ("llama2-70b-interactive-99", synthetic_llm::KIND),
            ("whisper", synthetic_llm::KIND),
            ("gptj", "synthetic"),
            ("resnet50", "synthetic"),
        ] {
            let built = synthetic.build_for::<Vec<u8>>(&benchmark(name)).unwrap();
            assert_eq!(built.kind(), kind, "{name}");
            check_benchmark(&*built, &benchmark(name)).unwrap();
        }
    }

    #[test]
    fn mismatched_backends_are_refused_naming_both() {
        let Err(e) = config(BackendKind::Onnx).build_for::<Vec<u8>>(&benchmark("llama3.1-8b"))
        else {
            panic!("onnx was built for llama3.1-8b");
        };
        assert!(matches!(e, BackendError::NotStreaming { .. }));
        let text = e.to_string();
        assert!(
            text.starts_with("benchmark llama3_1-8b measures token latencies")
                && text.contains("backend onnx answers whole samples only"),
            "{text}"
        );
        let Err(e) = config(BackendKind::SyntheticLlm).build_for::<Vec<u8>>(&benchmark("bert-99"))
        else {
            panic!("synthetic-llm was built for bert-99");
        };
        assert_eq!(
            e.to_string(),
            "backend synthetic-llm streams tokens, but benchmark bert-99 does not measure token \
             latencies: use backend synthetic or onnx"
        );
        let batch = BatchDevice::new(Arc::new(SyntheticBackend::new(Default::default())));
        assert!(matches!(
            check_benchmark::<Vec<u8>>(&batch, &benchmark("mixtral-8x7b")),
            Err(BackendError::NotStreaming {
                backend: "synthetic",
                ..
            })
        ));
        assert!(matches!(
            config(BackendKind::SyntheticLlm).build(),
            Err(BackendError::StreamsTokens(_))
        ));
    }

    #[test]
    fn kind_names_match_the_config_file() {
        for kind in [
            BackendKind::Synthetic,
            BackendKind::SyntheticLlm,
            BackendKind::Onnx,
            BackendKind::Openai,
        ] {
            #[derive(Serialize, Deserialize)]
            struct File {
                backend: BackendKind,
            }
            let text = toml::to_string(&File { backend: kind }).unwrap();
            assert_eq!(text.trim(), format!("backend = \"{}\"", kind.name()));
            let value = <BackendKind as clap::ValueEnum>::to_possible_value(&kind).unwrap();
            assert_eq!(value.get_name(), kind.name());
        }
    }
}
