//! `fault-lab`: a Server run over the multi-chassis lab on one machine
//! (`netdiv_tests::lab`: the LoadGen node and every sut-node each in a
//! network namespace of its own, on a bridge, links shaped by `tc tbf`)
//! with faults on a schedule, and the resident memory of every process
//! sampled each second. By default it is the soak: 600 s with a fault
//! every 60 s (kill and restart, SIGTERM and restart, stall and continue,
//! partition and heal, slow link and back, on nodes 1.. in turn); it
//! prints the faults, the verdict and each process's memory slope.
//!
//! Needs root. Usage: `deploy/lab/fault-lab.sh` (builds and runs this),
//! e.g. `deploy/lab/fault-lab.sh --seconds 60 --every 10 --transport quic`
//! or `--faults 5:kill:1,8:restart:1,12:down:2,15:up:2`.

use std::process::ExitCode;

use anyhow::Result;
use netdiv_tests::bench::machine_description;
use netdiv_tests::lab::{self, parse_schedule};
use netdiv_tests::soak::{check_memory, soak, table, MemoryBounds, SoakOptions};

#[derive(Debug, clap::Parser)]
#[command(name = "fault-lab")]
struct Cli {
    /// grpc or quic.
    #[arg(long, default_value = "grpc", value_parser = ["grpc", "quic"])]
    transport: String,
    /// sut-nodes in the lab.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// The run's minimum duration, in seconds (the rules' 600).
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// A fault every this many seconds.
    #[arg(long, default_value_t = 60)]
    every: u64,
    /// Server queries per second.
    #[arg(long, default_value_t = 300)]
    qps: u64,
    /// Each link's rate, Mbit/s.
    #[arg(long, default_value_t = 1000)]
    rate_mbit: u64,
    /// Faults instead of the generated schedule:
    /// `SECONDS:ACTION:NODE[:MBIT],...` with ACTION kill, term, restart,
    /// impostor, stop, cont, down, up or rate.
    #[arg(long)]
    faults: Option<String>,
    /// Keep the run's files (logs, the LoadGen node's records).
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    use clap::Parser;
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fault-lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<()> {
    if !lab::available() {
        anyhow::bail!("the lab needs root, ip netns and tc");
    }
    let options = SoakOptions {
        transport: if cli.transport == "quic" {
            "quic"
        } else {
            "grpc"
        },
        nodes: cli.nodes,
        seconds: cli.seconds,
        every: cli.every.max(1),
        qps: cli.qps,
        rate_mbit: cli.rate_mbit,
        faults: cli.faults.as_deref().map(parse_schedule).transpose()?,
    };
    let dir = netdiv_tests::test_dir("fault-lab")?;
    let report = soak(&options, &dir)?;
    println!(
        "fault lab: {} nodes over {}, Server at {} queries/s for {} s, links at {} Mbit/s",
        options.nodes, options.transport, options.qps, options.seconds, options.rate_mbit
    );
    println!("machine: {}", machine_description());
    for (at, fault) in &report.faults {
        println!("  {:7.2} s  {fault}", at.as_secs_f64());
    }
    let summary = report.run.summary()?;
    let result = netdiv_tests::mlperf_logs::summary_value(&summary, "Result is")
        .map_or("no result line".to_string(), |r| format!("Result is : {r}"));
    println!("{result}; every issued sample completed exactly once");
    println!("\n{}", table(&report.trends));
    if cli.keep {
        let kept = dir.keep();
        println!("files kept in {}", kept.display());
    }
    let bounds = MemoryBounds::for_seconds(options.seconds);
    check_memory(&report.trends, report.qps, bounds)?;
    println!(
        "memory within bounds: nodes under {:+.2} MB/min, the LoadGen node under {:.0} B per \
         issued sample",
        bounds.node_mb_per_min, bounds.loadgen_bytes_per_sample
    );
    Ok(())
}
