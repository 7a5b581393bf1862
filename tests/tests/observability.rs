//! What operators see of a run while it goes on: both daemons' Prometheus
//! endpoints, scraped during a real network run, agree with each other
//! and with the run's MLPerf logs.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use netdiv_tests::mlperf_logs::{parse_accuracy, parse_issued};
use netdiv_tests::network_run::Cluster;
use netdiv_tests::prometheus::{scrape, Scrape};
use netdiv_tests::{log_records, test_dir, write_file, UserConf};
use sut_node::backend::synthetic::SyntheticConfig;
use sut_node::batcher::BatchPolicy;
use sut_node::config::FileConfig;

/// A synthetic accelerator: 0.5 ms per batch plus 0.1 ms per sample.
fn node_config() -> FileConfig {
    FileConfig {
        benchmark: Some("resnet50".into()),
        synthetic: SyntheticConfig {
            batch_cost_us: 500,
            sample_cost_us: 100,
            output_bytes: 32,
            ..SyntheticConfig::default()
        },
        batching: BatchPolicy {
            max_batch_size: 32,
            ..BatchPolicy::default()
        },
        ..FileConfig::default()
    }
}

/// The address of the run's metrics endpoint, from its JSON log record.
fn metrics_address(loadgen: &mut Child, stderr: &Path) -> Result<SocketAddr> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let text = std::fs::read_to_string(stderr).unwrap_or_default();
        let records = log_records::parse(&text);
        if let Some(record) = log_records::with_event(&records, "metrics_listening").first() {
            return record["addr"]
                .as_str()
                .context("metrics_listening without addr")?
                .parse()
                .context("metrics address");
        }
        if let Some(status) = loadgen.try_wait()? {
            bail!("loadgen-node exited ({status}) before serving metrics:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("no metrics_listening record within 60 s")
}

#[test]
fn metrics_endpoints_agree_with_the_run_logs() -> Result<()> {
    let dir = test_dir("metrics")?;
    let cluster = Cluster::start(
        &dir.join("nodes"),
        "grpc",
        &["metrics-1", "metrics-2"],
        &node_config(),
        &["--metrics-listen", "127.0.0.1:0"],
    )?;
    let conf = UserConf::new()
        .set("*.*.min_duration", 3000)
        .set("*.Server.target_qps", 400)
        .set("*.Server.target_latency", 200)
        .set("*.Server.min_query_count", 100)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let conf = write_file(&dir, "user.conf", &conf.to_string())?;
    let stderr = dir.join("loadgen.stderr");
    let mut loadgen = Command::new(netdiv_tests::loadgen_node_bin()?)
        .current_dir(&dir)
        .args(["run", "--log-format", "json", "--progress", "never"])
        .args(["--scenario", "Server", "--benchmark", "resnet50"])
        .args(["--sample-shape", "3,32,32", "--sample-dtype", "uint8"])
        .args([
            "--total-sample-count",
            "1024",
            "--performance-sample-count",
            "256",
        ])
        .arg("--user-conf")
        .arg(&conf)
        .args(["--record-issued", "issued.txt", "--output", "logs"])
        .args(["--metrics-listen", "127.0.0.1:0", "--metrics-linger", "5"])
        .args(cluster.loadgen_flags())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr)?)
        .spawn()?;
    let result = scrape_and_compare(&mut loadgen, &stderr, &cluster, &dir);
    let _ = loadgen.kill();
    let _ = loadgen.wait();
    result
}

