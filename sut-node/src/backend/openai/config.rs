//! The `[openai]` section of a node's config: where the engine is, how to
//! ask it, and the checks made before any request.

use std::time::Duration;

use netdiv_proto::dtype::DType;
use netdiv_proto::Benchmark;
use serde::{Deserialize, Serialize};

use super::api::EngineApi;
use super::errors::OpenaiError;
use crate::backend::synthetic_llm::TokenIds;

/// Largest `max_in_flight`, `max_waiting` and `max_tokens`.
const MAX_SETTING: usize = 65536;

/// The `[openai]` section: where the engine is and how to ask it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OpenaiConfig {
    /// The engine's base URL, e.g. `http://127.0.0.1:8080` (required).
    pub url: Option<String>,
    /// Which engine answers: `llama.cpp`, `vllm` or `sglang`.
    pub api: EngineApi,
    /// The model name in requests [default: the engine's first model in
    /// `/v1/models`].
    pub model: Option<String>,
    /// Most tokens an answer has [default: the benchmark's longest].
    pub max_tokens: Option<u32>,
    /// Generate past the end-of-sequence token (always `max_tokens`).
    pub ignore_eos: bool,
    /// Token ids that also end an answer (vLLM and SGLang; llama.cpp ends
    /// at the model's own end-of-sequence token only).
    pub stop_token_ids: Vec<u32>,
    /// Requests open to the engine at once.
    pub max_in_flight: usize,
    /// Samples held beyond those; more are declined (retryable).
    pub max_waiting: usize,
    /// HTTP/2 without TLS (prior knowledge) instead of HTTP/1.1.
    pub http2: bool,
    /// Element type of the prompts' token ids [default: the benchmark's].
    pub token_ids: Option<TokenIds>,
    /// Longest wait for an answer's first token, in seconds.
    pub first_token_timeout_s: f64,
    /// Longest wait between two events of an answer, in seconds.
    pub token_timeout_s: f64,
    /// Longest wait for the engine to answer at start (it may be loading
    /// its model), in seconds.
    pub startup_timeout_s: f64,
    /// `off` (the default): the node asks the engine not to reuse cached
    /// prompts where its API has a switch (llama.cpp's `cache_prompt`);
    /// `engine-default`: it sends nothing (for trying a caching engine).
    /// Either way the node checks at start whether a repeated prompt comes
    /// back markedly faster, and says so in its Info.
    pub prompt_cache: PromptCache,
}

/// Whether the node asks the engine not to reuse cached prompts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptCache {
    /// Ask the engine not to (the rules forbid caching across queries).
    #[default]
    Off,
    /// Leave the engine's own default (llama.cpp caches).
    EngineDefault,
}

impl Default for OpenaiConfig {
    fn default() -> Self {
        Self {
            url: None,
            api: EngineApi::default(),
            model: None,
            max_tokens: None,
            ignore_eos: false,
            stop_token_ids: Vec::new(),
            max_in_flight: 64,
            max_waiting: 4096,
            http2: false,
            token_ids: None,
            first_token_timeout_s: 120.0,
            token_timeout_s: 60.0,
            startup_timeout_s: 600.0,
            prompt_cache: PromptCache::Off,
        }
    }
}

impl OpenaiConfig {
    /// Checks the settings for `benchmark` without reaching the engine;
    /// returns the prompts' element type.
    pub fn check(&self, benchmark: &Benchmark) -> Result<TokenIds, OpenaiError> {
        let url = self.url.as_deref().ok_or(OpenaiError::NoUrl)?;
        let parsed = reqwest::Url::parse(url).map_err(|_| OpenaiError::BadUrl(url.to_string()))?;
        if parsed.scheme() != "http" || parsed.host_str().is_none() {
            return Err(OpenaiError::BadUrl(url.to_string()));
        }
        let token_ids = self.prompt_ids(benchmark)?;
        for (field, value, least) in [
            ("max_in_flight", self.max_in_flight, 1),
            ("max_waiting", self.max_waiting, 0),
            ("max_tokens", self.max_tokens.unwrap_or(1) as usize, 1),
        ] {
            if value < least || value > MAX_SETTING {
                return Err(OpenaiError::Setting {
                    field,
                    value: value.to_string(),
                    why: if least == 0 {
                        "must be at most 65536"
                    } else {
                        "must be between 1 and 65536"
                    },
                });
            }
        }
        for (field, value) in [
            ("first_token_timeout_s", self.first_token_timeout_s),
            ("token_timeout_s", self.token_timeout_s),
            ("startup_timeout_s", self.startup_timeout_s),
        ] {
            if !(value.is_finite() && value > 0.0 && value < 1e7) {
                return Err(OpenaiError::Setting {
                    field,
                    value: value.to_string(),
                    why: "is not a number of seconds above 0",
                });
            }
        }
        if self.api == EngineApi::LlamaCpp && !self.stop_token_ids.is_empty() {
            return Err(OpenaiError::StopTokensUnsupported);
        }
        Ok(token_ids)
    }

    fn prompt_ids(&self, benchmark: &Benchmark) -> Result<TokenIds, OpenaiError> {
        let profile = benchmark
            .token_profile()
            .filter(|p| benchmark.uses_token_latencies() && p.input_token_ids)
            .ok_or_else(|| OpenaiError::NotATokenIdBenchmark(benchmark.to_string()))?;
        let _ = profile;
        Ok(self.token_ids.unwrap_or(match benchmark.spec().dtype {
            DType::I64 => TokenIds::Int64,
            _ => TokenIds::Int32,
        }))
    }

    /// The longest answer for `benchmark`.
    pub(crate) fn max_tokens_for(&self, benchmark: &Benchmark) -> u32 {
        self.max_tokens.unwrap_or_else(|| {
            benchmark
                .token_profile()
                .map_or(1024, |p| p.output.max.max(1))
        })
    }
}

/// Seconds as a duration (checked finite and positive by
/// [`OpenaiConfig::check`]).
pub(crate) fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}
