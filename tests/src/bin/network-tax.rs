//! `network-tax`: what putting the network between LoadGen and SUT costs.
//!
//! Runs the same synthetic backend (the sut-node's batcher and cost model)
//! three ways, side by side in one run, with `loadgen-node` as a real
//! process each time:
//!
//! * in-process: `--sut synthetic --synthetic-*`, all devices in one
//!   process;
//! * through the QDL to N local sut-nodes over gRPC;
//! * the same over QUIC (TLS 1.3).
//!
//! Every setup has the same total device count and cost model, so with a
//! backend-bound load the in-process run is the ceiling. For Offline and
//! Server, and for 4-byte and 150528-byte (224x224x3) samples, it prints
//! throughput and p99 latency per setup and the tax: throughput lost and
//! p99 added. Runs are interleaved and repeated; the median counts.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin network-tax`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use netdiv_tests::bench::{finish_benchmark, machine_description, median};
use netdiv_tests::configs::UserConf;
use netdiv_tests::mlperf_logs::summary_value;
use netdiv_tests::network_run::{loadgen, BenchClusters, LoadgenRun, Setup};
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};
use sut_node::backend::synthetic::SyntheticConfig;
use sut_node::batcher::BatchPolicy;
use sut_node::config::FileConfig;

/// Prints a markdown table of the network tax (throughput lost, p99 latency
/// added) of the QDL over gRPC and QUIC against the same synthetic backend
/// in-process. NETDIV_LOADGEN_NODE / NETDIV_SUT_NODE use prebuilt binaries.
#[derive(Debug, clap::Parser)]
#[command(name = "network-tax")]
struct Cli {
    /// min_duration of every run, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    duration_ms: u64,
    /// Runs of each setup (interleaved); the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Time one batch takes on a synthetic device, in microseconds.
    #[arg(long, default_value_t = 2000)]
    batch_cost_us: u64,
    /// Time each sample adds to its batch, in microseconds.
    #[arg(long, default_value_t = 1000)]
    sample_cost_us: u64,
    /// Largest batch a device runs.
    #[arg(long, default_value_t = 16)]
    max_batch: usize,
    /// sut-nodes (each with one device); the in-process run gets as many
    /// devices.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Server load as a fraction of the backend's capacity.
    #[arg(long, default_value_t = 0.6)]
    server_load: f64,
    /// Only 1 run each, 2 s long (a smoke run).
    #[arg(long)]
    quick: bool,
    /// Sample sizes to measure, in bytes (4 and/or 150528).
    #[arg(long, value_delimiter = ',', default_value = "4,150528")]
    sizes: Vec<String>,
    /// Scenarios to measure.
    #[arg(long, value_delimiter = ',', default_value = "Offline,Server")]
    scenarios: Vec<String>,
}

/// One sample size: the benchmark whose shape gives it.
struct Size {
    label: &'static str,
    benchmark: &'static str,
}

const SIZES: &[Size] = &[
    Size {
        label: "4",
        benchmark: "null",
    },
    Size {
        label: "150528",
        benchmark: "resnet50",
    },
];

const SCENARIOS: [&str; 2] = ["Offline", "Server"];

/// Throughput and tail latency of one run.
#[derive(Clone, Copy, Debug)]
struct Measure {
    samples_per_s: f64,
    p99_ms: f64,
}

impl Cli {
    /// Samples per second the backend can do with full batches.
    fn capacity(&self) -> f64 {
        let batch_us = self.batch_cost_us + self.sample_cost_us * self.max_batch as u64;
        self.nodes as f64 * self.max_batch as f64 * 1e6 / batch_us as f64
    }

    /// One sut-node of one synthetic device with the cost model.
    fn node_config(&self, benchmark: &str) -> FileConfig {
        FileConfig {
            benchmark: Some(benchmark.into()),
            synthetic: SyntheticConfig {
                batch_cost_us: self.batch_cost_us,
                sample_cost_us: self.sample_cost_us,
                devices: 1,
                ..SyntheticConfig::default()
            },
            batching: BatchPolicy {
                max_batch_size: self.max_batch,
                ..BatchPolicy::default()
            },
            ..FileConfig::default()
        }
    }

    /// Offline asks for more than the backend can do, so it runs
    /// backend-bound for min_duration; Server runs at `server_load`.
    fn user_conf(&self) -> UserConf {
        let capacity = self.capacity();
        UserConf::new()
            .set("*.*.min_duration", self.duration_ms)
            .set("*.Offline.target_qps", format!("{:.0}", capacity * 1.5))
            .set("*.Offline.min_query_count", 1)
            .set(
                "*.Server.target_qps",
                format!("{:.0}", capacity * self.server_load),
            )
            .set("*.Server.target_latency", 1000)
            .set("*.Server.min_query_count", 100)
    }
}

fn measure(run: &LoadgenRun, scenario: &str) -> Result<Measure> {
    run.expect_success()?;
    let summary = run.summary()?;
    let label = if scenario == "Offline" {
        "Samples per second"
    } else {
        "Completed samples per second"
    };
    let number = |label: &str| -> Result<f64> {
        summary_value(&summary, label)
            .with_context(|| format!("no {label:?} in the summary"))?
            .parse::<f64>()
            .with_context(|| format!("{label:?} is not a number"))
    };
    Ok(Measure {
        samples_per_s: number(label)?,
        p99_ms: number("99.00 percentile latency (ns)")? / 1e6,
    })
}

