//! Turning one performance run's measurements into the numbers and verdict
//! the rules define: percentiles, throughput, early stopping and validity.

use crate::engine::early_stopping::MinPassingQueries;
use crate::engine::settings::{EffectiveSettings, Scenario};

/// What a performance run measured (times in seconds from the start).
#[derive(Clone, Debug, Default)]
pub struct PerformanceResult {
    /// One latency per issued sample, in ns.
    pub sample_latencies: Vec<i64>,
    /// MultiStream: one latency per issued query, in ns.
    pub query_latencies: Vec<i64>,
    /// Queries issued to the SUT.
    pub queries_issued: u64,
    /// The largest sample latency, in s (Offline's run length).
    pub max_latency: f64,
    /// When the last query was due by the generated schedule, in s.
    pub final_query_scheduled_time: f64,
    /// When the last query was issued, in s.
    pub final_query_issued_time: f64,
    /// When every sample of the last query had completed, in s.
    pub final_query_all_samples_done_time: f64,
}

/// The percentiles every summary lists.
pub const LATENCY_PERCENTILES: [f64; 6] = [0.50, 0.90, 0.95, 0.97, 0.99, 0.999];

/// Latency statistics over a sorted list (integer mean, as upstream).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyStats {
    /// Smallest latency, in ns.
    pub min: i64,
    /// Largest latency, in ns.
    pub max: i64,
    /// Mean latency, in ns, rounded down.
    pub mean: i64,
    /// Latency at the settings' target percentile, in ns.
    pub target: i64,
    /// Latency at each of [`LATENCY_PERCENTILES`], in ns.
    pub percentiles: [i64; 6],
}

impl LatencyStats {
    fn of_sorted(sorted: &[i64], target_percentile: f64) -> Self {
        if sorted.is_empty() {
            return Self::default();
        }
        let n = sorted.len();
        let at = |p: f64| sorted[((n as f64 * p) as usize).min(n - 1)];
        let sum: i64 = sorted.iter().sum();
        Self {
            min: sorted[0],
            max: sorted[n - 1],
            mean: sum / n as i64,
            target: at(target_percentile),
            percentiles: LATENCY_PERCENTILES.map(at),
        }
    }
}

/// The early-stopping verdict and its explanation.
#[derive(Clone, Debug, Default)]
pub struct EarlyStoppingResult {
    /// Enough queries were processed to pass early stopping (always true in
    /// Offline).
    pub met: bool,
    /// The official recommendation text, lines joined with '\n'.
    pub text: String,
    /// SingleStream: early-stopping estimate of the target-percentile
    /// latency, in ns (0 otherwise).
    pub latency_ss: i64,
    /// Early-stopping estimate for MultiStream (`ms`, not milliseconds), in
    /// ns: the target-percentile query latency in MultiStream, the
    /// 99th-percentile sample latency in SingleStream (0 otherwise).
    pub latency_ms: i64,
}

/// A performance run judged against its settings.
#[derive(Clone, Debug)]
pub struct PerformanceSummary {
    /// The name the SUT reported.
    pub sut_name: String,
    /// The settings the run used.
    pub settings: EffectiveSettings,
    /// The measurements, latencies sorted.
    pub result: PerformanceResult,
    /// Samples issued (each has a latency).
    pub sample_count: u64,
    /// Statistics of the sample latencies.
    pub samples: LatencyStats,
    /// Statistics of the query latencies (reported in MultiStream).
    pub queries: LatencyStats,
    /// Server: samples over the latency bound (0 otherwise).
    pub overlatency_query_count: u64,
    /// The early-stopping verdict.
    pub early_stopping: EarlyStoppingResult,
    /// The run lasted `min_duration_ms`, measured by the scenario's end
    /// time (largest latency in Offline, last scheduled time in Server, last
    /// issue otherwise).
    pub min_duration_met: bool,
    /// At least `min_query_count` queries and `min_sample_count` samples
    /// were issued.
    pub min_queries_met: bool,
    /// Server: the target-percentile latency is within the bound (always
    /// true otherwise).
    pub perf_constraints_met: bool,
}

