//! The Network SUT: the QDL's face to a LoadGen. It connects to every node,
//! answers Name() with a live round trip to all of them, cuts queries into
//! pieces (never merging two), hands them to nodes as their windows allow,
//! decodes responses (timed: lz4 is the QDL's one permitted extra) and
//! completes each sample exactly once, moving a failed node's samples to
//! the others. Everything else is the nodes' work.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use netdiv_proto::codec::Codec;
use netdiv_proto::pb;
use netdiv_proto::sample::completion_output;

use crate::dispatch::{self, DispatchPolicy};
use crate::link::{Link, LinkEvents};
use crate::name::{self, NameError};
use crate::node_url::NodeUrl;
use crate::pool::{AllNodesFailed, Piece, Pool, SampleRef, Send, Window};
use crate::samples::SampleStore;
use crate::sink::{CompletionSink, Response};
use crate::tls::{ClientTls, TlsError};

/// How to reach the nodes and how to share work among them.
#[derive(Clone, Debug)]
pub struct QdlConfig {
    pub nodes: Vec<NodeUrl>,
    /// Required for QUIC; turns gRPC into gRPC over TLS.
    pub tls: Option<ClientTls>,
    pub policy: DispatchPolicy,
    /// Most a node may hold at once; more waits in the QDL (backpressure).
    pub window: Window,
    /// Largest piece of a query sent as one message.
    pub max_piece_samples: usize,
    pub max_piece_bytes: u64,
    /// The benchmark being run: every node must serve the same one (empty:
    /// any, for tools that only describe the nodes).
    pub benchmark: String,
    /// Threads for network I/O and response decoding.
    pub io_threads: usize,
    /// A node holding samples that completes none for this long is treated
    /// as failed (its samples go to the others); `None` waits forever.
    pub node_timeout: Option<Duration>,
}

impl QdlConfig {
    pub fn new(nodes: Vec<NodeUrl>, benchmark: &str) -> QdlConfig {
        QdlConfig {
            nodes,
            tls: None,
            policy: DispatchPolicy::LeastOutstanding,
            window: Window {
                samples: 1024,
                bytes: 64 << 20,
            },
            max_piece_samples: 16,
            max_piece_bytes: 4 << 20,
            benchmark: benchmark.into(),
            io_threads: 2,
            node_timeout: Some(Duration::from_secs(60)),
        }
    }
}

/// Why the QDL could not start or name itself.
#[derive(Debug, thiserror::Error)]
pub enum QdlError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("node {node}: {reason}")]
    Node { node: String, reason: String },
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("cannot start the QDL's I/O threads: {0}")]
    Runtime(std::io::Error),
}

/// Counters for progress displays and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdlStats {
    /// Samples completed towards the LoadGen.
    pub completed: u64,
    /// Samples sent and not yet answered.
    pub in_flight: u64,
    /// Samples waiting in the QDL for room on a node.
    pub queued: u64,
    /// Samples sent again after their node failed or declined.
    pub resent: u64,
    /// Answers dropped because the sample had moved on (late answers).
    pub late_answers: u64,
    pub nodes_failed: u64,
}

type Sink = Arc<dyn CompletionSink>;

struct Shared {
    urls: Vec<String>,
    links: Vec<Link>,
    pool: Mutex<Pool<Sink>>,
    store: Arc<SampleStore>,
    max_piece_samples: usize,
    max_piece_bytes: u64,
    next_query: AtomicU64,
    closing: AtomicBool,
    completed: AtomicU64,
    late_answers: AtomicU64,
}

