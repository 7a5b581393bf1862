//! A whole test (the official `StartTest`): settings, loadable sets, one or
//! more timed passes, and the four log files.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::completion::{KeepPolicy, SampleTable};
use crate::generate::{
    generate_queries, loadable_sets, AccuracyLogSampling, LoadableSet, Pass, SequenceGen,
};
use crate::issue::{issue_queries, IssueRecord, StopReason};
use crate::logs::accuracy::AccuracyLog;
use crate::logs::detail::{DetailLog, Value};
use crate::logs::trace::TraceLog;
use crate::logs::{self, format::fixed, summary, LogSettings};
use crate::mllog;
use crate::results::{PerformanceResult, PerformanceSummary, LATENCY_PERCENTILES};
use crate::rng::{StdRng, UniformIntVariant};
use crate::settings::{
    apply_config, ConfKind, ConfigFile, EffectiveSettings, Scenario, TestMode, TestSettings,
};
use crate::sut::{QuerySampleLibrary, SystemUnderTest};

/// Why a test could not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// A log file could not be written.
    #[error("log output: {0}")]
    Io(#[from] std::io::Error),
    /// The audit config of a compliance test is malformed.
    #[error(transparent)]
    AuditConfig(#[from] crate::settings::ConfigError),
    /// The SUT gave up on the run (see `Completer::abort`).
    #[error("the SUT aborted the run: {0}")]
    SutAborted(String),
    /// The SUT could not say its name (for a Network SUT: a node did not
    /// answer, or two answered with the same name).
    #[error("the SUT's name: {0}")]
    SutName(String),
    /// The QSL could not load its samples.
    #[error("loading samples: {0}")]
    Qsl(String),
    /// The settings leave nothing to issue.
    #[error("nothing to issue: {0}")]
    Empty(String),
    /// The settings ask for something this engine does not measure.
    #[error("not supported by the netdiv engine: {0}")]
    Unsupported(String),
}

/// Options of the engine that are not MLPerf settings.
#[derive(Clone, Debug, Default)]
pub struct EngineOptions {
    pub uniform_int: UniformIntVariant,
    /// audit.config of a compliance test; `None` looks for `audit.config`
    /// in the working directory, as the official LoadGen does.
    pub audit_config: Option<PathBuf>,
    /// Record every issued QSL index in issue order.
    pub record_issued: bool,
}

/// What a finished test reports back.
pub struct TestOutcome {
    /// The performance summary that was logged (none for accuracy only).
    pub performance: Option<PerformanceSummary>,
    /// The text of mlperf_log_summary.txt.
    pub summary_text: String,
    /// Issued QSL indices in order, when requested.
    pub issued: Vec<usize>,
    pub error_count: u64,
}

struct Context<'a> {
    sut: &'a dyn SystemUnderTest,
    qsl: &'a dyn QuerySampleLibrary,
    sut_name: String,
    origin: Instant,
    detail: DetailLog<BufWriter<File>>,
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
    if requested.use_token_latencies {
        // Refuse rather than report a verdict without TTFT/TPOT.
        return Err(TestError::Unsupported(
            "use_token_latencies = 1 (the LLM benchmarks' first-token and per-token latencies); \
             run this model under the official LoadGen"
                .into(),
        ));
    }
    let origin = Instant::now();
    let origin_wall = SystemTime::now();
    std::fs::create_dir_all(&log_settings.outdir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot create {}: {e}", log_settings.outdir.display()),
        )
    })?;
    let mut summary_out = logs::create(&log_settings.path("summary", "txt"))?;
    let detail = DetailLog::new(logs::create(&log_settings.path("detail", "txt"))?, origin);
    let accuracy = AccuracyLog::new(logs::create(&log_settings.path("accuracy", "json"))?)?;
    let trace_out = logs::create(&log_settings.path("trace", "json"))?;
    let trace = if log_settings.enable_trace {
        Some(TraceLog::new(trace_out)?)
    } else {
        None
    };

    let name_start = Instant::now();
    let sut_name = sut.name().map_err(TestError::SutName)?;
    let name_ns = name_start.elapsed().as_nanos() as u64;

    let mut ctx = Context {
        sut,
        qsl,
        sut_name,
        origin,
        detail,
        accuracy,
        trace,
        seq: SequenceGen::new(
            requested.accuracy_log_probability > 0.0 || requested.accuracy_log_sampling_target > 0,
            options.uniform_int,
        ),
        options,
        issued: Vec::new(),
    };
    let d = &mut ctx.detail;
    mllog!(
        d,
        "loadgen_version",
        format!(
            "netdiv-loadgen {} (not the official MLPerf LoadGen)",
            env!("CARGO_PKG_VERSION")
        )
    )?;
    mllog!(d, "loadgen_engine", "netdiv")?;
    mllog!(d, "test_datetime", iso8601_utc(origin_wall))?;
    mllog!(d, "sut_name", ctx.sut_name.clone())?;
    mllog!(d, "get_sut_name_duration_ns", name_ns)?;
    mllog!(d, "qsl_name", qsl.name())?;
    mllog!(d, "qsl_reported_total_count", qsl.total_sample_count())?;
    mllog!(
        d,
        "qsl_reported_performance_count",
        qsl.performance_sample_count()
    )?;

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
    let effective = EffectiveSettings::new(
        &settings,
        qsl.performance_sample_count() as u64,
        qsl.total_sample_count() as u64,
    );
    for problem in &effective.problems {
        mllog!(d, error "error_invalid_test_settings", problem.clone())?;
    }
    log_requested(d, &settings)?;
    log_effective(d, &effective)?;
    if settings.server_num_issue_query_threads != 0 {
        mllog!(d, warning "warning_generic_message", "server_num_issue_query_threads is not supported by netdiv; queries are issued from one thread")?;
    }

    let performance = match effective.mode {
        TestMode::SubmissionRun => {
            run_accuracy(&mut ctx, &effective)?;
            Some(run_performance(&mut ctx, &effective)?)
        }
        TestMode::AccuracyOnly => {
            run_accuracy(&mut ctx, &effective)?;
            None
        }
        TestMode::PerformanceOnly => Some(run_performance(&mut ctx, &effective)?),
        TestMode::FindPeakPerformance => find_peak_performance(&mut ctx, &effective)?,
    };

    let mut summary_text = String::new();
    if let Some(p) = &performance {
        summary_text.push_str(&summary::render(p));
        log_performance_detail(&mut ctx.detail, p)?;
    }
    summary_text.push_str(&summary::footer(
        ctx.detail.warning_count(),
        ctx.detail.error_count(),
    ));
    summary_out.write_all(summary_text.as_bytes())?;
    summary_out.flush()?;
    ctx.detail.flush()?;
    ctx.accuracy.finish()?;
    if let Some(trace) = ctx.trace {
        let wall_us = origin_wall
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_nanos() as f64 / 1000.0);
        trace.finish(wall_us)?;
    }
    Ok(TestOutcome {
        performance,
        summary_text,
        issued: ctx.issued,
        error_count: ctx.detail.error_count(),
    })
}

