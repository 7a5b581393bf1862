//! `dispatch-bench`: how the QDL shares an LLM benchmark among nodes of
//! different speeds.
//!
//! Starts sut-nodes with the synthetic LLM backend (continuous batching,
//! one decode step per output token), one of them decoding at half the
//! others' rate, and drives them with llama2-70b prompts whose lengths are
//! drawn from the data set's length profile (the same seeds every run).
//! First each kind of node runs Offline alone, for its rate; the ideal is
//! the sum of the nodes' rates. Then, side by side in one run, each
//! dispatch policy runs Offline (output tokens per second against the
//! ideal) and Server at loads the nodes can carry together (TTFT and TPOT
//! p99; by default at half and at 70 % of their summed capacity). Last,
//! Offline over 2 to 16 equal nodes by tokens: the LoadGen node's CPU time
//! per 1,000 output tokens (the QDL's cost grows with the nodes only if
//! that does).
//!
//! Usage: `cargo run --release -p netdiv-tests --bin dispatch-bench`
//! (`-- --quick` for a smoke run).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadgen_node::run_record::RunRecord;
use netdiv_tests::bench::{finish_benchmark, machine_description, median, token_measure};
use netdiv_tests::configs::UserConf;
use netdiv_tests::network_run::{loadgen, Cluster};
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};
use sut_node::backend::synthetic_llm::LlmConfig;
use sut_node::config::FileConfig;

/// Prints a markdown table per scenario. NETDIV_LOADGEN_NODE /
/// NETDIV_SUT_NODE use prebuilt binaries.
#[derive(Clone, Debug, clap::Parser)]
#[command(name = "dispatch-bench")]
struct Cli {
    /// min_duration of every run, in milliseconds.
    #[arg(long, default_value_t = 8000)]
    duration_ms: u64,
    /// Nodes, the last of them the slow one.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// One decode step of a fast node, in microseconds.
    #[arg(long, default_value_t = 1000.0)]
    decode_us: f64,
    /// Prefill time per prompt token on every node, in microseconds
    /// (scale it with --decode-us to slow the whole timeline down, so a
    /// busy host's scheduling hiccups weigh less against the steps).
    #[arg(long, default_value_t = 1.0)]
    prefill_us: f64,
    /// How many times longer the slow node's decode step is.
    #[arg(long, default_value_t = 2.0)]
    slow_factor: f64,
    /// Sequences a node runs at once.
    #[arg(long, default_value_t = 32)]
    max_sequences: usize,
    /// Tokens per answer (fixed, so the capacity is known).
    #[arg(long, default_value_t = 64)]
    output_tokens: u32,
    /// Server loads, each a fraction of the nodes' summed capacity: one
    /// table per load (how much the policy gains depends on how often the
    /// fast nodes alone are full).
    #[arg(long, value_delimiter = ',', num_args = 1.., default_value = "0.5,0.7")]
    server_loads: Vec<f64>,
    /// Node counts of the CPU-per-token table (`--scaling` alone: skip
    /// it).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "2,4,8,16")]
    scaling: Vec<usize>,
    /// Server runs of each policy, taken in turn; the table shows their
    /// medians (TTFT p99 varies from run to run on a small machine).
    #[arg(long, default_value_t = 3)]
    server_runs: usize,
    /// 3 s runs, one Server run of each policy (a smoke run).
    #[arg(long)]
    quick: bool,
    /// Only the Server tables: no runs of a node alone, no Offline (to
    /// try a policy change at a few loads quickly).
    #[arg(long)]
    server_only: bool,
    /// Only the Offline grid: every skew of `--grid-slow-factors` with
    /// every count of `--grid-sequences`, each policy against that
    /// cell's ideal, for a full run and a small one.
    #[arg(long)]
    grid: bool,
    /// The grid's slow factors (1: four equal nodes).
    #[arg(long, value_delimiter = ',', num_args = 1.., default_value = "1,1.5,2.5,4")]
    grid_slow_factors: Vec<f64>,
    /// The grid's sequences per node.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_value = "4,32")]
    grid_sequences: Vec<usize>,
    /// The grid's small run: this many times the fleet's sequences, one
    /// Offline query (its end, where one slow answer can hold the run,
    /// weighs most).
    #[arg(long, default_value_t = 4)]
    grid_small_rounds: usize,
}

/// The policies compared: the one before token-aware dispatch first.
const POLICIES: [&str; 2] = ["least-outstanding", "tokens"];