fn run_once(
    cli: &Cli,
    dir: &std::path::Path,
    setup: Setup,
    size: &Size,
    scenario: &str,
    clusters: &BenchClusters,
) -> Result<Measure> {
    let run_dir = test_dir(&format!("tax-{}-{scenario}", setup.name()))?;
    let conf = write_file(dir, "user.conf", &cli.user_conf().to_string())?;
    let mut args: Vec<String> = [
        "--scenario",
        scenario,
        "--model",
        "tax",
        "--benchmark",
        size.benchmark,
        "--total-sample-count",
        "1024",
        "--performance-sample-count",
        "1024",
        "--no-trace",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match clusters.flags(setup) {
        Some(flags) => args.extend(flags),
        None => args.extend([
            "--sut".to_string(),
            "synthetic".into(),
            "--synthetic-batch-cost-us".into(),
            cli.batch_cost_us.to_string(),
            "--synthetic-sample-cost-us".into(),
            cli.sample_cost_us.to_string(),
            "--synthetic-devices".into(),
            cli.nodes.to_string(),
            "--synthetic-max-batch".into(),
            cli.max_batch.to_string(),
        ]),
    }
    let timeout = Duration::from_millis(cli.duration_ms * 4 + 60_000);
    let run = loadgen(&run_dir, &args, timeout)?;
    measure(&run, scenario).with_context(|| {
        format!(
            "{} {scenario} {} in {}",
            setup.name(),
            size.label,
            run_dir.display()
        )
    })
}

fn percent_lost(base: f64, other: f64) -> f64 {
    (base - other) / base * 100.0
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.repeat = 1;
        cli.duration_ms = 2000;
    }
    finish_benchmark("network-tax", bench(&cli))
}

fn bench(cli: &Cli) -> Result<String> {
    if cli.repeat == 0 || cli.nodes == 0 || cli.max_batch == 0 {
        bail!("--repeat, --nodes and --max-batch must be at least 1");
    }
    loadgen_node_bin()?;
    let mut rows = String::new();
    for label in &cli.sizes {
        let size = SIZES
            .iter()
            .find(|s| s.label == label.as_str())
            .with_context(|| format!("--sizes: no sample size {label} (4 or 150528)"))?;
        let dir = test_dir(&format!("tax-{}", size.benchmark))?;
        let names: Vec<String> = (1..=cli.nodes).map(|i| format!("tax-node-{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let config = cli.node_config(size.benchmark);
        let clusters = BenchClusters::start(&dir, &names, &config, &[])?;
        for scenario in SCENARIOS
            .iter()
            .copied()
            .filter(|s| cli.scenarios.iter().any(|c| c == s))
        {
            let mut samples: Vec<Vec<Measure>> = vec![Vec::new(); Setup::ALL.len()];
            for round in 0..cli.repeat {
                for (i, setup) in Setup::ALL.iter().enumerate() {
                    eprintln!(
                        "network-tax: {} {scenario} {} (run {}/{})",
                        size.label,
                        setup.name(),
                        round + 1,
                        cli.repeat
                    );
                    samples[i].push(run_once(cli, &dir, *setup, size, scenario, &clusters)?);
                }
            }
            let med: Vec<Measure> = samples
                .iter()
                .map(|runs| Measure {
                    samples_per_s: median(
                        &runs.iter().map(|m| m.samples_per_s).collect::<Vec<_>>(),
                    ),
                    p99_ms: median(&runs.iter().map(|m| m.p99_ms).collect::<Vec<_>>()),
                })
                .collect();
            let base = med[0];
            let mut row = format!("| {scenario} | {} B |", size.label);
            for m in &med {
                write!(row, " {:.0} / {:.2} |", m.samples_per_s, m.p99_ms)?;
            }
            for m in &med[1..] {
                write!(
                    row,
                    " {:+.2}% / {:+.2} ms |",
                    -percent_lost(base.samples_per_s, m.samples_per_s),
                    m.p99_ms - base.p99_ms
                )?;
            }
            eprintln!("{row}");
            rows.push_str(&row);
            rows.push('\n');
        }
    }
    let mut out = String::new();
    writeln!(
        out,
        "Backend: {} node(s) x 1 synthetic device, {} us per batch + {} us per sample, batches up to {} \
         (capacity {:.0} samples/s); Server at {:.0}% of capacity; min_duration {} ms; median of {} run(s).",
        cli.nodes,
        cli.batch_cost_us,
        cli.sample_cost_us,
        cli.max_batch,
        cli.capacity(),
        cli.server_load * 100.0,
        cli.duration_ms,
        cli.repeat
    )?;
    writeln!(out, "{}", machine_description())?;
    writeln!(out)?;
    writeln!(
        out,
        "Each cell: samples/s / p99 latency (ms). Tax: throughput change / p99 added, against in-process."
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| scenario | sample | in-process | gRPC | QUIC | gRPC tax | QUIC tax |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|")?;
    out.push_str(&rows);
    Ok(out)
}
