//! Token latencies of one IssueQueries call (the LLM benchmarks): when
//! each sample's first token arrived, how many tokens its completion
//! reported, the first tokens kept for the accuracy log, and the runtime
//! errors the official LoadGen logs for a SUT that breaks the token
//! protocol. Written lock-free on the completion path like the rest of
//! the sample table; the error list is locked, but only a faulty SUT
//! reaches it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Error messages kept for the detail log; a SUT that gets every sample
/// wrong still leaves a readable log (the count stays exact).
const MAX_KEPT_ERRORS: usize = 10_000;

/// The official runtime errors of the token protocol, word for word.
pub(crate) mod messages {
    /// A completion came before the sample's first token.
    pub(crate) const COMPLETED_BEFORE_FIRST_TOKEN: &str =
        "Attempted to record a sample latency before it's first token latency";
    /// A first token came after the sample's completion.
    pub(crate) const FIRST_TOKEN_AFTER_COMPLETION: &str =
        "Attempted to record token latency after sample was completed";
    /// A second first token for one sample.
    pub(crate) const TWICE: &str = "Attempted to complete a sample twice.";
    /// A completion with `n_tokens == 0`.
    pub(crate) const NO_TOKEN_COUNT: &str =
        "n_tokens argument missing or attempted to record 0 as number of tokens";
    /// A completion with `n_tokens < 0`.
    pub(crate) const NEGATIVE_TOKEN_COUNT: &str = "Attempted to record a negative number of tokens";
    /// A completion with `n_tokens == 1` (no time per output token).
    pub(crate) const ONE_TOKEN: &str = "Number of tokens need to be greater than 1";
}

/// The token state of every sample of one table.
#[derive(Debug)]
pub(crate) struct TokenTable {
    /// Every scenario but Offline needs a first token before a completion.
    needs_first_token: bool,
    /// When the first token arrived: ns since the table's origin, plus 1
    /// (0: none yet). Set once.
    first_token_at: Vec<AtomicU64>,
    /// `n_tokens` as the SUT reported it (0 until the sample completes:
    /// whether it did is the sample table's done bit, since a SUT may
    /// send any value); the accuracy log shows it unchanged.
    n_tokens: Vec<AtomicI64>,
    /// First-token bytes kept for the accuracy log.
    kept: Vec<OnceLock<Box<[u8]>>>,
    errors: AtomicU64,
    messages: Mutex<Vec<String>>,
}

impl TokenTable {
    /// State for `samples` samples; `keep_first_tokens` when responses are
    /// kept for the accuracy log.
    pub(crate) fn new(samples: usize, needs_first_token: bool, keep_first_tokens: bool) -> Self {
        Self {
            needs_first_token,
            first_token_at: (0..samples).map(|_| AtomicU64::new(0)).collect(),
            n_tokens: (0..samples).map(|_| AtomicI64::new(0)).collect(),
            kept: if keep_first_tokens {
                (0..samples).map(|_| OnceLock::new()).collect()
            } else {
                Vec::new()
            },
            errors: AtomicU64::new(0),
            messages: Mutex::new(Vec::new()),
        }
    }

    /// Whether a completion must follow a first token (not in Offline).
    pub(crate) fn needs_first_token(&self) -> bool {
        self.needs_first_token
    }

