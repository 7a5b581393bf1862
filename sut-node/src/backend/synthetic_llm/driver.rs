//! The synthetic LLM backend as a [`Device`]: the scheduler's steps
//! in real time. Between steps it admits what has arrived (waiting when
//! idle); each step ends at its start plus its duration, and the next
//! starts there, so sleeping late never adds up over a long answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netdiv_proto::Benchmark;

use super::scheduler::StepEvent;
use super::{expected_tokens, SyntheticLlmBackend};
use crate::backend::device::{Device, DeviceEvent, DeviceQueue, SampleError, Sink, Work};
use crate::backend::synthetic::wait_until;

/// Longest the device sleeps without checking [`DeviceQueue::abandoned`].
const ABANDON_CHECK: Duration = Duration::from_millis(50);

/// A sample admitted, with its answer.
struct Answer<T> {
    item: T,
    tokens: Vec<u8>,
    n_tokens: usize,
}

/// Runs one device until `source` ends and every sequence has finished.
/// `input` gives an item's decoded input bytes. A sequence whose client
/// cancelled it ([`Work::cancelled`]) leaves between steps, unanswered.
pub fn run_device<T: Work>(
    backend: &SyntheticLlmBackend,
    source: &mut (impl DeviceQueue<T> + ?Sized),
    input: impl Fn(&T) -> &[u8],
    mut sink: impl FnMut(DeviceEvent<'_, T>),
) {
    let mut scheduler = backend.scheduler::<Answer<T>>();
    // When the previous step ended, while the device stays busy.
    let mut clock: Option<Instant> = None;
    loop {
        // Between steps: an atomic load per sequence, nothing more unless
        // one was cancelled.
        for a in scheduler.remove_where(|a| a.item.cancelled()) {
            sink(DeviceEvent::Cancelled { item: a.item });
        }
        if scheduler.is_idle() {
            let Some(item) = source.wait() else { return };
            admit(backend, &mut scheduler, item, &input, &mut sink);
            clock = None;
        }
        while scheduler.free_slots() > 0 {
            let Some(item) = source.poll() else { break };
            admit(backend, &mut scheduler, item, &input, &mut sink);
        }
        let Some(step) = scheduler.begin_step() else {
            continue;
        };
        let end = clock.unwrap_or_else(Instant::now) + step.duration;
        loop {
            if source.abandoned() {
                return;
            }
            let now = Instant::now();
            if now >= end {
                break;
            }
            wait_until(end.min(now + ABANDON_CHECK));
        }
        clock = Some(end);
        sink(DeviceEvent::Step {
            sequences: step.sequences,
        });
        scheduler.end_step(|event| match event {
            StepEvent::FirstToken(a) => sink(DeviceEvent::FirstToken {
                item: &a.item,
                token: &a.tokens[..4],
            }),
            StepEvent::Done(a) => sink(DeviceEvent::Done {
                item: a.item,
                tokens: a.tokens,
                n_tokens: a.n_tokens,
            }),
        });
    }
}

impl<T: Work> Device<T> for SyntheticLlmBackend {
    fn kind(&self) -> &'static str {
        super::KIND
    }

    fn detail(&self) -> String {
        SyntheticLlmBackend::detail(self)
    }

    fn threads(&self) -> usize {
        self.devices()
    }

    fn streams_tokens_for(&self) -> Option<&Benchmark> {
        Some(self.benchmark())
    }

    /// A "batch" is a step, and its size the sequences in it.
    fn own_batch_size(&self) -> Option<usize> {
        Some(self.config().max_sequences)
    }

    /// Each device thread runs its own batch of sequences.
    fn concurrent_sequences(&self) -> Option<usize> {
        Some(self.config().max_sequences * self.devices())
    }

    fn run(self: Arc<Self>, _thread: usize, queue: &mut dyn DeviceQueue<T>, sink: &Sink<T>) {
        run_device(&self, queue, |w: &T| w.as_ref(), |event| sink(event));
    }
}

