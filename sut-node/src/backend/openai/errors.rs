//! Why the engine backend cannot start, and why one sample got no answer.

use super::api::EventError;

/// Why the engine backend cannot start.
#[derive(Debug, thiserror::Error)]
pub enum OpenaiError {
    /// No `url`.
    #[error("backend openai needs the engine's address: set url in [openai] (e.g. url = \"http://127.0.0.1:8080\")")]
    NoUrl,
    /// A URL that is not `http://host:port`.
    #[error("openai.url = {0:?} is not an http:// URL (the engine runs on the node's own host; https is not supported)")]
    BadUrl(String),
    /// A setting out of range.
    #[error("openai.{field} = {value} {why}")]
    Setting {
        /// The key.
        field: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        why: &'static str,
    },
    /// Stop token ids given to llama.cpp.
    #[error(
        "openai.stop_token_ids is set, but llama.cpp's /completion takes no stop token ids: it \
         ends answers at the model's end-of-sequence token (unless ignore_eos)"
    )]
    StopTokensUnsupported,
    /// A benchmark without token latencies, or prompts that are not ids.
    #[error("backend openai serves benchmarks whose samples are token-id prompts with token latencies; {0} is not one")]
    NotATokenIdBenchmark(String),
    /// The engine did not become ready in time.
    #[error("the engine at {url} did not answer {what} within {seconds} s: {last}")]
    NotReady {
        /// Its URL.
        url: String,
        /// The endpoint waited for.
        what: String,
        /// The wait.
        seconds: f64,
        /// The last failure.
        last: String,
    },
    /// The engine answered the probe without token ids, or failed it.
    #[error(
        "the engine at {url} (api = \"{api}\") did not stream output token ids for a probe \
         prompt: {error}. The node needs token ids back (docs/llm.md lists each engine's \
         options)"
    )]
    Probe {
        /// Its URL.
        url: String,
        /// The API configured.
        api: &'static str,
        /// What went wrong.
        error: AnswerError,
    },
    /// The engine is older than the API's minimum version.
    #[error("the engine at {url} (api = \"{api}\") is version {version}; the node needs {minimum} or later, {why}")]
    TooOld {
        /// The engine's address.
        url: String,
        /// The engine API configured.
        api: &'static str,
        /// The version it says.
        version: String,
        /// The oldest that works.
        minimum: &'static str,
        /// What that release added.
        why: &'static str,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Why one sample got no answer; the QDL and LoadGen see the text.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No connection, or it broke before the answer began.
    #[error("cannot reach the engine at {url}: {error}")]
    Unreachable {
        /// The request URL.
        url: String,
        /// The client's error and its causes.
        error: String,
    },
    /// An HTTP error status.
    #[error("the engine answered HTTP {status}: {body}")]
    Status {
        /// The status.
        status: u16,
        /// The body, shortened.
        body: String,
    },
    /// The stream broke in the middle.
    #[error("the engine's stream broke after {tokens} token(s): {error}")]
    Broken {
        /// Tokens received before.
        tokens: usize,
        /// The client's error and its causes.
        error: String,
    },
    /// An event that cannot be read.
    #[error("after {tokens} token(s): {error}")]
    Event {
        /// Tokens received before.
        tokens: usize,
        /// What is wrong with it.
        error: EventError,
    },
    /// The stream ended before its last event.
    #[error("the engine's stream ended after {0} token(s) without its last event (truncated)")]
    Truncated(usize),
    /// More tokens than asked for.
    #[error("the engine streamed {tokens} tokens, more than max_tokens = {max_tokens}")]
    TooLong {
        /// Tokens received.
        tokens: usize,
        /// The limit asked.
        max_tokens: u32,
    },
    /// The stream ended properly without a single token.
    #[error("the engine's answer has no tokens")]
    NoTokens,
    /// Nothing came for too long.
    #[error("no {what} from the engine within {seconds} s ({tokens} token(s) received)")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// The wait.
        seconds: f64,
        /// Tokens received before.
        tokens: usize,
    },
}

impl AnswerError {
    /// The connection failed rather than the answer: unreachable, a
    /// stream that broke or ended early (what an engine that dies does).
    pub fn is_connection(&self) -> bool {
        matches!(
            self,
            AnswerError::Unreachable { .. }
                | AnswerError::Broken { .. }
                | AnswerError::Truncated(_)
        )
    }
}
