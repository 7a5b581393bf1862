//! `bytes-per-cpu`: what each byte a sample carries costs in CPU, against
//! what the kernel needs to move it. A sut-node in its own network
//! namespace behind an unshaped veth pair, at Ethernet's standard MTU
//! (1500) and at a jumbo one (9000), the synthetic backend at zero cost;
//! Offline runs of ResNet-50-sized samples (150,528 B), unless `--quick`
//! of 3D-UNet's real sizes (the KiTS19
//! volumes, 132 MB on average), over gRPC in plain text, gRPC with TLS and
//! QUIC (always TLS 1.3). For each it prints the sample bytes moved per
//! second and per CPU-second of both processes together (the LoadGen
//! node's from its exit, the node's from `/proc` across the run), beside
//! iperf3 (TCP, one stream) over the same link in the same run, with
//! QUIC's datagram size and datagrams per send (segmentation offload) and
//! the LoadGen node's peak memory against the samples its QSL held, and
//! how fast one CPU copies a set that size out of memory (iperf3 never
//! reads its payload from there; netdiv's sender must). A
//! second table gives 4-byte samples (`--benchmark null`): samples/s and
//! CPU-µs per sample of both ends, per transport.
//!
//! Needs root (`ip netns`) and iperf3 (`tests/setup/iperf3.sh` installs
//! Debian's package). Usage: `cargo run --release -p netdiv-tests --bin
//! bytes-per-cpu [--quick] [--mtu 1500,9000] [--pin]`; `--quick` is the
//! smoke run CI does (MTU 1500 only); `--pin` puts each end on a CPU of
//! its own.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

use netdiv_tests::bench::{copy_rate_from_memory, finish_benchmark, machine_description, median};
use netdiv_tests::binaries::workspace_root;
use netdiv_tests::configs::{node_toml, zero_cost_node, UserConf};
use netdiv_tests::netns::{self, Netns};
use netdiv_tests::network_run::{loadgen, LoadgenRun};
use netdiv_tests::process::run_with_deadline;
use netdiv_tests::sut_client::NodeProcess;
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};

/// Prints the bytes-per-CPU-second table.
#[derive(Debug, clap::Parser)]
#[command(name = "bytes-per-cpu")]
struct Cli {
    /// Seconds of each ResNet-50 run and of iperf3.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Runs of each case; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// ResNet-50 runs: Offline target_qps (a little above what the
    /// fastest transport carries, so every run lasts about `--seconds`).
    #[arg(long, default_value_t = 8000)]
    resnet_qps: u64,
    /// Transports to measure.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "grpc,grpc-tls,quic"
    )]
    transports: Vec<Transport>,
    /// Sample sizes to measure: ResNet-50's and 3D-UNet's real ones.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "resnet50,unet,small"
    )]
    samples: Vec<Samples>,
    /// The veth pair's MTUs, measured in this order.
    #[arg(long = "mtu", value_delimiter = ',', default_value = "1500,9000",
          value_parser = clap::value_parser!(u32).range(1280..=65535))]
    mtus: Vec<u32>,
    /// Small-query runs: Offline target_qps (its samples take each
    /// transport a few seconds).
    #[arg(long, default_value_t = 1_000_000)]
    small_qps: u64,
    /// The smoke run: ResNet-50 sizes at 1000 samples/s and 4-byte
    /// samples at 20,000/s, 2 s runs, one repeat, at MTU 1500.
    #[arg(long)]
    quick: bool,
    /// Each end on a CPU of its own: the LoadGen node and iperf3's client
    /// on CPU 0, the sut-node and iperf3's server on CPU 1, as on two
    /// machines. Unpinned, where the scheduler puts the threads of the
    /// two ends (together or apart) moves a run's figure by up to a
    /// fifth; pinned, netdiv's figure holds within a few per cent.
    #[arg(long)]
    pin: bool,
}

/// The CPUs of `--pin`: the sending end's, the node's.
const SENDER_CPU: usize = 0;
const NODE_CPU: usize = 1;