/// Many sut-nodes shown as one SUT.
pub struct NetworkSut {
    shared: Arc<Shared>,
    infos: Vec<pb::NodeInfo>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// A failed sample's reason names its node and id.
fn sample_failure(url: &str, id: u64, what: &str) -> String {
    format!("node {url}, sample {id}: {what}")
}

impl NetworkSut {
    /// Connects to every node (concurrently), checks each serves this
    /// benchmark and accepts the store's codec, and opens the query paths.
    pub fn connect(config: QdlConfig, store: Arc<SampleStore>) -> Result<NetworkSut, QdlError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.io_threads.max(1))
            .thread_name("qdl-io")
            .enable_all()
            .build()
            .map_err(QdlError::Runtime)?;
        let urls: Vec<String> = config.nodes.iter().map(ToString::to_string).collect();
        let node_error = |i: usize, reason: String| QdlError::Node {
            node: urls[i].clone(),
            reason,
        };
        if let Some(tls) = &config.tls {
            // Fail on unreadable files before any connection attempt.
            tls.rustls(netdiv_proto::ALPN)?;
        }
        let connected = runtime.block_on(futures::future::join_all(
            config
                .nodes
                .iter()
                .map(|url| Link::connect(url, config.tls.as_ref())),
        ));
        let mut links = Vec::new();
        for (i, link) in connected.into_iter().enumerate() {
            links.push(link.map_err(|e| node_error(i, e))?);
        }
        let infos = runtime.block_on(futures::future::join_all(links.iter().map(Link::info)));
        let mut checked = Vec::new();
        for (i, info) in infos.into_iter().enumerate() {
            let info = info.map_err(|e| node_error(i, format!("Info: {e}")))?;
            check_compatible(&info, &config.benchmark, store.codec())
                .map_err(|e| node_error(i, e))?;
            checked.push(info);
        }
        let shared = Arc::new(Shared {
            urls,
            pool: Mutex::new(Pool::new(
                links.len(),
                config.policy,
                config.window,
                0x9e37_79b9_7f4a_7c15,
            )),
            links,
            store,
            max_piece_samples: config.max_piece_samples,
            max_piece_bytes: config.max_piece_bytes,
            next_query: AtomicU64::new(1),
            closing: AtomicBool::new(false),
            completed: AtomicU64::new(0),
            late_answers: AtomicU64::new(0),
        });
        for (i, link) in shared.links.iter().enumerate() {
            let events: Arc<dyn LinkEvents> = shared.clone();
            runtime
                .block_on(link.start(i, events))
                .map_err(|e| QdlError::Node {
                    node: shared.urls[i].clone(),
                    reason: e,
                })?;
        }
        if let Some(timeout) = config.node_timeout {
            runtime.spawn(watchdog(Arc::downgrade(&shared), timeout));
        }
        Ok(NetworkSut {
            shared,
            infos: checked,
            runtime: Some(runtime),
        })
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("runtime lives until drop")
    }

    /// The SUT name: a live Name round trip to every node, concurrently,
    /// aggregated into "Network SUT [name, ...]"; duplicates are refused.
    pub fn name(&self) -> Result<String, QdlError> {
        let answers = self.runtime().block_on(futures::future::join_all(
            self.shared.links.iter().map(Link::name),
        ));
        let mut named = Vec::new();
        for (i, answer) in answers.into_iter().enumerate() {
            let name = answer.map_err(|reason| QdlError::Node {
                node: self.shared.urls[i].clone(),
                reason: format!("Name: {reason}"),
            })?;
            named.push((self.shared.urls[i].clone(), name));
        }
        Ok(name::aggregate(&named)?)
    }

    /// What each node reported when it was connected, in node order.
    pub fn node_infos(&self) -> &[pb::NodeInfo] {
        &self.infos
    }

    /// The node addresses, in order.
    pub fn node_urls(&self) -> &[String] {
        &self.shared.urls
    }

    /// Issues one LoadGen query: `(response id, QSL index)` per sample.
    /// Returns at once; every sample is later completed exactly once
    /// through `sink`, or `sink.fail` says why the run cannot finish.
    pub fn issue(&self, samples: &[(u64, usize)], sink: &Sink) {
        self.shared.issue(samples, sink);
    }

    /// Current counters.
    pub fn stats(&self) -> QdlStats {
        let pool = self.shared.lock_pool();
        QdlStats {
            completed: self.shared.completed.load(Ordering::Relaxed),
            in_flight: pool.in_flight(),
            queued: pool.queued() as u64,
            resent: pool.requeued(),
            late_answers: self.shared.late_answers.load(Ordering::Relaxed),
            nodes_failed: (0..self.shared.links.len())
                .filter(|&i| !pool.is_healthy(i))
                .count() as u64,
        }
    }
}

