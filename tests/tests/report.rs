//! `loadgen-node report` and the report `run` writes after each run,
//! rendered in a real headless Chromium: a Server run against two real
//! sut-nodes (every plot drawn, the verdict the summary's, the nodes and
//! the Network-division checks there), a token model's run (TTFT and TPOT
//! plots) and one over nodes (each node's TTFT, TPOT and share of samples
//! within the bounds), a run without a trace (what could not be plotted is said, the
//! rest renders), and garbled or missing logs (a clear error naming the
//! file and line, no panic).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use netdiv_tests::chromium::{attr, render, start_tags, Rendered};
use netdiv_tests::configs::llm_node;
use netdiv_tests::network_run::{llama2_prompt_flags, loadgen, Cluster, LoadgenRun};
use netdiv_tests::{loadgen_node_bin, run_with_deadline, tail, test_dir, write_file, UserConf};
use sut_node::backend::synthetic::SyntheticConfig;
use sut_node::config::FileConfig;

const PAGE: &str = "netdiv_report.html";

/// A synthetic accelerator: 0.3 ms per batch plus 0.05 ms per sample.
fn node_config() -> FileConfig {
    FileConfig {
        benchmark: Some("resnet50".into()),
        synthetic: SyntheticConfig {
            batch_cost_us: 300,
            sample_cost_us: 50,
            output_bytes: 32,
            ..SyntheticConfig::default()
        },
        ..FileConfig::default()
    }
}

/// The summary's `Result is :` value.
fn summary_result(run: &LoadgenRun) -> Result<String> {
    let summary = run.summary()?;
    netdiv_tests::mlperf_logs::summary_value(&summary, "Result is")
        .context("no \"Result is :\" line in the summary")
}

/// The page `run` wrote, from its `report: PATH` line.
fn reported_page(run: &LoadgenRun) -> Result<std::path::PathBuf> {
    let line = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("report: "))
        .with_context(|| format!("no \"report:\" line:\n{}", tail(&run.stdout, 10)))?;
    let page = run.logs.parent().context("logs in a folder")?.join(line);
    ensure!(page.ends_with(Path::new("logs").join(PAGE)), "{line}");
    ensure!(page.is_file(), "{} missing", page.display());
    Ok(page)
}

/// Checks what Chromium rendered: no page error, the verdict `result`,
/// and each of `plots` present with its data drawn (coloured elements
/// laid out); returns the figures' attributes.
fn check_rendered(
    r: &Rendered,
    result: &str,
    plots: &[&str],
) -> Result<Vec<Vec<(String, String)>>> {
    ensure!(
        !r.log.contains("Uncaught"),
        "console errors:\n{}",
        tail(&r.log, 20)
    );
    let body = start_tags(&r.dom, "body");
    let body = body.first().context("no body")?;
    ensure!(
        attr(body, "data-errors") == Some("0"),
        "page errors: {body:?}"
    );
    let verdicts: Vec<_> = start_tags(&r.dom, "p")
        .into_iter()
        .filter(|a| attr(a, "id") == Some("verdict-result"))
        .collect();
    ensure!(verdicts.len() == 1, "one verdict: {verdicts:?}");
    ensure!(
        attr(&verdicts[0], "data-verdict") == Some(result),
        "the page says {:?}, the summary {result}",
        attr(&verdicts[0], "data-verdict")
    );
    ensure!(
        r.dom.contains(&format!(">{result}</p>")),
        "verdict text not shown"
    );
    let figures = start_tags(&r.dom, "figure");
    ensure!(
        attr(body, "data-checked")
            == Some(
                &figures
                    .iter()
                    .filter(|f| attr(f, "data-plot").is_some())
                    .count()
                    .to_string()
            ),
        "the self-check did not run over every plot: {body:?}"
    );
    for id in plots {
        let f = figures
            .iter()
            .find(|f| attr(f, "id") == Some(&format!("plot-{id}")))
            .with_context(|| format!("no figure plot-{id}"))?;
        ensure!(
            attr(f, "data-missing").is_none(),
            "{id} not plotted: {:?}",
            attr(f, "data-missing")
        );
        let points: usize = attr(f, "data-points").context("data-points")?.parse()?;
        let drawn: usize = attr(f, "data-drawn")
            .with_context(|| format!("{id}: the page's self-check did not run"))?
            .parse()?;
        ensure!(points > 0, "{id}: no data points");
        // Only data is drawn in colour (axes, grid and text are not).
        ensure!(
            drawn >= points.min(2),
            "{id}: {drawn} elements drawn for {points} points"
        );
    }
    Ok(figures)
}

