//! Which node gets what. Pure decisions over counters the node pool keeps
//! (durations come in as numbers): no clocks, no sockets.

use std::ops::Range;

/// How whole queries are assigned to nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchPolicy {
    /// Healthy nodes in turn.
    RoundRobin,
    /// The less loaded of two healthy nodes picked at random
    /// (power of two choices): near-best balance without scanning.
    LeastOutstanding,
    /// The node that would finish its work soonest: each node's prompt
    /// tokens and running sequences ([`NodeLoad::work`]) over the rate it
    /// has shown, learned as the run goes; a node's window shrinks with
    /// its rate, so a slow node is not left holding a full window at the
    /// end. For token benchmarks.
    Tokens,
}

/// Tokens of decoding each running sequence stands for in
/// [`NodeLoad::work`]: its answer's length is unknown when it is sent, and
/// answers of the LLM benchmarks average a few hundred tokens.
pub const SEQUENCE_TOKENS: f64 = 256.0;

/// Seconds after which half of what a rate estimate has seen is forgotten,
/// so a node that slows down is seen within seconds.
pub const RATE_HALF_LIFE_SECS: f64 = 5.0;

/// The share of the window a node gets under the token-aware policy until
/// it has answered something and so has a rate.
pub const WARMUP_SHARE: f64 = 0.125;

/// What a node holds, as the policies weigh it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeLoad {
    /// Samples (sequences) sent and not yet answered.
    pub samples: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
}

impl NodeLoad {
    /// The work this stands for, in tokens: the prompts' tokens (token ids
    /// travel as 4-byte integers) and [`SEQUENCE_TOKENS`] per sequence.
    pub fn work(&self) -> f64 {
        self.bytes as f64 / 4.0 + self.samples as f64 * SEQUENCE_TOKENS
    }
}

/// A node's rate of work, learned from its answers: work done per second
/// it held work, with what it did long ago fading
/// ([`RATE_HALF_LIFE_SECS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RateEstimate {
    work: f64,
    secs: f64,
}

impl RateEstimate {
    /// `work` was answered over `secs` seconds during which the node held
    /// work.
    pub fn observe(&mut self, work: f64, secs: f64) {
        let secs = secs.max(0.0);
        let keep = (-secs / RATE_HALF_LIFE_SECS).exp2();
        self.work = self.work * keep + work;
        self.secs = self.secs * keep + secs;
    }

    /// Work per second, once there is any to go by.
    pub fn rate(&self) -> Option<f64> {
        (self.secs > 0.0 && self.work > 0.0).then(|| self.work / self.secs)
    }
}

impl std::str::FromStr for DispatchPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "round-robin" => Ok(Self::RoundRobin),
            "least-outstanding" => Ok(Self::LeastOutstanding),
            "tokens" => Ok(Self::Tokens),
            other => Err(format!(
                "unknown dispatch policy {other:?} (expected round-robin, least-outstanding \
                 or tokens)"
            )),
        }
    }
}

impl std::fmt::Display for DispatchPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::RoundRobin => "round-robin",
            Self::LeastOutstanding => "least-outstanding",
            Self::Tokens => "tokens",
        })
    }
}

/// The state a policy needs between decisions.
#[derive(Debug)]
pub struct Dispatcher {
    policy: DispatchPolicy,
    next: usize,
    rng: u64,
    /// Each node's rate (the token-aware policy's).
    rates: Vec<RateEstimate>,
}

impl Dispatcher {
    /// For `nodes` nodes; `seed` drives the random choices (any value
    /// works).
    pub fn new(policy: DispatchPolicy, nodes: usize, seed: u64) -> Self {
        Self {
            policy,
            next: 0,
            rng: seed | 1,
            rates: vec![RateEstimate::default(); nodes],
        }
    }

    /// `node` answered `done` over `secs` seconds in which it held work.
    pub fn observe(&mut self, node: usize, done: NodeLoad, secs: f64) {
        self.rates[node].observe(done.work(), secs);
    }

