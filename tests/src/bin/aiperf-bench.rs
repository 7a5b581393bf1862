//! `aiperf-bench`: netdiv and a peer LLM load generator, AIPerf (NVIDIA's,
//! PyPI `aiperf`, installed by `deploy/llm/aiperf.sh`), measure the same
//! serving engine — llama.cpp (`deploy/llm/llama-cpp.sh`) or, with
//! `--engine vllm`, vLLM's CPU build (`deploy/llm/vllm-cpu.sh`), each with
//! its tiny Llama model — with the same prompts (the same token ids, the
//! same sampling settings and answer length) under the same two loads:
//!
//! * a request rate: AIPerf `--request-rate R` (Poisson arrivals, its
//!   default) against a LoadGen Server run at `target_qps = R` (Poisson
//!   too); TTFT p50/p99, TPOT p50/p99 and output tokens/s;
//! * a concurrency: AIPerf `--concurrency C` against a LoadGen Offline
//!   run through a node that keeps `C` requests open; output tokens/s.
//!
//! netdiv runs twice: direct (`loadgen-node run --sut local` with the
//! openai backend, no network) and through the QDL, gRPC and a sut-node.
//! Each tool runs `--runs` times, in turn; the table gives the median and
//! the spread (max - min over the median) of each figure, the spread being
//! the run-to-run noise the comparison is held against.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin aiperf-bench [--quick]`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use netdiv_tests::bench::{finish_benchmark, machine_description, median, token_measure};
use netdiv_tests::configs::{node_toml, UserConf};
use netdiv_tests::llama::{llama_cpp_files, paths_from_script, synthetic_prompt, LlamaServer};
use netdiv_tests::network_run::{llama2_prompt_flags, loadgen};
use netdiv_tests::sut_client::NodeProcess;
use netdiv_tests::text::tail;
use netdiv_tests::vllm::{vllm_files, VllmServer};
use netdiv_tests::{test_dir, write_file};
use sut_node::backend::openai::api::EngineApi;
use sut_node::backend::openai::OpenaiConfig;
use sut_node::backend::BackendKind;
use sut_node::config::FileConfig;

/// Prints AIPerf's and netdiv's figures for one llama.cpp server.
#[derive(Debug, clap::Parser)]
#[command(name = "aiperf-bench")]
struct Cli {
    /// Distinct prompts.
    #[arg(long, default_value_t = 128)]
    prompts: usize,
    /// Tokens per prompt.
    #[arg(long, default_value_t = 128)]
    prompt_tokens: usize,
    /// Tokens per answer.
    #[arg(long, default_value_t = 64)]
    answer_tokens: u32,
    /// Sequences the engine runs at once (llama-server --parallel).
    #[arg(long, default_value_t = 4)]
    slots: usize,
    /// The concurrency load: requests open at once (AIPerf --concurrency,
    /// the node's max_in_flight); it answers every prompt once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// The rate load: requests per second.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// The rate load: requests.
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Runs of each tool under each load, taken in turn.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// A short run: 32 prompts, 100 requests at 10/s, one run each.
    #[arg(long)]
    quick: bool,
    /// The engine on CPU 0, every tool (and this process) on CPU 1, so the
    /// tools' own CPU use does not slow the engine (needs two CPUs and
    /// util-linux's `taskset`).
    #[arg(long)]
    pin: bool,
    /// The engine measured: llama.cpp or vllm (its CPU build, prefix
    /// caching off; `--slots` is then its `--max-num-seqs`).
    #[arg(long, default_value = "llama.cpp")]
    engine: String,
}

const SEED: u64 = 47;

/// The three ways of measuring the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tool {
    Aiperf,
    NetdivDirect,
    NetdivQdl,
}

const TOOLS: [Tool; 3] = [Tool::Aiperf, Tool::NetdivDirect, Tool::NetdivQdl];

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Aiperf => "AIPerf",
            Tool::NetdivDirect => "netdiv direct (--sut local)",
            Tool::NetdivQdl => "netdiv via QDL + sut-node (gRPC)",
        }
    }
}

/// One run's figures (milliseconds, tokens per second). The concurrency
/// load fills only `tokens_per_s`.
#[derive(Clone, Copy, Debug, Default)]
struct Figures {
    ttft_p50: f64,
    ttft_p99: f64,
    tpot_p50: f64,
    tpot_p99: f64,
    tokens_per_s: f64,
    requests_per_s: f64,
    /// Requests that failed (netdiv: a failed sample fails the run).
    errors: f64,
}

