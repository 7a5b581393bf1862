//! Recording completions: the one path every SUT thread calls.
//!
//! Each IssueQueries call owns a [`SampleTable`] preallocated for all of its
//! samples. Completing a sample is a handful of atomic operations on that
//! table (no locks, no allocation unless the response is kept for the
//! accuracy log, and no system call unless the issuing thread is asleep
//! waiting for exactly this completion), so the SUT never waits on the
//! LoadGen. Everything else (latencies, logs, traces) is derived from the
//! table after the run. Token models add first tokens and token counts
//! ([`tokens`]).

pub(super) mod tokens;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long the issuing thread spins for a completion before it parks.
pub(super) const SPIN_BEFORE_PARK: Duration = Duration::from_micros(200);

/// The SUT gave up on the run (see [`Completer::abort`]); says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SutAborted(pub String);

use crate::sut::{QuerySampleResponse, Responder};
use tokens::TokenTable;

/// Completion state of every sample and query of one IssueQueries call.
#[derive(Debug)]
pub(super) struct SampleTable {
    /// Sequence id of the first sample; response ids are sequence ids.
    first_sequence_id: u64,
    origin: Instant,
    samples_per_query: usize,
    /// One bit per sample, set by the completion that claims it: one
    /// atomic `fetch_or` claims up to 64 consecutive samples.
    done_bits: Vec<AtomicU64>,
    /// Nanoseconds since `origin`, written once by the claiming thread.
    completed_at: Vec<AtomicU64>,
    query_remaining: Vec<AtomicU32>,
    query_done_at: Vec<AtomicU64>,
    samples_completed: AtomicU64,
    /// Slots below this were issued; completions beyond it are refused.
    issued: AtomicUsize,
    queries_completed: AtomicU64,
    /// Responses kept for the accuracy log (empty when none are kept).
    kept: Vec<OnceLock<Box<[u8]>>>,
    keep: KeepPolicy,
    errors: AtomicU64,
    first_error: OnceLock<String>,
    abort: OnceLock<String>,
    waiter: Waiter,
    /// First tokens and token counts, when the test measures them.
    tokens: Option<TokenTable>,
}

/// Which responses are copied for the accuracy log.
#[derive(Debug)]
pub(super) enum KeepPolicy {
    /// No response is kept.
    None,
    /// Every response is kept (accuracy pass).
    All,
    /// One flag per sample, decided at generation time.
    Selected(Vec<bool>),
}

/// What the issuing thread waits for.
#[derive(Clone, Copy, Debug)]
pub(super) enum WaitFor {
    /// Every sample of query `q` completed.
    Query(usize),
    /// `n` samples completed in total.
    Samples(u64),
}

#[derive(Debug)]
struct Waiter {
    /// The issuing thread, set before its first park; read without a lock.
    thread: OnceLock<Thread>,
    parked: AtomicBool,
}

impl SampleTable {
    /// A table for `sample_count` samples whose sequence ids start at
    /// `first_sequence_id`, grouped into queries of `query_sizes` samples
    /// (`samples_per_query` each but perhaps the last); completion times are
    /// measured from `origin`.
    pub(super) fn new(
        first_sequence_id: u64,
        origin: Instant,
        query_sizes: impl ExactSizeIterator<Item = usize>,
        samples_per_query: usize,
        sample_count: usize,
        keep: KeepPolicy,
    ) -> Self {
        let query_remaining: Vec<AtomicU32> =
            query_sizes.map(|n| AtomicU32::new(n as u32)).collect();
        let query_count = query_remaining.len();
        let kept_len = match keep {
            KeepPolicy::None => 0,
            _ => sample_count,
        };
        Self {
            first_sequence_id,
            origin,
            samples_per_query: samples_per_query.max(1),
            done_bits: zeroed_atomics(sample_count.div_ceil(64)),
            completed_at: zeroed_atomics(sample_count),
            query_remaining,
            query_done_at: zeroed_atomics(query_count),
            samples_completed: AtomicU64::new(0),
            issued: AtomicUsize::new(0),
            queries_completed: AtomicU64::new(0),
            kept: (0..kept_len).map(|_| OnceLock::new()).collect(),
            keep,
            errors: AtomicU64::new(0),
            first_error: OnceLock::new(),
            abort: OnceLock::new(),
            waiter: Waiter {
                thread: OnceLock::new(),
                parked: AtomicBool::new(false),
            },
            tokens: None,
        }
    }

