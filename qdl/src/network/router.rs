//! The QDL's core between the LoadGen and the links: it cuts each query
//! into pieces, asks the pool where they go, builds their messages from the
//! QSL's bytes (unchanged), and turns what the links report into
//! completions, failures and re-sends. It owns no socket; the links do.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use netdiv_proto::pb;
use netdiv_proto::sample::completion_output;

use crate::dispatch;
use crate::link::{Link, LinkError, LinkEvents};
use crate::loaded::QslBytes;
use crate::pool::{AllNodesFailed, Piece, Pool, SampleRef, SendTo};
use crate::sink::{CompletionSink, Response};

use super::traffic::{NodeTraffic, Window};

/// Where a sample's completion goes.
pub(super) type Sink = Arc<dyn CompletionSink>;

/// What happened to a node during the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// Its connection failed or it stopped making progress.
    Failed,
    /// It declined work (shutting down, or full).
    Declining,
    /// It was reconnected, checked to be the same node, and takes work.
    Rejoined,
    /// It answered again, but as a different node; it stays out.
    Refused,
}

impl NodeState {
    /// The state as the run record and logs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Failed => "failed",
            NodeState::Declining => "declining",
            NodeState::Rejoined => "rejoined",
            NodeState::Refused => "refused",
        }
    }
}

/// One change of a node's state, for the run record.
#[derive(Clone, Debug)]
pub struct NodeStateChange {
    /// The node, by its index in the configured order.
    pub node: usize,
    /// When, from the QDL's start.
    pub at: Duration,
    /// What it became.
    pub state: NodeState,
    /// Why, as the QDL saw it.
    pub detail: String,
}

/// Routes queries to nodes and completions back to their sinks.
pub(super) struct QueryRouter {
    pub(super) urls: Vec<String>,
    /// Each node's current connection; a rejoin replaces it.
    links: Vec<RwLock<Arc<Link>>>,
    /// Which connection of each node is current: events from an older one
    /// (late answers after a rejoin) are not heard.
    generations: Vec<AtomicU64>,
    pool: Mutex<Pool<Sink>>,
    pub(super) store: Arc<dyn QslBytes>,
    max_piece_samples: usize,
    max_piece_bytes: u64,
    /// Largest decoded response (the benchmark's message limit).
    max_response_bytes: u64,
    /// Submission mode: a node that fails ends the run (no failover).
    pub(super) no_failover: bool,
    /// `QdlConfig::poll_next_query`.
    pub(super) poll_next_query: Duration,
    next_query: AtomicU64,
    /// Queries handed to links, counted so that a thread polling for the
    /// LoadGen's next query sees it handed over, not only issued.
    handed_over: AtomicU64,
    /// Set at the end of a run: links closing then are not failures.
    pub(super) closing: AtomicBool,
    pub(super) completed: AtomicU64,
    pub(super) late_answers: AtomicU64,
    /// Samples the QDL cancelled at a node (taken back from it while it
    /// was still connected), and the node's confirmations of them.
    pub(super) cancels_sent: AtomicU64,
    pub(super) cancels_confirmed: AtomicU64,
    pub(super) first_tokens: AtomicU64,
    /// What crossed the fabric, per node, and when.
    pub(super) traffic: Vec<NodeTraffic>,
    pub(super) window: Window,
    /// Every node state change, in order.
    changes: Mutex<Vec<NodeStateChange>>,
    /// Times each node rejoined.
    pub(super) rejoins: Vec<AtomicU64>,
    /// No node was left and the waiting samples were failed: the run is
    /// over, nothing rejoins.
    pub(super) stranded: AtomicBool,
    started: Instant,
}

/// A failed sample's reason names its node and id.
fn sample_failure(url: &str, id: u64, what: &dyn std::fmt::Display) -> String {
    format!("node {url}, sample {id}: {what}")
}

/// Tells each distinct sink in `sinks` once.
fn tell_once(sinks: impl IntoIterator<Item = Sink>, reason: impl Fn() -> String) {
    let mut told: Vec<Sink> = Vec::new();
    for sink in sinks {
        if !told.iter().any(|s| Arc::ptr_eq(s, &sink)) {
            sink.fail(&reason());
            told.push(sink);
        }
    }
}

