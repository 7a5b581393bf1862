//! The openai backend in front of a real serving engine: two sut-nodes,
//! each forwarding to its own llama.cpp server (`deploy/llm/llama-cpp.sh`,
//! a tiny Llama model), measured by `loadgen-node` as a llama2-70b SUT.
//! Every answer in the accuracy log must be exactly what llama.cpp itself
//! answers that prompt greedily (asked directly, not through a node), with
//! its own first token and token count, and TEST06's official checks must
//! pass. The fault tests kill the engine in the middle of a run and put a
//! misbehaving engine behind a node.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use axum::http::Version;
use loadgen_node::qsl::{synthetic_sample, DType};
use netdiv_proto::pb;
use netdiv_tests::binaries::loadgen_node_official_bin;
use netdiv_tests::configs::node_toml;
use netdiv_tests::counting_engine::CountingEngine;
use netdiv_tests::llama::{greedy_tokens, llama_cpp_files, LlamaFiles, LlamaServer};
use netdiv_tests::misbehaving_engine::{MisbehavingEngine, Misbehaviour, CUT_SHORT, MISCOUNTED};
use netdiv_tests::network_run::{llama2_prompt_flags, loadgen, loadgen_with, Cluster, LoadgenRun};
use netdiv_tests::python::python_for_official_tools;
use netdiv_tests::submission::{inference_checkout, refused_llm_submission};
use netdiv_tests::sut_client::{
    grpc_client, grpc_collect, plain_query, signal_when_busy, versioned, Busy, ClientCert,
    NodeProcess,
};
use netdiv_tests::{
    loadgen_node_bin, run_with_deadline, skip_unless_ci, test_dir, write_file, UserConf,
};
use sut_node::backend::openai::client::START_REQUESTS;
use sut_node::backend::openai::{OpenaiConfig, PromptCache};
use sut_node::backend::BackendKind;
use sut_node::config::FileConfig;
use tonic_health::pb::health_check_response::ServingStatus;

/// Fixed-length prompts, so the test can rebuild each sample's ids.
const PROMPT_TOKENS: usize = 32;
const SEED: u64 = 23;
/// Tokens per answer (the tiny model never ends early).
const ANSWER_TOKENS: u32 = 16;
/// Sequences each llama.cpp server runs at once.
const ENGINE_SLOTS: usize = 4;

/// Nodes of llama2-70b in front of an engine, answers of
/// [`ANSWER_TOKENS`] tokens.
fn node_config(answer_tokens: u32) -> FileConfig {
    FileConfig {
        benchmark: Some("llama2-70b".into()),
        backend: Some(BackendKind::Openai),
        openai: OpenaiConfig {
            max_tokens: Some(answer_tokens),
            max_in_flight: 2 * ENGINE_SLOTS,
            ..OpenaiConfig::default()
        },
        ..FileConfig::default()
    }
}

/// One sut-node per engine, each with `--engine-url` of its own.
fn start_nodes(
    dir: &Path,
    transport: &'static str,
    engines: &[&LlamaServer],
    config: &FileConfig,
) -> Result<Cluster> {
    let config = write_file(dir, "sut-node.toml", &node_toml(config)?)?;
    let certs = (transport == "quic").then(|| dir.join("certs"));
    if let Some(certs) = &certs {
        sut_node::tls::dev_certificates(certs, false)?;
    }
    let nodes = engines
        .iter()
        .enumerate()
        .map(|(i, engine)| {
            let args = [
                "--transport",
                transport,
                "--config",
                config.to_str().context("utf-8 path")?,
                "--engine-url",
                &engine.url,
                "--metrics-listen",
                "127.0.0.1:0",
            ];
            NodeProcess::start(&format!("{transport}-engine-{i}"), certs.as_deref(), &args)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Cluster {
        nodes,
        transport,
        certs,
    })
}

/// Long enough for TTFT and TPOT early stopping in Server (at least 459
/// queries); every answer in the accuracy log.
fn user_conf() -> UserConf {
    UserConf::new()
        .set("*.Server.target_qps", 40)
        .set("*.Server.min_duration", 1000)
        .set("*.Server.min_query_count", 500)
        .set("*.Offline.target_qps", 100)
        .set("*.Offline.min_duration", 1000)
        .set("*.Offline.min_query_count", 300)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000)
}

fn run_flags(dir: &Path, scenario: &str, conf: &UserConf, extra: &[String]) -> Result<Vec<String>> {
    llama2_prompt_flags(dir, scenario, conf, (PROMPT_TOKENS, SEED, 256), extra)
}