    /// Also records first tokens and token counts (`use_token_latencies`);
    /// `needs_first_token` in every scenario but Offline.
    pub(super) fn with_tokens(mut self, needs_first_token: bool) -> Self {
        let keep = !self.kept.is_empty();
        self.tokens = Some(TokenTable::new(
            self.completed_at.len(),
            needs_first_token,
            keep,
        ));
        self
    }

    /// The token state, when the test measures token latencies.
    pub(super) fn tokens(&self) -> Option<&TokenTable> {
        self.tokens.as_ref()
    }

    /// Whether `slot`'s response (and first token) go to the accuracy log.
    fn keeps(&self, slot: usize) -> bool {
        match &self.keep {
            KeepPolicy::None => false,
            KeepPolicy::All => true,
            KeepPolicy::Selected(flags) => flags[slot],
        }
    }

    /// Whether `slot` has completed.
    fn is_done(&self, slot: usize) -> bool {
        self.done_bits[slot / 64].load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    /// Nanoseconds since the run's origin.
    #[inline]
    pub(super) fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// The table slot of a response id, if it belongs to this table.
    fn slot_of(&self, id: u64) -> Option<usize> {
        // Only samples already handed to the SUT can complete: a response
        // id of a generated but unissued sample is as unknown as any other.
        let issued = self.issued.load(Ordering::Acquire);
        id.checked_sub(self.first_sequence_id)
            .map(|i| i as usize)
            .filter(|&i| i < issued)
    }

    /// Samples `0..end` have been (or are being) issued to the SUT.
    pub(super) fn mark_issued(&self, end: usize) {
        self.issued
            .store(end.min(self.completed_at.len()), Ordering::Release);
    }

    /// Claims `group`: consecutive responses with known ids whose slots
    /// lie in one 64-sample word of the done bitmap, each slot once. Records
    /// their time and kept data and returns how many were new; slots
    /// claimed before are reported as double completions.
    fn claim_group(&self, group: &[QuerySampleResponse<'_>], at: u64, settle: &mut Settler) -> u64 {
        let Some(first) = group.first() else { return 0 };
        let slot_of = |r: &QuerySampleResponse<'_>| (r.id - self.first_sequence_id) as usize;
        let word = slot_of(first) / 64;
        let mask = group.iter().fold(0u64, |m, r| m | 1 << (slot_of(r) % 64));
        let before = self.done_bits[word].fetch_or(mask, Ordering::AcqRel);
        let mut claimed = 0;
        for response in group {
            let slot = slot_of(response);
            if before & (1 << (slot % 64)) != 0 {
                self.error(format!(
                    "Attempted to complete a sample twice (response id {}).",
                    response.id
                ));
                continue;
            }
            self.completed_at[slot].store(at, Ordering::Relaxed);
            if let Some(tokens) = &self.tokens {
                tokens.record_completion(slot, response.n_tokens);
            }
            if self.keeps(slot) {
                // Only the claiming thread gets here, so the cell is empty.
                let _ = self.kept[slot].set(response.data.into());
            }
            settle.add(self, slot, at);
            claimed += 1;
        }
        claimed
    }

    /// Counts `n` completed samples of `query` (one atomic operation for a
    /// run of samples of the same query).
    fn settle(&self, query: usize, n: u32, at: u64) {
        if self.query_remaining[query].fetch_sub(n, Ordering::AcqRel) == n {
            self.query_done_at[query].store(at + 1, Ordering::Release);
            self.queries_completed.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn error(&self, message: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let _ = self.first_error.set(message);
    }

    fn wake_issuer(&self) {
        if self.waiter.parked.load(Ordering::SeqCst) {
            if let Some(t) = self.waiter.thread.get() {
                t.unpark();
            }
        }
    }

    fn is_satisfied(&self, what: WaitFor) -> bool {
        match what {
            WaitFor::Query(q) => self.query_done_at[q].load(Ordering::Acquire) != 0,
            WaitFor::Samples(n) => self.samples_completed.load(Ordering::SeqCst) >= n,
        }
    }

    /// Blocks the issuing thread until `what` holds or the SUT aborts the
    /// run. Spins first, for up to [`SPIN_BEFORE_PARK`]: a SingleStream or
    /// MultiStream query through the network comes back within about
    /// that, and waking a parked thread costs 15-25 µs on a VM (a large
    /// share of a query's latency there).
    pub(super) fn wait(&self, what: WaitFor) -> Result<(), SutAborted> {
        let started = Instant::now();
        'spin: loop {
            for _ in 0..64 {
                if self.is_satisfied(what) {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
            if started.elapsed() >= SPIN_BEFORE_PARK || self.abort.get().is_some() {
                break 'spin;
            }
            // A thread woken on this CPU (the QDL's I/O, a local node)
            // runs at once instead of waiting for this one's time slice.
            std::thread::yield_now();
        }
        // One thread issues and waits for the whole table.
        let _ = self.waiter.thread.set(std::thread::current());
        loop {
            if let Some(reason) = self.abort.get() {
                return Err(SutAborted(reason.clone()));
            }
            if self.is_satisfied(what) {
                return Ok(());
            }
            // Announce the nap before the last check, so a completer either
            // sees the flag or we see its completion.
            self.waiter.parked.store(true, Ordering::SeqCst);
            if !self.is_satisfied(what) && self.abort.get().is_none() {
                std::thread::park_timeout(Duration::from_millis(50));
            }
            self.waiter.parked.store(false, Ordering::SeqCst);
        }
    }

    /// Queries whose every sample has completed.
    pub(super) fn queries_completed(&self) -> u64 {
        self.queries_completed.load(Ordering::Acquire)
    }

    /// Completion time of a sample (ns since origin), if it completed.
    pub(super) fn completed_at(&self, slot: usize) -> Option<u64> {
        self.is_done(slot)
            .then(|| self.completed_at[slot].load(Ordering::Relaxed))
    }

    /// Time every sample of query `q` was done (ns since origin).
    pub(super) fn query_done_at(&self, q: usize) -> Option<u64> {
        match self.query_done_at[q].load(Ordering::Acquire) {
            0 => None,
            t => Some(t - 1),
        }
    }

    /// The response bytes kept for the accuracy log.
    pub(super) fn kept_response(&self, slot: usize) -> Option<&[u8]> {
        self.kept.get(slot).and_then(|c| c.get()).map(|b| &b[..])
    }

    /// Completion errors (double or unknown completions) and the first one.
    pub(super) fn errors(&self) -> (u64, Option<&str>) {
        (
            self.errors.load(Ordering::Relaxed),
            self.first_error.get().map(String::as_str),
        )
    }
}

/// Written out before the run starts, so no page is first touched (and
/// faulted in) while samples are completing.
fn zeroed_atomics(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// Accumulates completed samples per query so a run of samples of one
/// query settles with one atomic update (and no division per sample).
#[derive(Default)]
struct Settler {
    query: usize,
    slots: std::ops::Range<usize>,
    pending: u32,
}

impl Settler {
    fn add(&mut self, table: &SampleTable, slot: usize, at: u64) {
        if !self.slots.contains(&slot) {
            self.finish(table, at);
            let spq = table.samples_per_query;
            self.query = slot / spq;
            self.slots = self.query * spq..(self.query + 1) * spq;
        }
        self.pending += 1;
    }

    fn finish(&mut self, table: &SampleTable, at: u64) {
        if self.pending > 0 {
            table.settle(self.query, self.pending, at);
            self.pending = 0;
        }
    }
}

/// The handle a SUT completes samples through (`QuerySamplesComplete`).
/// Cheap to clone; safe to call from any thread.
#[derive(Debug, Clone)]
pub(super) struct Completer {
    table: Arc<SampleTable>,
}

impl Completer {
    pub(crate) fn new(table: Arc<SampleTable>) -> Self {
        Self { table }
    }

    /// Records that these samples are done, all with one timestamp.
    pub(super) fn complete(&self, responses: &[QuerySampleResponse<'_>]) {
        let table = &*self.table;
        let at = table.now_ns();
        let mut settle = Settler::default();
        let mut recorded = 0u64;
        // Consecutive responses whose slots share a word of the done bitmap
        // are claimed with one atomic operation.
        let (mut group_start, mut word, mut mask) = (0, usize::MAX, 0u64);
        for (i, r) in responses.iter().enumerate() {
            let Some(slot) = table.slot_of(r.id) else {
                recorded += table.claim_group(&responses[group_start..i], at, &mut settle);
                table.error(format!(
                    "Received completion for unknown response id {}.",
                    r.id
                ));
                (group_start, word, mask) = (i + 1, usize::MAX, 0);
                continue;
            };
            let bit = 1u64 << (slot % 64);
            if slot / 64 != word || mask & bit != 0 {
                recorded += table.claim_group(&responses[group_start..i], at, &mut settle);
                (group_start, word, mask) = (i, slot / 64, 0);
            }
            mask |= bit;
        }
        recorded += table.claim_group(&responses[group_start..], at, &mut settle);
        settle.finish(table, at);
        table
            .samples_completed
            .fetch_add(recorded, Ordering::SeqCst);
        table.wake_issuer();
    }

    /// Records the first token of each of these samples (the official
    /// `FirstTokenComplete`), all with one timestamp: their time to first
    /// token ends now. Lock-free like [`Completer::complete`]; for a model
    /// without token latencies it records nothing.
    pub(super) fn first_token(&self, responses: &[QuerySampleResponse<'_>]) {
        let table = &*self.table;
        let Some(tokens) = &table.tokens else { return };
        let at = table.now_ns();
        for r in responses {
            match table.slot_of(r.id) {
                Some(slot) => tokens.record_first_token(
                    slot,
                    at,
                    r.data,
                    table.keeps(slot),
                    table.is_done(slot),
                ),
                None => tokens.error(format!(
                    "Received first token for unknown response id {}.",
                    r.id
                )),
            }
        }
    }

    /// Ends the run with an error: the SUT cannot complete what it was given
    /// (for example every node of a network SUT is gone).
    pub(super) fn abort(&self, reason: impl Into<String>) {
        let _ = self.table.abort.set(reason.into());
        if let Some(t) = self.table.waiter.thread.get() {
            t.unpark();
        }
    }
}

/// The SUT's answers go straight into the table.
impl Responder for Completer {
    fn complete(&self, responses: &[QuerySampleResponse<'_>]) {
        Completer::complete(self, responses);
    }

    fn first_token(&self, responses: &[QuerySampleResponse<'_>]) {
        Completer::first_token(self, responses);
    }

    fn abort(&self, reason: String) {
        Completer::abort(self, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(queries: usize, spq: usize, keep: KeepPolicy) -> Arc<SampleTable> {
        issued_table(queries, spq, keep, queries * spq)
    }

    fn issued_table(
        queries: usize,
        spq: usize,
        keep: KeepPolicy,
        issued: usize,
    ) -> Arc<SampleTable> {
        let t = Arc::new(SampleTable::new(
            100,
            Instant::now(),
            std::iter::repeat_n(spq, queries),
            spq,
            queries * spq,
            keep,
        ));
        t.mark_issued(issued);
        t
    }

    #[test]
    fn samples_not_yet_issued_cannot_complete() {
        let t = issued_table(4, 1, KeepPolicy::None, 2);
        let c = Completer::new(t.clone());
        c.complete(&[response(100), response(102)]);
        let (count, first) = t.errors();
        assert_eq!(count, 1);
        assert!(first.unwrap().contains("unknown response id 102"));
        assert!(t.completed_at(0).is_some() && t.completed_at(2).is_none());
    }

    fn response(id: u64) -> QuerySampleResponse<'static> {
        QuerySampleResponse::new(id, b"ok")
    }

    #[test]
    fn completes_queries_and_counts_samples() {
        let t = table(2, 2, KeepPolicy::All);
        let c = Completer::new(t.clone());
        c.complete(&[response(100), response(101)]);
        assert!(t.query_done_at(0).is_some());
        assert!(t.query_done_at(1).is_none());
        assert_eq!(t.queries_completed(), 1);
        assert_eq!(t.kept_response(1), Some(&b"ok"[..]));
        t.wait(WaitFor::Samples(2)).unwrap();
    }

    #[test]
    fn double_and_unknown_completions_are_errors_not_recorded_twice() {
        let t = table(1, 1, KeepPolicy::None);
        let c = Completer::new(t.clone());
        c.complete(&[response(100)]);
        c.complete(&[response(100), response(7), response(101)]);
        let (count, first) = t.errors();
        assert_eq!(count, 3);
        assert!(first.unwrap().contains("twice"));
        assert_eq!(t.queries_completed(), 1);
    }

    #[test]
    fn first_tokens_count_once_and_bad_ones_are_errors_not_panics() {
        let t = Arc::new(
            SampleTable::new(
                100,
                Instant::now(),
                std::iter::repeat_n(1, 3),
                1,
                3,
                KeepPolicy::All,
            )
            .with_tokens(true),
        );
        t.mark_issued(2);
        let c = Completer::new(t.clone());
        let token = |id| QuerySampleResponse::new(id, b"t");
        let done = |id, n_tokens| QuerySampleResponse {
            id,
            data: b"out",
            n_tokens,
        };
        c.first_token(&[token(100)]);
        c.complete(&[done(100, 5)]);
        // Unknown, not yet issued, and finished samples.
        c.first_token(&[token(7), token(102), token(100)]);
        // A completion without a first token, and without a token count.
        c.complete(&[done(101, 0)]);
        let tokens = t.tokens().expect("token table");
        assert!(tokens.first_token_at(0).is_some());
        assert_eq!(tokens.kept_first_token(0), Some(&b"t"[..]));
        assert_eq!(tokens.reported_tokens(0), 5);
        assert_eq!(tokens.reported_tokens(1), 0);
        let (count, messages) = tokens.errors();
        assert_eq!(count, 5, "{messages:?}");
        assert!(messages[0].contains("unknown response id 7"));
        assert!(messages[1].contains("unknown response id 102"));
        assert_eq!(messages[2], tokens::messages::FIRST_TOKEN_AFTER_COMPLETION);
        assert_eq!(messages[3], tokens::messages::COMPLETED_BEFORE_FIRST_TOKEN);
        assert_eq!(messages[4], tokens::messages::NO_TOKEN_COUNT);
        assert_eq!(t.queries_completed(), 2);
    }

    #[test]
    fn waiter_wakes_when_another_thread_completes() {
        let t = table(1, 1, KeepPolicy::None);
        let c = Completer::new(t.clone());
        let h = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            c.complete(&[response(100)]);
        });
        woken_within_seconds(5, move || t.wait(WaitFor::Query(0))).unwrap();
        h.join().unwrap();
    }

    #[test]
    fn abort_ends_a_wait_with_the_reason() {
        let t = table(1, 1, KeepPolicy::None);
        let c = Completer::new(t.clone());
        let h = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            c.abort("all nodes lost");
        });
        let waited = woken_within_seconds(5, move || t.wait(WaitFor::Samples(1)));
        assert_eq!(waited.unwrap_err().0, "all nodes lost");
        h.join().unwrap();
    }

    /// Runs a wait on a thread of its own; a wait that does not end within
    /// `seconds` fails the test instead of hanging it.
    fn woken_within_seconds(
        seconds: u64,
        wait: impl FnOnce() -> Result<(), SutAborted> + Send + 'static,
    ) -> Result<(), SutAborted> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(wait());
        });
        rx.recv_timeout(std::time::Duration::from_secs(seconds))
            .unwrap_or_else(|_| panic!("the wait was not woken within {seconds} s"))
    }
}
