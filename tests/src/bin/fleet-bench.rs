//! `fleet-bench`: one LoadGen node in front of a fleet of sut-nodes.
//!
//! For each fleet size (`--nodes`, default 2, 32, 128, 512 and 1,024) it
//! drives zero-cost synthetic nodes (4-byte samples, `benchmark = null`)
//! through the QDL three ways, side by side in one run:
//!
//! * **null nodes**: `--sut null --local-nodes N`, N nodes in the LoadGen
//!   node's process that answer on the thread that sends to them: the
//!   LoadGen and the QDL alone, with nothing of the nodes;
//! * **in-process**: `--sut synthetic --local-nodes N`, N sut-node cores
//!   (each its own batcher and device thread) in the LoadGen node's
//!   process behind the QDL's local link: what the QDL spends per node,
//!   without what the machine spends running N processes;
//! * **processes**: N real `sut-node` processes on loopback over gRPC, up
//!   to `--max-processes`.
//!
//! Each size runs Offline (one query, as many samples as the nodes take)
//! and a Server search (the highest VALID target QPS, doubling then
//! bisecting), and reports, with the LoadGen node measured from outside
//! (`wait4`): samples/s and the ratio to the smallest fleet, set-up time
//! (its `nodes_connected` record), the Name() call's time (its
//! `name_answered` record), its peak memory and the memory each node adds,
//! and its CPU time per sample.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin fleet-bench`
//! (`--quick`: 2 and 16 nodes, 1 s runs, a short Server search).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use netdiv_tests::bench::{finish_benchmark, machine_description, median, QpsSearch};
use netdiv_tests::configs::{zero_cost_in_process_flags, zero_cost_node, UserConf};
use netdiv_tests::log_records::with_event;
use netdiv_tests::network_run::{loadgen, Cluster, LoadgenRun};
use netdiv_tests::{loadgen_node_bin, sut_node_bin, test_dir, write_file};
use serde_json::Value;

/// Prints markdown tables of a fleet's rates, set-up, memory and CPU per
/// sample at each size. NETDIV_LOADGEN_NODE / NETDIV_SUT_NODE use prebuilt
/// binaries.
#[derive(Debug, clap::Parser)]
#[command(name = "fleet-bench")]
struct Cli {
    /// Fleet sizes, smallest first (the ratios are to the first).
    #[arg(long, value_delimiter = ',', default_value = "2,32,128,512,1024")]
    nodes: Vec<usize>,
    /// Largest fleet also run as real sut-node processes (0: none).
    #[arg(long, default_value_t = 1024)]
    max_processes: usize,
    /// min_duration of every run, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    duration_ms: u64,
    /// Offline's target_qps: more than the fleet can take, so the run is
    /// bound by the LoadGen node and the QDL.
    #[arg(long, default_value_t = 2_000_000)]
    offline_qps: u64,
    /// Offline runs of each size and kind (interleaved); the median
    /// counts.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Where the Server search starts at the smallest fleet (each larger
    /// fleet starts from the last one's result).
    #[arg(long, default_value_t = 20_000)]
    server_start: u64,
    /// Server probes per size and kind (0: no Server search).
    #[arg(long, default_value_t = 6)]
    server_probes: usize,
    /// Passed to every LoadGen node run (`--cpu-latency-us US`, root):
    /// 0 keeps idle CPUs polling, so the Server figures are not the
    /// machine's wake-up from a halted CPU.
    #[arg(long, value_name = "US")]
    cpu_latency_us: Option<u32>,
    /// 2 and 16 nodes, 1 s runs, 2 Server probes from 5,000 QPS (a smoke
    /// run).
    #[arg(long)]
    quick: bool,
}

/// How the nodes of a fleet run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    NullNodes,
    InProcess,
    Processes,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::NullNodes => "null nodes",
            Kind::InProcess => "in-process",
            Kind::Processes => "processes",
        }
    }
}

/// What one Offline run of one fleet measured.
#[derive(Clone, Debug)]
struct OfflineRun {
    samples_per_s: f64,
    setup_ms: f64,
    name_ms: f64,
    peak_rss_mb: f64,
    cpu_us_per_sample: f64,
    /// Nodes that were sent samples.
    nodes_used: usize,
    /// The query's target_qps: `--offline-qps`, doubled while the fleet
    /// finished the query within min_duration.
    target_qps: u64,
}