impl PerformanceSummary {
    /// Judges `result` against `settings` (sorting its latencies).
    pub fn new(
        sut_name: String,
        settings: EffectiveSettings,
        mut result: PerformanceResult,
    ) -> Self {
        result.sample_latencies.sort_unstable();
        result.query_latencies.sort_unstable();
        let p = settings.target_latency_percentile;
        let samples = LatencyStats::of_sorted(&result.sample_latencies, p);
        let queries = LatencyStats::of_sorted(&result.query_latencies, p);
        let sample_count = result.sample_latencies.len() as u64;
        let target_latency = settings.target_latency_ns as i64;
        let overlatency_query_count = if settings.scenario == Scenario::Server {
            let first_over = result
                .sample_latencies
                .partition_point(|&l| l <= target_latency);
            (result.sample_latencies.len() - first_over) as u64
        } else {
            0
        };
        let min_duration_met = {
            let min = settings.min_duration_ms as f64 / 1000.0;
            match settings.scenario {
                Scenario::Offline => result.max_latency >= min,
                Scenario::Server => result.final_query_scheduled_time >= min,
                Scenario::SingleStream | Scenario::MultiStream => {
                    result.final_query_issued_time >= min
                }
            }
        };
        let min_queries_met = result.queries_issued >= settings.min_query_count
            && sample_count >= settings.min_sample_count;
        let perf_constraints_met =
            settings.scenario != Scenario::Server || samples.target <= target_latency;
        let early_stopping = early_stopping(&settings, &result, overlatency_query_count);
        Self {
            sut_name,
            settings,
            result,
            sample_count,
            samples,
            queries,
            overlatency_query_count,
            early_stopping,
            min_duration_met,
            min_queries_met,
            perf_constraints_met,
        }
    }

    /// VALID: every constraint and early stopping met.
    pub fn is_valid(&self) -> bool {
        self.min_duration_met
            && self.min_queries_met
            && self.perf_constraints_met
            && self.early_stopping.met
    }

    /// What to change when a constraint is not met, one line each.
    pub fn min_duration_recommendation(&self) -> &'static str {
        match self.settings.scenario {
            Scenario::SingleStream | Scenario::MultiStream => {
                "Decrease the expected latency so the loadgen pre-generates more queries."
            }
            Scenario::Server => {
                "Increase the target QPS so the loadgen pre-generates more queries."
            }
            Scenario::Offline => {
                "Increase expected QPS so the loadgen pre-generates a larger (coalesced) query."
            }
        }
    }

    /// What to change when the Server latency bound is missed.
    pub const PERF_CONSTRAINTS_RECOMMENDATION: &'static str =
        "Reduce target QPS to improve latency.";

    /// Samples per second in Offline.
    pub fn offline_samples_per_second(&self) -> f64 {
        self.sample_count as f64 / self.result.max_latency
    }

    /// Server: completed samples per second, over `[first, last)` issue.
    pub fn server_completed_per_second(&self) -> f64 {
        (self.sample_count as f64 - 1.0) / self.result.final_query_all_samples_done_time
    }

    /// Server: samples per second of the schedule, over `[first, last)`
    /// scheduled time.
    pub fn server_scheduled_per_second(&self) -> f64 {
        (self.sample_count as f64 - 1.0) / self.result.final_query_scheduled_time
    }

    /// SingleStream: queries per second including LoadGen overhead.
    pub fn qps_with_loadgen_overhead(&self) -> f64 {
        (self.sample_count as f64 - 1.0) / self.result.final_query_issued_time
    }

    /// SingleStream: queries per second from the mean sample latency alone.
    pub fn qps_without_loadgen_overhead(&self) -> f64 {
        1.0 / (self.samples.mean as f64 / 1e9)
    }
}

