//! The two transports over one node: gRPC (tonic) and QUIC (quinn).

mod connections;
pub mod grpc;
mod infer_route;
mod policy;
pub mod quic;

use std::sync::atomic::{AtomicUsize, Ordering};

use netdiv_proto::transport::TOKEN_PROGRESS_INTERVAL;
use netdiv_proto::{pb, PROTOCOL_VERSION};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use crate::node::Node;

/// Most completions one answer message carries: a busy stream sends fewer,
/// larger messages, still far below the message size limit.
pub const COMPLETIONS_PER_MESSAGE: usize = 4096;

/// The async runtime the servers run on: `io_threads` workers, one per
/// CPU when `None` (`--io-threads`). The floor benchmarks' echo builds
/// its runtime here too, so it runs on what the node runs on.
pub fn io_runtime(io_threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = io_threads {
        runtime.worker_threads(threads);
    }
    runtime.enable_all().build()
}

/// Whether a client's protocol version is this node's.
pub fn version_mismatch(client: u32) -> Option<String> {
    (client != PROTOCOL_VERSION).then(|| {
        format!(
            "client speaks netdiv protocol version {client}, this node speaks {PROTOCOL_VERSION}"
        )
    })
}

/// The answers of one query stream its client has not taken yet. The
/// stream's reader waits while there are too many, so a client that sends
/// queries and never reads its answers is pushed back by flow control
/// instead of making the node queue answers without end.
#[derive(Debug)]
pub struct Unread {
    count: AtomicUsize,
    limit: usize,
    room: Notify,
}

impl Unread {
    /// At most `limit` unread answers.
    pub fn new(limit: usize) -> Unread {
        Unread {
            count: AtomicUsize::new(0),
            limit,
            room: Notify::new(),
        }
    }

    /// `samples` were submitted: each will get one answer.
    pub fn submitted(&self, samples: usize) {
        self.count.fetch_add(samples, Ordering::AcqRel);
    }

    /// The answers in `batch`: its completions, not first tokens (which
    /// come on top of a sample's answer).
    pub fn answers(batch: &pb::CompletionBatch) -> usize {
        batch.completions.iter().filter(|c| !c.first_token).count()
    }

    /// Answers still owed to the client.
    pub fn owed(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// `answers` were handed to the client's connection.
    pub fn written(&self, answers: usize) {
        self.count.fetch_sub(answers, Ordering::AcqRel);
        self.room.notify_waiters();
    }

    /// Resolves once the client has room for more answers.
    pub async fn room(&self) {
        loop {
            // Registered before the check, so a write between the check
            // and the wait still wakes it.
            let notified = self.room.notified();
            if self.count.load(Ordering::Acquire) < self.limit {
                return;
            }
            notified.await;
        }
    }
}

/// What a query stream's writer sends: its answers, batched, and for a
/// token model the node's token count, alone when nothing else went out
/// for a while.
#[derive(Debug)]
pub struct Answers<'a> {
    rx: UnboundedReceiver<pb::Completion>,
    /// Token models: the node whose count goes out, and the ticker that
    /// checks whether a progress message is due.
    progress: Option<(&'a Node, tokio::time::Interval)>,
    /// The count last sent, and when the stream last sent anything.
    reported: u64,
    last_sent: Instant,
}

impl<'a> Answers<'a> {
    /// The answers arriving on `rx`, for a stream of `node`.
    pub fn new(rx: UnboundedReceiver<pb::Completion>, node: &'a Node) -> Answers<'a> {
        let progress = node.settings().benchmark.uses_token_latencies().then(|| {
            let mut tick = tokio::time::interval(TOKEN_PROGRESS_INTERVAL);
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            (node, tick)
        });
        Answers {
            rx,
            progress,
            reported: 0,
            last_sent: Instant::now(),
        }
    }

    /// Waits for the next completion, then takes whatever else is ready,
    /// so a busy stream sends fewer, larger messages. For a token model,
    /// also a batch of no completions carrying the node's token count,
    /// when the stream owes `unread` answers, the count grew, and nothing
    /// went out for [`TOKEN_PROGRESS_INTERVAL`]: at most one such message
    /// per interval, however many tokens flow. `None` once every sender
    /// is gone.
    pub async fn next(&mut self, unread: &Unread) -> Option<pb::CompletionBatch> {
        let first = loop {
            let progress_due = match &mut self.progress {
                None => false,
                Some((node, tick)) => tokio::select! {
                    first = self.rx.recv() => break first?,
                    _ = tick.tick() => {
                        self.last_sent.elapsed() >= TOKEN_PROGRESS_INTERVAL
                            && node.tokens_generated() > self.reported
                            && unread.owed() > 0
                    }
                },
            };
            if progress_due {
                return Some(self.stamped(Vec::new()));
            }
            if self.progress.is_none() {
                break self.rx.recv().await?;
            }
        };
        let mut completions = vec![first];
        while completions.len() < COMPLETIONS_PER_MESSAGE {
            match self.rx.try_recv() {
                Ok(c) => completions.push(c),
                Err(_) => break,
            }
        }
        Some(self.stamped(completions))
    }

    /// A batch of `completions`, with the node's token count for a token
    /// model.
    fn stamped(&mut self, completions: Vec<pb::Completion>) -> pb::CompletionBatch {
        self.last_sent = Instant::now();
        let tokens_generated = match &self.progress {
            Some((node, _)) => node.tokens_generated(),
            None => 0,
        };
        self.reported = tokens_generated;
        pb::CompletionBatch {
            completions,
            tokens_generated,
        }
    }
}
