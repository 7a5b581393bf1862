//! `wire-bench`: how fast the QDL's two transports carry small queries,
//! side by side in one run.
//!
//! Two sut-nodes per transport (gRPC and QUIC), the synthetic backend at
//! zero cost, 4-byte samples (`--benchmark null`), all on loopback, and
//! `loadgen-node` as a real process for every run:
//!
//! * Server: the highest VALID target QPS of each transport, searched
//!   side by side (one probe of each in turn): doubling from
//!   `--server-start`, then bisecting to `--server-resolution`; a probe
//!   counts as INVALID after `--server-attempts` INVALID runs.
//! * Offline: samples/s (median of `--repeat` runs).
//! * SingleStream through the QDL to one node: p50, p99 and mean latency
//!   against `--sut null`, 10,000 queries per `--seconds` (median of
//!   `--repeat` runs).
//! * Where a SingleStream query's time goes, each path measured on its
//!   own: the LoadGen with the null SUT, with the node's synthetic device
//!   in-process (the batcher's thread hand-off), a bare Name() round trip
//!   on each transport from a single-threaded client in this process, and
//!   the whole path through the QDL. The parts overlap and wait for one
//!   another differently (the LoadGen's issuing thread polls, a bare
//!   client sleeps in epoll), so they are not subtracted.
//! * The floor beside it: a bare echo of the query's size to another
//!   process over each transport, with the same runtime and settings
//!   (`netdiv_tests::echo`), and what netdiv adds above it; for the
//!   nodes as they start by default, for a node with `--io-threads 1` and
//!   for one with `--run-on-io-thread` (one more of each per transport),
//!   the echo's server with as many threads as the node's I/O (one
//!   echo for both one-thread tunings).
//! * When this process may write `/dev/cpu_dma_latency` (root), the whole
//!   path again with `loadgen-node run --cpu-latency-us 0`: idle CPUs poll
//!   instead of halting while it runs, which shows what the wake-ups of
//!   sleeping CPUs cost (and the floors again, held likewise).
//!
//! Usage: `cargo run --release -p netdiv-tests --bin wire-bench`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use netdiv_proto::pb::{self, quic_request};
use netdiv_tests::bench::{finish_benchmark, machine_description, median, QpsSearch};
use netdiv_tests::configs::{zero_cost_in_process_flags, zero_cost_node, UserConf};
use netdiv_tests::echo::{self, EchoServer, EchoTransport};
use netdiv_tests::mlperf_logs::summary_value;
use netdiv_tests::network_run::{loadgen, BenchClusters, LoadgenRun, Setup};
use netdiv_tests::sut_client::{
    grpc_client, quic_connect, quic_request, versioned, ClientCert, NodeProcess,
};
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};

/// Prints the wire-speed table of gRPC and QUIC. NETDIV_LOADGEN_NODE /
/// NETDIV_SUT_NODE use prebuilt binaries.
#[derive(Debug, clap::Parser)]
#[command(name = "wire-bench")]
struct Cli {
    /// min_duration of every run, in seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// The first Server target_qps of each search.
    #[arg(long, default_value_t = 100_000)]
    server_start: u64,
    /// Bisect until the highest VALID and the lowest INVALID probe are
    /// this fraction apart.
    #[arg(long, default_value_t = 0.05)]
    server_resolution: f64,
    /// Most probes per transport.
    #[arg(long, default_value_t = 10)]
    server_max_probes: usize,
    /// Runs of a Server probe before it counts as INVALID: one hiccup of a
    /// shared machine should not end a transport's climb.
    #[arg(long, default_value_t = 2)]
    server_attempts: usize,
    /// Server latency bound, in milliseconds.
    #[arg(long, default_value_t = 100)]
    server_latency_ms: u64,
    /// Runs of each Offline and SingleStream setup (interleaved); the
    /// median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Round trips of the bare Name() probe.
    #[arg(long, default_value_t = 20000)]
    pings: usize,
    /// A smoke run: 1 s runs, one repeat, two Server probes.
    #[arg(long)]
    quick: bool,
    /// Internal: serve as the echo of the floor measurement (tcp or quic)
    /// instead of benchmarking; started by the bench itself.
    #[arg(long, hide = true, value_name = "TRANSPORT")]
    echo_server: Option<String>,
    /// Internal: where the echo server keeps its certificates.
    #[arg(long, hide = true, value_name = "DIR", requires = "echo_server")]
    echo_dir: Option<std::path::PathBuf>,
    /// Internal: the echo server's runtime threads (one per CPU unless
    /// given), as the node's `--io-threads` it stands beside.
    #[arg(long, hide = true, value_name = "N", requires = "echo_server")]
    echo_io_threads: Option<usize>,
}

