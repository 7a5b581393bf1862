//! Smoke runs of the wire-speed and fleet benchmarks, so they keep working
//! between the full runs recorded in docs/benchmarks.md.

use std::process::Command;

use anyhow::{ensure, Result};
use netdiv_tests::netns;
use netdiv_tests::prerequisites::skip_unless_ci;

/// Runs a benchmark binary with `--quick` against the release nodes and
/// returns its report; an error with its output if it failed.
fn quick_run(program: &str) -> Result<String> {
    quick_run_with(program, &[])
}

/// [`quick_run`] with more flags.
fn quick_run_with(program: &str, flags: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .arg("--quick")
        .args(flags)
        .env("NETDIV_LOADGEN_NODE", netdiv_tests::loadgen_node_bin()?)
        .env("NETDIV_SUT_NODE", netdiv_tests::sut_node_bin()?)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "{program} --quick failed:\n{stdout}\n{stderr}"
    );
    Ok(stdout)
}

/// `link-rate --quick`: a sut-node in its own namespace behind a veth
/// shaped to 1 Gbit/s; both transports must deliver at least 80 % of the
/// rate in sample bytes, and no more than the link can carry (the shaping
/// is real). Idle CPUs poll while it runs (`--cpu-latency-us 0`): on a VM
/// whose halted vCPUs take milliseconds to wake, every wait of the sender
/// and the receiver would cost that long.
#[test]
fn link_rate_smoke_fills_a_shaped_gigabit_link() -> Result<()> {
    if !netns::available() {
        return skip_unless_ci("root, `ip netns` and `tc` (a shaped veth link)");
    }
    let stdout = quick_run_with(env!("CARGO_BIN_EXE_link-rate"), &["--cpu-latency-us", "0"])?;
    for transport in ["grpc", "quic"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| 1000 | {transport} | none |")))
            .ok_or_else(|| anyhow::anyhow!("no {transport} row in:\n{stdout}"))?;
        let goodput: f64 = row.split('|').nth(4).unwrap_or("").trim().parse()?;
        ensure!(
            (800.0..=1000.0 * 1.02).contains(&goodput),
            "{transport}: {goodput} Mbit/s of samples over a 1000 Mbit/s link:\n{stdout}"
        );
    }
    Ok(())
}

/// `bytes-per-cpu --quick`: iperf3 and each transport (gRPC plain and
/// with TLS, QUIC) move ResNet-50 samples over an unshaped veth into a
/// namespace at Ethernet's standard MTU (1500), and every row of the table
/// has its throughput and its bytes per CPU-second, and QUIC's its datagram
/// size (within the link's MTU) and datagrams per send;
/// 4-byte samples fill the small-query table (samples/s, CPU-µs each);
/// a line says how fast one CPU copies the loaded set out of memory.
/// On two CPUs or more it runs `--pin` (each end on a CPU of its own; the
/// benchmark checks the node's CPU list itself) and says so.
/// The figures themselves are the benchmark's business.
#[test]
fn bytes_per_cpu_smoke_fills_its_table() -> Result<()> {
    if !netns::available() {
        return skip_unless_ci("root and `ip netns` (a veth link into a namespace)");
    }
    let pin = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let flags: &[&str] = if pin { &["--pin"] } else { &[] };
    let stdout = quick_run_with(env!("CARGO_BIN_EXE_bytes-per-cpu"), flags)?;
    ensure!(
        !pin || stdout.contains("; pinned: the LoadGen node and iperf3's client on CPU 0,"),
        "a pinned run that does not say so:\n{stdout}"
    );
    // The memory line: what one CPU copies out of memory, a positive rate.
    let memory: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Memory: one CPU copies the largest loaded set ("))
        .and_then(|rest| rest.split(" out of memory at ").nth(1))
        .and_then(|rest| rest.split(" GB/s").next())
        .and_then(|rate| rate.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no memory line in:\n{stdout}"))?;
    ensure!(memory > 0.0, "memory copy rate {memory}\n{stdout}");
    for label in [
        "iperf3 (TCP, one stream)",
        "netdiv gRPC (plain)",
        "netdiv gRPC (TLS 1.3)",
        "netdiv QUIC (TLS 1.3)",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .ok_or_else(|| anyhow::anyhow!("no row {label:?} in:\n{stdout}"))?;
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // The smoke runs over Ethernet's standard MTU.
        ensure!(cells[2] == "1500", "{label}: MTU {:?}\n{stdout}", cells[2]);
        for cell in &cells[4..6] {
            let value: f64 = cell.parse()?;
            ensure!(value > 0.0, "{label}: {cell:?}\n{stdout}");
        }
        // QUIC's row says what its datagrams were (from the QDL's log):
        // MTU discovery reached the link's size (1472 bytes with IP and
        // UDP headers at most; unbounded by the route it stayed at 1200).
        if label.contains("QUIC") {
            let size: u32 = cells[7]
                .split(" B,")
                .next()
                .and_then(|b| b.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("{label}: datagrams {:?}\n{stdout}", cells[7]))?;
            ensure!(
                (1400..=1472).contains(&size) && cells[7].contains(" per send (GSO "),
                "{label}: datagrams {:?} on a 1500-byte link\n{stdout}",
                cells[7]
            );
        } else {
            ensure!(
                cells[7] == "-",
                "{label}: datagrams {:?}\n{stdout}",
                cells[7]
            );
        }
        if label.starts_with("iperf3") {
            continue;
        }
        // Each transport's row of the small-query table: samples/s and
        // CPU-µs per sample.
        let small = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("| {label} |")))
            .nth(1)
            .ok_or_else(|| anyhow::anyhow!("no small-query row {label:?} in:\n{stdout}"))?;
        let cells: Vec<&str> = small.split('|').map(str::trim).collect();
        ensure!(
            cells[2] == "1500",
            "{label} small queries: MTU {:?}",
            cells[2]
        );
        for cell in &cells[3..5] {
            let value: f64 = cell.parse()?;
            ensure!(value > 0.0, "{label} small queries: {cell:?}\n{stdout}");
        }
    }
    Ok(())
}

