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
    /// Token models: first-token latencies, times per output token and
    /// token counts.
    pub tokens: Option<TokenResults>,
}

/// What a run of a token model measured, per sample slot, as the official
/// LoadGen collects it: a list runs to the last slot that recorded a value,
/// with holes of `i64::MIN` (its `kInvalidLatency` and `nTokenInvalid`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenResults {
    /// Time to first token from the sample's scheduled time, in ns.
    pub first_token_latencies: Vec<i64>,
    /// (latency - time to first token) / (n_tokens - 1), in ns.
    pub time_per_output_token: Vec<i64>,
    /// `n_tokens` of each completed sample (0 where the SUT's count was
    /// refused).
    pub tokens_per_sample: Vec<i64>,
}

impl TokenResults {
    /// Tokens of every completed sample.
    pub fn token_count(&self) -> u64 {
        // Counts come from the SUT: wrap as upstream's size_t sum does.
        self.tokens_per_sample
            .iter()
            .filter(|&&n| n != i64::MIN)
            .fold(0u64, |sum, &n| sum.wrapping_add(n as u64))
    }
}

/// The percentiles every summary lists.
pub(super) const LATENCY_PERCENTILES: [f64; 6] = [0.50, 0.90, 0.95, 0.97, 0.99, 0.999];

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
        Self::of_sorted_over(sorted, sorted.len(), target_percentile)
    }

    /// Statistics of `sorted` with ranks and mean taken over `count`
    /// samples, as the official token statistics are (its sample count,
    /// not the list's length).
    fn of_sorted_over(sorted: &[i64], count: usize, target_percentile: f64) -> Self {
        if sorted.is_empty() || count == 0 {
            return Self::default();
        }
        let last = sorted.len() - 1;
        let at = |p: f64| sorted[((count as f64 * p) as usize).min(last)];
        let sum = sorted.iter().fold(0i64, |a, &l| a.wrapping_add(l));
        Self {
            min: sorted[0],
            max: sorted[last],
            // Upstream divides by a size_t, so a negative sum (time per
            // output token of a refused count) is divided unsigned.
            mean: ((sum as u64) / count as u64) as i64,
            target: at(target_percentile),
            percentiles: LATENCY_PERCENTILES.map(at),
        }
    }
}