/// What the summary of one run says.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    valid: bool,
    samples_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
}

fn outcome(run: &LoadgenRun, rate_label: &str) -> Result<Outcome> {
    run.expect_success()?;
    let summary = run.summary()?;
    let number = |label: &str| -> Result<f64> {
        summary_value(&summary, label)
            .with_context(|| format!("no {label:?} in the summary"))?
            .parse::<f64>()
            .with_context(|| format!("{label:?} is not a number"))
    };
    let result = summary_value(&summary, "Result is").context("no result in the summary")?;
    Ok(Outcome {
        valid: result == "VALID",
        samples_per_s: number(rate_label)?,
        p50_us: number("50.00 percentile latency (ns)")? / 1e3,
        p99_us: number("99.00 percentile latency (ns)")? / 1e3,
        mean_us: number("Mean latency (ns)")? / 1e3,
    })
}

/// Where a run sends its queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// `--sut null` in the LoadGen node's process.
    Null,
    /// The synthetic backend in-process: the node's batcher without a
    /// network.
    InProcess,
    /// Through the QDL.
    Network(Route),
}

/// How the nodes a run goes through were started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeTuning {
    /// As they start by default: I/O threads one per CPU, samples run on
    /// device threads.
    Default,
    /// `--io-threads 1`: one thread for their network I/O.
    OneIoThread,
    /// `--run-on-io-thread`: samples run on the one I/O thread that
    /// received them, no device thread.
    OnIoThread,
}

impl NodeTuning {
    const ALL: [NodeTuning; 3] = [
        NodeTuning::Default,
        NodeTuning::OneIoThread,
        NodeTuning::OnIoThread,
    ];

    /// The node's flags.
    fn flags(self) -> &'static [&'static str] {
        match self {
            NodeTuning::Default => &[],
            NodeTuning::OneIoThread => &["--io-threads", "1"],
            NodeTuning::OnIoThread => &["--run-on-io-thread"],
        }
    }

    /// The threads of the node's network I/O, as its echo gets them.
    fn io_threads(self) -> Option<usize> {
        match self {
            NodeTuning::Default => None,
            NodeTuning::OneIoThread | NodeTuning::OnIoThread => Some(1),
        }
    }

    /// The name of the node a run with this tuning goes through (the
    /// default tuning's cluster has a second, "wire-b").
    fn node_name(self) -> &'static str {
        match self {
            NodeTuning::Default => "wire-a",
            NodeTuning::OneIoThread => "wire-io1",
            NodeTuning::OnIoThread => "wire-on-io",
        }
    }

    fn label(self) -> &'static str {
        match self {
            NodeTuning::Default => "node I/O threads one per CPU",
            NodeTuning::OneIoThread => "node `--io-threads 1`",
            NodeTuning::OnIoThread => "node `--run-on-io-thread`",
        }
    }
}

/// A run through the QDL: the transport, and how the machine and the
/// node are tuned for latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Route {
    setup: Setup,
    /// How its nodes were started.
    node: NodeTuning,
    /// `--cpu-latency-us 0` held by the LoadGen node for the machine
    /// (every process of the bench): idle CPUs poll instead of halting.
    polling: bool,
    /// The QDL polls for the next query after the last answer, as it
    /// does by default in SingleStream; false runs with
    /// `--poll-next-query-us 0`, to show what the poll takes off.
    qdl_polls: bool,
}

impl Route {
    /// The nodes as they start by default, the machine untuned.
    fn plain(setup: Setup) -> Route {
        Route {
            setup,
            node: NodeTuning::Default,
            polling: false,
            qdl_polls: true,
        }
    }

