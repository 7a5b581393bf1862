//! `unet-wire`: 3D-UNet Offline at real sample sizes (KiTS19-like volumes
//! averaging 132 MB) through the QDL, side by side in one run:
//!
//! * in-process: the same zero-cost synthetic backend, `--sut synthetic`;
//! * over gRPC to two local sut-nodes, raw volumes, raw answers;
//! * the same with lz4 on both directions (samples compressed by the QSL
//!   when loaded; the nodes' answers, a quarter of the input's size like
//!   a one-byte-per-voxel segmentation, compressed by the nodes and
//!   decoded by the QDL inside the timed path).
//!
//! For each it prints samples/s, the decoded input bytes/s it sustained
//! (what the rules' ingress requirement counts) and the bytes/s on the
//! wire each way, from the run record; and the ratio to in-process.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin unet-wire`.

use loadgen_node::run_record::RunRecord;
use qdl::NodeTrafficReport;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use netdiv_tests::bench::{finish_benchmark, machine_description, median};
use netdiv_tests::mlperf_logs::Detail;
use netdiv_tests::sut_client::NodeProcess;
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};

/// Samples per Offline run: every KiTS19 case twice.
const SAMPLES: u64 = 86;

struct Measured {
    samples_per_s: f64,
    input_decoded_bytes_per_s: f64,
    input_wire_bytes_per_s: f64,
    output_wire_bytes_per_s: f64,
}

fn loadgen(args: &[String], out: &Path) -> Result<(f64, Option<RunRecord>)> {
    let status = Command::new(loadgen_node_bin()?)
        .arg("run")
        .args(args)
        .args([
            "--scenario",
            "Offline",
            "--benchmark",
            "3d-unet-99",
            "--progress",
            "never",
        ])
        .arg("--output")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("loadgen-node run {} failed", args.join(" "));
    }
    let detail = Detail::read(out)?;
    let throughput = detail
        .value("result_samples_per_second")
        .and_then(serde_json::Value::as_f64)
        .context("no result_samples_per_second")?;
    let record = RunRecord::read_in(out)?;
    Ok((throughput, record))
}

/// A traffic count summed over the run's nodes.
fn total(record: &RunRecord, count: impl Fn(&NodeTrafficReport) -> u64) -> f64 {
    record.nodes.iter().map(|n| count(&n.traffic) as f64).sum()
}

fn network(dir: &Path, lz4: bool, user_conf: &Path, run: usize) -> Result<Measured> {
    let config = write_file(
        dir,
        "node.toml",
        "[synthetic]\ndevices = 2\noutput_fraction = 0.25\n\n[batching]\nmax_batch_size = 1\n",
    )?;
    let config = config.display().to_string();
    let mut flags = vec![
        "--transport",
        "grpc",
        "--benchmark",
        "3d-unet-99",
        "--config",
        &config,
    ];
    if lz4 {
        flags.extend(["--response-codec", "lz4"]);
    }
    let nodes = (1..=2)
        .map(|i| NodeProcess::start(&format!("unet-{i}"), None, &flags))
        .collect::<Result<Vec<_>>>()?;
    let mut args: Vec<String> = vec!["--user-conf".into(), user_conf.display().to_string()];
    for n in &nodes {
        args.extend([
            "--sut-node".into(),
            format!("grpc://{}", n.grpc.expect("gRPC")),
        ]);
    }
    if lz4 {
        args.extend(["--sample-codec".into(), "lz4".into()]);
    }
    let out = dir.join(format!("net-{lz4}-{run}"));
    let (throughput, record) = loadgen(&args, &out)?;
    let record = record.context("no run record")?;
    let seconds = record.qdl.traffic_seconds.max(1e-9);
    let samples = total(&record, |t| t.samples_sent).max(1.0);
    let decoded_per_sample = total(&record, |t| t.decoded_bytes_sent) / samples;
    Ok(Measured {
        samples_per_s: throughput,
        input_decoded_bytes_per_s: throughput * decoded_per_sample,
        input_wire_bytes_per_s: total(&record, |t| t.bytes_sent) / seconds,
        output_wire_bytes_per_s: total(&record, |t| t.bytes_received) / seconds,
    })
}

fn in_process(dir: &Path, user_conf: &Path, run: usize, bytes_per_sample: f64) -> Result<Measured> {
    let args: Vec<String> = [
        "--sut",
        "synthetic",
        "--synthetic-devices",
        "4",
        "--synthetic-max-batch",
        "1",
        "--user-conf",
    ]
    .map(String::from)
    .into_iter()
    .chain([user_conf.display().to_string()])
    .collect();
    let (throughput, _) = loadgen(&args, &dir.join(format!("local-{run}")))?;
    Ok(Measured {
        samples_per_s: throughput,
        input_decoded_bytes_per_s: throughput * bytes_per_sample,
        input_wire_bytes_per_s: 0.0,
        output_wire_bytes_per_s: 0.0,
    })
}

fn report(repeat: usize) -> Result<String> {
    let dir = test_dir("unet-wire")?;
    let user_conf = write_file(
        dir.path(),
        "user.conf",
        &format!("*.Offline.target_qps = {SAMPLES}\n*.Offline.min_duration = 1000\n"),
    )?;
    let mut raw = Vec::new();
    let mut lz4 = Vec::new();
    let mut local = Vec::new();
    for run in 0..repeat {
        let r = network(dir.path(), false, &user_conf, run)?;
        let per_sample = r.input_decoded_bytes_per_s / r.samples_per_s;
        raw.push(r);
        lz4.push(network(dir.path(), true, &user_conf, run)?);
        local.push(in_process(dir.path(), &user_conf, run, per_sample)?);
    }
    let med =
        |v: &[Measured], f: fn(&Measured) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    let base = med(&local, |m| m.samples_per_s);
    let mut out = String::new();
    writeln!(
        out,
        "# 3D-UNet Offline at real sample sizes ({SAMPLES} volumes per run, median of {repeat})\n\n\
         {}\n\n\
         | setup | samples/s | vs in-process | input decoded MB/s | input on the wire MB/s | answers on the wire MB/s |\n\
         |---|---|---|---|---|---|",
        machine_description()
    )?;
    for (name, runs) in [
        ("in-process (--sut synthetic)", &local),
        ("QDL, gRPC, 2 nodes, raw", &raw),
        ("QDL, gRPC, 2 nodes, lz4 both ways", &lz4),
    ] {
        let sps = med(runs, |m| m.samples_per_s);
        writeln!(
            out,
            "| {name} | {sps:.2} | {:.2} | {:.0} | {:.0} | {:.1} |",
            sps / base,
            med(runs, |m| m.input_decoded_bytes_per_s) / 1e6,
            med(runs, |m| m.input_wire_bytes_per_s) / 1e6,
            med(runs, |m| m.output_wire_bytes_per_s) / 1e6,
        )?;
    }
    Ok(out)
}

fn main() -> ExitCode {
    let repeat = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    finish_benchmark("unet-wire", report(repeat))
}
