//! Where a sample's answers go, and how its client takes it back.
//!
//! Every query stream (a gRPC `Infer` stream, a QUIC query stream, an
//! in-process feed) has one [`ReplyTo`]: the channel its answers go out
//! on, and the token samples it holds. A client that moves samples
//! elsewhere (their node stopped answering, the run ended) cancels them
//! by id on the same stream; a client that is gone (its connection
//! closed) has cancelled everything it sent. Either way the device drops
//! the sample — a serving engine aborts the request — instead of
//! spending its batch on an answer nobody will read.
//!
//! Only token samples are registered: a batch sample runs for
//! milliseconds, and keeping a record per sample would cost the
//! small-sample benchmarks their rate for nothing.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use netdiv_proto::pb;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Notify;

/// A stream's answer channel and the token samples it holds.
#[derive(Clone, Debug)]
pub struct ReplyTo {
    tx: UnboundedSender<pb::Completion>,
    held: Arc<Mutex<HashMap<u64, Cancel>>>,
}

impl ReplyTo {
    /// Answers go to `tx`; its receiver dropped means the client is gone.
    pub fn new(tx: UnboundedSender<pb::Completion>) -> ReplyTo {
        ReplyTo {
            tx,
            held: Arc::default(),
        }
    }

    /// Sends one answer; a closed stream means the client left, and there
    /// is no one to answer.
    pub(crate) fn send(&self, message: pb::Completion) {
        let _ = self.tx.send(message);
    }

    /// Whether the client is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Records a token sample this stream now holds; its cancel flag.
    pub(crate) fn hold(&self, response_id: u64) -> Cancel {
        let cancel = Cancel::default();
        self.held().insert(response_id, cancel.clone());
        cancel
    }

    /// The sample left the node (answered, failed or cancelled).
    pub(crate) fn release(&self, response_id: u64) {
        self.held().remove(&response_id);
    }

    /// The client takes these samples back: each one this stream still
    /// holds is flagged for its device to drop. Returns how many were
    /// held (ids of samples already answered, or never sent on this
    /// stream, are ignored).
    pub fn cancel(&self, ids: &[u64]) -> usize {
        let held = self.held();
        ids.iter()
            .filter_map(|id| held.get(id))
            .map(Cancel::set)
            .count()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Cancel>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves once the client is gone.
    pub(crate) fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let tx = self.tx.clone();
        async move { tx.closed().await }
    }
}

/// One sample's cancel flag, set by its client's cancel.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cancel(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    set: AtomicBool,
    changed: Notify,
}

impl Cancel {
    fn set(&self) {
        self.0.set.store(true, Ordering::Release);
        self.0.changed.notify_waiters();
    }

    /// Whether the client cancelled the sample.
    pub(crate) fn is_set(&self) -> bool {
        self.0.set.load(Ordering::Acquire)
    }

    /// Resolves once the client cancelled the sample.
    pub(crate) fn wait(&self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let state = self.0.clone();
        Box::pin(async move {
            loop {
                // Registered before the check, so a cancel between the
                // check and the wait still wakes it.
                let changed = state.changed.notified();
                if state.set.load(Ordering::Acquire) {
                    return;
                }
                changed.await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_reaches_the_samples_the_stream_holds_and_no_others() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let reply = ReplyTo::new(tx);
        let a = reply.hold(1);
        let b = reply.hold(2);
        let waiting = tokio::spawn(a.wait());
        assert_eq!(reply.cancel(&[1, 3]), 1, "3 was never held");
        waiting.await.unwrap();
        assert!(a.is_set() && !b.is_set());
        reply.release(2);
        assert_eq!(reply.cancel(&[2]), 0, "2 was answered");
        assert!(!reply.is_closed());
        drop(rx);
        assert!(reply.is_closed());
        reply.closed().await;
    }
}
