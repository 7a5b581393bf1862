//! `mlperf_log_summary.txt`: the human-readable verdict, line for line as
//! the official LoadGen writes it.

use std::fmt::Write;

use super::format::{cpp_double, fixed};
use crate::engine::results::{LatencyStats, PerformanceSummary, TokenSummary, LATENCY_PERCENTILES};
use crate::engine::settings::Scenario;

const RULE: &str = "================================================";

/// The results block for one performance run.
pub(crate) fn render(s: &PerformanceSummary) -> String {
    let mut out = String::new();
    let st = &s.settings;
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!("{RULE}\nMLPerf Results Summary\n{RULE}"));
    line(format!("SUT name : {}", s.sut_name));
    line(format!("Scenario : {}", st.scenario));
    line(format!("Mode     : {}", st.mode));
    let pct = fixed(st.target_latency_percentile * 100.0, 1);
    match st.scenario {
        Scenario::SingleStream => line(format!(
            "{pct}th percentile latency (ns) : {}",
            s.samples.target
        )),
        Scenario::MultiStream => line(format!(
            "{pct}th percentile latency (ns) : {}",
            s.queries.target
        )),
        Scenario::Server => line(format!(
            "Completed samples per second    : {}",
            fixed(s.server_completed_per_second(), 2)
        )),
        Scenario::Offline => line(format!(
            "Samples per second: {}",
            cpp_double(s.offline_samples_per_second())
        )),
    }
    if let Some(tokens) = &s.tokens {
        token_throughput(&mut line, s, tokens);
    }
    if st.infer_token_latencies {
        inferred_token_throughput(&mut line, s);
    }
    let yes = |b: bool| if b { "Yes" } else { "NO" };
    line(format!(
        "Result is : {}",
        if s.is_valid() { "VALID" } else { "INVALID" }
    ));
    if st.scenario == Scenario::Server {
        line(format!(
            "  Performance constraints satisfied : {}",
            yes(s.perf_constraints_met)
        ));
    }
    line(format!(
        "  Min duration satisfied : {}",
        yes(s.min_duration_met)
    ));
    line(format!(
        "  Min queries satisfied : {}",
        yes(s.min_queries_met)
    ));
    line(format!(
        "  Early stopping satisfied: {}",
        yes(s.early_stopping.met)
    ));
    if !s.is_valid() {
        line("Recommendations:".into());
        if !s.perf_constraints_met {
            line(format!(" * {}", s.perf_constraints_recommendation));
        }
        if !s.min_duration_met {
            line(format!(" * {}", s.min_duration_recommendation()));
        }
        if !s.min_queries_met {
            line(" * The test exited early, before enough queries were issued.\n   See the detailed log for why this may have occurred.".into());
        }
    }
    if st.scenario != Scenario::Offline {
        match &s.tokens {
            None => {
                line("Early Stopping Result:".into());
                line(s.early_stopping.text.clone());
            }
            Some(tokens) => {
                line("TTFT Early Stopping Result:".into());
                line(tokens.early_stopping_ttft.text.clone());
                line("TPOT Early Stopping Result:".into());
                line(tokens.early_stopping_tpot.text.clone());
            }
        }
    }
    line(format!("\n{RULE}\nAdditional Stats\n{RULE}"));
    match st.scenario {
        Scenario::SingleStream => {
            line(format!(
                "QPS w/ loadgen overhead         : {}",
                fixed(s.qps_with_loadgen_overhead(), 2)
            ));
            line(format!(
                "QPS w/o loadgen overhead        : {}",
                fixed(s.qps_without_loadgen_overhead(), 2)
            ));
            line(String::new());
        }
        Scenario::Server => line(format!(
            "Scheduled samples per second : {}",
            fixed(s.server_scheduled_per_second(), 2)
        )),
        Scenario::MultiStream => {
            line("Per-query latency:  ".into());
            stats_block(&mut line, &s.queries, &SAMPLE_LATENCY);
        }
        Scenario::Offline => {}
    }
    if st.scenario != Scenario::MultiStream {
        stats_block(&mut line, &s.samples, &SAMPLE_LATENCY);
    }
    if let Some(tokens) = &s.tokens {
        token_stats(&mut line, s, tokens);
    }
    line(format!("\n{RULE}\nTest Parameters Used\n{RULE}"));
    line(format!("samples_per_query : {}", st.samples_per_query));
    line(format!("target_qps : {}", cpp_double(st.target_qps)));
    if st.use_token_latencies {
        line(format!(
            "ttft_latency (ns): {}",
            st.requested.server_ttft_latency
        ));
        line(format!(
            "tpot_latency (ns): {}",
            st.requested.server_tpot_latency
        ));
    } else {
        line(format!("target_latency (ns): {}", st.target_latency_ns));
    }
    let b = |v: bool| u8::from(v);
    line(format!("max_async_queries : {}", st.max_async_queries));
    line(format!("min_duration (ms): {}", st.min_duration_ms));
    line(format!("max_duration (ms): {}", st.max_duration_ms));
    line(format!("min_query_count : {}", st.min_query_count));
    line(format!("max_query_count : {}", st.max_query_count));
    line(format!("qsl_rng_seed : {}", st.qsl_rng_seed));
    line(format!(
        "sample_index_rng_seed : {}",
        st.sample_index_rng_seed
    ));
    line(format!("schedule_rng_seed : {}", st.schedule_rng_seed));
    line(format!(
        "accuracy_log_rng_seed : {}",
        st.accuracy_log_rng_seed
    ));
    line(format!(
        "accuracy_log_probability : {}",
        cpp_double(st.accuracy_log_probability)
    ));
    line(format!(
        "accuracy_log_sampling_target : {}",
        st.accuracy_log_sampling_target
    ));
    line(format!("print_timestamps : {}", b(st.print_timestamps)));
    line(format!(
        "performance_issue_unique : {}",
        b(st.performance_issue_unique)
    ));
    line(format!(
        "performance_issue_same : {}",
        b(st.performance_issue_same)
    ));
    line(format!(
        "performance_issue_same_index : {}",
        st.performance_issue_same_index
    ));
    line(format!(
        "performance_sample_count : {}",
        st.performance_sample_count
    ));
    if st.release.accuracy_sample_count_override {
        line(format!(
            "accuracy_sample_count : {}",
            st.accuracy_sample_count
        ));
    }
    if st.sample_concatenate_permutation {
        line("WARNING: sample_concatenate_permutation was set to true. \nGenerated samples per query might be different as the one in the setting.\nCheck the generated_samples_per_query line in the detailed log for the real\nsamples_per_query value".into());
    }
    out
}