/// The prompt of sample `index`, as token ids.
fn prompt(index: usize) -> Vec<u32> {
    synthetic_sample(&[PROMPT_TOKENS], DType::I32, SEED, index)
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as u32)
        .collect()
}

fn hex_of(ids: &[u32]) -> String {
    ids.iter()
        .flat_map(|&id| (id as i32).to_le_bytes())
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every answer in the accuracy log is llama.cpp's own greedy answer to
/// its prompt (asked of `engine` directly), with its first token and
/// count.
fn check_answers(run: &LoadgenRun, engine: &LlamaServer, first_tokens: bool) -> Result<usize> {
    let entries = run.accuracy()?;
    ensure!(!entries.is_empty(), "no answers in the accuracy log");
    let mut direct: HashMap<u64, Vec<u32>> = HashMap::new();
    for e in &entries {
        let expected = match direct.entry(e.qsl_idx) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(new) => new.insert(greedy_tokens(
                &engine.url,
                &prompt(e.qsl_idx as usize),
                ANSWER_TOKENS,
            )?),
        };
        ensure!(
            expected.len() == ANSWER_TOKENS as usize,
            "llama.cpp answered sample {} with {} tokens",
            e.qsl_idx,
            expected.len()
        );
        ensure!(
            e.data.to_lowercase() == hex_of(expected),
            "seq_id {} (sample {}): the node's answer {} is not llama.cpp's own {}",
            e.seq_id,
            e.qsl_idx,
            e.data,
            hex_of(expected)
        );
        ensure!(
            e.token_count == Some(expected.len() as i64),
            "seq_id {}: n_tokens {:?}, {} tokens in the answer",
            e.seq_id,
            e.token_count,
            expected.len()
        );
        if first_tokens {
            let first = e.token_data.as_deref().unwrap_or_default().to_lowercase();
            ensure!(
                first == hex_of(&expected[..1]),
                "seq_id {}: first token {first}, answer starts {}",
                e.seq_id,
                hex_of(&expected[..1])
            );
        }
    }
    Ok(direct.len())
}

/// VALID, no runtime error, token latencies measured.
fn check_valid(run: &LoadgenRun) -> Result<()> {
    let (summary, detail) = run.expect_valid()?;
    // Offline reports tokens per second; the others first-token latency.
    let key = if summary.contains("Scenario : Offline") {
        "result_tokens_per_second"
    } else {
        "result_first_token_mean_latency_ns"
    };
    let value = detail
        .value(key)
        .and_then(|v| v.as_f64())
        .with_context(|| format!("no {key}"))?;
    ensure!(value > 0.0, "{key} {value}");
    Ok(())
}