/// How far `--offline-qps` is doubled for a fleet that finishes the query
/// within min_duration (the LoadGen calls such a run INVALID).
const MOST_OFFLINE_DOUBLINGS: u32 = 4;

/// One fleet size and kind: its Offline runs and its Server search.
#[derive(Debug)]
struct Row {
    nodes: usize,
    kind: Kind,
    offline: Vec<OfflineRun>,
    server: Option<QpsSearch>,
    /// Each Server probe: target QPS and VALID or not.
    probes: Vec<(u64, bool)>,
}

impl Row {
    fn offline_median(&self, pick: impl Fn(&OfflineRun) -> f64) -> f64 {
        median(&self.offline.iter().map(pick).collect::<Vec<_>>())
    }
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.nodes = vec![2, 16];
        cli.max_processes = 16;
        cli.duration_ms = 1000;
        cli.repeat = 1;
        cli.server_start = 5_000;
        cli.server_probes = 2;
    }
    finish_benchmark("fleet-bench", bench(&cli))
}

fn bench(cli: &Cli) -> Result<String> {
    if cli.nodes.is_empty() || cli.nodes.contains(&0) {
        bail!("--nodes: give fleet sizes of at least 1 node each");
    }
    if !cli.nodes.windows(2).all(|w| w[0] < w[1]) {
        bail!("--nodes: give the sizes smallest first, each once (the ratios are to the first)");
    }
    if cli.repeat == 0 || cli.duration_ms == 0 || cli.offline_qps == 0 {
        bail!("--repeat, --duration-ms and --offline-qps must be at least 1");
    }
    loadgen_node_bin()?;
    if cli.max_processes > 0 {
        sut_node_bin()?;
    }
    let mut rows: Vec<Row> = Vec::new();
    // Raised once for the first fleet that finishes the query too soon,
    // then kept: every row's query the same size where it can be.
    let mut offline_qps = cli.offline_qps;
    for &nodes in &cli.nodes {
        let mut kinds = vec![Kind::NullNodes, Kind::InProcess];
        if nodes <= cli.max_processes {
            kinds.push(Kind::Processes);
        }
        for kind in kinds {
            let start = rows
                .iter()
                .rev()
                .find(|r| r.kind == kind)
                .and_then(|r| r.server.as_ref()?.valid)
                .unwrap_or(cli.server_start);
            rows.push(measure_fleet(cli, nodes, kind, start, &mut offline_qps)?);
        }
    }
    report(cli, &rows)
}

/// Starts the fleet (processes), runs Offline and the Server search.
fn measure_fleet(
    cli: &Cli,
    nodes: usize,
    kind: Kind,
    server_start: u64,
    offline_qps: &mut u64,
) -> Result<Row> {
    let dir = test_dir(&format!("fleet-{nodes}-{}", kind.label().replace(' ', "-")))?;
    let cluster = match kind {
        Kind::NullNodes | Kind::InProcess => None,
        Kind::Processes => {
            eprintln!("fleet-bench: starting {nodes} sut-node processes");
            let names: Vec<String> = (1..=nodes).map(|i| format!("fleet-{i}")).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            Some(Cluster::start(
                dir.path(),
                "grpc",
                &names,
                &zero_cost_node("null"),
                &[],
            )?)
        }
    };
    let sut_flags = match (&cluster, kind) {
        (Some(cluster), _) => cluster.loadgen_flags(),
        (None, Kind::NullNodes) => vec![
            "--sut".into(),
            "null".into(),
            "--local-nodes".into(),
            nodes.to_string(),
        ],
        (None, _) => {
            let mut flags = zero_cost_in_process_flags();
            flags.extend(["--local-nodes".to_string(), nodes.to_string()]);
            flags
        }
    };
    let mut row = Row {
        nodes,
        kind,
        offline: Vec::new(),
        server: None,
        probes: Vec::new(),
    };
    for round in 0..cli.repeat {
        eprintln!(
            "fleet-bench: {nodes} nodes {} Offline (run {}/{})",
            kind.label(),
            round + 1,
            cli.repeat
        );
        let target_qps = &mut *offline_qps;
        let run = loop {
            let conf = UserConf::new()
                .set("*.*.min_duration", cli.duration_ms)
                .set("*.Offline.target_qps", *target_qps)
                .set("*.Offline.min_query_count", 1);
            let run = run_once(cli, dir.path(), "Offline", &conf, &sut_flags)?;
            let too_short = run.summary().is_ok_and(|s| finished_too_soon(&s));
            if too_short && *target_qps < cli.offline_qps << MOST_OFFLINE_DOUBLINGS {
                *target_qps *= 2;
                eprintln!(
                    "fleet-bench: the query ended within min_duration; again at target_qps \
                     {target_qps}"
                );
                continue;
            }
            break run;
        };
        row.offline.push(
            offline_measure(&run, nodes, kind, *target_qps).with_context(|| {
                format!(
                    "{nodes} nodes {} Offline in {}",
                    kind.label(),
                    run.logs.display()
                )
            })?,
        );
    }
    if cli.server_probes > 0 {
        let mut search = QpsSearch::new(server_start, 0.1, cli.server_probes);
        while let Some(qps) = search.next() {
            eprintln!(
                "fleet-bench: {nodes} nodes {} Server at {qps} QPS",
                kind.label()
            );
            let conf = UserConf::new()
                .set("*.*.min_duration", cli.duration_ms)
                .set("*.Server.target_qps", qps);
            let run = run_once(cli, dir.path(), "Server", &conf, &sut_flags)?;
            run.expect_success()?;
            let valid = netdiv_tests::mlperf_logs::says_valid(&run.summary()?);
            search.record(qps, valid);
            row.probes.push((qps, valid));
        }
        row.server = Some(search);
    }
    drop(cluster);
    Ok(row)
}