/// The token line under the scenario's headline number.
fn token_throughput(line: &mut impl FnMut(String), s: &PerformanceSummary, tokens: &TokenSummary) {
    let pct = fixed(s.settings.target_latency_percentile * 100.0, 1);
    let count = tokens.token_count as f64;
    match s.settings.scenario {
        Scenario::SingleStream | Scenario::MultiStream => line(format!(
            "{pct}th first token percentile latency (ns) : {}",
            tokens.first_token.target
        )),
        Scenario::Offline => line(format!(
            "Tokens per second: {}",
            cpp_double(count / s.result.max_latency)
        )),
        Scenario::Server => line(format!(
            "Completed tokens per second: {}",
            fixed(count / s.result.final_query_all_samples_done_time, 2)
        )),
    }
}

/// Token throughput inferred from samples (`infer_token_latencies`).
fn inferred_token_throughput(line: &mut impl FnMut(String), s: &PerformanceSummary) {
    let factor = s.settings.token_latency_scaling_factor as f64;
    match s.settings.scenario {
        Scenario::Offline => line(format!(
            "Tokens per second (inferred): {}",
            cpp_double(factor * s.sample_count as f64 / s.result.max_latency)
        )),
        Scenario::Server => line(format!(
            "Completed tokens per second (inferred): {}",
            fixed(
                factor * (s.sample_count as f64 - 1.0) / s.result.final_query_all_samples_done_time,
                2
            )
        )),
        Scenario::SingleStream | Scenario::MultiStream => {}
    }
}

