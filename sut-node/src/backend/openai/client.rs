//! The HTTP side of the engine backend: a keep-alive connection pool to
//! the engine, on a runtime of its own (so the node's transports and the
//! engine's streams never wait on each other), with readiness, identity
//! and one streamed answer per sample.

use std::future::Future;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;

use super::api::{request_body, shorten, EngineApi, Generation, StreamReader};
use super::config::{seconds, OpenaiConfig};
use super::errors::{AnswerError, OpenaiError};

/// Longest wait for a connection to the engine.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for the engine's small endpoints (health, models).
const SMALL_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Time between two readiness checks while the engine starts.
const READY_POLL: Duration = Duration::from_millis(250);
/// Idle connections are dropped before the engine's own keep-alive
/// timeout closes them (5 s for llama.cpp's and uvicorn's servers): a
/// request sent just as the server closes its connection is lost.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// Tries of a request that failed before any answer (see `send`) beyond
/// one per pooled connection: each of those may be found dead in turn.
const FRESH_CONNECTION_TRIES: usize = 2;
/// Tokens the probe at start asks for.
const PROBE_TOKENS: u32 = 2;

/// What the engine says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// Its first model in `/v1/models`.
    pub model: String,
    /// Its version (`/version`, or llama.cpp's `/props` build info).
    pub version: Option<String>,
}

/// A client of one engine.
#[derive(Debug)]
pub struct EngineClient {
    runtime: Option<tokio::runtime::Runtime>,
    http: reqwest::Client,
    base: String,
    api: EngineApi,
    generation: Generation,
    first_token_timeout: Duration,
    token_timeout: Duration,
    /// Tries of a request that fails before any answer: every pooled
    /// connection, then fresh ones.
    send_tries: usize,
}

impl Drop for EngineClient {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which an async caller must not do.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl EngineClient {
    /// A client of the engine at `url` (not contacted yet).
    pub fn new(
        url: &str,
        api: EngineApi,
        config: &OpenaiConfig,
        generation: Generation,
    ) -> Result<Self, OpenaiError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("engine-http")
            .enable_all()
            .build()
            .map_err(|e| OpenaiError::Client(e.to_string()))?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .pool_max_idle_per_host(config.max_in_flight)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .no_proxy();
        if config.http2 {
            builder = builder.http2_prior_knowledge();
        } else {
            builder = builder.http1_only();
        }
        let http = builder
            .build()
            .map_err(|e| OpenaiError::Client(error_chain(&e)))?;
        Ok(Self {
            runtime: Some(runtime),
            http,
            send_tries: config.max_in_flight + FRESH_CONNECTION_TRIES,
            base: url.trim_end_matches('/').to_string(),
            api,
            generation,
            first_token_timeout: seconds(config.first_token_timeout_s),
            token_timeout: seconds(config.token_timeout_s),
        })
    }

    /// The generation settings of every request.
    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    pub(super) fn set_model(&mut self, model: &str) {
        self.generation.model = model.to_string();
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("the runtime lives until drop")
    }

    /// Runs `future` on the client's runtime; the result can be awaited
    /// from any runtime or waited for with `block_on` from a plain thread.
    pub fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime().spawn(future)
    }

    /// Runs `future` to its end on the client's runtime, blocking the
    /// calling thread (not a runtime's).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime().block_on(future)
    }

    /// Waits until `/health` answers 200, then reads the engine's model
    /// and version.
    pub fn wait_ready(&self, limit: Duration) -> Result<Identity, OpenaiError> {
        self.block_on(async {
            let start = Instant::now();
            let health = format!("{}/health", self.base);
            loop {
                let last = match self.get_json(&health).await {
                    Ok(_) => break,
                    Err(e) => e,
                };
                if start.elapsed() >= limit {
                    return Err(OpenaiError::NotReady {
                        url: self.base.clone(),
                        what: "GET /health".into(),
                        seconds: limit.as_secs_f64(),
                        last,
                    });
                }
                tokio::time::sleep(READY_POLL).await;
            }
            let models = self
                .get_json(&format!("{}/v1/models", self.base))
                .await
                .map_err(|last| OpenaiError::NotReady {
                    url: self.base.clone(),
                    what: "GET /v1/models".into(),
                    seconds: 0.0,
                    last,
                })?;
            let model = models
                .pointer("/data/0/id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            Ok(Identity {
                model,
                version: self.version().await,
            })
        })
    }

    /// The engine's version, asked where its API says it first
    /// ([`EngineApi::version_paths`]), then at the others' places.
    async fn version(&self) -> Option<String> {
        let mut paths: Vec<&str> = self.api.version_paths().to_vec();
        for path in ["/version", "/server_info", "/get_server_info", "/props"] {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        for path in paths {
            let Ok(v) = self.get_json(&format!("{}{path}", self.base)).await else {
                continue;
            };
            if let Some(version) = v.get("version").and_then(Value::as_str) {
                return Some(version.to_string());
            }
            if let Some(build) = v.get("build_info").and_then(Value::as_str) {
                return Some(format!("llama.cpp {build}"));
            }
        }
        None
    }

    /// Whether `/health` answers 200 now.
    pub async fn healthy(&self) -> bool {
        self.get_json(&format!("{}/health", self.base))
            .await
            .is_ok()
    }

    /// The engine's prefix-cache metrics (`/metrics`); `None` when it
    /// serves none.
    pub async fn cache_metrics(&self) -> Option<super::prefix_cache::CacheMetrics> {
        let response = self
            .http
            .get(format!("{}/metrics", self.base))
            .timeout(SMALL_REQUEST_TIMEOUT)
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let text = response.text().await.ok()?;
        Some(super::prefix_cache::CacheMetrics::parse(&text))
    }

    /// GET `url` as JSON (an empty or non-JSON 200 body is `Null`).
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(url)
            .timeout(SMALL_REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| error_chain(&e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| error_chain(&e))?;
        if !status.is_success() {
            return Err(format!("HTTP {}: {}", status.as_u16(), shorten(&body)));
        }
        Ok(serde_json::from_str(&body).unwrap_or(Value::Null))
    }
}