/// A row of a table: its label and how to read it from a run.
type Row = (&'static str, fn(&Figures) -> f64);

/// The rows of the rate load's table; the concurrency load's are the last
/// two.
const RATE_ROWS: [Row; 7] = [
    ("TTFT p50 (ms)", |f| f.ttft_p50),
    ("TTFT p99 (ms)", |f| f.ttft_p99),
    ("TPOT p50 (ms)", |f| f.tpot_p50),
    ("TPOT p99 (ms)", |f| f.tpot_p99),
    ("requests/s achieved", |f| f.requests_per_s),
    ("request errors", |f| f.errors),
    ("output tokens/s", |f| f.tokens_per_s),
];

/// What AIPerf needs: its command and a local tokenizer directory.
struct Aiperf {
    command: PathBuf,
    tokenizer: PathBuf,
}

impl Aiperf {
    /// Installs (once, cached) and finds AIPerf and the tokenizer.
    fn install() -> Result<Aiperf> {
        let [command, tokenizer] =
            paths_from_script("deploy/llm/aiperf.sh", ["aiperf", "tokenizer"])?;
        Ok(Aiperf { command, tokenizer })
    }

    /// One `aiperf profile` run against `engine`; `load` is its load flags.
    fn profile(
        &self,
        engine: &Engine,
        prompts: &Path,
        dir: &Path,
        load: &[String],
    ) -> Result<Value> {
        let log = dir.join("aiperf.log");
        let status = Command::new(&self.command)
            .args(["profile", "--model", engine.model(), "--url", engine.url()])
            .arg("--tokenizer")
            .arg(&self.tokenizer)
            .args(["--endpoint-type", "completions", "--streaming"])
            .arg("--use-server-token-count")
            .arg("--input-file")
            .arg(prompts)
            .args(["--custom-dataset-type", "mooncake_trace"])
            .args(load)
            .args(["--random-seed", &SEED.to_string()])
            .args(["--ui", "none", "--no-server-metrics", "--no-gpu-telemetry"])
            .arg("--artifact-dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(Stdio::from(
                std::fs::File::options().append(true).open(&log)?,
            ))
            .status()
            .with_context(|| format!("cannot run {}", self.command.display()))?;
        let log_tail = || tail(&std::fs::read_to_string(&log).unwrap_or_default(), 30);
        if !status.success() {
            bail!("aiperf profile failed ({status}):\n{}", log_tail());
        }
        let export = dir.join("profile_export_aiperf.json");
        let text = std::fs::read_to_string(&export)
            .with_context(|| format!("{}: {}", export.display(), log_tail()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", export.display()))
    }
}

/// A statistic of one of AIPerf's metrics, checked to be in `unit`.
fn aiperf_metric(export: &Value, metric: &str, stat: &str, unit: &str) -> Result<f64> {
    let entry = &export[metric];
    let found = entry["unit"].as_str().unwrap_or_default();
    if found != unit {
        bail!("AIPerf's {metric} is in {found:?}, not {unit:?}: {entry}");
    }
    entry[stat]
        .as_f64()
        .with_context(|| format!("AIPerf's export has no {metric}.{stat}: {entry}"))
}

/// AIPerf's figures. Its TPOT is `inter_token_latency`: `(latency - TTFT)
/// / (output tokens - 1)` per request, the LoadGen's definition.
fn aiperf_figures(export: &Value) -> Result<Figures> {
    Ok(Figures {
        ttft_p50: aiperf_metric(export, "time_to_first_token", "p50", "ms")?,
        ttft_p99: aiperf_metric(export, "time_to_first_token", "p99", "ms")?,
        tpot_p50: aiperf_metric(export, "inter_token_latency", "p50", "ms")?,
        tpot_p99: aiperf_metric(export, "inter_token_latency", "p99", "ms")?,
        tokens_per_s: aiperf_metric(export, "output_token_throughput", "avg", "tokens/sec")?,
        requests_per_s: aiperf_metric(export, "request_throughput", "avg", "requests/sec")?,
        // Present only when some request failed.
        errors: export["error_request_count"]["avg"].as_f64().unwrap_or(0.0),
    })
}

/// The engine under both tools.
enum Engine {
    LlamaCpp(LlamaServer),
    Vllm(VllmServer),
}

impl Engine {
    fn start(cli: &Cli) -> Result<Engine> {
        Ok(match cli.engine.as_str() {
            "llama.cpp" => {
                let files = llama_cpp_files()?.context("llama.cpp could not be built")?;
                Engine::LlamaCpp(LlamaServer::start(&files, cli.slots)?)
            }
            "vllm" => {
                let files = vllm_files()?.context("vLLM's CPU build could not be installed")?;
                let slots = cli.slots.to_string();
                Engine::Vllm(VllmServer::start(
                    &files,
                    &["--no-enable-prefix-caching", "--max-num-seqs", &slots],
                )?)
            }
            other => bail!("--engine {other:?}: llama.cpp or vllm"),
        })
    }

    fn url(&self) -> &str {
        match self {
            Engine::LlamaCpp(e) => &e.url,
            Engine::Vllm(e) => &e.url,
        }
    }

    /// The model as AIPerf names it in requests.
    fn model(&self) -> &str {
        match self {
            Engine::LlamaCpp(_) => "tiny-llama",
            Engine::Vllm(e) => &e.model,
        }
    }

    fn api(&self) -> EngineApi {
        match self {
            Engine::LlamaCpp(_) => EngineApi::LlamaCpp,
            Engine::Vllm(_) => EngineApi::Vllm,
        }
    }

    /// Keeps the engine's processes on `cpu`.
    fn pin(&self, cpu: usize) -> Result<()> {
        match self {
            Engine::LlamaCpp(e) => pin(e.pid(), cpu),
            Engine::Vllm(e) => {
                for pid in netdiv_tests::vllm::group_members(e.group()) {
                    pin(pid, cpu)?;
                }
                Ok(())
            }
        }
    }

    fn describe(&self, cli: &Cli) -> String {
        match self {
            Engine::LlamaCpp(_) => format!(
                "llama.cpp llama-server (tiny Llama, {} slots, 1 thread)",
                cli.slots
            ),
            Engine::Vllm(_) => format!(
                "vLLM 0.32.0, CPU build (tiny Llama, --max-num-seqs {}, prefix caching off)",
                cli.slots
            ),
        }
    }
}

/// The prompts for AIPerf: each line is the request body the node sends
/// the engine for the same ids (sampling spelled out, no prompt cache),
/// for the OpenAI completions endpoint of the same server.
fn aiperf_prompts(cli: &Cli, engine: &Engine, dir: &Path) -> Result<PathBuf> {
    let mut lines = String::new();
    for index in 0..cli.prompts {
        let prompt = synthetic_prompt(cli.prompt_tokens, SEED, index);
        let payload = match engine {
            Engine::LlamaCpp(_) => json!({
                "prompt": prompt,
                "max_tokens": cli.answer_tokens,
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.0,
                "top_k": 1,
                "repeat_penalty": 1.0,
                "ignore_eos": false,
                "cache_prompt": false,
            }),
            // What the node's vLLM API sends (`api::request_body`).
            Engine::Vllm(e) => json!({
                "model": e.model,
                "prompt": prompt,
                "max_tokens": cli.answer_tokens,
                "stream": true,
                "stream_options": {"include_usage": true},
                "return_token_ids": true,
                "temperature": 0.0,
                "repetition_penalty": 1.0,
                "skip_special_tokens": false,
            }),
        };
        writeln!(lines, "{}", json!({ "payload": payload }))?;
    }
    write_file(dir, "aiperf-prompts.jsonl", &lines)
}

/// Keeps every thread of process `pid` on `cpu` (and its children, which
/// inherit it).
fn pin(pid: u32, cpu: usize) -> Result<()> {
    let status = Command::new("taskset")
        .args(["--all-tasks", "--pid", "--cpu-list"])
        .args([cpu.to_string(), pid.to_string()])
        .stdout(Stdio::null())
        .status()
        .context("cannot run taskset (util-linux)")?;
    if !status.success() {
        bail!("taskset could not pin process {pid} to CPU {cpu} ({status})");
    }
    Ok(())
}

/// The node configuration both netdiv ways use under `load`: for the
/// concurrency load, `--concurrency` requests open; for the rate load, as
/// many as the engine runs (`--slots`, at least `--concurrency`), since
/// AIPerf's arrivals are not held back either (a node that kept fewer
/// open would hold a burst's later prompts in the QDL, in netdiv's TTFT
/// alone).
fn node_config(cli: &Cli, engine: &Engine, load: Load) -> FileConfig {
    let max_in_flight = match load {
        Load::Concurrency => cli.concurrency,
        Load::Rate => cli.slots.max(cli.concurrency),
    };
    FileConfig {
        benchmark: Some("llama2-70b".into()),
        backend: Some(BackendKind::Openai),
        openai: OpenaiConfig {
            url: Some(engine.url().to_string()),
            api: engine.api(),
            max_tokens: Some(cli.answer_tokens),
            max_in_flight,
            ..OpenaiConfig::default()
        },
        ..FileConfig::default()
    }
}

/// A node (and its config file, for `--sut local`) per load.
struct LoadNode {
    file: PathBuf,
    node: NodeProcess,
}

impl LoadNode {
    fn start(cli: &Cli, engine: &Engine, dir: &Path, load: Load) -> Result<LoadNode> {
        let name = format!("aiperf-bench-{load:?}").to_lowercase();
        let file = write_file(
            dir,
            &format!("{name}.toml"),
            &node_toml(&node_config(cli, engine, load))?,
        )?;
        let path = file.to_str().context("utf-8 path")?;
        let node = NodeProcess::start(&name, None, &["--transport", "grpc", "--config", path])?;
        Ok(LoadNode { file, node })
    }
}

/// The two loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    Rate,
    Concurrency,
}

/// What one run needs besides the tool and the load.
struct Setup<'a> {
    cli: &'a Cli,
    dir: &'a Path,
    engine: &'a Engine,
    aiperf: &'a Aiperf,
    aiperf_prompts: &'a Path,
    rate_node: &'a LoadNode,
    concurrency_node: &'a LoadNode,
}

