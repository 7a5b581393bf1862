//! The bookkeeping that makes completion exactly-once: which node holds
//! which sample, how much each node has in flight, what waits for room,
//! and where a failed node's samples go. A state machine with no I/O: every
//! call returns the sends the caller must perform, so it is tested without
//! sockets and every transport shares it.
//!
//! A sample is *outstanding* on exactly one node at a time. A completion
//! counts only if it comes from the node the sample is outstanding on; it
//! then stops being outstanding anywhere. Failing a node takes all of its
//! outstanding samples back into the queue, so a late answer from that node
//! finds nothing and is dropped: no sample is completed twice or lost.
//!
//! First tokens (token models) follow the same rule, and a sample's first
//! token counts once per run: when a node fails after a sample's first
//! token was handed on, the node that runs it again sends its own first
//! token, which is dropped (the LoadGen's time to first token already
//! ended); only its completion counts.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use crate::dispatch::{DispatchPolicy, Dispatcher, FirstToken, Held, NodeLoad, OpenNodes};

/// One sample to run: the LoadGen's response id and where its bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SampleRef {
    /// The LoadGen's response id.
    pub response_id: u64,
    /// The sample's QSL index, where its bytes are in the store.
    pub index: usize,
    /// Bytes on the wire, for the in-flight byte budget.
    pub bytes: u64,
}

/// Samples of one LoadGen query that travel together in one message; a
/// large query becomes several pieces, pieces of two queries never merge.
/// `T` is whatever the caller needs back on completion (its sink).
#[derive(Clone, Debug)]
pub(crate) struct Piece<T> {
    /// The QDL's id of the query the piece belongs to.
    pub query_id: u64,
    /// Its samples, in issue order.
    pub samples: Vec<SampleRef>,
    /// What the caller gets back with each completed sample.
    pub tag: T,
}

/// An instruction to the transports: send this piece to that node.
#[derive(Debug)]
pub(crate) struct SendTo<T> {
    /// The node, by its index in the configured order.
    pub node: usize,
    /// What to send it.
    pub piece: Piece<T>,
}

/// How much a node may have in flight before it gets no more work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Samples in flight on one node.
    pub samples: u64,
    /// Bytes of those samples on the wire.
    pub bytes: u64,
}

impl Window {
    /// Whether a node holding `samples` samples of `bytes` bytes takes
    /// more: while it is under both limits (so one sample larger than the
    /// byte limit still goes to an empty node).
    pub fn has_room(&self, samples: u64, bytes: u64) -> bool {
        samples < self.samples && bytes < self.bytes
    }

    /// `share` (0 to 1) of this window, never below one sample.
    pub fn scaled(&self, share: f64) -> Window {
        if share >= 1.0 {
            return *self;
        }
        let part = |limit: u64| ((limit as f64 * share).ceil() as u64).max(1);
        Window {
            samples: part(self.samples),
            bytes: part(self.bytes),
        }
    }
}

struct Outstanding<T> {
    query_id: u64,
    /// Which sent piece the sample travelled in, so samples taken back are
    /// re-sent in pieces no larger than the ones they came in.
    piece_seq: u64,
    sample: SampleRef,
    tag: T,
    /// When the piece left for this node, for per-node round trips.
    sent_at: Instant,
    /// When this node's first token of it came (token models), for the
    /// node's time per output token.
    first_token_at: Option<Instant>,
    /// The prompt tokens the node had not started when the piece left,
    /// the piece's own included, and whether it held nothing then: what
    /// the dispatcher fits the first token against.
    prefill_tokens: f64,
    sent_to_idle: bool,
}

/// When a sample outstanding on a node was sent there, and when its first
/// token came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SampleTiming {
    /// When its piece left for the node.
    pub sent_at: Instant,
    /// When the node's first token of it came, if one did.
    pub first_token_at: Option<Instant>,
}

struct NodeSlot<T> {
    failure: Option<String>,
    /// Completions and first tokens counted from this node, for progress
    /// checks (a long LLM answer shows life by its first token).
    completed: u64,
    /// Times the node's token count (token models) was seen to change: a
    /// node streaming long answers shows life between completions.
    token_progress: u64,
    /// The node's token count as it last said it.
    tokens_seen: u64,
    in_flight: u64,
    in_flight_bytes: u64,
    /// Of `in_flight`, samples whose first token came: running on the
    /// node, past its queue; and their bytes.
    started: u64,
    started_bytes: u64,
    outstanding: HashMap<u64, Outstanding<T>>,
    /// Since when the node has held work without answering any of it:
    /// the time its next answers took, for its rate.
    busy_since: Option<Instant>,
}

impl<T> NodeSlot<T> {
    fn load(&self) -> NodeLoad {
        NodeLoad {
            samples: self.in_flight,
            bytes: self.in_flight_bytes - self.started_bytes,
            started: self.started,
        }
    }

