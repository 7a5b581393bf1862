//! Continuous batching, with no clock and no I/O: which sequences run in
//! each step, how long the step takes, and which tokens it produces.
//!
//! A step is one pass of the model. Sequences admitted at the start of a
//! step are prefilled in it (their whole prompt, at a cost per prompt
//! token) and end it with their first token; every sequence already
//! running gains one more token (one decode step, at a fixed cost however
//! many sequences run). A sequence leaves the moment its last token
//! exists, and a waiting one takes its place at the next step. At most
//! `max_sequences` run at once; the rest wait in arrival order.
//!
//! The caller owns time: [`Scheduler::begin_step`] says how long the step
//! takes, and the caller calls [`Scheduler::end_step`] once that time has
//! passed (the device thread, `super::driver`) or at once (tests, which
//! add the durations up on a virtual clock).

use std::collections::VecDeque;
use std::time::Duration;

/// What a step costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepCost {
    /// Prefill time per prompt token, in nanoseconds.
    pub prefill_ns_per_token: f64,
    /// One decode step, in nanoseconds.
    pub decode_ns_per_step: f64,
}

/// One sequence: a caller's item, its prompt and how many tokens it
/// answers with.
#[derive(Debug)]
struct Sequence<T> {
    item: T,
    prompt_tokens: usize,
    output_tokens: usize,
    produced: usize,
}

/// What a step produced, in the order the caller should send it.
#[derive(Debug, PartialEq, Eq)]
pub enum StepEvent<'a, T> {
    /// A sequence's prefill ended with its first token.
    FirstToken(&'a T),
    /// A sequence produced its last token and left.
    Done(T),
}

/// A step begun.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// How long it takes.
    pub duration: Duration,
    /// Sequences in it (prefilling and decoding).
    pub sequences: usize,
    /// Sequences admitted (prefilled) in it.
    pub admitted: usize,
}

/// The continuous-batching state of one device.
#[derive(Debug)]
pub struct Scheduler<T> {
    cost: StepCost,
    max_sequences: usize,
    waiting: VecDeque<Sequence<T>>,
    /// Sequences with a first token, gaining one per step.
    decoding: Vec<Sequence<T>>,
    /// Sequences admitted into the step in progress.
    prefilling: Vec<Sequence<T>>,
    in_step: bool,
}

impl<T> Scheduler<T> {
    /// An idle device that runs up to `max_sequences` (at least 1) at once.
    pub fn new(cost: StepCost, max_sequences: usize) -> Self {
        Self {
            cost,
            max_sequences: max_sequences.max(1),
            waiting: VecDeque::new(),
            decoding: Vec::new(),
            prefilling: Vec::new(),
            in_step: false,
        }
    }

    /// Queues a sequence; it is admitted at the start of a step with a
    /// free slot. `output_tokens` of 0 counts as 1: a sequence always
    /// has a first token.
    pub fn push(&mut self, item: T, prompt_tokens: usize, output_tokens: usize) {
        self.waiting.push_back(Sequence {
            item,
            prompt_tokens,
            output_tokens: output_tokens.max(1),
            produced: 0,
        });
    }

    /// Sequences that could still be pushed without waiting: slots not
    /// taken by running or queued ones.
    pub fn free_slots(&self) -> usize {
        self.max_sequences
            .saturating_sub(self.running() + self.waiting.len())
    }

    /// Sequences running (prefilling or decoding).
    pub fn running(&self) -> usize {
        self.decoding.len() + self.prefilling.len()
    }

    /// Sequences queued for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// No sequence runs or waits.
    pub fn is_idle(&self) -> bool {
        self.running() == 0 && self.waiting.is_empty()
    }

    /// Takes out every sequence, waiting or running, whose item `gone`
    /// says is no longer wanted (its client cancelled it), in admission
    /// order; their slots are free for the next step. Not during a step.
    pub fn remove_where(&mut self, mut gone: impl FnMut(&T) -> bool) -> Vec<T> {
        assert!(!self.in_step, "remove_where during a step");
        let mut removed = Vec::new();
        if !self
            .decoding
            .iter()
            .chain(&self.waiting)
            .any(|s| gone(&s.item))
        {
            return removed;
        }
        let mut keep = |list: &mut Vec<Sequence<T>>| {
            let (out, kept): (Vec<_>, Vec<_>) = list.drain(..).partition(|s| gone(&s.item));
            *list = kept;
            removed.extend(out.into_iter().map(|s| s.item));
        };
        keep(&mut self.decoding);
        let mut waiting: Vec<Sequence<T>> = self.waiting.drain(..).collect();
        keep(&mut waiting);
        self.waiting = waiting.into();
        removed
    }

