//! The Network SUT end to end, with real processes on real sockets: sut-node
//! daemons on loopback and `loadgen-node run --sut-node ...` driving them
//! through the QDL over gRPC and QUIC, with two and three nodes. Every
//! response is checked against its own sample's data (the accuracy log
//! holds them all), every sample must be completed exactly once, also while
//! a node is killed mid-run, and losing every node must end the run with a
//! clear error instead of a hang.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use loadgen_node::qsl::{synthetic_sample, DType};
use netdiv_proto::pb;
use netdiv_tests::configs::node_toml;
use netdiv_tests::log_records;
use netdiv_tests::network_run::{check_exactly_once, loadgen, Cluster, LoadgenRun};
use netdiv_tests::sut_client::{grpc_client, signal_when_busy, versioned, Busy, ClientCert};
use netdiv_tests::{test_dir, write_file, UserConf};
use sut_node::backend::synthetic::{expected_output, SyntheticConfig};
use sut_node::batcher::BatchPolicy;
use sut_node::config::FileConfig;

/// How long a fault test waits for its victim to hold a sample.
const KILL_WITHIN: Duration = Duration::from_secs(30);

/// Small samples keep sixteen runs quick; the path is the same for large.
const SHAPE: [usize; 3] = [3, 32, 32];
const SEED: u64 = 7;
const OUTPUT_BYTES: usize = 32;

/// The benchmark of most runs; its rules allow lz4 only for samples.
const BENCHMARK: &str = "resnet50";

/// A synthetic accelerator for `benchmark`: 0.5 ms per batch plus 0.1 ms
/// per sample, so Offline is backend-bound and runs as long as its
/// minimum duration.
fn node_config(benchmark: &str) -> FileConfig {
    FileConfig {
        benchmark: Some(benchmark.into()),
        synthetic: SyntheticConfig {
            batch_cost_us: 500,
            sample_cost_us: 100,
            output_bytes: OUTPUT_BYTES,
            ..SyntheticConfig::default()
        },
        batching: BatchPolicy {
            max_batch_size: 32,
            ..BatchPolicy::default()
        },
        ..FileConfig::default()
    }
}

