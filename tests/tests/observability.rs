//! What operators see of a run while it goes on: both daemons' Prometheus
//! endpoints, scraped during a real network run, agree with each other
//! and with the run's MLPerf logs.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use loadgen_node::run_record::RunRecord;
use netdiv_tests::configs::llm_node;
use netdiv_tests::mlperf_logs::{parse_accuracy, parse_issued, ACCURACY};
use netdiv_tests::network_run::{llama2_prompt_flags, Cluster};
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

/// Starts `loadgen-node run ARGS` in `dir` with a metrics endpoint that
/// lingers 5 s after the run, JSON logs in `dir/loadgen.stderr` (returned),
/// the MLPerf logs in `dir/logs` and the issued samples in `issued.txt`.
fn start_loadgen(dir: &Path, args: &[String]) -> Result<(Child, std::path::PathBuf)> {
    let stderr = dir.join("loadgen.stderr");
    let child = Command::new(netdiv_tests::loadgen_node_bin()?)
        .current_dir(dir)
        .args(["run", "--log-format", "json"])
        .args(args)
        .args(["--record-issued", "issued.txt", "--output", "logs"])
        .args(["--metrics-listen", "127.0.0.1:0", "--metrics-linger", "5"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr)?)
        .spawn()?;
    Ok((child, stderr))
}

/// Scrapes the run's endpoint every 200 ms until the run says it is over
/// (`on_progress` sees each scrape while samples complete), waits for the
/// process to end well, and returns the last scrape.
fn scrape_until_finished(
    loadgen: &mut Child,
    stderr: &Path,
    mut on_progress: impl FnMut(&Scrape) -> Result<()>,
) -> Result<Scrape> {
    let endpoint = metrics_address(loadgen, stderr)?;
    let started = Instant::now();
    let last = loop {
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the run did not finish within 60 s"
        );
        let now = scrape(endpoint)?;
        if now.value("netdiv_loadgen_run_finished", &[])? == 1.0 {
            break now;
        }
        if now.value("netdiv_loadgen_completed_samples_total", &[])? > 0.0 {
            on_progress(&now)?;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let status = loadgen.wait()?;
    ensure!(
        status.success(),
        "loadgen-node failed ({status}):\n{}",
        std::fs::read_to_string(stderr)?
    );
    Ok(last)
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
    let mut args: Vec<String> = ["--scenario", "Server", "--benchmark", "resnet50"]
        .iter()
        .chain(&["--progress", "never"])
        .chain(&["--sample-shape", "3,32,32", "--sample-dtype", "uint8"])
        .chain(&[
            "--total-sample-count",
            "1024",
            "--performance-sample-count",
            "256",
        ])
        .map(|s| s.to_string())
        .collect();
    args.extend(["--user-conf".into(), conf.display().to_string()]);
    args.extend(cluster.loadgen_flags());
    let (mut loadgen, stderr) = start_loadgen(&dir, &args)?;
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
    let node_endpoints: Vec<SocketAddr> = cluster
        .nodes
        .iter()
        .map(|n| n.metrics.context("a node without its metrics address"))
        .collect::<Result<_>>()?;

    // Scrape as Prometheus would, faster, until the run says it is over.
    let mut seen_mid_run = false;
    let last = scrape_until_finished(loadgen, stderr, |_| {
        // Live: counts move while the run goes on, on both sides.
        let nodes_received: f64 = node_endpoints
            .iter()
            .map(|a| scrape(*a).map(|s| s.sum("netdiv_node_samples_received_total")))
            .sum::<Result<f64>>()?;
        ensure!(nodes_received > 0.0, "the nodes counted nothing mid-run");
        seen_mid_run = true;
        Ok(())
    })?;
    ensure!(seen_mid_run, "no scrape saw the run in progress");

    // The LoadGen's own counts against its logs.
    let issued = parse_issued(&std::fs::read_to_string(dir.join("issued.txt"))?)?.len() as f64;
    let accuracy_log = dir.join("logs").join(ACCURACY);
    let logged =
        parse_accuracy(&std::fs::read_to_string(&accuracy_log)?, &accuracy_log)?.len() as f64;
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

/// A token run over two LLM nodes: each node's TTFT and TPOT histograms
/// time every completion it answered once, and its output-token counter
/// is its completions times the answer length, all as the run record says.
#[test]
fn per_node_token_metrics_agree_with_the_run_record() -> Result<()> {
    const OUTPUT_TOKENS: u32 = 16;
    let dir = test_dir("metrics-tokens")?;
    let cluster = Cluster::start(
        &dir.join("nodes"),
        "grpc",
        &["tokens-1", "tokens-2"],
        &llm_node(500.0, 8, OUTPUT_TOKENS),
        &[],
    )?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 200)
        .set("*.Offline.min_duration", 1000)
        .set("*.Offline.min_query_count", 1);
    let args = llama2_prompt_flags(
        &dir,
        "Offline",
        &conf,
        (64, 7, 256),
        &cluster.loadgen_flags(),
    )?;
    let (mut loadgen, stderr) = start_loadgen(&dir, &args)?;
    let last = scrape_until_finished(&mut loadgen, &stderr, |_| Ok(()));
    let _ = loadgen.kill();
    let last = last?;
    let record = RunRecord::read_in(&dir.join("logs"))?.context("no run record")?;
    let completed = last.value("netdiv_loadgen_completed_samples_total", &[])?;
    ensure!(completed >= 200.0, "only {completed} samples completed");
    let mut tokens = 0.0;
    for node in &record.nodes {
        let name = [("name", node.name.as_str())];
        let t = &node.traffic;
        // Its completions (the completed-samples counter also counts
        // first tokens, as signs of progress).
        let answered = last.value("netdiv_loadgen_node_round_trip_seconds_count", &name)?;
        ensure!(
            answered > 0.0 && answered == t.latency.count as f64,
            "{}: {answered} completions timed, the record {}",
            node.name,
            t.latency.count
        );
        for (histogram, summary) in [
            ("netdiv_loadgen_node_first_token_seconds", &t.first_token),
            (
                "netdiv_loadgen_node_time_per_output_token_seconds",
                &t.time_per_output_token,
            ),
        ] {
            let count = last.value(&format!("{histogram}_count"), &name)?;
            let inf = last.value(
                &format!("{histogram}_bucket"),
                &[("name", node.name.as_str()), ("le", "+Inf")],
            )?;
            let sum = last.value(&format!("{histogram}_sum"), &name)?;
            ensure!(
                count == answered && inf == count && count == summary.count as f64,
                "{}: {histogram} timed {count} ({inf} in +Inf), the record {}, for {answered} \
                 completions",
                node.name,
                summary.count
            );
            // The sum is the record's mean times its count, to the
            // microsecond the record keeps.
            let mean = summary.mean_us as f64 / 1e6;
            ensure!(
                sum > 0.0 && (sum / count - mean).abs() < 2e-6,
                "{}: {histogram} sums to {sum} s over {count}, the record's mean is {mean} s",
                node.name
            );
        }
        let output = last.value("netdiv_loadgen_node_output_tokens_total", &name)?;
        ensure!(
            output == answered * f64::from(OUTPUT_TOKENS) && output == t.output_tokens as f64,
            "{}: {output} output tokens counted, the record {}, for {answered} answers",
            node.name,
            t.output_tokens
        );
        tokens += output;
    }
    ensure!(
        tokens == completed * f64::from(OUTPUT_TOKENS),
        "the nodes' output tokens add up to {tokens}, not {completed} x {OUTPUT_TOKENS}"
    );
    Ok(())
}