fn scrape_and_compare(
    loadgen: &mut Child,
    stderr: &Path,
    cluster: &Cluster,
    dir: &Path,
) -> Result<()> {
    let endpoint = metrics_address(loadgen, stderr)?;
    let node_endpoints: Vec<SocketAddr> = cluster
        .nodes
        .iter()
        .map(|n| n.metrics.context("a node without its metrics address"))
        .collect::<Result<_>>()?;

    // Scrape as Prometheus would, faster, until the run says it is over.
    let mut seen_mid_run = false;
    let started = Instant::now();
    let last: Scrape = loop {
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the run did not finish within 60 s"
        );
        let now = scrape(endpoint)?;
        let finished = now.value("netdiv_loadgen_run_finished", &[])? == 1.0;
        let completed = now.value("netdiv_loadgen_completed_samples_total", &[])?;
        if finished {
            break now;
        }
        if completed > 0.0 {
            // Live: counts move while the run goes on, on both sides.
            let nodes_received: f64 = node_endpoints
                .iter()
                .map(|a| scrape(*a).map(|s| s.sum("netdiv_node_samples_received_total")))
                .sum::<Result<f64>>()?;
            ensure!(nodes_received > 0.0, "the nodes counted nothing mid-run");
            seen_mid_run = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    ensure!(seen_mid_run, "no scrape saw the run in progress");
    let status = loadgen.wait()?;
    let log = std::fs::read_to_string(stderr)?;
    ensure!(status.success(), "loadgen-node failed ({status}):\n{log}");

    // The LoadGen's own counts against its logs.
    let issued = parse_issued(&std::fs::read_to_string(dir.join("issued.txt"))?)?.len() as f64;
    let logged = parse_accuracy(&std::fs::read_to_string(
        dir.join("logs/mlperf_log_accuracy.json"),
    )?)?
    .len() as f64;
    ensure!(issued > 100.0, "only {issued} samples issued");
    let metric = |name: &str| last.value(name, &[]);
    ensure!(
        metric("netdiv_loadgen_issued_samples_total")? == issued
            && metric("netdiv_loadgen_completed_samples_total")? == logged
            && logged == issued,
        "metrics say {} issued, {} completed; the logs {issued} issued, {logged} logged",
        metric("netdiv_loadgen_issued_samples_total")?,
        metric("netdiv_loadgen_completed_samples_total")?,
    );
    ensure!(metric("netdiv_loadgen_resent_samples_total")? == 0.0);
    ensure!(metric("netdiv_loadgen_nodes_failed")? == 0.0);

    // Per node, the QDL's view and the node's own agree, and add up.
    let mut total = 0.0;
    for (node, addr) in cluster.nodes.iter().zip(&node_endpoints) {
        let name = [("name", node.name.as_str())];
        let qdl_completed = last.value("netdiv_loadgen_node_completed_samples_total", &name)?;
        let qdl_sent = last.value("netdiv_loadgen_node_sent_samples_total", &name)?;
        ensure!(
            last.value("netdiv_loadgen_node_outstanding_samples", &name)? == 0.0,
            "{}: samples still outstanding at the end",
            node.name
        );
        let own = scrape(*addr)?;
        let received = own.sum("netdiv_node_samples_received_total");
        let completed = own.sum("netdiv_node_samples_completed_total");
        ensure!(
            qdl_sent == received && received == completed && completed == qdl_completed,
            "{}: QDL sent {qdl_sent}, completed {qdl_completed}; node received {received}, completed {completed}",
            node.name
        );
        ensure!(qdl_completed > 0.0, "{} got no work", node.name);
        let timed = last.value("netdiv_loadgen_node_round_trip_seconds_count", &name)?;
        let inf = last.value(
            "netdiv_loadgen_node_round_trip_seconds_bucket",
            &[("name", node.name.as_str()), ("le", "+Inf")],
        )?;
        ensure!(
            timed == qdl_completed && inf == timed,
            "{}: {timed} round trips timed ({inf} in +Inf) for {qdl_completed} completions",
            node.name
        );
        let batches = own.sum("netdiv_node_batch_size_count");
        ensure!(
            batches > 0.0 && own.sum("netdiv_node_inference_seconds_count") == batches,
            "{}: {batches} batches, inference times do not match",
            node.name
        );
        ensure!(own.sum("netdiv_node_batch_size_sum") == completed);
        ensure!(own.sum("netdiv_node_sample_bytes_in_total") >= received * 3072.0);
        total += qdl_completed;
    }
    ensure!(
        total == logged,
        "the nodes completed {total}, the log holds {logged}"
    );
    let mut exported: Vec<&str> = last.samples.iter().map(|s| s.name.as_str()).collect();
    let node_scrape = scrape(node_endpoints[0])?;
    exported.extend(node_scrape.samples.iter().map(|s| s.name.as_str()));
    dashboard_uses_only(&exported)
}

/// Every series the Grafana dashboard queries is one the endpoints export.
fn dashboard_uses_only(exported: &[&str]) -> Result<()> {
    let path = netdiv_tests::workspace_root().join("deploy/grafana/netdiv-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    let mut queried = Vec::new();
    for panel in dashboard["panels"].as_array().context("no panels")? {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().context("a target without expr")?;
            let mut rest = expr;
            while let Some(at) = rest.find("netdiv_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                queried.push(name);
            }
        }
    }
    ensure!(queried.len() > 10, "the dashboard queries only {queried:?}");
    let missing: Vec<&String> = queried
        .iter()
        .filter(|q| !exported.contains(&q.as_str()))
        .collect();
    ensure!(
        missing.is_empty(),
        "the dashboard queries series no endpoint exports: {missing:?}"
    );
    Ok(())
}
