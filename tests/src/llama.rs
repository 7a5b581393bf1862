//! A real llama.cpp server for the openai backend's tests and benchmarks:
//! `llama-server` and a tiny Llama GGUF, both made by
//! `deploy/llm/llama-cpp.sh` (built once, cached), started on port 0.
//! [`greedy_tokens`] asks the engine directly, without the node, what it
//! answers a prompt with.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use loadgen_node::qsl::{synthetic_sample, DType};
use serde_json::{json, Value};

use crate::binaries::workspace_root;
use crate::prerequisites::skip_unless_ci;
use crate::text::tail;

/// The ids of synthetic prompt `index`: what `loadgen-node run
/// --benchmark llama2-70b --sample-shape TOKENS --sample-dtype int32
/// --sample-seed SEED` sends for that sample.
pub fn synthetic_prompt(tokens: usize, seed: u64, index: usize) -> Vec<u32> {
    synthetic_sample(&[tokens], DType::I32, seed, index)
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u32)
        .collect()
}

/// What `deploy/llm/llama-cpp.sh` makes.
#[derive(Clone, Debug)]
pub struct LlamaFiles {
    /// The `llama-server` binary.
    pub server: PathBuf,
    /// The tiny model.
    pub model: PathBuf,
}

/// The server and model, made on first use. `Ok(None)`: they could not
/// be made and the caller skips (an error under CI, which must run it).
pub fn llama_cpp_files() -> Result<Option<LlamaFiles>> {
    static FILES: OnceLock<Result<LlamaFiles, String>> = OnceLock::new();
    let made = FILES.get_or_init(|| make().map_err(|e| format!("{e:#}")));
    match made {
        Ok(files) => Ok(Some(files.clone())),
        Err(e) => skip_unless_ci(&format!("llama.cpp ({e})")).map(|()| None),
    }
}

fn make() -> Result<LlamaFiles> {
    let [server, model] = paths_from_script("deploy/llm/llama-cpp.sh", ["server", "model"])?;
    Ok(LlamaFiles { server, model })
}

/// Runs one of the scripts that make something once and cache it
/// (`deploy/llm/llama-cpp.sh`, `deploy/llm/aiperf.sh`; `script` relative to
/// the workspace) for `items`, and returns the path it prints for each.
pub fn paths_from_script<const N: usize>(script: &str, items: [&str; N]) -> Result<[PathBuf; N]> {
    let script = workspace_root().join(script);
    let output = Command::new("bash")
        .arg(&script)
        .args(items)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}):\n{}",
            script.display(),
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr), 30)
        );
    }
    let paths: Vec<PathBuf> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect();
    let count = paths.len();
    paths
        .try_into()
        .map_err(|_| anyhow::anyhow!("{} printed {count} paths, not {N}", script.display()))
}

/// A running `llama-server`; killed when dropped.
pub struct LlamaServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The port it listens on (a restart reuses it).
    pub port: u16,
    log: PathBuf,
    /// Removed with the server (unless tests keep their files).
    _log_file: tempfile::NamedTempFile,
    files: LlamaFiles,
    slots: usize,
}

/// Tokens of context per slot: the tests' prompts and answers fit.
const CONTEXT_PER_SLOT: usize = 2048;

impl LlamaServer {
    /// Starts a server with `slots` sequences at once on a free port.
    pub fn start(files: &LlamaFiles, slots: usize) -> Result<LlamaServer> {
        Self::start_on(files, slots, 0)
    }

    /// Starts a server on `port` (0: a free one) and waits until it
    /// answers `/health`.
    pub fn start_on(files: &LlamaFiles, slots: usize, port: u16) -> Result<LlamaServer> {
        let log_file = crate::files::test_file("llama-server", ".log")?;
        let path = log_file.path().to_path_buf();
        let child = Command::new(&files.server)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--model")
            .arg(&files.model)
            .args(["--parallel", &slots.to_string()])
            .args(["--ctx-size", &(slots * CONTEXT_PER_SLOT).to_string()])
            .args(["--threads", "1", "--log-colors", "off"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&path)?)
            .stderr(std::fs::OpenOptions::new().append(true).open(&path)?)
            .spawn()
            .with_context(|| format!("cannot start {}", files.server.display()))?;
        let mut server = LlamaServer {
            child,
            url: String::new(),
            port,
            log: path,
            _log_file: log_file,
            files: files.clone(),
            slots,
        };
        server.wait_listening()?;
        Ok(server)
    }

    fn wait_listening(&mut self) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Some(status) = self.child.try_wait()? {
                bail!("llama-server exited ({status}):\n{}", self.log_tail());
            }
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(url) = log
                .lines()
                .find_map(|l| l.split("listening on ").nth(1))
                .map(|u| u.trim().to_string())
            {
                self.port = url
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .with_context(|| format!("no port in {url}"))?;
                self.url = url;
                if health(&self.url) {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "llama-server did not answer within 60 s:\n{}",
            self.log_tail()
        )
    }

    /// The end of its log.
    pub fn log_tail(&self) -> String {
        tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 20)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills it and starts it again on the same port.
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        *self = Self::start_on(&self.files.clone(), self.slots, self.port)?;
        Ok(())
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn health(url: &str) -> bool {
    reqwest::blocking::Client::new()
        .get(format!("{url}/health"))
        .timeout(Duration::from_secs(2))
        .send()
        .is_ok_and(|r| r.status().is_success())
}

/// The engine's own greedy answer to `prompt`, `n` tokens, asked directly
/// (not streamed, `return_tokens`) and not through a node.
pub fn greedy_tokens(url: &str, prompt: &[u32], n: u32) -> Result<Vec<u32>> {
    let body = json!({
        "prompt": prompt,
        "n_predict": n,
        "temperature": 0.0,
        "top_k": 1,
        "return_tokens": true,
    });
    let answer: Value = reqwest::blocking::Client::new()
        .post(format!("{url}/completion"))
        .json(&body)
        .timeout(Duration::from_secs(60))
        .send()
        .context("llama-server /completion")?
        .error_for_status()?
        .json()?;
    answer["tokens"]
        .as_array()
        .context("no tokens in llama-server's answer")?
        .iter()
        .map(|t| t.as_u64().map(|t| t as u32).context("a token id"))
        .collect()
}
