//! Which node gets what. Pure decisions over counters the node pool keeps
//! (durations come in as numbers): no clocks, no sockets.

mod first_token;

use std::ops::Range;

pub(crate) use first_token::{FirstToken, FirstTokenFit};

/// How whole queries are assigned to nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchPolicy {
    /// Healthy nodes in turn.
    RoundRobin,
    /// The less loaded of two healthy nodes picked at random
    /// (power of two choices): near-best balance without scanning.
    LeastOutstanding,
    /// Where a node can start the piece at once, the one whose first
    /// token would come soonest (its recent first-token times fitted
    /// against the prompt tokens prefilled with or before each sample,
    /// read at the prompts it has not started plus the piece's); else the
    /// node that would finish its work soonest: each node's prompt tokens
    /// and running sequences ([`NodeLoad::work`]) over the speed each of
    /// its sequences has shown, learned as the run goes. A node's window
    /// shrinks with its throughput, so a slow node is not left holding a
    /// full window at the end. For token benchmarks.
    Tokens,
}

/// Tokens of decoding each running sequence stands for in
/// [`NodeLoad::work`]: its answer's length is unknown when it is sent, and
/// answers of the LLM benchmarks average a few hundred tokens.
pub(crate) const SEQUENCE_TOKENS: f64 = 256.0;

/// Seconds after which half of what a rate estimate has seen is forgotten,
/// so a node that slows down is seen within seconds.
pub(crate) const RATE_HALF_LIFE_SECS: f64 = 5.0;

/// The share of the window a node gets under the token-aware policy until
/// it has answered something and so has a rate.
pub(crate) const WARMUP_SHARE: f64 = 0.125;

/// First tokens after which the most sequences any node has been seen
/// running counts as how many a node can run: until it has stood that
/// long the fleet is still filling, and a node running the most it has
/// run may well run more.
pub(crate) const RUNS_SETTLE_FIRST_TOKENS: u64 = 256;

/// How much faster per sequence than a node another must be for
/// [`Dispatcher::leaves_for_faster`] to count it: equal nodes measured a
/// little apart do not hold work back from each other.
pub(crate) const FASTER_BY: f64 = 1.1;

/// What a node holds, as the policies weigh it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeLoad {
    /// Samples (sequences) sent and not yet answered.
    pub samples: u64,
    /// The bytes on the wire of those not yet started (no first token
    /// yet): prompts still to be prefilled, which delay the first token of
    /// whatever is sent next.
    pub bytes: u64,
    /// Of `samples`, those whose first token came: running, past the
    /// node's queue (0 where answers have no first token).
    pub started: u64,
}

impl NodeLoad {
    /// The work this stands for, in tokens: the prompts' tokens (token ids
    /// travel as 4-byte integers) and [`SEQUENCE_TOKENS`] per sequence.
    pub(crate) fn work(&self) -> f64 {
        self.bytes as f64 / 4.0 + self.samples as f64 * SEQUENCE_TOKENS
    }
}

/// A rate learned from a node's answers: work done per second of
/// something (the seconds it held work, or the seconds its sequences were
/// held), with what it did long ago fading ([`RATE_HALF_LIFE_SECS`] of
/// the run's time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RateEstimate {
    work: f64,
    secs: f64,
}

impl RateEstimate {
    /// `work` was answered over `secs` seconds of what is measured, within
    /// `elapsed` seconds of the run.
    pub(crate) fn observe(&mut self, work: f64, secs: f64, elapsed: f64) {
        let keep = (-elapsed.max(0.0) / RATE_HALF_LIFE_SECS).exp2();
        self.work = self.work * keep + work;
        self.secs = self.secs * keep + secs.max(0.0);
    }