    /// How the node and the machine are tuned, in words.
    fn tuning(self) -> String {
        format!(
            "{}, idle CPUs {}{}",
            self.node.label(),
            if self.polling {
                "polling (`--cpu-latency-us 0`)"
            } else {
                "halting"
            },
            if self.qdl_polls {
                ""
            } else {
                ", QDL not polling for the next query (`--poll-next-query-us 0`)"
            }
        )
    }
}

impl Target {
    fn label(self) -> String {
        match self {
            Target::Null => "null SUT".into(),
            Target::InProcess => "synthetic in-process".into(),
            Target::Network(route) => format!("{} ({})", route.setup.name(), route.tuning()),
        }
    }
}

struct Bench<'a> {
    cli: &'a Cli,
    dir: &'a Path,
    clusters: BenchClusters,
    /// One node per transport for each other tuning, as each says.
    tuned: Vec<(NodeTuning, BenchClusters)>,
}

impl Bench<'_> {
    fn run(
        &self,
        target: Target,
        scenario: &str,
        conf: UserConf,
        one_node: bool,
    ) -> Result<Outcome> {
        let run_dir = test_dir(&format!("wire-{scenario}"))?;
        let conf = write_file(self.dir, "user.conf", &conf.to_string())?;
        let mut args: Vec<String> = [
            "--scenario",
            scenario,
            "--benchmark",
            "null",
            "--no-trace",
            "--user-conf",
            conf.to_str().context("utf-8 path")?,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        match target {
            Target::Null => args.extend(["--sut".into(), "null".into()]),
            Target::InProcess => args.extend(zero_cost_in_process_flags()),
            Target::Network(route) => {
                let clusters = self
                    .tuned
                    .iter()
                    .find(|(tuning, _)| *tuning == route.node)
                    .map_or(&self.clusters, |(_, clusters)| clusters);
                let flags = clusters.flags(route.setup).context("a network setup")?;
                args.extend(if one_node {
                    only_first_node(flags)
                } else {
                    flags
                });
                if route.polling {
                    args.extend(["--cpu-latency-us".into(), "0".into()]);
                }
                if !route.qdl_polls {
                    args.extend(["--poll-next-query-us".into(), "0".into()]);
                }
            }
        }
        let deadline = Duration::from_secs(self.cli.seconds * 6 + 60);
        let run = loadgen(&run_dir, &args, deadline)?;
        let rate = match scenario {
            "Offline" => "Samples per second",
            "Server" => "Completed samples per second",
            _ => "QPS w/o loadgen overhead",
        };
        outcome(&run, rate)
            .with_context(|| format!("{} {scenario} in {}", target.label(), run_dir.display()))
    }
}