impl QueryRouter {
    pub(super) fn new(
        urls: Vec<String>,
        links: Vec<Link>,
        pool: Pool<Sink>,
        store: Arc<dyn QslBytes>,
        max_piece_samples: usize,
        max_piece_bytes: u64,
        max_response_bytes: u64,
    ) -> QueryRouter {
        let node_count = links.len();
        QueryRouter {
            urls,
            links: links
                .into_iter()
                .map(|l| RwLock::new(Arc::new(l)))
                .collect(),
            generations: (0..node_count).map(|_| AtomicU64::new(0)).collect(),
            pool: Mutex::new(pool),
            store,
            max_piece_samples,
            max_piece_bytes,
            max_response_bytes,
            no_failover: false,
            poll_next_query: Duration::ZERO,
            next_query: AtomicU64::new(1),
            handed_over: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            completed: AtomicU64::new(0),
            late_answers: AtomicU64::new(0),
            cancels_sent: AtomicU64::new(0),
            cancels_confirmed: AtomicU64::new(0),
            first_tokens: AtomicU64::new(0),
            traffic: (0..node_count).map(|_| NodeTraffic::default()).collect(),
            window: Window::new(),
            changes: Mutex::new(Vec::new()),
            rejoins: (0..node_count).map(|_| AtomicU64::new(0)).collect(),
            stranded: AtomicBool::new(false),
            started: Instant::now(),
        }
    }

    /// The run ended, or no node was left: nodes are not brought back.
    pub(super) fn is_over(&self) -> bool {
        self.closing.load(Ordering::Acquire) || self.stranded.load(Ordering::Acquire)
    }