fn run_performance(
    ctx: &mut Context,
    settings: &EffectiveSettings,
) -> Result<PerformanceSummary, TestError> {
    mllog!(ctx.detail, "generic_message", "Starting performance mode")?;
    let set = first_performance_set(ctx, settings)?;
    load(ctx, &set)?;
    let result = run_pass(ctx, settings, Pass::Performance, &set)?;
    ctx.qsl.unload_samples_from_ram(&set.samples);
    Ok(PerformanceSummary::new(
        ctx.sut_name.clone(),
        settings.clone(),
        result,
    ))
}

fn run_accuracy(ctx: &mut Context, settings: &EffectiveSettings) -> Result<(), TestError> {
    mllog!(ctx.detail, "generic_message", "Starting accuracy mode")?;
    let t0 = ctx.origin.elapsed().as_nanos() as u64;
    let sets = loadable_sets(
        settings,
        ctx.qsl.total_sample_count(),
        settings.accuracy_sample_count as usize,
        ctx.options.uniform_int,
    );
    trace_span(ctx, "GenerateLoadableSets", t0)?;
    for set in &sets {
        load(ctx, set)?;
        run_pass(ctx, settings, Pass::Accuracy, set)?;
        ctx.qsl.unload_samples_from_ram(&set.samples);
    }
    Ok(())
}