/// `wire-bench --quick`: both transports and the null SUT run, and every
/// cell of its table is filled in (each transport's first Server probe has
/// a verdict, Offline and SingleStream figures are numbers above zero),
/// with the floor beside the latency: a bare echo on each transport, for
/// the nodes' default I/O threads, `--io-threads 1` and
/// `--run-on-io-thread` (and, as root, that once more with the QDL not
/// polling for the next query).
#[test]
fn wire_bench_smoke_fills_its_table() -> Result<()> {
    let stdout = quick_run(env!("CARGO_BIN_EXE_wire-bench"))?;
    let cells = |prefix: &str| -> Result<Vec<String>> {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .ok_or_else(|| anyhow::anyhow!("no row {prefix:?} in:\n{stdout}"))?;
        Ok(row.split('|').map(|c| c.trim().to_string()).collect())
    };
    // Whether a probe is VALID depends on the machine's load; that each
    // transport's probe ran and has a verdict does not.
    let server = cells("| highest VALID Server QPS probed")?;
    for cell in &server[2..4] {
        let _: u64 = cell.split_whitespace().next().unwrap_or("").parse()?;
    }
    let probe = cells("| 1 |")?;
    for cell in &probe[2..4] {
        ensure!(
            cell.starts_with("100000: VALID (") || cell.starts_with("100000: INVALID ("),
            "Server probe: {cell:?}\n{stdout}"
        );
    }
    let offline = cells("| Offline samples/s")?;
    for cell in &offline[2..4] {
        ensure!(cell.parse::<f64>()? > 0.0, "Offline: {cell:?}\n{stdout}");
    }
    let mut single = vec!["| SingleStream p50"];
    // As root, the same path with idle CPUs polling too.
    let polling = sut_node::host::cpu_latency::CpuLatencyRequest::hold(0).is_ok();
    if polling {
        single.push("| SingleStream p50 (µs) with `--cpu-latency-us 0`");
    }
    for prefix in single {
        for cell in &cells(prefix)?[2..4] {
            let us: f64 = cell.split_whitespace().next().unwrap_or("").parse()?;
            ensure!(us > 0.0, "{prefix}: {cell:?}\n{stdout}");
        }
    }
    // The floor beside the latency: for each transport and each tuning
    // (the node's default I/O threads, one, samples on it; idle CPUs
    // polling too, as root), a bare echo, the whole path and what netdiv
    // adds above the floor, each measured (p50 / p99); as root also the
    // lowest-latency tuning with the QDL not polling for the next query.
    let tunings = if polling { 7 } else { 3 };
    for transport in ["gRPC", "QUIC"] {
        let rows: Vec<Vec<String>> = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("| {transport} | ")))
            .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
            .collect();
        ensure!(
            rows.len() == tunings,
            "{transport}: {} floor rows, not {tunings}\n{stdout}",
            rows.len()
        );
        for row in &rows {
            let figures: Vec<f64> = row[3..6]
                .iter()
                .flat_map(|cell| cell.split('/'))
                .map(|f| f.trim().trim_start_matches('+').parse::<f64>())
                .collect::<Result<_, _>>()?;
            ensure!(
                figures.len() == 6 && figures.iter().all(|f| f.is_finite()) && figures[0] > 0.0,
                "floor row {row:?}\n{stdout}"
            );
        }
    }
    Ok(())
}

/// `fleet-bench --quick`: 2 and 16 nodes, null nodes and sut-node cores
/// in-process (`--local-nodes`) and real sut-node processes, each with a
/// row whose figures are
/// numbers: Offline samples/s, set-up and Name() times, the LoadGen
/// node's memory and CPU per sample, and every node of the fleet sent
/// samples (the bench itself checks that Name() reached every node).
#[test]
fn fleet_bench_smoke_fills_its_table() -> Result<()> {
    let stdout = quick_run(env!("CARGO_BIN_EXE_fleet-bench"))?;
    for nodes in ["2", "16"] {
        for kind in ["null nodes", "in-process", "processes"] {
            let prefix = format!("| {nodes} | {kind} |");
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&prefix))
                .ok_or_else(|| anyhow::anyhow!("no row {prefix:?} in:\n{stdout}"))?;
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            // Offline samples/s, its ratio, peak RSS, CPU per sample.
            for i in [3, 4, 9, 11] {
                let value: f64 = cells[i].parse()?;
                ensure!(value > 0.0, "{prefix} cell {i}: {:?}\n{stdout}", cells[i]);
            }
            // Set-up and Name() times: measured (in-process, a few µs).
            for i in [7, 8] {
                let value: f64 = cells[i].parse()?;
                ensure!(value >= 0.0, "{prefix} cell {i}: {:?}\n{stdout}", cells[i]);
            }
            ensure!(
                cells[12] == nodes,
                "{prefix}: samples went to {} of {nodes} nodes\n{stdout}",
                cells[12]
            );
            // Whether a Server probe is VALID depends on the machine's
            // load; that the search ran and has a verdict does not.
            ensure!(
                cells[5].parse::<u64>().is_ok() || cells[5].starts_with("none (INVALID at "),
                "{prefix} Server: {:?}\n{stdout}",
                cells[5]
            );
        }
    }
    Ok(())
}