    /// Work per second, once there is any to go by.
    pub(crate) fn rate(&self) -> Option<f64> {
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

/// The nodes that may take the next piece. The pool keeps it up to date
/// one node at a time, as that node's load or health changes, so a pick
/// costs the same with 2 nodes as with 1,024; rebuilding it for every
/// piece cost the LoadGen node more than half an Offline run's rate at
/// 1,024 nodes (docs/benchmarks.md, "A fleet behind one LoadGen node").
#[derive(Clone, Debug, Default)]
pub(crate) struct OpenNodes {
    /// Whether each node is in the set.
    member: Vec<bool>,
    /// The members, in no particular order.
    list: Vec<usize>,
    /// Each member's place in `list`.
    place: Vec<usize>,
}

impl OpenNodes {
    /// An empty set over `nodes` nodes.
    pub(crate) fn new(nodes: usize) -> Self {
        Self {
            member: vec![false; nodes],
            list: Vec::with_capacity(nodes),
            place: vec![0; nodes],
        }
    }

    /// Puts `node` in the set or takes it out.
    pub(crate) fn set(&mut self, node: usize, open: bool) {
        if self.member[node] == open {
            return;
        }
        self.member[node] = open;
        if open {
            self.place[node] = self.list.len();
            self.list.push(node);
        } else {
            let at = self.place[node];
            self.list.swap_remove(at);
            if let Some(&moved) = self.list.get(at) {
                self.place[moved] = at;
            }
        }
    }

    /// How many nodes are in the set.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The members in node order (for the policies whose ties go round
    /// the nodes in order).
    pub(crate) fn in_order(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.member.len()).filter(|&i| self.member[i])
    }
}

/// The state a policy needs between decisions.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    policy: DispatchPolicy,
    next: usize,
    rng: u64,
    /// Each node's throughput: work per second it held work (the
    /// token-aware policy's window shares).
    rates: Vec<RateEstimate>,
    /// Each node's window share ([`Dispatcher::window_shares`]).
    shares: Vec<f64>,
    /// The most sequences each node has been seen running at once (0:
    /// not seen yet); the largest of them is how many a node of the fleet
    /// runs side by side, as far as the run has shown.
    seen_running: Vec<u64>,
    /// First tokens since the largest of `seen_running` last grew.
    runs_settled_for: u64,
    /// Each node's speed per sequence: work per second of each sample
    /// held, from sending to answer (the token-aware policy's picks).
    /// Unlike throughput it does not grow with what a node is given, so
    /// a node that holds more (a serving engine runs its sequences side by
    /// side) does not look faster and draw still more; and a node whose
    /// samples wait in its queue looks slower, and draws less.
    speeds: Vec<RateEstimate>,
    /// [`Dispatcher::speeds`] as the picks read it, kept up to date with
    /// the shares, so a pick allocates nothing.
    pick_speeds: Vec<f64>,
    /// Each node's recent times from sending a sample to its first token,
    /// fitted against the prompt tokens it prefilled with or before the
    /// sample. Where a piece can start at once, the token-aware policy
    /// picks by it: a node with longer steps (slower, or busier) shows it
    /// here first.
    first_tokens: Vec<FirstTokenFit>,
    /// Each node's window is what it runs at once (its Info said so): no
    /// node queues what it is sent, so neither the share of a window nor
    /// the count of sequences seen running limits a node.
    capacity_windows: bool,
}

/// How long a node held what it answered, for [`Dispatcher::observe`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Held {
    /// Seconds since it last answered or, if it was idle, since it was
    /// sent work.
    pub busy_secs: f64,
    /// The seconds each sample it held in that time was held, summed.
    pub sequence_secs: f64,
}

impl Dispatcher {
    /// For `nodes` nodes; `seed` drives the random choices (any value
    /// works).
    pub(crate) fn new(policy: DispatchPolicy, nodes: usize, seed: u64) -> Self {
        let mut dispatcher = Self {
            policy,
            next: 0,
            rng: seed | 1,
            rates: vec![RateEstimate::default(); nodes],
            shares: vec![1.0; nodes],
            seen_running: vec![0; nodes],
            runs_settled_for: 0,
            speeds: vec![RateEstimate::default(); nodes],
            pick_speeds: vec![1.0; nodes],
            first_tokens: vec![FirstTokenFit::default(); nodes],
            capacity_windows: false,
        };
        dispatcher.refresh();
        dispatcher
    }

    /// Each node's window is now what it runs side by side: every node
    /// fills its whole window from the start (a share of it would hold an
    /// Offline run's first answers to a fraction of the nodes' sequences,
    /// for minutes when answers are long), and none is taken for a node
    /// that would queue.
    pub(crate) fn windows_are_capacity(&mut self) {
        self.capacity_windows = true;
        self.refresh();
    }

