//! The settings a user requests, with the official defaults.

use super::{Scenario, TestMode};

/// Requested settings, field for field the official `mlperf::TestSettings`
/// (times in nanoseconds or milliseconds as named, percentiles as fractions).
#[derive(Clone, Debug, PartialEq)]
pub struct TestSettings {
    pub scenario: Scenario,
    pub mode: TestMode,

    pub single_stream_expected_latency_ns: f64,
    pub single_stream_target_latency_percentile: f64,

    pub multi_stream_expected_latency_ns: f64,
    pub multi_stream_target_latency_percentile: f64,
    pub multi_stream_samples_per_query: u64,

    pub server_target_qps: f64,
    pub server_target_latency_ns: u64,
    pub server_target_latency_percentile: f64,
    pub server_coalesce_queries: bool,
    pub server_find_peak_qps_decimals_of_precision: i32,
    pub server_find_peak_qps_boundary_step_size: f64,
    /// 0 means no limit.
    pub server_max_async_queries: u64,
    pub server_num_issue_query_threads: u64,

    pub offline_expected_qps: f64,
    /// Equal-issue mode: issue whole permutations of the loaded set.
    pub sample_concatenate_permutation: bool,

    pub min_duration_ms: u64,
    /// 0 means no limit.
    pub max_duration_ms: u64,
    pub min_query_count: u64,
    /// 0 means no limit.
    pub max_query_count: u64,

    pub qsl_rng_seed: u64,
    pub sample_index_rng_seed: u64,
    pub schedule_rng_seed: u64,
    pub accuracy_log_rng_seed: u64,
    pub accuracy_log_probability: f64,
    pub accuracy_log_sampling_target: u64,
    pub test05: bool,
    pub test05_qsl_rng_seed: u64,
    pub test05_sample_index_rng_seed: u64,
    pub test05_schedule_rng_seed: u64,

    pub print_timestamps: bool,
    pub performance_issue_unique: bool,
    pub performance_issue_same: bool,
    pub performance_issue_same_index: u64,
    pub performance_sample_count_override: u64,
    pub accuracy_sample_count_override: u64,

    pub use_token_latencies: bool,
    pub server_ttft_latency: u64,
    pub server_tpot_latency: u64,
    pub infer_token_latencies: bool,
    pub token_latency_scaling_factor: u64,
}

impl Default for TestSettings {
    fn default() -> Self {
        Self {
            scenario: Scenario::SingleStream,
            mode: TestMode::PerformanceOnly,
            single_stream_expected_latency_ns: 1_000_000.0,
            single_stream_target_latency_percentile: 0.90,
            multi_stream_expected_latency_ns: 8_000_000.0,
            multi_stream_target_latency_percentile: 0.99,
            multi_stream_samples_per_query: 8,
            server_target_qps: 1.0,
            server_target_latency_ns: 100_000_000,
            server_target_latency_percentile: 0.99,
            server_coalesce_queries: false,
            server_find_peak_qps_decimals_of_precision: 1,
            server_find_peak_qps_boundary_step_size: 1.0,
            server_max_async_queries: 0,
            server_num_issue_query_threads: 0,
            offline_expected_qps: 1.0,
            sample_concatenate_permutation: false,
            min_duration_ms: 10_000,
            max_duration_ms: 0,
            min_query_count: 100,
            max_query_count: 0,
            qsl_rng_seed: 0,
            sample_index_rng_seed: 0,
            schedule_rng_seed: 0,
            accuracy_log_rng_seed: 0,
            accuracy_log_probability: 0.0,
            accuracy_log_sampling_target: 0,
            test05: false,
            test05_qsl_rng_seed: 0,
            test05_sample_index_rng_seed: 0,
            test05_schedule_rng_seed: 0,
            print_timestamps: false,
            performance_issue_unique: false,
            performance_issue_same: false,
            performance_issue_same_index: 0,
            performance_sample_count_override: 0,
            accuracy_sample_count_override: 0,
            use_token_latencies: false,
            server_ttft_latency: 100_000_000,
            server_tpot_latency: 100_000_000,
            infer_token_latencies: false,
            token_latency_scaling_factor: 0,
        }
    }
}