    /// Records a runtime error in the official wording.
    pub(crate) fn error(&self, message: impl Into<String>) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < MAX_KEPT_ERRORS {
            kept.push(message.into());
        }
    }

    /// Records `slot`'s first token at `at`, keeping `data` if `keep`;
    /// `completed` says whether the sample already completed.
    pub(crate) fn record_first_token(
        &self,
        slot: usize,
        at: u64,
        data: &[u8],
        keep: bool,
        completed: bool,
    ) {
        if completed {
            return self.error(messages::FIRST_TOKEN_AFTER_COMPLETION);
        }
        let first = self.first_token_at[slot]
            .compare_exchange(0, at + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if !first {
            return self.error(messages::TWICE);
        }
        if keep {
            if let Some(cell) = self.kept.get(slot) {
                let _ = cell.set(data.into());
            }
        }
    }

    /// Records the completion of `slot` (claimed once by the caller) with
    /// the SUT's `n_tokens`, logging what the official logs for it.
    pub(crate) fn record_completion(&self, slot: usize, n_tokens: i64) {
        if self.needs_first_token && self.first_token_at[slot].load(Ordering::Acquire) == 0 {
            self.error(messages::COMPLETED_BEFORE_FIRST_TOKEN);
        }
        match n_tokens {
            0 => self.error(messages::NO_TOKEN_COUNT),
            n if n < 0 => self.error(messages::NEGATIVE_TOKEN_COUNT),
            1 => self.error(messages::ONE_TOKEN),
            _ => {}
        }
        self.n_tokens[slot].store(n_tokens, Ordering::Release);
    }

    /// When `slot`'s first token arrived (ns since origin), if it did.
    pub(crate) fn first_token_at(&self, slot: usize) -> Option<u64> {
        match self.first_token_at[slot].load(Ordering::Acquire) {
            0 => None,
            t => Some(t - 1),
        }
    }

    /// `n_tokens` as the SUT reported it (meaningful once the sample
    /// completed).
    pub(crate) fn reported_tokens(&self, slot: usize) -> i64 {
        self.n_tokens[slot].load(Ordering::Acquire)
    }

    /// The first-token bytes kept for the accuracy log.
    pub(crate) fn kept_first_token(&self, slot: usize) -> Option<&[u8]> {
        self.kept.get(slot).and_then(|c| c.get()).map(|b| &b[..])
    }

    /// How many errors were recorded, and the first of them in order.
    pub(crate) fn errors(&self) -> (u64, Vec<String>) {
        let kept = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        (self.errors.load(Ordering::Relaxed), kept.clone())
    }
}

/// The count the official uses for a time per output token: `n_tokens`
/// as reported, but 0 where it logged an error for a negative or single
/// token (0 stays 0, as it does there).
pub(crate) fn counted_tokens(reported: i64) -> i64 {
    if reported < 0 || reported == 1 {
        0
    } else {
        reported
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_token_then_completion_records_both_without_errors() {
        let t = TokenTable::new(2, true, true);
        t.record_first_token(0, 10, b"tok", true, false);
        t.record_completion(0, 5);
        assert_eq!(t.first_token_at(0), Some(10));
        assert_eq!(t.reported_tokens(0), 5);
        assert_eq!(t.kept_first_token(0), Some(&b"tok"[..]));
        assert_eq!(t.errors().0, 0);
        assert_eq!(t.first_token_at(1), None);
    }

    #[test]
    fn protocol_breaches_get_the_official_messages() {
        let t = TokenTable::new(4, true, false);
        t.record_completion(0, 3);
        t.record_first_token(1, 5, b"", false, false);
        t.record_first_token(1, 6, b"", false, false);
        t.record_first_token(2, 7, b"", false, true);
        t.record_first_token(3, 1, b"", false, false);
        t.record_completion(3, 1);
        let (count, messages) = t.errors();
        assert_eq!(count, 4);
        assert_eq!(
            messages,
            [
                messages::COMPLETED_BEFORE_FIRST_TOKEN,
                messages::TWICE,
                messages::FIRST_TOKEN_AFTER_COMPLETION,
                messages::ONE_TOKEN,
            ]
        );
        // The first of two first tokens counts.
        assert_eq!(t.first_token_at(1), Some(5));
    }

    #[test]
    fn offline_needs_no_first_token_but_checks_counts() {
        let t = TokenTable::new(2, false, false);
        t.record_completion(0, 0);
        t.record_completion(1, -3);
        let (_, messages) = t.errors();
        assert_eq!(
            messages,
            [messages::NO_TOKEN_COUNT, messages::NEGATIVE_TOKEN_COUNT]
        );
        assert_eq!(counted_tokens(-3), 0);
        assert_eq!(counted_tokens(1), 0);
        assert_eq!(counted_tokens(0), 0);
        assert_eq!(counted_tokens(7), 7);
    }
}