    /// `node`'s current connection.
    pub(super) fn link(&self, node: usize) -> RwLockReadGuard<'_, Arc<Link>> {
        self.links[node].read().unwrap_or_else(|e| e.into_inner())
    }

    /// Every node's current connection, in node order.
    pub(super) fn current_links(&self) -> Vec<Arc<Link>> {
        (0..self.node_count())
            .map(|i| self.link(i).clone())
            .collect()
    }

    /// Makes `link` `node`'s current connection: events from the one it
    /// replaces are dropped from now on. Returns the replaced one.
    pub(super) fn replace_link(&self, node: usize, link: Arc<Link>, generation: u64) -> Arc<Link> {
        self.generations[node].store(generation, Ordering::Release);
        let mut current = self.links[node].write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *current, link)
    }

    /// A generation number for `node`'s next connection.
    pub(super) fn next_generation(&self, node: usize) -> u64 {
        self.generations[node].load(Ordering::Acquire) + 1
    }

    /// Whether events of `node`'s connection `generation` still count.
    fn is_current(&self, node: usize, generation: u64) -> bool {
        self.generations[node].load(Ordering::Acquire) == generation
    }

    /// Notes a node state change for the run record.
    pub(super) fn record_change(&self, node: usize, state: NodeState, detail: String) {
        let change = NodeStateChange {
            node,
            at: self.started.elapsed(),
            state,
            detail,
        };
        self.changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(change);
    }

    /// The node state changes so far, in order.
    pub(super) fn changes(&self) -> Vec<NodeStateChange> {
        self.changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Tells `node`'s current connection to drop `ids`, which are being
    /// taken back from it: a node still alive would otherwise spend its
    /// batch on answers nobody reads.
    pub(super) fn cancel_at(&self, node: usize, ids: &[u64]) {
        if ids.is_empty() {
            return;
        }
        self.cancels_sent
            .fetch_add(ids.len() as u64, Ordering::Relaxed);
        tracing::debug!(
            node = %self.urls[node],
            samples = ids.len(),
            event = "samples_cancelled",
            "samples taken back from the node are cancelled there"
        );
        self.link(node).cancel(ids);
    }

    /// `node`'s token count moved (token models).
    fn token_progress(&self, node: usize, tokens_generated: u64) {
        self.lock_pool().token_progress(node, tokens_generated);
    }

    /// `node` is back: it takes work again, and what waited goes out.
    pub(super) fn rejoined(&self, node: usize) {
        let sends = self.lock_pool().rejoin(node);
        self.rejoins[node].fetch_add(1, Ordering::Relaxed);
        self.send(sends);
    }

    pub(super) fn node_count(&self) -> usize {
        self.links.len()
    }

    pub(super) fn lock_pool(&self) -> MutexGuard<'_, Pool<Sink>> {
        // The pool's invariants hold between calls; a panic elsewhere
        // while it was locked leaves it usable.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues one LoadGen query of `(response id, QSL index)` pairs.
    pub(super) fn issue(&self, samples: &[(u64, usize)], sink: &Sink) {
        let query_id = self.next_query.fetch_add(1, Ordering::Relaxed);
        let mut refs = Vec::with_capacity(samples.len());
        let mut not_loaded = None;
        self.store.with_loaded(&mut |loaded| {
            for &(response_id, index) in samples {
                let Some(stored) = loaded.get(index) else {
                    not_loaded = Some(index);
                    return;
                };
                refs.push(SampleRef {
                    response_id,
                    index,
                    bytes: stored.data.len() as u64,
                });
            }
        });
        if let Some(index) = not_loaded {
            sink.fail(&format!(
                "QSL sample {index} was issued but is not loaded (LoadSamplesToRam)"
            ));
            return;
        }
        let sizes: Vec<u64> = refs.iter().map(|r| r.bytes).collect();
        let ranges = dispatch::pieces(&sizes, self.max_piece_samples, self.max_piece_bytes);
        let pieces: Vec<Piece<Sink>> = if ranges.len() == 1 {
            vec![Piece {
                query_id,
                samples: refs,
                tag: sink.clone(),
            }]
        } else {
            ranges
                .into_iter()
                .map(|r| Piece {
                    query_id,
                    samples: refs[r].to_vec(),
                    tag: sink.clone(),
                })
                .collect()
        };
        let result = self.lock_pool().submit(pieces);
        self.send_or_strand(result);
    }

    /// Builds each piece's message from the QSL's bytes, unchanged, and
    /// hands it to its node's link.
    fn send(&self, sends: Vec<SendTo<Sink>>) {
        if sends.is_empty() {
            return;
        }
        let mut missing = Vec::new();
        let mut queries: Vec<(usize, pb::Query)> = Vec::with_capacity(sends.len());
        self.store.with_loaded(&mut |loaded| {
            queries.extend(sends.iter().map(|&SendTo { node, ref piece }| {
                let samples = piece
                    .samples
                    .iter()
                    .filter_map(|s| match loaded.get(s.index) {
                        Some(stored) => Some(pb::Sample {
                            response_id: s.response_id,
                            data: stored.data.clone(),
                            codec: stored.codec.to_proto() as i32,
                            decoded_size: stored.decoded_size,
                        }),
                        None => {
                            missing.push((node, s.response_id, s.index));
                            None
                        }
                    })
                    .collect();
                let query = pb::Query {
                    query_id: piece.query_id,
                    samples,
                    ..Default::default()
                };
                (node, query)
            }));
        });
        for (node, query) in queries {
            let wire: u64 = query.samples.iter().map(|s| s.data.len() as u64).sum();
            let decoded: u64 = query.samples.iter().map(|s| s.decoded_size).sum();
            self.traffic[node].sent(query.samples.len() as u64, wire, decoded);
            self.window.sent();
            self.link(node).send(query);
            // Counted only where a thread may poll for it.
            if !self.poll_next_query.is_zero() {
                self.handed_over.fetch_add(1, Ordering::Release);
            }
        }
        for (node, id, index) in missing {
            self.fail_samples(
                node,
                &[id],
                &format!("QSL sample {index} was unloaded while in use"),
            );
        }
    }

    fn send_or_strand(&self, result: Result<Vec<SendTo<Sink>>, AllNodesFailed>) {
        match result {
            Ok(sends) => self.send(sends),
            Err(e) => self.strand(e),
        }
    }

    /// Ends the samples `ids` of `node` for good and tells their sinks.
    fn fail_samples(&self, node: usize, ids: &[u64], reason: &dyn std::fmt::Display) {
        let (tags, sends) = self.lock_pool().complete(node, ids);
        self.send(sends);
        let failed = ids.iter().zip(tags).filter_map(|(id, t)| Some((*id, t?)));
        let mut told: Vec<Sink> = Vec::new();
        for (id, sink) in failed {
            if !told.iter().any(|s| Arc::ptr_eq(s, &sink)) {
                sink.fail(&sample_failure(&self.urls[node], id, reason));
                told.push(sink);
            }
        }
    }

    /// No node is left: fail every sink that still waits.
    fn strand(&self, error: AllNodesFailed) {
        self.stranded.store(true, Ordering::Release);
        let sinks = self.lock_pool().strand();
        let reason = format!("{error} (nodes: {})", self.urls.join(", "));
        tell_once(sinks, || reason.clone());
    }

    /// `node` is gone: its samples go to the others.
    pub(super) fn fail_node(&self, node: usize, error: LinkError) {
        if self.closing.load(Ordering::Acquire) {
            return;
        }
        let reason = error.to_string();
        if self.no_failover {
            // A submission's result cannot rest on a run that lost a node:
            // it is marked failed, and nothing it held goes elsewhere.
            let (held, sinks) = {
                let mut pool = self.lock_pool();
                let held = pool.outstanding_ids(node);
                let _never_sent = pool.fail(node, &reason);
                (held, pool.strand())
            };
            self.cancel_at(node, &held);
            let reason = format!(
                "node {} failed ({reason}); in submission mode a run that loses a node \
                 is not a result (no failover)",
                self.urls[node]
            );
            tell_once(sinks, || reason.clone());
            return;
        }
        let (held, result) = {
            let mut pool = self.lock_pool();
            let first = pool.is_healthy(node);
            let held = pool.outstanding_ids(node);
            let result = pool.fail(node, &reason);
            if first {
                tracing::warn!(
                    node = %self.urls[node],
                    event = "node_failed",
                    "node failed ({reason}); its outstanding samples go to the other nodes"
                );
                self.record_change(node, NodeState::Failed, reason.clone());
            }
            (held, result)
        };
        // Before the re-sends: the node frees its sequences first.
        self.cancel_at(node, &held);
        self.send_or_strand(result);
    }

    /// Hands each run of outputs bound for one sink over in one call (to
    /// `hand_over`: the sink's `complete` or `first_token`); returns how
    /// many were late (their sample had moved on).
    fn deliver(
        &self,
        outputs: &[&Output],
        tags: Vec<Option<Sink>>,
        hand_over: impl Fn(&Sink, &[Response<'_>]),
    ) -> u64 {
        let mut batch: Vec<Response<'_>> = Vec::with_capacity(outputs.len());
        let mut batch_sink: Option<Sink> = None;
        let mut late = 0u64;
        for (output, tag) in outputs.iter().zip(tags) {
            let Some(sink) = tag else {
                late += 1;
                continue;
            };
            if let Some(current) = &batch_sink {
                if !Arc::ptr_eq(current, &sink) {
                    hand_over(current, &batch);
                    batch.clear();
                }
            }
            batch.push(Response {
                response_id: output.id,
                data: &output.data,
                n_tokens: output.n_tokens,
            });
            batch_sink = Some(sink);
        }
        if let Some(sink) = batch_sink {
            hand_over(&sink, &batch);
        }
        late
    }
}

/// One connection's events, passed on while it is its node's current
/// connection: after a rejoin the old connection's late answers and its
/// failure are not heard, so a sample cannot complete from two connections
/// and the new one is not failed for the old one's death.
pub(super) struct CurrentLink {
    pub(super) router: Arc<QueryRouter>,
    pub(super) generation: u64,
}

impl LinkEvents for CurrentLink {
    fn completions(&self, node: usize, completions: Vec<pb::Completion>) {
        if self.router.is_current(node, self.generation) {
            self.router.completions(node, completions);
        } else {
            self.router
                .late_answers
                .fetch_add(completions.len() as u64, Ordering::Relaxed);
        }
    }

    fn token_progress(&self, node: usize, tokens_generated: u64) {
        if self.router.is_current(node, self.generation) {
            self.router.token_progress(node, tokens_generated);
        }
    }

    fn failed(&self, node: usize, error: LinkError) {
        if self.router.is_current(node, self.generation) {
            self.router.fail_node(node, error);
        }
    }

    fn refused(&self, node: usize, ids: Vec<u64>, error: LinkError) {
        if self.router.is_current(node, self.generation) {
            self.router.fail_samples(node, &ids, &error);
        }
    }
}

/// A decoded answer from a node: a completion or a first token.
struct Output {
    id: u64,
    data: bytes::Bytes,
    n_tokens: i64,
}

/// A batch of answers from one node, sorted by what each is.
#[derive(Default)]
struct Answers {
    /// Outputs and first tokens (`true`), decoded, in the order the node
    /// sent them: a first token sent after its sample's completion must
    /// reach the LoadGen after it too (where it is an error), not be moved
    /// ahead.
    outputs: Vec<(bool, Output)>,
    /// Samples the node declined (retryable), and its reason.
    declined: Vec<u64>,
    decline_reason: String,
    /// Samples the node could not run, or whose answer was refused.
    broken: Vec<(u64, String)>,
    /// Samples the node confirms it dropped on the QDL's cancel.
    cancelled: Vec<u64>,
}

impl QueryRouter {
    /// Answers (outputs, first tokens, per-sample errors, cancels) from
    /// `node`'s current connection.
    fn completions(&self, node: usize, completions: Vec<pb::Completion>) {
        let answers = self.sort_answers(node, completions);
        self.cancels_confirmed(node, answers.cancelled);
        for run in answers.outputs.chunk_by(|a, b| a.0 == b.0) {
            let ids: Vec<u64> = run.iter().map(|(_, o)| o.id).collect();
            let outputs: Vec<&Output> = run.iter().map(|(_, o)| o).collect();
            if run[0].0 {
                self.first_tokens_of(node, &ids, &outputs);
            } else {
                self.outputs_of(node, &ids, &outputs);
            }
        }
        for (id, error) in answers.broken {
            self.fail_samples(node, &[id], &error);
        }
        if !answers.declined.is_empty() {
            self.declined_by(node, &answers.declined, &answers.decline_reason);
        }
    }

    /// Decodes (timed) and sorts a batch of answers, and counts its
    /// traffic.
    fn sort_answers(&self, node: usize, completions: Vec<pb::Completion>) -> Answers {
        let benchmark = self.store.benchmark();
        let mut sorted = Answers {
            outputs: Vec::with_capacity(completions.len()),
            ..Answers::default()
        };
        let count = completions.len() as u64;
        let wire: u64 = completions.iter().map(|c| c.data.len() as u64).sum();
        let mut decoded = 0u64;
        for c in completions {
            let id = c.response_id;
            if c.cancelled {
                sorted.cancelled.push(id);
                continue;
            }
            if !c.error.is_empty() {
                if c.retryable {
                    sorted.declined.push(id);
                    sorted.decline_reason = c.error;
                } else {
                    sorted.broken.push((id, c.error));
                }
                continue;
            }
            let first_token = c.first_token;
            let n_tokens = if first_token { 0 } else { c.n_tokens };
            match completion_output(c, benchmark, self.max_response_bytes) {
                Ok(data) => {
                    decoded += data.len() as u64;
                    sorted
                        .outputs
                        .push((first_token, Output { id, data, n_tokens }))
                }
                Err(e) => sorted.broken.push((id, format!("response refused: {e}"))),
            }
        }
        self.traffic[node].received(count, wire, decoded);
        self.window.answered();
        sorted
    }

    /// The node dropped these samples on the QDL's cancel: they were taken
    /// back from it, so the answers count for nothing; one the QDL still
    /// counts on that node is an answer it never asked for.
    fn cancels_confirmed(&self, node: usize, cancelled: Vec<u64>) {
        if cancelled.is_empty() {
            return;
        }
        self.cancels_confirmed
            .fetch_add(cancelled.len() as u64, Ordering::Relaxed);
        let unasked: Vec<u64> = {
            let pool = self.lock_pool();
            cancelled
                .into_iter()
                .filter(|id| pool.timing(node, *id).is_some())
                .collect()
        };
        for id in unasked {
            self.fail_samples(
                node,
                &[id],
                &"the node cancelled a sample the QDL did not cancel",
            );
        }
    }

    /// First tokens from `node`: those that count go to their sinks, and
    /// time the node's TTFT.
    fn first_tokens_of(&self, node: usize, ids: &[u64], outputs: &[&Output]) {
        let tags = {
            let mut pool = self.lock_pool();
            let tags = pool.first_token(node, ids);
            // Counted first tokens only: the node's TTFT.
            for (id, tag) in ids.iter().zip(&tags) {
                if let (Some(_), Some(t)) = (tag, pool.timing(node, *id)) {
                    let first = t.first_token_at.unwrap_or(t.sent_at);
                    let us = first.saturating_duration_since(t.sent_at).as_micros();
                    self.traffic[node].first_token(us as u64);
                }
            }
            tags
        };
        let late = self.deliver(outputs, tags, |sink, batch| sink.first_token(batch));
        self.first_tokens
            .fetch_add(ids.len() as u64 - late, Ordering::Relaxed);
    }

    /// Completions from `node`: those that count go to their sinks, free
    /// room for what waits, and are timed.
    fn outputs_of(&self, node: usize, ids: &[u64], outputs: &[&Output]) {
        let (tags, sends, poll_from) = {
            let mut pool = self.lock_pool();
            // Only answers that count are timed (the sample is
            // outstanding here); the pool decides, as before.
            let now = Instant::now();
            for output in outputs {
                if let Some(t) = pool.timing(node, output.id) {
                    self.traffic[node].completed(t, now, output.n_tokens);
                }
            }
            let (tags, sends) = pool.complete(node, ids);
            // The last answer in flight: the queries handed over so far,
            // read before the LoadGen has the answer and can issue more.
            // Checked only when polling (in_flight sums every node).
            let last =
                !self.poll_next_query.is_zero() && pool.in_flight() == 0 && pool.queued() == 0;
            let poll_from = last.then(|| self.handed_over.load(Ordering::Acquire));
            (tags, sends, poll_from)
        };
        self.send(sends);
        let late = self.deliver(outputs, tags, |sink, batch| sink.complete(batch));
        self.completed
            .fetch_add(ids.len() as u64 - late, Ordering::Relaxed);
        self.late_answers.fetch_add(late, Ordering::Relaxed);
        if let Some(handed_over) = poll_from {
            self.poll_for_next_query(handed_over);
        }
    }

    /// Spins, up to `poll_next_query`, until a query after the first
    /// `handed_over` reaches a link: the thread then goes on to send it
    /// instead of sleeping and being woken for it.
    fn poll_for_next_query(&self, handed_over: u64) {
        let start = Instant::now();
        while self.handed_over.load(Ordering::Acquire) == handed_over {
            if start.elapsed() >= self.poll_next_query {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// `node` declined these samples: it gets no more work until it
    /// rejoins, and they go to the others.
    fn declined_by(&self, node: usize, declined: &[u64], reason: &str) {
        let result = {
            let mut pool = self.lock_pool();
            if pool.is_healthy(node) {
                tracing::warn!(
                    node = %self.urls[node],
                    event = "node_declines",
                    "node declines work ({reason}); it gets no more until it rejoins, and what it declines goes to the other nodes"
                );
                self.record_change(node, NodeState::Declining, reason.to_string());
            }
            pool.decline(node, declined, reason)
        };
        self.send_or_strand(result);
    }
}
