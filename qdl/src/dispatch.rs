//! Which node gets what. Pure decisions over counters the node pool keeps:
//! no clocks, no sockets.

use std::ops::Range;

/// How whole queries are assigned to nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchPolicy {
    /// Healthy nodes in turn.
    RoundRobin,
    /// The less loaded of two healthy nodes picked at random
    /// (power of two choices): near-best balance without scanning.
    LeastOutstanding,
}

impl std::str::FromStr for DispatchPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "round-robin" => Ok(Self::RoundRobin),
            "least-outstanding" => Ok(Self::LeastOutstanding),
            other => Err(format!(
                "unknown dispatch policy {other:?} (expected round-robin or least-outstanding)"
            )),
        }
    }
}

impl std::fmt::Display for DispatchPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::RoundRobin => "round-robin",
            Self::LeastOutstanding => "least-outstanding",
        })
    }
}

/// The state a policy needs between decisions.
#[derive(Debug)]
pub struct Dispatcher {
    policy: DispatchPolicy,
    next: usize,
    rng: u64,
}

impl Dispatcher {
    /// `seed` drives the random choices; any value works.
    pub fn new(policy: DispatchPolicy, seed: u64) -> Self {
        Self {
            policy,
            next: 0,
            rng: seed | 1,
        }
    }

    fn random_below(&mut self, n: usize) -> usize {
        // xorshift64: cheap, and only balance depends on it.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % n as u64) as usize
    }

    /// The node for the next query, given each node's outstanding samples
    /// and health; `None` when no node is healthy.
    pub fn pick(&mut self, outstanding: &[u64], healthy: &[bool]) -> Option<usize> {
        let candidates: Vec<usize> = (0..healthy.len()).filter(|&i| healthy[i]).collect();
        if candidates.is_empty() {
            return None;
        }
        match self.policy {
            DispatchPolicy::RoundRobin => {
                let pick = candidates[self.next % candidates.len()];
                self.next = self.next.wrapping_add(1);
                Some(pick)
            }
            DispatchPolicy::LeastOutstanding => {
                // Two distinct candidates, so with two nodes both are
                // always compared.
                let n = candidates.len();
                let first = self.random_below(n);
                let second = if n > 1 {
                    (first + 1 + self.random_below(n - 1)) % n
                } else {
                    first
                };
                let (a, b) = (candidates[first], candidates[second]);
                Some(if outstanding[b] < outstanding[a] {
                    b
                } else {
                    a
                })
            }
        }
    }
}

/// Cuts a query into pieces of consecutive samples: each at most
/// `max_samples` samples and, unless one sample alone is larger,
/// `max_bytes` bytes. `sizes` are the samples' wire sizes. Pieces go to
/// nodes one by one as the nodes have room, so a large (Offline) query is
/// spread over every node while a small one stays whole; pieces of two
/// queries are never merged.
pub fn pieces(sizes: &[u64], max_samples: usize, max_bytes: u64) -> Vec<Range<usize>> {
    let max_samples = max_samples.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, &size) in sizes.iter().enumerate() {
        let len = i - start;
        if len > 0 && (len == max_samples || bytes + size > max_bytes) {
            out.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_skips_unhealthy_nodes() {
        let mut d = Dispatcher::new(DispatchPolicy::RoundRobin, 1);
        let healthy = [true, false, true];
        let picks: Vec<usize> = (0..4)
            .map(|_| d.pick(&[0, 0, 0], &healthy).unwrap())
            .collect();
        assert_eq!(picks, [0, 2, 0, 2]);
        assert_eq!(d.pick(&[0, 0, 0], &[false, false, false]), None);
    }

    #[test]
    fn least_outstanding_favours_the_idle_node() {
        let mut d = Dispatcher::new(DispatchPolicy::LeastOutstanding, 42);
        let outstanding = [100, 0, 100];
        let to_idle = (0..1000)
            .filter(|_| d.pick(&outstanding, &[true; 3]) == Some(1))
            .count();
        // Chosen whenever it is one of the two distinct candidates: 2 in 3.
        assert!((600..730).contains(&to_idle), "{to_idle}");
        // With two nodes the less loaded one always wins.
        assert!((0..100).all(|_| d.pick(&[5, 3], &[true, true]) == Some(1)));
    }

    #[test]
    fn pieces_cover_every_sample_once_in_order_within_both_limits() {
        assert_eq!(pieces(&[1; 10], 4, 100), vec![0..4, 4..8, 8..10]);
        assert_eq!(
            pieces(&[40, 40, 40, 200, 1], 10, 100),
            vec![0..2, 2..3, 3..4, 4..5]
        );
        assert!(pieces(&[], 4, 100).is_empty());
        for n in 0..50 {
            let sizes: Vec<u64> = (0..n).map(|i| (i % 7) as u64 * 30).collect();
            let ps = pieces(&sizes, 5, 100);
            let mut next = 0;
            for p in &ps {
                assert_eq!(p.start, next);
                assert!(
                    p.len() <= 5 && (p.len() == 1 || sizes[p.clone()].iter().sum::<u64>() <= 100)
                );
                next = p.end;
            }
            assert_eq!(next, n);
        }
    }
}