/// Short runs that are VALID on a loaded 2-CPU machine, and every response
/// in the accuracy log (a sampling target above any run's sample count).
fn user_conf() -> UserConf {
    UserConf::new()
        .set("*.*.min_duration", 300)
        .set("*.SingleStream.min_query_count", 100)
        .set("*.SingleStream.target_latency", 0.5)
        .set("*.MultiStream.min_query_count", 700)
        .set("*.Server.target_qps", 800)
        .set("*.Server.target_latency", 200)
        .set("*.Server.min_query_count", 500)
        .set("*.Offline.target_qps", 40000)
        .set("*.Offline.min_query_count", 1)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000)
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The flags of a `benchmark` run over `cluster` with `conf` (written to
/// `dir/user.conf`), plus `extra`. Samples are synthetic, of [`SHAPE`]
/// whatever the benchmark.
fn run_flags(
    dir: &Path,
    cluster: &Cluster,
    benchmark: &str,
    scenario: &str,
    conf: &UserConf,
    extra: &[&str],
) -> Result<Vec<String>> {
    let mut flags = sample_flags(dir, benchmark, scenario, conf, extra)?;
    flags.extend(cluster.loadgen_flags());
    Ok(flags)
}

/// [`run_flags`] without the nodes: for a SUT `extra` names.
fn sample_flags(
    dir: &Path,
    benchmark: &str,
    scenario: &str,
    conf: &UserConf,
    extra: &[&str],
) -> Result<Vec<String>> {
    let conf = write_file(dir, "user.conf", &conf.to_string())?;
    let shape = SHAPE.map(|d| d.to_string()).join(",");
    let mut flags: Vec<String> = [
        "--scenario",
        scenario,
        "--model",
        "e2e",
        "--benchmark",
        benchmark,
        "--sample-shape",
        &shape,
        "--sample-dtype",
        "uint8",
        "--sample-seed",
        &SEED.to_string(),
        "--total-sample-count",
        "2048",
        "--performance-sample-count",
        "512",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
        "--record-issued",
        "issued.txt",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.extend(extra.iter().map(|s| s.to_string()));
    Ok(flags)
}

/// Every issued sample in the accuracy log exactly once, each with its own
/// sample's output.
fn check_responses(run: &LoadgenRun, dir: &Path) -> Result<()> {
    check_exactly_once(run, &dir.join("issued.txt"))?;
    for e in &run.accuracy()? {
        let input = synthetic_sample(&SHAPE, DType::U8, SEED, e.qsl_idx as usize);
        let want = lower_hex(&expected_output(&input, OUTPUT_BYTES));
        ensure!(
            e.data.to_lowercase() == want,
            "sample seq_id {} (qsl_idx {}): response {} is not its own sample's output {want}",
            e.seq_id,
            e.qsl_idx,
            e.data
        );
    }
    Ok(())
}

/// VALID, no errors, the aggregated name, and every response right.
fn check_run(run: &LoadgenRun, dir: &Path, cluster: &Cluster, scenario: &str) -> Result<()> {
    run.expect_success()?;
    let summary = run.summary()?;
    ensure!(
        netdiv_tests::mlperf_logs::says_valid(&summary),
        "{scenario}: not VALID:\n{summary}"
    );
    ensure!(
        summary.contains("No errors encountered during test."),
        "{scenario}: errors logged:\n{summary}"
    );
    let detail = run.detail()?;
    let name = detail
        .value("sut_name")
        .and_then(|v| v.as_str())
        .context("no sut_name in the detail log")?
        .to_string();
    ensure!(name.contains("Network SUT"), "sut_name {name:?}");
    for node in &cluster.nodes {
        ensure!(
            name.contains(&node.name),
            "sut_name {name:?} lacks {}",
            node.name
        );
    }
    ensure!(
        detail.value("get_sut_name_duration_ns").is_some(),
        "get_sut_name_duration_ns not logged"
    );
    check_responses(run, dir)
}

/// The run record names the QDL settings the run used: encrypted links
/// over QUIC only (these gRPC nodes are plain), the default pieces, failover
/// outside submission mode, and the poll for the next query in the two
/// latency-bound scenarios only.
fn check_settings(run: &LoadgenRun, transport: &str, scenario: &str) -> Result<()> {
    let record = run.record()?;
    let settings = record
        .qdl
        .settings
        .with_context(|| format!("{scenario}: no QDL settings in the run record"))?;
    let poll_us = match scenario {
        "SingleStream" | "MultiStream" => qdl::defaults::LATENCY_POLL_NEXT_QUERY.as_micros() as u64,
        _ => 0,
    };
    ensure!(
        settings.tls == (transport == "quic")
            && settings.poll_next_query_us == poll_us
            && settings.max_piece_samples == qdl::defaults::MAX_PIECE_SAMPLES
            && settings.failover
            && settings.io_threads >= 1,
        "{transport} {scenario}: the record's QDL settings {settings:?} are not the run's"
    );
    Ok(())
}

/// All four scenarios in turn over one set of nodes.
fn all_scenarios(transport: &'static str, nodes: usize) -> Result<()> {
    let dir = test_dir(&format!("network-{transport}-{nodes}"))?;
    let names: Vec<String> = (1..=nodes)
        .map(|i| format!("{transport}-node-{i}"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cluster = Cluster::start(&dir, transport, &names, &node_config(BENCHMARK), &[])?;
    for scenario in ["SingleStream", "MultiStream", "Server", "Offline"] {
        let run_dir = dir.join(scenario);
        std::fs::create_dir_all(&run_dir)?;
        let flags = run_flags(&run_dir, &cluster, BENCHMARK, scenario, &user_conf(), &[])?;
        let run = loadgen(&run_dir, &flags, Duration::from_secs(120))?;
        check_run(&run, &run_dir, &cluster, scenario)
            .and_then(|()| check_settings(&run, transport, scenario))
            .with_context(|| format!("{transport} x{nodes} {scenario} in {}", run_dir.display()))?;
    }
    Ok(())
}

#[test]
fn grpc_two_nodes_all_scenarios() -> Result<()> {
    all_scenarios("grpc", 2)
}

#[test]
fn grpc_three_nodes_all_scenarios() -> Result<()> {
    all_scenarios("grpc", 3)
}

#[test]
fn quic_two_nodes_all_scenarios() -> Result<()> {
    all_scenarios("quic", 2)
}

#[test]
fn quic_three_nodes_all_scenarios() -> Result<()> {
    all_scenarios("quic", 3)
}

/// lz4 both ways (samples compressed at load, responses by the nodes and
/// decoded by the QDL), round-robin dispatch, and every node used. The
/// rules allow lz4 responses only for 3D-UNet, so this is a 3D-UNet run
/// (with the small samples of every other run).
#[test]
fn lz4_samples_and_responses_round_robin() -> Result<()> {
    let dir = test_dir("network-lz4")?;
    let cluster = Cluster::start(
        &dir,
        "grpc",
        &["lz4-a", "lz4-b", "lz4-c"],
        &node_config("3d-unet"),
        &["--response-codec", "lz4"],
    )?;
    let flags = run_flags(
        &dir,
        &cluster,
        "3d-unet",
        "Offline",
        &user_conf(),
        &["--sample-codec", "lz4", "--dispatch", "round-robin"],
    )?;
    let run = loadgen(&dir, &flags, Duration::from_secs(120))?;
    check_run(&run, &dir, &cluster, "Offline")?;
    for node in &cluster.nodes {
        let log = node.stderr();
        ensure!(!log.contains("the rules allow no"), "{}: {log}", node.name);
    }
    // Round robin gives every node work.
    let runtime = tokio::runtime::Runtime::new()?;
    for node in &cluster.nodes {
        let info = runtime.block_on(async {
            let mut client = grpc_client(node, ClientCert::None).await?;
            anyhow::Ok(
                client
                    .info(versioned(pb::InfoRequest {}))
                    .await?
                    .into_inner(),
            )
        })?;
        ensure!(info.samples_run > 0, "{} ran no samples", node.name);
    }
    Ok(())
}

/// Kills one of three nodes mid-run: its outstanding samples go to the
/// others and every sample is still completed exactly once.
fn survive_a_killed_node(transport: &'static str, scenario: &str) -> Result<()> {
    let dir = test_dir(&format!("network-kill-{transport}"))?;
    // Slower nodes so the run lasts long enough to kill one in the middle.
    let mut slow = node_config(BENCHMARK);
    slow.synthetic.sample_cost_us = 800;
    let cluster = Cluster::start(
        &dir,
        transport,
        &["k-1", "k-2", "k-3"],
        &slow,
        &["--metrics-listen", "127.0.0.1:0"],
    )?;
    // About 2.5 s of work (8250 Offline samples at ~3600/s, or 2000 Server
    // queries); the kill comes once the victim holds a sample.
    let conf = user_conf()
        .set("*.*.min_duration", 2500)
        .set("*.Offline.target_qps", 3000);
    let flags = run_flags(&dir, &cluster, BENCHMARK, scenario, &conf, &[])?;
    let victim = &cluster.nodes[1];
    let (pid, metrics) = (victim.child.id(), victim.metrics.context("metrics")?);
    let killer = std::thread::spawn(move || {
        signal_when_busy(pid, metrics, Busy::InFlight, libc::SIGKILL, KILL_WITHIN)
    });
    let run = loadgen(&dir, &flags, Duration::from_secs(120))?;
    killer.join().expect("killer thread")?;
    run.expect_success()?;
    let events = run.events();
    ensure!(
        log_records::with_event(&events, "node_failed").len() == 1
            && events.iter().any(|r| r["nodes_failed"] == 1),
        "the node failure was not noticed mid-run:\n{}",
        run.stderr
    );
    let summary = run.summary()?;
    ensure!(
        summary.contains("No errors encountered during test."),
        "completion errors (a sample completed twice or unknown):\n{summary}"
    );
    check_responses(&run, &dir)
}

#[test]
fn grpc_offline_survives_a_killed_node() -> Result<()> {
    survive_a_killed_node("grpc", "Offline")
}

#[test]
fn quic_server_survives_a_killed_node() -> Result<()> {
    survive_a_killed_node("quic", "Server")
}

/// With every node gone the run ends with an error naming the failures,
/// well before the deadline.
#[test]
fn losing_every_node_is_a_clear_error_not_a_hang() -> Result<()> {
    let dir = test_dir("network-all-lost")?;
    let mut slow = node_config(BENCHMARK);
    slow.synthetic.sample_cost_us = 400;
    let cluster = Cluster::start(
        &dir,
        "grpc",
        &["gone-1", "gone-2"],
        &slow,
        &["--metrics-listen", "127.0.0.1:0"],
    )?;
    let conf = user_conf().set("*.*.min_duration", 10000);
    let flags = run_flags(&dir, &cluster, BENCHMARK, "Offline", &conf, &[])?;
    let victims: Vec<(u32, std::net::SocketAddr)> = cluster
        .nodes
        .iter()
        .map(|n| Ok((n.child.id(), n.metrics.context("metrics")?)))
        .collect::<Result<_>>()?;
    let killer = std::thread::spawn(move || -> Result<()> {
        for (pid, metrics) in victims {
            signal_when_busy(pid, metrics, Busy::InFlight, libc::SIGKILL, KILL_WITHIN)?;
        }
        Ok(())
    });
    let run = loadgen(&dir, &flags, Duration::from_secs(60))?;
    killer.join().expect("killer thread")?;
    if run.status.success() {
        bail!("the run succeeded without nodes:\n{}", run.stdout);
    }
    ensure!(
        run.stderr.contains("every SUT node has failed"),
        "unclear error:\n{}",
        run.stderr
    );
    Ok(())
}

/// Two nodes with one name cannot form a Network SUT.
#[test]
fn duplicate_node_names_are_refused() -> Result<()> {
    let dir = test_dir("network-dup")?;
    let cluster = Cluster::start(
        &dir,
        "grpc",
        &["twin", "twin"],
        &node_config(BENCHMARK),
        &[],
    )?;
    let flags = run_flags(&dir, &cluster, BENCHMARK, "SingleStream", &user_conf(), &[])?;
    let run = loadgen(&dir, &flags, Duration::from_secs(60))?;
    ensure!(!run.status.success(), "{}", run.stdout);
    ensure!(
        run.stderr.contains("both call themselves \"twin\""),
        "{}",
        run.stderr
    );
    Ok(())
}

/// The README's main job: `loadgen-node run` with no SUT flags starts two
/// local nodes, runs Offline and Server through the QDL, reports both and
/// stops the nodes; `--progress lines` logs progress with each node's
/// samples in flight.
#[test]
fn embedded_default_runs_offline_and_server_through_two_local_nodes() -> Result<()> {
    let dir = test_dir("network-embedded")?;
    let output = dir.join("out");
    let run = std::process::Command::new(netdiv_tests::loadgen_node_bin()?)
        .current_dir(&dir)
        .env("NETDIV_SUT_NODE", netdiv_tests::sut_node_bin()?)
        .args([
            // A global flag before the subcommand reaches the child runs
            // too (it once broke their command lines).
            "--log-level",
            "info",
            "run",
            "--progress",
            "lines",
            "--progress-interval",
            "1",
            "--output",
        ])
        .arg(&output)
        .output()?;
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    ensure!(run.status.success(), "{stdout}\n{stderr}");
    for scenario in ["Offline", "Server"] {
        let summary =
            std::fs::read_to_string(output.join(scenario).join("mlperf_log_summary.txt"))?;
        ensure!(
            netdiv_tests::mlperf_logs::says_valid(&summary),
            "{scenario}:\n{summary}"
        );
        ensure!(
            summary.contains("SUT name : Network SUT [local-node-1, local-node-2]"),
            "{summary}"
        );
        ensure!(
            stdout.contains(&format!(
                "Logs written to {}",
                output.join(scenario).display()
            )),
            "{stdout}"
        );
    }
    ensure!(
        stderr.contains("issued ")
            && stderr.contains("samples/s")
            && stderr.contains("in flight: local-node-1 "),
        "no progress line:\n{stderr}"
    );
    let verdict = stdout
        .split_once("\nVerdict:\n")
        .map(|(_, v)| v)
        .context("no verdict at the end")?;
    ensure!(
        verdict.contains("Offline  VALID (Samples per second:")
            && verdict.contains("Server   VALID (Completed samples per second"),
        "{verdict}"
    );
    let node_log = std::fs::read_to_string(output.join("local-node-1.log"))?;
    ensure!(
        node_log.contains("stopped"),
        "node not stopped cleanly:\n{node_log}"
    );
    Ok(())
}

/// Processes that keep every CPU busy until dropped.
struct BusyCpus(Vec<std::process::Child>);

impl BusyCpus {
    fn start() -> Result<BusyCpus> {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let spin = || {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
        };
        Ok(BusyCpus(
            (0..cpus).map(|_| spin()).collect::<std::io::Result<_>>()?,
        ))
    }
}

impl Drop for BusyCpus {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The README's main command as a new user runs it, on a machine whose
/// CPUs other processes keep busy: both scenarios still VALID, with one
/// verdict line each.
#[test]
fn embedded_default_runs_valid_while_every_cpu_is_busy() -> Result<()> {
    let dir = test_dir("network-embedded-busy")?;
    let program = netdiv_tests::loadgen_node_bin()?;
    let sut_node = netdiv_tests::sut_node_bin()?;
    let busy = BusyCpus::start()?;
    let mut command = std::process::Command::new(program);
    command
        .current_dir(&dir)
        .env("NETDIV_SUT_NODE", sut_node)
        .arg("run")
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout"))?)
        .stderr(std::fs::File::create(dir.join("stderr"))?);
    let ran = netdiv_tests::process::run_with_deadline(&mut command, Duration::from_secs(300))?;
    drop(busy);
    let stdout = std::fs::read_to_string(dir.join("stdout"))?;
    let stderr = std::fs::read_to_string(dir.join("stderr"))?;
    ensure!(
        !ran.timed_out && ran.status.success(),
        "{:?}\n{stdout}\n{stderr}",
        ran.status
    );
    let verdict = stdout
        .split_once("\nVerdict:\n")
        .map(|(_, v)| v)
        .context("no verdict at the end")?;
    let lines: Vec<&str> = verdict.lines().filter(|l| !l.trim().is_empty()).collect();
    for scenario in ["Offline", "Server"] {
        let summary = std::fs::read_to_string(
            dir.join("mlperf-logs")
                .join(scenario)
                .join("mlperf_log_summary.txt"),
        )?;
        ensure!(
            netdiv_tests::mlperf_logs::says_valid(&summary),
            "{scenario} not VALID on a busy machine:\n{summary}"
        );
        ensure!(
            lines
                .iter()
                .filter(|l| l.trim_start().starts_with(scenario) && l.contains(" VALID ("))
                .count()
                == 1,
            "no single VALID verdict line for {scenario}:\n{verdict}"
        );
    }
    Ok(())
}

/// A folder of .npy files as the QSL: every sample's bytes reach a node
/// unchanged (the response is the synthetic backend's function of exactly
/// those bytes), in AccuracyOnly mode over QUIC.
#[test]
fn npy_folder_samples_reach_the_nodes_unchanged() -> Result<()> {
    use loadgen_node::qsl::write_npy;
    let dir = test_dir("network-npy")?;
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    let mut inputs = Vec::new();
    for i in 0..40usize {
        // Different lengths and contents per file, as real inputs have.
        let values: Vec<f32> = (0..(16 + i)).map(|k| (i * 100 + k) as f32 * 0.5).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        write_npy(
            &data.join(format!("sample-{i:03}.npy")),
            DType::F32,
            &[values.len()],
            &bytes,
        )?;
        inputs.push(bytes);
    }
    let cluster = Cluster::start(
        &dir,
        "quic",
        &["npy-a", "npy-b"],
        &node_config(BENCHMARK),
        &[],
    )?;
    let mut flags: Vec<String> = [
        "--scenario",
        "Offline",
        "--mode",
        "AccuracyOnly",
        "--benchmark",
        BENCHMARK,
        "--data-dir",
        data.to_str().context("utf-8 path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.extend(cluster.loadgen_flags());
    let run = loadgen(&dir, &flags, Duration::from_secs(60))?;
    run.expect_success()?;
    let entries = run.accuracy()?;
    let indices: HashSet<u64> = entries.iter().map(|e| e.qsl_idx).collect();
    ensure!(
        entries.len() == 40 && indices.len() == 40,
        "{} responses for {} distinct samples, 40 expected",
        entries.len(),
        indices.len()
    );
    for e in &entries {
        let want = lower_hex(&expected_output(&inputs[e.qsl_idx as usize], OUTPUT_BYTES));
        ensure!(
            e.data.to_lowercase() == want,
            "sample {}: {} != {want}",
            e.qsl_idx,
            e.data
        );
    }
    Ok(())
}

/// Nodes that require a client certificate (mTLS) serve a QDL that
/// presents one, and refuse one that does not.
#[test]
fn mutual_tls_nodes_serve_only_a_qdl_with_a_client_certificate() -> Result<()> {
    let dir = test_dir("network-mtls")?;
    let cluster = Cluster::start(
        &dir,
        "quic",
        &["mtls-1", "mtls-2"],
        &node_config(BENCHMARK),
        &["--require-client-cert"],
    )?;
    let with_cert = dir.join("with-cert");
    std::fs::create_dir_all(&with_cert)?;
    let flags = run_flags(
        &with_cert,
        &cluster,
        BENCHMARK,
        "SingleStream",
        &user_conf(),
        &[],
    )?;
    let run = loadgen(&with_cert, &flags, Duration::from_secs(60))?;
    check_run(&run, &with_cert, &cluster, "SingleStream")?;

    let without = dir.join("without-cert");
    std::fs::create_dir_all(&without)?;
    let certs = cluster
        .certs
        .as_ref()
        .context("QUIC nodes have certificates")?;
    let mut flags: Vec<String> = run_flags(
        &without,
        &cluster,
        BENCHMARK,
        "SingleStream",
        &user_conf(),
        &[],
    )?
    .into_iter()
    .filter(|f| f != "--dev-tls" && Path::new(f) != certs.as_path())
    .collect();
    flags.extend([
        "--tls-ca".into(),
        certs.join("ca.pem").display().to_string(),
    ]);
    let run = loadgen(&without, &flags, Duration::from_secs(60))?;
    ensure!(
        !run.status.success(),
        "a QDL without a client certificate was served"
    );
    // Refused by the node's TLS (the certificate_required alert, 116),
    // and the QDL says so with the node's address.
    ensure!(
        run.stderr.contains("node quic://")
            && netdiv_tests::sut_client::is_certificate_refusal(&run.stderr),
        "not refused for the missing client certificate:\n{}",
        run.stderr
    );

    // Another CA's pair: its client certificate is refused by the nodes,
    // and the nodes' certificate is refused by a QDL that trusts only it.
    let other = dir.join("other-ca");
    sut_node::tls::dev_certificates(&other, true)?;
    let tls = |ca: &Path, pair: &Path| -> Vec<String> {
        [
            "--tls-ca".into(),
            ca.join("ca.pem").display().to_string(),
            "--tls-cert".into(),
            pair.join("client.pem").display().to_string(),
            "--tls-key".into(),
            pair.join("client.key").display().to_string(),
        ]
        .into()
    };
    // The node refuses the foreign client (the QDL hears its alert); the
    // QDL refuses the node it cannot verify itself.
    for (case, ca, pair, refused_by_node) in [
        ("foreign-client", certs.as_path(), other.as_path(), true),
        ("unverifiable-node", other.as_path(), certs.as_path(), false),
    ] {
        let out = dir.join(case);
        std::fs::create_dir_all(&out)?;
        let mut flags: Vec<String> =
            run_flags(&out, &cluster, BENCHMARK, "SingleStream", &user_conf(), &[])?
                .into_iter()
                .filter(|f| f != "--dev-tls" && Path::new(f) != certs.as_path())
                .collect();
        flags.extend(tls(ca, pair));
        let run = loadgen(&out, &flags, Duration::from_secs(60))?;
        ensure!(!run.status.success(), "{case}: the run was served");
        ensure!(
            run.stderr.contains("node quic://")
                && run.stderr.contains("invalid peer certificate")
                && run.stderr.contains("aborted by peer") == refused_by_node,
            "{case}: not refused for the certificate by the right side:\n{}",
            run.stderr
        );
    }
    Ok(())
}

/// A node that stays connected but never completes a sample (its backend
/// is stuck) is treated as failed after --node-timeout, and its samples
/// are completed by the other node, each exactly once.
#[test]
fn a_stuck_node_times_out_and_its_samples_move() -> Result<()> {
    let dir = test_dir("network-stuck")?;
    let config = node_config(BENCHMARK);
    let healthy = Cluster::start(&dir.join("healthy"), "grpc", &["ok-1"], &config, &[])?;
    // One batch takes 10 minutes: connected, answering pings, never done.
    let mut stuck_config = node_config(BENCHMARK);
    stuck_config.synthetic.batch_cost_us = 600_000_000;
    let stuck = Cluster::start(&dir.join("stuck"), "grpc", &["stuck-1"], &stuck_config, &[])?;
    let mut flags = run_flags(
        &dir,
        &healthy,
        BENCHMARK,
        "Offline",
        &user_conf(),
        &["--node-timeout", "1"],
    )?;
    flags.extend(stuck.loadgen_flags());
    let run = loadgen(&dir, &flags, Duration::from_secs(60))?;
    run.expect_success()?;
    ensure!(
        run.stderr.contains("showed no progress for 1s"),
        "the stuck node was not timed out:\n{}",
        run.stderr
    );
    let summary = run.summary()?;
    ensure!(
        summary.contains("No errors encountered during test."),
        "{summary}"
    );
    check_responses(&run, &dir)
}

/// `loadgen-node sysdesc` writes every Network-division field, from the
/// nodes' Info over the network, and marks what a person must fill in.
#[test]
fn sysdesc_describes_the_nodes_and_marks_the_rest() -> Result<()> {
    let dir = test_dir("network-sysdesc")?;
    let cluster = Cluster::start(
        &dir,
        "grpc",
        &["desc-a", "desc-b"],
        &node_config(BENCHMARK),
        &[],
    )?;
    let out = dir.join("sysdesc.json");
    let run = std::process::Command::new(netdiv_tests::loadgen_node_bin()?)
        .arg("sysdesc")
        .args(cluster.loadgen_flags())
        .arg("--output")
        .arg(&out)
        .output()?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    ensure!(run.status.success(), "{stderr}");
    let fields: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out)?)?;
    for key in [
        "is_network",
        "network_type",
        "network_media",
        "network_rate",
        "nic_loadgen",
        "number_nic_loadgen",
        "net_software_stack_loadgen",
        "network_protocol",
        "number_connections",
        "nic_sut",
        "number_nic_sut",
        "net_software_stack_sut",
        "network_topology",
    ] {
        ensure!(fields.get(key).is_some(), "{key} missing: {fields}");
    }
    ensure!(
        fields["is_network"] == "True" && fields["number_connections"] == "2",
        "{fields}"
    );
    ensure!(
        fields["network_protocol"]
            .as_str()
            .unwrap_or("")
            .contains("gRPC"),
        "{fields}"
    );
    let stacks = fields["net_software_stack_sut"].as_str().unwrap_or("");
    ensure!(
        stacks.contains("desc-a") && stacks.contains("desc-b"),
        "{fields}"
    );
    ensure!(fields["network_topology"] == "TODO: fill in", "{fields}");
    ensure!(stderr.contains("fill in by hand: network_type"), "{stderr}");
    Ok(())
}

/// The list `name = [...]` of the checker's constants.py: its quoted
/// entries (commented-out lines skipped) and the names it refers to.
fn checker_list(constants: &str, name: &str) -> Result<Vec<String>> {
    let start = constants
        .find(&format!("\n{name} = ["))
        .with_context(|| format!("no {name} in the checker's constants.py"))?;
    let body = &constants[start + 1..];
    let body = &body[..body.find("\n]").context("an unclosed list")?];
    Ok(body
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.trim_end_matches(',').trim_matches('"').to_string())
        .collect())
}

/// `sysdesc --template` writes exactly the fields the round's checker
/// requires of a network system (read from the checker itself), the
/// machines' hardware filled in from the nodes, and `--diagram` draws
/// each node.
#[test]
fn sysdesc_template_holds_the_checkers_fields_and_the_diagram_the_nodes() -> Result<()> {
    let Some(inference) = netdiv_tests::submission::inference_checkout() else {
        return netdiv_tests::skip_unless_ci("a mlcommons/inference checkout");
    };
    let constants = std::fs::read_to_string(
        inference.join("tools/submission/submission_checker/constants.py"),
    )?;
    let mut required = checker_list(&constants, "SYSTEM_DESC_REQUIRED_FIELDS")?;
    for field in checker_list(&constants, "SYSTEM_DESC_REQUIRED_FIELDS_NETWORK_MODE")? {
        // The list names its first entry by the constant that holds it.
        required.push(if field == "SYSTEM_DESC_IS_NETWORK_MODE" {
            "is_network".into()
        } else {
            field
        });
    }
    required.sort();
    let dir = test_dir("network-sysdesc-template")?;
    let cluster = Cluster::start(
        &dir,
        "grpc",
        &["tmpl-a", "tmpl-b"],
        &node_config(BENCHMARK),
        &[],
    )?;
    let out = dir.join("system.json");
    let svg = dir.join("diagram.svg");
    let run = std::process::Command::new(netdiv_tests::loadgen_node_bin()?)
        .arg("sysdesc")
        .args(cluster.loadgen_flags())
        .args(["--template", "--output"])
        .arg(&out)
        .arg("--diagram")
        .arg(&svg)
        .output()?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    ensure!(run.status.success(), "{stderr}");
    let fields: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out)?)?;
    let mut keys: Vec<String> = fields
        .as_object()
        .context("not an object")?
        .keys()
        .cloned()
        .collect();
    keys.sort();
    ensure!(keys == required, "template {keys:?}\nchecker {required:?}");
    // Both nodes run on this machine: one host, its processor as
    // /proc/cpuinfo names it.
    let cpu = std::fs::read_to_string("/proc/cpuinfo")?;
    let model = cpu
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string());
    ensure!(fields["number_of_nodes"] == "1", "{fields}");
    if let Some(model) = model {
        ensure!(
            fields["host_processor_model_name"] == model.as_str(),
            "{fields}"
        );
    }
    ensure!(
        fields["division"] == "network" && fields["system_type"] == "TODO: fill in",
        "{fields}"
    );
    ensure!(stderr.contains("fill in by hand: submitter"), "{stderr}");
    let drawing = std::fs::read_to_string(&svg)?;
    ensure!(drawing.starts_with("<svg") && drawing.trim_end().ends_with("</svg>"));
    for node in ["sut-node tmpl-a", "sut-node tmpl-b"] {
        ensure!(drawing.contains(node), "{node} not drawn:\n{drawing}");
    }
    ensure!(drawing.matches("SUT machine").count() == 1, "{drawing}");
    Ok(())
}

/// `audit` without the means for every step (no partition commands, no
/// inference checkout for TEST04) is incomplete, not passed: its
/// audit.json says which steps did not run, and it exits with an error.
#[test]
fn an_audit_with_steps_not_run_is_incomplete_not_passed() -> Result<()> {
    let dir = test_dir("network-audit")?;
    let cluster = Cluster::start(
        &dir,
        "grpc",
        &["au-1", "au-2"],
        &node_config(BENCHMARK),
        &[],
    )?;
    let audit_dir = dir.join("audit");
    let mut command = std::process::Command::new(netdiv_tests::loadgen_node_bin()?);
    command
        .current_dir(&dir)
        .args([
            "audit",
            "--benchmark",
            BENCHMARK,
            "--sample-shape",
            "3,32,32",
        ])
        .args(["--log-format", "json", "--audit-dir"])
        .arg(&audit_dir)
        .args(cluster.loadgen_flags())
        .env_remove("NETDIV_INFERENCE_REPO")
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(dir.join("audit.stdout"))?)
        .stderr(std::fs::File::create(dir.join("audit.stderr"))?);
    let exited = netdiv_tests::run_with_deadline(&mut command, Duration::from_secs(240))?;
    let stdout = std::fs::read_to_string(dir.join("audit.stdout"))?;
    let stderr = std::fs::read_to_string(dir.join("audit.stderr"))?;
    ensure!(!exited.timed_out, "the audit hung:\n{stdout}\n{stderr}");
    ensure!(
        !exited.status.success() && stderr.contains("INCOMPLETE"),
        "an audit with steps not run must not pass:\n{stdout}\n{stderr}"
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(audit_dir.join("audit.json"))?)?;
    ensure!(
        record["verdict"] == "incomplete" && record["passed"] == false,
        "{record:#}"
    );
    let not_run: Vec<&str> = record["not_run"]
        .as_array()
        .context("not_run")?
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    ensure!(
        not_run.contains(&"partition") && not_run.contains(&"test04"),
        "{record:#}"
    );
    ensure!(
        record["steps"][0]["outcome"] == "pass",
        "the name step: {record:#}"
    );
    Ok(())
}