    /// `node` answered `done`, having held work as `held` says.
    pub(crate) fn observe(&mut self, node: usize, done: NodeLoad, held: Held) {
        let work = done.work();
        self.rates[node].observe(work, held.busy_secs, held.busy_secs);
        self.speeds[node].observe(work, held.sequence_secs, held.busy_secs);
        self.refresh();
    }

    /// A sample's first token came from `node`.
    pub(crate) fn observe_first_token(&mut self, node: usize, first: FirstToken) {
        self.first_tokens[node].observe(first);
        self.runs_settled_for = self.runs_settled_for.saturating_add(1);
    }

    /// `node` failed or came back: what it showed before says nothing of
    /// what it does now.
    pub(crate) fn forget(&mut self, node: usize) {
        self.first_tokens[node] = FirstTokenFit::default();
        self.rates[node] = RateEstimate::default();
        self.speeds[node] = RateEstimate::default();
        self.seen_running[node] = 0;
        self.refresh();
    }

    /// Sets each node's speed per sequence for the picks, where the
    /// token-aware policy knows it; a node not yet measured counts at the
    /// mean of those that are (all alike before any is).
    fn refresh_speeds(&mut self) {
        let (sum, count) = self
            .speeds
            .iter()
            .filter_map(RateEstimate::rate)
            .fold((0.0, 0usize), |(sum, n), rate| (sum + rate, n + 1));
        let mean = if count == 0 { 1.0 } else { sum / count as f64 };
        for (speed, r) in self.pick_speeds.iter_mut().zip(&self.speeds) {
            *speed = r.rate().unwrap_or(mean);
        }
    }

    /// The share of the window each node may fill: 1 for every node under
    /// the count-based policies. Under the token-aware one, a measured
    /// node's rate over the fastest node's, so each node's window drains
    /// in about the same time; a node not yet measured (at the start, or
    /// back after a failure) [`WARMUP_SHARE`], so an Offline query is not
    /// all handed out before any rate is known. Kept up to date by
    /// [`Dispatcher::observe`] and [`Dispatcher::forget`], so reading it
    /// costs nothing per decision.
    pub(crate) fn window_shares(&self) -> &[f64] {
        &self.shares
    }

    /// Whether a node's window share moves with what any node answers
    /// (the token-aware policy before windows are capacities); else every
    /// share stays 1.
    pub(crate) fn shares_follow_rates(&self) -> bool {
        self.policy == DispatchPolicy::Tokens && !self.capacity_windows
    }

    /// Brings the window shares and the picks' speeds up to date after a
    /// node's rates changed.
    fn refresh(&mut self) {
        if self.policy != DispatchPolicy::Tokens {
            return;
        }
        self.refresh_speeds();
        if self.capacity_windows {
            self.shares.fill(1.0);
            return;
        }
        let fastest = self
            .rates
            .iter()
            .filter_map(RateEstimate::rate)
            .fold(0.0, f64::max);
        for (share, r) in self.shares.iter_mut().zip(&self.rates) {
            *share = match r.rate() {
                Some(rate) if fastest > 0.0 => rate / fastest,
                _ => WARMUP_SHARE,
            };
        }
    }

