//! Per-node round-trip latency of samples (sent to the node until its
//! completion came back), as a fixed log-bucket histogram of atomics: one
//! relaxed add per sample, no allocation and no lock on the timed path.
//! Buckets split each power of two into 8 (about 9% wide), like an HDR
//! histogram with 3 significant bits.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two (a power of two itself).
const SUB: u64 = 8;
const SUB_BITS: u32 = SUB.trailing_zeros();
/// Powers of two covered: up to 2^40 us (12 days); longer ones go in the
/// last bucket.
const OCTAVES: u64 = 40;
const BUCKETS: usize = ((OCTAVES - SUB_BITS as u64 + 1) * SUB) as usize;

/// The bucket of `us`: values below [`SUB`] have one bucket each, then
/// each power of two has [`SUB`] equal ones.
fn bucket(us: u64) -> usize {
    if us < SUB {
        return us as usize;
    }
    let msb = 63 - us.leading_zeros();
    let sub = (us >> (msb - SUB_BITS)) & (SUB - 1);
    let index = (u64::from(msb - SUB_BITS) + 1) * SUB + sub;
    (index as usize).min(BUCKETS - 1)
}

/// The exclusive upper bound of bucket `i`, in microseconds.
fn upper_bound(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i + 1;
    }
    let shift = i / SUB - 1;
    let sub = i % SUB;
    ((SUB + sub) << shift) + (1 << shift)
}

/// Round trips of one node, counted as they complete.
pub(super) struct LatencyHistogram {
    count: AtomicU64,
    sum_us: AtomicU64,
    min_us: AtomicU64,
    max_us: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            min_us: AtomicU64::new(u64::MAX),
            max_us: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl LatencyHistogram {
    /// Counts one sample's round trip.
    pub(super) fn record(&self, us: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.min_us.fetch_min(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// The summary so far; percentiles are bucket bounds (within 1/8 of
    /// the true value), clamped to the largest value seen.
    pub(super) fn snapshot(&self) -> LatencySummary {
        let buckets: Vec<(u64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (upper_bound(i), b.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let count: u64 = buckets.iter().map(|(_, n)| n).sum();
        let max_us = self.max_us.load(Ordering::Relaxed);
        let percentile = |p: f64| {
            let rank = ((count as f64 * p).ceil() as u64).max(1);
            let mut seen = 0;
            for (upper, n) in &buckets {
                seen += n;
                if seen >= rank {
                    return (*upper).min(max_us);
                }
            }
            max_us
        };
        if count == 0 {
            return LatencySummary::default();
        }
        LatencySummary {
            count,
            mean_us: self.sum_us.load(Ordering::Relaxed)
                / self.count.load(Ordering::Relaxed).max(1),
            min_us: self.min_us.load(Ordering::Relaxed),
            max_us,
            p50_us: percentile(0.50),
            p90_us: percentile(0.90),
            p99_us: percentile(0.99),
            buckets,
        }
    }
}

/// One node's sample round trips: sent to the node until its completion
/// arrived, in microseconds (first tokens not counted; re-sent samples
/// count on the node that completed them, from their re-send).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LatencySummary {
    /// Completions timed.
    pub count: u64,
    /// Mean round trip.
    pub mean_us: u64,
    /// Shortest round trip.
    pub min_us: u64,
    /// Longest round trip.
    pub max_us: u64,
    /// Median (bucket bound).
    pub p50_us: u64,
    /// 90th percentile (bucket bound).
    pub p90_us: u64,
    /// 99th percentile (bucket bound).
    pub p99_us: u64,
    /// `(exclusive upper bound in us, completions)` of each non-empty
    /// bucket, in increasing order.
    pub buckets: Vec<(u64, u64)>,
}

impl LatencySummary {
    /// The share of the samples within `bound_us`: those in buckets wholly
    /// at or below it (a bucket straddling the bound counts as outside, so
    /// the share is never overstated; buckets are 1/8 of a power of two
    /// wide). `None` without samples.
    pub fn share_within(&self, bound_us: u64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let within: u64 = self
            .buckets
            .iter()
            .filter(|(upper, _)| *upper <= bound_us.saturating_add(1))
            .map(|(_, n)| n)
            .sum();
        Some(within as f64 / self.count as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_hold_their_values() {
        let mut previous_upper = 0;
        for i in 0..BUCKETS - 1 {
            let upper = upper_bound(i);
            assert!(upper > previous_upper, "bucket {i}");
            // The bucket's values are [previous upper, upper).
            assert_eq!(bucket(previous_upper), i, "lower end of {i}");
            assert_eq!(bucket(upper - 1), i, "upper end of {i}");
            previous_upper = upper;
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn the_summary_counts_and_bounds_the_percentiles() {
        let h = LatencyHistogram::default();
        assert_eq!(h.snapshot(), LatencySummary::default());
        for us in 1..=1000 {
            h.record(us);
        }
        let s = h.snapshot();
        assert_eq!(
            (s.count, s.min_us, s.max_us, s.mean_us),
            (1000, 1, 1000, 500)
        );
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), 1000);
        for (p, true_value) in [(s.p50_us, 500), (s.p90_us, 900), (s.p99_us, 990)] {
            assert!(
                p >= true_value && p <= true_value + true_value / 8,
                "{p} vs {true_value}"
            );
        }
    }

    #[test]
    fn the_share_within_a_bound_never_overstates() {
        let h = LatencyHistogram::default();
        assert_eq!(h.snapshot().share_within(100), None);
        for us in 1..=1000 {
            h.record(us);
        }
        let s = h.snapshot();
        assert_eq!(s.share_within(u64::MAX), Some(1.0));
        assert_eq!(s.share_within(0), Some(0.0));
        for bound in [7, 100, 500, 999] {
            let share = s.share_within(bound).unwrap();
            let truth = bound as f64 / 1000.0;
            assert!(
                share <= truth && share >= truth * 7.0 / 8.0 - 0.002,
                "{bound}: {share} vs {truth}"
            );
        }
    }
}
