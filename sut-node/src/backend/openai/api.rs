//! What each serving engine is sent and what it streams back: the request
//! body for a token-id prompt, and the token ids in each server-sent event.
//! Pure functions of JSON, so every engine's format is tested without it.
//!
//! Token ids, not text, travel both ways: the rules send token ids, and a
//! text round trip through a tokenizer does not give them back exactly.
//! Each engine has its own way to return them (docs/llm.md lists sources):
//! * llama.cpp: its native `POST /completion`; each event's `tokens` holds
//!   the new id, the last one has `stop: true` and `tokens_predicted`. A
//!   token that ends inside a UTF-8 character is not streamed on its own
//!   (its id never comes): the count is checked against
//!   `tokens_predicted`.
//! * vLLM: `POST /v1/completions`, `return_token_ids: true`; each event's
//!   `choices[0].token_ids` holds the new ids, the last choice has a
//!   `finish_reason`, then `data: [DONE]`.
//! * TensorRT-LLM (`trtllm-serve`): `POST /v1/completions`, `detokenize:
//!   false`; events as vLLM's (it refuses fields it does not know, so it
//!   gets none of vLLM's).
//! * SGLang: its native `POST /generate` with `input_ids`; each event's
//!   `output_ids` holds every id so far (its default) or only the new ones
//!   (`--incremental-streaming-output`), told apart by
//!   `meta_info.completion_tokens`, which always counts them all;
//!   `meta_info.finish_reason` is set on the last, then `data: [DONE]`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Which serving engine the node forwards to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum EngineApi {
    /// llama.cpp's `llama-server`, native `/completion` endpoint.
    #[default]
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// vLLM's OpenAI-compatible `/v1/completions` with `return_token_ids`.
    #[serde(rename = "vllm")]
    Vllm,
    /// SGLang's native `/generate` endpoint.
    #[serde(rename = "sglang")]
    Sglang,
    /// TensorRT-LLM's `trtllm-serve`, `/v1/completions` with `detokenize`
    /// off.
    #[serde(rename = "trtllm")]
    Trtllm,
}

impl EngineApi {
    /// The name in config files.
    pub fn name(self) -> &'static str {
        match self {
            EngineApi::LlamaCpp => "llama.cpp",
            EngineApi::Vllm => "vllm",
            EngineApi::Sglang => "sglang",
            EngineApi::Trtllm => "trtllm",
        }
    }

    /// The path completions are requested at.
    pub fn completion_path(self) -> &'static str {
        match self {
            EngineApi::LlamaCpp => "/completion",
            EngineApi::Vllm | EngineApi::Trtllm => "/v1/completions",
            EngineApi::Sglang => "/generate",
        }
    }

    /// Where it says its version: vLLM and TensorRT-LLM `/version`, SGLang
    /// `/server_info` (`/get_server_info` before it was renamed), llama.cpp
    /// the build in `/props`.
    pub fn version_paths(self) -> &'static [&'static str] {
        match self {
            EngineApi::LlamaCpp => &["/props"],
            EngineApi::Vllm | EngineApi::Trtllm => &["/version"],
            EngineApi::Sglang => &["/server_info", "/get_server_info"],
        }
    }

    /// The oldest release that streams what the node needs, and why.
    pub fn minimum_version(self) -> Option<(&'static str, &'static str)> {
        match self {
            EngineApi::Vllm => Some((
                "0.10.2",
                "the first to stream token ids (return_token_ids, vllm-project/vllm#22587)",
            )),
            EngineApi::Trtllm => Some((
                "1.0",
                "the first to take detokenize: false (NVIDIA/TensorRT-LLM#5382)",
            )),
            EngineApi::LlamaCpp | EngineApi::Sglang => None,
        }
    }

    /// The minimum and why, when `version` (as the engine says it) is
    /// older; `None` when it is new enough or cannot be read.
    pub fn too_old(self, version: &str) -> Option<(&'static str, &'static str)> {
        let (minimum, why) = self.minimum_version()?;
        (version_number(version)? < version_number(minimum)?).then_some((minimum, why))
    }
}

/// `major.minor.patch` from the start of a version string ("v0.10.2rc1",
/// "1.0.0+cu128"); missing parts are 0.
fn version_number(text: &str) -> Option<(u64, u64, u64)> {
    let text = text.trim().trim_start_matches('v');
    let digits: &str = &text[..text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len())];
    let mut parts = digits.split('.').filter(|p| !p.is_empty());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    Some((major, minor, patch))
}