/// What one run measured.
#[derive(Clone, Debug, Default)]
struct Measure {
    /// Server: each node's samples and TTFT p99, from the run record.
    by_node: String,
    tokens_per_s: f64,
    ttft_p99_ms: f64,
    tpot_p99_ms: f64,
    valid: bool,
    /// The LoadGen node's CPU milliseconds per 1,000 output tokens
    /// (Offline).
    cpu_ms_per_k_tokens: f64,
}

impl Cli {
    fn node_config(&self, decode_us: f64) -> FileConfig {
        FileConfig {
            benchmark: Some("llama2-70b".into()),
            llm: LlmConfig {
                prefill_us_per_token: self.prefill_us,
                decode_us_per_token: decode_us,
                max_sequences: self.max_sequences,
                output_tokens: Some(self.output_tokens),
                ..LlmConfig::default()
            },
            ..FileConfig::default()
        }
    }

    /// Answers per second of a node whose decode step is `decode_us`.
    fn answers_per_s(&self, decode_us: f64) -> f64 {
        self.max_sequences as f64 / (self.output_tokens as f64 * decode_us / 1e6)
    }

    /// Answers per second of every node together, by their decode steps.
    fn capacity(&self) -> f64 {
        (self.nodes - 1) as f64 * self.answers_per_s(self.decode_us)
            + self.answers_per_s(self.decode_us * self.slow_factor)
    }
}

fn measure(cli: &Cli, scenario: &str, qps: f64, flags: &[String], label: &str) -> Result<Measure> {
    measure_samples(cli, scenario, qps, None, flags, label)
}

