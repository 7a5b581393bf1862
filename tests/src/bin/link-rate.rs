//! `link-rate`: how close large samples come to a real link's rate.
//!
//! A sut-node in its own network namespace, joined to the LoadGen node's
//! by a veth pair that `tc tbf` shapes to each rate in both directions, so
//! every byte crosses real interfaces at a known rate. For each rate,
//! transport (gRPC, QUIC) and input codec (none, lz4) it runs Offline with
//! ResNet-50-sized samples (150528 B) against the synthetic backend at
//! zero cost, so the link is the bottleneck, and prints the goodput:
//! sample bytes delivered per second (lz4 inputs counted decoded, as the
//! node sees them) against the shaped rate, and the bytes sent per byte
//! decoded (from the run record). The link has jumbo frames (MTU 9000) by
//! default, as data-centre fabrics do; `--mtu 1500` measures the other.
//!
//! Needs root (`ip netns`, `tc`). Usage:
//! `cargo run --release -p netdiv-tests --bin link-rate` (or
//! `deploy/lab/link-rate.sh`); `--quick` is the smoke run CI does.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use netdiv_tests::bench::{finish_benchmark, machine_description, median};
use netdiv_tests::configs::{node_toml, zero_cost_node, UserConf};
use netdiv_tests::mlperf_logs::summary_value;
use netdiv_tests::netns::{self, Netns};
use netdiv_tests::network_run::{loadgen, LoadgenRun};
use netdiv_tests::{loadgen_node_bin, test_dir, write_file};

/// Bytes of one ResNet-50 input (224 x 224 x 3, uint8).
const SAMPLE_BYTES: f64 = 150_528.0;

/// Prints the goodput table. NETDIV_LOADGEN_NODE / NETDIV_SUT_NODE use
/// prebuilt binaries.
#[derive(Debug, clap::Parser)]
#[command(name = "link-rate")]
struct Cli {
    /// Link rates to shape, in Mbit/s.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    rates_mbit: Vec<u64>,
    /// min_duration of every run, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Runs of each case; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// MTU of the link (1500 or jumbo 9000).
    #[arg(long, default_value_t = 9000)]
    mtu: u32,
    /// Transports to measure.
    #[arg(long, value_delimiter = ',', default_value = "grpc,quic")]
    transports: Vec<String>,
    /// Input codecs to measure.
    #[arg(long, value_delimiter = ',', default_value = "none,lz4")]
    codecs: Vec<String>,
    /// Fail unless every goodput is at least this share of its rate
    /// (0 to 1); the smoke run's check.
    #[arg(long)]
    require: Option<f64>,
    /// Passed to every LoadGen node run (`--cpu-latency-us US`, root):
    /// 0 keeps idle CPUs polling, so a VM whose halted vCPUs wake slowly
    /// does not hold the link's sender and receiver back.
    #[arg(long, value_name = "US")]
    cpu_latency_us: Option<u32>,
    /// The CI smoke run: 1 Gbit/s only, 3 s runs, one repeat, no lz4,
    /// and at least 80 % of the rate required.
    #[arg(long)]
    quick: bool,
}

/// One Offline run's goodput.
#[derive(Clone, Copy, Debug)]
struct Goodput {
    /// Decoded sample bytes per second, in Mbit/s.
    mbit: f64,
    /// Sample bytes sent over the bytes they decode to.
    wire_per_sample: f64,
}

fn main() -> ExitCode {
    use clap::Parser;
    let mut cli = Cli::parse();
    if cli.quick {
        cli.rates_mbit = vec![1000];
        cli.seconds = 3;
        cli.repeat = 1;
        cli.codecs = vec!["none".into()];
        cli.require.get_or_insert(0.8);
    }
    finish_benchmark("link-rate", bench(&cli))
}