/// The generation settings every request carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The model name (vLLM requires it; the others ignore it).
    pub model: String,
    /// Most tokens an answer has.
    pub max_tokens: u32,
    /// Keep generating past the end-of-sequence token.
    pub ignore_eos: bool,
    /// Token ids that end an answer besides the model's own end token.
    pub stop_token_ids: Vec<u32>,
    /// Let the engine reuse a cached prompt prefix (llama.cpp's
    /// `cache_prompt`, on by default in the engine; the rules forbid
    /// caching across queries, so the node sends `false` unless told).
    pub cache_prompt: bool,
}

/// The body of a streamed, greedy completion of `prompt`. Sampling is
/// spelled out (engines fill what is left out from the model's own
/// generation config): temperature 0, no repetition penalty.
pub fn request_body(api: EngineApi, generation: &Generation, prompt: &[u32]) -> Value {
    let g = generation;
    let mut body = match api {
        EngineApi::LlamaCpp => json!({
            "prompt": prompt,
            "n_predict": g.max_tokens,
            "stream": true,
            "temperature": 0.0,
            "top_k": 1,
            "repeat_penalty": 1.0,
            "ignore_eos": g.ignore_eos,
            "cache_prompt": g.cache_prompt,
        }),
        EngineApi::Vllm => json!({
            "model": g.model,
            "prompt": prompt,
            "max_tokens": g.max_tokens,
            "stream": true,
            "return_token_ids": true,
            "temperature": 0.0,
            "repetition_penalty": 1.0,
            "skip_special_tokens": false,
        }),
        EngineApi::Trtllm => json!({
            "model": g.model,
            "prompt": prompt,
            "max_tokens": g.max_tokens,
            "stream": true,
            "detokenize": false,
            "temperature": 0.0,
            "top_k": 1,
        }),
        EngineApi::Sglang => json!({
            "input_ids": prompt,
            "stream": true,
            "sampling_params": {
                "max_new_tokens": g.max_tokens,
                "temperature": 0.0,
                "repetition_penalty": 1.0,
                "skip_special_tokens": false,
            },
        }),
    };
    // Only when set: an engine may refuse a field it does not know.
    let params = match api {
        EngineApi::Sglang => &mut body["sampling_params"],
        _ => &mut body,
    };
    if g.ignore_eos && api != EngineApi::LlamaCpp {
        params["ignore_eos"] = json!(true);
    }
    if !g.stop_token_ids.is_empty() {
        params["stop_token_ids"] = json!(g.stop_token_ids);
    }
    body
}

/// What one event of a stream says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// Token ids new in this event.
    pub tokens: Vec<u32>,
    /// This event ends the answer.
    pub last: bool,
}

/// Why an event cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EventError {
    /// Not JSON.
    #[error("an event of the engine's stream is not JSON ({0}): {1}")]
    NotJson(String, String),
    /// The engine reports an error in the stream.
    #[error("the engine reports an error: {0}")]
    Engine(String),
    /// JSON without the field that carries token ids.
    #[error(
        "an event of the engine's stream has no token ids (field {field}): is api = \"{api}\" \
         the engine that answers? {event}"
    )]
    NoTokenIds {
        /// The engine API configured.
        api: &'static str,
        /// The field looked for.
        field: &'static str,
        /// The event, shortened.
        event: String,
    },
    /// llama.cpp generated more tokens than it streamed.
    #[error(
        "llama.cpp generated {predicted} token(s) but streamed the ids of {streamed}: a token \
         that ends inside a UTF-8 character is not streamed on its own"
    )]
    Withheld {
        /// Its `tokens_predicted`.
        predicted: u64,
        /// Ids streamed.
        streamed: usize,
    },
    /// `[DONE]` before the answer's last event.
    #[error("the engine's stream ended ([DONE]) after {0} token(s) before its last event")]
    DoneEarly(usize),
    /// The answer ended for a reason other than a stop or its length.
    #[error("the engine cut the answer short (finish reason {0})")]
    CutShort(String),
    /// SGLang counted more (or fewer) completion tokens than it streamed.
    #[error("the engine counted {counted} completion token(s) but streamed the ids of {streamed}")]
    Miscounted {
        /// Its `meta_info.completion_tokens`.
        counted: u64,
        /// Ids streamed.
        streamed: usize,
    },
    /// SGLang's cumulative ids that do not extend the ones before.
    #[error("the engine's cumulative output ids shrank from {before} to {now}")]
    Shrank {
        /// Ids seen before.
        before: usize,
        /// Ids in this event.
        now: usize,
    },
}

