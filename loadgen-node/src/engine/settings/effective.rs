//! The settings a run actually uses, derived from the requested ones and the
//! QSL's counts by the official rules (Offline coalescing, SingleStream
//! equal-issue padding, overrides).

use super::{Scenario, TestMode, TestSettings};
use crate::engine::release::LoadgenRelease;

/// Settings in effect for one run; the names match the `effective_*` keys of
/// the detail log.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveSettings {
    /// The settings these were derived from, after any audit.config and
    /// TEST05 overrides.
    pub requested: TestSettings,
    /// The scenario to run.
    pub scenario: Scenario,
    /// What the run does.
    pub mode: TestMode,
    /// Samples in each query: 1 in SingleStream and Server, the requested
    /// count in MultiStream, the whole coalesced query in Offline.
    pub samples_per_query: u64,
    /// Rate the queries are generated at, in queries per second (from the
    /// expected latency in SingleStream and MultiStream).
    pub target_qps: f64,
    /// Server: the latency bound, in ns; 0 in the other scenarios.
    pub target_latency_ns: u64,
    /// The latency percentile reported and judged, as a fraction.
    pub target_latency_percentile: f64,
    /// Server: most queries outstanding before a performance run stops
    /// early; 0 means no limit (1, and unchecked, in the other scenarios).
    pub max_async_queries: u64,
    /// How long issuing must last before a run may end naturally, in ms
    /// (0 in Offline, which issues one query).
    pub target_duration_ms: u64,
    /// Minimum length of the timed run, in ms.
    pub min_duration_ms: u64,
    /// Maximum length of the timed run, in ms; 0 means no limit.
    pub max_duration_ms: u64,
    /// Minimum queries to issue (1 in Offline; padded to whole loaded sets
    /// in SingleStream equal-issue mode).
    pub min_query_count: u64,
    /// Maximum queries to issue; 0 means no limit.
    pub max_query_count: u64,
    /// Minimum samples to issue: `min_query_count * samples_per_query`.
    pub min_sample_count: u64,
    /// Seed of the draw that picks which QSL samples are loaded.
    pub qsl_rng_seed: u64,
    /// Seed of the draw that picks which loaded sample goes into each query.
    pub sample_index_rng_seed: u64,
    /// Seed of the Server scenario's Poisson arrival times.
    pub schedule_rng_seed: u64,
    /// Seed of the draw that picks which performance-run responses are
    /// written to the accuracy log.
    pub accuracy_log_rng_seed: u64,
    /// Requested chance, as a fraction, that a performance-run response is
    /// written to the accuracy log.
    pub accuracy_log_probability: f64,
    /// Responses to aim for in the accuracy log; when non-zero it replaces
    /// `accuracy_log_probability`.
    pub accuracy_log_sampling_target: u64,
    /// Whether the timed interval's start and end were asked to be printed
    /// (recorded only).
    pub print_timestamps: bool,
    /// Issue each loaded sample at most once.
    pub performance_issue_unique: bool,
    /// Issue the sample at `performance_issue_same_index` in every query.
    pub performance_issue_same: bool,
    /// Which loaded sample `performance_issue_same` repeats.
    pub performance_issue_same_index: u64,
    /// Samples loaded for a performance run: the override, or the QSL's
    /// performance sample count.
    pub performance_sample_count: u64,
    /// Samples an accuracy run covers: the override, or every QSL sample.
    pub accuracy_sample_count: u64,
    /// The official release whose behaviour the test reproduces.
    pub release: LoadgenRelease,
    /// Equal-issue mode: issue whole permutations of the loaded set.
    pub sample_concatenate_permutation: bool,
    /// Measure first-token and per-token latencies (refused by netdiv).
    pub use_token_latencies: bool,
    /// Report token throughput inferred from sample throughput.
    pub infer_token_latencies: bool,
    /// Tokens per sample assumed by `infer_token_latencies`.
    pub token_latency_scaling_factor: u64,
    /// Problems with the request, logged as `error_invalid_test_settings`.
    pub problems: Vec<String>,
}

