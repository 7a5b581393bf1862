//! The QDL under the official MLPerf LoadGen (`loadgen-node run --loadgen
//! official`, built with `--features official` from the pinned PyPI sdist)
//! against our engine: the same benchmark — two local sut-nodes, the same
//! flags, config files and seeds — run once under each. Both must generate
//! the same loaded sets, query counts, durations and issued samples, both
//! must be VALID with throughput within 5 %, and the official run's
//! sut_name must be the live "Network SUT [...]" of every node.

use std::path::Path;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdiv_tests::binaries::loadgen_node_official_bin;
use netdiv_tests::mlperf_logs::{parse_issued, summary_value};
use netdiv_tests::network_run::{loadgen_with, Cluster, LoadgenRun};
use netdiv_tests::{test_dir, write_file};
use sut_node::backend::synthetic::SyntheticConfig;
use sut_node::batcher::BatchPolicy;
use sut_node::config::FileConfig;

/// 2 ms per batch plus 0.5 ms per sample: backend-bound, so both engines
/// see the same throughput.
fn node_config() -> FileConfig {
    FileConfig {
        benchmark: Some("resnet50".into()),
        synthetic: SyntheticConfig {
            batch_cost_us: 2000,
            sample_cost_us: 500,
            ..SyntheticConfig::default()
        },
        batching: BatchPolicy {
            max_batch_size: 16,
            ..BatchPolicy::default()
        },
        ..FileConfig::default()
    }
}

const USER_CONF: &str = "*.*.min_duration = 1000\n\
    *.SingleStream.target_latency = 2\n\
    *.SingleStream.min_query_count = 100\n\
    *.Server.target_qps = 600\n\
    *.Server.target_latency = 100\n\
    *.Server.min_query_count = 500\n\
    *.Offline.target_qps = 4000\n\
    *.Offline.min_query_count = 1\n";

fn run_engine(
    program: &Path,
    dir: &Path,
    engine: &str,
    scenario: &str,
    cluster: &Cluster,
) -> Result<LoadgenRun> {
    let run_dir = dir.join(engine);
    std::fs::create_dir_all(&run_dir)?;
    let conf = write_file(dir, "user.conf", USER_CONF)?;
    let mut flags: Vec<String> = [
        "--loadgen",
        engine,
        "--scenario",
        scenario,
        "--model",
        "e2e",
        "--benchmark",
        "resnet50",
        "--sample-shape",
        "3,32,32",
        "--total-sample-count",
        "2048",
        "--performance-sample-count",
        "512",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
        "--record-issued",
        "issued.txt",
        "--progress",
        "never",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.extend(cluster.loadgen_flags());
    let run = loadgen_with(program, &run_dir, &flags, Duration::from_secs(120))?;
    run.expect_success()?;
    Ok(run)
}

/// The summary's throughput figure for a scenario.
fn throughput(summary: &str, scenario: &str) -> Result<f64> {
    let label = match scenario {
        "Offline" => "Samples per second",
        "Server" => "Completed samples per second",
        _ => "QPS w/o loadgen overhead",
    };
    summary_value(summary, label)
        .with_context(|| format!("no {label:?} in:\n{summary}"))?
        .parse()
        .context("not a number")
}

fn compare(scenario: &str) -> Result<()> {
    let program = loadgen_node_official_bin()?;
    let dir = test_dir(&format!("official-qdl-{scenario}"))?;
    let cluster = Cluster::start(&dir, "grpc", &["bridge-a", "bridge-b"], &node_config(), &[])?;
    let official = run_engine(&program, &dir, "official", scenario, &cluster)?;
    let ours = run_engine(&program, &dir, "netdiv", scenario, &cluster)?;
    let (od, nd) = (official.detail()?, ours.detail()?);

    let version = |d: &netdiv_tests::mlperf_logs::Detail| {
        d.value("loadgen_version")
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    ensure!(
        !version(&od).contains("netdiv") && version(&nd).contains("not the official"),
        "each log must name its engine: official {}, ours {}",
        version(&od),
        version(&nd)
    );
    for key in [
        "loaded_qsl_set",
        "generated_query_count",
        "generated_query_duration",
    ] {
        ensure!(
            od.value(key).is_some() && od.value(key) == nd.value(key),
            "{scenario}: {key} differs: official {:?}, netdiv {:?}",
            od.value(key),
            nd.value(key)
        );
    }
    let issued = |run: &LoadgenRun| -> Result<Vec<u64>> {
        parse_issued(&std::fs::read_to_string(
            run.logs.parent().unwrap().join("issued.txt"),
        )?)
    };
    let (oi, ni) = (issued(&official)?, issued(&ours)?);
    // SingleStream issues until its minimum duration and count are met, so
    // how many depends on latency; what is issued must be the same sequence.
    let common = oi.len().min(ni.len());
    ensure!(
        common > 0 && oi[..common] == ni[..common],
        "{scenario}: issued sequences differ in their first {common} samples"
    );
    ensure!(
        scenario == "SingleStream" || oi.len() == ni.len(),
        "{scenario}: {} samples issued by the official LoadGen, {} by netdiv",
        oi.len(),
        ni.len()
    );

    let (os, ns) = (official.summary()?, ours.summary()?);
    for (engine, summary) in [("official", &os), ("netdiv", &ns)] {
        ensure!(
            netdiv_tests::mlperf_logs::says_valid(summary),
            "{scenario} under {engine}:\n{summary}"
        );
    }
    let (mut ot, mut nt) = (throughput(&os, scenario)?, throughput(&ns, scenario)?);
    let apart = |ot: f64, nt: f64| (ot - nt).abs() / ot.max(nt) > 0.05;
    if apart(ot, nt) {
        // The two runs follow each other on a shared machine, and one of
        // them can be slowed by a neighbour; a real gap shows again.
        let again = dir.join("again");
        std::fs::create_dir_all(&again)?;
        let official = run_engine(&program, &again, "official", scenario, &cluster)?;
        let ours = run_engine(&program, &again, "netdiv", scenario, &cluster)?;
        ot = throughput(&official.summary()?, scenario)?;
        nt = throughput(&ours.summary()?, scenario)?;
    }
    ensure!(
        !apart(ot, nt),
        "{scenario}: throughput {ot} (official) vs {nt} (netdiv) differ by more than 5 %, twice"
    );
    let name = od
        .value("sut_name")
        .and_then(|v| v.as_str())
        .context("no sut_name in the official log")?;
    ensure!(
        name.contains("Network SUT") && name.contains("bridge-a") && name.contains("bridge-b"),
        "official sut_name {name:?}"
    );
    Ok(())
}

#[test]
fn offline_matches_under_both_engines() -> Result<()> {
    compare("Offline")
}

#[test]
fn server_matches_under_both_engines() -> Result<()> {
    compare("Server")
}

#[test]
fn single_stream_matches_under_both_engines() -> Result<()> {
    compare("SingleStream")
}

/// Runs `loadgen-node/official/fetch-source.sh` (the current round) with
/// its cache at `cache` (the default cache when `None`): its exit status,
/// stdout and stderr.
fn fetch_source(cache: Option<&Path>) -> Result<(bool, String, String)> {
    let script = netdiv_tests::workspace_root().join("loadgen-node/official/fetch-source.sh");
    let mut command = std::process::Command::new("bash");
    command.arg(&script);
    if let Some(cache) = cache {
        command.env("NETDIV_OFFICIAL_CACHE", cache);
    }
    let out = command.output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    ))
}