/// Reads the events of one answer's stream, in order: what every engine
/// shares (`[DONE]`, errors in the stream, the count of ids received)
/// here, the rest in the engine API's own [`EventFormat`].
#[derive(Debug)]
pub struct StreamReader {
    format: Box<dyn EventFormat>,
    /// Ids received so far.
    received: usize,
    /// The last event was read (`[DONE]` may follow).
    ended: bool,
}

impl StreamReader {
    /// A reader for one answer from `api`.
    pub fn new(api: EngineApi) -> Self {
        let format: Box<dyn EventFormat> = match api {
            EngineApi::LlamaCpp => Box::new(LlamaCppEvents),
            EngineApi::Vllm | EngineApi::Trtllm => Box::new(CompletionsEvents { api }),
            EngineApi::Sglang => Box::new(SglangEvents::default()),
        };
        Self {
            format,
            received: 0,
            ended: false,
        }
    }

    /// Whether the answer's last event was read.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Reads one event's data. `[DONE]` ends the stream of vLLM and SGLang.
    pub fn read(&mut self, data: &str) -> Result<Event, EventError> {
        let data = data.trim();
        if data == "[DONE]" {
            // After the last event only: before it, the answer is cut short.
            if !self.ended {
                return Err(EventError::DoneEarly(self.received));
            }
            return Ok(Event::default());
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| EventError::NotJson(e.to_string(), shorten(data)))?;
        if let Some(error) = value.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(EventError::Engine(message));
        }
        // OpenAI-style servers (older vLLM, TensorRT-LLM) send an error
        // as an object of its own.
        if value.get("object").and_then(Value::as_str) == Some("error") {
            let message = value.get("message").and_then(Value::as_str).unwrap_or(data);
            return Err(EventError::Engine(shorten(message)));
        }
        let event = self.format.event(&value, data, self.received)?;
        self.received += event.tokens.len();
        if event.last {
            self.ended = true;
        }
        Ok(event)
    }
}

/// One engine API's events: where its token ids are and how its answer
/// ends. `received` counts the ids of the events before.
trait EventFormat: std::fmt::Debug + Send + Sync {
    fn event(&mut self, value: &Value, data: &str, received: usize) -> Result<Event, EventError>;
}

/// llama.cpp's `/completion` events: `tokens` are the new ids; at `stop`,
/// `tokens_predicted` must equal every id streamed.
#[derive(Debug)]
struct LlamaCppEvents;

impl EventFormat for LlamaCppEvents {
    fn event(&mut self, value: &Value, data: &str, received: usize) -> Result<Event, EventError> {
        let tokens = ids(value, "tokens", EngineApi::LlamaCpp, data)?;
        let last = value.get("stop").and_then(Value::as_bool) == Some(true);
        let predicted = value.get("tokens_predicted").and_then(Value::as_u64);
        let streamed = received + tokens.len();
        match predicted {
            Some(predicted) if last && predicted != streamed as u64 => Err(EventError::Withheld {
                predicted,
                streamed,
            }),
            _ => Ok(Event { tokens, last }),
        }
    }
}

/// OpenAI completions events (vLLM, TensorRT-LLM): the first choice's new
/// `token_ids`, the last one with a `finish_reason`.
#[derive(Debug)]
struct CompletionsEvents {
    api: EngineApi,
}

impl EventFormat for CompletionsEvents {
    fn event(&mut self, value: &Value, data: &str, _received: usize) -> Result<Event, EventError> {
        let choice = value
            .get("choices")
            .and_then(|c| c.get(0))
            .unwrap_or(&Value::Null);
        if choice.is_null() && value.get("usage").is_some() {
            // The usage event (stream_options.include_usage).
            return Ok(Event::default());
        }
        let finish = choice.get("finish_reason").filter(|r| !r.is_null());
        if let Some(reason) = finish {
            normal_end(reason.as_str().unwrap_or_default(), reason)?;
        }
        Ok(Event {
            tokens: ids(choice, "token_ids", self.api, data)?,
            last: finish.is_some(),
        })
    }
}

/// How SGLang's `output_ids` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SglangIds {
    /// Every id so far (the default).
    Cumulative,
    /// Only the new ones (`--incremental-streaming-output`).
    Incremental,
}