/// [`measure`]; with `samples`, an Offline query of that many samples (1:
/// as many as `--duration-ms` at `qps` asks) instead of at least the
/// 4,096 in the QSL (an Offline query holds at least the QSL's count:
/// with `samples`, the QSL holds 64 or that many).
fn measure_samples(
    cli: &Cli,
    scenario: &str,
    qps: f64,
    samples: Option<u64>,
    flags: &[String],
    label: &str,
) -> Result<Measure> {
    let dir = test_dir(&format!("dispatch-bench-{label}"))?;
    let duration_ms = match samples {
        Some(n) if n > 1 => 1,
        _ => cli.duration_ms,
    };
    let mut conf = UserConf::new()
        .set("*.*.min_duration", duration_ms)
        .set("*.Offline.target_qps", format!("{qps:.0}"))
        .set("*.Offline.min_query_count", 1)
        .set("*.Server.target_qps", format!("{qps:.1}"))
        .set("*.Server.min_query_count", 100);
    let mut loaded = 4096;
    if let Some(n) = samples {
        conf = conf.set("llama2-70b.Offline.min_query_count", n);
        loaded = if n > 1 { n.min(4096) } else { 64 };
    }
    let conf = write_file(&dir, "user.conf", &conf.to_string())?;
    let loaded = loaded.to_string();
    let mut args: Vec<String> = [
        "--scenario",
        scenario,
        "--benchmark",
        "llama2-70b",
        "--total-sample-count",
        &loaded,
        "--performance-sample-count",
        &loaded,
        "--no-trace",
        "--no-report",
        "--progress",
        "never",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(flags.iter().cloned());
    let run = loadgen(
        &dir,
        &args,
        Duration::from_millis(cli.duration_ms * 6 + 60_000),
    )?;
    let m = token_measure(&run, scenario).with_context(|| label.to_string())?;
    let mut measure = Measure {
        tokens_per_s: m.tokens_per_s,
        ttft_p99_ms: m.ttft_p99_ms,
        tpot_p99_ms: m.tpot_p99_ms,
        valid: m.valid,
        ..Measure::default()
    };
    if scenario == "Offline" {
        let samples = run
            .detail()?
            .value("effective_samples_per_query")
            .and_then(|v| v.as_f64())
            .with_context(|| format!("{label}: no effective_samples_per_query"))?;
        let tokens = samples * f64::from(cli.output_tokens);
        let cpu_ms = run.cpu.context("no CPU time")?.as_secs_f64() * 1e3;
        measure.cpu_ms_per_k_tokens = cpu_ms / tokens * 1e3;
    } else {
        let record = RunRecord::read_in(&run.logs)?.context("no run record")?;
        measure.by_node = record
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "{} {} / {:.1} ms",
                    n.name,
                    n.traffic.samples_sent,
                    n.traffic.first_token.p99_us as f64 / 1e3
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
    }
    Ok(measure)
}

/// `--sut-node URL` of the first `n` nodes of `cluster`.
fn node_flags(cluster: &Cluster, n: usize) -> Vec<String> {
    cluster
        .urls()
        .into_iter()
        .take(n)
        .flat_map(|url| ["--sut-node".to_string(), url])
        .collect()
}

/// Offline by tokens over `counts` equal fast nodes: the LoadGen node's
/// CPU per 1,000 output tokens at each count.
fn cpu_scaling(cli: &Cli, counts: &[usize]) -> Result<String> {
    let largest = counts.iter().copied().max().unwrap_or(0);
    let dir = test_dir("dispatch-bench-scaling")?;
    let names: Vec<String> = (1..=largest).map(|i| format!("equal-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let nodes = Cluster::start(&dir, "grpc", &names, &cli.node_config(cli.decode_us), &[])?;
    let mut out = String::from(
        "\n| Offline by tokens, equal nodes | output tokens/s | LoadGen node CPU ms per \
         1,000 output tokens |\n|---|---|---|\n",
    );
    for &n in counts {
        eprintln!("dispatch-bench: {n} equal nodes");
        let mut flags = node_flags(&nodes, n);
        flags.extend(["--dispatch".to_string(), "tokens".to_string()]);
        let qps = n as f64 * cli.answers_per_s(cli.decode_us);
        let m = measure(cli, "Offline", qps, &flags, &format!("scaling-{n}"))?;
        writeln!(
            out,
            "| {n} | {:.0} | {:.2} |",
            m.tokens_per_s, m.cpu_ms_per_k_tokens
        )?;
    }
    Ok(out)
}

/// One cell of the Offline grid: three nodes at `--decode-us` and one
/// `slow_factor` times slower, `sequences` each: each node kind alone
/// (the ideal is their sum), then each policy on a full run and on a
/// small one. A markdown row per policy.
fn grid_cell(cli: &Cli, slow_factor: f64, sequences: usize) -> Result<String> {
    let cell = Cli {
        slow_factor,
        max_sequences: sequences,
        ..cli.clone()
    };
    let label = format!("grid-{slow_factor}-{sequences}");
    let dir = test_dir(&format!("dispatch-bench-{label}"))?;
    let fast_names: Vec<String> = (1..cell.nodes).map(|i| format!("fast-{i}")).collect();
    let fast_names: Vec<&str> = fast_names.iter().map(String::as_str).collect();
    let fast = Cluster::start(
        &dir.join("fast"),
        "grpc",
        &fast_names,
        &cell.node_config(cell.decode_us),
        &[],
    )?;
    let slow_decode = cell.decode_us * slow_factor;
    let slow = Cluster::start(
        &dir.join("slow"),
        "grpc",
        &["slow"],
        &cell.node_config(slow_decode),
        &[],
    )?;
    let alone = |cluster: &Cluster, decode: f64, what: &str| {
        eprintln!("dispatch-bench: grid {slow_factor}x, {sequences} sequences: {what} alone");
        measure_samples(
            &cell,
            "Offline",
            cell.answers_per_s(decode),
            Some(1),
            &node_flags(cluster, 1),
            &format!("{label}-{what}"),
        )
    };
    let fast_alone = alone(&fast, cell.decode_us, "fast")?;
    let slow_alone = alone(&slow, slow_decode, "slow")?;
    let ideal = (cell.nodes - 1) as f64 * fast_alone.tokens_per_s + slow_alone.tokens_per_s;
    let mut all = node_flags(&fast, cell.nodes);
    all.extend(node_flags(&slow, 1));
    let small = (cell.grid_small_rounds * cell.nodes * sequences) as u64;
    let mut out = String::new();
    for policy in POLICIES {
        eprintln!("dispatch-bench: grid {slow_factor}x, {sequences} sequences: {policy}");
        let mut flags = all.clone();
        flags.extend(["--dispatch".to_string(), policy.to_string()]);
        let full = measure_samples(
            &cell,
            "Offline",
            cell.capacity(),
            Some(1),
            &flags,
            &format!("{label}-{policy}"),
        )?;
        let short = measure_samples(
            &cell,
            "Offline",
            cell.capacity(),
            Some(small),
            &flags,
            &format!("{label}-{policy}-small"),
        )?;
        writeln!(
            out,
            "| {slow_factor}x | {sequences} | {policy} | {ideal:.0} | {:.0} ({:.1} %) | {:.0} ({:.1} %) |",
            full.tokens_per_s,
            full.tokens_per_s / ideal * 100.0,
            short.tokens_per_s,
            short.tokens_per_s / ideal * 100.0,
        )?;
    }
    Ok(out)
}

/// The Offline grid ([`grid_cell`] for every skew and sequence count).
fn grid(cli: &Cli) -> Result<String> {
    let mut out = format!(
        "Offline over {} nodes, one of them slower by the factor shown (a {:.0} µs decode \
         step on the others; prefill {} µs per prompt token; {} tokens per answer), \
         llama2-70b prompt lengths; full runs of {} ms, small runs of {} times the fleet's \
         sequences. The ideal is the sum of the nodes' rates, each measured alone. {}\n\n\
         | slow node | sequences per node | policy | ideal tokens/s | full run tokens/s (of \
         the ideal) | small run tokens/s (of the ideal) |\n|---|---|---|---|---|---|\n",
        cli.nodes,
        cli.decode_us,
        cli.prefill_us,
        cli.output_tokens,
        cli.duration_ms,
        cli.grid_small_rounds,
        machine_description()
    );
    for &sequences in &cli.grid_sequences {
        for &factor in &cli.grid_slow_factors {
            out.push_str(&grid_cell(cli, factor, sequences)?);
        }
    }
    Ok(out)
}

/// Server at `load` of the nodes' summed capacity, each policy in turn
/// `--server-runs` times: a table of their medians.
fn server_table(cli: &Cli, load: f64, all: &[String]) -> Result<String> {
    let qps = cli.capacity() * load;
    let mut out = String::new();
    writeln!(
        out,
        "\n| Server at {qps:.0} QPS ({:.0} % of the decode capacity), median of {} runs | \
         completed tokens/s | TTFT p99 (each run) | TPOT p99 | TTFT p99 vs least-outstanding | \
         last run by node: samples / TTFT p99 |",
        load * 100.0,
        cli.server_runs
    )?;
    out.push_str("|---|---|---|---|---|---|\n");
    let mut runs: Vec<Vec<Measure>> = vec![Vec::new(); POLICIES.len()];
    for run in 0..cli.server_runs.max(1) {
        for (policy, measured) in POLICIES.iter().zip(&mut runs) {
            eprintln!(
                "dispatch-bench: Server at {qps:.0} QPS, {policy}, run {}",
                run + 1
            );
            let mut flags = all.to_vec();
            flags.extend(["--dispatch".to_string(), policy.to_string()]);
            measured.push(measure(cli, "Server", qps, &flags, policy)?);
        }
    }
    let medians: Vec<[f64; 3]> = runs
        .iter()
        .map(|r| {
            let m = |f: fn(&Measure) -> f64| median(&r.iter().map(f).collect::<Vec<_>>());
            [
                m(|x| x.tokens_per_s),
                m(|x| x.ttft_p99_ms),
                m(|x| x.tpot_p99_ms),
            ]
        })
        .collect();
    for ((policy, r), [tokens, ttft, tpot]) in POLICIES.iter().zip(&runs).zip(&medians) {
        let each: Vec<String> = r.iter().map(|m| format!("{:.1}", m.ttft_p99_ms)).collect();
        let last = r.last().expect("at least one run");
        writeln!(
            out,
            "| {policy} | {tokens:.0} | {ttft:.1} ms ({} ms) | {tpot:.2} ms{} | {:+.1} % | {} |",
            each.join(", "),
            if r.iter().all(|m| m.valid) {
                ""
            } else {
                " (INVALID)"
            },
            (ttft / medians[0][1] - 1.0) * 100.0,
            last.by_node
        )?;
    }
    Ok(out)
}

/// [`server_table`] at each of `--server-loads`, in turn.
fn server_tables(cli: &Cli, all: &[String]) -> Result<String> {
    let mut out = String::new();
    for &load in &cli.server_loads {
        out.push_str(&server_table(cli, load, all)?);
    }
    Ok(out)
}

fn bench(cli: &Cli) -> Result<String> {
    if cli.nodes < 2 || cli.max_sequences == 0 || cli.output_tokens < 2 || cli.slow_factor < 1.0 {
        bail!(
            "--nodes must be at least 2, --max-sequences 1, --output-tokens 2 and \
             --slow-factor 1"
        );
    }
    if !(cli.decode_us > 0.0 && cli.prefill_us >= 0.0) {
        bail!("--decode-us must be above 0 and --prefill-us not below 0");
    }
    if let Some(load) = cli.server_loads.iter().find(|l| !(**l > 0.0 && **l < 1.0)) {
        bail!("--server-loads: {load} is not a fraction of the capacity between 0 and 1");
    }
    loadgen_node_bin()?;
    if cli.grid {
        if cli.grid_slow_factors.iter().any(|f| f.is_nan() || *f < 1.0)
            || cli.grid_sequences.contains(&0)
        {
            bail!("--grid-slow-factors must be at least 1 and --grid-sequences at least 1");
        }
        return grid(cli);
    }
    let dir = test_dir("dispatch-bench")?;
    let fast_names: Vec<String> = (1..cli.nodes).map(|i| format!("fast-{i}")).collect();
    let fast_names: Vec<&str> = fast_names.iter().map(String::as_str).collect();
    let fast = Cluster::start(
        &dir.join("fast"),
        "grpc",
        &fast_names,
        &cli.node_config(cli.decode_us),
        &[],
    )?;
    let slow = Cluster::start(
        &dir.join("slow"),
        "grpc",
        &["slow"],
        &cli.node_config(cli.decode_us * cli.slow_factor),
        &[],
    )?;
    let urls = node_flags;
    let mut all = urls(&fast, cli.nodes);
    all.extend(urls(&slow, 1));
    if cli.server_only {
        return server_tables(cli, &all);
    }

    // Each kind of node alone, for its rate; the ideal is their sum.
    eprintln!("dispatch-bench: one fast node alone");
    let fast_alone = measure(
        cli,
        "Offline",
        cli.answers_per_s(cli.decode_us),
        &urls(&fast, 1),
        "fast-alone",
    )?;
    eprintln!("dispatch-bench: the slow node alone");
    let slow_alone = measure(
        cli,
        "Offline",
        cli.answers_per_s(cli.decode_us * cli.slow_factor),
        &urls(&slow, 1),
        "slow-alone",
    )?;
    let ideal = (cli.nodes - 1) as f64 * fast_alone.tokens_per_s + slow_alone.tokens_per_s;
    let mut out = String::new();
    writeln!(
        out,
        "{} nodes ({} at a {:.0} µs decode step, one at {:.0} µs; prefill {} µs per prompt \
         token; {} sequences at once, {} tokens per answer), llama2-70b prompt lengths, {} ms \
         runs. Alone: a fast node \
         {:.0} tokens/s, the slow one {:.0}; ideal (their sum) {ideal:.0} tokens/s. {}\n",
        cli.nodes,
        cli.nodes - 1,
        cli.decode_us,
        cli.decode_us * cli.slow_factor,
        cli.prefill_us,
        cli.max_sequences,
        cli.output_tokens,
        cli.duration_ms,
        fast_alone.tokens_per_s,
        slow_alone.tokens_per_s,
        machine_description()
    )?;
    out.push_str("| Offline | output tokens/s | of the ideal | vs least-outstanding |\n");
    out.push_str("|---|---|---|---|\n");
    let mut offline = Vec::new();
    for policy in POLICIES {
        eprintln!("dispatch-bench: Offline, {policy}");
        let mut flags = all.clone();
        flags.extend(["--dispatch".to_string(), policy.to_string()]);
        offline.push(measure(cli, "Offline", cli.capacity(), &flags, policy)?);
    }
    for (policy, m) in POLICIES.iter().zip(&offline) {
        writeln!(
            out,
            "| {policy} | {:.0} | {:.1} % | {:+.1} % |",
            m.tokens_per_s,
            m.tokens_per_s / ideal * 100.0,
            (m.tokens_per_s / offline[0].tokens_per_s - 1.0) * 100.0
        )?;
    }
    out.push_str(&server_tables(cli, &all)?);
    drop((fast, slow));
    if !cli.scaling.is_empty() {
        out.push_str(&cpu_scaling(cli, &cli.scaling)?);
    }
    Ok(out)
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.duration_ms = 3000;
        cli.scaling = vec![2, 4];
        cli.server_runs = 1;
    }
    finish_benchmark("dispatch-bench", bench(&cli))
}