    /// Takes `o` off the node's counts (answered, declined or moved).
    fn release(&mut self, o: &Outstanding<T>) {
        self.in_flight -= 1;
        self.in_flight_bytes -= o.sample.bytes;
        if o.first_token_at.is_some() {
            self.started -= 1;
            self.started_bytes -= o.sample.bytes;
        }
    }

    /// Takes back everything the node held (it failed, declined or came
    /// back).
    fn take_all(&mut self) -> Vec<Outstanding<T>> {
        self.in_flight = 0;
        self.in_flight_bytes = 0;
        self.started = 0;
        self.started_bytes = 0;
        self.busy_since = None;
        // A node that comes back may have restarted, its count from 0.
        self.tokens_seen = 0;
        self.outstanding.drain().map(|(_, o)| o).collect()
    }
}

/// Every node failed; the run cannot go on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("every SUT node has failed ({failures}); {stranded} samples cannot be completed")]
pub(crate) struct AllNodesFailed {
    /// Each node's failure, `node 0: ...; node 1: ...`.
    pub failures: String,
    /// Samples that waited for a node and now cannot run.
    pub stranded: usize,
}

/// The pool's state; wrap it in a lock to share it.
pub(crate) struct Pool<T> {
    nodes: Vec<NodeSlot<T>>,
    pending: VecDeque<Piece<T>>,
    /// Samples in `pending`, kept as they come and go (a pump per answer
    /// must not walk an Offline query's queue).
    pending_samples: u64,
    dispatcher: Dispatcher,
    /// Each node's window (all alike unless set per node).
    windows: Vec<Window>,
    /// Samples taken back from failed or declining nodes, in total.
    requeued: u64,
    /// Sequence number of the next piece sent.
    next_piece_seq: u64,
    /// Outstanding samples whose first token went to the LoadGen.
    first_tokens: HashSet<u64>,
    /// First tokens dropped: from a node that did not hold the sample, or
    /// a second one for a sample.
    late_first_tokens: u64,
    /// The last query larger than every node's window together (an
    /// Offline query): its end is shared by [`Dispatcher::leaves_for_faster`].
    bulk_query: Option<u64>,
    /// The samples every node's window holds together.
    fleet_window: u64,
    /// Each node as the dispatcher weighs it: what it holds, whether it
    /// takes more, whether it is healthy, its window. Brought up to date
    /// one node at a time ([`Pool::refresh_node`]) as that node changes,
    /// so sending a piece costs the same with 2 nodes or 1,024.
    loads: Vec<NodeLoad>,
    open: OpenNodes,
    healthy: Vec<bool>,
    capacities: Vec<u64>,
}

