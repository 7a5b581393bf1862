//! `llm-engine-bench`: what the network path costs a real serving engine.
//! One llama.cpp server (`deploy/llm/llama-cpp.sh`, the tiny Llama model)
//! is driven two ways in one run, with the same prompts, answer length
//! and requests open at once:
//!
//! * directly: this process streams completions from the engine with the
//!   node's own HTTP client, as many at once as the node would keep open,
//!   and times each answer's first token and last token;
//! * through netdiv: `loadgen-node run` (Offline, then Server at the same
//!   arrival rate as the direct Poisson run) → QDL → gRPC → a sut-node
//!   with backend openai → the same engine; the figures are the LoadGen's.
//!
//! It prints tokens/s, time to first token (TTFT) and time per output
//! token (TPOT, `(latency - TTFT) / (n_tokens - 1)`, as the LoadGen
//! computes it), and the ratios of the two.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin llm-engine-bench`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use netdiv_tests::bench::{finish_benchmark, machine_description};
use netdiv_tests::configs::{node_toml, UserConf};
use netdiv_tests::llama::{llama_cpp_files, synthetic_prompt, LlamaServer};
use netdiv_tests::network_run::{loadgen, LoadgenRun};
use netdiv_tests::sut_client::NodeProcess;
use netdiv_tests::{test_dir, write_file};
use sut_node::backend::openai::api::Generation;
use sut_node::backend::openai::client::EngineClient;
use sut_node::backend::openai::OpenaiConfig;
use sut_node::backend::BackendKind;
use sut_node::config::FileConfig;

/// Prints the direct-vs-netdiv table of one llama.cpp server.
#[derive(Debug, clap::Parser)]
#[command(name = "llm-engine-bench")]
struct Cli {
    /// Distinct prompts (the Offline run answers each once).
    #[arg(long, default_value_t = 256)]
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
    /// Requests open to the engine at once (the node's max_in_flight).
    #[arg(long, default_value_t = 8)]
    in_flight: usize,
    /// Server: arrivals per second.
    #[arg(long, default_value_t = 20.0)]
    server_qps: f64,
    /// Server: queries.
    #[arg(long, default_value_t = 500)]
    server_queries: usize,
    /// A short run (32 prompts, 100 Server queries at 10/s).
    #[arg(long)]
    quick: bool,
}

const SEED: u64 = 31;

/// One answer's times.
struct Timing {
    ttft: Duration,
    total: Duration,
    tokens: usize,
}

/// What a way of driving the engine measured.
#[derive(Default)]
struct Figures {
    tokens_per_second: f64,
    ttft_p50_ms: f64,
    ttft_p99_ms: f64,
    tpot_p50_ms: f64,
    tpot_p99_ms: f64,
}

/// The value at quantile `q` of `values` (nearest rank), in ms.
fn percentile_ms(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1] * 1e3
}

/// Streams `count` answers from the engine, prompt `i % prompts` for
/// answer `i`, at most `in_flight` at once; `gaps` (Server) spaces the
/// requests' starts.
fn drive(
    client: &Arc<EngineClient>,
    cli: &Cli,
    count: usize,
    gaps: Option<&[Duration]>,
) -> Result<Figures> {
    let started = Instant::now();
    let timings: Vec<Timing> = client.block_on(async {
        let slots = Arc::new(tokio::sync::Semaphore::new(cli.in_flight));
        let mut answers = Vec::with_capacity(count);
        let mut next = Instant::now();
        for i in 0..count {
            if let Some(gaps) = gaps {
                next += gaps[i];
                tokio::time::sleep_until(next.into()).await;
            }
            let slot = slots.clone().acquire_owned().await?;
            let client = client.clone();
            let ids = synthetic_prompt(cli.prompt_tokens, SEED, i % cli.prompts);
            answers.push(client.clone().spawn(async move {
                let _slot = slot;
                let start = Instant::now();
                let mut first = None;
                let tokens = client
                    .answer(&ids, |_| first = Some(start.elapsed()), |_| {})
                    .await?;
                anyhow::Ok(Timing {
                    ttft: first.context("no first token")?,
                    total: start.elapsed(),
                    tokens: tokens.len(),
                })
            }));
        }
        let mut timings = Vec::with_capacity(count);
        for answer in answers {
            timings.push(answer.await??);
        }
        anyhow::Ok(timings)
    })?;
    let wall = started.elapsed().as_secs_f64();
    let tokens: usize = timings.iter().map(|t| t.tokens).sum();
    let mut ttft: Vec<f64> = timings.iter().map(|t| t.ttft.as_secs_f64()).collect();
    let mut tpot: Vec<f64> = timings
        .iter()
        .filter(|t| t.tokens > 1)
        .map(|t| (t.total - t.ttft).as_secs_f64() / (t.tokens - 1) as f64)
        .collect();
    Ok(Figures {
        tokens_per_second: tokens as f64 / wall,
        ttft_p50_ms: percentile_ms(&mut ttft, 0.5),
        ttft_p99_ms: percentile_ms(&mut ttft, 0.99),
        tpot_p50_ms: percentile_ms(&mut tpot, 0.5),
        tpot_p99_ms: percentile_ms(&mut tpot, 0.99),
    })
}