/// Plans `item` and queues it, or reports why it cannot run.
fn admit<T>(
    backend: &SyntheticLlmBackend,
    scheduler: &mut super::scheduler::Scheduler<Answer<T>>,
    item: T,
    input: &impl Fn(&T) -> &[u8],
    sink: &mut impl FnMut(DeviceEvent<'_, T>),
) {
    match backend.plan(input(&item)) {
        Ok(plan) => {
            let tokens = expected_tokens(input(&item), plan.output_tokens);
            scheduler.push(
                Answer {
                    item,
                    tokens,
                    n_tokens: plan.output_tokens,
                },
                plan.prompt_tokens,
                plan.output_tokens,
            );
        }
        Err(error) => sink(DeviceEvent::Failed {
            item,
            error: SampleError::Prompt(error),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use netdiv_proto::Benchmark;

    use super::super::LlmConfig;
    use super::*;

    /// Items queued up front; `wait` ends the source when they run out.
    struct Script(VecDeque<Vec<u8>>);

    impl DeviceQueue<Vec<u8>> for Script {
        fn wait(&mut self) -> Option<Vec<u8>> {
            self.0.pop_front()
        }
        fn poll(&mut self) -> Option<Vec<u8>> {
            self.0.pop_front()
        }
    }

    fn backend(config: LlmConfig) -> SyntheticLlmBackend {
        SyntheticLlmBackend::new(config, &Benchmark::parse("llama2-70b").unwrap()).unwrap()
    }

    #[test]
    fn streams_a_first_token_then_the_answer_for_each_sample() {
        let b = backend(LlmConfig::zero_cost());
        let inputs: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 4 * (1 + i as usize)]).collect();
        let mut source = Script(inputs.iter().cloned().chain([vec![1, 2, 3]]).collect());
        let mut log: Vec<(Vec<u8>, &str, Vec<u8>)> = Vec::new();
        let mut widest = 0;
        run_device(
            &b,
            &mut source,
            |i| i,
            |e| match e {
                DeviceEvent::FirstToken { item, token } => {
                    log.push((item.clone(), "first", token.to_vec()))
                }
                DeviceEvent::Done {
                    item,
                    tokens,
                    n_tokens,
                } => {
                    assert_eq!(tokens.len(), 4 * n_tokens);
                    log.push((item, "done", tokens));
                }
                DeviceEvent::Failed { item, error } => {
                    log.push((item, "failed", error.to_string().into_bytes()))
                }
                DeviceEvent::Step { sequences } => widest = widest.max(sequences),
                other => panic!("a token device sent {other:?}"),
            },
        );
        assert!(widest > 1 && widest <= 64);
        for input in &inputs {
            let mine: Vec<_> = log.iter().filter(|(i, ..)| i == input).collect();
            let [(_, "first", first), (_, "done", all)] = mine[..] else {
                panic!("{input:?}: {mine:?}");
            };
            let n = b.plan(input).unwrap().output_tokens;
            assert_eq!(*all, expected_tokens(input, n));
            assert_eq!(first[..], all[..4]);
        }
        let failed: Vec<_> = log
            .iter()
            .filter(|(_, kind, _)| *kind == "failed")
            .collect();
        assert_eq!(failed.len(), 1);
    }

    #[test]
    fn an_abandoned_device_stops_at_once() {
        struct Abandoned(Option<Vec<u8>>);
        impl DeviceQueue<Vec<u8>> for Abandoned {
            fn wait(&mut self) -> Option<Vec<u8>> {
                self.0.take()
            }
            fn poll(&mut self) -> Option<Vec<u8>> {
                None
            }
            fn abandoned(&self) -> bool {
                true
            }
        }
        // A step of 10 s: abandoning does not wait for it.
        let b = backend(LlmConfig {
            prefill_us_per_token: 10e6,
            ..LlmConfig::default()
        });
        let start = Instant::now();
        let mut events = 0;
        run_device(&b, &mut Abandoned(Some(vec![0; 4])), |i| i, |_| events += 1);
        assert_eq!(events, 0);
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn steps_take_their_time_on_the_wall_clock() {
        // 1 token of prompt at 5 ms, then 3 decode steps of 5 ms.
        let b = backend(LlmConfig {
            prefill_us_per_token: 5000.0,
            decode_us_per_token: 5000.0,
            output_tokens: Some(4),
            ..LlmConfig::default()
        });
        let mut source = Script(VecDeque::from([vec![0u8; 4]]));
        let start = Instant::now();
        let mut first_at = None;
        run_device(
            &b,
            &mut source,
            |i| i,
            |e| {
                if let DeviceEvent::FirstToken { .. } = e {
                    first_at = Some(start.elapsed());
                }
            },
        );
        let (first, total) = (first_at.unwrap(), start.elapsed());
        assert!(first >= Duration::from_millis(5), "{first:?}");
        assert!(total >= Duration::from_millis(20), "{total:?}");
        // Four 5 ms steps that slept much longer would be a stuck clock;
        // a busy 2-CPU machine can add a second, not more.
        assert!(total < Duration::from_secs(2), "{total:?}");
    }
}