/// The `--sut-node` flags of the first node only (and the TLS flags).
fn only_first_node(flags: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut nodes = 0;
    let mut it = flags.into_iter();
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        if flag == "--sut-node" {
            nodes += 1;
            if nodes > 1 {
                continue;
            }
        }
        out.push(flag);
        out.push(value);
    }
    out
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.seconds = 1;
        cli.repeat = 1;
        cli.pings = 2000;
        cli.server_max_probes = 2;
        cli.server_attempts = 1;
    }
    if let Some(transport) = &cli.echo_server {
        let dir = cli.echo_dir.clone().unwrap_or_default();
        let served =
            EchoTransport::parse(transport).and_then(|t| echo::serve(t, &dir, cli.echo_io_threads));
        return match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("wire-bench --echo-server: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    finish_benchmark("wire-bench", bench(&cli))
}

fn bench(cli: &Cli) -> Result<String> {
    if cli.repeat == 0
        || cli.server_attempts == 0
        || cli.server_max_probes == 0
        || cli.seconds == 0
        || cli.server_start == 0
    {
        bail!("--repeat, --server-attempts, --server-max-probes, --server-start and --seconds need at least one");
    }
    if !(cli.server_resolution > 0.0 && cli.server_resolution < 1.0) {
        bail!(
            "--server-resolution {} is not a fraction between 0 and 1",
            cli.server_resolution
        );
    }
    loadgen_node_bin()?;
    let dir = test_dir("wire-bench")?;
    let default = NodeTuning::Default.node_name();
    let clusters = BenchClusters::start(&dir, &[default, "wire-b"], &zero_cost_node("null"), &[])?;
    let mut tuned = Vec::new();
    for tuning in [NodeTuning::OneIoThread, NodeTuning::OnIoThread] {
        let name = tuning.node_name();
        let nodes = BenchClusters::start(
            &dir.join(name),
            &[name],
            &zero_cost_node("null"),
            tuning.flags(),
        )?;
        tuned.push((tuning, nodes));
    }
    let bench = Bench {
        cli,
        dir: &dir,
        clusters,
        tuned,
    };
    let network = [Setup::Grpc, Setup::Quic];
    let ms = cli.seconds * 1000;

    // Server: one search per transport, a probe of each in turn.
    let mut highest: [Option<(u64, Outcome)>; 2] = [None, None];
    let mut searches = [0, 1].map(|_| {
        QpsSearch::new(
            cli.server_start,
            cli.server_resolution,
            cli.server_max_probes,
        )
    });
    let mut server_rows = String::new();
    for step in 1.. {
        if searches.iter().all(|s| s.next().is_none()) {
            break;
        }
        let mut cells = Vec::new();
        for (i, setup) in network.iter().enumerate() {
            let Some(qps) = searches[i].next() else {
                cells.push("—".to_string());
                continue;
            };
            eprintln!("wire-bench: Server {qps} QPS over {}", setup.name());
            let conf = UserConf::new()
                .set("*.Server.target_qps", qps)
                .set("*.Server.target_latency", cli.server_latency_ms)
                .set("*.Server.min_duration", ms)
                .set("*.Server.min_query_count", 1);
            let mut o = bench.run(
                Target::Network(Route::plain(*setup)),
                "Server",
                conf.clone(),
                false,
            )?;
            for _ in 1..cli.server_attempts {
                if o.valid {
                    break;
                }
                eprintln!("wire-bench: again");
                o = bench.run(
                    Target::Network(Route::plain(*setup)),
                    "Server",
                    conf.clone(),
                    false,
                )?;
            }
            cells.push(format!(
                "{qps}: {} ({:.0}/s, p99 {:.1} ms)",
                if o.valid { "VALID" } else { "INVALID" },
                o.samples_per_s,
                o.p99_us / 1e3
            ));
            searches[i].record(qps, o.valid);
            if o.valid && highest[i].is_none_or(|(best, _)| qps > best) {
                highest[i] = Some((qps, o));
            }
        }
        writeln!(server_rows, "| {step} | {} | {} |", cells[0], cells[1])?;
    }

    // Offline and SingleStream, interleaved repeats.
    let offline_conf = UserConf::new()
        .set("*.Offline.target_qps", 3_000_000)
        .set("*.Offline.min_duration", ms)
        .set("*.Offline.min_query_count", 1);
    // A fixed number of queries for every target (the null SUT would
    // need millions to fill a duration).
    let single_conf = UserConf::new()
        .set("*.SingleStream.target_latency", 1)
        .set("*.SingleStream.min_duration", 0)
        .set("*.SingleStream.min_query_count", cli.seconds * 10_000);
    // Through the QDL: the nodes as they start by default, with one I/O
    // thread, and running samples on it; each again with idle CPUs
    // polling, where this process may ask for it; and the lowest-latency
    // tuning once more with the QDL not polling for the next query.
    let polling = sut_node::host::cpu_latency::CpuLatencyRequest::hold(0).map(drop);
    let mut routes: Vec<Route> = [false, true]
        .into_iter()
        .filter(|&polling_too| !polling_too || polling.is_ok())
        .flat_map(|polling| {
            NodeTuning::ALL.into_iter().flat_map(move |node| {
                network.map(|setup| Route {
                    setup,
                    node,
                    polling,
                    qdl_polls: true,
                })
            })
        })
        .collect();
    if polling.is_ok() {
        routes.extend(network.map(|setup| Route {
            setup,
            node: NodeTuning::OnIoThread,
            polling: true,
            qdl_polls: false,
        }));
    }
    let single_targets: Vec<Target> = [Target::Null, Target::InProcess]
        .into_iter()
        .chain(routes.iter().copied().map(Target::Network))
        .collect();
    let mut offline: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut single: Vec<Vec<Outcome>> = vec![Vec::new(); single_targets.len()];
    for round in 0..cli.repeat {
        for (i, setup) in network.iter().enumerate() {
            eprintln!(
                "wire-bench: Offline over {} ({}/{})",
                setup.name(),
                round + 1,
                cli.repeat
            );
            let o = bench.run(
                Target::Network(Route::plain(*setup)),
                "Offline",
                offline_conf.clone(),
                false,
            )?;
            offline[i].push(o.samples_per_s);
        }
        for (i, target) in single_targets.iter().enumerate() {
            eprintln!(
                "wire-bench: SingleStream {} ({}/{})",
                target.label(),
                round + 1,
                cli.repeat
            );
            single[i].push(bench.run(*target, "SingleStream", single_conf.clone(), true)?);
        }
    }
    let med = |runs: &[Outcome], f: fn(&Outcome) -> f64| -> f64 {
        median(&runs.iter().map(f).collect::<Vec<_>>())
    };
    let single_med: Vec<[f64; 3]> = single
        .iter()
        .map(|runs| {
            [
                med(runs, |o| o.p50_us),
                med(runs, |o| o.p99_us),
                med(runs, |o| o.mean_us),
            ]
        })
        .collect();

    // Bare round trips: Name() from this process, no LoadGen, no batcher.
    let pings = ping_both(&bench.clusters, cli.pings)?;
    // The floor: a bare echo of a query's size over each transport, the
    // echo tuned as each route's node and machine are.
    let query_bytes = one_sample_query_bytes();
    // Tunings whose echo is the same (one I/O thread, with or without
    // samples on it) share one measurement of it, so their rows differ
    // only by netdiv's path.
    let mut floors: Vec<(Route, [(f64, f64); 2])> = Vec::new();
    for route in routes.iter().filter(|r| r.setup == Setup::Grpc) {
        let same_echo = floors.iter().find(|(measured, _)| {
            (measured.node.io_threads(), measured.polling)
                == (route.node.io_threads(), route.polling)
        });
        let floor = match same_echo {
            Some((_, floor)) => *floor,
            None => echo_floor(&dir, query_bytes, cli.pings, *route)?,
        };
        floors.push((*route, floor));
    }
    // The median p50 / p99 / mean of the runs through `route`.
    let through = |route: Route| -> [f64; 3] {
        single_targets
            .iter()
            .position(|t| *t == Target::Network(route))
            .map_or([f64::NAN; 3], |i| single_med[i])
    };

    let mut out = String::new();
    writeln!(
        out,
        "Two sut-nodes per transport (one for SingleStream), and one more with `--io-threads 1` and one with `--run-on-io-thread`, synthetic backend at zero cost, \
         4-byte samples (`--benchmark null`), loopback; Server probes {} s each with a {} ms \
         bound, searched to {} %; Offline {} s runs, SingleStream {} queries; median of {} runs.",
        cli.seconds,
        cli.server_latency_ms,
        cli.server_resolution * 100.0,
        cli.seconds,
        cli.seconds * 10_000,
        cli.repeat
    )?;
    writeln!(out, "{}", machine_description())?;
    writeln!(out)?;
    let best_qps = |i: usize| highest[i].map_or(0, |(qps, _)| qps);
    let lowest_invalid = |i: usize| {
        searches[i]
            .invalid
            .map_or("none".to_string(), |q| q.to_string())
    };
    let best = |i: usize| highest[i].map_or(0.0, |(_, o)| o.samples_per_s);
    let (grpc_qps, quic_qps) = (best_qps(0), best_qps(1));
    let ss = &single_med;
    let (grpc, quic) = (
        through(Route::plain(Setup::Grpc)),
        through(Route::plain(Setup::Quic)),
    );
    let polled = |setup| Route {
        polling: true,
        ..Route::plain(setup)
    };
    let polled = polling
        .is_ok()
        .then(|| (through(polled(Setup::Grpc)), through(polled(Setup::Quic))));
    writeln!(out, "| | gRPC | QUIC | QUIC / gRPC |")?;
    writeln!(out, "|---|---|---|---|")?;
    writeln!(
        out,
        "| highest VALID Server QPS probed | {grpc_qps} (completed {:.0}/s) | {quic_qps} (completed {:.0}/s) | {:.0} % |",
        best(0),
        best(1),
        ratio(quic_qps as f64, grpc_qps as f64)
    )?;
    writeln!(
        out,
        "| lowest INVALID Server QPS probed | {} | {} | |",
        lowest_invalid(0),
        lowest_invalid(1)
    )?;
    let (og, oq) = (median(&offline[0]), median(&offline[1]));
    writeln!(
        out,
        "| Offline samples/s | {og:.0} | {oq:.0} | {:.0} % |",
        ratio(oq, og)
    )?;
    for (label, k) in [("p50", 0), ("p99", 1), ("mean", 2)] {
        writeln!(
            out,
            "| SingleStream {label} (µs), above the null SUT's {:.2} | {:.1} (+{:.1}) | {:.1} (+{:.1}) | |",
            ss[0][k],
            grpc[k],
            grpc[k] - ss[0][k],
            quic[k],
            quic[k] - ss[0][k]
        )?;
    }
    if let Some((grpc, quic)) = polled {
        for (label, k) in [("p50", 0), ("p99", 1)] {
            writeln!(
                out,
                "| SingleStream {label} (µs) with `--cpu-latency-us 0`, above the null SUT | {:.1} (+{:.1}) | {:.1} (+{:.1}) | |",
                grpc[k],
                grpc[k] - ss[0][k],
                quic[k],
                quic[k] - ss[0][k]
            )?;
        }
    }
    if let Err(e) = &polling {
        writeln!(out)?;
        writeln!(out, "Not measured with `--cpu-latency-us 0`: {e}.")?;
    }
    writeln!(out)?;
    writeln!(out, "Server probes:")?;
    writeln!(out)?;
    writeln!(out, "| probe | gRPC | QUIC |")?;
    writeln!(out, "|---|---|---|")?;
    out.push_str(&server_rows);
    writeln!(out)?;
    writeln!(
        out,
        "Where a SingleStream query's time goes: each path measured on its own (p50 / p99, µs)."
    )?;
    writeln!(out)?;
    writeln!(out, "| path | gRPC | QUIC |")?;
    writeln!(out, "|---|---|---|")?;
    writeln!(
        out,
        "| the LoadGen and the null SUT (issue, complete) | {:.1} / {:.1} | same |",
        ss[0][0], ss[0][1]
    )?;
    writeln!(
        out,
        "| the LoadGen and the node's synthetic device in-process (batcher, device thread) | {:.1} / {:.1} | same |",
        ss[1][0], ss[1][1]
    )?;
    writeln!(
        out,
        "| a bare Name() round trip from a single-threaded client (no LoadGen, no batcher) | {:.1} / {:.1} | {:.1} / {:.1} |",
        pings[0].0, pings[0].1, pings[1].0, pings[1].1
    )?;
    writeln!(
        out,
        "| the whole path: LoadGen, QDL, link, node, batcher, device and back | {:.1} / {:.1} | {:.1} / {:.1} |",
        grpc[0], grpc[1], quic[0], quic[1]
    )?;
    if let Some((grpc, quic)) = polled {
        writeln!(
            out,
            "| the whole path, idle CPUs polling (`--cpu-latency-us 0`) | {:.1} / {:.1} | {:.1} / {:.1} |",
            grpc[0], grpc[1], quic[0], quic[1]
        )?;
    }
    writeln!(out)?;
    write_floors(&mut out, &floors, through, query_bytes, cli.pings)?;
    Ok(out)
}

/// The floor table: for each tuning (the node's I/O threads, the idle
/// CPUs) and each transport, the bare echo's p50 / p99, the whole path
/// through netdiv, and what netdiv adds above the floor.
fn write_floors(
    out: &mut String,
    floors: &[(Route, [(f64, f64); 2])],
    through: impl Fn(Route) -> [f64; 3],
    query_bytes: usize,
    pings: usize,
) -> Result<()> {
    writeln!(
        out,
        "The floor beside it: a bare echo of the query's {query_bytes} bytes, to another \
         process, on each transport with the same runtime and settings (tokio TCP for gRPC, \
         one quinn stream for QUIC; the echo server's threads as the node's I/O threads, \
         measured once for each thread count, the idle CPUs as in the run), {pings} round trips; and what netdiv adds above it \
         (the whole path minus the floor; goal: at most 30 µs at p50 and 60 µs at p99). \
         p50 / p99, µs."
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| transport | tuning | the floor: a bare echo | the whole path through netdiv | netdiv adds |"
    )?;
    writeln!(out, "|---|---|---|---|---|")?;
    for (i, setup) in [Setup::Grpc, Setup::Quic].into_iter().enumerate() {
        for (route, floor) in floors {
            let route = Route { setup, ..*route };
            let (floor, path) = (floor[i], through(route));
            writeln!(
                out,
                "| {} | {} | {:.1} / {:.1} | {:.1} / {:.1} | {:+.1} / {:+.1} |",
                setup.name(),
                route.tuning(),
                floor.0,
                floor.1,
                path[0],
                path[1],
                path[0] - floor.0,
                path[1] - floor.1
            )?;
        }
    }
    Ok(())
}

/// The size of the message a SingleStream query of one 4-byte sample
/// travels in (the QDL's query message).
fn one_sample_query_bytes() -> usize {
    use prost::Message as _;
    pb::Query {
        query_id: 1 << 20,
        samples: vec![pb::Sample {
            response_id: 1 << 40,
            data: vec![0u8; 4].into(),
            codec: 0,
            decoded_size: 4,
        }],
        ..Default::default()
    }
    .encoded_len()
}

/// p50 and p99 of `count` echoes of `size` bytes over each transport, in
/// µs: [TCP, QUIC]; the echo server's threads as `route`'s node's I/O
/// threads, and idle CPUs held polling while it runs if `route` polls.
fn echo_floor(dir: &Path, size: usize, count: usize, route: Route) -> Result<[(f64, f64); 2]> {
    let _polling = route
        .polling
        .then(|| sut_node::host::cpu_latency::CpuLatencyRequest::hold(0))
        .transpose()
        .context("holding idle CPUs polling for the floor")?;
    let io_threads = route.node.io_threads();
    let mut floor = [(0.0, 0.0); 2];
    for (i, transport) in [EchoTransport::Tcp, EchoTransport::Quic]
        .into_iter()
        .enumerate()
    {
        let certs = dir.join(format!("echo-{}", transport.name()));
        std::fs::create_dir_all(&certs)?;
        let server = EchoServer::start(transport, &certs, io_threads)?;
        let times = echo::round_trips(transport, server.addr, &certs, size, count)
            .with_context(|| format!("the {} echo", transport.name()))?;
        floor[i] = percentiles(times);
    }
    Ok(floor)
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole * 100.0
    } else {
        f64::NAN
    }
}

