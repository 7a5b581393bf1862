//! `loadgen-bench`: netdiv's LoadGen against the official MLPerf LoadGen.
//!
//! Runs the release `loadgen-node` (null SUT) and the official C++ LoadGen
//! behind `tests/official/driver.cc` with identical settings, `--no-trace`
//! and no issued-sample record, and prints a markdown report with
//! netdiv/official ratios:
//!
//! * Offline: one ~10M-sample query (`target_qps = 9090910`, 1 s); per
//!   engine the summary's samples/s, process wall time, wall samples/s, peak
//!   RSS and RSS bytes per generated sample; median of 3 runs.
//! * Server: the highest target QPS that is still VALID with 5 s runs (no
//!   coalescing, mlperf.conf's 10 ms / 99th percentile bound): 10k QPS,
//!   doubled until INVALID, then bisected to 5 %; peak RSS per generated
//!   query at that QPS.
//!
//! `--quick` is a smoke version (1 s Server probes, 1M Offline samples, one
//! run). Usage: `cargo run --release -p netdiv-tests --bin loadgen-bench`.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use netdiv_tests::bench::{finish_benchmark, machine_description, median};
use netdiv_tests::binaries::OFFICIAL_VERSION;
use netdiv_tests::engines::{run, Engine, RunOutput, RunSpec};
use netdiv_tests::mlperf_logs::summary_value;
use netdiv_tests::{test_dir, write_file};

/// Benchmarks netdiv's loadgen-node against the official MLPerf LoadGen
/// (C++, built by tests/official/fetch-build.sh), both with a null SUT, and
/// prints a markdown report with netdiv/official ratios.
///
/// Offline: one query of ~10M samples (target_qps 9090910, min_duration 1 s,
/// 1024 samples); summary samples/s, wall time, wall samples/s, peak RSS and
/// RSS bytes per sample. Server: highest VALID target QPS with 5 s runs,
/// starting at 10k QPS, doubling until INVALID, then bisecting to 5 %.
/// NETDIV_LOADGEN_NODE / NETDIV_OFFICIAL_DRIVER use prebuilt binaries. Run it
/// on an otherwise idle machine; it takes a few minutes.
#[derive(Debug, clap::Parser)]
#[command(name = "loadgen-bench")]
struct Cli {
    /// Smoke version: 1M Offline samples, 1 s Server probes, 1 run.
    #[arg(long)]
    quick: bool,
    /// Offline runs per engine, median reported [default: 3; 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
    /// Run only one part.
    #[arg(long, value_parser = ["offline", "server"])]
    only: Option<String>,
}

struct Options {
    quick: bool,
    runs: usize,
    offline: bool,
    server: bool,
}

impl From<Cli> for Options {
    fn from(cli: Cli) -> Self {
        Options {
            quick: cli.quick,
            runs: cli
                .runs
                .map_or(if cli.quick { 1 } else { 3 }, |n| n as usize),
            offline: cli.only.as_deref() != Some("server"),
            server: cli.only.as_deref() != Some("offline"),
        }
    }
}

fn main() -> ExitCode {
    let options = Options::from(<Cli as clap::Parser>::parse());
    finish_benchmark("loadgen-bench", bench(&options))
}

fn bench(options: &Options) -> Result<String> {
    // Build / locate both up front, so build output is not mixed into timings.
    for engine in Engine::ALL {
        let path = engine.binary(None)?;
        eprintln!("loadgen-bench: {engine}: {}", path.display());
    }
    let mut report = String::new();
    let _ = writeln!(
        report,
        "# LoadGen benchmark: netdiv vs official MLPerf LoadGen {OFFICIAL_VERSION}\n"
    );
    let _ = writeln!(report, "{}\n", machine_description());
    if options.offline {
        report.push_str(&offline(options)?);
    }
    if options.server {
        report.push_str(&server(options)?);
    }
    Ok(report)
}

/// The median-of-runs metrics of one engine in the Offline part.
#[derive(Default)]
struct OfflineRuns {
    summary_sps: Vec<f64>,
    wall_s: Vec<f64>,
    wall_sps: Vec<f64>,
    rss: Vec<f64>,
    rss_per_sample: Vec<f64>,
    samples: u64,
}