/// Keeps the calling thread, and the processes it starts from now on
/// (they inherit it), on `cpu`.
fn pin_this_thread(cpu: usize) -> Result<()> {
    ensure!(
        cpu < libc::CPU_SETSIZE as usize,
        "CPU {cpu} is past the set"
    );
    // SAFETY: a zeroed cpu_set_t is a valid empty set, CPU_SET writes
    // within it for a CPU below CPU_SETSIZE (checked above), and the call
    // reads the set whose size it is given.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if pinned != 0 {
        bail!(
            "cannot pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The CPUs process `pid` may run on, as the kernel lists them ("1",
/// "0-1").
fn allowed_cpus(pid: u32) -> Result<String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|cpus| cpus.trim().to_string())
        .with_context(|| format!("{path}: no Cpus_allowed_list"))
}

/// Runs `start` with the calling thread on `cpu` (what it starts stays
/// there), then puts the thread back on `back`.
fn started_on<T>(cpu: usize, back: usize, start: impl FnOnce() -> Result<T>) -> Result<T> {
    pin_this_thread(cpu)?;
    let started = start();
    pin_this_thread(back)?;
    started
}

/// 3D-UNet runs: every KiTS19 case twice.
const UNET_SAMPLES: u64 = 86;

/// One measured transfer.
#[derive(Clone, Copy, Debug)]
struct Moved {
    /// Sample (or iperf3 payload) bytes per second, in Gbit/s.
    gbit: f64,
    /// Bytes moved per CPU-second of both ends, in GB.
    gb_per_cpu_s: f64,
    /// QUIC only: what its link reported at close.
    datagrams: Option<Datagrams>,
    /// netdiv only: the LoadGen node's peak resident memory over the
    /// bytes of samples its QSL held.
    memory: Option<Memory>,
    /// netdiv only: samples completed per second.
    samples_per_s: f64,
    /// netdiv only: CPU time of both ends per sample, in µs.
    cpu_us_per_sample: f64,
}

/// The LoadGen node's memory against the samples it had to hold.
#[derive(Clone, Copy, Debug)]
struct Memory {
    peak_rss: u64,
    /// `None` from a LoadGen node that does not log what it loaded.
    loaded_set: Option<u64>,
}

impl Memory {
    /// From the run's peak RSS and its QSL's "samples loaded" log lines.
    fn of(run: &LoadgenRun) -> Option<Memory> {
        let loaded_set = run
            .stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["message"] == "samples loaded")
            .filter_map(|v| v["bytes"].as_u64())
            .max();
        Some(Memory {
            peak_rss: run.max_rss_bytes?,
            loaded_set,
        })
    }

    fn describe(memory: Option<Memory>) -> String {
        let gb = |b: u64| b as f64 / 1e9;
        match memory {
            Some(Memory {
                peak_rss,
                loaded_set: Some(loaded),
            }) => format!(
                "{:.2} / {:.2} ({:.2})",
                gb(peak_rss),
                gb(loaded),
                peak_rss as f64 / loaded.max(1) as f64
            ),
            Some(m) => format!("{:.2} / -", gb(m.peak_rss)),
            None => "-".into(),
        }
    }
}

/// The UDP side of a QUIC run, from the QDL's "QUIC link closed" log.
#[derive(Clone, Copy, Debug)]
struct Datagrams {
    /// The datagram size path-MTU discovery reached, in bytes.
    mtu: u64,
    /// Datagrams per send call: above 1 when segmentation offload (GSO)
    /// batched them.
    per_send: f64,
}

impl Datagrams {
    /// Read from the LoadGen node's log lines (JSON on stderr).
    fn from_log(stderr: &str) -> Option<Datagrams> {
        let line = stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["message"] == "QUIC link closed")?;
        let sent = line["datagrams_sent"].as_f64()?;
        let calls = line["send_calls"].as_f64().filter(|c| *c > 0.0)?;
        Some(Datagrams {
            mtu: line["mtu"].as_u64()?,
            per_send: sent / calls,
        })
    }

    fn describe(datagrams: Option<Datagrams>) -> String {
        match datagrams {
            Some(d) => format!(
                "{} B, {:.1} per send (GSO {})",
                d.mtu,
                d.per_send,
                if d.per_send > 1.0 { "on" } else { "off" }
            ),
            None => "-".into(),
        }
    }
}

/// The samples of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Samples {
    /// ResNet-50 inputs, 150,528 B each.
    Resnet50,
    /// 3D-UNet's KiTS19 volumes at their real sizes.
    Unet,
    /// 4-byte samples (`--benchmark null`): what a query costs apart
    /// from its bytes.
    Small,
}

