//! What the benchmark binaries (`src/bin/*`) share: the machine line of
//! their reports, the median of repeated runs, the search for the highest
//! VALID Server target ([`QpsSearch`]), the token figures of a run's
//! summary ([`token_measure`]), how fast one CPU copies out of memory
//! ([`copy_rate_from_memory`]), and how they end.

use anyhow::{Context, Result};

use crate::mlperf_logs::summary_value;
use crate::network_run::LoadgenRun;

/// The token figures of one LLM run's summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokenMeasure {
    /// Output tokens per second (Offline: the result; Server: completed).
    pub tokens_per_s: f64,
    /// Server only: TTFT and TPOT p50 and p99, in milliseconds.
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub tpot_p50_ms: f64,
    pub tpot_p99_ms: f64,
    /// Server only: completed samples per second.
    pub samples_per_s: f64,
    pub valid: bool,
}

/// Reads [`TokenMeasure`] from `run`'s summary, after checking that it
/// ended well.
pub fn token_measure(run: &LoadgenRun, scenario: &str) -> Result<TokenMeasure> {
    run.expect_success()?;
    let summary = run.summary()?;
    let number = |label: &str| -> Result<f64> {
        summary_value(&summary, label)
            .with_context(|| format!("no {label:?} in the summary:\n{summary}"))?
            .parse::<f64>()
            .with_context(|| format!("{label:?} is not a number"))
    };
    let valid = crate::mlperf_logs::says_valid(&summary);
    if scenario == "Offline" {
        return Ok(TokenMeasure {
            tokens_per_s: number("Tokens per second")?,
            valid,
            ..TokenMeasure::default()
        });
    }
    Ok(TokenMeasure {
        tokens_per_s: number("Completed tokens per second")?,
        ttft_p50_ms: number("50.00 percentile first token latency (ns)")? / 1e6,
        tpot_p50_ms: number("50.00 percentile time to output token (ns)")? / 1e6,
        ttft_p99_ms: number("99.00 percentile first token latency (ns)")? / 1e6,
        tpot_p99_ms: number("99.00 percentile time to output token (ns)")? / 1e6,
        samples_per_s: number("Completed samples per second")?,
        valid,
    })
}

/// How fast one CPU copies a set of `set_bytes` out of memory, in GB/s: 1
/// MiB at a time into one small buffer that stays in cache, pass after
/// pass for at least `at_least`, as a sender reads the samples a QSL holds.
/// A set larger than the caches measures what the memory gives one CPU:
/// the most any sender can read samples at that are not in cache.
pub fn copy_rate_from_memory(set_bytes: u64, at_least: std::time::Duration) -> f64 {
    const PIECE: usize = 1 << 20;
    let len = usize::try_from(set_bytes).unwrap_or(usize::MAX).max(PIECE);
    // Filled with a non-zero byte, so every page is really there.
    let set = vec![1u8; len];
    let mut piece = vec![0u8; PIECE];
    let start = std::time::Instant::now();
    let mut copied = 0u64;
    while start.elapsed() < at_least {
        for chunk in set.chunks(PIECE) {
            piece[..chunk.len()].copy_from_slice(chunk);
            // Keeps the compiler from dropping a copy nothing reads.
            std::hint::black_box(&mut piece);
        }
        copied += len as u64;
    }
    copied as f64 / start.elapsed().as_secs_f64() / 1e9
}

/// One line naming the CPU, how many CPUs this process may use and the
/// kernel, for benchmark reports.
pub fn machine_description() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("Machine: {cpu}, {cpus} CPUs available, Linux {kernel}.")
}