/// The official search: check the user's QPS, widen until it fails, then
/// bisect to the requested precision. Server only.
fn find_peak_performance(
    ctx: &mut Context,
    base: &EffectiveSettings,
) -> Result<Option<PerformanceSummary>, TestError> {
    mllog!(
        ctx.detail,
        "generic_message",
        "Starting FindPeakPerformance mode"
    )?;
    if base.scenario != Scenario::Server {
        mllog!(ctx.detail, error "error_invalid_config", "Finding peak performance is only supported in Server scenarios.")?;
        return Ok(None);
    }
    let field = |s: &EffectiveSettings| format!("{:.6}", s.target_qps);
    mllog!(
        ctx.detail,
        "generic_message",
        format!(
            "FindPeakPerformance: Check validity of the base settings field: {}",
            field(base)
        )
    )?;
    let run = |ctx: &mut Context,
               s: &EffectiveSettings,
               set: Option<&LoadableSet>|
     -> Result<PerformanceSummary, TestError> {
        let own;
        let set = match set {
            Some(set) => set,
            None => {
                own = first_performance_set(ctx, s)?;
                load(ctx, &own)?;
                &own
            }
        };
        let r = run_pass(ctx, s, Pass::Performance, set)?;
        Ok(PerformanceSummary::new(ctx.sut_name.clone(), s.clone(), r))
    };
    let base_summary = run(ctx, base, None)?;
    if !base_summary.perf_constraints_met {
        mllog!(ctx.detail, error "error_runtime", format!("FindPeakPerformance: Initial lower bound does not satisfy performance constraints, msg: {}", PerformanceSummary::PERF_CONSTRAINTS_RECOMMENDATION))?;
        return Ok(Some(base_summary));
    }
    let step = base.requested.server_find_peak_qps_boundary_step_size;
    let mut lower = base_summary;
    let mut upper = loop {
        let mut u = lower.settings.clone();
        u.target_qps *= 1.0 + step;
        mllog!(
            ctx.detail,
            "generic_message",
            format!(
                "FindBoundaries: Checking fields [{}, {})",
                field(&lower.settings),
                field(&u)
            )
        )?;
        let s = run(ctx, &u, None)?;
        if !s.perf_constraints_met {
            break s;
        }
        lower = s;
    };
    mllog!(
        ctx.detail,
        "generic_message",
        format!(
            "FindPeakPerformance: Found boundaries: [{}, {})",
            field(&lower.settings),
            field(&upper.settings)
        )
    )?;
    let set = first_performance_set(ctx, &upper.settings)?;
    load(ctx, &set)?;
    let scale = 10f64.powi(base.requested.server_find_peak_qps_decimals_of_precision);
    while (lower.settings.target_qps * scale).floor() + 1.0
        < (upper.settings.target_qps * scale).floor()
    {
        let mut m = lower.settings.clone();
        m.target_qps = lower.settings.target_qps
            + (upper.settings.target_qps - lower.settings.target_qps) / 2.0;
        mllog!(
            ctx.detail,
            "generic_message",
            format!(
                "FindPeakPerformanceBinarySearch: Testing the mid value of bounds [{}, {}): {}",
                field(&lower.settings),
                field(&upper.settings),
                field(&m)
            )
        )?;
        let s = run(ctx, &m, Some(&set))?;
        if s.perf_constraints_met {
            lower = s;
        } else {
            upper = s;
        }
    }
    mllog!(
        ctx.detail,
        "generic_message",
        format!(
            "FindPeakPerformance: Found peak performance field: {}",
            field(&lower.settings)
        )
    )?;
    ctx.qsl.unload_samples_from_ram(&set.samples);
    Ok(Some(lower))
}

fn first_performance_set(
    ctx: &mut Context,
    settings: &EffectiveSettings,
) -> Result<LoadableSet, TestError> {
    let t0 = ctx.origin.elapsed().as_nanos() as u64;
    let set = loadable_sets(
        settings,
        ctx.qsl.total_sample_count(),
        settings.performance_sample_count as usize,
        ctx.options.uniform_int,
    )
    .into_iter()
    .next()
    .ok_or_else(|| TestError::Empty("the QSL has no samples to load".into()))?;
    trace_span(ctx, "GenerateLoadableSets", t0)?;
    Ok(set)
}

