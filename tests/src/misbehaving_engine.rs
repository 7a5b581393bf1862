//! A test-only serving engine that breaks its streams on purpose. It
//! speaks llama.cpp's `/completion` (plus `/health` and `/v1/models`) and
//! answers each prompt according to its first token id ([`Misbehaviour`]),
//! so a test knows what every sample must get. It also speaks vLLM's and
//! TensorRT-LLM's `/v1/completions` and SGLang's `/generate`, answering
//! well except for the prompts [`CUT_SHORT`] (an answer that ends with
//! finish reason `cancelled`) and [`MISCOUNTED`] (SGLang counts one token
//! more than it streams), and says the version it was started with. Each connection is closed
//! after one answer (`Connection: close`), so a stream ends where the
//! server stops writing. A prompt of the single id 1 (the node's probe at
//! start) is always answered well.
//!
//! It writes raw HTTP on purpose: it must send what a real server never
//! would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};

/// What the engine does with a prompt whose first id is `id`: the
/// behaviour at `id % 9` of [`Misbehaviour::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Misbehaviour {
    /// Three tokens, `id+1`, `id+2`, `id+3` (fewer if fewer are asked
    /// for), and a proper end.
    Good,
    /// One token, then an event that is not JSON.
    Malformed,
    /// One token, then the connection closes without the last event.
    Truncated,
    /// HTTP 500.
    ServerError,
    /// A proper end without a single token.
    NoTokens,
    /// Headers, then nothing (the node's first-token timeout).
    Stall,
    /// One token streamed, two counted in the last event.
    Withheld,
    /// An error event after one token.
    ErrorEvent,
    /// One token more than asked for, and a proper end.
    TooLong,
}

impl Misbehaviour {
    /// Every behaviour, in the order of `id % 9`.
    pub const ALL: [Misbehaviour; 9] = [
        Misbehaviour::Good,
        Misbehaviour::Malformed,
        Misbehaviour::Truncated,
        Misbehaviour::ServerError,
        Misbehaviour::NoTokens,
        Misbehaviour::Stall,
        Misbehaviour::Withheld,
        Misbehaviour::ErrorEvent,
        Misbehaviour::TooLong,
    ];

    /// What the engine does with a prompt starting with `id`.
    pub fn of(id: u32) -> Misbehaviour {
        Self::ALL[id as usize % Self::ALL.len()]
    }

    /// The `k`-th first id that gets this behaviour.
    pub fn id(self, k: u32) -> u32 {
        let index = Self::ALL.iter().position(|b| *b == self).expect("listed");
        index as u32 + k * Self::ALL.len() as u32
    }

    /// Text the node's per-sample error must hold.
    pub fn expected_error(self) -> Option<&'static str> {
        Some(match self {
            Misbehaviour::Good => return None,
            Misbehaviour::Malformed => "is not JSON",
            Misbehaviour::Truncated => "without its last event (truncated)",
            Misbehaviour::ServerError => "HTTP 500: engine exploded",
            Misbehaviour::NoTokens => "the engine's answer has no tokens",
            Misbehaviour::Stall => "no first token from the engine within",
            Misbehaviour::Withheld => "generated 2 token(s) but streamed the ids of 1",
            Misbehaviour::ErrorEvent => "the engine reports an error: out of memory",
            Misbehaviour::TooLong => "more than max_tokens",
        })
    }
}

/// A prompt starting with this id gets an answer that ends with finish
/// reason `cancelled` (`/v1/completions`) or `abort` (`/generate`).
pub const CUT_SHORT: u32 = 100_000;
/// A prompt starting with this id gets an SGLang answer whose last event
/// counts one completion token more than were streamed.
pub const MISCOUNTED: u32 = 100_001;

/// The engine, serving until dropped.
pub struct MisbehavingEngine {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// A silent engine's requests ([`MisbehavingEngine::start_silent`]).
    silent: Option<Arc<Silent>>,
}

/// What a silent engine counts: requests it holds open without a token,
/// and those whose client hung up (aborted them).
#[derive(Debug, Default)]
pub struct Silent {
    opened: AtomicUsize,
    hung_up: AtomicUsize,
}

impl MisbehavingEngine {
    /// Starts it on a free port of 127.0.0.1.
    pub fn start() -> Result<MisbehavingEngine> {
        Self::start_as(None)
    }

