//! `token-tax`: what the network costs an LLM benchmark's token latencies.
//!
//! Runs llama2-70b with the sut-node's synthetic LLM backend (prefill per
//! prompt token, one decode step per output token, continuous batching)
//! three ways, side by side in one run, `loadgen-node` a real process
//! each time:
//!
//! * in-process: `--sut local` with the same node configuration and as
//!   many devices as there are nodes;
//! * through the QDL to N local sut-nodes over gRPC;
//! * the same over QUIC (TLS 1.3).
//!
//! For Offline it prints tokens per second; for Server (at a fraction of
//! the backend's capacity) completed tokens per second and the p99 time to
//! first token and time per output token, then the tax of each network
//! setup against in-process. Last, it searches for the highest Server QPS
//! that is VALID over gRPC against mlperf.conf's bounds (TTFT p99 2 s,
//! TPOT p99 200 ms).
//!
//! Usage: `cargo run --release -p netdiv-tests --bin token-tax`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use netdiv_tests::bench::{
    finish_benchmark, machine_description, median, token_measure, TokenMeasure,
};
use netdiv_tests::configs::{node_toml, UserConf};
use netdiv_tests::network_run::{loadgen, BenchClusters, Setup};
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};
use sut_node::backend::synthetic_llm::LlmConfig;
use sut_node::config::FileConfig;

/// Prints markdown tables of the token network tax and the highest VALID
/// llama2-70b Server QPS. NETDIV_LOADGEN_NODE / NETDIV_SUT_NODE use
/// prebuilt binaries.
#[derive(Debug, clap::Parser)]
#[command(name = "token-tax")]
struct Cli {
    /// min_duration of every run, in milliseconds.
    #[arg(long, default_value_t = 6000)]
    duration_ms: u64,
    /// Runs of each setup (interleaved); the median is reported.
    #[arg(long, default_value_t = 2)]
    repeat: usize,
    /// Prefill time per prompt token, in microseconds (a prefill stalls
    /// the device's decode step it joins).
    #[arg(long, default_value_t = 1.0)]
    prefill_us: f64,
    /// One decode step (time per output token), in microseconds.
    #[arg(long, default_value_t = 1000.0)]
    decode_us: f64,
    /// Sequences a device runs at once.
    #[arg(long, default_value_t = 64)]
    max_sequences: usize,
    /// Tokens per answer (fixed, so the capacity is known).
    #[arg(long, default_value_t = 64)]
    output_tokens: u32,
    /// sut-nodes (one device each); in-process gets as many devices.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Server load as a fraction of the backend's decode capacity.
    #[arg(long, default_value_t = 0.5)]
    server_load: f64,
    /// Steps of the highest-VALID-QPS search (0: skip it).
    #[arg(long, default_value_t = 6)]
    search_steps: usize,
    /// Only 1 run each, 3 s long, 3 search steps (a smoke run).
    #[arg(long)]
    quick: bool,
}

/// What one run measured.
type Measure = TokenMeasure;

impl Cli {
    /// Answers per second the decode steps allow: every device keeps
    /// `max_sequences` answers of `output_tokens` steps going (prefills
    /// lengthen steps, so the real capacity is lower).
    fn capacity(&self) -> f64 {
        let answer_s = self.output_tokens as f64 * self.decode_us / 1e6;
        self.nodes as f64 * self.max_sequences as f64 / answer_s
    }

    fn node_config(&self, devices: usize) -> FileConfig {
        FileConfig {
            benchmark: Some("llama2-70b".into()),
            llm: LlmConfig {
                prefill_us_per_token: self.prefill_us,
                decode_us_per_token: self.decode_us,
                max_sequences: self.max_sequences,
                devices,
                output_tokens: Some(self.output_tokens),
                ..LlmConfig::default()
            },
            ..FileConfig::default()
        }
    }