fn load(ctx: &mut Context, set: &LoadableSet) -> Result<(), TestError> {
    mllog!(ctx.detail, "loaded_qsl_set", set.samples.clone())?;
    ctx.qsl
        .load_samples_to_ram(&set.samples)
        .map_err(TestError::Qsl)
}

fn trace_span(ctx: &mut Context, name: &str, start_ns: u64) -> Result<(), TestError> {
    let end = ctx.origin.elapsed().as_nanos() as u64;
    if let Some(t) = ctx.trace.as_mut() {
        t.span(name, start_ns, end)?;
    }
    Ok(())
}

/// The official accuracy-log sampling probability for a performance pass.
fn accuracy_log_probability(s: &EffectiveSettings) -> f64 {
    if s.accuracy_log_sampling_target == 0 {
        return s.accuracy_log_probability;
    }
    let mut expected = (s.target_qps * s.min_duration_ms as f64 / 1000.0) as u64;
    let minimum = if s.scenario == Scenario::Offline {
        s.min_sample_count
    } else {
        expected *= s.samples_per_query;
        s.min_query_count * s.samples_per_query
    };
    s.accuracy_log_sampling_target as f64 / expected.max(minimum) as f64
}

/// One IssueQueries call: generate, issue, wait, then record everything.
fn run_pass(
    ctx: &mut Context,
    settings: &EffectiveSettings,
    pass: Pass,
    set: &LoadableSet,
) -> Result<PerformanceResult, TestError> {
    let offset =
        StdRng::new(settings.accuracy_log_rng_seed, ctx.options.uniform_int).uniform_unit();
    let sampling = (pass == Pass::Performance
        && (settings.accuracy_log_probability > 0.0 || settings.accuracy_log_sampling_target > 0))
        .then(|| AccuracyLogSampling {
            offset,
            probability: accuracy_log_probability(settings),
        });
    let t0 = ctx.origin.elapsed().as_nanos() as u64;
    let mut queries = generate_queries(
        settings,
        pass,
        set,
        &mut ctx.seq,
        sampling,
        ctx.options.uniform_int,
    );
    trace_span(ctx, "GenerateQueries", t0)?;
    let d = &mut ctx.detail;
    mllog!(d, "generated_query_count", queries.query_count)?;
    mllog!(d, "generated_samples_per_query", queries.samples_per_query)?;
    mllog!(d, "generated_query_duration", queries.duration_ns)?;
    if queries.query_count == 0 {
        return Err(TestError::Empty(format!(
            "the loaded set of {} samples is smaller than one query of {}",
            set.samples.len(),
            queries.samples_per_query
        )));
    }

    let keep = match (pass, queries.keep_for_accuracy_log.take()) {
        (Pass::Accuracy, _) => KeepPolicy::All,
        (Pass::Performance, Some(flags)) => KeepPolicy::Selected(flags),
        (Pass::Performance, None) => KeepPolicy::None,
    };
    let table = Arc::new(SampleTable::new(
        queries.first_sequence_id,
        ctx.origin,
        queries.query_sizes(),
        queries.samples_per_query,
        queries.samples.len(),
        keep,
    ));
    let rec =
        issue_queries(ctx.sut, settings, pass, &queries, &table).map_err(TestError::SutAborted)?;
    log_issue_end(&mut ctx.detail, &rec, pass)?;

    let (errors, first_error) = table.errors();
    if errors > 0 {
        let msg = format!(
            "{errors} completion error(s); first: {}",
            first_error.unwrap_or("")
        );
        mllog!(ctx.detail, error "error_runtime", msg)?;
    }
    if ctx.options.record_issued {
        ctx.issued.extend(
            queries.samples[..rec.samples_issued]
                .iter()
                .map(|s| s.index),
        );
    }
    record_accuracy(ctx, &queries, &table, rec.samples_issued)?;
    record_trace(ctx, settings, &queries, &table, &rec)?;
    let result = measure(&queries, &table, &rec);

    let max_completion = (0..rec.samples_issued)
        .filter_map(|i| table.completed_at(i))
        .max()
        .unwrap_or(rec.start_ns);
    let power_end = rec.start_wall
        + std::time::Duration::from_nanos(max_completion.saturating_sub(rec.start_ns));
    let d = &mut ctx.detail;
    mllog!(d, "power_begin", power_time(rec.start_wall))?;
    mllog!(d, "power_end", power_time(power_end))?;
    Ok(result)
}