/// `--sut synthetic` and `--sut local` in all four scenarios, VALID: the
/// in-process node is driven through the QDL's local link (its log says
/// how many samples the QDL completed), every issued sample completes once,
/// and with the node config's output size every response is its own
/// sample's.
#[test]
fn in_process_nodes_run_every_scenario_through_the_qdls_local_link() -> Result<()> {
    let dir = test_dir("in-process-all-scenarios")?;
    let node = write_file(&dir, "node.toml", &node_toml(&node_config(BENCHMARK))?)?;
    let node = node.to_str().context("utf-8 path")?.to_string();
    let suts: [(&str, Vec<&str>); 2] = [
        (
            "synthetic",
            vec![
                "--sut",
                "synthetic",
                "--synthetic-batch-cost-us",
                "500",
                "--synthetic-sample-cost-us",
                "100",
            ],
        ),
        ("local", vec!["--sut", "local", "--node-config", &node]),
    ];
    for (sut, flags) in &suts {
        for scenario in ["SingleStream", "MultiStream", "Server", "Offline"] {
            let run_dir = dir.join(format!("{sut}-{scenario}"));
            std::fs::create_dir_all(&run_dir)?;
            let args = sample_flags(&run_dir, BENCHMARK, scenario, &user_conf(), flags)?;
            let run = loadgen(&run_dir, &args, Duration::from_secs(120))?;
            let context = || format!("--sut {sut}, {scenario}, in {}", run_dir.display());
            run.expect_valid().with_context(context)?;
            let completed = log_records::with_event(&run.events(), "in_process_qdl")
                .first()
                .and_then(|e| e["completed"].as_u64())
                .with_context(|| format!("{}: no in_process_qdl event", context()))?;
            let issued = std::fs::read_to_string(run_dir.join("issued.txt"))?
                .lines()
                .count() as u64;
            ensure!(
                completed == issued && issued > 0,
                "{}: the QDL completed {completed} of {issued} issued samples",
                context()
            );
            if *sut == "local" {
                check_responses(&run, &run_dir).with_context(context)?;
            } else {
                check_exactly_once(&run, &run_dir.join("issued.txt")).with_context(context)?;
            }
        }
    }
    Ok(())
}