    fn user_conf(&self, server_qps: f64) -> UserConf {
        UserConf::new()
            .set("*.*.min_duration", self.duration_ms)
            .set(
                "*.Offline.target_qps",
                format!("{:.0}", self.capacity() * 1.5),
            )
            .set("*.Offline.min_query_count", 1)
            .set("*.Server.target_qps", format!("{server_qps:.1}"))
            .set("*.Server.min_query_count", 100)
    }
}

fn run_once(
    cli: &Cli,
    dir: &std::path::Path,
    setup: Setup,
    scenario: &str,
    server_qps: f64,
    clusters: &BenchClusters,
) -> Result<Measure> {
    let run_dir = test_dir(&format!("token-tax-{}-{scenario}", setup.name()))?;
    let conf = write_file(
        &run_dir,
        "user.conf",
        &cli.user_conf(server_qps).to_string(),
    )?;
    let mut args: Vec<String> = [
        "--scenario",
        scenario,
        "--benchmark",
        "llama2-70b",
        "--total-sample-count",
        "2048",
        "--performance-sample-count",
        "2048",
        "--no-trace",
        "--progress",
        "never",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match clusters.flags(setup) {
        Some(flags) => args.extend(flags),
        None => {
            let config = cli.node_config(cli.nodes);
            let path = write_file(dir, "in-process.toml", &node_toml(&config)?)?;
            args.extend([
                "--sut".into(),
                "local".into(),
                "--node-config".into(),
                path.display().to_string(),
            ]);
        }
    }
    let timeout = Duration::from_millis(cli.duration_ms * 4 + 60_000);
    let run = loadgen(&run_dir, &args, timeout)?;
    token_measure(&run, scenario)
        .with_context(|| format!("{} {scenario} in {}", setup.name(), run_dir.display()))
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.repeat = 1;
        cli.duration_ms = 3000;
        cli.search_steps = cli.search_steps.min(3);
    }
    finish_benchmark("token-tax", bench(&cli))
}

fn percent_change(base: f64, other: f64) -> f64 {
    (other - base) / base * 100.0
}

fn tax_rows(cli: &Cli, dir: &std::path::Path, clusters: &BenchClusters) -> Result<String> {
    let mut rows = String::new();
    let server_qps = cli.capacity() * cli.server_load;
    for scenario in ["Offline", "Server"] {
        let mut runs: Vec<Vec<Measure>> = vec![Vec::new(); Setup::ALL.len()];
        for round in 0..cli.repeat {
            for (i, setup) in Setup::ALL.iter().enumerate() {
                eprintln!(
                    "token-tax: {scenario} {} (run {}/{})",
                    setup.name(),
                    round + 1,
                    cli.repeat
                );
                runs[i].push(run_once(cli, dir, *setup, scenario, server_qps, clusters)?);
            }
        }
        let med: Vec<Measure> = runs
            .iter()
            .map(|r| {
                let m = |f: fn(&Measure) -> f64| median(&r.iter().map(f).collect::<Vec<_>>());
                Measure {
                    tokens_per_s: m(|x| x.tokens_per_s),
                    ttft_p99_ms: m(|x| x.ttft_p99_ms),
                    tpot_p99_ms: m(|x| x.tpot_p99_ms),
                    valid: r.iter().all(|x| x.valid),
                    ..Measure::default()
                }
            })
            .collect();
        let base = med[0];
        let mut row = format!("| {scenario} |");
        for m in &med {
            if scenario == "Offline" {
                write!(row, " {:.0} |", m.tokens_per_s)?;
            } else {
                write!(
                    row,
                    " {:.0} / {:.2} / {:.3}{} |",
                    m.tokens_per_s,
                    m.ttft_p99_ms,
                    m.tpot_p99_ms,
                    if m.valid { "" } else { " INVALID" }
                )?;
            }
        }
        for m in &med[1..] {
            if scenario == "Offline" {
                write!(
                    row,
                    " {:+.2}% |",
                    percent_change(base.tokens_per_s, m.tokens_per_s)
                )?;
            } else {
                write!(
                    row,
                    " {:+.2}% / {:+.2} ms / {:+.3} ms |",
                    percent_change(base.tokens_per_s, m.tokens_per_s),
                    m.ttft_p99_ms - base.ttft_p99_ms,
                    m.tpot_p99_ms - base.tpot_p99_ms
                )?;
            }
        }
        eprintln!("{row}");
        rows.push_str(&row);
        rows.push('\n');
    }
    Ok(rows)
}

