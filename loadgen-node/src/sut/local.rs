//! The sut-node's own backend and batcher run inside this process: the
//! same cost model as a node across the network, without the network.
//! Comparing the two measures the network tax. The node is fed as the QDL
//! feeds a node across the network, through a window of samples and bytes
//! held at once, so any Offline query runs (all of a large one at once
//! would pass the node's own limits).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use netdiv_proto::sample::completion_output;
use netdiv_proto::{pb, Benchmark};
use qdl::pool::Window;
use qdl::samples::SampleStore;
use sut_node::node::{Node, ReplyTo};
use tokio::sync::mpsc;

use crate::sut::{
    Counters, QuerySample, QuerySampleResponse, Responder, SharedResponder, SutError,
    SystemUnderTest,
};

/// A [`Node`] driven directly: samples go in from the QSL's memory,
/// completions come back on a channel a completion thread drains.
pub struct LocalNodeSut {
    name: String,
    store: Arc<SampleStore>,
    feed: Arc<Feed>,
    /// The responder of the test in progress, for the completion thread.
    responder: Arc<Mutex<Option<SharedResponder>>>,
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
        let responder: Arc<Mutex<Option<SharedResponder>>> = Arc::default();
        let current = responder.clone();
        let completed = counters.clone();
        let benchmark = *store.benchmark();
        let feed = Arc::new(Feed::new(node, ReplyTo::new(reply), &benchmark));
        let releases = feed.clone();
        let drainer = std::thread::Builder::new()
            .name("local-completions".into())
            .spawn(move || {
                while let Some(first) = replies.blocking_recv() {
                    let mut batch = vec![first];
                    while let Ok(more) = replies.try_recv() {
                        batch.push(more);
                    }
                    releases.answered(&batch);
                    let Some(responder) = current.lock().ok().and_then(|c| c.clone()) else {
                        continue;
                    };
                    let n = complete_batch(&*responder, &benchmark, batch);
                    completed.completed.fetch_add(n, Ordering::Relaxed);
                }
            })
            .expect("spawn completion thread");
        Self {
            name,
            store,
            feed,
            responder,
            counters,
            drainer: Some(drainer),
        }
    }
}

/// One decoded node message: a first token or a completion.
struct Decoded {
    first_token: bool,
    id: u64,
    data: bytes::Bytes,
    n_tokens: i64,
}

/// Decodes a batch of node messages and records them in the order the
/// node sent them, runs of first tokens and runs of completions each in
/// one call; returns how many samples completed.
fn complete_batch(
    responder: &dyn Responder,
    benchmark: &Benchmark,
    batch: Vec<pb::Completion>,
) -> u64 {
    let mut decoded = Vec::with_capacity(batch.len());
    for c in batch {
        if !c.error.is_empty() {
            responder.abort(format!("sample {}: {}", c.response_id, c.error));
            return 0;
        }
        let (id, n_tokens, first_token) = (c.response_id, c.n_tokens, c.first_token);
        match completion_output(c, benchmark, u64::MAX) {
            Ok(data) => decoded.push(Decoded {
                first_token,
                id,
                data,
                n_tokens: if first_token { 0 } else { n_tokens },
            }),
            Err(e) => {
                responder.abort(format!("sample {id}: {e}"));
                return 0;
            }
        }
    }
    let mut completed = 0;
    for run in decoded.chunk_by(|a, b| a.first_token == b.first_token) {
        let responses: Vec<QuerySampleResponse<'_>> = run
            .iter()
            .map(|d| QuerySampleResponse {
                id: d.id,
                data: &d.data,
                n_tokens: d.n_tokens,
            })
            .collect();
        if run[0].first_token {
            responder.first_token(&responses);
        } else {
            responder.complete(&responses);
            completed += responses.len() as u64;
        }
    }
    completed
}

impl SystemUnderTest for LocalNodeSut {
    fn name(&self) -> Result<String, SutError> {
        Ok(self.name.clone())
    }

    fn issue_query(&self, samples: &[QuerySample], responder: &SharedResponder) {
        // Each pass of a test has its own responder.
        if let Ok(mut current) = self.responder.lock() {
            *current = Some(responder.clone());
        }
        self.counters
            .issued
            .fetch_add(samples.len() as u64, Ordering::Relaxed);
        let loaded = self.store.loaded();
        let mut wire = Vec::with_capacity(samples.len());
        for s in samples {
            let Some(stored) = loaded.get(s.index) else {
                responder.abort(format!("QSL sample {} is not loaded", s.index));
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
        self.feed.issue(wire);
    }

    fn flush_queries(&self) {}
}

impl Drop for LocalNodeSut {
    fn drop(&mut self) {
        self.feed.node.begin_shutdown();
        self.feed.node.stop_devices();
        // Closing the channel ends the completion thread.
        self.feed.close();
        if let Some(t) = self.drainer.take() {
            let _ = t.join();
        }
    }
}

/// The node and what waits to go to it: samples go in the order issued
/// while the node is under the QDL's window of samples and bytes, by the
/// rule the QDL's pool applies to a node.
struct Feed {
    node: Arc<Node>,
    window: Window,
    state: Mutex<FeedState>,
}

#[derive(Default)]
struct FeedState {
    reply: Option<ReplyTo>,
    waiting: VecDeque<pb::Sample>,
    /// Bytes of each sample the node holds, by response id.
    held: HashMap<u64, u64>,
    held_bytes: u64,
}

impl Feed {
    fn new(node: Arc<Node>, reply: ReplyTo, benchmark: &Benchmark) -> Feed {
        Feed {
            node,
            window: Window {
                samples: qdl::network::defaults::WINDOW_SAMPLES,
                bytes: netdiv_proto::transport::default_window_bytes(benchmark),
            },
            state: Mutex::new(FeedState {
                reply: Some(reply),
                ..FeedState::default()
            }),
        }
    }

    /// Queues `samples` and sends what the window lets through.
    fn issue(&self, samples: Vec<pb::Sample>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.waiting.extend(samples);
        self.send(&mut state);
    }

    /// Frees the window of every sample `answers` finish (a first token
    /// finishes none), then sends what now fits.
    fn answered(&self, answers: &[pb::Completion]) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for answer in answers.iter().filter(|a| !a.first_token) {
            if let Some(bytes) = state.held.remove(&answer.response_id) {
                state.held_bytes -= bytes;
            }
        }
        self.send(&mut state);
    }

    /// Sends, in one query under the lock (so order holds), the waiting
    /// samples that fit the window.
    fn send(&self, state: &mut FeedState) {
        let mut query = Vec::new();
        while self
            .window
            .has_room(state.held.len() as u64, state.held_bytes)
        {
            let Some(sample) = state.waiting.pop_front() else {
                break;
            };
            let bytes = sample.data.len() as u64;
            state.held.insert(sample.response_id, bytes);
            state.held_bytes += bytes;
            query.push(sample);
        }
        if let (false, Some(reply)) = (query.is_empty(), &state.reply) {
            self.node.submit_query(
                pb::Query {
                    query_id: 0,
                    samples: query,
                    ..Default::default()
                },
                reply,
            );
        }
    }

    /// Drops the reply channel: the completion thread ends once the node
    /// holds no sender either.
    fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.reply = None;
        state.waiting.clear();
    }
}