/// TEST06's own verification script on the run's accuracy log.
fn test06(run: &LoadgenRun, dir: &Path, scenario: &str) -> Result<()> {
    let Some(checkout) = inference_checkout() else {
        return netdiv_tests::skip_unless_ci("a mlcommons/inference checkout (TEST06)");
    };
    let script = checkout.join("compliance/TEST06/run_verification.py");
    let out = dir.join("test06");
    let output = std::process::Command::new(python_for_official_tools()?)
        .arg(&script)
        .arg("--compliance_dir")
        .arg(&run.logs)
        .arg("--output_dir")
        .arg(&out)
        .args(["--scenario", scenario, "--dtype", "int32"])
        .output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success() && text.contains("TEST06 verification complete"),
        "TEST06 failed:\n{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Each node answered samples (the run record's per-node traffic).
fn check_both_nodes_served(run: &LoadgenRun) -> Result<()> {
    let nodes = run.record()?.nodes;
    ensure!(nodes.len() == 2, "{} nodes in the run record", nodes.len());
    for node in &nodes {
        let answered = node.traffic.answers;
        let detail = node.backend_detail.as_str();
        ensure!(
            answered > 0 && node.backend == "openai",
            "a node answered nothing, or not through its engine: {node:?}"
        );
        // Info names the engine's model and version.
        ensure!(
            detail.contains("engine=llama.cpp")
                && detail.contains("model=")
                && detail.contains(".gguf")
                && detail.contains("version=llama.cpp b"),
            "backend_detail {detail:?}"
        );
    }
    Ok(())
}

fn engines(files: &LlamaFiles) -> Result<[LlamaServer; 2]> {
    Ok([
        LlamaServer::start(files, ENGINE_SLOTS)?,
        LlamaServer::start(files, ENGINE_SLOTS)?,
    ])
}

/// Which LoadGen measures a run.
#[derive(Clone, Copy, PartialEq)]
enum Engine {
    Ours,
    /// The official C++ LoadGen, as a submission must use.
    Official,
}

fn two_nodes_run(scenario: &str, transport: &'static str, loadgen_engine: Engine) -> Result<()> {
    let Some(files) = llama_cpp_files()? else {
        return Ok(());
    };
    let official = loadgen_engine == Engine::Official;
    let dir = test_dir(&format!(
        "llama-cpp-{scenario}-{transport}{}",
        if official { "-official" } else { "" }
    ))?;
    let [a, b] = engines(&files)?;
    let cluster = start_nodes(&dir, transport, &[&a, &b], &node_config(ANSWER_TOKENS))?;
    let mut extra = cluster.loadgen_flags();
    if official {
        extra.extend(["--loadgen".into(), "official".into()]);
    }
    let flags = run_flags(&dir, scenario, &user_conf(), &extra)?;
    let program = if official {
        loadgen_node_official_bin()?
    } else {
        loadgen_node_bin()?
    };
    let run = loadgen_with(&program, &dir, &flags, Duration::from_secs(240))?;
    check_valid(&run).with_context(|| format!("in {}", dir.display()))?;
    let prompts = check_answers(&run, &a, scenario != "Offline")?;
    test06(&run, &dir, scenario)?;
    check_both_nodes_served(&run)?;
    eprintln!("{scenario} over {transport}: {prompts} distinct prompts checked against llama.cpp");
    Ok(())
}

#[test]
fn llama_cpp_server_scenario_over_two_nodes_is_valid_and_answers_as_llama_cpp() -> Result<()> {
    two_nodes_run("Server", "grpc", Engine::Ours)
}

#[test]
fn llama_cpp_server_scenario_under_the_official_loadgen_is_valid_and_answers_as_llama_cpp(
) -> Result<()> {
    two_nodes_run("Server", "grpc", Engine::Official)
}

#[test]
fn llama_cpp_offline_over_two_quic_nodes_is_valid_and_answers_as_llama_cpp() -> Result<()> {
    two_nodes_run("Offline", "quic", Engine::Ours)
}

#[test]
fn an_engine_killed_mid_run_fails_its_samples_and_the_restarted_engine_serves_again() -> Result<()>
{
    let Some(files) = llama_cpp_files()? else {
        return Ok(());
    };
    let dir = test_dir("llama-cpp-killed")?;
    let mut engine = LlamaServer::start(&files, ENGINE_SLOTS)?;
    // Long answers, so the engine dies in the middle of streams.
    let mut config = node_config(200);
    config.openai.first_token_timeout_s = 10.0;
    config.openai.token_timeout_s = 10.0;
    let cluster = start_nodes(&dir, "grpc", &[&engine], &config)?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 20)
        .set("*.Offline.min_duration", 1000)
        .set("*.Offline.min_query_count", 200);
    let flags = run_flags(&dir, "Offline", &conf, &cluster.loadgen_flags())?;
    // The engine dies while the node has token streams under way.
    let (pid, metrics) = (engine.pid(), cluster.nodes[0].metrics.context("metrics")?);
    let killer = std::thread::spawn(move || {
        signal_when_busy(
            pid,
            metrics,
            Busy::Streaming,
            libc::SIGKILL,
            Duration::from_secs(60),
        )
    });
    let started = Instant::now();
    let run = loadgen(&dir, &flags, Duration::from_secs(120))?;
    killer.join().expect("killer thread")?;
    ensure!(
        !run.status.success(),
        "the run succeeded although its engine was killed:\n{}",
        run.stderr
    );
    let engine_errors = [
        "the engine's stream broke",
        "without its last event (truncated)",
        "cannot reach the engine",
    ];
    ensure!(
        engine_errors.iter().any(|e| run.stderr.contains(e)),
        "no engine error in loadgen-node's output:\n{}",
        netdiv_tests::tail(&run.stderr, 30)
    );
    eprintln!("the killed run ended after {:?}", started.elapsed());
    // The node's health follows its engine's: down, then back after the
    // engine is restarted on the same port.
    let node = &cluster.nodes[0];
    node.wait_for_health(ServingStatus::NotServing, Duration::from_secs(10))?;
    engine.restart()?;
    node.wait_for_health(ServingStatus::Serving, Duration::from_secs(10))?;

    // The same node serves again.
    let dir2 = dir.join("after-restart");
    std::fs::create_dir_all(&dir2)?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 20)
        .set("*.Offline.min_duration", 500)
        .set("*.Offline.min_query_count", 40);
    let flags = run_flags(&dir2, "Offline", &conf, &cluster.loadgen_flags())?;
    let run = loadgen(&dir2, &flags, Duration::from_secs(120))?;
    check_valid(&run)
        .with_context(|| format!("after the engine's restart, in {}", dir2.display()))?;
    Ok(())
}