#[test]
fn a_server_run_over_two_nodes_has_a_report_that_renders_in_chromium() -> Result<()> {
    let dir = test_dir("report-server")?;
    let cluster = Cluster::start(&dir, "grpc", &["node-a", "node-b"], &node_config(), &[])?;
    let conf = UserConf::new()
        .set("*.*.min_duration", 2000)
        .set("*.Server.target_qps", 400)
        .set("*.Server.target_latency", 100)
        .set("*.Server.min_query_count", 300);
    let conf = write_file(&dir, "user.conf", &conf.to_string())?;
    let mut args: Vec<String> = [
        "--scenario",
        "Server",
        "--benchmark",
        "resnet50",
        "--sample-shape",
        "3,16,16",
        "--total-sample-count",
        "256",
        "--performance-sample-count",
        "256",
        "--progress",
        "never",
        "--user-conf",
        conf.to_str().context("utf-8")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(cluster.loadgen_flags());
    let run = loadgen(&dir, &args, Duration::from_secs(120))?;
    run.expect_success()?;
    let page = reported_page(&run)?;
    for id in ["latency-over-time", "latency-histogram", "latency-cdf"] {
        let svg = std::fs::read_to_string(run.logs.join(format!("report/{id}.svg")))?;
        ensure!(svg.starts_with("<svg"), "{id}.svg is not an SVG");
    }
    // The record holds each node's round trips: every sample the LoadGen
    // traced, once (no node failed, so none was re-sent).
    let record = run.record()?;
    let completed = std::fs::read_to_string(run.logs.join("mlperf_log_trace.json"))?
        .matches("\"name\":\"Sample\",\"cat\":\"default\",\"ph\":\"b\"")
        .count() as u64;
    ensure!(completed > 0, "no sample in the trace");
    let mut timed = 0;
    for node in &record.nodes {
        // The nodes hold no CPU latency bound, and the record says so.
        ensure!(
            node.cpu_latency_us.is_none(),
            "node {}: cpu_latency_us {:?}",
            node.name,
            node.cpu_latency_us
        );
        let latency = &node.traffic.latency;
        let count = latency.count;
        ensure!(count > 0, "node {} timed no sample: {latency:?}", node.name);
        let in_buckets: u64 = latency.buckets.iter().map(|(_, n)| n).sum();
        ensure!(in_buckets == count, "{latency:?}");
        ensure!(
            latency.p50_us <= latency.p99_us && latency.p99_us <= latency.max_us,
            "{latency:?}"
        );
        timed += count;
    }
    ensure!(
        timed == completed,
        "{timed} timed, {completed} samples traced"
    );

    let rendered = render(&page)?;
    let result = summary_result(&run)?;
    check_rendered(
        &rendered,
        &result,
        &[
            "latency-over-time",
            "latency-histogram",
            "latency-cdf",
            "throughput",
            "node-share",
            "node-latency",
            "name-round-trips",
        ],
    )?;
    let dom = &rendered.dom;
    ensure!(
        dom.contains("99th percentile: "),
        "Server's 99th percentile is not marked"
    );
    for name in ["node-a", "node-b"] {
        ensure!(
            dom.contains(&format!("<td>{name}</td>")),
            "{name} not in the nodes table"
        );
    }
    ensure!(dom.contains("id=\"bandwidth\""), "no bandwidth check");
    let settings = record
        .qdl
        .settings
        .as_ref()
        .context("no QDL settings in the record")?;
    ensure!(
        dom.contains(&format!("<td>QDL settings</td><td>{settings}</td>")),
        "the QDL's settings ({settings}) are not in the QDL table"
    );
    ensure!(
        dom.contains("No node failed; no sample was re-sent."),
        "failover line missing"
    );
    ensure!(
        !dom.contains("id=\"not-plotted\""),
        "something was not plotted"
    );
    Ok(())
}

/// `loadgen-node run --sut null` of a token model (Server), a short one.
fn token_run(dir: &Path, extra: &[&str]) -> Result<LoadgenRun> {
    let conf = UserConf::new()
        .set("*.*.min_duration", 1000)
        .set("*.Server.target_qps", 500)
        .set("*.*.min_query_count", 200);
    let conf = write_file(dir, "user.conf", &conf.to_string())?;
    let mut args: Vec<String> = [
        "--sut",
        "null",
        "--scenario",
        "Server",
        "--benchmark",
        "llama2-70b",
        "--null-output-tokens",
        "16",
        "--total-sample-count",
        "512",
        "--progress",
        "never",
        "--user-conf",
        conf.to_str().context("utf-8")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let run = loadgen(dir, &args, Duration::from_secs(120))?;
    run.expect_success()?;
    Ok(run)
}

#[test]
fn a_token_models_report_has_ttft_and_tpot_plots() -> Result<()> {
    let dir = test_dir("report-tokens")?;
    let run = token_run(&dir, &[])?;
    let page = reported_page(&run)?;
    let rendered = render(&page)?;
    let figures = check_rendered(
        &rendered,
        &summary_result(&run)?,
        &[
            "latency-histogram",
            "ttft-histogram",
            "ttft-cdf",
            "tpot-percentiles",
        ],
    )?;
    ensure!(
        !figures
            .iter()
            .any(|f| attr(f, "data-plot").is_some_and(|p| p.starts_with("node"))),
        "node plots without a run record"
    );
    ensure!(
        rendered.dom.contains("No run record"),
        "the page does not say why there is no network section"
    );
    ensure!(rendered.dom.contains("TTFT Early Stopping Result"));
    Ok(())
}

/// The text of each cell of the row whose first cell is `first`, in the
/// table `table` (an id).
fn row_cells(dom: &str, table: &str, first: &str) -> Result<Vec<String>> {
    let at = dom
        .find(&format!("<table id=\"{table}\""))
        .with_context(|| format!("no table {table}"))?;
    let dom = &dom[at..];
    let start = dom
        .find(&format!("<td>{first}</td>"))
        .with_context(|| format!("no row for {first}"))?;
    let end = start + dom[start..].find("</tr>").context("row not closed")?;
    Ok(dom[start..end]
        .split("</td>")
        .filter_map(|cell| {
            cell.rsplit_once('>')
                .map(|(_, text)| text.trim().to_string())
        })
        .filter(|text| !text.is_empty())
        .collect())
}

/// A token model's Server run over two real nodes, one decoding twice as
/// slowly as the run's TPOT bound allows: the report shows each node's
/// TTFT and TPOT as the QDL measured them, its share of the output tokens,
/// and the share of its samples within the bounds: (nearly) all of the
/// fast node's within the TPOT bound, none of the slow one's.
#[test]
fn a_token_run_over_nodes_reports_each_nodes_ttft_tpot_and_slo_attainment() -> Result<()> {
    let dir = test_dir("report-node-tokens")?;
    let config = |decode_us_per_token| llm_node(decode_us_per_token, 64, 16);
    let fast = Cluster::start(
        &dir.join("fast"),
        "grpc",
        &["tok-fast"],
        &config(200.0),
        &[],
    )?;
    let slow = Cluster::start(
        &dir.join("slow"),
        "grpc",
        &["tok-slow"],
        &config(4000.0),
        &[],
    )?;
    let conf = UserConf::new()
        .set("*.Server.target_qps", 100)
        .set("*.Server.min_duration", 1000)
        .set("*.Server.min_query_count", 100)
        .set("*.Server.tpot_latency", 2);
    let mut extra = fast.loadgen_flags();
    extra.extend(slow.loadgen_flags());
    extra.extend(["--dispatch".to_string(), "round-robin".to_string()]);
    let flags = llama2_prompt_flags(&dir, "Server", &conf, (64, 3, 1024), &extra)?;
    let run = loadgen(&dir, &flags, Duration::from_secs(120))?;
    run.expect_success()?;
    let rendered = render(&reported_page(&run)?)?;
    check_rendered(&rendered, &summary_result(&run)?, &["ttft-histogram"])?;
    let dom = &rendered.dom;
    ensure!(
        dom.contains("id=\"node-tokens\""),
        "no per-node token table"
    );
    // node, output tokens, share, TTFT p50, p99, TPOT p50, p99, TTFT
    // within, TPOT within.
    let fast = row_cells(dom, "node-tokens", "tok-fast")?;
    let slow = row_cells(dom, "node-tokens", "tok-slow")?;
    ensure!(fast.len() == 9 && slow.len() == 9, "{fast:?} {slow:?}");
    for cells in [&fast, &slow] {
        let tokens: u64 = cells[1].parse()?;
        ensure!(tokens > 0 && cells[2].ends_with('%'), "{cells:?}");
        ensure!(cells[3..7].iter().all(|c| c.ends_with(" ms")), "{cells:?}");
    }
    let tpot_ms = |cells: &[String]| cells[5].trim_end_matches(" ms").parse::<f64>();
    ensure!(
        tpot_ms(&slow)? > 2.0 * tpot_ms(&fast)?,
        "the slow node's TPOT does not show: {fast:?} {slow:?}"
    );
    // The fast node decodes at a tenth of the bound, yet a neighbour
    // test's load once pushed one of its 512 samples past it (99.8 %).
    let within = |cells: &[String]| cells[8].trim_end_matches(" %").parse::<f64>();
    ensure!(
        within(&fast)? >= 95.0,
        "fast node within the TPOT bound: {fast:?}"
    );
    ensure!(
        slow[8] == "0.0 %",
        "slow node within the TPOT bound: {slow:?}"
    );
    let all = row_cells(dom, "node-tokens", "all nodes")?;
    let overall: f64 = all[all.len() - 1].trim_end_matches(" %").parse()?;
    ensure!(
        (30.0..70.0).contains(&overall),
        "overall TPOT attainment {all:?}"
    );
    Ok(())
}

/// `loadgen-node report ARGS`: its status, stdout and stderr.
fn report(args: &[&Path]) -> Result<(bool, String, String)> {
    let dir = test_dir("report-cmd")?;
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut command = Command::new(loadgen_node_bin()?);
    command
        .arg("report")
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out)?)
        .stderr(std::fs::File::create(&err)?);
    let exited = run_with_deadline(&mut command, Duration::from_secs(60))?;
    if exited.timed_out {
        bail!("loadgen-node report hung");
    }
    Ok((
        exited.status.success(),
        std::fs::read_to_string(out)?,
        std::fs::read_to_string(err)?,
    ))
}