fn offline(options: &Options) -> Result<String> {
    let target_qps = if options.quick { 909_091 } else { 9_090_910 };
    let dir = test_dir("bench-offline")?;
    let user_conf = write_file(
        &dir,
        "user.conf",
        &format!("*.Offline.target_qps = {target_qps}\n*.*.min_duration = 1000\n"),
    )?;
    let spec = RunSpec::new("Offline", "PerformanceOnly", 1024, 1024)
        .user_conf(user_conf)
        .record_issued(false)
        .trace(false)
        .timeout(Duration::from_secs(600));
    let mut results = [OfflineRuns::default(), OfflineRuns::default()];
    for round in 0..options.runs {
        // Alternate which engine goes first, so drift hits both alike.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in order {
            let engine = Engine::ALL[index];
            let run_dir = dir.join(format!("run{round}"));
            let output = run(engine, &spec, &run_dir)?;
            let detail = output.detail()?;
            let samples = generated(&detail, "generated_samples_per_query")?
                * generated(&detail, "generated_query_count")?;
            let summary = output.summary()?;
            let sps = summary_number(&summary, "Samples per second", &output)?;
            let wall = output.wall.as_secs_f64();
            let r = &mut results[index];
            r.samples = samples;
            r.summary_sps.push(sps);
            r.wall_s.push(wall);
            r.wall_sps.push(samples as f64 / wall);
            r.rss.push(output.max_rss_bytes as f64);
            r.rss_per_sample
                .push(output.max_rss_bytes as f64 / samples as f64);
            eprintln!(
                "offline/{engine} run {}: {samples} samples, summary {sps:.4e} samples/s, wall {wall:.3} s, peak RSS {}",
                round + 1,
                mib(output.max_rss_bytes as f64)
            );
            let _ = fs::remove_dir_all(&run_dir);
        }
    }

    let [official, ours] = &results;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Offline: one query of {} samples (target_qps {target_qps}, 1 s, 1024 samples), median of {} run(s)\n",
        thousands(official.samples),
        options.runs
    );
    if official.samples != ours.samples {
        let _ = writeln!(
            out,
            "**Warning:** the engines generated different sample counts (official {}, netdiv {}).\n",
            official.samples, ours.samples
        );
    }
    table_header(&mut out);
    row(
        &mut out,
        "Summary samples per second",
        median(&official.summary_sps),
        median(&ours.summary_sps),
        sci,
    );
    row(
        &mut out,
        "Process wall time (s)",
        median(&official.wall_s),
        median(&ours.wall_s),
        |x| format!("{x:.3}"),
    );
    row(
        &mut out,
        "Wall-clock samples per second",
        median(&official.wall_sps),
        median(&ours.wall_sps),
        sci,
    );
    row(
        &mut out,
        "Peak RSS",
        median(&official.rss),
        median(&ours.rss),
        mib,
    );
    row(
        &mut out,
        "Peak RSS bytes per sample",
        median(&official.rss_per_sample),
        median(&ours.rss_per_sample),
        |x| format!("{x:.1}"),
    );
    out.push('\n');
    Ok(out)
}

/// One Server run at a fixed target QPS.
#[derive(Clone)]
struct Probe {
    qps: u64,
    valid: bool,
    completed_sps: f64,
    generated_queries: u64,
    max_rss_bytes: u64,
}