impl Drop for NetworkSut {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::Release);
        if let Some(runtime) = self.runtime.take() {
            let links = &self.shared.links;
            let _ = runtime.block_on(async {
                let closing = futures::future::join_all(links.iter().map(Link::close));
                tokio::time::timeout(Duration::from_secs(2), closing).await
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// Fails nodes that hold samples but complete none for `timeout`: a node
/// that keeps its connection (and answers keep-alives) but whose backend
/// is stuck would otherwise stall the run forever.
async fn watchdog(shared: std::sync::Weak<Shared>, timeout: Duration) {
    let tick = (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    // Per node: completions last seen, and since when nothing changed.
    let mut seen: Vec<(u64, std::time::Instant)> = Vec::new();
    loop {
        tokio::time::sleep(tick).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let now = std::time::Instant::now();
        seen.resize(shared.links.len(), (0, now));
        let mut stuck = Vec::new();
        {
            let pool = shared.lock_pool();
            for (node, (last, since)) in seen.iter_mut().enumerate() {
                let Some((in_flight, completed)) = pool.progress(node) else {
                    continue;
                };
                if in_flight == 0 || completed != *last {
                    // Idle, or progressing: the clock starts again.
                    (*last, *since) = (completed, now);
                } else if now - *since >= timeout {
                    stuck.push(node);
                }
            }
        }
        for node in stuck {
            shared.failed(
                node,
                format!("it completed nothing for {timeout:?} while holding samples"),
            );
        }
    }
}

/// A node must serve the benchmark being run and accept the codec the
/// samples are stored in.
fn check_compatible(info: &pb::NodeInfo, benchmark: &str, codec: Codec) -> Result<(), String> {
    if info.protocol_version != netdiv_proto::PROTOCOL_VERSION {
        return Err(format!(
            "speaks netdiv protocol version {}, this QDL speaks {}",
            info.protocol_version,
            netdiv_proto::PROTOCOL_VERSION
        ));
    }
    let canonical = |b: &str| {
        crate::samples::benchmark::lookup(b)
            .map(|d| d.name.to_string())
            .unwrap_or_else(|_| b.to_string())
    };
    // An empty benchmark accepts any (tools that describe the nodes).
    if !benchmark.is_empty() && canonical(&info.benchmark) != canonical(benchmark) {
        return Err(format!(
            "serves benchmark {:?}, but this run is {benchmark:?} (start it with --benchmark {benchmark})",
            info.benchmark
        ));
    }
    if !info.codecs.contains(&(codec.to_proto() as i32)) {
        return Err(format!(
            "does not accept {} samples for {benchmark}",
            codec.name()
        ));
    }
    Ok(())
}

impl Shared {
    fn lock_pool(&self) -> MutexGuard<'_, Pool<Sink>> {
        // The pool's invariants hold between calls; a panic elsewhere
        // while it was locked leaves it usable.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn issue(&self, samples: &[(u64, usize)], sink: &Sink) {
        let query_id = self.next_query.fetch_add(1, Ordering::Relaxed);
        let mut refs = Vec::with_capacity(samples.len());
        {
            let loaded = self.store.loaded();
            for &(response_id, index) in samples {
                let Some(stored) = loaded.get(index) else {
                    sink.fail(&format!(
                        "QSL sample {index} was issued but is not loaded (LoadSamplesToRam)"
                    ));
                    return;
                };
                refs.push(SampleRef {
                    response_id,
                    index,
                    bytes: stored.data.len() as u64,
                });
            }
        }
        let sizes: Vec<u64> = refs.iter().map(|r| r.bytes).collect();
        let ranges = dispatch::pieces(&sizes, self.max_piece_samples, self.max_piece_bytes);
        let pieces: Vec<Piece<Sink>> = if ranges.len() == 1 {
            vec![Piece {
                query_id,
                samples: refs,
                tag: sink.clone(),
            }]
        } else {
            ranges
                .into_iter()
                .map(|r| Piece {
                    query_id,
                    samples: refs[r].to_vec(),
                    tag: sink.clone(),
                })
                .collect()
        };
        let result = self.lock_pool().submit(pieces);
        match result {
            Ok(sends) => self.send(sends),
            Err(e) => self.strand(e),
        }
    }

    /// Builds each piece's message from the QSL's bytes, unchanged, and
    /// hands it to its node's link.
    fn send(&self, sends: Vec<Send<Sink>>) {
        if sends.is_empty() {
            return;
        }
        let mut missing = Vec::new();
        let queries: Vec<(usize, pb::Query)> = {
            let loaded = self.store.loaded();
            sends
                .into_iter()
                .map(|Send { node, piece }| {
                    let samples = piece
                        .samples
                        .iter()
                        .filter_map(|s| match loaded.get(s.index) {
                            Some(stored) => Some(pb::Sample {
                                response_id: s.response_id,
                                data: stored.data.clone(),
                                codec: stored.codec.to_proto() as i32,
                                decoded_size: stored.decoded_size,
                            }),
                            None => {
                                missing.push((node, s.response_id, s.index));
                                None
                            }
                        })
                        .collect();
                    let query = pb::Query {
                        query_id: piece.query_id,
                        samples,
                    };
                    (node, query)
                })
                .collect()
        };
        for (node, query) in queries {
            self.links[node].send(query);
        }
        for (node, id, index) in missing {
            self.fail_samples(
                node,
                &[id],
                &format!("QSL sample {index} was unloaded while in use"),
            );
        }
    }

    /// Ends the samples `ids` of `node` for good and tells their sinks.
    fn fail_samples(&self, node: usize, ids: &[u64], reason: &str) {
        let (tags, sends) = self.lock_pool().complete(node, ids);
        self.send(sends);
        let mut told: Vec<Sink> = Vec::new();
        for (id, tag) in ids.iter().zip(tags) {
            let Some(sink) = tag else { continue };
            if !told.iter().any(|s| Arc::ptr_eq(s, &sink)) {
                sink.fail(&sample_failure(&self.urls[node], *id, reason));
                told.push(sink);
            }
        }
    }

    /// No node is left: fail every sink that still waits.
    fn strand(&self, error: AllNodesFailed) {
        let sinks = self.lock_pool().strand();
        let reason = format!("{error} (nodes: {})", self.urls.join(", "));
        let mut told: Vec<Sink> = Vec::new();
        for sink in sinks {
            if !told.iter().any(|s| Arc::ptr_eq(s, &sink)) {
                sink.fail(&reason);
                told.push(sink);
            }
        }
    }

    fn resend(&self, result: Result<Vec<Send<Sink>>, AllNodesFailed>) {
        match result {
            Ok(sends) => self.send(sends),
            Err(e) => self.strand(e),
        }
    }
}

impl LinkEvents for Shared {
    fn completions(&self, node: usize, completions: Vec<pb::Completion>) {
        let mut ids = Vec::with_capacity(completions.len());
        let mut outputs = Vec::with_capacity(completions.len());
        let mut declined = Vec::new();
        let mut decline_reason = String::new();
        let mut broken: Vec<(u64, String)> = Vec::new();
        for c in completions {
            let id = c.response_id;
            if !c.error.is_empty() {
                if c.retryable {
                    declined.push(id);
                    decline_reason = c.error;
                } else {
                    broken.push((id, c.error));
                }
                continue;
            }
            match completion_output(c, crate::link::MAX_MESSAGE as u64) {
                Ok(data) => {
                    ids.push(id);
                    outputs.push(data);
                }
                Err(e) => broken.push((id, format!("corrupt response: {e}"))),
            }
        }
        let (tags, sends) = self.lock_pool().complete(node, &ids);
        self.send(sends);
        // Hand each run of samples bound for one sink over in one call.
        let mut batch: Vec<Response<'_>> = Vec::with_capacity(ids.len());
        let mut batch_sink: Option<Sink> = None;
        let mut late = 0u64;
        for ((id, data), tag) in ids.iter().zip(&outputs).zip(tags) {
            let Some(sink) = tag else {
                late += 1;
                continue;
            };
            if let Some(current) = &batch_sink {
                if !Arc::ptr_eq(current, &sink) {
                    current.complete(&batch);
                    batch.clear();
                }
            }
            batch.push(Response {
                response_id: *id,
                data,
            });
            batch_sink = Some(sink);
        }
        if let Some(sink) = batch_sink {
            sink.complete(&batch);
        }
        self.completed
            .fetch_add(ids.len() as u64 - late, Ordering::Relaxed);
        self.late_answers.fetch_add(late, Ordering::Relaxed);
        for (id, error) in broken {
            self.fail_samples(node, &[id], &error);
        }
        if !declined.is_empty() {
            let result = {
                let mut pool = self.lock_pool();
                if pool.is_healthy(node) {
                    eprintln!(
                        "qdl: node {} declines work ({decline_reason}); it gets no more, and what it declines goes to the other nodes",
                        self.urls[node]
                    );
                }
                pool.decline(node, &declined, &decline_reason)
            };
            self.resend(result);
        }
    }

    fn failed(&self, node: usize, reason: String) {
        if self.closing.load(Ordering::Acquire) {
            return;
        }
        let result = {
            let mut pool = self.lock_pool();
            let first = pool.is_healthy(node);
            let result = pool.fail(node, &reason);
            if first {
                eprintln!(
                    "qdl: node {} failed ({reason}); its outstanding samples go to the other nodes",
                    self.urls[node]
                );
            }
            result
        };
        self.resend(result);
    }

    fn refused(&self, node: usize, ids: Vec<u64>, reason: String) {
        self.fail_samples(node, &ids, &format!("the node refused the query: {reason}"));
    }
}