/// Exponential gaps of mean 1/qps (a Poisson process), seeded.
fn poisson_gaps(qps: f64, count: usize) -> Vec<Duration> {
    let mut state = SEED;
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let uniform = ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            Duration::from_secs_f64(-uniform.ln() / qps)
        })
        .collect()
}

fn loadgen_run(
    dir: &Path,
    cli: &Cli,
    scenario: &str,
    conf: UserConf,
    node: &NodeProcess,
) -> Result<LoadgenRun> {
    let conf = write_file(dir, "user.conf", &conf.to_string())?;
    let prompts = cli.prompts.to_string();
    let args: Vec<String> = [
        "--scenario",
        scenario,
        "--benchmark",
        "llama2-70b",
        "--sample-shape",
        &cli.prompt_tokens.to_string(),
        "--sample-dtype",
        "int32",
        "--sample-seed",
        &SEED.to_string(),
        "--total-sample-count",
        &prompts,
        "--performance-sample-count",
        &prompts,
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
        "--progress",
        "never",
        "--sut-node",
        &format!("grpc://{}", node.grpc.context("gRPC address")?),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = loadgen(dir, &args, Duration::from_secs(900))?;
    run.expect_success()?;
    Ok(run)
}

fn detail_ms(run: &LoadgenRun, key: &str) -> Result<f64> {
    Ok(detail_f64(run, key)? / 1e6)
}

fn detail_f64(run: &LoadgenRun, key: &str) -> Result<f64> {
    let detail = run.detail()?;
    detail
        .value(key)
        .and_then(|v| v.as_f64())
        .with_context(|| format!("no {key} in {}", run.logs.display()))
}

fn run(mut cli: Cli) -> Result<String> {
    if cli.quick {
        (cli.prompts, cli.server_queries, cli.server_qps) = (32, 100, 10.0);
    }
    let files = llama_cpp_files()?.context("llama.cpp could not be built")?;
    let engine = LlamaServer::start(&files, cli.slots)?;
    let config = OpenaiConfig {
        url: Some(engine.url.clone()),
        max_in_flight: cli.in_flight,
        ..OpenaiConfig::default()
    };
    let generation = Generation {
        model: String::new(),
        max_tokens: cli.answer_tokens,
        ignore_eos: false,
        stop_token_ids: Vec::new(),
        // As a node asks: no prompt reused across requests.
        cache_prompt: false,
    };
    let client = Arc::new(EngineClient::new(
        &engine.url,
        config.api,
        &config,
        generation,
    )?);
    // Warm up: every prompt once, untimed.
    drive(&client, &cli, cli.prompts, None)?;
    let direct_offline = drive(&client, &cli, cli.prompts, None)?;
    let gaps = poisson_gaps(cli.server_qps, cli.server_queries);
    let direct_server = drive(&client, &cli, cli.server_queries, Some(&gaps))?;

    let dir = test_dir("llm-engine-bench")?;
    let node_config = FileConfig {
        benchmark: Some("llama2-70b".into()),
        backend: Some(BackendKind::Openai),
        openai: OpenaiConfig {
            max_tokens: Some(cli.answer_tokens),
            max_in_flight: cli.in_flight,
            ..OpenaiConfig::default()
        },
        ..FileConfig::default()
    };
    let node_file = write_file(&dir, "sut-node.toml", &node_toml(&node_config)?)?;
    let node = NodeProcess::start(
        "bench-engine",
        None,
        &[
            "--transport",
            "grpc",
            "--config",
            node_file.to_str().context("utf-8 path")?,
            "--engine-url",
            &engine.url,
        ],
    )?;
    let offline_dir = dir.join("offline");
    std::fs::create_dir_all(&offline_dir)?;
    let offline = loadgen_run(
        &offline_dir,
        &cli,
        "Offline",
        UserConf::new()
            .set("*.Offline.target_qps", 1)
            .set("*.Offline.min_duration", 0)
            .set("*.Offline.min_query_count", cli.prompts),
        &node,
    )?;
    let server_dir = dir.join("server");
    std::fs::create_dir_all(&server_dir)?;
    let server = loadgen_run(
        &server_dir,
        &cli,
        "Server",
        UserConf::new()
            .set("*.Server.target_qps", cli.server_qps)
            .set("*.Server.min_duration", 0)
            .set("*.Server.min_query_count", cli.server_queries),
        &node,
    )?;
    let through = Figures {
        tokens_per_second: detail_f64(&offline, "result_tokens_per_second")?,
        ttft_p50_ms: detail_ms(&server, "result_first_token_50.00_percentile_latency_ns")?,
        ttft_p99_ms: detail_ms(&server, "result_first_token_99.00_percentile_latency_ns")?,
        tpot_p50_ms: detail_ms(&server, "result_time_per_output_token_50.00_percentile_ns")?,
        tpot_p99_ms: detail_ms(&server, "result_time_per_output_token_99.00_percentile_ns")?,
    };
    let server_tokens = detail_f64(&server, "result_completed_tokens_per_second")?;

    let mut out = String::new();
    writeln!(out, "{}", machine_description())?;
    writeln!(
        out,
        "llama.cpp llama-server (tiny Llama, {} slots), {} prompts of {} tokens, answers of {} \
         tokens, {} requests open at once; Server: {} queries at {}/s.\n",
        cli.slots,
        cli.prompts,
        cli.prompt_tokens,
        cli.answer_tokens,
        cli.in_flight,
        cli.server_queries,
        cli.server_qps
    )?;
    writeln!(
        out,
        "| | engine directly | through netdiv (LoadGen, QDL, gRPC, sut-node) | netdiv / direct |"
    )?;
    writeln!(out, "|---|---|---|---|")?;
    let rows = [
        (
            "Offline tokens/s",
            direct_offline.tokens_per_second,
            through.tokens_per_second,
        ),
        (
            "Server tokens/s",
            direct_server.tokens_per_second,
            server_tokens,
        ),
        (
            "Server TTFT p50 (ms)",
            direct_server.ttft_p50_ms,
            through.ttft_p50_ms,
        ),
        (
            "Server TTFT p99 (ms)",
            direct_server.ttft_p99_ms,
            through.ttft_p99_ms,
        ),
        (
            "Server TPOT p50 (ms)",
            direct_server.tpot_p50_ms,
            through.tpot_p50_ms,
        ),
        (
            "Server TPOT p99 (ms)",
            direct_server.tpot_p99_ms,
            through.tpot_p99_ms,
        ),
    ];
    for (name, direct, netdiv) in rows {
        writeln!(
            out,
            "| {name} | {direct:.2} | {netdiv:.2} | {:.3} |",
            netdiv / direct
        )?;
    }
    Ok(out)
}

fn main() -> ExitCode {
    let cli = <Cli as clap::Parser>::parse();
    finish_benchmark("llm-engine-bench", run(cli))
}