/// p50 and p99 of `count` Name() round trips to the first node of each
/// transport, in µs, from a single-threaded client: [gRPC, QUIC].
fn ping_both(clusters: &BenchClusters, count: usize) -> Result<[(f64, f64); 2]> {
    // One thread: the client's I/O runs where it waits, so the round trip
    // has no hand-off on the client's side (the floor of the transport).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let grpc_node = &clusters.cluster(Setup::Grpc).nodes[0];
        let quic_node = &clusters.cluster(Setup::Quic).nodes[0];
        Ok([
            percentiles(ping_grpc(grpc_node, count).await?),
            percentiles(ping_quic(quic_node, count).await?),
        ])
    })
}

async fn ping_grpc(node: &NodeProcess, count: usize) -> Result<Vec<Duration>> {
    let client = grpc_client(node, ClientCert::None).await?;
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let request = pb::NameRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        };
        let started = Instant::now();
        client.clone().name(versioned(request)).await?;
        times.push(started.elapsed());
    }
    Ok(times)
}

async fn ping_quic(node: &NodeProcess, count: usize) -> Result<Vec<Duration>> {
    let conn = quic_connect(node, ClientCert::None, netdiv_proto::ALPN).await?;
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let request = pb::NameRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        };
        let started = Instant::now();
        quic_request(&conn, quic_request::Kind::Name(request)).await?;
        times.push(started.elapsed());
    }
    Ok(times)
}

fn percentiles(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let at = |q: f64| {
        let i = ((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1));
        times.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
    };
    (at(0.5), at(0.99))
}