fn log_issue_end(
    d: &mut DetailLog<BufWriter<File>>,
    rec: &IssueRecord,
    pass: Pass,
) -> Result<(), TestError> {
    match &rec.stop {
        StopReason::Natural => mllog!(
            d,
            "generic_message",
            "Ending naturally: Minimum query count and test duration met."
        )?,
        StopReason::TooManyOutstanding {
            issued,
            outstanding,
        } => {
            mllog!(d, error "error_runtime", format!("IssueQueryThread 0 Ending early: Too many outstanding queries. issued {issued} outstanding {outstanding}"))?
        }
        StopReason::MaxQueryCount { issued } => {
            mllog!(d, error "error_runtime", format!("IssueQueryThread 0 Ending early: Max query count reached. query_count {issued}"))?
        }
        StopReason::MaxDuration { duration_ns } => {
            mllog!(d, error "error_runtime", format!("IssueQueryThread 0 Ending early: Max test duration reached. duration_ns {duration_ns}"))?
        }
        StopReason::Exhausted => {}
    }
    if pass == Pass::Performance && rec.ran_out_of_generated_queries {
        mllog!(d, error "error_runtime", "Ending early: Ran out of generated queries to issue before the minimum query count and test duration were reached. Please update the relevant expected latency or target qps in the TestSettings so they are more accurate.")?;
    }
    Ok(())
}

fn record_accuracy(
    ctx: &mut Context,
    queries: &crate::generate::GeneratedQueries,
    table: &SampleTable,
    issued: usize,
) -> Result<(), TestError> {
    for (slot, sample) in queries.samples[..issued].iter().enumerate() {
        if let Some(data) = table.kept_response(slot) {
            ctx.accuracy.entry(sample.id, sample.index, data)?;
        }
    }
    Ok(())
}

fn record_trace(
    ctx: &mut Context,
    settings: &EffectiveSettings,
    queries: &crate::generate::GeneratedQueries,
    table: &SampleTable,
    rec: &IssueRecord,
) -> Result<(), TestError> {
    let Some(trace) = ctx.trace.as_mut() else {
        return Ok(());
    };
    let spq = queries.samples_per_query;
    let mut returned = rec.issue_returned_ns.iter();
    for q in 0..rec.queries_issued {
        if q == 0
            || rec.issued_ns[q] != rec.issued_ns[q - 1]
            || settings.scenario != Scenario::Server
        {
            if let Some(&end) = returned.next() {
                trace.span("IssueQuery", rec.issued_ns[q], end)?;
            }
        }
        let query_seq = queries.first_query_id + q as u64;
        for slot in q * spq..((q + 1) * spq).min(rec.samples_issued) {
            let done = table.completed_at(slot).unwrap_or(rec.issued_ns[q]);
            if settings.scenario == Scenario::Server {
                trace.latency_counter(rec.scheduled_ns[q], rec.issued_ns[q], done)?;
            }
            let s = queries.samples[slot];
            trace.sample(
                s.id,
                query_seq,
                s.index,
                rec.scheduled_ns[q],
                rec.issued_ns[q],
                done,
            )?;
        }
    }
    Ok(())
}

fn measure(
    queries: &crate::generate::GeneratedQueries,
    table: &SampleTable,
    rec: &IssueRecord,
) -> PerformanceResult {
    let spq = queries.samples_per_query;
    let secs = |ns: u64| ns as f64 / 1e9;
    let sample_latencies: Vec<i64> = (0..rec.samples_issued)
        .map(|slot| {
            let done = table.completed_at(slot).unwrap_or(0) as i64;
            done - rec.scheduled_ns[slot / spq] as i64
        })
        .collect();
    let query_latencies: Vec<i64> = (0..rec.queries_issued)
        .map(|q| table.query_done_at(q).unwrap_or(0) as i64 - rec.scheduled_ns[q] as i64)
        .collect();
    let last = rec.queries_issued - 1;
    let max_latency = sample_latencies.iter().copied().max().unwrap_or(0);
    PerformanceResult {
        sample_latencies,
        query_latencies,
        queries_issued: rec.queries_issued as u64,
        max_latency: max_latency as f64 / 1e9,
        final_query_scheduled_time: queries.scheduled_ns[last] as f64 / 1e9,
        final_query_issued_time: secs(rec.issued_ns[last] - rec.start_ns),
        final_query_all_samples_done_time: secs(
            table
                .query_done_at(last)
                .unwrap_or(rec.start_ns)
                .saturating_sub(rec.start_ns),
        ),
    }
}