/// What the start check found of the engine's prompt cache.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheCheck {
    /// Whether a repeated prompt came back markedly faster than a fresh
    /// one of the same length: the engine reused what it cached.
    pub caches: bool,
    /// The times that show it.
    pub evidence: String,
}

/// Tokens of the cache check's prompts: enough that their prefill takes
/// measurable time on any engine, few enough for any context.
const CACHE_CHECK_TOKENS: u64 = 512;
/// Repeated and fresh prompts timed at start (odd: a median).
const CACHE_CHECK_ROUNDS: u64 = 3;
/// Requests a node sends its engine before it serves: the probe, then the
/// prompt-cache check's first prompt and its rounds of a repeat and a
/// fresh prompt.
pub const START_REQUESTS: usize = 2 + 2 * CACHE_CHECK_ROUNDS as usize;

/// A prompt of `CACHE_CHECK_TOKENS` ids below 100 (valid for any
/// vocabulary) that no earlier request sent: its ids come from `seed`.
fn unseen_prompt(seed: u64) -> Vec<u32> {
    let mut state = seed;
    (0..CACHE_CHECK_TOKENS)
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            1 + ((z ^ (z >> 31)) % 99) as u32
        })
        .collect()
}

/// Whether a repeat that took `repeat` to its first token, against a fresh
/// prompt's `fresh`, came from a cache: under half the time.
pub fn answered_from_cache(repeat: Duration, fresh: Duration) -> bool {
    repeat * 2 < fresh
}

impl EngineClient {
    /// Time to the first token of a one-token answer to `prompt`.
    async fn time_to_first_token(&self, prompt: &[u32]) -> Result<Duration, AnswerError> {
        let generation = Generation {
            max_tokens: 1,
            ..self.generation.clone()
        };
        let start = Instant::now();
        let mut first = None;
        self.answer_with(
            &generation,
            prompt,
            |_| first = Some(start.elapsed()),
            |_| {},
        )
        .await?;
        Ok(first.unwrap_or_else(|| start.elapsed()))
    }

    /// Whether the engine answers a repeated prompt from a cache: a fresh
    /// prompt, then rounds of that prompt again against another fresh
    /// one, timed to their first token (each one token long); and what
    /// the engine's own metrics say of its prefix cache, where it has
    /// them (the setting, or hits counted during the check).
    pub async fn check_prompt_cache(&self) -> Result<CacheCheck, AnswerError> {
        let before = self.cache_metrics().await;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64);
        let prompt = unseen_prompt(seed);
        self.time_to_first_token(&prompt).await?;
        let mut repeats = Vec::new();
        let mut fresh = Vec::new();
        for round in 1..=CACHE_CHECK_ROUNDS {
            repeats.push(self.time_to_first_token(&prompt).await?);
            fresh.push(
                self.time_to_first_token(&unseen_prompt(seed ^ round))
                    .await?,
            );
        }
        let after = self.cache_metrics().await;
        let (repeat, fresh) = (median(repeats), median(fresh));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut evidence = format!(
            "a repeated {CACHE_CHECK_TOKENS}-token prompt took {:.1} ms to its first token, \
             a fresh one {:.1} ms (medians of {CACHE_CHECK_ROUNDS})",
            ms(repeat),
            ms(fresh)
        );
        if let Some(said) = after.as_ref().and_then(|a| a.describe(before.as_ref())) {
            evidence.push_str("; ");
            evidence.push_str(&said);
        }
        Ok(CacheCheck {
            caches: answered_from_cache(repeat, fresh)
                || after.is_some_and(|a| a.caches(before.as_ref())),
            evidence,
        })
    }
}

/// The middle of an odd number of durations.
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

