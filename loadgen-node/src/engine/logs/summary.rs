//! `mlperf_log_summary.txt`: the human-readable verdict, line for line as
//! the official LoadGen writes it.

use std::fmt::Write;

use super::format::{cpp_double, fixed};
use crate::engine::results::{PerformanceSummary, LATENCY_PERCENTILES};
use crate::engine::settings::Scenario;

const RULE: &str = "================================================";

/// The results block for one performance run.
pub fn render(s: &PerformanceSummary) -> String {
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
            line(format!(
                " * {}",
                PerformanceSummary::PERF_CONSTRAINTS_RECOMMENDATION
            ));
        }
        if !s.min_duration_met {
            line(format!(" * {}", s.min_duration_recommendation()));
        }
        if !s.min_queries_met {
            line(" * The test exited early, before enough queries were issued.\n   See the detailed log for why this may have occurred.".into());
        }
    }
    if st.scenario != Scenario::Offline {
        line("Early Stopping Result:".into());
        line(s.early_stopping.text.clone());
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
            latency_block(&mut line, &s.queries);
        }
        Scenario::Offline => {}
    }
    if st.scenario != Scenario::MultiStream {
        latency_block(&mut line, &s.samples);
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
    line(format!(
        "accuracy_sample_count : {}",
        st.accuracy_sample_count
    ));
    if st.sample_concatenate_permutation {
        line("WARNING: sample_concatenate_permutation was set to true. \nGenerated samples per query might be different as the one in the setting.\nCheck the generated_samples_per_query line in the detailed log for the real\nsamples_per_query value".into());
    }
    out
}

fn latency_block(line: &mut impl FnMut(String), stats: &crate::engine::results::LatencyStats) {
    line(format!("Min latency (ns)                : {}", stats.min));
    line(format!("Max latency (ns)                : {}", stats.max));
    line(format!("Mean latency (ns)               : {}", stats.mean));
    for (p, v) in LATENCY_PERCENTILES.iter().zip(stats.percentiles) {
        line(format!(
            "{} percentile latency (ns)   : {v}",
            fixed(p * 100.0, 2)
        ));
    }
}

/// The closing lines: how many warnings and errors the detail log holds.
pub fn footer(warnings: u64, errors: u64) -> String {
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