fn run_once(
    cli: &Cli,
    dir: &Path,
    scenario: &str,
    conf: &UserConf,
    sut_flags: &[String],
) -> Result<LoadgenRun> {
    let conf = write_file(dir, "user.conf", &conf.to_string())?;
    let mut args: Vec<String> = [
        "--scenario",
        scenario,
        "--model",
        "fleet",
        "--benchmark",
        "null",
        "--progress",
        "never",
        "--no-trace",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(sut_flags.iter().cloned());
    if let Some(us) = cli.cpu_latency_us {
        args.extend(["--cpu-latency-us".to_string(), us.to_string()]);
    }
    // Set-up grows with the fleet (a connection, an Info and a Name() to
    // each node); the run itself is bounded by min_duration.
    let deadline = Duration::from_millis(cli.duration_ms * 6 + 180_000);
    loadgen(dir, &args, deadline)
}

/// The first record of `event` and its number field `field`.
fn event_number(run: &LoadgenRun, event: &str, field: &str) -> Result<f64> {
    let records = run.events();
    let found = with_event(&records, event);
    let record: &Value = found
        .first()
        .with_context(|| format!("no {event} record in the LoadGen node's log"))?;
    record
        .get(field)
        .and_then(Value::as_f64)
        .with_context(|| format!("{event} record without a number {field}: {record}"))
}

/// Whether an Offline run's summary says its one query ended before
/// min_duration (the fleet took it faster than target_qps).
fn finished_too_soon(summary: &str) -> bool {
    summary
        .lines()
        .any(|l| l.trim().replace(' ', "") == "Mindurationsatisfied:NO")
}

fn offline_measure(
    run: &LoadgenRun,
    nodes: usize,
    kind: Kind,
    target_qps: u64,
) -> Result<OfflineRun> {
    let (summary, detail) = run.expect_valid()?;
    let samples_per_s: f64 =
        netdiv_tests::mlperf_logs::summary_value(&summary, "Samples per second")
            .context("no \"Samples per second\" in the summary")?
            .parse()
            .context("\"Samples per second\" is not a number")?;
    // Offline's one query: its samples, from the rate and its span.
    let span_ns = detail
        .number("result_max_latency_ns")
        .context("no result_max_latency_ns in the detail log")?;
    let samples = samples_per_s * span_ns / 1e9;
    ensure!(samples > 0.0, "no samples completed");
    let cpu = run
        .cpu
        .context("the LoadGen node's CPU time was not measured")?;
    let rss = run
        .max_rss_bytes
        .context("the LoadGen node's peak memory was not measured")?;
    let nodes_used = match kind {
        Kind::NullNodes | Kind::InProcess => {
            event_number(run, "in_process_qdl", "nodes_used")? as usize
        }
        Kind::Processes => run
            .record()?
            .nodes
            .iter()
            .filter(|n| n.traffic.samples_sent > 0)
            .count(),
    };
    let name_ms = event_number(run, "name_answered", "wall_ms")?;
    let named = event_number(run, "name_answered", "nodes")? as usize;
    ensure!(
        named == nodes,
        "Name() went to {named} node(s), the fleet has {nodes}"
    );
    Ok(OfflineRun {
        samples_per_s,
        setup_ms: event_number(run, "nodes_connected", "setup_ms")?,
        name_ms,
        peak_rss_mb: rss as f64 / 1e6,
        cpu_us_per_sample: cpu.as_secs_f64() * 1e6 / samples,
        nodes_used,
        target_qps,
    })
}

fn report(cli: &Cli, rows: &[Row]) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "Zero-cost synthetic nodes (one device each), 4-byte samples (benchmark null); \
         min_duration {} ms; Offline: one query at target_qps {} (doubled from the first \
         fleet that finished it sooner on; below) (median of {} run(s)); \
         Server: highest VALID target QPS (10 ms at the 99th percentile), doubling then \
         bisecting to 10 %, at most {} probe(s). Processes: sut-node over gRPC on loopback. \
         CPU wake-up bound: {}.",
        cli.duration_ms,
        cli.offline_qps,
        cli.repeat,
        cli.server_probes,
        match cli.cpu_latency_us {
            Some(us) => format!("{us} µs (--cpu-latency-us)"),
            None => "none".into(),
        }
    )?;
    writeln!(out, "{}", machine_description())?;
    writeln!(out)?;
    writeln!(
        out,
        "| nodes | as | Offline samples/s | vs {first} | Server VALID QPS | vs {first} | set-up (ms) | Name() (ms) | LoadGen peak RSS (MB) | MB per node beyond {first} | LoadGen CPU-µs per sample | nodes sent samples |",
        first = cli.nodes[0]
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for row in rows {
        let base = rows
            .iter()
            .find(|r| r.kind == row.kind)
            .expect("the row itself is of its kind");
        let rate = row.offline_median(|m| m.samples_per_s);
        let base_rate = base.offline_median(|m| m.samples_per_s);
        let rss = row.offline_median(|m| m.peak_rss_mb);
        let per_node = if row.nodes > base.nodes {
            format!(
                "{:.2}",
                (rss - base.offline_median(|m| m.peak_rss_mb)) / (row.nodes - base.nodes) as f64
            )
        } else {
            "-".into()
        };
        let server = row.server.as_ref().and_then(|s| s.valid);
        let base_server = base.server.as_ref().and_then(|s| s.valid);
        let server_cell = match (server, row.server.as_ref().and_then(|s| s.invalid)) {
            (Some(v), _) => v.to_string(),
            (None, Some(lowest)) => format!("none (INVALID at {lowest})"),
            (None, None) => "-".into(),
        };
        let server_ratio = match (server, base_server) {
            (Some(v), Some(b)) => format!("{:.2}", v as f64 / b as f64),
            _ => "-".into(),
        };
        let used = row.offline.iter().map(|m| m.nodes_used).min().unwrap_or(0);
        writeln!(
            out,
            "| {} | {} | {:.0} | {:.2} | {} | {} | {:.1} | {:.2} | {:.0} | {} | {:.2} | {} |",
            row.nodes,
            row.kind.label(),
            rate,
            rate / base_rate,
            server_cell,
            server_ratio,
            row.offline_median(|m| m.setup_ms),
            row.offline_median(|m| m.name_ms),
            rss,
            per_node,
            row.offline_median(|m| m.cpu_us_per_sample),
            used
        )?;
    }
    let raised: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let most = row.offline.iter().map(|m| m.target_qps).max()?;
            (most > cli.offline_qps)
                .then(|| format!("{} nodes, {}: {most}", row.nodes, row.kind.label()))
        })
        .collect();
    if !raised.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Offline target_qps raised (the query ended within min_duration): {}",
            raised.join("; ")
        )?;
    }
    writeln!(out)?;
    writeln!(out, "Server probes (target QPS: VALID or INVALID):")?;
    writeln!(out)?;
    for row in rows.iter().filter(|r| !r.probes.is_empty()) {
        let probes: Vec<String> = row
            .probes
            .iter()
            .map(|(q, v)| format!("{q} {}", if *v { "VALID" } else { "INVALID" }))
            .collect();
        writeln!(
            out,
            "- {} nodes, {}: {}",
            row.nodes,
            row.kind.label(),
            probes.join(", ")
        )?;
    }
    Ok(out)
}