/// Searches the highest VALID Server QPS over gRPC: up by half again from
/// half the decode capacity while VALID, then bisects between the highest
/// VALID and the lowest INVALID probe.
fn highest_valid_qps(cli: &Cli, dir: &std::path::Path, clusters: &BenchClusters) -> Result<String> {
    let mut valid: Option<(f64, Measure)> = None;
    let mut invalid: Option<f64> = None;
    let mut qps = cli.capacity() * 0.5;
    let mut probes = String::new();
    for step in 0..cli.search_steps {
        eprintln!("token-tax: search step {} at {qps:.1} QPS", step + 1);
        let m = run_once(cli, dir, Setup::Grpc, "Server", qps, clusters)?;
        write!(
            probes,
            "{qps:.1} {}; ",
            if m.valid { "VALID" } else { "INVALID" }
        )?;
        if m.valid {
            valid = Some((qps, m));
        } else {
            invalid = Some(qps);
        }
        qps = match (valid, invalid) {
            (Some((low, _)), None) => low * 1.5,
            (low, Some(high)) => (low.map_or(0.0, |(q, _)| q) + high) / 2.0,
            (None, None) => unreachable!("a probe was made"),
        };
    }
    let mut out = String::new();
    match valid {
        Some((qps, m)) => writeln!(
            out,
            "Highest VALID llama2-70b Server QPS over gRPC on {} node(s): {qps:.1} \
             ({:.0} tokens/s, TTFT p99 {:.2} ms, TPOT p99 {:.3} ms). Probes: {probes}",
            cli.nodes, m.tokens_per_s, m.ttft_p99_ms, m.tpot_p99_ms
        )?,
        None => writeln!(out, "No probe was VALID. Probes: {probes}")?,
    }
    Ok(out)
}

fn bench(cli: &Cli) -> Result<String> {
    if cli.repeat == 0 || cli.nodes == 0 || cli.max_sequences == 0 || cli.output_tokens < 2 {
        bail!(
            "--repeat, --nodes and --max-sequences must be at least 1, --output-tokens at least 2"
        );
    }
    loadgen_node_bin()?;
    let dir = test_dir("token-tax")?;
    let names: Vec<String> = (1..=cli.nodes).map(|i| format!("token-node-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let clusters = BenchClusters::start(&dir, &names, &cli.node_config(1), &[])?;
    let rows = tax_rows(cli, &dir, &clusters)?;
    let search = if cli.search_steps > 0 {
        highest_valid_qps(cli, &dir, &clusters)?
    } else {
        String::new()
    };
    let mut out = String::new();
    writeln!(
        out,
        "Backend: llama2-70b, {} node(s) x 1 synthetic LLM device: {} us per prompt token, {} us per decode step, \
         {} sequences at once, {} tokens per answer (capacity {:.0} answers/s); Server at {:.0}% of capacity; \
         min_duration {} ms; median of {} run(s).",
        cli.nodes,
        cli.prefill_us,
        cli.decode_us,
        cli.max_sequences,
        cli.output_tokens,
        cli.capacity(),
        cli.server_load * 100.0,
        cli.duration_ms,
        cli.repeat
    )?;
    writeln!(out, "{}", machine_description())?;
    writeln!(out)?;
    writeln!(
        out,
        "Offline cells: tokens/s. Server cells: completed tokens/s / TTFT p99 (ms) / TPOT p99 (ms). \
         Tax: change against in-process."
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| scenario | in-process | gRPC | QUIC | gRPC tax | QUIC tax |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    out.push_str(&rows);
    writeln!(out)?;
    out.push_str(&search);
    Ok(out)
}