impl Samples {
    fn benchmark(self) -> &'static str {
        match self {
            Samples::Resnet50 => "resnet50",
            Samples::Unet => "3d-unet-99",
            Samples::Small => "null",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Samples::Resnet50 => "ResNet-50 (150,528 B)",
            Samples::Unet => "3D-UNet (KiTS19 sizes, 132 MB mean)",
            Samples::Small => "4 B (null)",
        }
    }
}

/// How the LoadGen node reaches the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    Grpc,
    GrpcTls,
    Quic,
}

impl Transport {
    fn label(self) -> &'static str {
        match self {
            Transport::Grpc => "netdiv gRPC (plain)",
            Transport::GrpcTls => "netdiv gRPC (TLS 1.3)",
            Transport::Quic => "netdiv QUIC (TLS 1.3)",
        }
    }
}

/// CPU time process `pid` has used so far (user and system), from
/// `/proc/PID/stat` (in clock ticks of 1/100 s, Linux's USER_HZ).
fn process_cpu(pid: u32) -> Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // The command name (field 2) may hold spaces: count after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .with_context(|| format!("{path}: no field {}", i + 3))
    };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after ')'.
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// The sample bytes one run put on the wire, over how many seconds, and
/// how many samples completed.
fn traffic(run: &LoadgenRun) -> Result<(f64, f64, f64)> {
    run.expect_success()?;
    let record = run.record()?;
    ensure!(!record.nodes.is_empty(), "no nodes in the run record");
    let bytes: f64 = record
        .nodes
        .iter()
        .map(|n| n.traffic.bytes_sent as f64)
        .sum();
    let seconds = Some(record.qdl.traffic_seconds)
        .filter(|s| *s > 0.0)
        .context("no qdl.traffic_seconds in the run record")?;
    let completed = Some(record.qdl.completed as f64)
        .filter(|n| *n > 0.0)
        .context("no qdl.completed in the run record")?;
    Ok((bytes, seconds, completed))
}