/// SGLang's `/generate` events: `output_ids` are every id so far, or only
/// the new ones. The mode is learned from an event before the last one,
/// whose `meta_info.completion_tokens` (always cumulative) tells them
/// apart; the last event's count is then checked against what arrived,
/// so it cannot also decide the mode.
#[derive(Debug, Default)]
struct SglangEvents {
    /// How `output_ids` count, once an event has shown it.
    mode: Option<SglangIds>,
}

impl EventFormat for SglangEvents {
    fn event(&mut self, value: &Value, data: &str, received: usize) -> Result<Event, EventError> {
        let all = ids(value, "output_ids", EngineApi::Sglang, data)?;
        let finish = value
            .pointer("/meta_info/finish_reason")
            .filter(|r| !r.is_null());
        if let Some(reason) = finish {
            normal_end(reason["type"].as_str().unwrap_or_default(), reason)?;
        }
        let last = finish.is_some();
        let counted = value
            .pointer("/meta_info/completion_tokens")
            .and_then(Value::as_u64);
        let shown = counted.and_then(|n| {
            if received == 0 {
                None // the first event looks the same in both modes
            } else if n as usize == all.len() {
                Some(SglangIds::Cumulative)
            } else if n as usize == received + all.len() {
                Some(SglangIds::Incremental)
            } else {
                None
            }
        });
        if !last {
            self.mode = self.mode.or(shown);
        }
        let mode = self.mode.or(shown).unwrap_or(if all.len() > received {
            SglangIds::Cumulative
        } else {
            SglangIds::Incremental
        });
        let tokens = match mode {
            SglangIds::Incremental => all,
            SglangIds::Cumulative if all.len() < received => {
                return Err(EventError::Shrank {
                    before: received,
                    now: all.len(),
                })
            }
            SglangIds::Cumulative => all[received..].to_vec(),
        };
        // At the end, every id the engine counted must have arrived.
        let streamed = received + tokens.len();
        match counted {
            Some(counted) if last && counted != streamed as u64 => {
                Err(EventError::Miscounted { counted, streamed })
            }
            _ => Ok(Event { tokens, last }),
        }
    }
}

/// An answer ends normally only when the engine stopped (a stop token or
/// string) or reached its length; any other reason (`abort`, TensorRT-LLM's
/// `cancelled` and `timeout`, ...) means it was cut short.
fn normal_end(reason: &str, whole: &Value) -> Result<(), EventError> {
    match reason {
        "stop" | "length" => Ok(()),
        _ => Err(EventError::CutShort(shorten(&whole.to_string()))),
    }
}

/// The token ids in `value[field]`; a missing field is an error naming it.
fn ids(
    value: &Value,
    field: &'static str,
    api: EngineApi,
    data: &str,
) -> Result<Vec<u32>, EventError> {
    let missing = || EventError::NoTokenIds {
        api: api.name(),
        field,
        event: shorten(data),
    };
    let Some(array) = value.get(field).and_then(Value::as_array) else {
        return Err(missing());
    };
    array
        .iter()
        .map(|v| v.as_u64().and_then(|id| u32::try_from(id).ok()))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(missing)
}

