//! `loadgen-node run`: one test against the SUT the flags choose, through
//! our engine or (feature `official`) the official LoadGen, then the
//! summary and where the logs are. The flags become a [`plan::RunPlan`]
//! once; the parts below take the plan:
//!
//! * [`network`]: a run through the QDL to sut-nodes, and its record
//!   ([`record`]);
//! * [`engines`]: one test under either engine, with its progress
//!   ([`progress`]) and metrics ([`metrics`]);
//! * [`embedded`]: the embedded default (two local sut-nodes);
//! * [`submission_mode`]: the rules a submission run keeps.

pub(crate) mod conf_keys;
pub(crate) mod embedded;
pub(crate) mod engines;
pub(crate) mod metrics;
pub(crate) mod network;
pub(crate) mod plan;
pub(crate) mod progress;
pub(crate) mod record;
pub(crate) mod submission_mode;

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use loadgen_node::engine::settings::{Scenario, TestSettings};
use loadgen_node::sut::null::{NullSut, SyntheticQsl};
use loadgen_node::sut::Counters;

use super::args::RunArgs;
use plan::{RunPlan, Target};

/// Runs what the flags ask for: the embedded default without a SUT, else
/// one test against `--sut` or the `--sut-node`s.
pub(crate) fn command(args: &RunArgs) -> Result<()> {
    let plan = RunPlan::from_args(args)?;
    for warning in plan.conf_warnings()? {
        tracing::warn!("{warning}");
    }
    let _cpu_latency = sut_node::host::cpu_latency::hold_requested(plan.cpu_latency_us)?;
    let scenario = match (&plan.target, plan.scenario) {
        (Target::Embedded { .. }, _) => return embedded::run_default(&plan),
        (_, Some(s)) => s.scenario,
        (_, None) => bail!("--scenario is required with --sut or --sut-node"),
    };
    let ran = match &plan.target {
        Target::Null {
            output_tokens,
            nodes: None,
        } => run_null(&plan, scenario, *output_tokens),
        Target::Null {
            output_tokens,
            nodes: Some(nodes),
        } => run_null_nodes(&plan, scenario, *nodes, *output_tokens),
        Target::InProcess {
            backend,
            batching,
            origin,
            nodes,
        } => run_in_process(&plan, scenario, *nodes, backend, *batching, origin),
        Target::Network { nodes } => {
            network::run(&plan, scenario, nodes.clone(), None, &plan.outputs.dir)
        }
        Target::Embedded { .. } => unreachable!("handled above"),
    };
    report_after(&plan, &plan.outputs.dir);
    ran
}

/// The run's report beside its logs, if it wrote a summary (a run that
/// failed late still gets one: its logs say why).
pub(crate) fn report_after(plan: &RunPlan, output: &Path) {
    if plan.outputs.report && output.join(loadgen_node::mlperf_logs::SUMMARY).is_file() {
        super::report::after_run(output);
    }
}

/// `--sut null`: the engine alone, answered at once.
fn run_null(plan: &RunPlan, scenario: Scenario, output_tokens: Option<i64>) -> Result<()> {
    // No data and no cost: the engine measured on its own.
    let (total, performance) = plan.counts(None)?;
    let settings = plan.settings(scenario, None)?;
    let qsl = SyntheticQsl::new(total, performance);
    let mut sut = NullSut::new(plan.sut_name.clone());
    match output_tokens {
        Some(n) => sut = sut.with_output_tokens(n),
        None if settings.use_token_latencies => bail!(
            "{} measures token latencies (use_token_latencies = 1): give --null-output-tokens N \
             (tokens per answer, at least 2) so the null SUT sends first tokens and token counts",
            plan.model
        ),
        None => {}
    }
    engines::run_test(plan, &sut, &qsl, &settings, &plan.outputs.dir, None, None)
}

/// `--sut synthetic` or `--sut local`: `nodes` sut-node cores (backend
/// and batcher) in this process.
fn run_in_process(
    plan: &RunPlan,
    scenario: Scenario,
    nodes: usize,
    backend: &sut_node::backend::BackendConfig,
    batching: sut_node::batcher::BatchPolicy,
    origin: &str,
) -> Result<()> {
    let qsl = plan.qsl()?;
    let counters = Arc::new(Counters::default());
    let setting_up = std::time::Instant::now();
    let sut = plan
        .in_process_nodes(
            nodes,
            backend,
            batching,
            qsl.store.clone(),
            counters.clone(),
            scenario,
        )
        .with_context(|| origin.to_string())?;
    network::log_connected(nodes, setting_up.elapsed());
    let settings = plan.settings(scenario, None)?;
    run_behind_local_links(plan, &settings, &qsl, &sut, counters)
}

/// `--sut null --local-nodes N`: null nodes behind the QDL.
fn run_null_nodes(
    plan: &RunPlan,
    scenario: Scenario,
    nodes: usize,
    output_tokens: Option<i64>,
) -> Result<()> {
    let settings = plan.settings(scenario, None)?;
    if settings.use_token_latencies && output_tokens.is_none() {
        bail!(
            "{} measures token latencies (use_token_latencies = 1): give --null-output-tokens N \
             (tokens per answer, at least 2) so the null nodes send first tokens and token counts",
            plan.model
        );
    }
    let qsl = plan.qsl()?;
    let counters = Arc::new(Counters::default());
    let setting_up = std::time::Instant::now();
    let sut = plan.null_nodes(
        nodes,
        output_tokens,
        qsl.store.clone(),
        counters.clone(),
        scenario,
    )?;
    network::log_connected(nodes, setting_up.elapsed());
    run_behind_local_links(plan, &settings, &qsl, &sut, counters)
}

/// One test over in-process nodes, then how the QDL spread the samples.
fn run_behind_local_links(
    plan: &RunPlan,
    settings: &TestSettings,
    qsl: &loadgen_node::sut::network::StoreQsl,
    sut: &loadgen_node::sut::local::LocalSut,
    counters: Arc<Counters>,
) -> Result<()> {
    let ran = engines::run_test(
        plan,
        sut,
        qsl,
        settings,
        &plan.outputs.dir,
        Some(counters),
        None,
    );
    let stats = sut.network().stats();
    // How evenly the QDL spread the samples over the nodes.
    let (traffic, _) = sut.network().traffic();
    let sent: Vec<u64> = traffic.iter().map(|(t, _)| t.samples_sent).collect();
    let nodes = sent.len();
    let nodes_used = sent.iter().filter(|&&n| n > 0).count();
    let fewest = sent.iter().copied().min().unwrap_or(0);
    let most = sent.iter().copied().max().unwrap_or(0);
    tracing::info!(
        event = "in_process_qdl",
        completed = stats.completed,
        resent = stats.resent,
        late_answers = stats.late_answers,
        nodes,
        nodes_used,
        fewest_samples = fewest,
        most_samples = most,
        "the in-process nodes' samples went through the QDL's local links: {} completed, \
         on {nodes_used} of {nodes} node(s) ({fewest} to {most} each)",
        stats.completed
    );
    ran
}