fn server(options: &Options) -> Result<String> {
    let duration_ms: u64 = if options.quick { 1000 } else { 5000 };
    let mut searches = Vec::new();
    for engine in Engine::ALL {
        searches.push(server_search(engine, duration_ms)?);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Server: highest VALID target QPS ({} s runs, no coalescing, 10 ms at the 99th percentile; \
         10k QPS doubled until INVALID, then bisected to 5 %)\n",
        duration_ms / 1000
    );
    table_header(&mut out);
    let pick = |f: fn(&Probe) -> f64| {
        let of = |s: &Search| s.best.as_ref().map(f).unwrap_or(f64::NAN);
        (of(&searches[0]), of(&searches[1]))
    };
    let (a, b) = pick(|p| p.qps as f64);
    row(&mut out, "Highest VALID target QPS", a, b, |x| {
        thousands(x as u64)
    });
    let (a, b) = pick(|p| p.completed_sps);
    row(&mut out, "Completed samples per second there", a, b, |x| {
        format!("{x:.0}")
    });
    let (a, b) = pick(|p| p.generated_queries as f64);
    row(&mut out, "Generated queries there", a, b, |x| {
        thousands(x as u64)
    });
    let (a, b) = pick(|p| p.max_rss_bytes as f64);
    row(&mut out, "Peak RSS there", a, b, mib);
    let (a, b) = pick(|p| p.max_rss_bytes as f64 / p.generated_queries.max(1) as f64);
    row(&mut out, "Peak RSS bytes per generated query", a, b, |x| {
        format!("{x:.1}")
    });
    out.push('\n');
    for (engine, search) in Engine::ALL.iter().zip(&searches) {
        let probes: Vec<String> = search
            .probes
            .iter()
            .map(|p| {
                format!(
                    "{} {}",
                    thousands(p.qps),
                    if p.valid { "VALID" } else { "INVALID" }
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "- {} probes: {}{}",
            label(*engine),
            probes.join(", "),
            search.note
        );
    }
    out.push('\n');
    Ok(out)
}

struct Search {
    probes: Vec<Probe>,
    best: Option<Probe>,
    note: String,
}

fn server_search(engine: Engine, duration_ms: u64) -> Result<Search> {
    const START_QPS: u64 = 10_000;
    const FLOOR_QPS: u64 = 100;
    const CEILING_QPS: u64 = 64_000_000;
    let dir = test_dir(&format!("bench-server-{engine}"))?;
    let mut probes: Vec<Probe> = Vec::new();
    let mut note = String::new();
    let probe = |qps: u64, probes: &mut Vec<Probe>| -> Result<bool> {
        let p = server_probe(engine, qps, duration_ms, &dir)?;
        let valid = p.valid;
        probes.push(p);
        Ok(valid)
    };

    // Bracket: lo VALID, hi INVALID.
    let (mut lo, mut hi);
    if probe(START_QPS, &mut probes)? {
        lo = START_QPS;
        hi = None;
        while lo < CEILING_QPS {
            // Do not double into a run that would not fit in memory.
            let last_rss = probes.last().map(|p| p.max_rss_bytes).unwrap_or(0);
            if let Some(available) = mem_available_bytes() {
                if last_rss.saturating_mul(2) > available / 4 * 3 {
                    note = format!(
                        " (stopped doubling: the next probe would need ~{} of RAM)",
                        mib(2.0 * last_rss as f64)
                    );
                    break;
                }
            }
            if probe(lo * 2, &mut probes)? {
                lo *= 2;
            } else {
                hi = Some(lo * 2);
                break;
            }
        }
    } else {
        hi = Some(START_QPS);
        lo = START_QPS / 2;
        loop {
            if probe(lo, &mut probes)? {
                break;
            }
            hi = Some(lo);
            lo /= 2;
            if lo < FLOOR_QPS {
                return Ok(Search {
                    probes,
                    best: None,
                    note: format!(" (INVALID even at {FLOOR_QPS} QPS)"),
                });
            }
        }
    }
    // Bisect to 5 %.
    if let Some(mut high) = hi {
        while (high - lo) as f64 > 0.05 * lo as f64 {
            let mid = lo + (high - lo) / 2;
            if probe(mid, &mut probes)? {
                lo = mid;
            } else {
                high = mid;
            }
        }
    }
    let best = probes
        .iter()
        .rev()
        .find(|p| p.valid && p.qps == lo)
        .cloned();
    let best = best.ok_or_else(|| anyhow!("{engine}: no VALID probe at {lo} QPS"))?;
    Ok(Search {
        probes,
        best: Some(best),
        note,
    })
}

fn server_probe(engine: Engine, qps: u64, duration_ms: u64, dir: &Path) -> Result<Probe> {
    let run_dir = dir.join(format!("{qps}"));
    fs::create_dir_all(&run_dir)?;
    let user_conf = write_file(
        &run_dir,
        "user.conf",
        &format!("*.Server.target_qps = {qps}\n*.Server.min_duration = {duration_ms}\n*.Server.min_query_count = 100\n"),
    )?;
    let spec = RunSpec::new("Server", "PerformanceOnly", 1024, 1024)
        .user_conf(user_conf)
        .record_issued(false)
        .trace(false)
        .timeout(Duration::from_millis(duration_ms * 20 + 120_000));
    let output = run(engine, &spec, &run_dir)?;
    let summary = output.summary()?;
    let valid = summary_value(&summary, "Result is").as_deref() == Some("VALID");
    let completed_sps =
        summary_number(&summary, "Completed samples per second", &output).unwrap_or(f64::NAN);
    let generated_queries = generated(&output.detail()?, "generated_query_count")?;
    eprintln!(
        "server/{engine}: {} QPS -> {} (completed {completed_sps:.0}/s, wall {:.2} s, peak RSS {})",
        thousands(qps),
        if valid { "VALID" } else { "INVALID" },
        output.wall.as_secs_f64(),
        mib(output.max_rss_bytes as f64)
    );
    let probe = Probe {
        qps,
        valid,
        completed_sps,
        generated_queries,
        max_rss_bytes: output.max_rss_bytes,
    };
    let _ = fs::remove_dir_all(&run_dir);
    Ok(probe)
}

fn mem_available_bytes() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn generated(detail: &netdiv_tests::mlperf_logs::Detail, key: &str) -> Result<u64> {
    detail
        .value(key)
        .and_then(|v| v.as_u64())
        .ok_or_else(|| anyhow!("no integer `{key}` in the detail log"))
}

fn summary_number(summary: &str, label: &str, output: &RunOutput) -> Result<f64> {
    let text = summary_value(summary, label).with_context(|| {
        format!(
            "{}: no '{label}' line in {}/mlperf_log_summary.txt",
            output.engine,
            output.dir.display()
        )
    })?;
    match text.parse::<f64>() {
        Ok(x) => Ok(x),
        Err(_) => bail!("{}: '{label}' is not a number: {text:?}", output.engine),
    }
}

fn label(engine: Engine) -> &'static str {
    match engine {
        Engine::Official => "official",
        Engine::Ours => "netdiv",
    }
}

fn table_header(out: &mut String) {
    out.push_str("| Metric | official | netdiv | netdiv / official |\n|---|---:|---:|---:|\n");
}

fn row(out: &mut String, metric: &str, official: f64, ours: f64, format: impl Fn(f64) -> String) {
    let show = |x: f64| {
        if x.is_finite() {
            format(x)
        } else {
            "n/a".to_string()
        }
    };
    let ratio = ours / official;
    let ratio = if ratio.is_finite() {
        format!("{ratio:.2}")
    } else {
        "n/a".to_string()
    };
    let _ = writeln!(
        out,
        "| {metric} | {} | {} | {ratio} |",
        show(official),
        show(ours)
    );
}

fn sci(x: f64) -> String {
    format!("{x:.3e}")
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