impl Setup<'_> {
    fn run(&self, tool: Tool, load: Load, round: usize) -> Result<Figures> {
        let cli = self.cli;
        let dir = self
            .dir
            .join(format!("{tool:?}-{load:?}-{round}").to_lowercase());
        std::fs::create_dir_all(&dir)?;
        if tool == Tool::Aiperf {
            let flags: Vec<String> = match load {
                Load::Rate => vec![
                    "--request-rate".into(),
                    cli.rate.to_string(),
                    "--request-count".into(),
                    cli.requests.to_string(),
                ],
                Load::Concurrency => vec![
                    "--concurrency".into(),
                    cli.concurrency.to_string(),
                    "--request-count".into(),
                    cli.prompts.to_string(),
                ],
            };
            let export = self
                .aiperf
                .profile(self.engine, self.aiperf_prompts, &dir, &flags)?;
            return aiperf_figures(&export);
        }
        let (scenario, conf) = match load {
            Load::Rate => (
                "Server",
                UserConf::new()
                    .set("*.Server.target_qps", cli.rate)
                    .set("*.Server.min_duration", 0)
                    .set("*.Server.min_query_count", cli.requests),
            ),
            Load::Concurrency => (
                "Offline",
                UserConf::new()
                    .set("*.Offline.target_qps", 1)
                    .set("*.Offline.min_duration", 0)
                    .set("*.Offline.min_query_count", cli.prompts),
            ),
        };
        let node = match load {
            Load::Rate => self.rate_node,
            Load::Concurrency => self.concurrency_node,
        };
        let sut: Vec<String> = match tool {
            Tool::NetdivQdl => vec![
                "--sut-node".into(),
                format!(
                    "grpc://{}",
                    node.node.grpc.context("the node's gRPC address")?
                ),
            ],
            _ => vec![
                "--sut".into(),
                "local".into(),
                "--node-config".into(),
                node.file.display().to_string(),
            ],
        };
        let flags = llama2_prompt_flags(
            &dir,
            scenario,
            &conf,
            (cli.prompt_tokens, SEED, cli.prompts),
            &sut,
        )?;
        let run = loadgen(&dir, &flags, Duration::from_secs(900))?;
        let measure = token_measure(&run, scenario)
            .with_context(|| format!("{} in {}", tool.name(), dir.display()))?;
        Ok(Figures {
            ttft_p50: measure.ttft_p50_ms,
            ttft_p99: measure.ttft_p99_ms,
            tpot_p50: measure.tpot_p50_ms,
            tpot_p99: measure.tpot_p99_ms,
            tokens_per_s: measure.tokens_per_s,
            requests_per_s: measure.samples_per_s,
            errors: 0.0,
        })
    }
}

