//! A whole test (the official `StartTest`): the SUT's name, the settings
//! with any compliance overrides, the passes of the test mode, and the four
//! log files. The steps are in [`start_test`]'s order; the passes are in
//! `passes`, FindPeakPerformance in `peak`, the detail log's settings and
//! results keys in `detail_keys`.

mod clock;
mod detail_keys;
mod passes;
mod peak;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::engine::completion::SutAborted;
use crate::engine::generate::SequenceGen;
use crate::engine::logs::accuracy::AccuracyLog;
use crate::engine::logs::detail::DetailLog;
use crate::engine::logs::trace::TraceLog;
use crate::engine::logs::{self, summary, LogSettings};
use crate::engine::release::LoadgenRelease;
use crate::engine::results::PerformanceSummary;
use crate::engine::rng::UniformIntVariant;
use crate::engine::settings::{
    apply_config, ConfKind, ConfigFile, EffectiveSettings, TestMode, TestSettings,
};
use crate::mllog;
use crate::sut::{QuerySampleLibrary, SutError, SystemUnderTest};
use clock::iso8601_utc;

/// Why a test could not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// A log file could not be written.
    #[error("log output: {0}")]
    Io(#[from] std::io::Error),
    /// The audit config of a compliance test is malformed.
    #[error(transparent)]
    AuditConfig(#[from] crate::engine::settings::ConfigError),
    /// The SUT gave up on the run (see `Completer::abort`).
    #[error("the SUT aborted the run: {0}")]
    SutAborted(#[from] SutAborted),
    /// The SUT could not say its name (for a Network SUT: a node did not
    /// answer, or two answered with the same name).
    #[error("the SUT's name: {0}")]
    SutName(#[source] SutError),
    /// The QSL could not load its samples.
    #[error("loading samples: {0}")]
    Qsl(#[source] SutError),
    /// The settings leave nothing to issue.
    #[error("nothing to issue: {0}")]
    Empty(String),
}

/// Options of the engine that are not MLPerf settings.
#[derive(Clone, Debug, Default)]
pub struct EngineOptions {
    /// The libstdc++ `uniform_int_distribution` algorithm to reproduce.
    pub uniform_int: UniformIntVariant,
    /// audit.config of a compliance test; `None` looks for `audit.config`
    /// in the working directory, as the official LoadGen does.
    pub audit_config: Option<PathBuf>,
    /// Record every issued QSL index in issue order.
    pub record_issued: bool,
    /// The official release to reproduce (that of the run's round).
    pub release: LoadgenRelease,
}

/// What a finished test reports back.
#[derive(Debug)]
pub struct TestOutcome {
    /// The performance summary that was logged (none for accuracy only).
    pub performance: Option<PerformanceSummary>,
    /// The text of mlperf_log_summary.txt.
    pub summary_text: String,
    /// Issued QSL indices in order, when requested.
    pub issued: Vec<usize>,
    /// Errors the detail log recorded.
    pub error_count: u64,
}

/// The detail log as a test writes it.
type Detail = DetailLog<BufWriter<File>>;

/// The four log files of a test.
struct LogFiles {
    summary: BufWriter<File>,
    detail: Detail,
    accuracy: AccuracyLog<BufWriter<File>>,
    trace: Option<TraceLog<BufWriter<File>>>,
}

/// What the passes of a test share.
struct Context<'a> {
    sut: &'a dyn SystemUnderTest,
    qsl: &'a dyn QuerySampleLibrary,
    sut_name: String,
    origin: Instant,
    detail: Detail,
    accuracy: AccuracyLog<BufWriter<File>>,
    trace: Option<TraceLog<BufWriter<File>>>,
    seq: SequenceGen,
    options: EngineOptions,
    issued: Vec<usize>,
}

/// Runs a test against `sut` and `qsl` and writes the four logs.
pub fn start_test(
    sut: &dyn SystemUnderTest,
    qsl: &dyn QuerySampleLibrary,
    requested: &TestSettings,
    log_settings: &LogSettings,
    options: EngineOptions,
) -> Result<TestOutcome, TestError> {
    let origin = Instant::now();
    let origin_wall = SystemTime::now();
    let files = open_logs(log_settings, origin)?;
    let (sut_name, name_ns) = name_the_sut(sut)?;
    let mut ctx = Context {
        sut,
        qsl,
        sut_name,
        origin,
        detail: files.detail,
        accuracy: files.accuracy,
        trace: files.trace,
        seq: SequenceGen::new(
            requested.accuracy_log_probability > 0.0 || requested.accuracy_log_sampling_target > 0,
            options.uniform_int,
        ),
        options,
        issued: Vec::new(),
    };
    log_header(&mut ctx, origin_wall, name_ns)?;
    let settings = with_overrides(&mut ctx, requested)?;
    let effective = EffectiveSettings::new(
        &settings,
        qsl.performance_sample_count() as u64,
        qsl.total_sample_count() as u64,
    )
    .under(ctx.options.release, qsl.total_sample_count() as u64);
    log_settings_keys(&mut ctx.detail, &settings, &effective)?;
    let performance = run_mode(&mut ctx, &effective)?;
    let finished = LogFiles {
        summary: files.summary,
        detail: ctx.detail,
        accuracy: ctx.accuracy,
        trace: ctx.trace,
    };
    let (summary_text, error_count) = finish_logs(finished, &performance, origin_wall)?;
    Ok(TestOutcome {
        performance,
        summary_text,
        issued: ctx.issued,
        error_count,
    })
}

/// Creates the output folder and the four log files.
fn open_logs(log_settings: &LogSettings, origin: Instant) -> Result<LogFiles, TestError> {
    std::fs::create_dir_all(&log_settings.outdir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot create {}: {e}", log_settings.outdir.display()),
        )
    })?;
    let summary = logs::create(&log_settings.path("summary", "txt"))?;
    let detail = DetailLog::new(logs::create(&log_settings.path("detail", "txt"))?, origin);
    let accuracy = AccuracyLog::new(logs::create(&log_settings.path("accuracy", "json"))?)?;
    let trace_out = logs::create(&log_settings.path("trace", "json"))?;
    let trace = if log_settings.enable_trace {
        Some(TraceLog::new(trace_out)?)
    } else {
        None
    };
    Ok(LogFiles {
        summary,
        detail,
        accuracy,
        trace,
    })
}

/// The SUT's name and how long asking took (timed, as the official does).
fn name_the_sut(sut: &dyn SystemUnderTest) -> Result<(String, u64), TestError> {
    let start = Instant::now();
    let name = sut.name().map_err(TestError::SutName)?;
    Ok((name, start.elapsed().as_nanos() as u64))
}

/// The first detail lines: who runs, when, against which SUT and QSL.
fn log_header(ctx: &mut Context, origin_wall: SystemTime, name_ns: u64) -> Result<(), TestError> {
    let d = &mut ctx.detail;
    mllog!(
        d,
        "loadgen_version",
        format!(
            "netdiv-loadgen {} (not the official MLPerf LoadGen; reproduces LoadGen {})",
            env!("CARGO_PKG_VERSION"),
            ctx.options.release.version
        )
    )?;
    mllog!(d, "netdiv_round", ctx.options.release.round)?;
    mllog!(d, "loadgen_engine", "netdiv")?;
    mllog!(d, "test_datetime", iso8601_utc(origin_wall))?;
    mllog!(d, "sut_name", ctx.sut_name.clone())?;
    mllog!(d, "get_sut_name_duration_ns", name_ns)?;
    mllog!(d, "qsl_name", ctx.qsl.name())?;
    mllog!(d, "qsl_reported_total_count", ctx.qsl.total_sample_count())?;
    mllog!(
        d,
        "qsl_reported_performance_count",
        ctx.qsl.performance_sample_count()
    )?;
    Ok(())
}

/// The requested settings with a compliance test's audit.config applied,
/// and TEST05's seeds, as the official LoadGen applies them.
fn with_overrides(ctx: &mut Context, requested: &TestSettings) -> Result<TestSettings, TestError> {
    let d = &mut ctx.detail;
    let mut settings = requested.clone();
    let audit_path = ctx
        .options
        .audit_config
        .clone()
        .unwrap_or_else(|| PathBuf::from("audit.config"));
    if audit_path.is_file() {
        mllog!(d, warning "warning_generic_message", "Found Audit Config file (audit.config). Overriding TestSettings from audit.config file.")?;
        let cfg = ConfigFile::load(&audit_path)?;
        let scenario = settings.scenario;
        apply_config(&mut settings, &cfg, "*", scenario, ConfKind::Audit)?;
    }
    if settings.test05 {
        mllog!(d, warning "warning_generic_message", "Test05 flag detected Overriding random seeds")?;
        settings.mode = TestMode::PerformanceOnly;
        settings.qsl_rng_seed = requested.test05_qsl_rng_seed;
        settings.sample_index_rng_seed = requested.test05_sample_index_rng_seed;
        settings.schedule_rng_seed = requested.test05_schedule_rng_seed;
    }
    Ok(settings)
}

/// Settings problems, the requested and effective keys, and what this
/// engine does differently.
fn log_settings_keys(
    d: &mut Detail,
    settings: &TestSettings,
    effective: &EffectiveSettings,
) -> Result<(), TestError> {
    for problem in &effective.problems {
        mllog!(d, error "error_invalid_test_settings", problem.clone())?;
    }
    detail_keys::log_requested(d, settings, effective.release)?;
    detail_keys::log_effective(d, effective)?;
    if settings.server_num_issue_query_threads != 0 {
        mllog!(d, warning "warning_generic_message", "server_num_issue_query_threads is not supported by netdiv; queries are issued from one thread")?;
    }
    Ok(())
}

/// The passes of the test mode; the performance summary, if any.
fn run_mode(
    ctx: &mut Context,
    effective: &EffectiveSettings,
) -> Result<Option<PerformanceSummary>, TestError> {
    Ok(match effective.mode {
        TestMode::SubmissionRun => {
            passes::run_accuracy(ctx, effective)?;
            Some(passes::run_performance(ctx, effective)?)
        }
        TestMode::AccuracyOnly => {
            passes::run_accuracy(ctx, effective)?;
            None
        }
        TestMode::PerformanceOnly => Some(passes::run_performance(ctx, effective)?),
        TestMode::FindPeakPerformance => peak::find_peak_performance(ctx, effective)?,
    })
}

/// The results keys, the summary file, and every log closed; returns the
/// summary's text and the number of errors logged.
fn finish_logs(
    mut files: LogFiles,
    performance: &Option<PerformanceSummary>,
    origin_wall: SystemTime,
) -> Result<(String, u64), TestError> {
    let mut summary_text = String::new();
    if let Some(p) = performance {
        summary_text.push_str(&summary::render(p));
        detail_keys::log_performance_detail(&mut files.detail, p)?;
    }
    let errors = files.detail.error_count();
    summary_text.push_str(&summary::footer(files.detail.warning_count(), errors));
    files.summary.write_all(summary_text.as_bytes())?;
    files.summary.flush()?;
    files.detail.flush()?;
    files.accuracy.finish()?;
    if let Some(trace) = files.trace {
        let wall_us = origin_wall
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_nanos() as f64 / 1000.0);
        trace.finish(wall_us)?;
    }
    Ok((summary_text, errors))
}