fn log_requested(d: &mut DetailLog<BufWriter<File>>, s: &TestSettings) -> Result<(), TestError> {
    mllog!(d, "requested_scenario", s.scenario.name())?;
    mllog!(d, "requested_test_mode", s.mode.name())?;
    match s.scenario {
        Scenario::SingleStream => {
            mllog!(
                d,
                "requested_single_stream_expected_latency_ns",
                s.single_stream_expected_latency_ns
            )?;
            mllog!(
                d,
                "requested_single_stream_target_latency_percentile",
                s.single_stream_target_latency_percentile
            )?;
        }
        Scenario::MultiStream => {
            mllog!(
                d,
                "requested_multi_stream_expected_latency_ns",
                s.multi_stream_expected_latency_ns
            )?;
            mllog!(
                d,
                "requested_multi_stream_target_latency_percentile",
                s.multi_stream_target_latency_percentile
            )?;
            mllog!(
                d,
                "requested_multi_stream_samples_per_query",
                s.multi_stream_samples_per_query
            )?;
        }
        Scenario::Server => {
            mllog!(d, "requested_server_target_qps", s.server_target_qps)?;
            mllog!(
                d,
                "requested_server_target_latency_ns",
                s.server_target_latency_ns
            )?;
            mllog!(
                d,
                "requested_server_target_latency_percentile",
                s.server_target_latency_percentile
            )?;
            mllog!(
                d,
                "requested_server_coalesce_queries",
                s.server_coalesce_queries
            )?;
            mllog!(
                d,
                "requested_server_find_peak_qps_decimals_of_precision",
                s.server_find_peak_qps_decimals_of_precision
            )?;
            mllog!(
                d,
                "requested_server_find_peak_qps_boundary_step_size",
                s.server_find_peak_qps_boundary_step_size
            )?;
            mllog!(
                d,
                "requested_server_max_async_queries",
                s.server_max_async_queries
            )?;
            mllog!(
                d,
                "requested_server_num_issue_query_threads",
                s.server_num_issue_query_threads
            )?;
        }
        Scenario::Offline => mllog!(d, "requested_offline_expected_qps", s.offline_expected_qps)?,
    }
    let pairs: [(&str, Value); 17] = [
        ("requested_min_duration_ms", s.min_duration_ms.into()),
        ("requested_max_duration_ms", s.max_duration_ms.into()),
        ("requested_min_query_count", s.min_query_count.into()),
        ("requested_max_query_count", s.max_query_count.into()),
        ("requested_qsl_rng_seed", s.qsl_rng_seed.into()),
        (
            "requested_sample_index_rng_seed",
            s.sample_index_rng_seed.into(),
        ),
        ("requested_schedule_rng_seed", s.schedule_rng_seed.into()),
        (
            "requested_accuracy_log_rng_seed",
            s.accuracy_log_rng_seed.into(),
        ),
        (
            "requested_accuracy_log_probability",
            s.accuracy_log_probability.into(),
        ),
        (
            "requested_accuracy_log_sampling_target",
            s.accuracy_log_sampling_target.into(),
        ),
        ("requested_print_timestamps", s.print_timestamps.into()),
        (
            "requested_performance_issue_unique",
            s.performance_issue_unique.into(),
        ),
        (
            "requested_performance_issue_same",
            s.performance_issue_same.into(),
        ),
        (
            "requested_performance_issue_same_index",
            s.performance_issue_same_index.into(),
        ),
        (
            "requested_performance_sample_count_override",
            s.performance_sample_count_override.into(),
        ),
        (
            "requested_accuracy_sample_count_override",
            s.accuracy_sample_count_override.into(),
        ),
        (
            "requested_sample_concatenate_permutation",
            s.sample_concatenate_permutation.into(),
        ),
    ];
    for (key, value) in pairs {
        mllog!(d, key, value)?;
    }
    if s.use_token_latencies {
        mllog!(d, "requested_use_token_latencies", true)?;
        if s.scenario != Scenario::Offline {
            mllog!(d, "requested_server_ttft_latency", s.server_ttft_latency)?;
            mllog!(d, "requested_server_tpot_latency", s.server_tpot_latency)?;
        }
    }
    Ok(())
}