/// One Offline run against `node`, measured.
fn netdiv_run(
    dir: &Path,
    benchmark: &str,
    conf: &Path,
    transport: Transport,
    node: &NodeProcess,
    certs: &Path,
) -> Result<Moved> {
    let url = match transport {
        Transport::Quic => format!("quic://{}", node.quic.context("QUIC address")?),
        _ => format!("grpc://{}", node.grpc.context("gRPC address")?),
    };
    let mut args: Vec<String> = [
        "--scenario",
        "Offline",
        "--benchmark",
        benchmark,
        "--no-trace",
        "--progress",
        "never",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
        "--sut-node",
        &url,
        // The QSL's "samples loaded" lines: the memory column's floor.
        "--log-level",
        "info,loadgen_node::qsl=debug",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if transport != Transport::Grpc {
        args.extend([
            "--dev-tls".to_string(),
            certs.display().to_string(),
            // The development certificate names localhost.
            "--tls-server-name".into(),
            "localhost".into(),
        ]);
    }
    let node_pid = node.child.id();
    let node_before = process_cpu(node_pid)?;
    let run = loadgen(dir, &args, Duration::from_secs(600))?;
    let node_cpu = process_cpu(node_pid)? - node_before;
    let (bytes, seconds, completed) =
        traffic(&run).with_context(|| format!("in {}", dir.display()))?;
    let loadgen_cpu = run.cpu.context("the LoadGen node's CPU time")?;
    Ok(Moved {
        gbit: bytes * 8.0 / seconds / 1e9,
        gb_per_cpu_s: bytes / 1e9 / (loadgen_cpu + node_cpu).as_secs_f64(),
        datagrams: Datagrams::from_log(&run.stderr),
        memory: Memory::of(&run),
        samples_per_s: completed / seconds,
        cpu_us_per_sample: (loadgen_cpu + node_cpu).as_secs_f64() * 1e6 / completed,
    })
}

/// iperf3's command, installed by the project's setup script if missing.
fn iperf3() -> Result<PathBuf> {
    let script = workspace_root().join("tests/setup/iperf3.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !output.status.success() {
        bail!("{} failed ({})", script.display(), output.status);
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// The one buffer iperf3's client sends from, again and again (its
/// default for TCP, named so the memory line can say it).
const IPERF3_BUFFER_KIB: u32 = 128;

/// One iperf3 TCP stream from here to a server in `ns` for `seconds`;
/// both processes' CPU from their exits.
fn iperf3_run(iperf3: &Path, ns: &Netns, seconds: u64, pin: bool) -> Result<Moved> {
    // The namespace is this run's own, so no other program holds a port
    // there: a fixed one cannot collide.
    let port = "5201";
    let mut server = Command::new("ip");
    server
        .args(["netns", "exec", &ns.name])
        .arg(iperf3)
        .args([
            "--server",
            "--one-off",
            "--bind",
            &ns.address,
            "--port",
            port,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let deadline = Duration::from_secs(seconds + 60);
    let server = std::thread::spawn(move || {
        if pin {
            pin_this_thread(NODE_CPU)?;
        }
        run_with_deadline(&mut server, deadline)
    });
    let mut client = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let output = Command::new(iperf3)
            .args(["--client", &ns.address, "--port", port, "--json"])
            .args(["--length", &format!("{IPERF3_BUFFER_KIB}K")])
            .args(["--time", &seconds.to_string()])
            .output()
            .context("cannot run iperf3")?;
        if output.status.success() {
            client = Some(output);
            break;
        }
    }
    let server = server
        .join()
        .map_err(|_| anyhow::anyhow!("the iperf3 server thread panicked"))??;
    let client = client.context("iperf3 could not reach its server in 5 s")?;
    let report: Value = serde_json::from_slice(&client.stdout).context("iperf3 --json")?;
    let received = &report["end"]["sum_received"];
    let bytes = received["bytes"].as_f64().with_context(|| {
        // Its report's `error`, if it wrote one, says why.
        let said = report["error"].as_str().unwrap_or("no error given");
        format!("iperf3: no bytes received ({said})")
    })?;
    let secs = received["seconds"].as_f64().context("iperf3: no seconds")?;
    // The client's own CPU: iperf3 reports it in percent of its wall time.
    let client_percent = report["end"]["cpu_utilization_percent"]["host_total"]
        .as_f64()
        .context("iperf3: no host CPU")?;
    let client_cpu = client_percent / 100.0 * secs;
    Ok(Moved {
        gbit: bytes * 8.0 / secs / 1e9,
        gb_per_cpu_s: bytes / 1e9 / (client_cpu + server.cpu.as_secs_f64()),
        datagrams: None,
        memory: None,
        samples_per_s: 0.0,
        cpu_us_per_sample: 0.0,
    })
}

/// The median of each figure over `runs`.
fn median_of(runs: &[Moved]) -> Moved {
    let pick = |f: fn(&Moved) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    Moved {
        gbit: pick(|m| m.gbit),
        gb_per_cpu_s: pick(|m| m.gb_per_cpu_s),
        datagrams: runs.iter().find_map(|m| m.datagrams),
        memory: runs
            .iter()
            .filter_map(|m| m.memory)
            .max_by_key(|m| m.peak_rss),
        samples_per_s: pick(|m| m.samples_per_s),
        cpu_us_per_sample: pick(|m| m.cpu_us_per_sample),
    }
}

fn bench(cli: &Cli) -> Result<String> {
    if !netns::available() {
        bail!("bytes-per-cpu needs root and `ip netns`");
    }
    if cli.repeat == 0 || cli.seconds == 0 {
        bail!("--repeat and --seconds must be at least 1");
    }
    loadgen_node_bin()?;
    // Before any pinning, which would show one CPU.
    let machine = machine_description();
    if cli.pin {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        ensure!(
            cpus > NODE_CPU,
            "--pin needs two CPUs; this machine has {cpus}"
        );
        // The LoadGen node and iperf3's client are started from here.
        pin_this_thread(SENDER_CPU)?;
    }
    let iperf3 = iperf3()?;
    let dir = test_dir("bytes-per-cpu")?;
    let certs = dir.join("certs");
    sut_node::tls::dev_certificates(&certs, false)?;
    // Each kind of samples: its node config and user.conf, written once
    // for every link.
    let mut cases = Vec::new();
    for &samples in &cli.samples {
        let benchmark = samples.benchmark();
        let node_conf = write_file(
            &dir,
            &format!("{benchmark}.toml"),
            &node_toml(&zero_cost_node(benchmark))?,
        )?;
        let conf = write_file(
            &dir,
            &format!("{benchmark}.conf"),
            &user_conf(cli, samples).to_string(),
        )?;
        cases.push(Case {
            samples,
            node_conf,
            conf,
        });
    }
    let ns = Netns::create()?;
    let mut links = Vec::new();
    for &mtu in &cli.mtus {
        ns.set_mtu(mtu)?;
        links.push(measure_link(cli, &ns, &iperf3, &cases, &certs, mtu)?);
    }
    let mut out = String::new();
    writeln!(out, "{machine}")?;
    writeln!(
        out,
        "A sut-node in a network namespace behind an unshaped veth pair (MTU {}), the \
         synthetic backend at zero cost; Offline; median of {} runs{}. CPU: both processes \
         together (the LoadGen node's from its exit, the node's from /proc across the run; \
         iperf3's client from its own report, its server from its exit).\n",
        cli.mtus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", then "),
        cli.repeat,
        match cli.pin {
            true => format!(
                "; pinned: the LoadGen node and iperf3's client on CPU {SENDER_CPU}, the node \
                 and iperf3's server on CPU {NODE_CPU}"
            ),
            false => String::new(),
        }
    )?;
    if let Some(line) = memory_line(&links) {
        writeln!(out, "{line}\n")?;
    }
    out.push_str(&bytes_table(&links)?);
    if cli.samples.contains(&Samples::Small) {
        out.push('\n');
        out.push_str(&small_table(&links)?);
    }
    Ok(out)
}

/// How fast one CPU (this thread's: the sender's, when pinned) copies the
/// largest set a run's QSL held out of memory. netdiv's sender reads every
/// sample byte from there, where iperf3 sends one buffer of
/// [`IPERF3_BUFFER_KIB`] over and over from cache, so a machine with slow
/// memory lowers netdiv's ratio to iperf3. `None` when no run said what it
/// loaded.
fn memory_line(links: &[Link]) -> Option<String> {
    let set = links
        .iter()
        .flat_map(|link| &link.measured)
        .filter_map(|(_, _, moved)| moved.memory?.loaded_set)
        .max()?;
    let rate = copy_rate_from_memory(set, Duration::from_secs(1));
    Some(format!(
        "Memory: one CPU copies the largest loaded set ({:.2} GB) out of memory at {rate:.1} \
         GB/s, 1 MiB at a time; each sample byte netdiv sends is read from there, where \
         iperf3 sends one {IPERF3_BUFFER_KIB} KiB buffer over and over from cache.",
        set as f64 / 1e9
    ))
}

/// Everything measured over the link at one MTU.
struct Link {
    mtu: u32,
    /// iperf3 over it: the kernel's floor.
    kernel: Moved,
    measured: Vec<(Samples, Transport, Moved)>,
}

/// One kind of samples and the files its runs read.
struct Case {
    samples: Samples,
    node_conf: PathBuf,
    conf: PathBuf,
}

/// iperf3 and every case of samples and transport over the link at `mtu`.
fn measure_link(
    cli: &Cli,
    ns: &Netns,
    iperf3: &Path,
    cases: &[Case],
    certs: &Path,
    mtu: u32,
) -> Result<Link> {
    eprintln!("bytes-per-cpu: the link at MTU {mtu}");
    let kernel = median_of(
        &(0..cli.repeat)
            .map(|_| iperf3_run(iperf3, ns, cli.seconds, cli.pin))
            .collect::<Result<Vec<_>>>()?,
    );
    let mut measured = Vec::new();
    for case in cases {
        for &transport in &cli.transports {
            let moved = measure(cli, ns, certs, case, transport)?;
            measured.push((case.samples, transport, moved));
        }
    }
    Ok(Link {
        mtu,
        kernel,
        measured,
    })
}

/// The Offline settings of a run of `samples`.
fn user_conf(cli: &Cli, samples: Samples) -> UserConf {
    let (qps, ms) = match samples {
        Samples::Resnet50 => (cli.resnet_qps, cli.seconds * 1000),
        Samples::Unet => (UNET_SAMPLES, 1000),
        Samples::Small => (cli.small_qps, cli.seconds * 1000),
    };
    UserConf::new()
        .set("*.Offline.target_qps", qps)
        .set("*.Offline.min_duration", ms)
}

/// `--repeat` runs of `samples` over `transport` against one node, and
/// their medians.
fn measure(
    cli: &Cli,
    ns: &Netns,
    certs: &Path,
    case: &Case,
    transport: Transport,
) -> Result<Moved> {
    let benchmark = case.samples.benchmark();
    let node_transport = if transport == Transport::Quic {
        "quic"
    } else {
        "grpc"
    };
    let tls = (transport != Transport::Grpc).then_some(certs);
    let node_conf = case.node_conf.to_str().context("utf-8 path")?;
    let args = ["--config", node_conf, "--transport", node_transport];
    let start = || ns.start_node_tls("bytes-per-cpu", tls, &args);
    let node = if cli.pin {
        let node = started_on(NODE_CPU, SENDER_CPU, start)?;
        let cpus = allowed_cpus(node.child.id())?;
        ensure!(
            cpus == NODE_CPU.to_string(),
            "the node was to run on CPU {NODE_CPU} only; it may run on {cpus}"
        );
        node
    } else {
        start()?
    };
    let mut runs = Vec::new();
    for round in 0..cli.repeat {
        eprintln!(
            "bytes-per-cpu: {benchmark}, {transport:?} ({}/{})",
            round + 1,
            cli.repeat
        );
        let run_dir = test_dir(&format!("bytes-per-cpu-{benchmark}-{transport:?}"))?;
        runs.push(netdiv_run(
            &run_dir, benchmark, &case.conf, transport, &node, certs,
        )?);
    }
    Ok(median_of(&runs))
}

/// The table of bytes per CPU-second: per MTU, iperf3, then every run of
/// samples with bytes enough to count against it.
fn bytes_table(links: &[Link]) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "| | MTU | samples | throughput (Gbit/s) | GB per CPU-second (both ends) | vs iperf3 | QUIC datagrams | LoadGen peak RSS / loaded set (GB) |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|")?;
    for Link {
        mtu,
        kernel,
        measured,
    } in links
    {
        writeln!(
            out,
            "| iperf3 (TCP, one stream) | {mtu} | - | {:.2} | {:.2} | 1 | - | - |",
            kernel.gbit, kernel.gb_per_cpu_s
        )?;
        for (samples, transport, moved) in measured {
            if *samples == Samples::Small {
                continue;
            }
            writeln!(
                out,
                "| {} | {mtu} | {} | {:.2} | {:.3} | {:.2} | {} | {} |",
                transport.label(),
                samples.label(),
                moved.gbit,
                moved.gb_per_cpu_s,
                moved.gb_per_cpu_s / kernel.gb_per_cpu_s,
                Datagrams::describe(moved.datagrams),
                Memory::describe(moved.memory)
            )?;
        }
    }
    Ok(out)
}

/// The table of small queries: what a sample costs apart from its bytes,
/// each transport against gRPC in plain text over the same link.
fn small_table(links: &[Link]) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "| 4-byte samples, Offline | MTU | samples/s | CPU-µs per sample (both ends) | vs gRPC (plain) |"
    )?;
    writeln!(out, "|---|---|---|---|---|")?;
    for link in links {
        let small: Vec<_> = link
            .measured
            .iter()
            .filter(|(s, _, _)| *s == Samples::Small)
            .collect();
        let grpc = small
            .iter()
            .find(|(_, t, _)| *t == Transport::Grpc)
            .map(|(_, _, m)| m.cpu_us_per_sample);
        for (_, transport, moved) in small {
            let ratio = grpc.map_or("-".to_string(), |g| {
                format!("{:.2}", moved.cpu_us_per_sample / g)
            });
            writeln!(
                out,
                "| {} | {} | {:.0} | {:.2} | {ratio} |",
                transport.label(),
                link.mtu,
                moved.samples_per_s,
                moved.cpu_us_per_sample
            )?;
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.seconds = 2;
        cli.repeat = 1;
        cli.resnet_qps = 1000;
        cli.small_qps = 20_000;
        cli.samples = vec![Samples::Resnet50, Samples::Small];
        cli.mtus = vec![1500];
    }
    finish_benchmark("bytes-per-cpu", bench(&cli))
}
