//! `long-answer-rehearsal`: deepseek-r1 at the length of its answers, as a
//! loaded GPU makes them. Synthetic-LLM nodes decode at `--decode-ms` per
//! token (40 ms: a GPU running a full batch of a 671B model) with the
//! data set's answer lengths (about 3,890 tokens on average, up to
//! 20,000), so answers take minutes and a run's longest one a quarter of
//! an hour. Offline, then Server at `--server-load` of the nodes'
//! capacity, through the QDL with the default node timeout (60 s): each
//! must be VALID with no node failed. Reported: run times, the answers'
//! lengths and times, and the LoadGen node's peak memory against the
//! samples and tokens it held.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin long-answer-rehearsal`
//! (NETDIV_LOADGEN_NODE / NETDIV_SUT_NODE use prebuilt binaries).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadgen_node::run_record::RunRecord;
use netdiv_tests::bench::{finish_benchmark, machine_description, token_measure};
use netdiv_tests::configs::UserConf;
use netdiv_tests::network_run::{loadgen, Cluster, LoadgenRun};
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};
use sut_node::backend::synthetic_llm::LlmConfig;
use sut_node::config::FileConfig;

#[derive(Clone, Debug, clap::Parser)]
#[command(name = "long-answer-rehearsal")]
struct Cli {
    /// sut-nodes.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Milliseconds per output token (one decode step).
    #[arg(long, default_value_t = 40.0)]
    decode_ms: f64,
    /// Sequences a node runs at once.
    #[arg(long, default_value_t = 256)]
    sequences: usize,
    /// Offline samples (the data set's 4,388 at most).
    #[arg(long, default_value_t = 1024)]
    offline_samples: usize,
    /// Server queries (early stopping needs about 460 for TTFT and TPOT).
    #[arg(long, default_value_t = 500)]
    server_queries: usize,
    /// Server rate as a share of the nodes' capacity (their sequences over
    /// a mean answer's time).
    #[arg(long, default_value_t = 0.5)]
    server_load: f64,
}

/// deepseek-r1's mean answer, in tokens (`netdiv_proto::benchmark`).
const MEAN_ANSWER_TOKENS: f64 = 3890.0;

impl Cli {
    fn node_config(&self) -> FileConfig {
        FileConfig {
            benchmark: Some("deepseek-r1".into()),
            llm: LlmConfig {
                prefill_us_per_token: 50.0,
                decode_us_per_token: self.decode_ms * 1e3,
                max_sequences: self.sequences,
                ..LlmConfig::default()
            },
            ..FileConfig::default()
        }
    }

    /// Answers per second of every node, for a mean answer.
    fn capacity(&self) -> f64 {
        (self.nodes * self.sequences) as f64 / (MEAN_ANSWER_TOKENS * self.decode_ms / 1e3)
    }
}

/// One run's row: what it took and what the LoadGen node held (`qps`:
/// the Server rate, for the samples in flight at once).
fn row(cli: &Cli, run: &LoadgenRun, scenario: &str, samples: usize, qps: f64) -> Result<String> {
    let m = token_measure(run, scenario)?;
    let record = RunRecord::read_in(&run.logs)?.context("no run record")?;
    let accuracy = run.accuracy()?;
    let lengths: Vec<i64> = accuracy.iter().filter_map(|e| e.token_count).collect();
    let (mean, longest) = (
        lengths.iter().sum::<i64>() as f64 / lengths.len().max(1) as f64,
        lengths.iter().copied().max().unwrap_or(0),
    );
    let rss_mib = run.max_rss_bytes.unwrap_or(0) as f64 / (1 << 20) as f64;
    // Offline: every sequence of every node, while samples wait; Server:
    // the rate times a mean answer's time (Little's law).
    let sequences = cli.nodes * cli.sequences;
    let in_flight = match scenario {
        "Server" => (qps * mean * cli.decode_ms / 1e3).round() as usize,
        _ => sequences,
    }
    .min(sequences)
    .min(samples);
    let mut out = String::new();
    write!(
        out,
        "| {scenario} | {samples} | {} | {:.1} min | {mean:.0} / {longest} | {:.1} min / {:.1} min | {:.0} | {} | {} / {} | {rss_mib:.0} MiB, about {in_flight} samples in flight, answers up to {:.0} KiB |",
        if m.valid { "VALID" } else { "INVALID" },
        run.wall.as_secs_f64() / 60.0,
        mean * cli.decode_ms / 60e3,
        longest as f64 * cli.decode_ms / 60e3,
        m.tokens_per_s,
        if scenario == "Server" {
            format!("TTFT p99 {:.0} ms, TPOT p99 {:.1} ms", m.ttft_p99_ms, m.tpot_p99_ms)
        } else {
            "-".into()
        },
        record.qdl.nodes_failed,
        record.qdl.resent,
        longest as f64 * 4.0 / 1024.0,
    )?;
    out.push('\n');
    Ok(out)
}

fn run(cli: &Cli, cluster: &Cluster, scenario: &str, samples: usize, qps: f64) -> Result<String> {
    let dir = test_dir(&format!("long-answers-{scenario}"))?;
    let conf = UserConf::new()
        .set("*.*.min_duration", 60_000)
        .set("deepseek-r1.Offline.min_query_count", samples)
        .set("*.Offline.target_qps", 1)
        .set("*.Server.target_qps", format!("{qps:.3}"))
        .set("*.Server.min_query_count", samples)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let conf = write_file(&dir, "user.conf", &conf.to_string())?;
    let loaded = samples.min(4388).to_string();
    let mut args: Vec<String> = [
        "--scenario",
        scenario,
        "--benchmark",
        "deepseek-r1",
        "--total-sample-count",
        &loaded,
        "--performance-sample-count",
        &loaded,
        "--no-trace",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(cluster.loadgen_flags());
    eprintln!("long-answer-rehearsal: {scenario}, {samples} samples");
    let result = loadgen(&dir, &args, Duration::from_secs(3 * 3600))?;
    result.expect_success()?;
    row(cli, &result, scenario, samples, qps)
}

fn bench(cli: &Cli) -> Result<String> {
    if cli.nodes == 0 || cli.sequences == 0 || cli.decode_ms.is_nan() || cli.decode_ms <= 0.0 {
        bail!("--nodes, --sequences and --decode-ms must be above 0");
    }
    loadgen_node_bin()?;
    let dir = test_dir("long-answers")?;
    let names: Vec<String> = (1..=cli.nodes).map(|i| format!("r1-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cluster = Cluster::start(&dir, "grpc", &names, &cli.node_config(), &[])?;
    let mut out = format!(
        "deepseek-r1 over {} synthetic-LLM nodes, {} sequences each at {} ms per token (the \
         data set's answer lengths: about {MEAN_ANSWER_TOKENS} tokens, up to 20,000), gRPC, \
         the default node timeout (60 s). {}\n\n| scenario | samples | result | run time | \
         answer tokens mean / longest | answer time mean / longest | output tokens/s | \
         latencies | nodes failed / samples re-sent | LoadGen node peak RSS |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        cli.nodes,
        cli.sequences,
        cli.decode_ms,
        machine_description()
    );
    out.push_str(&run(cli, &cluster, "Offline", cli.offline_samples, 1.0)?);
    let qps = cli.capacity() * cli.server_load;
    out.push_str(&run(cli, &cluster, "Server", cli.server_queries, qps)?);
    Ok(out)
}

fn main() -> ExitCode {
    use clap::Parser;
    finish_benchmark("long-answer-rehearsal", bench(&Cli::parse()))
}