    /// Starts a step: admits waiting sequences into free slots and says
    /// how long the step takes; `None` when there is nothing to run. A
    /// step begun must be ended before the next one begins.
    pub fn begin_step(&mut self) -> Option<Step> {
        assert!(!self.in_step, "begin_step twice without end_step");
        while self.running() < self.max_sequences {
            let Some(s) = self.waiting.pop_front() else {
                break;
            };
            self.prefilling.push(s);
        }
        if self.running() == 0 {
            return None;
        }
        let prompt: usize = self.prefilling.iter().map(|s| s.prompt_tokens).sum();
        let mut ns = prompt as f64 * self.cost.prefill_ns_per_token;
        if !self.decoding.is_empty() {
            ns += self.cost.decode_ns_per_step;
        }
        self.in_step = true;
        Some(Step {
            duration: Duration::from_nanos(ns.max(0.0).round() as u64),
            sequences: self.running(),
            admitted: self.prefilling.len(),
        })
    }

    /// Ends the step begun: first tokens of the sequences prefilled in it
    /// (in admission order), then the sequences that produced their last
    /// token (a sequence of one token has both, in that order). Each
    /// sequence gets exactly one `FirstToken`, then exactly one `Done`.
    pub fn end_step(&mut self, mut emit: impl FnMut(StepEvent<'_, T>)) {
        if !std::mem::take(&mut self.in_step) {
            return;
        }
        for s in &mut self.prefilling {
            s.produced = 1;
            emit(StepEvent::FirstToken(&s.item));
        }
        let mut i = 0;
        while i < self.decoding.len() {
            let s = &mut self.decoding[i];
            s.produced += 1;
            if s.produced >= s.output_tokens {
                // Keep the others in admission order.
                emit(StepEvent::Done(self.decoding.remove(i).item));
            } else {
                i += 1;
            }
        }
        for s in self.prefilling.drain(..) {
            if s.produced >= s.output_tokens {
                emit(StepEvent::Done(s.item));
            } else {
                self.decoding.push(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_sequences_free_their_slots_and_are_never_answered() {
        let mut s = Scheduler::new(COST, 2);
        for id in 0..4u32 {
            s.push(id, 1, 100);
        }
        s.begin_step().unwrap();
        s.end_step(|_| {});
        assert_eq!((s.running(), s.waiting()), (2, 2));
        // 0 runs, 3 waits: both go, and 2 takes 0's slot.
        assert_eq!(s.remove_where(|&id| id == 0 || id == 3), vec![0, 3]);
        let step = s.begin_step().unwrap();
        assert_eq!((step.sequences, step.admitted), (2, 1));
        let mut seen = Vec::new();
        s.end_step(|e| {
            if let StepEvent::FirstToken(&id) = e {
                seen.push(id)
            }
        });
        assert_eq!(seen, vec![2]);
    }

    /// 20 µs per prompt token, 2 ms per decode step.
    const COST: StepCost = StepCost {
        prefill_ns_per_token: 20_000.0,
        decode_ns_per_step: 2_000_000.0,
    };

    /// A sequence arriving at `at_us`: (id, prompt, output tokens).
    type Arrival = (u64, u32, usize, usize);

    /// What happened, on the virtual clock (µs).
    #[derive(Debug, PartialEq, Eq, Clone, Copy)]
    enum Seen {
        First(u32, u64),
        Done(u32, u64),
    }

    /// Runs arrivals through a scheduler the way the device thread does:
    /// idle, it waits for the next arrival; busy, it admits what has
    /// arrived before each step; each step ends after its duration.
    /// Returns the events and the most sequences seen in one step.
    fn simulate(cost: StepCost, max: usize, mut arrivals: Vec<Arrival>) -> (Vec<Seen>, usize) {
        arrivals.sort_by_key(|a| a.0);
        let mut arrivals: VecDeque<Arrival> = arrivals.into();
        let mut s = Scheduler::new(cost, max);
        let mut now = 0u64;
        let mut seen = Vec::new();
        let mut widest = 0;
        loop {
            if s.is_idle() {
                match arrivals.front() {
                    Some(a) => now = now.max(a.0),
                    None => break,
                }
            }
            while arrivals.front().is_some_and(|a| a.0 <= now) {
                let (_, id, prompt, output) = arrivals.pop_front().unwrap();
                s.push(id, prompt, output);
            }
            let Some(step) = s.begin_step() else { continue };
            assert!(step.sequences <= max);
            widest = widest.max(step.sequences);
            now += step.duration.as_micros() as u64;
            s.end_step(|e| {
                seen.push(match e {
                    StepEvent::FirstToken(&id) => Seen::First(id, now),
                    StepEvent::Done(id) => Seen::Done(id, now),
                })
            });
        }
        (seen, widest)
    }

    #[test]
    fn prefill_then_one_decode_step_per_token() {
        // 100 prompt tokens: 2 ms of prefill ends with token 1; tokens 2
        // and 3 take a decode step each.
        let (seen, _) = simulate(COST, 4, vec![(0, 1, 100, 3)]);
        assert_eq!(seen, [Seen::First(1, 2000), Seen::Done(1, 6000)]);
        // Time per output token: (6000 - 2000) / (3 - 1) = one step.
    }

    #[test]
    fn continuous_batching_admits_new_sequences_between_steps() {
        // A runs alone; B arrives during A's second step and joins at the
        // next one, whose prefill makes that step longer for both; B,
        // shorter, leaves first while A goes on.
        let (seen, widest) = simulate(COST, 4, vec![(0, 1, 100, 5), (3000, 2, 50, 2)]);
        assert_eq!(
            seen,
            [
                Seen::First(1, 2000),
                // Step 4000..7000: A's third token, B's 1 ms prefill.
                Seen::First(2, 7000),
                Seen::Done(2, 9000),
                Seen::Done(1, 11000),
            ]
        );
        assert_eq!(widest, 2);
    }

    #[test]
    fn max_sequences_is_honoured_and_the_rest_wait_in_order() {
        let arrivals = (0..5).map(|i| (0, i, 10, 4)).collect();
        let (seen, widest) = simulate(COST, 2, arrivals);
        assert_eq!(widest, 2);
        let firsts: Vec<u32> = seen
            .iter()
            .filter_map(|e| match e {
                Seen::First(id, _) => Some(*id),
                _ => None,
            })
            .collect();
        assert_eq!(firsts, [0, 1, 2, 3, 4]);
        // Sequence 2 starts only once 0 and 1 have left.
        let done_1 = seen
            .iter()
            .position(|e| matches!(e, Seen::Done(1, _)))
            .unwrap();
        let first_2 = seen
            .iter()
            .position(|e| matches!(e, Seen::First(2, _)))
            .unwrap();
        assert!(done_1 < first_2, "{seen:?}");
    }

    #[test]
    fn every_sequence_gets_one_first_token_then_one_completion() {
        // A busy mix: uneven prompts and outputs, arrivals while busy.
        let arrivals: Vec<Arrival> = (0..200u32)
            .map(|i| {
                let (i64_, x) = (u64::from(i), i as usize);
                (i64_ * 700, i, 1 + (x * 37) % 900, 1 + (x * 53) % 40)
            })
            .collect();
        let (seen, widest) = simulate(COST, 16, arrivals.clone());
        assert!(widest > 1 && widest <= 16);
        for &(arrived, id, _, output) in &arrivals {
            let events: Vec<&Seen> = seen
                .iter()
                .filter(|e| matches!(e, Seen::First(i, _) | Seen::Done(i, _) if *i == id))
                .collect();
            let [Seen::First(_, first), Seen::Done(_, done)] = events[..] else {
                panic!("sequence {id}: {events:?}");
            };
            assert!(arrived < *first && first <= done, "sequence {id}");
            // At least one decode step per token after the first.
            assert!(done - first >= 2000 * (output as u64 - 1), "sequence {id}");
        }
    }

    #[test]
    fn zero_cost_still_takes_one_step_per_token() {
        let free = StepCost {
            prefill_ns_per_token: 0.0,
            decode_ns_per_step: 0.0,
        };
        let mut s = Scheduler::new(free, 8);
        s.push('a', 1000, 3);
        s.push('b', 1000, 1);
        let mut steps = Vec::new();
        while let Some(step) = s.begin_step() {
            assert_eq!(step.duration, Duration::ZERO);
            let mut events = Vec::new();
            s.end_step(|e| {
                events.push(match e {
                    StepEvent::FirstToken(c) => format!("first {c}"),
                    StepEvent::Done(c) => format!("done {c}"),
                })
            });
            steps.push(events.join(", "));
        }
        assert_eq!(
            steps,
            ["first a, first b, done b", "", "done a"],
            "a one-token answer is first token and completion in one step"
        );
        assert!(s.is_idle());
    }

    #[test]
    fn free_slots_count_running_and_waiting_sequences() {
        let mut s = Scheduler::new(COST, 3);
        assert_eq!(s.free_slots(), 3);
        s.push(1, 10, 2);
        s.push(2, 10, 2);
        assert_eq!((s.free_slots(), s.waiting()), (1, 2));
        let step = s.begin_step().unwrap();
        assert_eq!((step.sequences, step.admitted), (2, 2));
        assert_eq!(step.duration, Duration::from_micros(400));
        s.end_step(|_| {});
        assert_eq!((s.free_slots(), s.running()), (1, 2));
        // Decoding only: one decode step, no prefill.
        assert_eq!(s.begin_step().unwrap().duration, Duration::from_millis(2));
        s.end_step(|_| {});
        assert!(s.is_idle());
        assert_eq!(s.begin_step(), None);
    }
}