fn log_effective(
    d: &mut DetailLog<BufWriter<File>>,
    s: &EffectiveSettings,
) -> Result<(), TestError> {
    let pairs: [(&str, Value); 26] = [
        ("effective_scenario", s.scenario.name().into()),
        ("effective_test_mode", s.mode.name().into()),
        ("effective_samples_per_query", s.samples_per_query.into()),
        ("effective_target_qps", s.target_qps.into()),
        ("effective_target_latency_ns", s.target_latency_ns.into()),
        (
            "effective_target_latency_percentile",
            s.target_latency_percentile.into(),
        ),
        ("effective_max_async_queries", s.max_async_queries.into()),
        ("effective_target_duration_ms", s.target_duration_ms.into()),
        ("effective_min_duration_ms", s.min_duration_ms.into()),
        ("effective_max_duration_ms", s.max_duration_ms.into()),
        ("effective_min_query_count", s.min_query_count.into()),
        ("effective_max_query_count", s.max_query_count.into()),
        ("effective_min_sample_count", s.min_sample_count.into()),
        ("effective_qsl_rng_seed", s.qsl_rng_seed.into()),
        (
            "effective_sample_index_rng_seed",
            s.sample_index_rng_seed.into(),
        ),
        ("effective_schedule_rng_seed", s.schedule_rng_seed.into()),
        (
            "effective_accuracy_log_rng_seed",
            s.accuracy_log_rng_seed.into(),
        ),
        (
            "effective_accuracy_log_probability",
            s.accuracy_log_probability.into(),
        ),
        (
            "effective_accuracy_log_sampling_target",
            s.accuracy_log_sampling_target.into(),
        ),
        ("effective_print_timestamps", s.print_timestamps.into()),
        (
            "effective_performance_issue_unique",
            s.performance_issue_unique.into(),
        ),
        (
            "effective_performance_issue_same",
            s.performance_issue_same.into(),
        ),
        (
            "effective_performance_issue_same_index",
            s.performance_issue_same_index.into(),
        ),
        (
            "effective_performance_sample_count",
            s.performance_sample_count.into(),
        ),
        (
            "effective_accuracy_sample_count",
            s.accuracy_sample_count.into(),
        ),
        (
            "effective_sample_concatenate_permutation",
            s.sample_concatenate_permutation.into(),
        ),
    ];
    for (key, value) in pairs {
        mllog!(d, key, value)?;
    }
    Ok(())
}