/// A gRPC sut-node with `config` in front of the engine at `url`.
fn engine_node(
    dir: &Path,
    name: &str,
    config: &FileConfig,
    url: &str,
    extra: &[&str],
) -> Result<NodeProcess> {
    let file = write_file(dir, &format!("{name}.toml"), &node_toml(config)?)?;
    let mut args = vec![
        "--transport",
        "grpc",
        "--config",
        file.to_str().context("utf-8 path")?,
        "--engine-url",
        url,
    ];
    args.extend_from_slice(extra);
    NodeProcess::start(name, None, &args)
}

/// Every message until each of `samples` samples has its completion.
async fn exchange(
    node: &NodeProcess,
    queries: Vec<pb::Query>,
    samples: usize,
) -> Result<Vec<pb::Completion>> {
    grpc_collect(node, ClientCert::None, queries, |got| {
        got.iter().filter(|c| !c.first_token).count() >= samples
    })
    .await
}

fn ids_bytes(ids: &[u32]) -> Vec<u8> {
    ids.iter()
        .flat_map(|&id| (id as i32).to_le_bytes())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_engine_gives_clear_per_sample_errors_and_the_node_keeps_serving(
) -> Result<()> {
    let engine = MisbehavingEngine::start()?;
    let dir = test_dir("misbehaving-engine")?;
    let mut config = node_config(8);
    config.openai.first_token_timeout_s = 1.0;
    config.openai.token_timeout_s = 1.0;
    let node = engine_node(&dir, "misbehaving-engine", &config, &engine.url(), &[])?;
    // Each misbehaviour twice.
    let first_ids: Vec<u32> = Misbehaviour::ALL
        .iter()
        .flat_map(|b| [b.id(11), b.id(12)])
        .collect();
    let inputs: Vec<Vec<u8>> = first_ids.iter().map(|&id| ids_bytes(&[id, 5, 5])).collect();
    let got = exchange(&node, vec![plain_query(1, 0, &inputs)], inputs.len()).await?;
    for (i, input) in inputs.iter().enumerate() {
        let id = first_ids[i];
        let mine: Vec<&pb::Completion> = got.iter().filter(|c| c.response_id == i as u64).collect();
        let done: Vec<_> = mine.iter().filter(|c| !c.first_token).collect();
        ensure!(done.len() == 1, "sample {i}: {} completions", done.len());
        let done = done[0];
        let behaviour = Misbehaviour::of(id);
        match behaviour.expected_error() {
            None => {
                ensure!(done.error.is_empty(), "sample {i}: {}", done.error);
                ensure!(
                    done.data[..] == ids_bytes(&[id + 1, id + 2, id + 3])[..] && done.n_tokens == 3,
                    "sample {i}: {:?} n_tokens {}",
                    done.data,
                    done.n_tokens
                );
                let first: Vec<_> = mine.iter().filter(|c| c.first_token).collect();
                ensure!(
                    first.len() == 1 && first[0].data[..] == ids_bytes(&[id + 1])[..],
                    "sample {i}: first tokens {first:?}"
                );
            }
            Some(text) => {
                ensure!(
                    done.error.contains(text) && !done.retryable,
                    "sample {i} ({behaviour:?}, input {input:?}): error {:?} does not say {text:?}",
                    done.error
                );
            }
        }
    }
    // The node still serves: good samples after the bad ones.
    let good: Vec<Vec<u8>> = (0..4)
        .map(|k| ids_bytes(&[Misbehaviour::Good.id(20 + k), 1]))
        .collect();
    let got = exchange(&node, vec![plain_query(2, 100, &good)], good.len()).await?;
    let done: Vec<_> = got.iter().filter(|c| !c.first_token).collect();
    ensure!(
        done.len() == 4 && done.iter().all(|c| c.error.is_empty() && c.n_tokens == 3),
        "after the bad samples: {done:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_node_declines_with_the_retryable_reply() -> Result<()> {
    let engine = MisbehavingEngine::start()?;
    let dir = test_dir("full-engine-node")?;
    let mut config = node_config(8);
    config.openai.max_in_flight = 1;
    config.openai.max_waiting = 1;
    config.openai.first_token_timeout_s = 2.0;
    let node = engine_node(&dir, "full-engine-node", &config, &engine.url(), &[])?;
    // Stalling prompts: one open request, one waiting, the other two
    // declined at once.
    let stalls: Vec<Vec<u8>> = (0..4)
        .map(|k| ids_bytes(&[Misbehaviour::Stall.id(k), 1]))
        .collect();
    let got = exchange(&node, vec![plain_query(1, 0, &stalls)], stalls.len()).await?;
    let declined: Vec<_> = got.iter().filter(|c| c.retryable).collect();
    ensure!(
        declined.len() == 2
            && declined
                .iter()
                .all(|c| c.error.contains("node is full: it holds 2 samples")),
        "declined: {declined:?}"
    );
    let timed_out = got
        .iter()
        .filter(|c| !c.retryable && c.error.contains("no first token"))
        .count();
    ensure!(timed_out == 2, "{got:?}");
    Ok(())
}

/// Both HTTP versions: every request on the version configured, and the
/// connections kept alive and reused (HTTP/2: all on one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_use_the_configured_http_version_on_reused_connections() -> Result<()> {
    const SAMPLES: u32 = 40;
    for http2 in [false, true] {
        let engine = CountingEngine::start()?;
        let dir = test_dir(&format!("counting-engine-h{}", if http2 { 2 } else { 1 }))?;
        let mut config = node_config(8);
        config.openai.http2 = http2;
        config.openai.max_in_flight = 4;
        let node = engine_node(&dir, "counting", &config, &engine.url(), &[])?;
        let inputs: Vec<Vec<u8>> = (0..SAMPLES).map(|k| ids_bytes(&[9 * k, 1])).collect();
        // Queries one after another, so connections go idle in between.
        for (q, chunk) in inputs.chunks(4).enumerate() {
            let first_id = 4 * q as u64;
            let got = exchange(
                &node,
                vec![plain_query(q as u64, first_id, chunk)],
                chunk.len(),
            )
            .await?;
            let done: Vec<_> = got.iter().filter(|c| !c.first_token).collect();
            ensure!(
                done.iter().all(|c| c.error.is_empty() && c.n_tokens == 3),
                "{done:?}"
            );
        }
        let (versions, connections) = engine.seen();
        let wanted = if http2 {
            Version::HTTP_2
        } else {
            Version::HTTP_11
        };
        // The probe and the prompt-cache check at start, then one
        // request per sample.
        ensure!(
            versions.len() == SAMPLES as usize + START_REQUESTS
                && versions.iter().all(|v| *v == wanted),
            "http2 = {http2}: {versions:?}"
        );
        let most = if http2 { 1 } else { 5 };
        ensure!(
            connections <= most,
            "http2 = {http2}: {} requests on {connections} connections (at most {most})",
            versions.len()
        );
    }
    Ok(())
}

#[test]
fn a_node_waiting_for_its_engine_stops_at_once_on_sigterm() -> Result<()> {
    let dir = test_dir("engine-wait-stop")?;
    let config = write_file(&dir, "sut-node.toml", &node_toml(&node_config(8))?)?;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let stderr = dir.join("sut-node.stderr");
    let mut child = std::process::Command::new(netdiv_tests::sut_node_bin()?)
        .args(["--name", "waiting", "--transport", "grpc", "--config"])
        .arg(&config)
        .args(["--engine-url", &format!("http://{closed}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr)?)
        .spawn()?;
    // It waits up to startup_timeout_s (600 s) for the engine ...
    std::thread::sleep(Duration::from_millis(700));
    ensure!(
        child.try_wait()?.is_none(),
        "the node did not wait for its engine"
    );
    // ... unless it is stopped.
    // SAFETY: plain syscall on our child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            anyhow::bail!("the node still runs 5 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&stderr)?;
    ensure!(
        !status.success() && text.contains("stopped while the backend was starting"),
        "{status}: {text}"
    );
    Ok(())
}

#[test]
fn a_node_refuses_to_start_without_its_engine_or_with_one_that_gives_no_token_ids() -> Result<()> {
    let dir = test_dir("engine-refusals")?;
    let mut config = node_config(8);
    config.openai.startup_timeout_s = 1.0;
    // Nothing listens: the node waits startup_timeout_s, then says so.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let e = engine_node(&dir, "no-engine", &config, &format!("http://{closed}"), &[])
        .err()
        .context("a node started without its engine")?;
    let text = format!("{e:#}");
    ensure!(
        text.contains("did not answer GET /health within 1 s"),
        "{text}"
    );
    // An engine that answers text only, as vLLM before 0.10.2 does.
    let engine = MisbehavingEngine::start_text_only()?;
    let e = engine_node(
        &dir,
        "wrong-api",
        &config,
        &engine.url(),
        &["--engine-api", "vllm"],
    )
    .err()
    .context("a node started with an engine that gives no token ids")?;
    let text = format!("{e:#}");
    ensure!(
        text.contains("did not stream output token ids for a probe prompt"),
        "{text}"
    );
    Ok(())
}

#[test]
fn llama_cpp_with_prompt_caching_forced_on_is_caught_at_start_and_refused_by_submission(
) -> Result<()> {
    let Some(files) = llama_cpp_files()? else {
        return Ok(());
    };
    let Some(inference) = inference_checkout() else {
        return skip_unless_ci("a mlcommons/inference checkout (NETDIV_INFERENCE_REPO)");
    };
    let dir = test_dir("llama-cpp-prompt-cache")?;
    let engine = LlamaServer::start(&files, ENGINE_SLOTS)?;
    // The same engine twice: once as the node asks for it (cache_prompt
    // false), once with llama.cpp's own default (prompt caching on).
    let off = engine_node(&dir, "cache-off", &node_config(8), &engine.url, &[])?;
    let mut caching = node_config(8);
    caching.openai.prompt_cache = PromptCache::EngineDefault;
    let on = engine_node(&dir, "cache-on", &caching, &engine.url, &[])?;
    let warned = on.stderr();
    ensure!(
        warned.contains("reuses cached prompts across queries"),
        "the caching node started without a warning:\n{warned}"
    );
    ensure!(
        !off.stderr().contains("reuses cached prompts"),
        "the node that turned caching off was taken for a caching one:\n{}",
        off.stderr()
    );
    // Submission mode refuses the caching node, before any run, naming
    // it and the measured evidence; the other node is not named for it.
    let nodes = [&off, &on]
        .iter()
        .map(|node| Ok(format!("grpc://{}", node.grpc.context("gRPC address")?)))
        .collect::<Result<Vec<_>>>()?;
    let args = refused_llm_submission(&dir, &inference, &nodes)?;
    // The preflight alone names the caching node on a FAIL line, in seconds.
    let mut preflight = args.clone();
    preflight[0] = "preflight".into();
    let exited = run_with_deadline(
        std::process::Command::new(loadgen_node_official_bin()?)
            .args(&preflight)
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(dir.join("preflight.out"))?)
            .stderr(std::fs::File::create(dir.join("preflight.err"))?),
        Duration::from_secs(120),
    )?;
    let said = std::fs::read_to_string(dir.join("preflight.out"))?;
    let fails = |node: &str| {
        said.lines().any(|l| {
            l.contains("FAIL")
                && l.contains(node)
                && l.contains("reuses cached prompts across queries")
        })
    };
    ensure!(
        !exited.timed_out
            && !exited.status.success()
            && fails("(cache-on)")
            && !fails("(cache-off)"),
        "the preflight did not fail on the caching node alone ({}):\n{said}\n{}",
        exited.status,
        std::fs::read_to_string(dir.join("preflight.err"))?
    );
    let err = std::fs::File::create(dir.join("submission.err"))?;
    let exited = run_with_deadline(
        std::process::Command::new(loadgen_node_official_bin()?)
            .args(&args)
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(err),
        Duration::from_secs(120),
    )?;
    let stderr = std::fs::read_to_string(dir.join("submission.err"))?;
    ensure!(
        !exited.timed_out && !exited.status.success(),
        "the submission was not refused ({}):\n{stderr}",
        exited.status
    );
    let caching_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("reuses cached prompts across queries"))
        .collect();
    ensure!(
        caching_lines.len() == 1
            && caching_lines[0].contains("(cache-on)")
            && caching_lines[0].contains("prefix cache: ON (a repeated 512-token prompt took"),
        "the refusal does not name the caching node alone, with its evidence:\n{stderr}"
    );
    ensure!(stderr.contains("nothing was run"), "{stderr}");
    Ok(())
}

/// vLLM's, TensorRT-LLM's and SGLang's APIs against the test engine: an
/// answer ends normally only on `stop` or `length`, SGLang's count of
/// completion tokens must match the ids streamed, and the version the
/// engine says (asked where each API says it) reaches the node's Info.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_engine_api_ends_answers_only_on_stop_or_length_and_counts_its_tokens() -> Result<()> {
    let engine = MisbehavingEngine::start_as(Some("1.2.0"))?;
    let dir = test_dir("engine-apis")?;
    let cancelled = "the engine cut the answer short (finish reason \"cancelled\")";
    let cases: [(&str, &[(u32, &str)]); 3] = [
        ("vllm", &[(CUT_SHORT, cancelled)]),
        ("trtllm", &[(CUT_SHORT, cancelled)]),
        (
            "sglang",
            &[
                (
                    CUT_SHORT,
                    "cut the answer short (finish reason {\"type\":\"abort\"})",
                ),
                (
                    MISCOUNTED,
                    "the engine counted 4 completion token(s) but streamed the ids of 3",
                ),
            ],
        ),
    ];
    for (api, bad) in cases {
        let node = engine_node(
            &dir,
            &format!("{api}-node"),
            &node_config(8),
            &engine.url(),
            &["--engine-api", api],
        )?;
        let mut client = grpc_client(&node, ClientCert::None).await?;
        let info = client
            .info(versioned(pb::InfoRequest {}))
            .await?
            .into_inner();
        ensure!(
            info.backend_detail.contains(&format!("engine={api}"))
                && info.backend_detail.contains("version=1.2.0"),
            "{api}: {}",
            info.backend_detail
        );
        let mut first_ids = vec![7];
        first_ids.extend(bad.iter().map(|(id, _)| *id));
        let inputs: Vec<Vec<u8>> = first_ids.iter().map(|&id| ids_bytes(&[id, 5])).collect();
        let got = exchange(&node, vec![plain_query(1, 0, &inputs)], inputs.len()).await?;
        let done = |i: usize| {
            got.iter()
                .find(|c| c.response_id == i as u64 && !c.first_token)
                .cloned()
                .unwrap_or_default()
        };
        let good = done(0);
        ensure!(
            good.error.is_empty() && good.data[..] == ids_bytes(&[8, 9, 10])[..],
            "{api}: the good answer: {good:?}"
        );
        for (i, (_, want)) in bad.iter().enumerate() {
            let c = done(i + 1);
            ensure!(
                c.error.contains(want) && !c.retryable,
                "{api}: sample {}: error {:?} does not say {want:?}",
                i + 1,
                c.error
            );
        }
    }
    Ok(())
}

#[test]
fn a_node_refuses_an_engine_older_than_the_apis_minimum_version() -> Result<()> {
    let dir = test_dir("engine-too-old")?;
    for (api, version, minimum) in [("vllm", "0.9.2", "0.10.2"), ("trtllm", "0.21.0", "1.0")] {
        let engine = MisbehavingEngine::start_as(Some(version))?;
        let e = engine_node(
            &dir,
            &format!("old-{api}"),
            &node_config(8),
            &engine.url(),
            &["--engine-api", api],
        )
        .err()
        .with_context(|| format!("a node started in front of {api} {version}"))?;
        let text = format!("{e:#}");
        ensure!(
            text.contains(&format!(
                "is version {version}; the node needs {minimum} or later"
            )),
            "{text}"
        );
    }
    Ok(())
}

/// The README's LLM example, run as written (its ports made free ones and
/// its paths this checkout's): llama.cpp, a node in front of it, and an
/// Offline run through the node.
#[test]
fn the_readmes_llm_example_runs_as_written() -> Result<()> {
    if llama_cpp_files()?.is_none() {
        return Ok(());
    }
    let root = netdiv_tests::workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md"))?;
    let marker = "<!-- readme-llm-example:";
    let start = readme
        .find(marker)
        .context("no LLM example marker in the README")?;
    let block = &readme[start..];
    let block = &block[block
        .find("```sh\n")
        .context("no sh block after the marker")?
        + 6..];
    let block = &block[..block.find("```").context("an unclosed block")?];
    let free_port = || -> Result<u16> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port())
    };
    let (engine, node) = (free_port()?, free_port()?);
    let script = block
        .replace("8000", &engine.to_string())
        .replace("7001", &node.to_string())
        .replace(
            "target/release/sut-node",
            &netdiv_tests::sut_node_bin()?.display().to_string(),
        )
        .replace(
            "target/release/loadgen-node",
            &netdiv_tests::loadgen_node_bin()?.display().to_string(),
        )
        .replace("deploy/", &format!("{}/deploy/", root.display()));
    ensure!(
        script.contains(&format!("127.0.0.1:{engine}"))
            && script.contains(&format!("127.0.0.1:{node}")),
        "the example no longer names its ports:\n{block}"
    );
    let dir = test_dir("readme-llm")?;
    // Its background processes end with the script, also when `timeout`
    // stops it.
    let wrapped = format!(
        "set -euo pipefail\ntrap 'exit 1' TERM INT\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n{script}"
    );
    let out = std::process::Command::new("timeout")
        .args(["-k", "10", "600", "bash", "-c", &wrapped])
        .current_dir(&dir)
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success(),
        "the README's LLM example failed:\n{script}\n{text}"
    );
    let summary = std::fs::read_to_string(dir.join("mlperf-logs/mlperf_log_summary.txt"))?;
    ensure!(
        netdiv_tests::mlperf_logs::summary_value(&summary, "Result is").is_some(),
        "{summary}"
    );
    let detail = std::fs::read_to_string(dir.join("mlperf-logs/mlperf_log_detail.txt"))?;
    ensure!(
        detail.contains(r#""key": "generated_query_count""#) && !text.contains(" ERROR "),
        "{text}"
    );
    Ok(())
}