impl EngineClient {
    /// A short answer to a one-token prompt must come back as token ids.
    pub fn probe(&self) -> Result<(), AnswerError> {
        let generation = Generation {
            max_tokens: PROBE_TOKENS,
            ..self.generation.clone()
        };
        self.block_on(self.answer_with(&generation, &[1], |_| {}, |_| {}))
            .map(|_| ())
    }

    /// Streams the greedy answer to `prompt`: `first` gets the first token
    /// the moment it arrives, `progress` the count of each event's tokens
    /// as they stream; the result is every token of the answer. Dropping
    /// the future closes the request's stream, which the engines take as
    /// an abort.
    pub async fn answer(
        &self,
        prompt: &[u32],
        first: impl FnOnce(u32),
        progress: impl FnMut(usize),
    ) -> Result<Vec<u32>, AnswerError> {
        self.answer_with(&self.generation, prompt, first, progress)
            .await
    }

    async fn answer_with(
        &self,
        generation: &Generation,
        prompt: &[u32],
        first: impl FnOnce(u32),
        mut progress: impl FnMut(usize),
    ) -> Result<Vec<u32>, AnswerError> {
        let url = format!("{}{}", self.base, self.api.completion_path());
        let body = request_body(self.api, generation, prompt);
        // One deadline for the first token, from the request's start.
        let first_deadline = tokio::time::Instant::now() + self.first_token_timeout;
        let timeout = |tokens: usize| AnswerError::Timeout {
            what: if tokens == 0 { "first token" } else { "event" },
            seconds: if tokens == 0 {
                self.first_token_timeout.as_secs_f64()
            } else {
                self.token_timeout.as_secs_f64()
            },
            tokens,
        };
        let response = match tokio::time::timeout_at(first_deadline, self.send(&url, &body)).await {
            Err(_) => return Err(timeout(0)),
            Ok(Err(e)) => {
                return Err(AnswerError::Unreachable {
                    url,
                    error: error_chain(&e),
                })
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let body = tokio::time::timeout(SMALL_REQUEST_TIMEOUT, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(AnswerError::Status {
                status: status.as_u16(),
                body: shorten(&body),
            });
        }
        let mut events = response.bytes_stream().eventsource();
        let mut reader = StreamReader::new(self.api);
        let mut tokens: Vec<u32> = Vec::new();
        let mut first = Some(first);
        while !reader.ended() {
            let deadline = if tokens.is_empty() {
                first_deadline
            } else {
                tokio::time::Instant::now() + self.token_timeout
            };
            let event = match tokio::time::timeout_at(deadline, events.next()).await {
                Err(_) => return Err(timeout(tokens.len())),
                Ok(None) => return Err(AnswerError::Truncated(tokens.len())),
                Ok(Some(Err(e))) => {
                    return Err(AnswerError::Broken {
                        tokens: tokens.len(),
                        error: e.to_string(),
                    })
                }
                Ok(Some(Ok(event))) => event,
            };
            let read = reader
                .read(&event.data)
                .map_err(|error| AnswerError::Event {
                    tokens: tokens.len(),
                    error,
                })?;
            if let Some(&id) = read.tokens.first() {
                if let Some(first) = first.take() {
                    first(id);
                }
                progress(read.tokens.len());
            }
            tokens.extend(read.tokens);
            if tokens.len() > generation.max_tokens as usize {
                return Err(AnswerError::TooLong {
                    tokens: tokens.len(),
                    max_tokens: generation.max_tokens,
                });
            }
        }
        // The answer is complete; the rest of the body (vLLM's [DONE], the
        // end of a chunked body) is read apart, so the connection goes back
        // to the pool without delaying this answer.
        tokio::spawn(async move {
            let drained = async { while events.next().await.is_some() {} };
            let _ = tokio::time::timeout(SMALL_REQUEST_TIMEOUT, drained).await;
        });
        if tokens.is_empty() {
            return Err(AnswerError::NoTokens);
        }
        Ok(tokens)
    }
}

impl EngineClient {
    /// POSTs `body`, tried again if a try fails before any answer: a
    /// kept-alive connection the engine closed (a restart, its keep-alive
    /// timeout or request limit) is found dead only by using it, and
    /// several pooled connections may have died at once; a completion
    /// request has no effect to repeat. Tries are bounded: every pooled
    /// connection, then [`FRESH_CONNECTION_TRIES`] fresh ones.
    async fn send(&self, url: &str, body: &Value) -> reqwest::Result<reqwest::Response> {
        let (mut tries, mut refused) = (1, 0);
        loop {
            match self.http.post(url).json(body).send().await {
                // A refused connection says the engine is down: tried
                // again only as often as a fresh connection would be.
                Err(e) if e.is_connect() && refused < FRESH_CONNECTION_TRIES => {
                    refused += 1;
                    tries += 1;
                }
                Err(e) if !e.is_connect() && e.is_request() && tries < self.send_tries => {
                    tries += 1
                }
                result => return result,
            }
        }
    }
}

/// An error and its causes on one line: reqwest's own message is only
/// the outermost ("error sending request").
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
