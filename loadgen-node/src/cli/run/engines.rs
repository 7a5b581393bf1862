//! One test under the plan's engine: ours ([`run_test`]) or, with the
//! `official` feature, the official LoadGen over the QDL; each with its
//! live progress, then the summary and where the logs are.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadgen_node::engine::logs::LogSettings;
use loadgen_node::engine::settings::TestSettings;
use loadgen_node::engine::start_test;
use loadgen_node::sut::network::{QdlSut, StoreQsl};
use loadgen_node::sut::{Counters, QuerySampleLibrary, SystemUnderTest};

use super::plan::RunPlan;
use super::progress::{NodeView, ProgressLine};
use super::record::RecordInputs;
use crate::cli::args::Engine;

/// A network test under the plan's engine.
pub(crate) fn run_under_plan_engine(
    plan: &RunPlan,
    sut: &QdlSut,
    qsl: &StoreQsl,
    settings: &TestSettings,
    embedded_conf: Option<&str>,
    counters: Arc<Counters>,
    record: &RecordInputs<'_>,
) -> Result<()> {
    match plan.engine {
        Engine::Netdiv => run_test(
            plan,
            sut,
            qsl,
            settings,
            record.output,
            Some(counters),
            Some(node_view(sut)),
        ),
        Engine::Official => run_official(plan, sut, qsl, settings, embedded_conf, counters, record),
    }
}

/// The same test under the official LoadGen, from the same flags and
/// config files; it prints its own summary.
#[cfg(feature = "official")]
fn run_official(
    plan: &RunPlan,
    sut: &QdlSut,
    qsl: &StoreQsl,
    settings: &TestSettings,
    embedded_conf: Option<&str>,
    counters: Arc<Counters>,
    record: &RecordInputs<'_>,
) -> Result<()> {
    let output = record.output;
    use loadgen_node::sut::official::{self, OfficialRun};
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    // The official LoadGen reads config files only, so the embedded
    // default's settings go to one next to the logs.
    let embedded_path = output.join("embedded-user.conf");
    let user_conf = match (&plan.configs.user, embedded_conf) {
        (Some(path), _) => Some(path.as_path()),
        (None, Some(text)) => {
            std::fs::write(&embedded_path, text)
                .with_context(|| format!("cannot write {}", embedded_path.display()))?;
            Some(embedded_path.as_path())
        }
        (None, None) => None,
    };
    let audit = plan
        .configs
        .audit
        .clone()
        .unwrap_or_else(official::default_audit_conf);
    let _progress = start_progress(
        plan,
        format!("{} (official LoadGen)", settings.scenario.name()),
        settings,
        counters.clone(),
        Some(node_view(sut)),
    );
    // A lost node or a failed Name() ends the process inside the official
    // LoadGen's call: the record is written first, saying why.
    let last_words = |reason: &str| {
        if let Ok((path, _)) = super::record::write(record, Some(reason.to_string())) {
            tracing::info!(path = %path.display(), "run record written");
        }
    };
    let issued = official::run(
        &sut.network,
        qsl,
        counters,
        &OfficialRun {
            round: plan.round.name(),
            scenario: settings.scenario,
            mode: settings.mode,
            model: &plan.model,
            mlperf_conf: plan.configs.mlperf.as_deref(),
            user_conf,
            audit_conf: &audit,
            outdir: output,
            enable_trace: plan.outputs.trace,
            record_issued: plan.outputs.record_issued.is_some(),
            token_latencies: settings.use_token_latencies
                || qsl.store.benchmark().uses_token_latencies(),
            submission_mode: plan.submission_mode,
            on_fatal: Some(&last_words),
        },
    )?;
    drop(_progress);
    if let Some(path) = &plan.outputs.record_issued {
        write_issued(path, &issued)?;
    }
    println!(
        "Logs written to {} (by the official MLPerf LoadGen)",
        output.display()
    );
    Ok(())
}

#[cfg(not(feature = "official"))]
fn run_official(
    _: &RunPlan,
    _: &QdlSut,
    _: &StoreQsl,
    _: &TestSettings,
    _: Option<&str>,
    _: Arc<Counters>,
    _: &RecordInputs<'_>,
) -> Result<()> {
    bail!(
        "this loadgen-node was built without the official LoadGen: rebuild with \
         `cargo build --release -p loadgen-node --features official` (needs g++)"
    )
}

fn write_issued(path: &Path, issued: &[usize]) -> Result<()> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for index in issued {
        writeln!(out, "{index}")?;
    }
    out.flush()?;
    Ok(())
}

/// The nodes of a network run, for the progress display.
fn node_view(sut: &QdlSut) -> NodeView {
    NodeView {
        observer: sut.network.observer(),
        names: sut
            .network
            .node_infos()
            .iter()
            .map(|i| i.name.clone())
            .collect(),
    }
}

/// Progress as the plan asks, against the run's minimum duration.
fn start_progress(
    plan: &RunPlan,
    label: String,
    settings: &TestSettings,
    counters: Arc<Counters>,
    nodes: Option<NodeView>,
) -> ProgressLine {
    ProgressLine::start(
        plan.outputs.progress,
        plan.outputs.progress_interval,
        label,
        Duration::from_millis(settings.min_duration_ms),
        counters,
        nodes,
    )
}

/// Runs one test under our engine, then prints the summary and where the
/// logs are.
pub(crate) fn run_test(
    plan: &RunPlan,
    sut: &dyn SystemUnderTest,
    qsl: &dyn QuerySampleLibrary,
    settings: &TestSettings,
    output: &Path,
    counters: Option<Arc<Counters>>,
    nodes: Option<NodeView>,
) -> Result<()> {
    let logs = LogSettings {
        outdir: output.to_path_buf(),
        enable_trace: plan.outputs.trace,
        ..LogSettings::default()
    };
    let _progress = counters.map(|c| {
        start_progress(
            plan,
            settings.scenario.name().to_string(),
            settings,
            c,
            nodes,
        )
    });
    let outcome = start_test(sut, qsl, settings, &logs, plan.engine_options())?;
    drop(_progress);
    if let Some(path) = &plan.outputs.record_issued {
        write_issued(path, &outcome.issued)?;
    }
    print!("{}", outcome.summary_text);
    println!("Logs written to {}", output.display());
    if outcome.error_count > 0 {
        bail!(
            "the run logged {} errors; see {}",
            outcome.error_count,
            output.join("mlperf_log_detail.txt").display()
        );
    }
    Ok(())
}
