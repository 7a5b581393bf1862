//! A serving engine behind the node: each sample goes, as a streamed
//! greedy completion of its token ids, to an engine on the node's host
//! (llama.cpp's `llama-server`, vLLM, SGLang) over HTTP, and its first
//! token and whole answer come back as the engine streams them.
//!
//! The engine does the batching (continuous batching); the node keeps up
//! to `max_in_flight` requests open and holds `max_waiting` more, and
//! declines beyond that with the retryable reply. The engine must answer
//! with output token ids ([`api`] says how each does): the node checks
//! that with a probe before it reports ready, and refuses to start
//! otherwise.
//!
//! * [`api`]: request bodies and stream events per engine (pure);
//! * [`client`]: the HTTP side (readiness, identity, one answer);
//! * [`config`]: the `[openai]` section and its checks;
//! * [`errors`]: why the backend cannot start, why a sample got no answer;
//! * [`driver`]: the backend as a device: it feeds samples to the client;
//! * [`prefix_cache`]: what an engine's `/metrics` say of its prefix
//!   cache.

pub mod api;
pub mod client;
mod config;
mod driver;
mod errors;
mod prefix_cache;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use netdiv_proto::Benchmark;

use self::api::Generation;
use self::client::EngineClient;
use self::config::seconds;
pub use self::config::{OpenaiConfig, PromptCache};
pub use self::errors::{AnswerError, OpenaiError};
use super::synthetic_llm::{InvalidPrompt, TokenIds};

/// `NodeInfo.backend` of this backend, and its name in config files.
pub const KIND: &str = "openai";

/// A connected engine for one benchmark.
pub struct OpenaiBackend {
    config: OpenaiConfig,
    benchmark: Benchmark,
    token_ids: TokenIds,
    client: EngineClient,
    /// The engine's model, as it names it.
    model: String,
    /// The engine's version, where it says.
    version: Option<String>,
    /// What the checks found of its prompt cache: at start, and again
    /// each time the engine came back after being down.
    cache: RwLock<client::CacheCheck>,
    /// Whether the engine answered its last health check.
    engine_up: AtomicBool,
    /// The engine came back from being down reusing cached prompts, where
    /// the start check found it did not: from then on every sample is
    /// declined (the QDL read the node's Info at the start, with the
    /// cache off). A cache found at start is in the Info, where
    /// `submission` refuses it.
    caching_since_restart: AtomicBool,
}

impl std::fmt::Debug for OpenaiBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{KIND} ({})", self.detail())
    }
}

impl OpenaiBackend {
    /// Waits for the engine (up to `startup_timeout_s`), learns its model
    /// and version, and checks with a probe that it streams token ids.
    /// Blocks the calling thread (the client runs on a runtime of its own).
    pub fn connect(config: OpenaiConfig, benchmark: &Benchmark) -> Result<Self, OpenaiError> {
        let token_ids = config.check(benchmark)?;
        let url = config.url.clone().unwrap_or_default();
        let generation = Generation {
            model: config.model.clone().unwrap_or_default(),
            max_tokens: config.max_tokens_for(benchmark),
            ignore_eos: config.ignore_eos,
            stop_token_ids: config.stop_token_ids.clone(),
            cache_prompt: config.prompt_cache == PromptCache::EngineDefault,
        };
        let mut client = EngineClient::new(&url, config.api, &config, generation)?;
        let identity = client.wait_ready(seconds(config.startup_timeout_s))?;
        if let Some(version) = identity.version.as_deref() {
            if let Some((minimum, why)) = config.api.too_old(version) {
                return Err(OpenaiError::TooOld {
                    url,
                    api: config.api.name(),
                    version: version.to_string(),
                    minimum,
                    why,
                });
            }
        }
        let model = config.model.clone().unwrap_or(identity.model);
        client.set_model(&model);
        client.probe().map_err(|error| OpenaiError::Probe {
            url: url.clone(),
            api: config.api.name(),
            error,
        })?;
        let cache = client
            .block_on(client.check_prompt_cache())
            .map_err(|error| OpenaiError::Probe {
                url: url.clone(),
                api: config.api.name(),
                error,
            })?;
        if cache.caches {
            tracing::warn!(
                engine = %url,
                "the engine reuses cached prompts across queries ({}); the rules forbid it, \
                 and submission refuses this node (docs/llm.md: start the engine with prefix \
                 caching off)",
                cache.evidence
            );
        }
        Ok(Self {
            cache: RwLock::new(cache),
            engine_up: AtomicBool::new(true),
            caching_since_restart: AtomicBool::new(false),
            config,
            benchmark: *benchmark,
            token_ids,
            client,
            model,
            version: identity.version,
        })
    }