/// At most 200 characters of `text`, for error messages.
pub fn shorten(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation() -> Generation {
        Generation {
            model: "m".into(),
            max_tokens: 7,
            ignore_eos: false,
            stop_token_ids: vec![2],
            cache_prompt: false,
        }
    }

    #[test]
    fn requests_are_greedy_streams_of_token_ids() {
        let llama = request_body(EngineApi::LlamaCpp, &generation(), &[5, 6]);
        assert_eq!(llama["prompt"], json!([5, 6]));
        assert_eq!(llama["n_predict"], 7);
        assert_eq!(llama["top_k"], 1);
        // No prompt reused across queries unless the config says so.
        assert_eq!(llama["cache_prompt"], false);
        let trtllm = request_body(EngineApi::Trtllm, &generation(), &[5]);
        assert_eq!(trtllm["detokenize"], false);
        assert!(trtllm.get("return_token_ids").is_none());
        assert!(trtllm.get("ignore_eos").is_none());
        let vllm = request_body(EngineApi::Vllm, &generation(), &[5]);
        assert_eq!(vllm["return_token_ids"], true);
        assert_eq!(vllm["model"], "m");
        assert_eq!(vllm["stop_token_ids"], json!([2]));
        let sglang = request_body(EngineApi::Sglang, &generation(), &[5]);
        assert_eq!(sglang["input_ids"], json!([5]));
        assert_eq!(sglang["sampling_params"]["max_new_tokens"], 7);
        assert_eq!(sglang["sampling_params"]["stop_token_ids"], json!([2]));
        for body in [llama, vllm, sglang, trtllm] {
            assert_eq!(body["stream"], true);
        }
    }

    #[test]
    fn llama_cpp_events_carry_new_ids_and_stop() {
        let mut r = StreamReader::new(EngineApi::LlamaCpp);
        let e = r
            .read(r#"{"content":"a","tokens":[7],"stop":false}"#)
            .unwrap();
        assert_eq!(
            e,
            Event {
                tokens: vec![7],
                last: false
            }
        );
        let e = r.read(r#"{"content":"","tokens":[],"stop":true,"tokens_predicted":1}"#);
        assert_eq!(
            e.unwrap(),
            Event {
                tokens: vec![],
                last: true
            }
        );
        assert!(r.ended());
        // A token inside a UTF-8 character was generated but not streamed.
        let mut r = StreamReader::new(EngineApi::LlamaCpp);
        r.read(r#"{"tokens":[7],"stop":false}"#).unwrap();
        let e = r.read(r#"{"tokens":[],"stop":true,"tokens_predicted":2}"#);
        assert_eq!(
            e.unwrap_err(),
            EventError::Withheld {
                predicted: 2,
                streamed: 1
            }
        );
    }

    #[test]
    fn versions_older_than_the_minimum_are_named() {
        assert_eq!(version_number("v0.10.2rc1"), Some((0, 10, 2)));
        assert_eq!(version_number("1.0.0+cu128"), Some((1, 0, 0)));
        assert_eq!(version_number("llama.cpp b1"), None);
        assert!(EngineApi::Vllm.too_old("0.9.2").is_some());
        assert!(EngineApi::Vllm.too_old("0.10.1.1").is_some());
        assert!(EngineApi::Vllm.too_old("0.10.2").is_none());
        assert!(EngineApi::Vllm.too_old("0.11.0").is_none());
        assert!(EngineApi::Trtllm.too_old("0.21.0").is_some());
        assert!(EngineApi::Trtllm.too_old("1.1.0rc2").is_none());
        // Unreadable: the probe decides.
        assert!(EngineApi::Vllm.too_old("dev").is_none());
        assert!(EngineApi::Sglang.too_old("0.1.0").is_none());
    }

    #[test]
    fn vllm_events_end_with_a_finish_reason_then_done() {
        let mut r = StreamReader::new(EngineApi::Vllm);
        let e = r
            .read(r#"{"choices":[{"text":"x","token_ids":[3,4],"finish_reason":null}]}"#)
            .unwrap();
        assert_eq!(e.tokens, vec![3, 4]);
        assert!(!e.last);
        let e = r
            .read(r#"{"choices":[{"text":"","token_ids":[9],"finish_reason":"length"}]}"#)
            .unwrap();
        assert!(e.last && e.tokens == vec![9]);
        assert!(r
            .read(r#"{"choices":[],"usage":{}}"#)
            .unwrap()
            .tokens
            .is_empty());
        assert!(r.read("[DONE]").unwrap().tokens.is_empty());
        assert!(r.ended());
        // Cut short: [DONE] first, an abort, an error object, no choices.
        let mut r = StreamReader::new(EngineApi::Vllm);
        r.read(r#"{"choices":[{"token_ids":[3],"finish_reason":null}]}"#)
            .unwrap();
        assert_eq!(r.read("[DONE]").unwrap_err(), EventError::DoneEarly(1));
        let e = StreamReader::new(EngineApi::Vllm)
            .read(r#"{"choices":[{"token_ids":[],"finish_reason":"abort"}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("cut the answer short"), "{e}");
        // TensorRT-LLM's cancelled and timed-out answers are not complete.
        for reason in ["cancelled", "timeout"] {
            let e = StreamReader::new(EngineApi::Trtllm)
                .read(&format!(
                    r#"{{"choices":[{{"token_ids":[5],"finish_reason":"{reason}"}}]}}"#
                ))
                .unwrap_err();
            assert!(
                e.to_string().contains("cut the answer short") && e.to_string().contains(reason),
                "{e}"
            );
        }
        let mut r = StreamReader::new(EngineApi::Trtllm);
        let e = r
            .read(r#"{"choices":[{"token_ids":[5],"finish_reason":"stop"}]}"#)
            .unwrap();
        assert!(e.last);
        let e = StreamReader::new(EngineApi::Trtllm)
            .read(r#"{"object":"error","message":"bad request","code":400}"#)
            .unwrap_err();
        assert_eq!(e.to_string(), "the engine reports an error: bad request");
        let e = StreamReader::new(EngineApi::Vllm)
            .read(r#"{"id":"x"}"#)
            .unwrap_err();
        assert!(matches!(e, EventError::NoTokenIds { .. }), "{e}");
    }

    #[test]
    fn sglang_cumulative_ids_give_only_the_new_ones() {
        let mut r = StreamReader::new(EngineApi::Sglang);
        let e = r.read(r#"{"output_ids":[1,2],"meta_info":{"finish_reason":null}}"#);
        assert_eq!(e.unwrap().tokens, vec![1, 2]);
        let e = r.read(r#"{"output_ids":[1,2,3],"meta_info":{"finish_reason":{"type":"length"}}}"#);
        assert_eq!(
            e.unwrap(),
            Event {
                tokens: vec![3],
                last: true
            }
        );
        // --incremental-streaming-output: each event has only new ids.
        let mut r = StreamReader::new(EngineApi::Sglang);
        for (event, tokens) in [
            (
                r#"{"output_ids":[4],"meta_info":{"completion_tokens":1,"finish_reason":null}}"#,
                vec![4],
            ),
            (
                r#"{"output_ids":[5,6],"meta_info":{"completion_tokens":3,"finish_reason":null}}"#,
                vec![5, 6],
            ),
            (
                r#"{"output_ids":[7],"meta_info":{"completion_tokens":4,"finish_reason":{"type":"length"}}}"#,
                vec![7],
            ),
        ] {
            assert_eq!(r.read(event).unwrap().tokens, tokens, "{event}");
        }
        assert!(r.ended());
        let e = StreamReader::new(EngineApi::Sglang)
            .read(r#"{"output_ids":[1],"meta_info":{"finish_reason":{"type":"abort"}}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("cut the answer short"), "{e}");
        // The last event's completion_tokens counts every id: one missing.
        let mut r = StreamReader::new(EngineApi::Sglang);
        r.read(r#"{"output_ids":[4],"meta_info":{"completion_tokens":1,"finish_reason":null}}"#)
            .unwrap();
        let e = r
            .read(r#"{"output_ids":[7],"meta_info":{"completion_tokens":3,"finish_reason":{"type":"stop"}}}"#)
            .unwrap_err();
        assert_eq!(
            e,
            EventError::Miscounted {
                counted: 3,
                streamed: 2
            }
        );
        // Cumulative ids, learned from the second event, counted one
        // more at the last.
        let mut r = StreamReader::new(EngineApi::Sglang);
        for (ids, n) in [("[4]", 1), ("[4,5]", 2)] {
            let event = format!(
                r#"{{"output_ids":{ids},"meta_info":{{"completion_tokens":{n},"finish_reason":null}}}}"#
            );
            assert_eq!(r.read(&event).unwrap().tokens.len(), 1);
        }
        let e = r
            .read(r#"{"output_ids":[4,5,6],"meta_info":{"completion_tokens":4,"finish_reason":{"type":"length"}}}"#)
            .unwrap_err();
        assert_eq!(
            e,
            EventError::Miscounted {
                counted: 4,
                streamed: 3
            }
        );
    }

    #[test]
    fn bad_events_are_errors_that_say_what_is_wrong() {
        let mut r = StreamReader::new(EngineApi::LlamaCpp);
        let e = r.read("{not json").unwrap_err();
        assert!(matches!(e, EventError::NotJson(..)), "{e}");
        let e = r
            .read(r#"{"content":"text only","stop":false}"#)
            .unwrap_err();
        assert!(e.to_string().contains("no token ids (field tokens)"), "{e}");
        let e = r.read(r#"{"tokens":[-1]}"#).unwrap_err();
        assert!(matches!(e, EventError::NoTokenIds { .. }), "{e}");
        let e = r
            .read(r#"{"error":{"code":500,"message":"out of memory"}}"#)
            .unwrap_err();
        assert_eq!(e.to_string(), "the engine reports an error: out of memory");
        assert!(shorten(&"x".repeat(500)).len() < 210);
    }
}