    /// Starts it saying `version` at `/version` and `/server_info` (none:
    /// those answer 404).
    pub fn start_as(version: Option<&str>) -> Result<MisbehavingEngine> {
        Self::serving(version, true, None)
    }

    /// Starts it as a vLLM older than 0.10.2 would answer, with no version
    /// to read: `/v1/completions` streams text without token ids.
    pub fn start_text_only() -> Result<MisbehavingEngine> {
        Self::serving(None, false, None)
    }

    /// Starts it as a hung vLLM (`version` 0.32.0): the node's start-up
    /// requests are answered, every other `/v1/completions` gets its
    /// headers and then nothing, until its client hangs up — which a node
    /// does when it aborts the request.
    pub fn start_silent() -> Result<MisbehavingEngine> {
        Self::serving(Some("0.32.0"), true, Some(Arc::default()))
    }

    /// A silent engine's requests so far: (held open, aborted by their
    /// client).
    pub fn silent_requests(&self) -> (usize, usize) {
        self.silent.as_ref().map_or((0, 0), |s| {
            (
                s.opened.load(Ordering::Acquire),
                s.hung_up.load(Ordering::Acquire),
            )
        })
    }

    fn serving(
        version: Option<&str>,
        token_ids: bool,
        silent: Option<Arc<Silent>>,
    ) -> Result<MisbehavingEngine> {
        let version: Option<Arc<str>> = version.map(Arc::from);
        let counts = silent.clone();
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Acquire) {
                    return;
                }
                if let Ok(stream) = stream {
                    let version = version.clone();
                    let silent = counts.clone();
                    std::thread::spawn(move || {
                        let _ = serve(stream, version.as_deref(), token_ids, silent.as_deref());
                    });
                }
            }
        });
        Ok(MisbehavingEngine { addr, stop, silent })
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for MisbehavingEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// One request, one answer, then close.
fn serve(
    stream: TcpStream,
    version: Option<&str>,
    token_ids: bool,
    silent: Option<&Silent>,
) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let mut out = stream;
    match path {
        "/health" => respond_json(&mut out, 200, &json!({"status": "ok"})),
        "/v1/models" => respond_json(&mut out, 200, &json!({"data": [{"id": "misbehaving"}]})),
        "/props" => respond_json(&mut out, 200, &json!({"build_info": "test-only"})),
        "/version" | "/server_info" if version.is_some() => {
            respond_json(&mut out, 200, &json!({ "version": version }))
        }
        "/completion" => {
            let request: Value = serde_json::from_slice(&body)?;
            let prompt = ids_of(&request["prompt"]);
            let asked = request["n_predict"].as_u64().unwrap_or(3) as u32;
            complete(&mut out, &prompt, asked)
        }
        "/v1/completions" => {
            let request: Value = serde_json::from_slice(&body)?;
            let prompt = ids_of(&request["prompt"]);
            let asked = request["max_tokens"].as_u64().unwrap_or(3) as u32;
            match silent {
                Some(silent) if prompt != [1] && prompt.len() < 512 => {
                    hold_until_hung_up(&mut out, reader, silent)
                }
                _ => openai_stream(&mut out, &prompt, asked, token_ids),
            }
        }
        "/generate" => {
            let request: Value = serde_json::from_slice(&body)?;
            let prompt = ids_of(&request["input_ids"]);
            let asked = request
                .pointer("/sampling_params/max_new_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(3) as u32;
            sglang_stream(&mut out, &prompt, asked)
        }
        _ => respond_json(&mut out, 404, &json!({"error": {"message": "not found"}})),
    }
}

/// A silent engine's answer: headers, then nothing until the client
/// closes its side (reading gives end of file), counted.
fn hold_until_hung_up(
    out: &mut TcpStream,
    mut reader: BufReader<TcpStream>,
    silent: &Silent,
) -> Result<()> {
    stream_head(out)?;
    out.flush()?;
    silent.opened.fetch_add(1, Ordering::AcqRel);
    let mut byte = [0u8; 1];
    loop {
        match reader.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    silent.hung_up.fetch_add(1, Ordering::AcqRel);
    Ok(())
}

/// A JSON array of token ids.
fn ids_of(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as u32)
                .collect()
        })
        .unwrap_or_default()
}

fn stream_head(out: &mut TcpStream) -> Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    )?;
    Ok(())
}