    /// What it was built with.
    pub fn config(&self) -> &OpenaiConfig {
        &self.config
    }

    /// The benchmark it serves.
    pub fn benchmark(&self) -> &Benchmark {
        &self.benchmark
    }

    /// The HTTP side.
    pub fn client(&self) -> &EngineClient {
        &self.client
    }

    /// Samples the node holds at most: open requests and waiting ones.
    pub fn capacity(&self) -> u64 {
        (self.config.max_in_flight + self.config.max_waiting) as u64
    }

    /// The prompt's token ids, or why `input` is not a prompt.
    pub fn prompt(&self, input: &[u8]) -> Result<Vec<u32>, InvalidPrompt> {
        prompt_ids(input, self.token_ids)
    }

    /// Whether the engine came back from a restart reusing cached prompts
    /// that it did not reuse at start: the node then declines every
    /// sample.
    pub fn caching_since_restart(&self) -> bool {
        self.caching_since_restart.load(Ordering::Acquire)
    }

    /// The engine's health, and after it was down, its prompt cache
    /// checked again (an engine restarted with prefix caching on would
    /// otherwise serve a running LoadGen from its cache): if it now caches
    /// where it did not before, the node declines every sample until a
    /// later restart finds the cache off again, and its Info says why. Run
    /// on the client's runtime.
    pub async fn check_health(&self) -> bool {
        let healthy = self.client.healthy().await;
        let was_up = self.engine_up.swap(healthy, Ordering::AcqRel);
        if healthy && !was_up {
            let since_restart = self.caching_since_restart();
            let known = self.cache.read().unwrap_or_else(|e| e.into_inner()).caches;
            match self.client.check_prompt_cache().await {
                Ok(check) if !check.caches && since_restart => {
                    tracing::info!(
                        engine = %self.config.url.as_deref().unwrap_or(""),
                        "the engine came back with its prompt cache off ({}); the node serves again",
                        check.evidence
                    );
                    *self.cache.write().unwrap_or_else(|e| e.into_inner()) = check;
                    self.caching_since_restart.store(false, Ordering::Release);
                }
                Ok(check) if check.caches && !known => {
                    tracing::error!(
                        engine = %self.config.url.as_deref().unwrap_or(""),
                        "the engine came back reusing cached prompts across queries ({}); the \
                         node declines every sample from now on (the rules forbid it)",
                        check.evidence
                    );
                    let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
                    *cache = client::CacheCheck {
                        caches: true,
                        evidence: format!("after the engine came back: {}", check.evidence),
                    };
                    self.caching_since_restart.store(true, Ordering::Release);
                }
                Ok(_) => {}
                Err(e) => {
                    // Not checked: counted as down, checked again next time.
                    tracing::warn!(
                        "the engine is back but its prompt cache cannot be checked: {e}"
                    );
                    self.engine_up.store(false, Ordering::Release);
                    return false;
                }
            }
        }
        healthy
    }

    /// Human-readable parameters for `NodeInfo.backend_detail`.
    pub fn detail(&self) -> String {
        let c = &self.config;
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        format!(
            "engine={} url={} model={} version={} max_tokens={} max_in_flight={} \
             max_waiting={} http={} prompt={}-token-ids prefix cache: {} ({})",
            c.api.name(),
            c.url.as_deref().unwrap_or(""),
            self.model,
            self.version.as_deref().unwrap_or("unknown"),
            self.client.generation().max_tokens,
            c.max_in_flight,
            c.max_waiting,
            if c.http2 { "2" } else { "1.1" },
            self.token_ids.name(),
            if cache.caches { "ON" } else { "off" },
            cache.evidence
        )
    }
}