fn bench(cli: &Cli) -> Result<String> {
    if !netns::available() {
        bail!("link-rate needs root and `ip netns` (network namespaces and tc)");
    }
    if cli.repeat == 0 || cli.seconds == 0 || cli.rates_mbit.contains(&0) {
        bail!("--repeat, --seconds and every rate must be at least 1");
    }
    for t in &cli.transports {
        if t != "grpc" && t != "quic" {
            bail!("--transports: {t:?} is neither grpc nor quic");
        }
    }
    for c in &cli.codecs {
        if c != "none" && c != "lz4" {
            bail!("--codecs: {c:?} is neither none nor lz4");
        }
    }
    loadgen_node_bin()?;
    let dir = test_dir("link-rate")?;
    let certs = dir.join("certs");
    sut_node::tls::dev_certificates(&certs, false)?;
    let config = write_file(
        &dir,
        "sut-node.toml",
        &node_toml(&zero_cost_node("resnet50"))?,
    )?;
    let ns = Netns::create()?;
    ns.set_mtu(cli.mtu)?;
    let config = config.to_str().context("utf-8 path")?;
    // gRPC in plain text (TLS is optional there, and most fabrics inside a
    // data centre run without it); QUIC always runs TLS 1.3.
    let grpc_node = ns.start_node("link-grpc", &["--config", config, "--transport", "grpc"])?;
    let quic_node = ns.start_node_tls(
        "link-quic",
        Some(&certs),
        &["--config", config, "--transport", "quic"],
    )?;
    let grpc = grpc_node.grpc.context("the node's gRPC address")?;
    let quic = quic_node.quic.context("the node's QUIC address")?;
    let mut rows = String::new();
    let mut shortfalls = Vec::new();
    for &mbit in &cli.rates_mbit {
        ns.shape(mbit)?;
        // Offline issues target_qps x duration samples at once: a fifth
        // more than the link carries in that time, so the run is
        // link-bound throughout and lasts about the duration.
        let link_samples_per_s = mbit as f64 * 1e6 / 8.0 / SAMPLE_BYTES;
        let conf = write_file(
            &dir,
            &format!("user-{mbit}.conf"),
            &UserConf::new()
                .set(
                    "*.Offline.target_qps",
                    format!("{:.0}", link_samples_per_s * 1.2),
                )
                .set("*.Offline.min_duration", cli.seconds * 1000)
                .set("*.Offline.min_query_count", 1)
                .to_string(),
        )?;
        for transport in &cli.transports {
            for codec in &cli.codecs {
                let url = match transport.as_str() {
                    "quic" => format!("quic://{quic}"),
                    _ => format!("grpc://{grpc}"),
                };
                let mut runs = Vec::new();
                for round in 0..cli.repeat {
                    eprintln!(
                        "link-rate: {mbit} Mbit/s, {transport}, {codec} ({}/{})",
                        round + 1,
                        cli.repeat
                    );
                    let run_dir = test_dir(&format!("link-rate-{transport}-{codec}"))?;
                    let mut args: Vec<String> = [
                        "--scenario",
                        "Offline",
                        "--benchmark",
                        "resnet50",
                        "--no-trace",
                        "--sample-codec",
                        codec,
                        "--user-conf",
                        conf.to_str().context("utf-8 path")?,
                        "--sut-node",
                        &url,
                    ]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                    if let Some(us) = cli.cpu_latency_us {
                        args.extend(["--cpu-latency-us".to_string(), us.to_string()]);
                    }
                    if transport == "quic" {
                        args.extend([
                            "--dev-tls".to_string(),
                            certs.display().to_string(),
                            // The development certificate names localhost.
                            "--tls-server-name".into(),
                            "localhost".into(),
                        ]);
                    }
                    let run = loadgen(&run_dir, &args, Duration::from_secs(cli.seconds * 4 + 60))?;
                    runs.push(goodput(&run).with_context(|| {
                        format!("{mbit} Mbit/s {transport} {codec} in {}", run_dir.display())
                    })?);
                }
                let mbits = median(&runs.iter().map(|g| g.mbit).collect::<Vec<_>>());
                let wire = median(&runs.iter().map(|g| g.wire_per_sample).collect::<Vec<_>>());
                let share = mbits / mbit as f64;
                writeln!(
                    rows,
                    "| {mbit} | {transport} | {codec} | {mbits:.1} | {:.1} % | {wire:.4} |",
                    share * 100.0
                )?;
                eprintln!(
                    "link-rate: {mbits:.1} Mbit/s of samples, {:.1} %",
                    share * 100.0
                );
                if cli.require.is_some_and(|floor| share < floor) {
                    shortfalls.push(format!(
                        "{transport} {codec} at {mbit} Mbit/s: {:.1} %",
                        share * 100.0
                    ));
                }
            }
        }
    }
    drop((grpc_node, quic_node));
    let mut out = String::new();
    writeln!(
        out,
        "A sut-node in a network namespace behind a veth pair (MTU {}) shaped with tc tbf (both \
         directions; burst 1 ms of the rate, queue 20 ms), synthetic backend at zero cost, \
         ResNet-50 samples of 150528 B, Offline {} s runs, median of {}. gRPC in plain text, \
         QUIC with TLS 1.3. CPU wake-up bound: {}.",
        cli.mtu,
        cli.seconds,
        cli.repeat,
        cli.cpu_latency_us.map_or("none".to_string(), |us| format!(
            "{us} µs (--cpu-latency-us)"
        ))
    )?;
    writeln!(out, "{}", machine_description())?;
    writeln!(out)?;
    writeln!(
        out,
        "Goodput: sample bytes per second as the node decodes them, against the shaped rate \
         (which also carries every header: Ethernet, IP, TCP or UDP and QUIC, TLS, HTTP/2, \
         protobuf). Sent / decoded: sample bytes the QDL sent over the bytes they decode to \
         (below 1 for lz4)."
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| rate (Mbit/s) | transport | inputs | goodput (Mbit/s) | of the rate | sent / decoded |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    out.push_str(&rows);
    if !shortfalls.is_empty() {
        bail!(
            "goodput below {:.0} % of the rate: {}\n{out}",
            cli.require.unwrap_or(0.0) * 100.0,
            shortfalls.join("; ")
        );
    }
    Ok(out)
}

/// Goodput of one run: samples per second from the summary, times the
/// sample's size; the bytes sent per decoded byte from the run record.
fn goodput(run: &LoadgenRun) -> Result<Goodput> {
    run.expect_success()?;
    let summary = run.summary()?;
    let per_second: f64 = summary_value(&summary, "Samples per second")
        .context("no samples per second in the summary")?
        .parse()
        .context("samples per second is not a number")?;
    let record = run.record()?;
    let traffic = &record
        .nodes
        .first()
        .context("no node in the run record")?
        .traffic;
    let sent = traffic.bytes_sent as f64;
    let decoded = Some(traffic.decoded_bytes_sent as f64)
        .filter(|n| *n > 0.0)
        .context("decoded_bytes_sent in the run record")?;
    Ok(Goodput {
        mbit: per_second * SAMPLE_BYTES * 8.0 / 1e6,
        wire_per_sample: sent / decoded,
    })
}
