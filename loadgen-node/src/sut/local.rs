//! The sut-node's own backend and batcher run inside this process: the
//! same cost model as a node across the network, without the network.
//! Comparing the two measures the network tax.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use netdiv_proto::sample::completion_output;
use netdiv_proto::{pb, Benchmark};
use qdl::samples::SampleStore;
use sut_node::node::{Node, ReplyTo};
use tokio::sync::mpsc;

use crate::engine::completion::Completer;
use crate::sut::{Counters, QuerySample, QuerySampleResponse, SutError, SystemUnderTest};

/// A [`Node`] driven directly: samples go in from the QSL's memory,
/// completions come back on a channel a completion thread drains.
pub struct LocalNodeSut {
    name: String,
    node: Arc<Node>,
    store: Arc<SampleStore>,
    reply: ReplyTo,
    /// The completer of the test in progress, for the completion thread.
    completer: Arc<Mutex<Option<Completer>>>,
    counters: Arc<Counters>,
    drainer: Option<std::thread::JoinHandle<()>>,
}

impl LocalNodeSut {
    /// Drives `node` with samples from `store`, reporting `name`.
    pub fn new(
        name: String,
        node: Arc<Node>,
        store: Arc<SampleStore>,
        counters: Arc<Counters>,
    ) -> Self {
        let (reply, mut replies) = mpsc::unbounded_channel::<pb::Completion>();
        let completer: Arc<Mutex<Option<Completer>>> = Arc::default();
        let current = completer.clone();
        let completed = counters.clone();
        let benchmark = *store.benchmark();
        let drainer = std::thread::Builder::new()
            .name("local-completions".into())
            .spawn(move || {
                while let Some(first) = replies.blocking_recv() {
                    let mut batch = vec![first];
                    while let Ok(more) = replies.try_recv() {
                        batch.push(more);
                    }
                    let Some(completer) = current.lock().ok().and_then(|c| c.clone()) else {
                        continue;
                    };
                    let n = batch.len() as u64;
                    complete_batch(&completer, &benchmark, batch);
                    completed.completed.fetch_add(n, Ordering::Relaxed);
                }
            })
            .expect("spawn completion thread");
        Self {
            name,
            node,
            store,
            reply,
            completer,
            counters,
            drainer: Some(drainer),
        }
    }
}

/// Decodes a batch of node messages and records them: first tokens, then
/// completions (a sample's first token is always ahead of its completion
/// on the channel, so this keeps each sample's order).
fn complete_batch(completer: &Completer, benchmark: &Benchmark, batch: Vec<pb::Completion>) {
    let mut first_tokens = Vec::new();
    let mut outputs = Vec::with_capacity(batch.len());
    for c in batch {
        if !c.error.is_empty() {
            completer.abort(format!("sample {}: {}", c.response_id, c.error));
            return;
        }
        let (id, n_tokens, first) = (c.response_id, c.n_tokens, c.first_token);
        let data = match completion_output(c, benchmark, u64::MAX) {
            Ok(d) => d,
            Err(e) => {
                completer.abort(format!("sample {id}: {e}"));
                return;
            }
        };
        if first {
            first_tokens.push((id, data, 0));
        } else {
            outputs.push((id, data, n_tokens));
        }
    }
    fn responses(list: &[(u64, bytes::Bytes, i64)]) -> Vec<QuerySampleResponse<'_>> {
        list.iter()
            .map(|(id, data, n_tokens)| QuerySampleResponse {
                id: *id,
                data,
                n_tokens: *n_tokens,
            })
            .collect()
    }
    if !first_tokens.is_empty() {
        completer.first_token(&responses(&first_tokens));
    }
    completer.complete(&responses(&outputs));
}

impl SystemUnderTest for LocalNodeSut {
    fn name(&self) -> Result<String, SutError> {
        Ok(self.name.clone())
    }

    fn issue_query(&self, samples: &[QuerySample], completer: &Completer) {
        // Each pass of a test has its own completer.
        if let Ok(mut current) = self.completer.lock() {
            *current = Some(completer.clone());
        }
        self.counters
            .issued
            .fetch_add(samples.len() as u64, Ordering::Relaxed);
        let loaded = self.store.loaded();
        let mut wire = Vec::with_capacity(samples.len());
        for s in samples {
            let Some(stored) = loaded.get(s.index) else {
                completer.abort(format!("QSL sample {} is not loaded", s.index));
                return;
            };
            wire.push(pb::Sample {
                response_id: s.id,
                data: stored.data.clone(),
                codec: stored.codec.to_proto() as i32,
                decoded_size: stored.decoded_size,
            });
        }
        drop(loaded);
        self.node.submit_query(
            pb::Query {
                query_id: 0,
                samples: wire,
            },
            &self.reply,
        );
    }

    fn flush_queries(&self) {}
}

impl Drop for LocalNodeSut {
    fn drop(&mut self) {
        self.node.begin_shutdown();
        self.node.stop_devices();
        // Closing the channel ends the completion thread.
        let (closed, _) = mpsc::unbounded_channel();
        self.reply = closed;
        if let Some(t) = self.drainer.take() {
            let _ = t.join();
        }
    }
}