/// The official LoadGen is compiled unaltered (rules: LoadGen): the
/// sources handed to the build are the pinned sdist's, byte for byte,
/// every time. An edited source file in the cache, or a sdist whose
/// sha256 is not the pinned one, is refused.
#[test]
fn the_official_sources_are_the_pinned_sdist_unaltered() -> Result<()> {
    let (ok, src, stderr) = fetch_source(None)?;
    ensure!(ok, "fetch-source.sh failed:\n{stderr}");
    let src = Path::new(&src);
    let release = src.parent().context("the source's release folder")?;
    let version = release
        .file_name()
        .and_then(|n| n.to_str())
        .context("a version folder")?;
    let sdist_name = format!("mlcommons_loadgen-{version}.tar.gz");
    // A cache of the test's own, holding only the downloaded sdist.
    let dir = test_dir("official-sources")?;
    let cache = dir.join(version);
    std::fs::create_dir_all(&cache)?;
    std::fs::copy(release.join(&sdist_name), cache.join(&sdist_name))?;
    let (ok, own_src, stderr) = fetch_source(Some(&dir))?;
    ensure!(
        ok && Path::new(&own_src).join("loadgen.cc").is_file(),
        "{stderr}"
    );
    // One edited file is refused, and named.
    let edited = Path::new(&own_src).join("loadgen.cc");
    let mut text = std::fs::read(&edited)?;
    text.extend_from_slice(b"\n// edited\n");
    std::fs::write(&edited, text)?;
    let (ok, _, stderr) = fetch_source(Some(&dir))?;
    ensure!(
        !ok && stderr.contains("not the pinned sdist's") && stderr.contains("loadgen.cc"),
        "an edited loadgen.cc was handed to the build:\n{stderr}"
    );
    // A sdist that is not the pinned one is refused.
    std::fs::remove_dir_all(&own_src)?;
    let mut sdist = std::fs::read(cache.join(&sdist_name))?;
    sdist.push(0);
    std::fs::write(cache.join(&sdist_name), sdist)?;
    let (ok, _, stderr) = fetch_source(Some(&dir))?;
    ensure!(
        !ok && stderr.contains("has sha256"),
        "a sdist with another sha256 was unpacked:\n{stderr}"
    );
    Ok(())
}