/// The token ids of a prompt of `ids` elements: non-negative, below 2^32,
/// at least one.
pub fn prompt_ids(input: &[u8], ids: TokenIds) -> Result<Vec<u32>, InvalidPrompt> {
    if input.is_empty() {
        return Err(InvalidPrompt::Empty);
    }
    let size = ids.size();
    if !input.len().is_multiple_of(size) {
        return Err(InvalidPrompt::NotTokenIds {
            bytes: input.len(),
            ids: ids.name(),
        });
    }
    input
        .chunks_exact(size)
        .enumerate()
        .map(|(i, b)| {
            let id = match ids {
                TokenIds::Int32 => i64::from(i32::from_le_bytes(b.try_into().expect("4 bytes"))),
                TokenIds::Int64 => i64::from_le_bytes(b.try_into().expect("8 bytes")),
            };
            u32::try_from(id).map_err(|_| InvalidPrompt::BadTokenId { index: i, id })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::api::EngineApi;
    use super::*;

    fn llama() -> Benchmark {
        Benchmark::parse("llama2-70b").unwrap()
    }

    fn config(url: &str) -> OpenaiConfig {
        OpenaiConfig {
            url: Some(url.into()),
            ..OpenaiConfig::default()
        }
    }

    #[test]
    fn settings_are_checked_before_the_engine_is_reached() {
        assert!(matches!(
            OpenaiConfig::default().check(&llama()),
            Err(OpenaiError::NoUrl)
        ));
        for url in ["https://h:1", "localhost:8080", "ftp://x"] {
            let e = config(url).check(&llama()).unwrap_err();
            assert!(matches!(e, OpenaiError::BadUrl(_)), "{url}: {e}");
        }
        assert_eq!(
            config("http://127.0.0.1:8080").check(&llama()).unwrap(),
            TokenIds::Int32
        );
        let e = config("http://h:1")
            .check(&Benchmark::parse("resnet50").unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("resnet50 is not one"), "{e}");
        let e = config("http://h:1")
            .check(&Benchmark::parse("whisper").unwrap())
            .unwrap_err();
        assert!(matches!(e, OpenaiError::NotATokenIdBenchmark(_)), "{e}");
        let stop = OpenaiConfig {
            stop_token_ids: vec![2],
            ..config("http://h:1")
        };
        assert!(matches!(
            stop.check(&llama()),
            Err(OpenaiError::StopTokensUnsupported)
        ));
        let vllm = OpenaiConfig {
            api: EngineApi::Vllm,
            ..stop
        };
        vllm.check(&llama()).unwrap();
        let slow = OpenaiConfig {
            token_timeout_s: f64::NAN,
            ..config("http://h:1")
        };
        let e = slow.check(&llama()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "openai.token_timeout_s = NaN is not a number of seconds above 0"
        );
        let none = OpenaiConfig {
            max_in_flight: 0,
            ..config("http://h:1")
        };
        assert!(none
            .check(&llama())
            .unwrap_err()
            .to_string()
            .contains("max_in_flight"));
    }

    #[test]
    fn prompts_are_read_as_token_ids() {
        let mut input = Vec::new();
        for id in [1i32, 31999, 7] {
            input.extend_from_slice(&id.to_le_bytes());
        }
        assert_eq!(
            prompt_ids(&input, TokenIds::Int32).unwrap(),
            vec![1, 31999, 7]
        );
        assert_eq!(prompt_ids(&[], TokenIds::Int32), Err(InvalidPrompt::Empty));
        assert!(matches!(
            prompt_ids(&input[..5], TokenIds::Int32),
            Err(InvalidPrompt::NotTokenIds { bytes: 5, .. })
        ));
        let negative = (-3i64).to_le_bytes();
        assert_eq!(
            prompt_ids(&negative, TokenIds::Int64),
            Err(InvalidPrompt::BadTokenId { index: 0, id: -3 })
        );
    }
}