/// Replaces line `n` (1-based) of `path`.
fn garble_line(path: &Path, n: usize, with: &str) -> Result<()> {
    let text = std::fs::read_to_string(path)?;
    let mut lines: Vec<&str> = text.lines().collect();
    ensure!(
        lines.len() >= n,
        "{} has {} lines",
        path.display(),
        lines.len()
    );
    lines[n - 1] = with;
    std::fs::write(path, lines.join("\n") + "\n")?;
    Ok(())
}

#[test]
fn garbled_or_missing_logs_are_named_and_a_run_without_trace_still_renders() -> Result<()> {
    let dir = test_dir("report-garbled")?;
    let run = token_run(&dir, &["--no-trace", "--no-report"])?;
    let logs = &run.logs;
    ensure!(!logs.join(PAGE).exists(), "--no-report wrote a report");
    ensure!(!run.stdout.contains("report: "), "{}", run.stdout);

    // No trace (as under the official LoadGen): the rest renders, and the
    // page says what it could not plot.
    let (ok, stdout, stderr) = report(&[logs])?;
    ensure!(ok, "report failed: {stderr}");
    ensure!(
        stdout.trim() == format!("report: {}", logs.join(PAGE).display()),
        "{stdout}"
    );
    let rendered = render(&logs.join(PAGE))?;
    let figures = check_rendered(&rendered, &summary_result(&run)?, &["tpot-percentiles"])?;
    let missing: Vec<&str> = figures
        .iter()
        .filter_map(|f| attr(f, "data-missing"))
        .collect();
    ensure!(
        missing.len() >= 4
            && missing
                .iter()
                .all(|m| m.contains("mlperf_log_trace.json is empty")),
        "{missing:?}"
    );
    ensure!(rendered.dom.contains("id=\"not-plotted\""));

    // A garbled detail line: the file and the line are named.
    let detail = logs.join("mlperf_log_detail.txt");
    let original = std::fs::read_to_string(&detail)?;
    garble_line(
        &detail,
        3,
        ":::MLLOG {\"key\": \"effective_scenario\", \"value\": ",
    )?;
    let (ok, _, stderr) = report(&[logs])?;
    ensure!(!ok, "a garbled detail log was accepted");
    ensure!(
        stderr.contains(&format!(
            "{} line 3: garbled :::MLLOG entry",
            detail.display()
        )),
        "{stderr}"
    );
    ensure!(!stderr.contains("panicked"), "{stderr}");
    std::fs::write(&detail, original)?;

    // A garbled trace and a garbled summary.
    let trace = logs.join("mlperf_log_trace.json");
    std::fs::write(&trace, "{\"traceEvents\":[\n{\"name\":\"Sample\",\"ph\":\n")?;
    let (ok, _, stderr) = report(&[logs])?;
    ensure!(
        !ok && stderr.contains(&format!("{} line 3", trace.display())),
        "{stderr}"
    );
    std::fs::write(&trace, "")?;
    let summary = logs.join("mlperf_log_summary.txt");
    let text = std::fs::read_to_string(&summary)?;
    std::fs::write(&summary, text.replace("Result is : ", "Result is : MAYBE"))?;
    let (ok, _, stderr) = report(&[logs])?;
    ensure!(
        !ok && stderr.contains(&format!("{} line ", summary.display()))
            && stderr.contains("neither VALID nor INVALID"),
        "{stderr}"
    );

    // A missing log, and a folder that is no run.
    std::fs::write(&summary, text)?;
    std::fs::remove_file(logs.join("mlperf_log_accuracy.json"))?;
    let (ok, _, stderr) = report(&[logs])?;
    ensure!(
        !ok && stderr.contains(&format!(
            "cannot read {}",
            logs.join("mlperf_log_accuracy.json").display()
        )),
        "{stderr}"
    );
    let (ok, _, stderr) = report(&[&dir.join("nowhere")])?;
    ensure!(!ok && stderr.contains("nowhere"), "{stderr}");
    ensure!(!stderr.contains("panicked"), "{stderr}");
    Ok(())
}