/// The token results of a run (`use_token_latencies`), judged.
#[derive(Clone, Debug, Default)]
pub struct TokenSummary {
    /// Tokens of every completed sample.
    pub token_count: u64,
    /// Time to first token (all zero when no first token was recorded).
    pub first_token: LatencyStats,
    /// Time per output token (zero with the first token's).
    pub time_per_output_token: LatencyStats,
    /// Early stopping over the times to first token against the TTFT
    /// bound; not run (empty text) when the TPOT one failed, as upstream.
    pub early_stopping_ttft: EarlyStoppingResult,
    /// Early stopping over the times per output token against the TPOT
    /// bound.
    pub early_stopping_tpot: EarlyStoppingResult,
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
    /// true otherwise); for token models, TTFT and TPOT within theirs.
    pub perf_constraints_met: bool,
    /// What to change when the constraints are not met (Server).
    pub perf_constraints_recommendation: String,
    /// Token models: the token statistics and their early stopping.
    pub tokens: Option<TokenSummary>,
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
        let (tokens, early_stopping) = if settings.use_token_latencies {
            let (tokens, verdict) = token_summary(&settings, &mut result, sample_count as usize);
            (Some(tokens), verdict)
        } else {
            let verdict = early_stopping(
                &settings,
                result.queries_issued,
                &result.sample_latencies,
                &result.query_latencies,
                target_latency,
            );
            (None, verdict)
        };
        let perf_constraints_recommendation =
            perf_constraints(&settings, &samples, tokens.as_ref());
        let perf_constraints_met = perf_constraints_recommendation.is_empty();
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
            perf_constraints_recommendation,
            tokens,
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

/// Server: why the run misses its latency constraints, as the official
/// words it (empty when they are met, and in the other scenarios).
fn perf_constraints(
    settings: &EffectiveSettings,
    samples: &LatencyStats,
    tokens: Option<&TokenSummary>,
) -> String {
    if settings.scenario != Scenario::Server {
        return String::new();
    }
    const REDUCE: &str = "Reduce target QPS to improve latency.";
    let Some(tokens) = tokens else {
        return if samples.target > settings.target_latency_ns as i64 {
            REDUCE.into()
        } else {
            String::new()
        };
    };
    let req = &settings.requested;
    let mut why = String::new();
    if tokens.first_token.target > req.server_ttft_latency as i64 {
        why = format!("TTFT constrain not met: {REDUCE}");
    }
    if tokens.time_per_output_token.target > req.server_tpot_latency as i64 {
        if why.is_empty() {
            why = format!("TPOT constrain not met: {REDUCE}");
        } else {
            why.push_str(&format!("\n * TPOT constrain not met: {REDUCE}"));
        }
    }
    why
}

/// The token statistics (the official `ProcessTokenLatencies`) and the
/// early stopping of a token model: TPOT first, then, only if it passed,
/// TTFT, each against its Server bound.
fn token_summary(
    settings: &EffectiveSettings,
    result: &mut PerformanceResult,
    sample_count: usize,
) -> (TokenSummary, EarlyStoppingResult) {
    let mut measured = result.tokens.take().unwrap_or_default();
    let p = settings.target_latency_percentile;
    let mut summary = TokenSummary {
        token_count: measured.token_count(),
        ..Default::default()
    };
    // Upstream computes nothing else without first tokens (Offline SUTs
    // need not send them).
    if !measured.first_token_latencies.is_empty() {
        measured.first_token_latencies.sort_unstable();
        measured.time_per_output_token.sort_unstable();
        summary.first_token =
            LatencyStats::of_sorted_over(&measured.first_token_latencies, sample_count, p);
        summary.time_per_output_token =
            LatencyStats::of_sorted_over(&measured.time_per_output_token, sample_count, p);
    }
    let req = &settings.requested;
    let n = result.queries_issued;
    summary.early_stopping_tpot = early_stopping(
        settings,
        n,
        &measured.time_per_output_token,
        &result.query_latencies,
        req.server_tpot_latency as i64,
    );
    let mut verdict = summary.early_stopping_tpot.clone();
    if verdict.met {
        summary.early_stopping_ttft = early_stopping(
            settings,
            n,
            &measured.first_token_latencies,
            &result.query_latencies,
            req.server_ttft_latency as i64,
        );
        verdict = summary.early_stopping_ttft.clone();
    }
    verdict.text.clear();
    result.tokens = Some(measured);
    (summary, verdict)
}

/// The official `EarlyStopping` over `n` queries: `sorted` sample latencies
/// (SingleStream, and Server against `server_bound_ns`) or `queries`
/// latencies (MultiStream).
fn early_stopping(
    settings: &EffectiveSettings,
    n: u64,
    sorted: &[i64],
    queries: &[i64],
    server_bound_ns: i64,
) -> EarlyStoppingResult {
    let p = settings.target_latency_percentile;
    let pct = |p: f64| crate::engine::logs::format::fixed(p * 100.0, 1);
    match settings.scenario {
        Scenario::Offline => EarlyStoppingResult {
            met: true,
            ..Default::default()
        },
        Scenario::Server => {
            let overlatency = sorted.iter().filter(|&&l| l > server_bound_ns).count() as u64;
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
                sorted
            } else {
                queries
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
                    // A token list may be short of samples (a faulty SUT).
                    let estimate = sorted.get((n - t) as usize).copied().unwrap_or(0);
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
                        let estimate = sorted.get((n - t) as usize).copied().unwrap_or(0);
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

    fn token_server_settings(ttft_ms: u64, tpot_ms: u64) -> EffectiveSettings {
        let req = TestSettings {
            scenario: Scenario::Server,
            server_target_latency_ns: 0,
            min_duration_ms: 1000,
            min_query_count: 100,
            use_token_latencies: true,
            server_ttft_latency: ttft_ms * 1_000_000,
            server_tpot_latency: tpot_ms * 1_000_000,
            ..TestSettings::default()
        };
        EffectiveSettings::new(&req, 1024, 1024)
    }

    fn token_result(n: usize, ttft: i64, tpot: i64, tokens: i64) -> PerformanceResult {
        PerformanceResult {
            tokens: Some(TokenResults {
                first_token_latencies: vec![ttft; n],
                time_per_output_token: vec![tpot; n],
                tokens_per_sample: vec![tokens; n],
            }),
            ..server_result(vec![ttft + tpot * (tokens - 1); n])
        }
    }

    #[test]
    fn token_server_within_both_bounds_is_valid() {
        let s = PerformanceSummary::new(
            "x".into(),
            token_server_settings(2000, 200),
            token_result(1000, 5_000_000, 1_000_000, 10),
        );
        let tokens = s.tokens.as_ref().unwrap();
        assert_eq!(tokens.token_count, 10_000);
        assert_eq!(tokens.first_token.percentiles, [5_000_000; 6]);
        assert_eq!(tokens.time_per_output_token.mean, 1_000_000);
        assert_eq!(tokens.early_stopping_ttft.text, " * Run successful.");
        assert_eq!(tokens.early_stopping_tpot.text, " * Run successful.");
        // target_latency 0 puts every sample over the plain bound; only the
        // token bounds count.
        assert_eq!(s.overlatency_query_count, 1000);
        assert!(s.is_valid());
    }

    #[test]
    fn a_missed_tpot_bound_skips_ttft_early_stopping_and_names_both() {
        let s = PerformanceSummary::new(
            "x".into(),
            token_server_settings(1, 1),
            token_result(1000, 5_000_000, 3_000_000, 10),
        );
        let tokens = s.tokens.as_ref().unwrap();
        assert!(!s.early_stopping.met);
        assert!(tokens
            .early_stopping_tpot
            .text
            .starts_with(" * Run unsuccessful."));
        assert_eq!(tokens.early_stopping_ttft.text, "");
        assert_eq!(
            s.perf_constraints_recommendation,
            "TTFT constrain not met: Reduce target QPS to improve latency.\n * TPOT constrain not met: Reduce target QPS to improve latency."
        );
        assert!(!s.is_valid());
    }

    #[test]
    fn token_means_divide_unsigned_and_counts_wrap_like_upstream() {
        // Times per output token of refused counts are negative; upstream's
        // mean divides their sum as a size_t.
        let s = PerformanceSummary::new(
            "x".into(),
            token_server_settings(2000, 200),
            token_result(4, 1000, -6, 0),
        );
        let tokens = s.tokens.as_ref().unwrap();
        assert_eq!(
            tokens.time_per_output_token.mean,
            ((-24i64 as u64) / 4) as i64
        );
        assert_eq!(tokens.time_per_output_token.min, -6);
        let huge = TokenResults {
            tokens_per_sample: vec![i64::MAX, i64::MAX, 3, i64::MIN],
            ..TokenResults::default()
        };
        assert_eq!(
            huge.token_count(),
            (i64::MAX as u64).wrapping_mul(2).wrapping_add(3)
        );
    }

    #[test]
    fn token_statistics_rank_over_the_sample_count_even_when_a_list_is_short() {
        let sorted = [10, 20, 30];
        let st = LatencyStats::of_sorted_over(&sorted, 10, 0.9);
        // Rank 9 is past the list: its last value, never a panic.
        assert_eq!(st.target, 30);
        assert_eq!(st.mean, 6);
        assert_eq!(
            LatencyStats::of_sorted_over(&[], 10, 0.9),
            LatencyStats::default()
        );
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