    /// When the piece's first token would come on each node: the node's
    /// fitted first-token time at the prompt tokens it has not started
    /// plus the piece's, since a serving engine prefills those before or
    /// beside the piece (where the node has shown none yet, the mean of
    /// the others' at the same tokens).
    fn first_token_estimates<'a>(
        &'a self,
        loads: &'a [NodeLoad],
        piece: NodeLoad,
    ) -> impl Fn(usize) -> f64 + 'a {
        let piece_tokens = piece.bytes as f64 / 4.0;
        move |i| {
            let tokens = loads[i].bytes as f64 / 4.0 + piece_tokens;
            self.first_tokens[i].predict(tokens).unwrap_or_else(|| {
                let (sum, count) = self
                    .first_tokens
                    .iter()
                    .filter_map(|fit| fit.predict(tokens))
                    .fold((0.0, 0usize), |(sum, n), secs| (sum + secs, n + 1));
                if count == 0 {
                    1.0
                } else {
                    sum / count as f64
                }
            })
        }
    }

    /// The end of a bulk (Offline) query: whether `node` should leave the
    /// next sample to nodes faster per sequence than itself, because they
    /// would finish every sample still queued (`queued`, this one
    /// included) and then this one sooner than `node` would finish it
    /// alone. Under a long queue a slower node takes its share (it adds
    /// to the fleet's rate); near the end it stops taking samples that
    /// would outlast the fast nodes' work. Speeds are per sequence, so
    /// the answers' unknown length cancels: the queue over the faster
    /// nodes' summed capacity times speed, plus one over the fastest
    /// speed, against one over this node's speed. Only with windows sized
    /// by the nodes' sequences (`capacities`), under the token-aware
    /// policy, once speeds are measured.
    pub(crate) fn leaves_for_faster(
        &self,
        node: usize,
        healthy: &[bool],
        capacities: &[u64],
        queued: u64,
    ) -> bool {
        if !self.capacity_windows || self.policy != DispatchPolicy::Tokens {
            return false;
        }
        let Some(own) = self.speeds[node].rate() else {
            return false;
        };
        let (mut fleet, mut fastest) = (0.0, 0.0f64);
        for (j, speed) in self.speeds.iter().enumerate() {
            let Some(speed) = speed.rate().filter(|&s| s > own * FASTER_BY) else {
                continue;
            };
            if j != node && healthy[j] {
                fleet += capacities[j] as f64 * speed;
                fastest = fastest.max(speed);
            }
        }
        fleet > 0.0 && queued as f64 / fleet + 1.0 / fastest < 1.0 / own
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
    pub(crate) fn pick(
        &mut self,
        loads: &[NodeLoad],
        open: &OpenNodes,
        piece: NodeLoad,
    ) -> Option<usize> {
        if open.len() == 0 {
            return None;
        }
        match self.policy {
            DispatchPolicy::RoundRobin => {
                let turn = self.next % open.len();
                self.next = self.next.wrapping_add(1);
                open.in_order().nth(turn)
            }
            DispatchPolicy::LeastOutstanding => {
                // Two distinct candidates, so with two nodes both are
                // always compared; drawn from the set's list, so the
                // pick reads two nodes however many there are.
                let n = open.len();
                let first = self.random_below(n);
                let second = if n > 1 {
                    (first + 1 + self.random_below(n - 1)) % n
                } else {
                    first
                };
                let (a, b) = (open.list[first], open.list[second]);
                Some(if loads[b].samples < loads[a].samples {
                    b
                } else {
                    a
                })
            }
            DispatchPolicy::Tokens => {
                // Every node is weighed: token models send a sample at a
                // time to nodes that hold it for seconds.
                let candidates: Vec<usize> = open.in_order().collect();
                let fleet_ran = self.seen_running.iter().copied().max().unwrap_or(0);
                for &i in &candidates {
                    let seen = &mut self.seen_running[i];
                    *seen = (*seen).max(loads[i].started);
                }
                let fleet_runs = self.seen_running.iter().copied().max().unwrap_or(0);
                if fleet_runs > fleet_ran {
                    self.runs_settled_for = 0;
                }
                let settled = self.runs_settled_for >= RUNS_SETTLE_FIRST_TOKENS;
                // A node that would have to queue the piece (it holds as
                // many as any node has been seen running: a fleet runs one
                // engine configuration, and a node lightly used has not
                // shown how many it can run; one more, to try, until that
                // count has settled) only if every node would. Among
                // nodes that can start it at once, the one whose first
                // token would come soonest; among nodes that would queue
                // it, and between nodes alike so far, the one soonest done
                // with it added. Ties go round, so equal nodes share
                // evenly.
                let start = self.next % candidates.len();
                self.next = self.next.wrapping_add(1);
                let speeds = &self.pick_speeds;
                let room = fleet_runs + u64::from(!settled);
                let capacity_windows = self.capacity_windows;
                let queues = |i: usize| {
                    !capacity_windows && fleet_runs > 0 && loads[i].samples + piece.samples > room
                };
                let finish = |i: usize| (loads[i].work() + piece.work()) / speeds[i];
                let first_token = self.first_token_estimates(loads, piece);
                candidates[start..]
                    .iter()
                    .chain(&candidates[..start])
                    .copied()
                    .map(|i| {
                        let queued = queues(i);
                        let soonest = if queued { finish(i) } else { first_token(i) };
                        (i, queued, soonest, finish(i))
                    })
                    .min_by(|a, b| {
                        a.1.cmp(&b.1)
                            .then(a.2.total_cmp(&b.2))
                            .then(a.3.total_cmp(&b.3))
                    })
                    .map(|(i, ..)| i)
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
pub(crate) fn pieces(sizes: &[u64], max_samples: usize, max_bytes: u64) -> Vec<Range<usize>> {
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

    /// A node that held one sample for `secs` and answered it.
    fn held(secs: f64) -> Held {
        Held {
            busy_secs: secs,
            sequence_secs: secs,
        }
    }

    /// The set of the nodes whose flag is set.
    fn open(flags: &[bool]) -> OpenNodes {
        let mut open = OpenNodes::new(flags.len());
        for (node, &flag) in flags.iter().enumerate() {
            open.set(node, flag);
        }
        open
    }

    fn samples(n: u64) -> NodeLoad {
        NodeLoad {
            samples: n,
            ..NodeLoad::default()
        }
    }

    #[test]
    fn open_nodes_track_members_through_any_order_of_changes() {
        let mut set = OpenNodes::new(5);
        let mut flags = [false; 5];
        let mut x = 7u64;
        for _ in 0..200 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let (node, on) = ((x >> 33) as usize % 5, (x >> 40).is_multiple_of(2));
            set.set(node, on);
            flags[node] = on;
            let mut members = set.list.clone();
            members.sort_unstable();
            let expected: Vec<usize> = (0..5).filter(|&i| flags[i]).collect();
            assert_eq!(members, expected);
            assert_eq!(set.in_order().collect::<Vec<_>>(), expected);
        }
    }

    #[test]
    fn round_robin_skips_unhealthy_nodes() {
        let mut d = Dispatcher::new(DispatchPolicy::RoundRobin, 3, 1);
        let healthy = [true, false, true];
        let idle = [NodeLoad::default(); 3];
        let picks: Vec<usize> = (0..4)
            .map(|_| d.pick(&idle, &open(&healthy), NodeLoad::default()).unwrap())
            .collect();
        assert_eq!(picks, [0, 2, 0, 2]);
        assert_eq!(
            d.pick(&idle, &open(&[false, false, false]), NodeLoad::default()),
            None
        );
    }

    #[test]
    fn least_outstanding_favours_the_idle_node() {
        let mut d = Dispatcher::new(DispatchPolicy::LeastOutstanding, 3, 42);
        let outstanding = [100, 0, 100].map(samples);
        let piece = samples(1);
        let to_idle = (0..1000)
            .filter(|_| d.pick(&outstanding, &open(&[true; 3]), piece) == Some(1))
            .count();
        // Chosen whenever it is one of the two distinct candidates: 2 in 3.
        assert!((600..730).contains(&to_idle), "{to_idle}");
        // With two nodes the less loaded one always wins.
        let two = [5, 3].map(samples);
        assert!((0..100).all(|_| d.pick(&two, &open(&[true, true]), piece) == Some(1)));
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
        // Each queued sample: what it carries, the work left, when sent.
        let mut queues: Vec<std::collections::VecDeque<(NodeLoad, f64, f64)>> =
            vec![Default::default(); n];
        let mut busy_for = vec![0.0; n];
        let mut answered = vec![0.0; n];
        let mut next = 0;
        let mut t = 0.0;
        loop {
            let shares = d.window_shares().to_vec();
            while next < prompts.len() {
                let loads: Vec<NodeLoad> = queues
                    .iter()
                    .map(|q| NodeLoad {
                        samples: q.len() as u64,
                        bytes: q.iter().map(|(s, _, _)| s.bytes).sum(),
                        ..NodeLoad::default()
                    })
                    .collect();
                let room: Vec<bool> = (0..n)
                    .map(|i| (queues[i].len() as f64) < (WINDOW * shares[i]).ceil().max(1.0))
                    .collect();
                let piece = NodeLoad {
                    samples: 1,
                    bytes: prompts[next] * 4,
                    ..NodeLoad::default()
                };
                let Some(node) = d.pick(&loads, &open(&room), piece) else {
                    break;
                };
                queues[node].push_back((piece, piece.work(), t));
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
                    let (done, _, sent) = queues[i].pop_front().unwrap();
                    answered[i] += done.work();
                    let held = Held {
                        busy_secs: busy_for[i],
                        sequence_secs: t - sent,
                    };
                    d.observe(i, done, held);
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
                    ..NodeLoad::default()
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
                ..NodeLoad::default()
            },
            NodeLoad {
                samples: 2,
                bytes: 4 * 40,
                ..NodeLoad::default()
            },
        ];
        let piece = NodeLoad {
            samples: 1,
            bytes: 400,
            ..NodeLoad::default()
        };
        assert!((0..20).all(|_| d.pick(&loads, &open(&[true, true]), piece) == Some(1)));
        // A count-based policy sees two alike nodes.
        let mut count = Dispatcher::new(DispatchPolicy::LeastOutstanding, 2, 1);
        let picks: Vec<_> = (0..20)
            .map(|_| count.pick(&loads, &open(&[true, true]), piece))
            .collect();
        assert!(picks.contains(&Some(0)));
    }

    /// Server-like arrivals, one every `interval` seconds, on nodes that
    /// run what they hold side by side (a serving engine's continuous
    /// batching), each sequence at `speeds` tokens per second however
    /// many run. Returns the samples each node got.
    fn run_arrivals(policy: DispatchPolicy, speeds: &[f64], interval: f64) -> Vec<u32> {
        const STEP: f64 = 0.0005;
        let n = speeds.len();
        let mut d = Dispatcher::new(policy, n, 7);
        // Each node's sequences: what it carries, the work left, when sent.
        let mut running: Vec<Vec<(NodeLoad, f64, f64)>> = vec![Vec::new(); n];
        let mut busy_since: Vec<Option<f64>> = vec![None; n];
        let mut got = vec![0; n];
        let prompts = prompts(2000);
        let mut t = 0.0;
        let mut next_arrival = 0.0;
        let mut next = 0;
        while next < prompts.len() {
            if t >= next_arrival {
                let loads: Vec<NodeLoad> = running
                    .iter()
                    .map(|r| NodeLoad {
                        samples: r.len() as u64,
                        bytes: r.iter().map(|(s, _, _)| s.bytes).sum(),
                        ..NodeLoad::default()
                    })
                    .collect();
                let piece = NodeLoad {
                    samples: 1,
                    bytes: prompts[next] * 4,
                    ..NodeLoad::default()
                };
                let node = d.pick(&loads, &open(&vec![true; n]), piece).unwrap();
                running[node].push((piece, piece.work(), t));
                busy_since[node].get_or_insert(t);
                got[node] += 1;
                next += 1;
                next_arrival += interval;
            }
            t += STEP;
            for i in 0..n {
                running[i].iter_mut().for_each(|s| s.1 -= speeds[i] * STEP);
                let (finished, left): (Vec<_>, Vec<_>) =
                    running[i].drain(..).partition(|s| s.1 <= 0.0);
                running[i] = left;
                if finished.is_empty() {
                    continue;
                }
                let done = NodeLoad {
                    samples: finished.len() as u64,
                    bytes: finished.iter().map(|(s, _, _)| s.bytes).sum(),
                    ..NodeLoad::default()
                };
                let held = Held {
                    busy_secs: t - busy_since[i].unwrap(),
                    sequence_secs: finished.iter().map(|(_, _, sent)| t - sent).sum(),
                };
                d.observe(i, done, held);
                busy_since[i] = (!running[i].is_empty()).then_some(t);
            }
        }
        got
    }

    #[test]
    fn tokens_do_not_pile_sequences_on_a_node_that_runs_them_side_by_side() {
        // Four nodes, the last at half speed; about five sequences of ~800
        // tokens running on each at once.
        let speeds = [50_000.0, 50_000.0, 50_000.0, 25_000.0];
        let got = run_arrivals(DispatchPolicy::Tokens, &speeds, 0.004);
        let fast = &got[..3];
        let (least, most) = (fast.iter().min().unwrap(), fast.iter().max().unwrap());
        // A node given more does not look faster for it: the equal nodes
        // share evenly, and the slow one gets less than any of them.
        assert!(
            f64::from(*most) < f64::from(*least) * 1.3,
            "equal nodes got {got:?}"
        );
        assert!(got[3] < *least, "the half-speed node got {got:?}");
        assert_eq!(got.iter().sum::<u32>(), 2000);
    }

    #[test]
    fn tokens_pass_over_a_node_that_would_queue_while_another_has_room() {
        let mut d = Dispatcher::new(DispatchPolicy::Tokens, 2, 1);
        let answer = samples(1);
        d.observe(0, answer, held(0.01)); // node 0: ten times node 1's speed
        d.observe(1, answer, held(0.1));
        let running = |n: u64| NodeLoad {
            samples: n,
            started: n,
            ..NodeLoad::default()
        };
        // Node 0 has been seen running 32 at once, the most of the fleet,
        // just now: one more is tried there, the faster node.
        let loads = [running(32), running(10)];
        assert_eq!(d.pick(&loads, &open(&[true, true]), answer), Some(0));
        // Holding that one more, not yet started, it would queue.
        let trying = NodeLoad {
            samples: 33,
            ..running(32)
        };
        assert_eq!(
            d.pick(&[trying, running(10)], &open(&[true, true]), answer),
            Some(1)
        );
        // Once 32 has stood for a while it is what a node runs: the piece
        // would wait in node 0's queue, so it goes to node 1, slow as it
        // is, which has room.
        for _ in 0..RUNS_SETTLE_FIRST_TOKENS {
            d.observe_first_token(1, first_token(0.03, 100.0));
        }
        assert!((0..10).all(|_| d.pick(&loads, &open(&[true, true]), answer) == Some(1)));
        // Once both would queue, the sooner done.
        let loads = [running(32), running(32)];
        assert_eq!(d.pick(&loads, &open(&[true, true]), answer), Some(0));
        // A node seen running more unsettles the count: one more is tried
        // again.
        let loads = [running(32), running(34)];
        assert_eq!(d.pick(&loads, &open(&[true, true]), answer), Some(0));
    }

    #[test]
    fn tokens_send_where_the_first_token_comes_soonest_while_nodes_have_room() {
        let mut d = Dispatcher::new(DispatchPolicy::Tokens, 3, 1);
        // Equal speeds; node 2's first tokens take twice as long (longer
        // steps), node 1's a little longer than node 0's; each 1 µs more
        // per prompt token.
        for node in 0..3 {
            d.observe(node, samples(1), held(0.05));
        }
        let running = |n: u64| NodeLoad {
            samples: n,
            started: n,
            ..NodeLoad::default()
        };
        let prompt = NodeLoad {
            samples: 1,
            bytes: 4 * 300,
            ..NodeLoad::default()
        };
        // Each seen running 8, for longer than it takes to count.
        d.pick(&[running(8); 3], &open(&[true; 3]), prompt);
        for k in 0..RUNS_SETTLE_FIRST_TOKENS as u32 {
            let tokens = f64::from(100 + (k % 8) * 100);
            for (node, fixed) in [(0, 0.0015), (1, 0.0017), (2, 0.0035)] {
                d.observe_first_token(node, first_token(fixed + tokens * 1e-6, tokens));
            }
        }
        // Every node has room: node 0, though it holds the most.
        let loads = [running(7), running(3), running(0)];
        assert!((0..10).all(|_| d.pick(&loads, &open(&[true; 3]), prompt) == Some(0)));
        // Node 0 has a long prompt not yet started: its first token would
        // come after that prefill, so node 1.
        let waiting = NodeLoad {
            bytes: 4 * 2000,
            started: 6,
            ..running(7)
        };
        let loads = [waiting, running(3), running(0)];
        assert_eq!(d.pick(&loads, &open(&[true; 3]), prompt), Some(1));
        // Nodes 0 and 1 full: node 2, slow to a first token as it is.
        let loads = [running(8), running(8), running(0)];
        assert_eq!(d.pick(&loads, &open(&[true; 3]), prompt), Some(2));
        // Node 0 came back: its first-token time is unknown and counts at
        // the mean of the others', so node 1 is sooner.
        d.forget(0);
        let loads = [running(0), running(0), running(0)];
        assert_eq!(d.pick(&loads, &open(&[true; 3]), prompt), Some(1));
    }

    fn first_token(secs: f64, prompt_tokens: f64) -> FirstToken {
        FirstToken {
            secs,
            prompt_tokens,
            node_was_idle: false,
        }
    }

    #[test]
    fn tokens_count_a_prompt_ahead_at_its_prefill_not_at_a_multiple_of_the_piece() {
        let mut d = Dispatcher::new(DispatchPolicy::Tokens, 2, 1);
        // Node 0: 15 ms to a first token plus 10 µs per prompt token;
        // node 1 (longer steps): 30 ms plus 10 µs.
        for k in 0..200 {
            let tokens = f64::from(8 + (k * 37) % 1000);
            d.observe_first_token(0, first_token(0.015 + tokens * 10e-6, tokens));
            d.observe_first_token(1, first_token(0.030 + tokens * 10e-6, tokens));
        }
        let short = NodeLoad {
            samples: 1,
            bytes: 4 * 10,
            started: 0,
        };
        let holding = |ahead: u64| NodeLoad {
            samples: 5,
            bytes: 4 * ahead,
            started: 4,
        };
        // Both seen running 8: both have room.
        let running = NodeLoad {
            samples: 8,
            bytes: 0,
            started: 8,
        };
        d.pick(&[running; 2], &open(&[true, true]), short);
        // 400 tokens ahead on node 0 delay a 10-token piece by 4 ms, not
        // by forty times its own prefill: node 0 still.
        let loads = [holding(400), holding(0)];
        assert!((0..10).all(|_| d.pick(&loads, &open(&[true, true]), short) == Some(0)));
        // 2,000 tokens ahead (20 ms) make node 1 the sooner.
        let loads = [holding(2000), holding(0)];
        assert_eq!(d.pick(&loads, &open(&[true, true]), short), Some(1));
        // Node 1 idle for a while answers after its prefill alone; that
        // does not make it look as quick once it runs sequences.
        for _ in 0..100 {
            d.observe_first_token(
                1,
                FirstToken {
                    node_was_idle: true,
                    ..first_token(0.001, 10.0)
                },
            );
        }
        let loads = [holding(400), holding(0)];
        assert_eq!(d.pick(&loads, &open(&[true, true]), short), Some(0));
    }

    #[test]
    fn tokens_learn_rates_and_forget_a_node_that_failed_or_rejoined() {
        let mut d = Dispatcher::new(DispatchPolicy::Tokens, 3, 1);
        // Before any answer every node counts alike, on a warm-up window.
        assert_eq!(d.window_shares(), vec![WARMUP_SHARE; 3]);
        let done = NodeLoad {
            samples: 1,
            bytes: 4 * 744,
            ..NodeLoad::default()
        }; // 1000 tokens
        d.observe(0, done, held(0.01)); // 100k tokens/s
        d.observe(1, done, held(0.04)); // 25k tokens/s
        let shares = d.window_shares();
        assert_eq!(shares[0], 1.0);
        assert!((shares[1] - 0.25).abs() < 1e-9, "{shares:?}");
        // Node 2, not yet measured, is still warming up.
        assert_eq!(shares[2], WARMUP_SHARE);
        // Equal loads: the fast node first; a closed node never.
        let idle = [NodeLoad::default(); 3];
        assert_eq!(d.pick(&idle, &open(&[true, true, true]), done), Some(0));
        assert_eq!(d.pick(&idle, &open(&[false, true, false]), done), Some(1));
        assert_eq!(d.pick(&idle, &open(&[false; 3]), done), None);
        // Node 1 came back: it is measured afresh, not held to its past,
        // and picked as if at the mean rate of the others.
        d.forget(1);
        assert_eq!(d.window_shares()[1], WARMUP_SHARE);
        let loads = [
            NodeLoad {
                samples: 10,
                bytes: 0,
                ..NodeLoad::default()
            },
            NodeLoad {
                samples: 4,
                bytes: 0,
                ..NodeLoad::default()
            },
            NodeLoad {
                samples: 6,
                bytes: 0,
                ..NodeLoad::default()
            },
        ];
        // Node 0 at 100k tokens/s; nodes 1 and 2, unmeasured, at the mean
        // of the measured (100k too): node 1, holding least, is soonest
        // done.
        assert_eq!(d.pick(&loads, &open(&[true; 3]), samples(1)), Some(1));
        // A node that slows down is seen: its old rate fades within
        // seconds, and the node now fastest has the whole window.
        d.observe(1, done, held(0.04)); // 25k tokens/s
        for _ in 0..50 {
            d.observe(0, done, held(0.4)); // now 2.5k tokens/s
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