impl EffectiveSettings {
    /// These settings as `release` derives them: before 6.0 an accuracy
    /// run covers the whole QSL whatever `accuracy_sample_count_override`
    /// says (the key did not exist).
    pub fn under(mut self, release: LoadgenRelease, qsl_total_count: u64) -> Self {
        self.release = release;
        if !release.accuracy_sample_count_override {
            self.accuracy_sample_count = qsl_total_count;
        }
        self
    }

    /// Derives the effective settings for a QSL with the given counts.
    pub fn new(req: &TestSettings, qsl_performance_count: u64, qsl_total_count: u64) -> Self {
        let mut problems = Vec::new();
        let (target_qps, target_latency_ns, percentile, max_async) = match req.scenario {
            Scenario::SingleStream => (
                1e9 / req.single_stream_expected_latency_ns,
                0,
                req.single_stream_target_latency_percentile,
                1,
            ),
            Scenario::MultiStream => (
                1e9 / req.multi_stream_expected_latency_ns,
                0,
                req.multi_stream_target_latency_percentile,
                1,
            ),
            Scenario::Server => {
                let qps = if req.server_target_qps >= 0.0 {
                    req.server_target_qps
                } else {
                    problems.push(format!(
                        "Invalid value for server_target_qps requested. requested: {} using: 1",
                        crate::engine::logs::format::cpp_double(req.server_target_qps)
                    ));
                    1.0
                };
                (
                    qps,
                    req.server_target_latency_ns,
                    req.server_target_latency_percentile,
                    req.server_max_async_queries,
                )
            }
            Scenario::Offline => {
                let qps = if req.offline_expected_qps >= 0.0 {
                    req.offline_expected_qps
                } else {
                    problems.push(format!(
                        "Invalid value for offline_expected_qps requested. requested: {} using: 1",
                        crate::engine::logs::format::cpp_double(req.offline_expected_qps)
                    ));
                    1.0
                };
                (qps, 0, 0.99, 1)
            }
        };

        let performance_sample_count = match req.performance_sample_count_override {
            0 => qsl_performance_count,
            n => n,
        };
        let accuracy_sample_count = match req.accuracy_sample_count_override {
            0 => qsl_total_count,
            n => n,
        };

        let mut samples_per_query = 1;
        let mut min_query_count = req.min_query_count;
        let mut target_duration_ms = req.min_duration_ms;
        if req.scenario == Scenario::MultiStream {
            samples_per_query = req.multi_stream_samples_per_query;
        }
        if req.scenario == Scenario::Offline {
            // 10% slack so the one big query outlasts the minimum duration.
            let target_sample_count =
                (1.1 * (target_duration_ms as f64 / 1000.0) * target_qps) as u64;
            samples_per_query = if req.performance_issue_unique {
                performance_sample_count
            } else {
                min_query_count.max(target_sample_count)
            };
            min_query_count = 1;
            target_duration_ms = 0;
        }
        if req.sample_concatenate_permutation && req.scenario == Scenario::SingleStream {
            // Twice the expected count, rounded up past a whole number of
            // loaded sets (always adds at least one set, as upstream does).
            let expected = (2.0 * (target_duration_ms as f64 / 1000.0) * target_qps) as u64;
            min_query_count = min_query_count.max(expected);
            if qsl_performance_count > 0 {
                // Wraps like upstream's uint64_t when a huge min_duration
                // saturated the count (found by fuzzing).
                min_query_count = min_query_count
                    .wrapping_add(qsl_performance_count - min_query_count % qsl_performance_count);
            }
        }
        let min_sample_count = min_query_count.wrapping_mul(samples_per_query);

        if req.performance_issue_same
            && req.performance_issue_same_index >= performance_sample_count
        {
            problems.push(format!(
                "Sample Idx to be repeated in performance_issue_same mode cannot be greater than loaded performance_sample_count. performance_issue_same_index: {} performance_sample_count: {}",
                req.performance_issue_same_index, performance_sample_count
            ));
        }
        if req.performance_issue_unique && req.performance_issue_same {
            problems.push(
                "Performance_issue_unique and performance_issue_same, both cannot be true at the same time. performance_issue_unique: 1 performance_issue_same: 1".to_string(),
            );
        }

        Self {
            requested: req.clone(),
            scenario: req.scenario,
            mode: req.mode,
            samples_per_query,
            target_qps,
            target_latency_ns,
            target_latency_percentile: percentile,
            max_async_queries: max_async,
            target_duration_ms,
            min_duration_ms: req.min_duration_ms,
            max_duration_ms: req.max_duration_ms,
            min_query_count,
            max_query_count: req.max_query_count,
            min_sample_count,
            qsl_rng_seed: req.qsl_rng_seed,
            sample_index_rng_seed: req.sample_index_rng_seed,
            schedule_rng_seed: req.schedule_rng_seed,
            accuracy_log_rng_seed: req.accuracy_log_rng_seed,
            accuracy_log_probability: req.accuracy_log_probability,
            accuracy_log_sampling_target: req.accuracy_log_sampling_target,
            print_timestamps: req.print_timestamps,
            performance_issue_unique: req.performance_issue_unique,
            performance_issue_same: req.performance_issue_same,
            performance_issue_same_index: req.performance_issue_same_index,
            performance_sample_count,
            accuracy_sample_count,
            release: LoadgenRelease::CURRENT,
            sample_concatenate_permutation: req.sample_concatenate_permutation,
            use_token_latencies: req.use_token_latencies,
            infer_token_latencies: req.infer_token_latencies,
            token_latency_scaling_factor: req.token_latency_scaling_factor,
            problems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requested(scenario: Scenario) -> TestSettings {
        TestSettings {
            scenario,
            ..TestSettings::default()
        }
    }

    #[test]
    fn offline_coalesces_into_one_query_with_slack() {
        let mut req = requested(Scenario::Offline);
        req.offline_expected_qps = 1000.0;
        req.min_duration_ms = 2000;
        req.min_query_count = 10;
        let e = EffectiveSettings::new(&req, 1024, 4096);
        assert_eq!(e.samples_per_query, 2200);
        assert_eq!(e.min_query_count, 1);
        assert_eq!(e.target_duration_ms, 0);
        assert_eq!(e.min_sample_count, 2200);
        assert_eq!(e.max_async_queries, 1);
    }

    #[test]
    fn offline_min_query_count_floors_the_query_size() {
        let mut req = requested(Scenario::Offline);
        req.offline_expected_qps = 1.0;
        req.min_query_count = 24576;
        let e = EffectiveSettings::new(&req, 1024, 4096);
        assert_eq!(e.samples_per_query, 24576);
    }

    #[test]
    fn single_and_multi_stream_derive_qps_from_expected_latency() {
        let mut req = requested(Scenario::MultiStream);
        req.multi_stream_expected_latency_ns = 2_000_000.0;
        let e = EffectiveSettings::new(&req, 1024, 4096);
        assert_eq!(e.target_qps, 500.0);
        assert_eq!(e.samples_per_query, 8);
        assert_eq!(e.max_async_queries, 1);
        assert_eq!(e.min_sample_count, 800);
    }

    #[test]
    fn overrides_replace_qsl_counts() {
        let mut req = requested(Scenario::Server);
        req.performance_sample_count_override = 10;
        req.accuracy_sample_count_override = 20;
        let e = EffectiveSettings::new(&req, 1024, 4096);
        assert_eq!(
            (e.performance_sample_count, e.accuracy_sample_count),
            (10, 20)
        );
    }

    #[test]
    fn single_stream_equal_issue_pads_to_whole_sets() {
        let mut req = requested(Scenario::SingleStream);
        req.sample_concatenate_permutation = true;
        req.single_stream_expected_latency_ns = 1_000_000.0;
        req.min_duration_ms = 1000;
        req.min_query_count = 100;
        let e = EffectiveSettings::new(&req, 64, 4096);
        // 2 * 1 s * 1000 qps = 2000, padded past a multiple of 64.
        assert_eq!(e.min_query_count, 2048);
    }

    #[test]
    fn inconsistent_requests_are_reported() {
        let mut req = requested(Scenario::Server);
        req.performance_issue_same = true;
        req.performance_issue_unique = true;
        req.performance_issue_same_index = 5000;
        let e = EffectiveSettings::new(&req, 1024, 4096);
        assert_eq!(e.problems.len(), 2);
    }
}