/// `--sut synthetic` runs an Offline query larger than the in-process
/// node's byte limit: 8,800 ResNet-50 samples (1.3 GB as issued, over the
/// node's 1 GiB) go in through the QDL's window, not all at once, so the
/// in-process side of the network tax can be measured at any size.
#[test]
fn an_in_process_node_runs_an_offline_query_past_its_byte_limit() -> Result<()> {
    let dir = test_dir("in-process-large-offline")?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 8000)
        .set("*.Offline.min_duration", 1000)
        .set("resnet50.Offline.min_query_count", 8000);
    let conf = write_file(&dir, "user.conf", &conf.to_string())?;
    let args: Vec<String> = [
        "--sut",
        "synthetic",
        "--benchmark",
        "resnet50",
        "--scenario",
        "Offline",
        // 0.2 ms a sample: the node still holds most of the query when
        // the last sample is issued, as a real accelerator would.
        "--synthetic-batch-cost-us",
        "0",
        "--synthetic-sample-cost-us",
        "200",
        "--no-report",
        "--progress",
        "never",
        "--user-conf",
        conf.to_str().context("utf-8")?,
    ]
    .map(String::from)
    .into();
    let run = loadgen(&dir, &args, Duration::from_secs(180))?;
    run.expect_success()?;
    ensure!(
        !run.stderr.contains("node is full"),
        "the node declined samples:\n{}",
        run.stderr
    );
    let detail = run.detail()?;
    let completed = detail
        .value("result_query_count")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let samples = detail
        .value("effective_samples_per_query")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    ensure!(
        completed == 1 && samples * 150_528 > 1 << 30,
        "{completed} query of {samples} samples: not one query past 1 GiB"
    );
    Ok(())
}
