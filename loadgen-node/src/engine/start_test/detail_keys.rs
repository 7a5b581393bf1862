//! The settings and results keys of `mlperf_log_detail.txt`, in the order
//! and with the names the official LoadGen logs them (its
//! `LogRequestedTestSettings`, `LogEffectiveSettings` and
//! `PerformanceSummary::LogDetail`).

use super::{Detail, TestError};
use crate::engine::logs::detail::Value;
use crate::engine::logs::format::fixed;
use crate::engine::release::LoadgenRelease;
use crate::engine::results::{PerformanceSummary, LATENCY_PERCENTILES};
use crate::engine::settings::{EffectiveSettings, Scenario, TestSettings};
use crate::mllog;

/// A key and its value, to log in order.
type Pair = (&'static str, Value);

fn log_pairs(d: &mut Detail, pairs: Vec<Pair>, release: LoadgenRelease) -> Result<(), TestError> {
    for (key, value) in pairs.into_iter().filter(|(key, _)| logged_by(release, key)) {
        mllog!(d, key, value)?;
    }
    Ok(())
}

/// Whether `release` logs a settings key: releases before 6.0 had no
/// accuracy sample count override, and no keys for it.
fn logged_by(release: LoadgenRelease, key: &str) -> bool {
    release.accuracy_sample_count_override
        || !matches!(
            key,
            "requested_accuracy_sample_count_override" | "effective_accuracy_sample_count"
        )
}

/// The `requested_*` keys: the settings as the config files gave them.
pub(super) fn log_requested(
    d: &mut Detail,
    s: &TestSettings,
    release: LoadgenRelease,
) -> Result<(), TestError> {
    mllog!(d, "requested_scenario", s.scenario.name())?;
    mllog!(d, "requested_test_mode", s.mode.name())?;
    log_pairs(d, requested_scenario_pairs(s), release)?;
    log_pairs(d, requested_common_pairs(s), release)?;
    if s.use_token_latencies {
        mllog!(d, "requested_use_token_latencies", true)?;
        if s.scenario != Scenario::Offline {
            mllog!(d, "requested_server_ttft_latency", s.server_ttft_latency)?;
            mllog!(d, "requested_server_tpot_latency", s.server_tpot_latency)?;
        }
    }
    Ok(())
}

/// The requested keys only the test's scenario has.
fn requested_scenario_pairs(s: &TestSettings) -> Vec<Pair> {
    match s.scenario {
        Scenario::SingleStream => vec![
            (
                "requested_single_stream_expected_latency_ns",
                s.single_stream_expected_latency_ns.into(),
            ),
            (
                "requested_single_stream_target_latency_percentile",
                s.single_stream_target_latency_percentile.into(),
            ),
        ],
        Scenario::MultiStream => vec![
            (
                "requested_multi_stream_expected_latency_ns",
                s.multi_stream_expected_latency_ns.into(),
            ),
            (
                "requested_multi_stream_target_latency_percentile",
                s.multi_stream_target_latency_percentile.into(),
            ),
            (
                "requested_multi_stream_samples_per_query",
                s.multi_stream_samples_per_query.into(),
            ),
        ],
        Scenario::Server => vec![
            ("requested_server_target_qps", s.server_target_qps.into()),
            (
                "requested_server_target_latency_ns",
                s.server_target_latency_ns.into(),
            ),
            (
                "requested_server_target_latency_percentile",
                s.server_target_latency_percentile.into(),
            ),
            (
                "requested_server_coalesce_queries",
                s.server_coalesce_queries.into(),
            ),
            (
                "requested_server_find_peak_qps_decimals_of_precision",
                s.server_find_peak_qps_decimals_of_precision.into(),
            ),
            (
                "requested_server_find_peak_qps_boundary_step_size",
                s.server_find_peak_qps_boundary_step_size.into(),
            ),
            (
                "requested_server_max_async_queries",
                s.server_max_async_queries.into(),
            ),
            (
                "requested_server_num_issue_query_threads",
                s.server_num_issue_query_threads.into(),
            ),
        ],
        Scenario::Offline => vec![(
            "requested_offline_expected_qps",
            s.offline_expected_qps.into(),
        )],
    }
}

/// The requested keys every scenario has.
fn requested_common_pairs(s: &TestSettings) -> Vec<Pair> {
    vec![
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
    ]
}

/// The `effective_*` keys: the settings the test really runs with.
pub(super) fn log_effective(d: &mut Detail, s: &EffectiveSettings) -> Result<(), TestError> {
    let pairs = vec![
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
    log_pairs(d, pairs, s.release)
}

/// The `result_*` keys of a performance run, then `num_errors`.
pub(super) fn log_performance_detail(
    d: &mut Detail,
    p: &PerformanceSummary,
) -> Result<(), TestError> {
    log_validity(d, p)?;
    log_scenario_results(d, p)?;
    log_sample_latencies(d, p)?;
    log_token_results(d, p)?;
    log_inferred_tokens(d, p)?;
    let errors = d.error_count();
    mllog!(d, "num_errors", errors)?;
    Ok(())
}

/// The verdict, each constraint, and why a run is invalid.
fn log_validity(d: &mut Detail, p: &PerformanceSummary) -> Result<(), TestError> {
    let server = p.settings.scenario == Scenario::Server;
    let valid = p.is_valid();
    mllog!(
        d,
        "result_validity",
        if valid { "VALID" } else { "INVALID" }
    )?;
    if server {
        mllog!(d, "result_perf_constraints_met", p.perf_constraints_met)?;
    }
    mllog!(d, "result_min_duration_met", p.min_duration_met)?;
    mllog!(d, "result_min_queries_met", p.min_queries_met)?;
    mllog!(d, "early_stopping_met", p.early_stopping.met)?;
    if !valid {
        mllog!(d, "result_invalid_reason", invalid_reason(p))?;
    }
    match &p.tokens {
        None => mllog!(
            d,
            "early_stopping_result",
            p.early_stopping.text.replace('\n', " ")
        )?,
        Some(tokens) => {
            mllog!(
                d,
                "early_stopping_ttft_result",
                tokens.early_stopping_ttft.text.replace('\n', " ")
            )?;
            mllog!(
                d,
                "early_stopping_tpot_result",
                tokens.early_stopping_tpot.text.replace('\n', " ")
            )?;
        }
    }
    mllog!(d, "result_query_count", p.result.queries_issued)?;
    if server {
        mllog!(
            d,
            "result_overlatency_query_count",
            p.overlatency_query_count
        )?;
    }
    Ok(())
}

/// The official recommendation text for each unmet constraint, on one line.
fn invalid_reason(p: &PerformanceSummary) -> String {
    let mut reason = String::new();
    if !p.perf_constraints_met {
        reason += &p.perf_constraints_recommendation;
        reason += " ";
    }
    if !p.min_duration_met {
        reason += p.min_duration_recommendation();
        reason += " ";
    }
    if !p.min_queries_met {
        reason += "The test exited early, before enough queries were issued.";
    }
    reason.replace('\n', " ")
}

/// The throughput and query-latency keys of the test's scenario.
fn log_scenario_results(d: &mut Detail, p: &PerformanceSummary) -> Result<(), TestError> {
    match p.settings.scenario {
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
                let key = format!(
                    "result_{}_percentile_per_query_latency_ns",
                    fixed(pct * 100.0, 2)
                );
                mllog!(d, &key, v)?;
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
    Ok(())
}

/// Per-sample latency: min, max, mean and the percentiles.
fn log_sample_latencies(d: &mut Detail, p: &PerformanceSummary) -> Result<(), TestError> {
    mllog!(d, "result_min_latency_ns", p.samples.min)?;
    mllog!(d, "result_max_latency_ns", p.samples.max)?;
    mllog!(d, "result_mean_latency_ns", p.samples.mean)?;
    for (pct, v) in LATENCY_PERCENTILES.iter().zip(p.samples.percentiles) {
        let key = format!("result_{}_percentile_latency_ns", fixed(pct * 100.0, 2));
        mllog!(d, &key, v)?;
    }
    Ok(())
}

/// First-token and per-token latencies and token throughput, with the
/// official key names (`result_time_to_output_token_*` included).
fn log_token_results(d: &mut Detail, p: &PerformanceSummary) -> Result<(), TestError> {
    let Some(tokens) = &p.tokens else {
        return Ok(());
    };
    let count = tokens.token_count as f64;
    if p.settings.scenario == Scenario::Offline {
        mllog!(d, "result_tokens_per_second", count / p.result.max_latency)?;
        return Ok(());
    }
    let ttft = &tokens.first_token;
    mllog!(d, "result_first_token_min_latency_ns", ttft.min)?;
    mllog!(d, "result_first_token_max_latency_ns", ttft.max)?;
    mllog!(d, "result_first_token_mean_latency_ns", ttft.mean)?;
    for (pct, v) in LATENCY_PERCENTILES.iter().zip(ttft.percentiles) {
        let key = format!(
            "result_first_token_{}_percentile_latency_ns",
            fixed(pct * 100.0, 2)
        );
        mllog!(d, &key, v)?;
    }
    mllog!(
        d,
        "result_token_throughput_with_loadgen_overhead",
        count / p.result.final_query_issued_time
    )?;
    // Upstream divides by the mean latency in ns times the sample count.
    mllog!(
        d,
        "result_token_throughput",
        count / (p.samples.mean as f64 * p.sample_count as f64)
    )?;
    let tpot = &tokens.time_per_output_token;
    for (pct, v) in LATENCY_PERCENTILES.iter().zip(tpot.percentiles) {
        let key = format!(
            "result_time_per_output_token_{}_percentile_ns",
            fixed(pct * 100.0, 2)
        );
        mllog!(d, &key, v)?;
    }
    mllog!(d, "result_time_to_output_token_min", tpot.min)?;
    mllog!(d, "result_time_to_output_token_max", tpot.max)?;
    mllog!(d, "result_time_to_output_token_mean", tpot.mean)?;
    mllog!(
        d,
        "result_completed_tokens_per_second",
        count / p.result.final_query_all_samples_done_time
    )?;
    Ok(())
}

/// Tokens per second inferred from samples (`infer_token_latencies`).
fn log_inferred_tokens(d: &mut Detail, p: &PerformanceSummary) -> Result<(), TestError> {
    let st = &p.settings;
    if !st.infer_token_latencies {
        return Ok(());
    }
    let factor = st.token_latency_scaling_factor as f64;
    match st.scenario {
        Scenario::Server => mllog!(
            d,
            "result_inferred_completed_tokens_per_second",
            (p.sample_count as f64 - 1.0) * factor / p.result.final_query_all_samples_done_time
        )?,
        Scenario::Offline => mllog!(
            d,
            "result_inferred_tokens_per_second",
            p.sample_count as f64 * factor / p.result.max_latency
        )?,
        _ => {}
    }
    Ok(())
}