/// The median of `values` (mean of the middle two for an even count); NaN
/// when empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// A benchmark binary's ending: its report on stdout, or its error on
/// stderr and a failing exit status.
pub fn finish_benchmark(name: &str, report: Result<String>) -> std::process::ExitCode {
    match report {
        Ok(text) => {
            print!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The search for the highest VALID Server target QPS, one probe at a
/// time (so a caller can interleave searches, e.g. one per transport):
/// doubling from the start while VALID (halving while INVALID), then
/// bisecting between the highest VALID and the lowest INVALID probe until
/// they are within `resolution` of each other, or `max_probes` are spent.
#[derive(Clone, Debug)]
pub struct QpsSearch {
    /// Highest VALID probe so far.
    pub valid: Option<u64>,
    /// Lowest INVALID probe so far.
    pub invalid: Option<u64>,
    next: Option<u64>,
    probes: usize,
    resolution: f64,
    max_probes: usize,
}

/// Below this a search gives up: the SUT is not VALID at any rate worth
/// probing.
const QPS_SEARCH_FLOOR: u64 = 100;

impl QpsSearch {
    /// A search that starts at `start` QPS.
    pub fn new(start: u64, resolution: f64, max_probes: usize) -> QpsSearch {
        QpsSearch {
            valid: None,
            invalid: None,
            next: (start > 0 && max_probes > 0).then_some(start),
            probes: 0,
            resolution,
            max_probes,
        }
    }

    /// The next target to probe; `None` once the search is done.
    pub fn next(&self) -> Option<u64> {
        self.next
    }

    /// Probes made so far.
    pub fn probes(&self) -> usize {
        self.probes
    }

    /// Records whether `qps` was VALID and picks the next probe.
    pub fn record(&mut self, qps: u64, valid: bool) {
        self.probes += 1;
        if valid {
            self.valid = Some(self.valid.map_or(qps, |v| v.max(qps)));
        } else {
            self.invalid = Some(self.invalid.map_or(qps, |i| i.min(qps)));
        }
        self.next = match (self.valid, self.invalid) {
            _ if self.probes >= self.max_probes => None,
            (Some(low), None) => Some(low.saturating_mul(2)),
            (None, Some(high)) => Some(high / 2).filter(|&q| q >= QPS_SEARCH_FLOOR),
            (Some(low), Some(high)) => {
                let mid = low + (high - low) / 2;
                let close = (high - low) as f64 <= self.resolution * low as f64;
                (!close && mid > low).then_some(mid)
            }
            (None, None) => unreachable!("a probe was recorded"),
        };
    }

    /// Stops the search (e.g. the next probe would not fit in memory).
    pub fn stop(&mut self) {
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a SUT that is VALID up to `capacity`.
    fn search(start: u64, capacity: u64) -> (QpsSearch, Vec<u64>) {
        let mut s = QpsSearch::new(start, 0.05, 30);
        let mut probed = Vec::new();
        while let Some(qps) = s.next() {
            probed.push(qps);
            s.record(qps, qps <= capacity);
        }
        (s, probed)
    }

    #[test]
    fn doubles_then_bisects_to_the_resolution() {
        let (s, probed) = search(100_000, 530_000);
        assert_eq!(&probed[..4], &[100_000, 200_000, 400_000, 800_000]);
        let (low, high) = (s.valid.unwrap(), s.invalid.unwrap());
        assert!(low <= 530_000 && high > 530_000, "{low} {high}");
        assert!((high - low) as f64 <= 0.05 * low as f64, "{low} {high}");
    }

    #[test]
    fn halves_when_the_start_is_too_high_and_gives_up_at_the_floor() {
        let (s, probed) = search(100_000, 30_000);
        assert_eq!(&probed[..3], &[100_000, 50_000, 25_000]);
        assert!(s.valid.unwrap() <= 30_000 && s.invalid.unwrap() > 30_000);
        let (s, _) = search(100_000, 0);
        assert_eq!((s.valid, s.next()), (None, None));
    }

    #[test]
    fn stops_after_max_probes() {
        let mut s = QpsSearch::new(1000, 0.0, 2);
        s.record(1000, true);
        assert_eq!(s.next(), Some(2000));
        s.record(2000, true);
        assert_eq!((s.next(), s.probes()), (None, 2));
    }

    #[test]
    fn median_of_three_and_four() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