fn early_stopping(
    settings: &EffectiveSettings,
    result: &PerformanceResult,
    overlatency: u64,
) -> EarlyStoppingResult {
    let n = result.queries_issued;
    let p = settings.target_latency_percentile;
    let pct = |p: f64| crate::engine::logs::format::fixed(p * 100.0, 1);
    match settings.scenario {
        Scenario::Offline => EarlyStoppingResult {
            met: true,
            ..Default::default()
        },
        Scenario::Server => {
            let h = MinPassingQueries::new(p).min_passing(overlatency);
            if n >= h + overlatency {
                EarlyStoppingResult {
                    met: true,
                    text: " * Run successful.".into(),
                    ..Default::default()
                }
            } else {
                EarlyStoppingResult {
                    met: false,
                    text: format!(
                        " * Run unsuccessful.\n * Processed {n} queries.\n * Would need to run at least {} more queries,\n with the run being successful if every additional\n query were under latency.",
                        h + overlatency - n
                    ),
                    ..Default::default()
                }
            }
        }
        Scenario::SingleStream | Scenario::MultiStream => {
            let sorted = if settings.scenario == Scenario::SingleStream {
                &result.sample_latencies
            } else {
                &result.query_latencies
            };
            let mut out = EarlyStoppingResult::default();
            let mut finder = MinPassingQueries::new(p);
            match finder.estimate_rank(n) {
                Err(needed) => {
                    out.text = format!(
                        " * Only processed {n} queries.\n * Need to process at least {needed} queries for early stopping."
                    );
                    return out;
                }
                Ok(t) => {
                    let estimate = sorted[(n - t) as usize];
                    out.text = format!(
                        " * Processed at least {} queries ({n}).\n * Would discard {} highest latency queries.\n * Early stopping {}th percentile estimate: {estimate}",
                        finder.min_passing(1) + 1,
                        t - 1,
                        pct(p)
                    );
                    out.met = true;
                    if settings.scenario == Scenario::SingleStream {
                        out.latency_ss = estimate;
                    } else {
                        out.latency_ms = estimate;
                    }
                }
            }
            if settings.scenario == Scenario::SingleStream {
                // A 99th-percentile estimate, used to infer MultiStream.
                let mut finder = MinPassingQueries::new(0.99);
                match finder.estimate_rank(n) {
                    Err(needed) => out.text.push_str(&format!(
                        "\n * Not enough queries processed for {}th percentile\n early stopping estimate (would need to process at\n least {needed} total queries).",
                        pct(0.99)
                    )),
                    Ok(t) => {
                        let estimate = sorted[(n - t) as usize];
                        out.text.push_str(&format!(
                            "\n * Early stopping {}th percentile estimate: {estimate}",
                            pct(0.99)
                        ));
                        out.latency_ms = estimate;
                    }
                }
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::settings::TestSettings;

    fn server_settings(target_latency_ns: u64) -> EffectiveSettings {
        let req = TestSettings {
            scenario: Scenario::Server,
            server_target_latency_ns: target_latency_ns,
            min_duration_ms: 1000,
            min_query_count: 100,
            ..TestSettings::default()
        };
        EffectiveSettings::new(&req, 1024, 1024)
    }

    fn server_result(latencies: Vec<i64>) -> PerformanceResult {
        PerformanceResult {
            queries_issued: latencies.len() as u64,
            sample_latencies: latencies,
            final_query_scheduled_time: 1.5,
            final_query_all_samples_done_time: 1.5,
            max_latency: 0.01,
            ..Default::default()
        }
    }

    #[test]
    fn server_valid_when_under_latency_and_enough_queries() {
        let s = PerformanceSummary::new(
            "x".into(),
            server_settings(1000),
            server_result(vec![500; 1000]),
        );
        assert!(s.is_valid());
        assert_eq!(s.early_stopping.text, " * Run successful.");
        assert_eq!(s.samples.percentiles, [500; 6]);
    }

    #[test]
    fn server_early_stopping_fails_with_official_wording() {
        let mut lat = vec![500; 600];
        lat.extend([5000; 2]);
        let s = PerformanceSummary::new("x".into(), server_settings(1000), server_result(lat));
        assert_eq!(s.overlatency_query_count, 2);
        assert!(!s.early_stopping.met);
        assert!(s
            .early_stopping
            .text
            .starts_with(" * Run unsuccessful.\n * Processed 602 queries."));
        assert!(!s.is_valid());
    }

    #[test]
    fn percentiles_index_by_truncated_rank() {
        let sorted: Vec<i64> = (0..1000).collect();
        let st = LatencyStats::of_sorted(&sorted, 0.9);
        assert_eq!(st.target, 900);
        assert_eq!(st.percentiles, [500, 900, 950, 970, 990, 999]);
        assert_eq!(st.mean, 499);
    }
}