fn log_performance_detail(
    d: &mut DetailLog<BufWriter<File>>,
    p: &PerformanceSummary,
) -> Result<(), TestError> {
    let st = &p.settings;
    let valid = p.is_valid();
    mllog!(
        d,
        "result_validity",
        if valid { "VALID" } else { "INVALID" }
    )?;
    if st.scenario == Scenario::Server {
        mllog!(d, "result_perf_constraints_met", p.perf_constraints_met)?;
    }
    mllog!(d, "result_min_duration_met", p.min_duration_met)?;
    mllog!(d, "result_min_queries_met", p.min_queries_met)?;
    mllog!(d, "early_stopping_met", p.early_stopping.met)?;
    if !valid {
        let mut reason = String::new();
        if !p.perf_constraints_met {
            reason += PerformanceSummary::PERF_CONSTRAINTS_RECOMMENDATION;
            reason += " ";
        }
        if !p.min_duration_met {
            reason += p.min_duration_recommendation();
            reason += " ";
        }
        if !p.min_queries_met {
            reason += "The test exited early, before enough queries were issued.";
        }
        mllog!(d, "result_invalid_reason", reason.replace('\n', " "))?;
    }
    mllog!(
        d,
        "early_stopping_result",
        p.early_stopping.text.replace('\n', " ")
    )?;
    mllog!(d, "result_query_count", p.result.queries_issued)?;
    if st.scenario == Scenario::Server {
        mllog!(
            d,
            "result_overlatency_query_count",
            p.overlatency_query_count
        )?;
    }
    match st.scenario {
        Scenario::SingleStream => {
            mllog!(
                d,
                "result_qps_with_loadgen_overhead",
                p.qps_with_loadgen_overhead()
            )?;
            mllog!(
                d,
                "result_qps_without_loadgen_overhead",
                p.qps_without_loadgen_overhead()
            )?;
            mllog!(d, "early_stopping_latency_ss", p.early_stopping.latency_ss)?;
            mllog!(d, "early_stopping_latency_ms", p.early_stopping.latency_ms)?;
        }
        Scenario::MultiStream => {
            mllog!(d, "result_min_query_latency_ns", p.queries.min)?;
            mllog!(d, "result_max_query_latency_ns", p.queries.max)?;
            mllog!(d, "result_mean_query_latency_ns", p.queries.mean)?;
            for (pct, v) in LATENCY_PERCENTILES.iter().zip(p.queries.percentiles) {
                mllog!(
                    d,
                    &format!(
                        "result_{}_percentile_per_query_latency_ns",
                        fixed(pct * 100.0, 2)
                    ),
                    v
                )?;
            }
            mllog!(d, "early_stopping_latency_ms", p.early_stopping.latency_ms)?;
        }
        Scenario::Server => {
            mllog!(
                d,
                "result_scheduled_samples_per_sec",
                p.server_scheduled_per_second()
            )?;
            mllog!(
                d,
                "result_completed_samples_per_sec",
                p.server_completed_per_second()
            )?;
        }
        Scenario::Offline => mllog!(
            d,
            "result_samples_per_second",
            p.offline_samples_per_second()
        )?,
    }
    mllog!(d, "result_min_latency_ns", p.samples.min)?;
    mllog!(d, "result_max_latency_ns", p.samples.max)?;
    mllog!(d, "result_mean_latency_ns", p.samples.mean)?;
    for (pct, v) in LATENCY_PERCENTILES.iter().zip(p.samples.percentiles) {
        mllog!(
            d,
            &format!("result_{}_percentile_latency_ns", fixed(pct * 100.0, 2)),
            v
        )?;
    }
    if st.infer_token_latencies {
        match st.scenario {
            Scenario::Server => mllog!(
                d,
                "result_inferred_completed_tokens_per_second",
                (p.sample_count as f64 - 1.0) * st.token_latency_scaling_factor as f64
                    / p.result.final_query_all_samples_done_time
            )?,
            Scenario::Offline => mllog!(
                d,
                "result_inferred_tokens_per_second",
                p.sample_count as f64 * st.token_latency_scaling_factor as f64
                    / p.result.max_latency
            )?,
            _ => {}
        }
    }
    let errors = d.error_count();
    mllog!(d, "num_errors", errors)?;
    Ok(())
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
fn iso8601_utc(t: SystemTime) -> String {
    let (date, time, _) = civil(t);
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// `MM-DD-YYYY HH:MM:SS.mmm` in UTC, the power-log format.
fn power_time(t: SystemTime) -> String {
    let (date, time, ms) = civil(t);
    format!(
        "{:02}-{:02}-{} {:02}:{:02}:{:02}.{ms:03}",
        date.1, date.2, date.0, time.0, time.1, time.2
    )
}

/// UTC calendar date, time of day and milliseconds (Howard Hinnant's
/// days-to-civil algorithm).
fn civil(t: SystemTime) -> ((i64, u32, u32), (u64, u64, u64), u64) {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        (year, month, day),
        (rem / 3600, rem % 3600 / 60, rem % 60),
        u64::from(since.subsec_millis()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_like_the_official_logs() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_795_316_125_792);
        assert_eq!(iso8601_utc(t), "2026-11-22T02:55:25Z");
        assert_eq!(power_time(t), "11-22-2026 02:55:25.792");
    }
}