/// vLLM's and TensorRT-LLM's stream: the new ids in each choice, a finish
/// reason on the last, then `[DONE]` (text alone when `token_ids` is
/// false).
fn openai_stream(out: &mut TcpStream, prompt: &[u32], asked: u32, token_ids: bool) -> Result<()> {
    let first = prompt.first().copied().unwrap_or(0);
    let n = asked.min(3);
    stream_head(out)?;
    for k in 1..=n {
        let reason = match (k == n, first) {
            (false, _) => Value::Null,
            (true, CUT_SHORT) => json!("cancelled"),
            (true, _) => json!("length"),
        };
        let mut choice = json!({"text": "x", "finish_reason": reason});
        if token_ids {
            choice["token_ids"] = json!([first + k]);
        }
        event(out, &json!({ "choices": [choice] }).to_string())?;
    }
    event(out, "[DONE]")
}

/// SGLang's stream: every id so far in each event, `completion_tokens`
/// counting them, a finish reason on the last.
fn sglang_stream(out: &mut TcpStream, prompt: &[u32], asked: u32) -> Result<()> {
    let first = prompt.first().copied().unwrap_or(0);
    let n = asked.min(3);
    stream_head(out)?;
    let mut ids = Vec::new();
    for k in 1..=n {
        ids.push(first + k);
        let last = k == n;
        let reason = match (last, first) {
            (false, _) => Value::Null,
            (true, CUT_SHORT) => json!({"type": "abort"}),
            (true, _) => json!({"type": "length"}),
        };
        let counted = if last && first == MISCOUNTED {
            k + 1
        } else {
            k
        };
        let meta = json!({"completion_tokens": counted, "finish_reason": reason});
        event(
            out,
            &json!({"output_ids": ids, "meta_info": meta}).to_string(),
        )?;
    }
    event(out, "[DONE]")
}

fn respond_json(out: &mut TcpStream, status: u16, body: &Value) -> Result<()> {
    let body = body.to_string();
    write!(
        out,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    Ok(())
}

fn event(out: &mut TcpStream, data: &str) -> Result<()> {
    write!(out, "data: {data}\n\n")?;
    out.flush()?;
    Ok(())
}

fn token(out: &mut TcpStream, id: u32, n: u32) -> Result<()> {
    event(
        out,
        &json!({"content": "x", "tokens": [id], "stop": false, "tokens_predicted": n}).to_string(),
    )
}

fn end(out: &mut TcpStream, predicted: u32) -> Result<()> {
    event(
        out,
        &json!({"content": "", "tokens": [], "stop": true, "tokens_predicted": predicted})
            .to_string(),
    )
}

fn complete(out: &mut TcpStream, prompt: &[u32], asked: u32) -> Result<()> {
    let first = prompt.first().copied().unwrap_or(0);
    // The node's start-up requests (its one-token probe, its 512-token
    // prompt-cache check) are answered well, so that it starts.
    let behaviour = if prompt == [1] || prompt.len() >= 512 {
        Misbehaviour::Good
    } else {
        Misbehaviour::of(first)
    };
    if behaviour == Misbehaviour::ServerError {
        let body = "engine exploded";
        write!(
            out,
            "HTTP/1.1 500 X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        return Ok(());
    }
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    )?;
    match behaviour {
        Misbehaviour::Good => {
            let n = asked.min(3);
            for k in 1..=n {
                token(out, first + k, k)?;
            }
            end(out, n)
        }
        Misbehaviour::TooLong => {
            for k in 1..=asked + 1 {
                token(out, first + k, k)?;
            }
            end(out, asked + 1)
        }
        Misbehaviour::Malformed => {
            token(out, first + 1, 1)?;
            event(out, "{not json")
        }
        Misbehaviour::Truncated => token(out, first + 1, 1),
        Misbehaviour::NoTokens => end(out, 0),
        Misbehaviour::Stall => {
            std::thread::sleep(Duration::from_secs(30));
            Ok(())
        }
        Misbehaviour::Withheld => {
            token(out, first + 1, 1)?;
            end(out, 2)
        }
        Misbehaviour::ErrorEvent => {
            token(out, first + 1, 1)?;
            event(out, r#"{"error":{"code":500,"message":"out of memory"}}"#)
        }
        Misbehaviour::ServerError => Ok(()),
    }
}