impl<T> std::fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("nodes", &self.nodes.len())
            .field("pending_samples", &self.pending_samples)
            .field("requeued", &self.requeued)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Pool<T> {
    /// A pool over `node_count` healthy nodes; `seed` seeds the random
    /// choices of the dispatch policy.
    pub(crate) fn new(
        node_count: usize,
        policy: DispatchPolicy,
        window: Window,
        seed: u64,
    ) -> Self {
        let mut pool = Self {
            nodes: (0..node_count)
                .map(|_| NodeSlot {
                    failure: None,
                    completed: 0,
                    token_progress: 0,
                    tokens_seen: 0,
                    in_flight: 0,
                    in_flight_bytes: 0,
                    started: 0,
                    started_bytes: 0,
                    outstanding: HashMap::new(),
                    busy_since: None,
                })
                .collect(),
            pending: VecDeque::new(),
            pending_samples: 0,
            dispatcher: Dispatcher::new(policy, node_count, seed),
            windows: vec![window; node_count],
            requeued: 0,
            next_piece_seq: 0,
            first_tokens: HashSet::new(),
            late_first_tokens: 0,
            bulk_query: None,
            fleet_window: window.samples.saturating_mul(node_count as u64),
            loads: vec![NodeLoad::default(); node_count],
            open: OpenNodes::new(node_count),
            healthy: vec![false; node_count],
            capacities: vec![0; node_count],
        };
        pool.refresh_all();
        pool
    }

    /// Brings `node`'s entry in the dispatcher's view up to date with its
    /// slot, its window and its share of it.
    fn refresh_node(&mut self, node: usize) {
        let n = &self.nodes[node];
        let share = self.dispatcher.window_shares()[node];
        self.loads[node] = n.load();
        self.healthy[node] = n.failure.is_none();
        self.capacities[node] = self.windows[node].samples;
        let room = self.windows[node]
            .scaled(share)
            .has_room(n.in_flight, n.in_flight_bytes);
        self.open.set(node, self.healthy[node] && room);
    }

    fn refresh_all(&mut self) {
        for node in 0..self.nodes.len() {
            self.refresh_node(node);
        }
    }

    /// After the dispatcher learned of `node`: its entry, or every entry
    /// where shares follow rates.
    fn refresh_after_observing(&mut self, node: usize) {
        if self.dispatcher.shares_follow_rates() {
            self.refresh_all();
        } else {
            self.refresh_node(node);
        }
    }

    /// Token models whose nodes said how many sequences each runs side by
    /// side: each node's window is that many samples (or the window set
    /// at start, if smaller), so what a node cannot start waits here,
    /// where it can still go to any node; and the dispatcher knows no
    /// node queues what it is sent.
    pub(crate) fn size_windows_by_sequences(&mut self, sequences: &[u64]) {
        for (window, &n) in self.windows.iter_mut().zip(sequences) {
            window.samples = window.samples.min(n.max(1));
        }
        self.fleet_window = self.windows.iter().map(|w| w.samples).sum();
        self.dispatcher.windows_are_capacity();
        self.refresh_all();
    }

    /// Each node's window, in samples, in node order.
    pub(crate) fn window_samples(&self) -> Vec<u64> {
        self.windows.iter().map(|w| w.samples).collect()
    }

    /// Queues pieces and returns what can be sent now; an error once no
    /// node is left to run them.
    pub(crate) fn submit(
        &mut self,
        pieces: impl IntoIterator<Item = Piece<T>>,
    ) -> Result<Vec<SendTo<T>>, AllNodesFailed> {
        let before = self.pending_samples;
        for piece in pieces {
            self.pending_samples += piece.samples.len() as u64;
            self.pending.push_back(piece);
        }
        let added = self.pending_samples - before;
        if let Some(last) = self.pending.back().filter(|_| added > self.fleet_window) {
            self.bulk_query = Some(last.query_id);
        }
        self.pump_or_fail()
    }

    /// Records completions that `node` reported. Returns, in the order
    /// given, the tag of each id that counts (`None`: not outstanding on
    /// that node, so already completed or moved; the caller drops it), and
    /// the sends the freed room allows.
    pub(crate) fn complete(
        &mut self,
        node: usize,
        ids: &[u64],
    ) -> (Vec<Option<T>>, Vec<SendTo<T>>) {
        let slot = &mut self.nodes[node];
        let first_tokens = &mut self.first_tokens;
        let now = Instant::now();
        let mut done = NodeLoad::default();
        let mut sequence_secs = 0.0;
        let tags = ids
            .iter()
            .map(|id| {
                slot.outstanding.remove(id).map(|o| {
                    slot.completed += 1;
                    slot.release(&o);
                    done.samples += 1;
                    done.bytes += o.sample.bytes;
                    sequence_secs += now.saturating_duration_since(o.sent_at).as_secs_f64();
                    first_tokens.remove(id);
                    o.tag
                })
            })
            .collect();
        if done.samples > 0 {
            if let Some(since) = slot.busy_since {
                let held = Held {
                    busy_secs: now.saturating_duration_since(since).as_secs_f64(),
                    sequence_secs,
                };
                self.dispatcher.observe(node, done, held);
            }
            slot.busy_since = (slot.in_flight > 0).then_some(now);
        }
        self.refresh_after_observing(node);
        (tags, self.pump())
    }

    /// Records first tokens that `node` reported. Returns, in the order
    /// given, the tag of each that counts: its sample is outstanding on
    /// `node` and none of its first tokens was handed on before. The rest
    /// (`None`) the caller drops; they are counted in
    /// [`Pool::late_first_tokens`].
    pub(crate) fn first_token(&mut self, node: usize, ids: &[u64]) -> Vec<Option<T>> {
        let slot = &mut self.nodes[node];
        let now = Instant::now();
        let tags = ids
            .iter()
            .map(|id| {
                let tag = slot
                    .outstanding
                    .get_mut(id)
                    .filter(|_| self.first_tokens.insert(*id))
                    .map(|o| {
                        o.first_token_at = Some(now);
                        let first = FirstToken {
                            secs: now.saturating_duration_since(o.sent_at).as_secs_f64(),
                            prompt_tokens: o.prefill_tokens,
                            node_was_idle: o.sent_to_idle,
                        };
                        (o.tag.clone(), o.sample.bytes, first)
                    });
                match tag {
                    Some((_, bytes, first)) => {
                        slot.completed += 1;
                        slot.started += 1;
                        slot.started_bytes += bytes;
                        self.dispatcher.observe_first_token(node, first);
                    }
                    None => self.late_first_tokens += 1,
                }
                tag.map(|(tag, _, _)| tag)
            })
            .collect();
        // Started samples no longer count as prompts to prefill.
        self.refresh_node(node);
        tags
    }

    /// `node` says it has generated `tokens_generated` tokens since it
    /// started: if the count moved, the node is alive (for the
    /// watchdog), whatever its answers' length.
    pub(crate) fn token_progress(&mut self, node: usize, tokens_generated: u64) {
        let slot = &mut self.nodes[node];
        if slot.failure.is_none() && slot.tokens_seen != tokens_generated {
            slot.tokens_seen = tokens_generated;
            slot.token_progress += 1;
        }
    }

    /// The samples outstanding on `node`: what it must be told to drop
    /// before they are taken back from it.
    pub(crate) fn outstanding_ids(&self, node: usize) -> Vec<u64> {
        self.nodes[node].outstanding.keys().copied().collect()
    }

    /// First tokens dropped so far: late (their node no longer held the
    /// sample) or a second one for a sample.
    pub(crate) fn late_first_tokens(&self) -> u64 {
        self.late_first_tokens
    }

    /// `node` declined these samples without running them (it is shutting
    /// down): stop sending it work, and send them elsewhere first.
    pub(crate) fn decline(
        &mut self,
        node: usize,
        ids: &[u64],
        reason: &str,
    ) -> Result<Vec<SendTo<T>>, AllNodesFailed> {
        let slot = &mut self.nodes[node];
        slot.failure
            .get_or_insert_with(|| format!("declined work: {reason}"));
        let mut returned = Vec::new();
        for id in ids {
            if let Some(o) = slot.outstanding.remove(id) {
                slot.release(&o);
                returned.push(o);
            }
        }
        self.dispatcher.forget(node);
        self.refresh_after_observing(node);
        self.requeue_front(returned);
        self.pump_or_fail()
    }

    /// `node` is gone (connection lost, protocol error): every sample it
    /// still held goes back to the front of the queue for the others.
    pub(crate) fn fail(
        &mut self,
        node: usize,
        reason: &str,
    ) -> Result<Vec<SendTo<T>>, AllNodesFailed> {
        let slot = &mut self.nodes[node];
        if slot.failure.is_none() {
            slot.failure = Some(reason.to_string());
        }
        let returned = slot.take_all();
        self.dispatcher.forget(node);
        self.refresh_after_observing(node);
        self.requeue_front(returned);
        self.pump_or_fail()
    }

    /// `node` is back (reconnected and checked to be the same node): it
    /// takes work again. Whatever it still held from before (a declining
    /// node's undeclined samples) is taken back first and sent again, since
    /// answers from its old connection are no longer heard.
    pub(crate) fn rejoin(&mut self, node: usize) -> Vec<SendTo<T>> {
        let slot = &mut self.nodes[node];
        slot.failure = None;
        let returned = slot.take_all();
        self.dispatcher.forget(node);
        self.refresh_after_observing(node);
        self.requeue_front(returned);
        self.pump()
    }

    /// Gives up on everything queued or outstanding (no node is left) and
    /// returns the tags of what was given up, one per piece or sample.
    pub(crate) fn strand(&mut self) -> Vec<T> {
        self.pending_samples = 0;
        let mut tags: Vec<T> = self.pending.drain(..).map(|p| p.tag).collect();
        for slot in &mut self.nodes {
            tags.extend(slot.take_all().into_iter().map(|o| o.tag));
        }
        self.first_tokens.clear();
        self.refresh_all();
        tags
    }

    /// When the sample `id` outstanding on `node` was sent there and its
    /// first token came; `None` if it is not outstanding there (its answer
    /// will not count).
    pub(crate) fn timing(&self, node: usize, id: u64) -> Option<SampleTiming> {
        self.nodes[node].outstanding.get(&id).map(|o| SampleTiming {
            sent_at: o.sent_at,
            first_token_at: o.first_token_at,
        })
    }

    /// Why `node` failed, if it did.
    pub(crate) fn failure(&self, node: usize) -> Option<&str> {
        self.nodes[node].failure.as_deref()
    }

    /// Whether `node` still takes work.
    pub(crate) fn is_healthy(&self, node: usize) -> bool {
        self.nodes[node].failure.is_none()
    }

    /// A healthy node's samples in flight, and a count that grows with
    /// every sign of progress (completions, first tokens, its token count
    /// moving), for a watchdog to tell a busy node from a stuck one;
    /// `None` once failed.
    pub(crate) fn progress(&self, node: usize) -> Option<(u64, u64)> {
        let n = &self.nodes[node];
        n.failure
            .is_none()
            .then_some((n.in_flight, n.completed + n.token_progress))
    }

    /// Samples sent to `node` and not yet completed, and those it
    /// completed (answers that counted).
    pub(crate) fn node_counts(&self, node: usize) -> (u64, u64) {
        let n = &self.nodes[node];
        (n.in_flight, n.completed)
    }

    /// Samples sent and not yet completed, on all nodes.
    pub(crate) fn in_flight(&self) -> u64 {
        self.nodes.iter().map(|n| n.in_flight).sum()
    }

    /// Samples taken back from failed or declining nodes to be sent again.
    pub(crate) fn requeued(&self) -> u64 {
        self.requeued
    }

    /// Samples waiting for room on a node.
    pub(crate) fn queued(&self) -> usize {
        self.pending_samples as usize
    }

    fn failures(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.failure.as_ref().map(|f| format!("node {i}: {f}")))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn pump_or_fail(&mut self) -> Result<Vec<SendTo<T>>, AllNodesFailed> {
        if self.nodes.iter().all(|n| n.failure.is_some()) {
            return Err(AllNodesFailed {
                failures: self.failures(),
                stranded: self.queued(),
            });
        }
        Ok(self.pump())
    }

    /// Puts returned samples back at the head of the queue, grouped as the
    /// pieces they were sent in: queries stay unmerged and no piece grows
    /// past the size limits it was cut to (a failed node may hold a whole
    /// window, far more than one message should carry).
    fn requeue_front(&mut self, mut returned: Vec<Outstanding<T>>) {
        self.requeued += returned.len() as u64;
        // Oldest query first, then send order and issue order within it.
        returned.sort_by_key(|o| (o.query_id, o.piece_seq, o.sample.response_id));
        let mut pieces: Vec<(u64, Piece<T>)> = Vec::new();
        for o in returned {
            match pieces.last_mut() {
                Some((seq, p)) if *seq == o.piece_seq => p.samples.push(o.sample),
                _ => pieces.push((
                    o.piece_seq,
                    Piece {
                        query_id: o.query_id,
                        samples: vec![o.sample],
                        tag: o.tag,
                    },
                )),
            }
        }
        for (_, p) in pieces.into_iter().rev() {
            self.pending_samples += p.samples.len() as u64;
            self.pending.push_front(p);
        }
    }

    /// Sends queued pieces, in order, while some healthy node has room.
    fn pump(&mut self) -> Vec<SendTo<T>> {
        let mut sends = Vec::new();
        // Nodes passed over for one piece, open again for the next.
        let mut passed_over = Vec::new();
        while let Some(next) = self.pending.front() {
            let bulk = self.bulk_query == Some(next.query_id);
            let piece_load = NodeLoad {
                samples: next.samples.len() as u64,
                bytes: next.samples.iter().map(|s| s.bytes).sum(),
                started: 0,
            };
            let node = loop {
                let Some(node) = self.dispatcher.pick(&self.loads, &self.open, piece_load) else {
                    break None;
                };
                // The end of an Offline query: a slower node leaves what
                // the faster ones would finish sooner.
                if bulk
                    && self.dispatcher.leaves_for_faster(
                        node,
                        &self.healthy,
                        &self.capacities,
                        self.pending_samples,
                    )
                {
                    self.open.set(node, false);
                    passed_over.push(node);
                    continue;
                }
                break Some(node);
            };
            for passed in passed_over.drain(..) {
                self.refresh_node(passed);
            }
            let Some(node) = node else {
                break; // Backpressure: wait for a completion to free room.
            };
            let piece = self.pending.pop_front().expect("checked non-empty");
            self.pending_samples -= piece.samples.len() as u64;
            let piece_seq = self.next_piece_seq;
            self.next_piece_seq += 1;
            // One clock read per piece; the caller sends it right after.
            let sent_at = Instant::now();
            let slot = &mut self.nodes[node];
            slot.busy_since.get_or_insert(sent_at);
            let sent_to_idle = slot.in_flight == 0;
            // Token ids travel as 4-byte integers.
            let prefill_tokens = (self.loads[node].bytes + piece_load.bytes) as f64 / 4.0;
            for s in &piece.samples {
                slot.in_flight += 1;
                slot.in_flight_bytes += s.bytes;
                slot.outstanding.insert(
                    s.response_id,
                    Outstanding {
                        query_id: piece.query_id,
                        piece_seq,
                        sample: *s,
                        tag: piece.tag.clone(),
                        sent_at,
                        first_token_at: None,
                        prefill_tokens,
                        sent_to_idle,
                    },
                );
            }
            self.refresh_node(node);
            sends.push(SendTo { node, piece });
        }
        sends
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(query_id: u64, ids: std::ops::Range<u64>) -> Piece<u8> {
        Piece {
            query_id,
            samples: ids
                .map(|id| SampleRef {
                    response_id: id,
                    index: id as usize,
                    bytes: 10,
                })
                .collect(),
            tag: 0,
        }
    }

    fn pool(nodes: usize, window: u64) -> Pool<u8> {
        Pool::new(
            nodes,
            DispatchPolicy::RoundRobin,
            Window {
                samples: window,
                bytes: u64::MAX,
            },
            1,
        )
    }

    /// The dispatcher's view, kept one node at a time, is what a
    /// recomputation from every node's slot gives.
    fn assert_view_is_current(p: &Pool<u8>) {
        let shares = p.dispatcher.window_shares();
        let mut open = Vec::new();
        for (i, n) in p.nodes.iter().enumerate() {
            assert_eq!(p.loads[i], n.load(), "node {i}'s load");
            assert_eq!(p.healthy[i], n.failure.is_none(), "node {i}'s health");
            assert_eq!(p.capacities[i], p.windows[i].samples, "node {i}'s window");
            let room = p.windows[i]
                .scaled(shares[i])
                .has_room(n.in_flight, n.in_flight_bytes);
            if n.failure.is_none() && room {
                open.push(i);
            }
        }
        assert_eq!(p.open.in_order().collect::<Vec<_>>(), open, "open nodes");
    }

    fn ids(send: &SendTo<u8>) -> Vec<u64> {
        send.piece.samples.iter().map(|s| s.response_id).collect()
    }

    #[test]
    fn full_nodes_hold_pieces_back_until_room_frees() {
        let mut p = pool(2, 2);
        let sends = p
            .submit([piece(1, 0..2), piece(2, 2..4), piece(3, 4..5)])
            .unwrap();
        assert_eq!(sends.len(), 2, "one piece per node fills both windows");
        assert_eq!(p.queued(), 1);
        let (tags, sends) = p.complete(sends[0].node, &[0]);
        assert_eq!(tags, vec![Some(0)]);
        assert_eq!(sends.len(), 1);
        assert_eq!(ids(&sends[0]), vec![4]);
        assert_eq!(p.in_flight(), 4);
    }

    #[test]
    fn a_moving_token_count_is_progress_and_a_still_one_is_not() {
        let mut p = pool(2, 100);
        let node = p.submit([piece(1, 0..2)]).unwrap()[0].node;
        let (held, at_start) = p.progress(node).unwrap();
        assert_eq!(held, 2);
        p.token_progress(node, 500);
        let (_, moved) = p.progress(node).unwrap();
        assert!(moved > at_start, "a count that moved is progress");
        p.token_progress(node, 500);
        assert_eq!(p.progress(node).unwrap().1, moved, "the same count is none");
        // Failed and back (perhaps restarted, its count from 0 again):
        // what it said before is forgotten, and a low count still moves.
        let mut ids = p.outstanding_ids(node);
        ids.sort_unstable();
        assert_eq!(ids, [0, 1], "what the node must be told to drop");
        p.fail(node, "stuck").unwrap();
        assert!(p.outstanding_ids(node).is_empty());
        assert_eq!(p.progress(node), None);
        p.rejoin(node);
        let before = p.progress(node).unwrap().1;
        p.token_progress(node, 3);
        assert!(p.progress(node).unwrap().1 > before);
    }

    #[test]
    fn windows_sized_by_sequences_hold_the_rest_in_the_pool() {
        // Two nodes running 2 and 3 sequences, under a window of 100:
        // under the token policy (shares of a window at first) each still
        // fills what it runs, and no more.
        let mut p: Pool<u8> = Pool::new(
            2,
            DispatchPolicy::Tokens,
            Window {
                samples: 100,
                bytes: u64::MAX,
            },
            1,
        );
        p.size_windows_by_sequences(&[2, 3]);
        assert_eq!(
            p.windows.iter().map(|w| w.samples).collect::<Vec<_>>(),
            [2, 3]
        );
        let sends = p.submit((0..8).map(|id| piece(1, id..id + 1))).unwrap();
        let mut per_node = [0, 0];
        for s in &sends {
            per_node[s.node] += s.piece.samples.len();
        }
        assert_eq!(per_node, [2, 3]);
        assert_eq!(p.queued(), 3, "the rest waits where any node can take it");
        // One answer frees one sequence: one more goes, to that node.
        let (_, sends) = p.complete(0, &[ids(&sends[0])[0]]);
        assert_eq!(sends.len(), 1);
        assert_eq!((sends[0].node, p.queued()), (0, 2));
    }

    #[test]
    fn a_first_token_counts_once_per_sample_across_a_failover() {
        let mut p = pool(2, 100);
        let sends = p.submit([piece(1, 0..2)]).unwrap();
        let node = sends[0].node;
        let other = 1 - node;
        // Only the node holding the sample, and only once.
        assert_eq!(p.first_token(other, &[0]), vec![None]);
        assert_eq!(p.first_token(node, &[0, 0]), vec![Some(0), None]);
        // The node dies after sample 0's first token: both samples move.
        let resent = p.fail(node, "killed").unwrap();
        assert_eq!(resent.len(), 1);
        assert_eq!(resent[0].node, other);
        // The new node's first token of 0 is dropped; of 1 it counts.
        assert_eq!(p.first_token(other, &[0, 1]), vec![None, Some(0)]);
        // The dead node's late first token counts for nothing.
        assert_eq!(p.first_token(node, &[1]), vec![None]);
        assert_eq!(p.late_first_tokens(), 4);
        // Completions count once, from the node holding the sample.
        assert_eq!(p.complete(other, &[0, 1]).0, vec![Some(0), Some(0)]);
        // A completed sample takes no further first token.
        assert_eq!(p.first_token(other, &[0]), vec![None]);
    }

    #[test]
    fn a_nodes_load_counts_started_samples_apart_until_they_leave() {
        let mut p = pool(2, 100);
        let sends = p.submit([piece(1, 0..3)]).unwrap();
        let node = sends[0].node;
        let load = |p: &Pool<u8>| p.nodes[node].load();
        assert_eq!(
            load(&p),
            NodeLoad {
                samples: 3,
                bytes: 30,
                started: 0
            }
        );
        // A first token: the sample runs, its prompt no longer waits.
        p.first_token(node, &[0, 1]);
        p.first_token(node, &[1]); // a second one changes nothing
        assert_eq!(
            load(&p),
            NodeLoad {
                samples: 3,
                bytes: 10,
                started: 2
            }
        );
        // Answered, declined: each leaves the counts it was in.
        p.complete(node, &[0]);
        assert_eq!(
            load(&p),
            NodeLoad {
                samples: 2,
                bytes: 10,
                started: 1
            }
        );
        p.decline(node, &[1, 2], "draining").unwrap();
        assert_eq!(load(&p), NodeLoad::default());
    }

    #[test]
    fn a_completion_counts_once_and_only_from_its_node() {
        let mut p = pool(2, 100);
        let sends = p.submit([piece(1, 0..3)]).unwrap();
        let node = sends[0].node;
        let other = 1 - node;
        assert_eq!(p.complete(other, &[0]).0, vec![None]);
        assert_eq!(p.complete(node, &[0, 0, 1]).0, vec![Some(0), None, Some(0)]);
        assert_eq!(p.in_flight(), 1);
        assert_eq!(
            p.progress(node),
            Some((1, 2)),
            "one in flight, two completed"
        );
        assert_eq!(p.progress(other), Some((0, 0)));
        p.fail(node, "gone").unwrap();
        assert_eq!(p.progress(node), None);
    }

    #[test]
    fn a_failed_nodes_samples_move_to_a_healthy_node_and_late_answers_are_dropped() {
        let mut p = pool(2, 100);
        let sends = p.submit([piece(1, 0..4), piece(2, 4..6)]).unwrap();
        assert_eq!(sends.len(), 2);
        let failed = sends[0].node;
        // The failed node answered one sample before it died.
        assert_eq!(p.complete(failed, &[0]).0, vec![Some(0)]);
        let resent = p.fail(failed, "connection reset").unwrap();
        assert_eq!(resent.len(), 1);
        assert_ne!(resent[0].node, failed);
        assert_eq!(ids(&resent[0]), vec![1, 2, 3]);
        assert_eq!(p.requeued(), 3);
        assert_eq!(resent[0].piece.query_id, 1);
        // A late answer from the dead node does not count...
        assert_eq!(p.complete(failed, &[1]).0, vec![None]);
        // ...the healthy node's does, once.
        assert_eq!(p.complete(resent[0].node, &[1, 2, 3]).0, vec![Some(0); 3]);
        assert!(!p.is_healthy(failed));
        assert_eq!(p.submit([piece(3, 6..7)]).unwrap()[0].node, 1 - failed);
    }

    #[test]
    fn a_rejoined_node_takes_work_again_and_each_sample_completes_once() {
        let mut p = pool(2, 2);
        let sends = p.submit([piece(1, 0..2)]).unwrap();
        let failed = sends[0].node;
        let other = 1 - failed;
        let resent = p.fail(failed, "killed").unwrap();
        assert_eq!(resent[0].node, other);
        // The other node is full: more work waits for room.
        assert!(p.submit([piece(2, 2..4)]).unwrap().is_empty());
        let sends = p.rejoin(failed);
        assert!(p.is_healthy(failed));
        assert_eq!(sends.len(), 1);
        assert_eq!(sends[0].node, failed);
        assert_eq!(ids(&sends[0]), vec![2, 3]);
        // An answer for 0 from the rejoined node does not count: 0 is on
        // the other node now.
        assert_eq!(p.complete(failed, &[0]).0, vec![None]);
        assert_eq!(p.complete(other, &[0, 1]).0, vec![Some(0); 2]);
        assert_eq!(p.complete(failed, &[2, 3]).0, vec![Some(0); 2]);
        assert_eq!(p.in_flight(), 0);
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn rejoining_a_declining_node_sends_what_it_still_held_again() {
        let mut p = pool(2, 100);
        let node = p.submit([piece(1, 0..3)]).unwrap()[0].node;
        let other = 1 - node;
        // It declines sample 0 while 1 and 2 are still running on it.
        let moved = p.decline(node, &[0], "full").unwrap();
        assert_eq!((moved[0].node, ids(&moved[0])), (other, vec![0]));
        let sends = p.rejoin(node);
        // 1 and 2 go again: answers from the old connection are dropped
        // by the caller, so they cannot count from there.
        let mut again: Vec<u64> = sends.iter().flat_map(ids).collect();
        again.sort_unstable();
        assert_eq!(again, vec![1, 2]);
        assert_eq!(p.requeued(), 3);
        for send in &sends {
            assert_eq!(p.complete(send.node, &ids(send)).0, vec![Some(0); 2]);
        }
        assert_eq!(p.complete(other, &[0]).0, vec![Some(0)]);
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn requeued_samples_keep_their_queries_apart() {
        let mut p = pool(2, 100);
        let sends = p
            .submit([piece(1, 0..2), piece(2, 2..3), piece(3, 3..4)])
            .unwrap();
        let failed = sends[0].node;
        let resent = p.fail(failed, "gone").unwrap();
        let queries: Vec<u64> = resent.iter().map(|s| s.piece.query_id).collect();
        assert_eq!(queries, vec![1, 3], "two pieces, one per original query");
    }

    #[test]
    fn requeued_samples_travel_in_pieces_no_larger_than_they_came_in() {
        // One node holds three pieces of one query; losing it must not merge
        // them into one message larger than a piece may be.
        let mut p = pool(2, 100);
        let pieces = [piece(1, 0..2), piece(1, 2..4), piece(1, 4..6)];
        let sends = p.submit(pieces.clone()).unwrap();
        let failed = sends[0].node;
        let held: Vec<Vec<u64>> = sends.iter().filter(|s| s.node == failed).map(ids).collect();
        let resent = p.fail(failed, "gone").unwrap();
        let resent: Vec<Vec<u64>> = resent.iter().map(ids).collect();
        assert_eq!(resent, held, "the same pieces, in send order");
        assert!(resent.iter().all(|r| r.len() <= 2));
    }

    #[test]
    fn losing_every_node_is_an_error_naming_each_failure() {
        let mut p = pool(2, 1);
        p.submit([piece(1, 0..1), piece(2, 1..2), piece(3, 2..3)])
            .unwrap();
        p.fail(0, "reset by peer").unwrap();
        let err = p.fail(1, "timed out").unwrap_err();
        assert_eq!(err.stranded, 3);
        assert!(p.submit([piece(4, 3..4)]).is_err());
        assert_eq!(p.strand().len(), 4, "every sample given up, none lost");
        assert_eq!(
            err.to_string(),
            "every SUT node has failed (node 0: reset by peer; node 1: timed out); \
             3 samples cannot be completed"
        );
    }

    #[test]
    fn a_declining_node_gets_no_more_work() {
        let mut p = pool(2, 100);
        let sends = p.submit([piece(1, 0..2)]).unwrap();
        let node = sends[0].node;
        let resent = p.decline(node, &[1], "node is shutting down").unwrap();
        assert_eq!(resent.len(), 1);
        assert_eq!(resent[0].node, 1 - node);
        // Its remaining sample still counts when it answers.
        assert_eq!(p.complete(node, &[0]).0, vec![Some(0)]);
        assert_eq!(p.submit([piece(2, 5..6)]).unwrap()[0].node, 1 - node);
    }

    #[test]
    fn the_pool_answers_each_sample_once_through_failures_and_rejoins_under_each_policy() {
        for policy in [DispatchPolicy::Tokens, DispatchPolicy::LeastOutstanding] {
            answers_each_sample_once_through_failures_and_rejoins(policy);
        }
    }

    /// Three nodes, 200 samples, node 2 failing and rejoining now and then,
    /// first tokens for some samples; after every step the dispatcher's
    /// view is current.
    fn answers_each_sample_once_through_failures_and_rejoins(policy: DispatchPolicy) {
        let mut p: Pool<u8> = Pool::new(
            3,
            policy,
            Window {
                samples: 4,
                bytes: u64::MAX,
            },
            1,
        );
        // Prompts of very different lengths, one sample per piece.
        let pieces = (0..200u64).map(|id| Piece {
            query_id: id,
            samples: vec![SampleRef {
                response_id: id,
                index: id as usize,
                bytes: 4 * (8 + (id * 7919) % 1000),
            }],
            tag: 0,
        });
        let mut held: Vec<Vec<u64>> = vec![Vec::new(); 3];
        let take = |sends: Vec<SendTo<u8>>, held: &mut Vec<Vec<u64>>| {
            for s in sends {
                held[s.node].extend(s.piece.samples.iter().map(|x| x.response_id));
            }
        };
        take(p.submit(pieces).unwrap(), &mut held);
        let mut answered = std::collections::HashMap::new();
        for step in 0u64.. {
            assert_view_is_current(&p);
            if p.in_flight() == 0 && p.queued() == 0 {
                break;
            }
            assert!(step < 10_000, "the pool stopped making progress");
            let node = (step % 3) as usize;
            match step % 41 {
                // Node 2 dies now and then, and comes back later.
                7 if p.is_healthy(2) => {
                    take(p.fail(2, "killed").unwrap(), &mut held);
                    held[2].clear();
                }
                29 if !p.is_healthy(2) => take(p.rejoin(2), &mut held),
                // A first token for the oldest sample a node holds.
                s if s.is_multiple_of(5) && !held[node].is_empty() => {
                    p.first_token(node, &held[node][..1]);
                }
                _ => {
                    // Node 0 answers two at a time, the others one.
                    let n = if node == 0 { 2 } else { 1 }.min(held[node].len());
                    let ids: Vec<u64> = held[node].drain(..n).collect();
                    let (tags, sends) = p.complete(node, &ids);
                    for (id, tag) in ids.iter().zip(tags) {
                        if tag.is_some() {
                            *answered.entry(*id).or_insert(0) += 1;
                        }
                    }
                    take(sends, &mut held);
                }
            }
        }
        assert_eq!(answered.len(), 200, "{policy}: every sample answered");
        assert!(
            answered.values().all(|&n| n == 1),
            "{policy}: none answered twice"
        );
    }
}
