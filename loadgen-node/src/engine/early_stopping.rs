//! Early stopping: how many queries a run needs, given how many were over
//! the latency bound, for the percentile estimate to hold with 99%
//! confidence. The numbers are the official ones; the incomplete beta
//! function comes from statrs.

use std::collections::HashMap;

use statrs::function::beta::beta_reg;

/// Confidence the official LoadGen requires.
pub(super) const CONFIDENCE: f64 = 0.99;

/// Odds of at most `t` over-latency queries among `h + t` when each is under
/// the bound with probability `p`: the regularized incomplete beta
/// `I_p(h, t + 1)`.
pub(super) fn odds(h: u64, t: u64, p: f64) -> f64 {
    beta_reg(h as f64, (t + 1) as f64, p)
}

/// Finds the smallest passing `h` for each `t`, remembering earlier answers
/// (one finder per percentile).
#[derive(Debug)]
pub(super) struct MinPassingQueries {
    percentile: f64,
    cache: HashMap<u64, u64>,
}

impl MinPassingQueries {
    /// A finder for the latency percentile `percentile`, as a fraction
    /// (0.90 = 90th).
    pub(super) fn new(percentile: f64) -> Self {
        Self {
            percentile,
            cache: HashMap::new(),
        }
    }

    /// The smallest `h` with `odds(h, t, p) < 1 - c`.
    pub(super) fn min_passing(&mut self, t: u64) -> u64 {
        if let Some(&h) = self.cache.get(&t) {
            return h;
        }
        let p = self.percentile;
        let passes = |h: u64| odds(h, t, p) < 1.0 - CONFIDENCE;
        // Odds fall as h grows: bracket by doubling, then bisect.
        let mut lo = 1u64;
        let mut hi = 1u64.max(t);
        while !passes(hi) {
            lo = hi + 1;
            hi *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if passes(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        self.cache.insert(t, lo);
        lo
    }

    /// SingleStream/MultiStream: `None` when fewer than the minimum were
    /// processed (with that minimum), else the number of queries `t` such
    /// that the estimate is the `t`-th highest latency.
    pub(super) fn estimate_rank(&mut self, n: u64) -> Result<u64, u64> {
        let h_min = self.min_passing(1);
        if n < h_min + 1 {
            return Err(h_min + 1);
        }
        // h(i) + i grows strictly with i, so the first i with
        // n < h(i) + i is found by bisection over [2, n].
        let (mut lo, mut hi) = (2u64, n.max(2));
        if n >= self.min_passing(hi) + hi {
            return Ok(hi);
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if n < self.min_passing(mid) + mid {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference numbers read from the official LoadGen.
    #[test]
    fn single_stream_reference_numbers() {
        let mut p90 = MinPassingQueries::new(0.90);
        assert_eq!(p90.estimate_rank(63), Err(64));
        assert!(p90.estimate_rank(64).is_ok());
        assert_eq!(p90.estimate_rank(1000).unwrap() - 1, 77);
        assert_eq!(p90.estimate_rank(10000).unwrap() - 1, 929);
        assert_eq!(p90.estimate_rank(24576).unwrap() - 1, 2347);
        assert_eq!(p90.estimate_rank(133699).unwrap() - 1, 13113);

        let mut p99 = MinPassingQueries::new(0.99);
        assert_eq!(p99.estimate_rank(661), Err(662));
        assert_eq!(p99.estimate_rank(1000).unwrap() - 1, 1);
        assert_eq!(p99.estimate_rank(10000).unwrap() - 1, 76);
        assert_eq!(p99.estimate_rank(68176).unwrap() - 1, 620);

        let mut p999 = MinPassingQueries::new(0.999);
        assert_eq!(p999.estimate_rank(6635), Err(6636));
    }

    #[test]
    fn server_queries_needed_per_overlatency_count() {
        let mut f = MinPassingQueries::new(0.99);
        let needed: Vec<u64> = [0u64, 1, 5, 10, 100]
            .iter()
            .map(|&t| f.min_passing(t) + t)
            .collect();
        assert_eq!(needed, [459, 662, 1307, 2010, 12571]);
    }
}
