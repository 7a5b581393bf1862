//! A run through the QDL to sut-nodes: connect to every node (checked in
//! submission mode), run the test under the plan's engine with progress
//! and metrics, write the run record whatever the outcome, and say what
//! the QDL had to do (failed nodes, re-sent samples, late first tokens).

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Result};
use loadgen_node::engine::settings::Scenario;
use loadgen_node::sut::network::QdlSut;
use loadgen_node::sut::Counters;
use qdl::NodeUrl;

use super::engines;
use super::plan::RunPlan;
use super::record::RecordInputs;

/// Runs `scenario` through the QDL to `nodes`, its logs in `output`;
/// `embedded_conf` is the embedded default's user.conf when no file is
/// given.
pub(crate) fn run(
    plan: &RunPlan,
    scenario: Scenario,
    nodes: Vec<NodeUrl>,
    embedded_conf: Option<&str>,
    output: &Path,
) -> Result<()> {
    let qsl = plan.qsl()?;
    let settings = plan.settings(scenario, embedded_conf)?;
    let config = plan.qdl_config(nodes, scenario)?;
    // With --expand-dns, one node per address.
    let nodes = config.nodes.clone();
    let setting_up = std::time::Instant::now();
    let network = qdl::NetworkSut::connect(config, qsl.store.clone())?;
    let setup = setting_up.elapsed();
    let rehearsal_reasons = if plan.submission_mode {
        separation(plan, &nodes, &network)?
    } else {
        Vec::new()
    };
    log_nodes(&network);
    log_connected(network.node_urls().len(), setup);
    let counters = Arc::new(Counters::default());
    let sut = QdlSut::new(network, counters.clone());
    let metrics = match plan.outputs.metrics {
        Some(m) => Some(super::metrics::RunMetrics::start(
            m.listen,
            m.linger,
            &sut.network,
            counters.clone(),
        )?),
        None => None,
    };
    let scenario_name = plan.scenario_name(scenario);
    let record = RecordInputs {
        plan,
        network: &sut.network,
        store: &qsl.store,
        scenario: &scenario_name,
        output,
        rehearsal_reasons: &rehearsal_reasons,
    };
    let ran = engines::run_under_plan_engine(
        plan,
        &sut,
        &qsl,
        &settings,
        embedded_conf,
        counters,
        &record,
    );
    if let Some(metrics) = &metrics {
        metrics.finish();
    }
    // The record is written whatever the run's outcome, with the error
    // that ended it.
    let failure = ran.as_ref().err().map(|e| format!("{e:#}"));
    let (record, bandwidth) = super::record::write(&record, failure)?;
    if let Some(line) = bandwidth {
        tracing::info!("{line}");
    }
    tracing::info!(path = %record.display(), "run record written");
    ran?;
    after_run(plan, &sut.network)
}

/// Submission mode: the nodes must be across a network from this
/// LoadGen node, on other machines. Refused, every reason listed; or, for
/// a rehearsal, warned about and returned for the record.
fn separation(plan: &RunPlan, nodes: &[NodeUrl], network: &qdl::NetworkSut) -> Result<Vec<String>> {
    let found = super::submission_mode::check_nodes(
        nodes,
        network.node_infos(),
        &sut_node::host::nic::host_identity(),
        &sut_node::host::nic::host(),
    )?;
    if found.is_empty() {
        return Ok(found);
    }
    if !plan.rehearsal {
        bail!(
            "submission mode: the SUT is not across a network from this LoadGen node:\n  {}\n\
             (--rehearsal runs anyway, marked as a rehearsal)",
            found.join("\n  ")
        );
    }
    for reason in &found {
        tracing::warn!("rehearsal: {reason}");
    }
    Ok(found)
}

/// Each node's name, backend and host.
fn log_nodes(network: &qdl::NetworkSut) {
    for (url, info) in network.node_urls().iter().zip(network.node_infos()) {
        tracing::info!(
            node = %url,
            name = %info.name,
            backend = %info.backend,
            host = %info.hostname,
            "node {url}: {} ({} {}) on {}",
            info.name,
            info.backend,
            info.backend_detail,
            info.hostname
        );
    }
}

/// That all `nodes` answered, and how long connecting to them took
/// (resolving, connecting, an Info from each, opening the query paths).
pub(crate) fn log_connected(nodes: usize, setup: std::time::Duration) {
    let setup_ms = setup.as_secs_f64() * 1e3;
    tracing::info!(
        event = "nodes_connected",
        nodes,
        setup_ms,
        "connected to every node ({nodes}) in {setup_ms:.1} ms"
    );
}

/// What the QDL had to do during the run; in submission mode a run that
/// lost a node is not a result.
fn after_run(plan: &RunPlan, network: &qdl::NetworkSut) -> Result<()> {
    let stats = network.stats();
    if plan.submission_mode && (stats.nodes_failed > 0 || stats.resent > 0) {
        bail!(
            "submission mode: {} node(s) failed during the run; its logs are not a result",
            stats.nodes_failed
        );
    }
    if stats.nodes_failed > 0 || stats.resent > 0 {
        tracing::warn!(
            nodes_failed = stats.nodes_failed,
            resent = stats.resent,
            rejoins = stats.rejoins,
            cancelled = stats.cancelled,
            "{} node(s) failed during the run; {} samples were re-sent to the others \
             ({} cancelled at nodes still connected); nodes rejoined {} time(s)",
            stats.nodes_failed,
            stats.resent,
            stats.cancelled,
            stats.rejoins
        );
    }
    if stats.late_first_tokens > 0 {
        tracing::warn!(
            late_first_tokens = stats.late_first_tokens,
            first_tokens = stats.first_tokens,
            "{} first tokens were dropped (late, or a re-sent sample's second; \
             {} went to the LoadGen, one per sample)",
            stats.late_first_tokens,
            stats.first_tokens
        );
    }
    Ok(())
}