/// The token block of "Additional Stats" (spelled as upstream spells it).
fn token_stats(line: &mut impl FnMut(String), s: &PerformanceSummary, tokens: &TokenSummary) {
    let count = tokens.token_count as f64;
    line(String::new());
    match s.settings.scenario {
        Scenario::SingleStream => {
            line(format!(
                "TPS w/ loadgen overhead         : {}",
                fixed(count / s.result.final_query_issued_time, 2)
            ));
            let busy_s = s.samples.mean as f64 / 1e9 * s.sample_count as f64;
            line(format!(
                "TPS w/o loadgen overhead        : {}",
                fixed(count / busy_s, 2)
            ));
        }
        Scenario::Server => line(format!(
            "Completed tokens per second                 : {}",
            fixed(count / s.result.final_query_all_samples_done_time, 2)
        )),
        Scenario::MultiStream | Scenario::Offline => {}
    }
    if s.settings.scenario == Scenario::Offline {
        return;
    }
    stats_block(line, &tokens.first_token, &FIRST_TOKEN);
    line(String::new());
    let tpot_labels = if s.settings.release.tpot_summary_says_to {
        &TIME_TO_OUTPUT_TOKEN
    } else {
        &TIME_PER_OUTPUT_TOKEN
    };
    stats_block(line, &tokens.time_per_output_token, tpot_labels);
}

/// The labels of one statistics block, padded as upstream pads them.
struct BlockLabels {
    min: &'static str,
    max: &'static str,
    mean: &'static str,
    /// Follows each percentile.
    percentile: &'static str,
}

const SAMPLE_LATENCY: BlockLabels = BlockLabels {
    min: "Min latency (ns)                : ",
    max: "Max latency (ns)                : ",
    mean: "Mean latency (ns)               : ",
    percentile: " percentile latency (ns)   : ",
};

const FIRST_TOKEN: BlockLabels = BlockLabels {
    min: "Min First Token latency (ns)                : ",
    max: "Max First Token latency (ns)                : ",
    mean: "Mean First Token latency (ns)               : ",
    percentile: " percentile first token latency (ns)   : ",
};

/// Upstream says "time to output token" in the percentile lines.
const TIME_PER_OUTPUT_TOKEN: BlockLabels = BlockLabels {
    min: "Min Time per Output Token (ns)                : ",
    max: "Max Time per Output Token (ns)                : ",
    mean: "Mean Time per Output Token (ns)               : ",
    percentile: " percentile time to output token (ns)   : ",
};

/// LoadGen 5.0 said "to" where later releases say "per".
const TIME_TO_OUTPUT_TOKEN: BlockLabels = BlockLabels {
    min: "Min Time to Output Token (ns)                : ",
    max: "Max Time to Output Token (ns)                : ",
    mean: "Mean Time to Output Token (ns)               : ",
    ..TIME_PER_OUTPUT_TOKEN
};

/// Min, max, mean and the percentiles of `stats`.
fn stats_block(line: &mut impl FnMut(String), stats: &LatencyStats, labels: &BlockLabels) {
    line(format!("{}{}", labels.min, stats.min));
    line(format!("{}{}", labels.max, stats.max));
    line(format!("{}{}", labels.mean, stats.mean));
    for (p, v) in LATENCY_PERCENTILES.iter().zip(stats.percentiles) {
        line(format!("{}{}{v}", fixed(p * 100.0, 2), labels.percentile));
    }
}

/// The closing lines: how many warnings and errors the detail log holds.
pub(crate) fn footer(warnings: u64, errors: u64) -> String {
    let mut out = String::new();
    let _ = match warnings {
        0 => write!(out, "\nNo warnings encountered during test.\n"),
        1 => write!(out, "\n1 warning encountered. See detailed log.\n"),
        n => write!(out, "\n{n} warnings encountered. See detailed log.\n"),
    };
    let _ = match errors {
        0 => write!(out, "\nNo errors encountered during test.\n"),
        1 => write!(out, "\n1 ERROR encountered. See detailed log.\n"),
        n => write!(out, "\n{n} ERRORS encountered. See detailed log.\n"),
    };
    out
}
