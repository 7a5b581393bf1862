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
                let a = candidates[self.random_below(candidates.len())];
                let b = candidates[self.random_below(candidates.len())];
                Some(if outstanding[b] < outstanding[a] {
                    b
                } else {
                    a
                })
            }
        }
    }
}

/// Splits a query of `samples` samples into contiguous shares, one per
/// node in `nodes`, as even as possible (earlier nodes take the remainder).
/// Each share travels as one message of its own: a query is split, never
/// merged with another. Nodes that would get nothing are left out.
pub fn split(samples: usize, nodes: &[usize]) -> Vec<(usize, Range<usize>)> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let base = samples / nodes.len();
    let extra = samples % nodes.len();
    let mut start = 0;
    nodes
        .iter()
        .enumerate()
        .filter_map(|(i, &node)| {
            let len = base + usize::from(i < extra);
            let share = start..start + len;
            start += len;
            (len > 0).then_some((node, share))
        })
        .collect()
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
        // Chosen whenever it is one of the two candidates: about 5 in 9.
        assert!((480..640).contains(&to_idle), "{to_idle}");
    }

    #[test]
    fn split_covers_every_sample_once_in_order() {
        let shares = split(10, &[3, 5, 7]);
        assert_eq!(shares, vec![(3, 0..4), (5, 4..7), (7, 7..10)]);
        assert_eq!(split(2, &[0, 1, 2]), vec![(0, 0..1), (1, 1..2)]);
        assert!(split(5, &[]).is_empty());
        for n in 0..50 {
            let covered: usize = split(n, &[0, 1, 2, 3]).iter().map(|(_, r)| r.len()).sum();
            assert_eq!(covered, n);
        }
    }
}
