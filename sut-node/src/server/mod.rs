//! The two transports over one node: gRPC (tonic) and QUIC (quinn).

pub mod connections;
pub mod grpc;
pub mod policy;
pub mod quic;

use std::sync::atomic::{AtomicUsize, Ordering};

use netdiv_proto::{pb, PROTOCOL_VERSION};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Notify;

/// Most completions one answer message carries: a busy stream sends fewer,
/// larger messages, still far below the message size limit.
pub const COMPLETIONS_PER_MESSAGE: usize = 4096;

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

/// Waits for the next completion, then takes whatever else is ready, so a
/// busy stream sends fewer, larger messages.
pub async fn next_batch(
    rx: &mut UnboundedReceiver<pb::Completion>,
    limit: usize,
) -> Option<pb::CompletionBatch> {
    let first = rx.recv().await?;
    let mut completions = vec![first];
    while completions.len() < limit {
        match rx.try_recv() {
            Ok(c) => completions.push(c),
            Err(_) => break,
        }
    }
    Some(pb::CompletionBatch { completions })
}