    /// `node` failed or came back: what it showed before says nothing of
    /// what it does now.
    pub fn forget(&mut self, node: usize) {
        self.rates[node] = RateEstimate::default();
    }

    /// Each node's rate, where the token-aware policy knows it; a node not
    /// yet measured counts at the mean of those that are (all alike before
    /// any is).
    fn rates(&self) -> Vec<f64> {
        let known: Vec<f64> = self.rates.iter().filter_map(RateEstimate::rate).collect();
        let mean = if known.is_empty() {
            1.0
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        self.rates
            .iter()
            .map(|r| r.rate().unwrap_or(mean))
            .collect()
    }

    /// The share of the window each node may fill: 1 for every node under
    /// the count-based policies. Under the token-aware one, a measured
    /// node's rate over the fastest node's, so each node's window drains
    /// in about the same time; a node not yet measured (at the start, or
    /// back after a failure) [`WARMUP_SHARE`], so an Offline query is not
    /// all handed out before any rate is known.
    pub fn window_shares(&self) -> Vec<f64> {
        if self.policy != DispatchPolicy::Tokens {
            return vec![1.0; self.rates.len()];
        }
        let fastest = self
            .rates
            .iter()
            .filter_map(RateEstimate::rate)
            .fold(0.0, f64::max);
        self.rates
            .iter()
            .map(|r| match r.rate() {
                Some(rate) if fastest > 0.0 => rate / fastest,
                _ => WARMUP_SHARE,
            })
            .collect()
    }

    fn random_below(&mut self, n: usize) -> usize {
        // xorshift64: cheap, and only balance depends on it.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % n as u64) as usize
    }

    /// The node for the next piece (`piece`: what it carries), given what
    /// each node holds and which may take more; `None` when none may.
    pub fn pick(&mut self, loads: &[NodeLoad], open: &[bool], piece: NodeLoad) -> Option<usize> {
        let candidates: Vec<usize> = (0..open.len()).filter(|&i| open[i]).collect();
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
                Some(if loads[b].samples < loads[a].samples {
                    b
                } else {
                    a
                })
            }
            DispatchPolicy::Tokens => {
                // Soonest done with the piece added; ties go round, so
                // equal nodes share evenly.
                let rates = self.rates();
                let finish = |i: usize| (loads[i].work() + piece.work()) / rates[i];
                let start = self.next % candidates.len();
                self.next = self.next.wrapping_add(1);
                candidates[start..]
                    .iter()
                    .chain(&candidates[..start])
                    .copied()
                    .min_by(|&a, &b| finish(a).total_cmp(&finish(b)))
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

    fn samples(n: u64) -> NodeLoad {
        NodeLoad {
            samples: n,
            bytes: 0,
        }
    }

    #[test]
    fn round_robin_skips_unhealthy_nodes() {
        let mut d = Dispatcher::new(DispatchPolicy::RoundRobin, 3, 1);
        let healthy = [true, false, true];
        let idle = [NodeLoad::default(); 3];
        let picks: Vec<usize> = (0..4)
            .map(|_| d.pick(&idle, &healthy, NodeLoad::default()).unwrap())
            .collect();
        assert_eq!(picks, [0, 2, 0, 2]);
        assert_eq!(
            d.pick(&idle, &[false, false, false], NodeLoad::default()),
            None
        );
    }

    #[test]
    fn least_outstanding_favours_the_idle_node() {
        let mut d = Dispatcher::new(DispatchPolicy::LeastOutstanding, 3, 42);
        let outstanding = [100, 0, 100].map(samples);
        let piece = samples(1);
        let to_idle = (0..1000)
            .filter(|_| d.pick(&outstanding, &[true; 3], piece) == Some(1))
            .count();
        // Chosen whenever it is one of the two distinct candidates: 2 in 3.
        assert!((600..730).contains(&to_idle), "{to_idle}");
        // With two nodes the less loaded one always wins.
        let two = [5, 3].map(samples);
        assert!((0..100).all(|_| d.pick(&two, &[true, true], piece) == Some(1)));
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

    /// A backlog of one-sample pieces run on nodes that each answer their
    /// samples one after another at `rates` (tokens per second), fed as
    /// the pool feeds nodes (window scaled by each node's share). Returns
    /// the time the last answer came and each node's tokens answered.
    fn run_backlog(policy: DispatchPolicy, rates: &[f64], prompts: &[u64]) -> (f64, Vec<f64>) {
        const WINDOW: f64 = 24.0;
        const STEP: f64 = 0.001;
        let n = rates.len();
        let mut d = Dispatcher::new(policy, n, 7);
        let mut queues: Vec<std::collections::VecDeque<(NodeLoad, f64)>> =
            vec![Default::default(); n];
        let mut busy_for = vec![0.0; n];
        let mut answered = vec![0.0; n];
        let mut next = 0;
        let mut t = 0.0;
        loop {
            let shares = d.window_shares();
            while next < prompts.len() {
                let loads: Vec<NodeLoad> = queues
                    .iter()
                    .map(|q| NodeLoad {
                        samples: q.len() as u64,
                        bytes: q.iter().map(|(s, _)| s.bytes).sum(),
                    })
                    .collect();
                let open: Vec<bool> = (0..n)
                    .map(|i| (queues[i].len() as f64) < (WINDOW * shares[i]).ceil().max(1.0))
                    .collect();
                let piece = NodeLoad {
                    samples: 1,
                    bytes: prompts[next] * 4,
                };
                let Some(node) = d.pick(&loads, &open, piece) else {
                    break;
                };
                queues[node].push_back((piece, piece.work()));
                next += 1;
            }
            if next == prompts.len() && queues.iter().all(|q| q.is_empty()) {
                return (t, answered);
            }
            t += STEP;
            for i in 0..n {
                let Some(head) = queues[i].front_mut() else {
                    continue;
                };
                busy_for[i] += STEP;
                head.1 -= rates[i] * STEP;
                if head.1 <= 0.0 {
                    let (done, _) = queues[i].pop_front().unwrap();
                    answered[i] += done.work();
                    d.observe(i, done, busy_for[i]);
                    busy_for[i] = 0.0;
                }
            }
        }
    }

    /// Prompt lengths from 8 to 1024 tokens, a fixed spread.
    fn prompts(count: usize) -> Vec<u64> {
        let mut x = 12345u64;
        (0..count)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                8 + (x >> 33) % 1017
            })
            .collect()
    }

    #[test]
    fn tokens_give_a_faster_node_proportionally_more_and_finish_near_the_ideal() {
        let rates = [40_000.0, 40_000.0, 40_000.0, 20_000.0];
        let prompts = prompts(600);
        let total: f64 = prompts
            .iter()
            .map(|&p| {
                NodeLoad {
                    samples: 1,
                    bytes: p * 4,
                }
                .work()
            })
            .sum();
        let ideal = total / rates.iter().sum::<f64>();
        let (tokens_time, answered) = run_backlog(DispatchPolicy::Tokens, &rates, &prompts);
        let (count_time, _) = run_backlog(DispatchPolicy::LeastOutstanding, &rates, &prompts);
        // The half-rate node did about half a fast node's work.
        let fast = answered[..3].iter().sum::<f64>() / 3.0;
        let ratio = answered[3] / fast;
        assert!((0.4..0.6).contains(&ratio), "slow/fast work {ratio:.2}");
        // Every sample was answered once: the work adds up.
        assert!((answered.iter().sum::<f64>() - total).abs() < 1.0);
        assert!(
            tokens_time < ideal * 1.08,
            "token-aware {tokens_time:.3} s against the ideal {ideal:.3} s"
        );
        assert!(
            tokens_time < count_time * 0.95,
            "token-aware {tokens_time:.3} s, least-outstanding {count_time:.3} s"
        );
    }

    #[test]
    fn tokens_avoid_a_node_with_a_long_prompt_queued() {
        let mut d = Dispatcher::new(DispatchPolicy::Tokens, 2, 1);
        // The same count of sequences; node 0's prompts are long.
        let loads = [
            NodeLoad {
                samples: 2,
                bytes: 4 * 2000,
            },
            NodeLoad {
                samples: 2,
                bytes: 4 * 40,
            },
        ];
        let piece = NodeLoad {
            samples: 1,
            bytes: 400,
        };
        assert!((0..20).all(|_| d.pick(&loads, &[true, true], piece) == Some(1)));
        // A count-based policy sees two alike nodes.
        let mut count = Dispatcher::new(DispatchPolicy::LeastOutstanding, 2, 1);
        let picks: Vec<_> = (0..20)
            .map(|_| count.pick(&loads, &[true, true], piece))
            .collect();
        assert!(picks.contains(&Some(0)));
    }

    #[test]
    fn tokens_learn_rates_and_forget_a_node_that_failed_or_rejoined() {
        let mut d = Dispatcher::new(DispatchPolicy::Tokens, 3, 1);
        // Before any answer every node counts alike, on a warm-up window.
        assert_eq!(d.window_shares(), vec![WARMUP_SHARE; 3]);
        let done = NodeLoad {
            samples: 1,
            bytes: 4 * 744,
        }; // 1000 tokens
        d.observe(0, done, 0.01); // 100k tokens/s
        d.observe(1, done, 0.04); // 25k tokens/s
        let shares = d.window_shares();
        assert_eq!(shares[0], 1.0);
        assert!((shares[1] - 0.25).abs() < 1e-9, "{shares:?}");
        // Node 2, not yet measured, is still warming up.
        assert_eq!(shares[2], WARMUP_SHARE);
        // Equal loads: the fast node first; a closed node never.
        let idle = [NodeLoad::default(); 3];
        assert_eq!(d.pick(&idle, &[true, true, true], done), Some(0));
        assert_eq!(d.pick(&idle, &[false, true, false], done), Some(1));
        assert_eq!(d.pick(&idle, &[false; 3], done), None);
        // Node 1 came back: it is measured afresh, not held to its past,
        // and picked as if at the mean rate of the others.
        d.forget(1);
        assert_eq!(d.window_shares()[1], WARMUP_SHARE);
        let loads = [
            NodeLoad {
                samples: 10,
                bytes: 0,
            },
            NodeLoad {
                samples: 4,
                bytes: 0,
            },
            NodeLoad {
                samples: 6,
                bytes: 0,
            },
        ];
        // Node 0 at 100k tokens/s; nodes 1 and 2, unmeasured, at the mean
        // of the measured (100k too): node 1, holding least, is soonest
        // done.
        assert_eq!(d.pick(&loads, &[true; 3], samples(1)), Some(1));
        // A node that slows down is seen: its old rate fades within
        // seconds, and the node now fastest has the whole window.
        d.observe(1, done, 0.04); // 25k tokens/s
        for _ in 0..50 {
            d.observe(0, done, 0.4); // now 2.5k tokens/s
        }
        let shares = d.window_shares();
        assert_eq!(shares[1], 1.0, "{shares:?}");
        assert!(shares[0] < 0.15, "{shares:?}");
    }

    #[test]
    fn the_token_policy_parses_and_prints_by_name() {
        assert_eq!(
            "tokens".parse::<DispatchPolicy>(),
            Ok(DispatchPolicy::Tokens)
        );
        assert_eq!(DispatchPolicy::Tokens.to_string(), "tokens");
        let e = "token".parse::<DispatchPolicy>().unwrap_err();
        assert!(
            e.contains("round-robin, least-outstanding or tokens"),
            "{e}"
        );
    }
}