/// The median of one figure over the runs, and half its spread (max -
/// min) as a percentage of the median; `None` for a median of 0.
fn summarize(values: &[f64]) -> (f64, Option<f64>) {
    let mid = median(values);
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    (mid, (mid != 0.0).then(|| 50.0 * (max - min) / mid))
}

/// The table of one load: a row per figure, a column per tool, then
/// netdiv direct against AIPerf.
fn table(out: &mut String, rows: &[Row], runs: &[[Figures; 3]]) {
    let names = TOOLS.map(Tool::name);
    let _ = writeln!(
        out,
        "| | {} | {} | {} | direct / AIPerf |\n|---|---|---|---|---|",
        names[0], names[1], names[2]
    );
    for (label, read) in rows {
        let mut medians = [0.0; 3];
        let _ = write!(out, "| {label} |");
        for (t, median) in medians.iter_mut().enumerate() {
            let values: Vec<f64> = runs.iter().map(|r| read(&r[t])).collect();
            let (mid, spread) = summarize(&values);
            *median = mid;
            match spread {
                Some(spread) => write!(out, " {mid:.2} (±{spread:.0} %) |"),
                None => write!(out, " {mid:.2} |"),
            }
            .expect("writing to a String");
        }
        let ratio = medians[1] / medians[0];
        match ratio.is_finite() {
            true => writeln!(out, " {ratio:.3} |"),
            false => writeln!(out, " - |"),
        }
        .expect("writing to a String");
    }
}

