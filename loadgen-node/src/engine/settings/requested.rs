//! The settings a user requests, with the official defaults.

use super::{Scenario, TestMode};

/// Requested settings, field for field the official `mlperf::TestSettings`
/// (times in nanoseconds or milliseconds as named, percentiles as fractions).
#[derive(Clone, Debug, PartialEq)]
pub struct TestSettings {
    /// The scenario to run.
    pub scenario: Scenario,
    /// What the run does: accuracy, performance, both, or a peak search.
    pub mode: TestMode,

    /// SingleStream: expected latency of one query, in ns; sets how many
    /// queries are generated to fill the minimum duration.
    pub single_stream_expected_latency_ns: f64,
    /// SingleStream: the latency percentile reported as the result, as a
    /// fraction (0.90 = 90th).
    pub single_stream_target_latency_percentile: f64,

    /// MultiStream: expected latency of one whole query, in ns; sets how many
    /// queries are generated to fill the minimum duration.
    pub multi_stream_expected_latency_ns: f64,
    /// MultiStream: the query-latency percentile reported as the result, as a
    /// fraction.
    pub multi_stream_target_latency_percentile: f64,
    /// MultiStream: samples in each query.
    pub multi_stream_samples_per_query: u64,

    /// Server: mean rate of the Poisson arrivals, in queries per second; the
    /// lower bound of the FindPeakPerformance search.
    pub server_target_qps: f64,
    /// Server: the latency bound, in ns, that the target percentile of
    /// samples must meet for a valid run.
    pub server_target_latency_ns: u64,
    /// Server: the fraction of samples that must meet
    /// `server_target_latency_ns`.
    pub server_target_latency_percentile: f64,
    /// Server: issue every query already due in one IssueQuery call instead
    /// of one call each.
    pub server_coalesce_queries: bool,
    /// FindPeakPerformance: decimal places of QPS at which the binary search
    /// stops.
    pub server_find_peak_qps_decimals_of_precision: i32,
    /// FindPeakPerformance: fraction by which the QPS is raised, run after
    /// run, until a run fails; the search then bisects between the last two.
    pub server_find_peak_qps_boundary_step_size: f64,
    /// Server: most queries outstanding before a performance run stops
    /// early; 0 means no limit.
    pub server_max_async_queries: u64,
    /// Server: issuing threads the SUT would register; netdiv always issues
    /// from one thread and only logs a warning when this is non-zero.
    pub server_num_issue_query_threads: u64,

    /// Offline: the throughput the SUT expects, in samples per second; sizes
    /// the single query (with 10% slack) to last the minimum duration.
    pub offline_expected_qps: f64,
    /// Equal-issue mode: issue whole permutations of the loaded set.
    pub sample_concatenate_permutation: bool,

    /// Minimum length of the timed run, in ms.
    pub min_duration_ms: u64,
    /// Maximum length of the timed run, in ms; 0 means no limit.
    pub max_duration_ms: u64,
    /// Minimum number of queries the run must issue.
    pub min_query_count: u64,
    /// Maximum number of queries to issue; 0 means no limit.
    pub max_query_count: u64,

    /// Seed of the draw that picks which QSL samples are loaded.
    pub qsl_rng_seed: u64,
    /// Seed of the draw that picks which loaded sample goes into each query.
    pub sample_index_rng_seed: u64,
    /// Seed of the Server scenario's Poisson arrival times.
    pub schedule_rng_seed: u64,
    /// Seed of the draw that picks which responses of a performance run are
    /// written to the accuracy log.
    pub accuracy_log_rng_seed: u64,
    /// Performance mode: chance, as a fraction, that a sample's response is
    /// written to the accuracy log.
    pub accuracy_log_probability: f64,
    /// Performance mode: how many responses to aim for in the accuracy log;
    /// when non-zero it sets the logging probability instead of
    /// `accuracy_log_probability`.
    pub accuracy_log_sampling_target: u64,
    /// Run compliance TEST05: a performance run with the `test05_*` seeds in
    /// place of the usual three.
    pub test05: bool,
    /// TEST05: replaces `qsl_rng_seed`.
    pub test05_qsl_rng_seed: u64,
    /// TEST05: replaces `sample_index_rng_seed`.
    pub test05_sample_index_rng_seed: u64,
    /// TEST05: replaces `schedule_rng_seed`.
    pub test05_schedule_rng_seed: u64,

    /// Asks for the start and end of the timed interval to be printed, for
    /// checking against an external clock; netdiv only records the flag in
    /// the logs.
    pub print_timestamps: bool,
    /// Performance mode: issue each loaded sample at most once (compliance
    /// audit for caching).
    pub performance_issue_unique: bool,
    /// Performance mode: issue the same sample, `performance_issue_same_index`,
    /// in every query (compliance audit for caching).
    pub performance_issue_same: bool,
    /// Which loaded sample `performance_issue_same` repeats; must be below the
    /// performance sample count.
    pub performance_issue_same_index: u64,
    /// Number of samples to load for performance runs; 0 means the QSL's
    /// own performance sample count.
    pub performance_sample_count_override: u64,
    /// Number of samples an accuracy run covers; 0 means every sample of the
    /// QSL.
    pub accuracy_sample_count_override: u64,

    /// Measure first-token and per-token latencies (LLM benchmarks); netdiv
    /// refuses to run with this set.
    pub use_token_latencies: bool,
    /// Server with token latencies: time-to-first-token bound, in ns.
    pub server_ttft_latency: u64,
    /// Server with token latencies: time-per-output-token bound, in ns.
    pub server_tpot_latency: u64,
    /// Report token throughput inferred from sample throughput times
    /// `token_latency_scaling_factor`.
    pub infer_token_latencies: bool,
    /// Tokens per sample assumed by `infer_token_latencies`.
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
