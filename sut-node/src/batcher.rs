//! SUT-side dynamic batching, which the rules allow on the SUT (never in
//! the QDL). Each device thread pulls: it waits for a first sample, then
//! keeps collecting until the batch is full or the first sample has waited
//! `max_wait`, then runs the batch. While devices are busy, samples queue
//! up, so batches fill under load and stay small when the node is idle.

use std::collections::VecDeque;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How large batches get and how long a sample may wait for company.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct BatchPolicy {
    /// Largest batch, in samples.
    pub max_batch_size: usize,
    /// Longest a batch's first sample waits for company, in microseconds.
    pub max_wait_us: u64,
}

impl Default for BatchPolicy {
    fn default() -> Self {
        Self {
            max_batch_size: 64,
            max_wait_us: 0,
        }
    }
}

/// The queue a device thread takes samples from; time is passed in so the
/// policy is tested without sleeping.
pub trait WorkQueue<T> {
    /// Blocks for the next sample; `None` when the node is shutting down.
    fn next(&mut self) -> Option<T>;
    /// The next sample if one arrives before `deadline`.
    fn next_before(&mut self, deadline: Instant) -> Option<T>;
    /// The queue's clock.
    fn now(&self) -> Instant;
}

impl<T> WorkQueue<T> for Receiver<T> {
    fn next(&mut self) -> Option<T> {
        self.recv().ok()
    }

    fn next_before(&mut self, deadline: Instant) -> Option<T> {
        // Take what is already queued first: it costs no waiting.
        if let Ok(item) = self.try_recv() {
            return Some(item);
        }
        let now = Instant::now();
        if deadline <= now {
            return None;
        }
        // Timed out or closed: either way the batch is done.
        self.recv_timeout(deadline - now).ok()
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}

impl BatchPolicy {
    /// Collects one batch: `None` once the queue is closed and empty.
    pub fn collect<T>(&self, queue: &mut impl WorkQueue<T>) -> Option<Vec<T>> {
        let first = queue.next()?;
        let max = self.max_batch_size.max(1);
        let mut batch = Vec::with_capacity(max);
        batch.push(first);
        let deadline = queue.now() + Duration::from_micros(self.max_wait_us);
        while batch.len() < max {
            match queue.next_before(deadline) {
                Some(item) => batch.push(item),
                None => break,
            }
        }
        Some(batch)
    }
}

/// A scripted queue for tests: items arrive at given times.
#[derive(Debug)]
pub struct ScriptedQueue<T> {
    /// The clock, moved by the script.
    pub now: Instant,
    /// Items and when they arrive, in order.
    pub arrivals: VecDeque<(Instant, T)>,
}

impl<T> WorkQueue<T> for ScriptedQueue<T> {
    fn next(&mut self) -> Option<T> {
        let (at, item) = self.arrivals.pop_front()?;
        self.now = self.now.max(at);
        Some(item)
    }

    fn next_before(&mut self, deadline: Instant) -> Option<T> {
        match self.arrivals.front() {
            Some((at, _)) if *at <= deadline => self.next(),
            _ => {
                self.now = self.now.max(deadline);
                None
            }
        }
    }

    fn now(&self) -> Instant {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(offsets_us: &[u64]) -> ScriptedQueue<u64> {
        let t0 = Instant::now();
        ScriptedQueue {
            now: t0,
            arrivals: offsets_us
                .iter()
                .map(|&us| (t0 + Duration::from_micros(us), us))
                .collect(),
        }
    }

    #[test]
    fn queued_samples_fill_a_batch_up_to_the_limit() {
        let policy = BatchPolicy {
            max_batch_size: 4,
            max_wait_us: 0,
        };
        let mut s = queue(&[0, 0, 0, 0, 0, 0]);
        assert_eq!(policy.collect(&mut s).unwrap().len(), 4);
        assert_eq!(policy.collect(&mut s).unwrap().len(), 2);
        assert!(policy.collect(&mut s).is_none());
    }

    #[test]
    fn waits_at_most_max_wait_for_company() {
        let policy = BatchPolicy {
            max_batch_size: 8,
            max_wait_us: 100,
        };
        let mut s = queue(&[0, 50, 99, 150, 300]);
        assert_eq!(policy.collect(&mut s).unwrap(), vec![0, 50, 99]);
        assert_eq!(policy.collect(&mut s).unwrap(), vec![150]);
        assert_eq!(policy.collect(&mut s).unwrap(), vec![300]);
    }

    #[test]
    fn zero_wait_takes_only_what_is_already_there() {
        let policy = BatchPolicy {
            max_batch_size: 8,
            max_wait_us: 0,
        };
        let mut s = queue(&[0, 10]);
        assert_eq!(policy.collect(&mut s).unwrap(), vec![0]);
    }
}