fn bench(mut cli: Cli) -> Result<String> {
    if cli.quick {
        (cli.prompts, cli.requests, cli.rate, cli.runs) = (32, 100, 10.0, 1);
    }
    // Before any pinning, which would show one CPU.
    let machine = machine_description();
    let aiperf = Aiperf::install()?;
    let engine = Engine::start(&cli)?;
    if cli.pin {
        engine.pin(0)?;
        pin(std::process::id(), 1)?;
    }
    let dir = test_dir("aiperf-bench")?;
    let prompts = aiperf_prompts(&cli, &engine, &dir)?;
    let rate_node = LoadNode::start(&cli, &engine, &dir, Load::Rate)?;
    let concurrency_node = LoadNode::start(&cli, &engine, &dir, Load::Concurrency)?;
    let setup = Setup {
        cli: &cli,
        dir: &dir,
        engine: &engine,
        aiperf: &aiperf,
        aiperf_prompts: &prompts,
        rate_node: &rate_node,
        concurrency_node: &concurrency_node,
    };
    // Warm the engine up: every prompt once, untimed.
    setup.run(Tool::NetdivDirect, Load::Concurrency, 0)?;
    let mut rate = Vec::new();
    let mut concurrency = Vec::new();
    for round in 1..=cli.runs {
        let mut by_tool = [[Figures::default(); 3]; 2];
        for (t, tool) in TOOLS.iter().enumerate() {
            by_tool[0][t] = setup.run(*tool, Load::Rate, round)?;
            by_tool[1][t] = setup.run(*tool, Load::Concurrency, round)?;
            eprintln!(
                "aiperf-bench: run {round}, {}: rate {:?}, concurrency {:.0} tokens/s",
                tool.name(),
                by_tool[0][t],
                by_tool[1][t].tokens_per_s
            );
        }
        rate.push(by_tool[0]);
        concurrency.push(by_tool[1]);
    }

    let mut out = String::new();
    writeln!(out, "{machine}")?;
    writeln!(
        out,
        "{}; {} prompts of {} tokens, \
         answers of {} tokens, the same ids and sampling from both tools; median of {} runs \
         each, taken in turn (± half the spread between runs); {}.\n",
        engine.describe(&cli),
        cli.prompts,
        cli.prompt_tokens,
        cli.answer_tokens,
        cli.runs,
        match cli.pin {
            true => "the engine pinned to CPU 0, the tools to CPU 1",
            false => "the engine and the tools share the CPUs",
        }
    )?;
    writeln!(
        out,
        "Rate: {} requests at {}/s, Poisson arrivals (AIPerf --request-rate; netdiv Server \
         through a node with max_in_flight = {}).\n",
        cli.requests,
        cli.rate,
        cli.slots.max(cli.concurrency)
    )?;
    table(&mut out, &RATE_ROWS, &rate);
    writeln!(
        out,
        "\nConcurrency: {} requests open, each prompt once (AIPerf --concurrency; netdiv \
         Offline through a node with max_in_flight = {}).\n",
        cli.concurrency, cli.concurrency
    )?;
    table(&mut out, &RATE_ROWS[5..], &concurrency);
    Ok(out)
}

fn main() -> ExitCode {
    let cli = <Cli as clap::Parser>::parse();
    finish_benchmark("aiperf-bench", bench(cli))
}
