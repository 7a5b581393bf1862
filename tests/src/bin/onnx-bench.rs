//! `onnx-bench`: samples/s of a real compute load through the QDL against
//! the same backend in-process, side by side in one run.
//!
//! The load is the ResNet-50-shaped graph of the `onnx` wheel's backend
//! test data (light_resnet50.onnx: ResNet-50's layers with constant
//! weights, input `float32[1,3,224,224]`) on ONNX Runtime's CPU execution
//! provider, fetched by deploy/onnxruntime/fetch.sh. Samples are 150528-byte
//! uint8 images; each node converts them to float32 (its pre-processing).
//! Three setups, with the same number of single-threaded ONNX Runtime
//! sessions in total:
//!
//! * in-process: `loadgen-node run --sut local --node-config` with N sessions;
//! * N sut-nodes of one session each, through the QDL over gRPC;
//! * the same over QUIC.
//!
//! Offline runs are interleaved and repeated; the median counts.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin onnx-bench`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use netdiv_tests::bench::{finish_benchmark, machine_description, median};
use netdiv_tests::configs::{node_toml, UserConf};
use netdiv_tests::mlperf_logs::summary_value;
use netdiv_tests::network_run::{loadgen, BenchClusters, Setup};
use netdiv_tests::prerequisites::{onnxruntime_files, OnnxFiles};
use netdiv_tests::{test_dir, write_file};
use sut_node::backend::onnx::OnnxConfig;
use sut_node::backend::BackendKind;
use sut_node::batcher::BatchPolicy;
use sut_node::config::FileConfig;

/// Prints a markdown table: Offline samples/s of the ResNet-50-shaped graph
/// in-process and through the QDL over gRPC and QUIC.
#[derive(Debug, clap::Parser)]
#[command(name = "onnx-bench")]
struct Cli {
    /// Sessions in total: one per node over the network, all of them in
    /// one process in-process.
    #[arg(long, default_value_t = 2)]
    sessions: usize,
    /// Offline minimum duration of each run, in milliseconds.
    #[arg(long, default_value_t = 15_000)]
    duration_ms: u64,
    /// Runs of each setup; the median counts.
    #[arg(long, default_value_t = 2)]
    repeat: usize,
    /// One short run of each setup (a smoke test of the benchmark).
    #[arg(long)]
    quick: bool,
}

/// The setup as the table names it.
fn bench_name(setup: Setup) -> String {
    match setup {
        Setup::InProcess => setup.name().to_string(),
        network => format!("QDL, {}", network.name()),
    }
}

/// A sut-node config of the graph with `sessions` sessions of one thread.
fn node_config(files: &OnnxFiles, sessions: usize) -> FileConfig {
    FileConfig {
        benchmark: Some("resnet50".into()),
        backend: Some(BackendKind::Onnx),
        onnx: OnnxConfig {
            model: Some(files.resnet50.clone()),
            runtime_library: Some(files.library.clone()),
            wire_dtype: Some("uint8".into()),
            scale: 0.003_921_568_4, // 1/255 as f32
            devices: sessions,
            intra_threads: 1,
            ..OnnxConfig::default()
        },
        batching: BatchPolicy {
            max_batch_size: 1,
            ..BatchPolicy::default()
        },
        ..FileConfig::default()
    }
}

fn run_once(
    cli: &Cli,
    dir: &Path,
    setup: Setup,
    files: &OnnxFiles,
    clusters: &BenchClusters,
    target_qps: f64,
) -> Result<f64> {
    let run_dir = test_dir(&format!("onnx-bench-{setup:?}"))?;
    let conf = UserConf::new()
        .set("*.Offline.min_duration", cli.duration_ms)
        .set("*.Offline.target_qps", format!("{target_qps:.1}"))
        .set("*.Offline.min_query_count", 1);
    let conf = write_file(dir, "user.conf", &conf.to_string())?;
    let mut args: Vec<String> = [
        "--scenario",
        "Offline",
        "--model",
        "resnet50-shaped",
        "--benchmark",
        "resnet50",
        "--total-sample-count",
        "256",
        "--performance-sample-count",
        "256",
        "--no-trace",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match clusters.flags(setup) {
        Some(flags) => args.extend(flags),
        None => {
            let config = write_file(
                dir,
                "in-process.toml",
                &node_toml(&node_config(files, cli.sessions))?,
            )?;
            args.extend([
                "--sut".to_string(),
                "local".into(),
                "--node-config".into(),
                config.display().to_string(),
            ]);
        }
    }
    let timeout = Duration::from_millis(cli.duration_ms * 4 + 120_000);
    let run = loadgen(&run_dir, &args, timeout)?;
    run.expect_success()?;
    let summary = run.summary()?;
    summary_value(&summary, "Samples per second")
        .context("no samples per second in the summary")?
        .parse::<f64>()
        .with_context(|| format!("{} in {}", bench_name(setup), run_dir.display()))
}

fn bench(cli: &Cli) -> Result<String> {
    let files = onnxruntime_files()?.context("ONNX Runtime could not be fetched")?;
    let dir = test_dir("onnx-bench")?;
    let lib = files.library.display().to_string();
    let names: Vec<String> = (0..cli.sessions).map(|i| format!("onnx-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let one_session = node_config(&files, 1);
    let clusters = BenchClusters::start(&dir, &names, &one_session, &["--onnxruntime-lib", &lib])?;
    // A first short in-process run (about 66 samples) sizes Offline: ask
    // for a little more than the sessions can do, so every run lasts its
    // minimum duration.
    let probe = Cli {
        duration_ms: 3000,
        ..*cli
    };
    let capacity = run_once(&probe, &dir, Setup::InProcess, &files, &clusters, 20.0)?;
    let target = capacity * 1.2;
    eprintln!("onnx-bench: in-process probe {capacity:.1} samples/s; Offline target {target:.1}");

    let mut results: Vec<Vec<f64>> = vec![Vec::new(); Setup::ALL.len()];
    for round in 0..cli.repeat {
        for (i, setup) in Setup::ALL.iter().enumerate() {
            let v = run_once(cli, &dir, *setup, &files, &clusters, target)?;
            eprintln!(
                "onnx-bench: round {round}: {} {v:.2} samples/s",
                setup.name()
            );
            results[i].push(v);
        }
    }
    let medians: Vec<f64> = results.iter().map(|r| median(r)).collect();
    let base = medians[0];
    let mut out = String::new();
    writeln!(
        out,
        "| setup | samples/s | vs in-process | throughput lost |"
    )?;
    writeln!(out, "|---|---:|---:|---:|")?;
    for (setup, v) in Setup::ALL.iter().zip(&medians) {
        writeln!(
            out,
            "| {} | {v:.2} | {:.4} | {:+.2} % |",
            bench_name(*setup),
            v / base,
            (base - v) / base * 100.0
        )?;
    }
    writeln!(
        out,
        "\nlight_resnet50.onnx (ResNet-50 layers, constant weights), ONNX Runtime {} CPU, \
         {} single-threaded sessions in total ({} nodes x 1 over the network), batch 1, \
         150528-byte uint8 samples converted to float32 on the node; Offline, {} s runs, \
         median of {}. {}",
        files
            .library
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("libonnxruntime.so."))
            .unwrap_or("?"),
        cli.sessions,
        cli.sessions,
        cli.duration_ms / 1000,
        cli.repeat,
        machine_description()
    )?;
    Ok(out)
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.repeat = 1;
        cli.duration_ms = 3000;
    }
    finish_benchmark("onnx-bench", bench(&cli))
}