/// A node whose engine hangs (requests accepted, not one token streamed)
/// beside a healthy node: the QDL fails it within `--node-timeout` (2 s,
/// plus its half-second look), cancels its samples there, and the node
/// aborts each request at the engine (the engine sees every one hung up)
/// while the run goes on; the healthy node (4 answers of 1.6 s at once,
/// so the run lasts several seconds past the failure) completes every
/// sample.
#[test]
fn a_node_that_streams_nothing_is_failed_in_time_and_its_requests_are_aborted() -> Result<()> {
    let engine = MisbehavingEngine::start_silent()?;
    let dir = test_dir("silent-engine-node")?;
    let mut config = node_config(ANSWER_TOKENS);
    config.openai.api = sut_node::backend::openai::api::EngineApi::Vllm;
    config.openai.max_in_flight = 4;
    // The node's own first-token timeout is far longer: the QDL's node
    // timeout is what must act.
    config.openai.first_token_timeout_s = 600.0;
    let silent = engine_node(&dir, "silent-node", &config, &engine.url(), &[])?;
    let healthy = Cluster::start(
        &dir.join("healthy"),
        "grpc",
        &["healthy-node"],
        &netdiv_tests::configs::llm_node(100_000.0, 4, ANSWER_TOKENS),
        &[],
    )?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 1)
        .set("*.Offline.min_duration", 1000)
        .set("*.Offline.min_query_count", 16);
    let mut extra = vec![
        "--sut-node".to_string(),
        format!("grpc://{}", silent.grpc.context("gRPC listener")?),
        "--node-timeout".into(),
        "2".into(),
    ];
    extra.extend(healthy.loadgen_flags());
    let flags = llama2_prompt_flags(&dir, "Offline", &conf, (PROMPT_TOKENS, SEED, 16), &extra)?;
    // Watch the engine while the run goes on: when its requests came, and
    // when its client hung them up.
    let started = Instant::now();
    let (first_open, first_abort) = std::thread::scope(|scope| -> Result<_> {
        let run = scope.spawn(|| loadgen(&dir, &flags, Duration::from_secs(120)));
        let (mut opened_at, mut aborted_at) = (None, None);
        while !run.is_finished() {
            let (opened, hung_up) = engine.silent_requests();
            if opened > 0 && opened_at.is_none() {
                opened_at = Some(started.elapsed());
            }
            if hung_up > 0 && aborted_at.is_none() {
                aborted_at = Some(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let run = run.join().expect("loadgen thread")?;
        run.expect_success()?;
        let record = run.record()?;
        let failed = record
            .node_changes
            .iter()
            .find(|c| c.state == "failed")
            .with_context(|| format!("the silent node was never failed: {:?}", record.qdl))?;
        ensure!(
            failed.detail.contains("showed no progress for 2s"),
            "{failed:?}"
        );
        ensure!(
            record.qdl.cancelled >= 1,
            "nothing was cancelled: {:?}",
            record.qdl
        );
        Ok((opened_at, aborted_at))
    })?;
    let first_open = first_open.context("the silent node's engine got no request")?;
    let first_abort = first_abort.context("no request was aborted while the run went on")?;
    let waited = first_abort - first_open;
    // 2 s of silence, up to 0.5 s for the watchdog to look, the cancel's
    // trip and the node's abort: well under 4 s on a loaded machine.
    ensure!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(4),
        "the first request was aborted {waited:?} after it reached the engine"
    );
    // Every request the engine held was aborted by its node, none left
    // generating.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (opened, hung_up) = engine.silent_requests();
        if opened == hung_up {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "{opened} requests reached the engine, {hung_up} were aborted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
