//! The in-process link: a node running in the LoadGen node's own process,
//! reached without a socket. Everything above the link (pieces, windows,
//! answers, first tokens, failover) is the same code a node across the
//! network goes through, so the two can be compared fairly and the QDL's
//! behaviours can be tested in milliseconds.
//!
//! The QDL only declares what such a node must do ([`InProcessNode`]); the
//! LoadGen node implements it for the sut-node's core, and tests implement
//! it for nodes that answer as a test says.

use std::fmt;
use std::sync::{Arc, Mutex};

use netdiv_proto::pb;
use tokio::sync::oneshot;

use super::{LinkError, LinkEvents};

/// Submits one query (or cancel) to an in-process node's query path, on
/// the caller's thread. Dropping it ends the path: the node answers what
/// it holds, then drops its [`NodeAnswers`].
pub type QueryPath = Box<dyn Fn(pb::Query) + Send + Sync>;

/// A node in this process, as the QDL's local link drives it: the
/// counterpart of a sut-node's `Name`, `Info` and `Infer` calls.
pub trait InProcessNode: Send + Sync + 'static {
    /// The node's `Name()` answer.
    fn name(&self) -> String;
    /// The node's `Info` answer.
    fn info(&self) -> pb::NodeInfo;
    /// Opens a query path whose answers go to `answers`, as a network
    /// node's `Infer` stream sends them: batched, with the node's token
    /// count for a token model. Called on the QDL's I/O runtime (it may
    /// spawn tasks there). The node drops `answers` once the returned path
    /// is dropped and every query on it is answered; dropping it sooner
    /// says the node is gone. The thread that hands over the last answer
    /// in flight may stay in [`NodeAnswers::send`] a moment, polling for
    /// the next query (`QdlConfig::poll_next_query`): it must hold no
    /// lock the returned path takes.
    fn open(&self, answers: NodeAnswers) -> QueryPath;
}

/// Where an in-process node sends the answers of one query path.
pub struct NodeAnswers {
    node: usize,
    events: Arc<dyn LinkEvents>,
    ended: Option<oneshot::Sender<()>>,
}

impl fmt::Debug for NodeAnswers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeAnswers")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl NodeAnswers {
    /// One message of answers: what a network link's reader does with a
    /// `CompletionBatch` from its node.
    pub fn send(&self, batch: pb::CompletionBatch) {
        if batch.tokens_generated > 0 {
            self.events
                .token_progress(self.node, batch.tokens_generated);
        }
        if !batch.completions.is_empty() {
            self.events.completions(self.node, batch.completions);
        }
    }
}

impl Drop for NodeAnswers {
    /// The path ended: after a close that is the end of the run; before
    /// one, the node is gone (the router ignores failures while closing).
    fn drop(&mut self) {
        self.events.failed(self.node, LinkError::InferEnded);
        if let Some(ended) = self.ended.take() {
            let _ = ended.send(());
        }
    }
}

/// A link to an [`InProcessNode`].
pub(crate) struct LocalLink {
    node: Arc<dyn InProcessNode>,
    /// The open query path; `None` before start and after close.
    path: Mutex<Option<Arc<QueryPath>>>,
    /// Resolves once the node dropped the path's answers.
    ended: Mutex<Option<oneshot::Receiver<()>>>,
}

impl LocalLink {
    pub(crate) fn new(node: Arc<dyn InProcessNode>) -> LocalLink {
        LocalLink {
            node,
            path: Mutex::new(None),
            ended: Mutex::new(None),
        }
    }

    pub(crate) fn name(&self) -> String {
        self.node.name()
    }

    pub(crate) fn info(&self) -> pb::NodeInfo {
        self.node.info()
    }

    pub(crate) fn start(&self, node: usize, events: Arc<dyn LinkEvents>) {
        let (ended, ended_rx) = oneshot::channel();
        let path = self.node.open(NodeAnswers {
            node,
            events,
            ended: Some(ended),
        });
        *self.path.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(path));
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(ended_rx);
    }

    /// Ends the query path and waits until the node answered what it held.
    pub(crate) async fn close(&self) {
        self.path.lock().unwrap_or_else(|e| e.into_inner()).take();
        let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(ended) = ended {
            let _ = ended.await;
        }
    }

    pub(crate) fn send(&self, query: pb::Query) {
        // Taken out of the lock first: a node may answer on this thread.
        let path = self.path.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(path) = path {
            path(query);
        }
    }

    pub(crate) fn cancel(&self, ids: &[u64]) {
        self.send(pb::Query {
            cancel: ids.to_vec(),
            ..Default::default()
        });
    }
}
