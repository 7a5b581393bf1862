//! The passes of a test: loading a sample set, one IssueQueries call
//! (generate, issue, wait, record), and the performance and accuracy
//! modes built from them.

use std::sync::Arc;

use super::clock::power_time;
use super::{Context, Detail, TestError};
use crate::engine::completion::tokens::{counted_tokens, TokenTable};
use crate::engine::completion::{KeepPolicy, SampleTable};
use crate::engine::generate::{
    generate_queries, loadable_sets, AccuracyLogSampling, GeneratedQueries, LoadableSet, Pass,
};
use crate::engine::issue::{issue_queries, IssueRecord, StopReason};
use crate::engine::logs::accuracy::TokenFields;

use crate::engine::results::{PerformanceResult, PerformanceSummary, TokenResults};
use crate::engine::rng::StdRng;
use crate::engine::settings::{EffectiveSettings, Scenario};
use crate::mllog;

pub(super) fn run_performance(
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

pub(super) fn run_accuracy(
    ctx: &mut Context,
    settings: &EffectiveSettings,
) -> Result<(), TestError> {
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

pub(super) fn first_performance_set(
    ctx: &mut Context,
    settings: &EffectiveSettings,
) -> Result<LoadableSet, TestError> {
    let t0 = ctx.origin.elapsed().as_nanos() as u64;
    // Before 6.0 the whole QSL was shuffled and the first set loaded.
    let shuffled = if settings.release.performance_sets_from_whole_qsl {
        ctx.qsl.total_sample_count()
    } else {
        settings.performance_sample_count as usize
    };
    let set = loadable_sets(
        settings,
        ctx.qsl.total_sample_count(),
        shuffled,
        ctx.options.uniform_int,
    )
    .into_iter()
    .next()
    .ok_or_else(|| TestError::Empty("the QSL has no samples to load".into()))?;
    trace_span(ctx, "GenerateLoadableSets", t0)?;
    Ok(set)
}

pub(super) fn load(ctx: &mut Context, set: &LoadableSet) -> Result<(), TestError> {
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
pub(super) fn run_pass(
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
    let mut table = SampleTable::new(
        queries.first_sequence_id,
        ctx.origin,
        queries.query_sizes(),
        queries.samples_per_query,
        queries.samples.len(),
        keep,
    );
    if settings.use_token_latencies {
        table = table.with_tokens(settings.scenario != Scenario::Offline);
    }
    let table = Arc::new(table);
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
    log_token_errors(&mut ctx.detail, &table)?;
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

fn log_issue_end(d: &mut Detail, rec: &IssueRecord, pass: Pass) -> Result<(), TestError> {
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

/// The token protocol errors of a pass, one `error_runtime` line each, as
/// the official logs them.
fn log_token_errors(d: &mut Detail, table: &SampleTable) -> Result<(), TestError> {
    let Some(tokens) = table.tokens() else {
        return Ok(());
    };
    let (count, messages) = tokens.errors();
    for message in &messages {
        mllog!(d, error "error_runtime", message.clone())?;
    }
    if count > messages.len() as u64 {
        let more = count - messages.len() as u64;
        mllog!(d, error "error_runtime", format!("{more} more token errors like the ones above"))?;
        d.count_unwritten_errors(more - 1);
    }
    Ok(())
}

fn record_accuracy(
    ctx: &mut Context,
    queries: &GeneratedQueries,
    table: &SampleTable,
    issued: usize,
) -> Result<(), TestError> {
    for (slot, sample) in queries.samples[..issued].iter().enumerate() {
        let Some(data) = table.kept_response(slot) else {
            continue;
        };
        let tokens = table.tokens().map(|t| TokenFields {
            first_token: t
                .needs_first_token()
                .then(|| t.kept_first_token(slot).unwrap_or_default()),
            count: t.reported_tokens(slot),
        });
        ctx.accuracy.entry(sample.id, sample.index, data, tokens)?;
    }
    Ok(())
}

fn record_trace(
    ctx: &mut Context,
    settings: &EffectiveSettings,
    queries: &GeneratedQueries,
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
            let first_token = table.tokens().and_then(|t| t.first_token_at(slot));
            match (first_token, settings.scenario) {
                (None, _) => {}
                (Some(at), Scenario::Server) => {
                    trace.token_latency_counter(rec.scheduled_ns[q], rec.issued_ns[q], at)?
                }
                (Some(at), _) => trace.first_token(
                    s.id,
                    query_seq,
                    s.index,
                    rec.scheduled_ns[q],
                    rec.issued_ns[q],
                    at,
                )?,
            }
        }
    }
    Ok(())
}

fn measure(
    queries: &GeneratedQueries,
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
    let tokens = table.tokens().map(|t| {
        measure_tokens(
            t,
            &sample_latencies,
            |slot| rec.scheduled_ns[slot / spq],
            |slot| table.completed_at(slot).is_some(),
        )
    });
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
        tokens,
    }
}

/// The token lists of a pass as the official collects them: each runs to
/// the last slot that recorded a value, with `i64::MIN` holes.
fn measure_tokens(
    tokens: &TokenTable,
    sample_latencies: &[i64],
    scheduled_ns: impl Fn(usize) -> u64,
    completed: impl Fn(usize) -> bool,
) -> TokenResults {
    const HOLE: i64 = i64::MIN;
    let trim = |mut v: Vec<i64>| {
        let len = v.iter().rposition(|&x| x != HOLE).map_or(0, |i| i + 1);
        v.truncate(len);
        v
    };
    let ttft: Vec<Option<i64>> = (0..sample_latencies.len())
        .map(|slot| {
            tokens
                .first_token_at(slot)
                .map(|t| t as i64 - scheduled_ns(slot) as i64)
        })
        .collect();
    let mut tpot = Vec::with_capacity(sample_latencies.len());
    let mut counts = Vec::with_capacity(sample_latencies.len());
    // Upstream measures a missing first token as its kInvalidLatency
    // (i64::MIN, wrapping); in Offline, where it keeps no first tokens, as
    // 0 (it reads past its list there).
    let missing = if tokens.needs_first_token() { HOLE } else { 0 };
    for (slot, &latency) in sample_latencies.iter().enumerate() {
        if !completed(slot) {
            tpot.push(HOLE);
            counts.push(HOLE);
            continue;
        }
        let n = counted_tokens(tokens.reported_tokens(slot));
        // Upstream divides by n - 1 even where it refused the count (0).
        let since_first = latency.wrapping_sub(ttft[slot].unwrap_or(missing));
        tpot.push(since_first.wrapping_div(n - 1));
        counts.push(n);
    }
    TokenResults {
        first_token_latencies: trim(ttft.into_iter().map(|t| t.unwrap_or(HOLE)).collect()),
        time_per_output_token: trim(tpot),
        tokens_per_sample: trim(counts),
    }
}
