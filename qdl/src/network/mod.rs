//! The Network SUT: the QDL's face to a LoadGen. It connects to every node,
//! answers Name() with a live round trip to all of them, cuts queries into
//! pieces (never merging two), hands them to nodes as their windows allow,
//! decodes responses (timed: lz4 is the QDL's one permitted extra) and
//! completes each sample exactly once, moving a failed node's samples to
//! the others. Everything else is the nodes' work.
//!
//! The work is split in four: this facade (connect, Name, stats), the
//! [`router`] that moves queries and completions between the LoadGen and
//! the links, the [`watchdog`] that fails nodes which stop making
//! progress, and [`rejoin`], which brings failed nodes back.

mod latency;
mod rejoin;
mod router;
mod settings;
#[cfg(test)]
mod tests;
pub(crate) mod traffic;
mod watchdog;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use netdiv_proto::codec::Codec;
use netdiv_proto::pb;
use netdiv_proto::transport::QDL_CLOSE_TIMEOUT;
use netdiv_proto::{Benchmark, Direction};

use crate::dispatch::DispatchPolicy;
use crate::link::{InProcessNode, Link, LinkError, LinkEvents, Target};
use crate::loaded::QslBytes;
use crate::name::{self, NameError};
use crate::node_url::NodeUrl;
use crate::pool::{Pool, Window};
use crate::tls::{ClientTls, TlsError};
use router::{CurrentLink, QueryRouter, Sink};

pub use rejoin::Backoff;
pub use router::{NodeState, NodeStateChange};
pub use settings::QdlSettings;

/// How to reach the nodes and how to share work among them.
#[derive(Clone, Debug)]
pub struct QdlConfig {
    /// The nodes, in the order Name() lists them.
    pub nodes: Vec<NodeUrl>,
    /// Required for QUIC; turns gRPC into gRPC over TLS.
    pub tls: Option<ClientTls>,
    /// Which node gets the next piece.
    pub policy: DispatchPolicy,
    /// Most a node may hold at once; more waits in the QDL (backpressure).
    pub window: Window,
    /// Largest piece of a query sent as one message, in samples.
    pub max_piece_samples: usize,
    /// Largest piece of a query sent as one message, in bytes.
    pub max_piece_bytes: u64,
    /// Largest message either way, and largest decoded response, in
    /// bytes (`transport::message_limit` of the benchmark).
    pub max_message_bytes: usize,
    /// Threads for network I/O and response decoding.
    pub io_threads: usize,
    /// How long the thread that hands the LoadGen its last outstanding
    /// completion polls for the next query before it may sleep (zero: it
    /// does not). In SingleStream and MultiStream the next query follows
    /// at once, and a sleeping I/O thread puts a wake-up on its path.
    pub poll_next_query: Duration,
    /// Submission mode: a node that fails ends the run with an error
    /// instead of its samples going to the others.
    pub no_failover: bool,
    /// A node holding samples that completes none for this long is treated
    /// as failed (its samples go to the others); `None` waits forever.
    pub node_timeout: Option<Duration>,
    /// How a failed node is brought back into the run; `None` leaves it
    /// out for good. Never in submission mode (`no_failover`).
    pub rejoin: Option<Backoff>,
}

/// The QDL's defaults, written once: [`QdlConfig::new`] and the LoadGen
/// node's flags both take them from here.
pub mod defaults {
    use std::time::Duration;

    use crate::dispatch::DispatchPolicy;

    /// Which node gets the next piece: the less loaded of two.
    pub const POLICY: DispatchPolicy = DispatchPolicy::LeastOutstanding;

    /// The policy for `benchmark`: by tokens where it measures token
    /// latencies (prompts differ in length by orders of magnitude), else
    /// [`POLICY`].
    pub fn policy_for(benchmark: &netdiv_proto::Benchmark) -> DispatchPolicy {
        if benchmark.uses_token_latencies() {
            DispatchPolicy::Tokens
        } else {
            POLICY
        }
    }
    /// Most samples one node may hold at once.
    pub const WINDOW_SAMPLES: u64 = 1024;
    /// Most sample bytes one node may hold at once (a benchmark with larger
    /// samples gets room for two: `transport::default_window_bytes`).
    pub const WINDOW_BYTES: u64 = netdiv_proto::transport::DEFAULT_WINDOW_BYTES;
    /// Largest piece of a query, in samples: small pieces keep nodes
    /// evenly loaded to the end of an Offline run.
    pub const MAX_PIECE_SAMPLES: usize = 16;
    /// Largest piece of a query, in bytes.
    pub const MAX_PIECE_BYTES: u64 = 4 << 20;
    /// Threads for network I/O in Server and Offline.
    pub const IO_THREADS: usize = 2;
    /// How long the I/O thread polls for the next query after the last
    /// outstanding completion, in SingleStream and MultiStream (the
    /// LoadGen issues the next one at once; `QdlConfig::poll_next_query`).
    /// On a 2-CPU VM a 20 µs poll now and then gave up before the next
    /// query came, and left the p99 where it was without one; 50 µs did
    /// not (docs/benchmarks.md, "The QDL polls for the next query").
    pub const LATENCY_POLL_NEXT_QUERY: Duration = Duration::from_micros(50);
    /// A node holding samples that completes none for this long fails.
    pub const NODE_TIMEOUT: Duration = Duration::from_secs(60);
    /// The wait before the first attempt to bring a failed node back.
    pub const REJOIN_FIRST_BACKOFF: Duration = Duration::from_millis(100);
    /// The longest wait between two attempts.
    pub const REJOIN_MAX_BACKOFF: Duration = Duration::from_secs(5);
}

impl QdlConfig {
    /// The [`defaults`] for `nodes`: least-outstanding dispatch, a window
    /// of 1024 samples and 64 MiB per node, pieces of at most 16 samples
    /// and 4 MiB, two I/O threads, a 60 s node timeout, failed nodes
    /// brought back with the default backoff.
    pub fn new(nodes: Vec<NodeUrl>) -> QdlConfig {
        QdlConfig {
            nodes,
            tls: None,
            policy: defaults::POLICY,
            window: Window {
                samples: defaults::WINDOW_SAMPLES,
                bytes: defaults::WINDOW_BYTES,
            },
            max_piece_samples: defaults::MAX_PIECE_SAMPLES,
            max_piece_bytes: defaults::MAX_PIECE_BYTES,
            max_message_bytes: netdiv_proto::transport::MAX_MESSAGE_BYTES,
            io_threads: defaults::IO_THREADS,
            poll_next_query: Duration::ZERO,
            no_failover: false,
            node_timeout: Some(defaults::NODE_TIMEOUT),
            rejoin: Some(Backoff::default()),
        }
    }

    /// How failed nodes are brought back: `rejoin`, never in submission
    /// mode (a failed node ends the run there).
    pub(crate) fn rejoin_backoff(&self) -> Option<Backoff> {
        self.rejoin.filter(|_| !self.no_failover)
    }
}

/// Why the QDL could not start or name itself.
#[derive(Debug, thiserror::Error)]
pub enum QdlError {
    /// The client's TLS files cannot be used.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// One node could not be reached, or cannot serve this run.
    #[error("node {node}: {source}")]
    Node {
        /// The node's address.
        node: String,
        /// What went wrong.
        source: LinkError,
    },
    /// The node names do not make one SUT name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The QDL's tokio runtime could not start.
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
    /// First tokens handed to the LoadGen (token models).
    pub first_tokens: u64,
    /// First tokens dropped: late, or a second one for a sample (after a
    /// failover the sample's first token already counted).
    pub late_first_tokens: u64,
    /// Samples taken back from a node that was still connected, and
    /// cancelled there so it stops generating them (token models).
    pub cancelled: u64,
    /// Nodes that failed or declined work at some point of the run (some
    /// may have rejoined since).
    pub nodes_failed: u64,
    /// Nodes taking no work now (failed or declining, not yet back).
    pub nodes_down: u64,
    /// Times a failed node was brought back.
    pub rejoins: u64,
}

/// Many sut-nodes shown as one SUT.
pub struct NetworkSut {
    router: Arc<QueryRouter>,
    infos: Vec<pb::NodeInfo>,
    policy: DispatchPolicy,
    settings: QdlSettings,
    runtime: Option<tokio::runtime::Runtime>,
}

/// The nodes, connected, with their Info, in the configured order.
struct Connected {
    runtime: tokio::runtime::Runtime,
    urls: Vec<String>,
    links: Vec<Link>,
    infos: Vec<pb::NodeInfo>,
}

/// Each node's target, from the configuration's addresses.
fn network_targets(config: &QdlConfig) -> Vec<(String, Target)> {
    config
        .nodes
        .iter()
        .map(|url| {
            let target = Target::Network {
                url: url.clone(),
                tls: config.tls.clone(),
                max_message: config.max_message_bytes,
            };
            (url.to_string(), target)
        })
        .collect()
}

/// Connects to every node concurrently and asks each for its Info.
fn connect_all(config: &QdlConfig, targets: &[(String, Target)]) -> Result<Connected, QdlError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.io_threads.max(1))
        .thread_name("qdl-io")
        .enable_all()
        .build()
        .map_err(QdlError::Runtime)?;
    let urls: Vec<String> = targets.iter().map(|(label, _)| label.clone()).collect();
    let node_error = |i: usize| {
        let node = urls[i].clone();
        move |source| QdlError::Node { node, source }
    };
    if let Some(tls) = &config.tls {
        // Fail on unreadable files before any connection attempt.
        tls.rustls(netdiv_proto::ALPN)?;
    }
    let connected = runtime.block_on(futures::future::join_all(
        targets.iter().map(|(_, target)| target.connect()),
    ));
    let mut links = Vec::new();
    for (i, link) in connected.into_iter().enumerate() {
        links.push(link.map_err(node_error(i))?);
    }
    let answers = runtime.block_on(futures::future::join_all(links.iter().map(Link::info)));
    let mut infos = Vec::new();
    for (i, info) in answers.into_iter().enumerate() {
        let info = info.map_err(node_error(i))?;
        if info.protocol_version != netdiv_proto::PROTOCOL_VERSION {
            return Err(node_error(i)(LinkError::Version {
                node: info.protocol_version,
                ours: netdiv_proto::PROTOCOL_VERSION,
            }));
        }
        infos.push(info);
    }
    Ok(Connected {
        runtime,
        urls,
        links,
        infos,
    })
}

/// Each node's address and Info, for tools that describe the nodes
/// (`loadgen-node sysdesc`) without running a benchmark on them.
pub fn describe_nodes(config: &QdlConfig) -> Result<Vec<(String, pb::NodeInfo)>, QdlError> {
    let connected = connect_all(config, &network_targets(config))?;
    let Connected {
        runtime,
        urls,
        links,
        infos,
    } = connected;
    runtime.block_on(async {
        let closing = futures::future::join_all(links.iter().map(Link::close));
        let _ = tokio::time::timeout(QDL_CLOSE_TIMEOUT, closing).await;
    });
    Ok(urls.into_iter().zip(infos).collect())
}

/// A node must serve the run's benchmark and accept the codec its samples
/// are stored in.
fn check_compatible(info: &pb::NodeInfo, run: &Benchmark, codec: Codec) -> Result<(), LinkError> {
    let same = Benchmark::parse(&info.benchmark).is_ok_and(|node| node.same_benchmark(run));
    if !same {
        return Err(LinkError::OtherBenchmark {
            node: info.benchmark.clone(),
            run: run.to_string(),
        });
    }
    // The node enforces the same table; checking here names the problem
    // before any sample is sent.
    if !info.codecs.contains(&(codec.to_proto() as i32))
        || run.check_codec(Direction::Input, codec).is_err()
    {
        return Err(LinkError::CodecRefused {
            codec,
            benchmark: run.to_string(),
        });
    }
    Ok(())
}

/// Token models: each node's count of sequences it runs side by side, if
/// every node said (`NodeInfo.concurrent_sequences`).
fn sequence_windows(benchmark: &Benchmark, infos: &[pb::NodeInfo]) -> Option<Vec<u64>> {
    if !benchmark.uses_token_latencies() {
        return None;
    }
    infos
        .iter()
        .map(|info| (info.concurrent_sequences > 0).then_some(info.concurrent_sequences as u64))
        .collect()
}

impl NetworkSut {
    /// Connects to every node (concurrently), checks each serves the
    /// store's benchmark and accepts the store's codec, and opens the
    /// query paths.
    pub fn connect(config: QdlConfig, store: Arc<dyn QslBytes>) -> Result<NetworkSut, QdlError> {
        let targets = network_targets(&config);
        NetworkSut::open(config, targets, store)
    }

    /// The same over nodes in this process, one local link each
    /// (`config.nodes` and `config.tls` are not used): the in-process side
    /// of the network tax, through the same pieces, windows and answers
    /// as a node across the network.
    pub fn in_process(
        nodes: Vec<Arc<dyn InProcessNode>>,
        config: QdlConfig,
        store: Arc<dyn QslBytes>,
    ) -> Result<NetworkSut, QdlError> {
        let targets = nodes
            .into_iter()
            .map(|node| {
                (
                    format!("in-process:{}", node.name()),
                    Target::InProcess(node),
                )
            })
            .collect();
        NetworkSut::open(config, targets, store)
    }

    fn open(
        config: QdlConfig,
        targets: Vec<(String, Target)>,
        store: Arc<dyn QslBytes>,
    ) -> Result<NetworkSut, QdlError> {
        let Connected {
            runtime,
            urls,
            links,
            infos,
        } = connect_all(&config, &targets)?;
        for (i, info) in infos.iter().enumerate() {
            check_compatible(info, store.benchmark(), store.codec()).map_err(|source| {
                QdlError::Node {
                    node: urls[i].clone(),
                    source,
                }
            })?;
        }
        let identities: Vec<rejoin::Identity> = infos.iter().map(rejoin::Identity::of).collect();
        let mut pool = Pool::new(
            links.len(),
            config.policy,
            config.window,
            0x9e37_79b9_7f4a_7c15,
        );
        let encrypted = targets
            .iter()
            .all(|(_, target)| matches!(target, Target::Network { tls: Some(_), .. }));
        let mut max_piece_samples = config.max_piece_samples;
        let mut window_sequences = Vec::new();
        if let Some(sequences) = sequence_windows(store.benchmark(), &infos) {
            // A token model's samples are sequences that each run for
            // seconds to minutes: each goes to a node on its own, when
            // that node has a free sequence, so no node starts a second
            // piece's worth while another sits idle.
            pool.size_windows_by_sequences(&sequences);
            window_sequences = pool.window_samples();
            max_piece_samples = 1;
        }
        let mut router = QueryRouter::new(
            urls,
            links,
            pool,
            store,
            max_piece_samples,
            config.max_piece_bytes,
            config.max_message_bytes as u64,
        );
        let settings = QdlSettings::used(&config, encrypted, max_piece_samples, window_sequences);
        router.no_failover = config.no_failover;
        router.poll_next_query = config.poll_next_query;
        let router = Arc::new(router);
        for (i, link) in router.current_links().iter().enumerate() {
            let events: Arc<dyn LinkEvents> = Arc::new(CurrentLink {
                router: router.clone(),
                generation: 0,
            });
            runtime
                .block_on(link.start(i, events))
                .map_err(|source| QdlError::Node {
                    node: router.urls[i].clone(),
                    source,
                })?;
        }
        if let Some(timeout) = config.node_timeout {
            runtime.spawn(watchdog::watch(Arc::downgrade(&router), timeout));
        }
        if let Some(backoff) = config.rejoin_backoff() {
            for (node, ((_, target), identity)) in targets.into_iter().zip(identities).enumerate() {
                let reconnect = rejoin::Reconnect {
                    node,
                    target,
                    identity,
                    backoff,
                };
                runtime.spawn(rejoin::watch(Arc::downgrade(&router), reconnect));
            }
        }
        Ok(NetworkSut {
            router,
            infos,
            policy: config.policy,
            settings,
            runtime: Some(runtime),
        })
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("runtime lives until drop")
    }

    /// The SUT name: a live Name round trip to every node, concurrently,
    /// aggregated into "Network SUT [name, ...]"; duplicates are refused.
    pub fn name(&self) -> Result<String, QdlError> {
        let links = self.router.current_links();
        let called = std::time::Instant::now();
        let answers =
            self.runtime()
                .block_on(futures::future::join_all(links.iter().enumerate().map(
                    |(i, link)| async move {
                        let started = std::time::Instant::now();
                        let answer = link.name().await;
                        if answer.is_ok() {
                            self.router.traffic[i]
                                .name_round_trip(started.elapsed().as_micros() as u64);
                        }
                        answer
                    },
                )));
        let mut named = Vec::new();
        for (url, answer) in self.router.urls.iter().zip(answers) {
            let name = answer.map_err(|source| QdlError::Node {
                node: url.clone(),
                source,
            })?;
            named.push((url.clone(), name));
        }
        // What a fleet's size costs the LoadGen's one Name() call.
        let wall_ms = called.elapsed().as_secs_f64() * 1e3;
        tracing::info!(
            event = "name_answered",
            nodes = named.len(),
            wall_ms,
            "Name(): a round trip to {} node(s) in {wall_ms:.1} ms",
            named.len()
        );
        Ok(name::aggregate(&named)?)
    }

    /// What crossed the fabric so far, per node in node order, each with
    /// its failure if it failed; and the seconds from the first piece sent
    /// to the last answer.
    pub fn traffic(&self) -> (Vec<(traffic::NodeTrafficReport, Option<String>)>, f64) {
        self.observer().traffic()
    }

    /// A handle that reads the counters from elsewhere while the run
    /// goes on.
    pub fn observer(&self) -> NetworkObserver {
        NetworkObserver {
            router: self.router.clone(),
        }
    }

    /// What each node reported when it was connected, in node order.
    pub fn node_infos(&self) -> &[pb::NodeInfo] {
        &self.infos
    }

    /// The node addresses, in order.
    pub fn node_urls(&self) -> &[String] {
        &self.router.urls
    }

    /// Issues one LoadGen query: `(response id, QSL index)` per sample.
    /// Returns at once; every sample is later completed exactly once
    /// through `sink`, or `sink.fail` says why the run cannot finish.
    pub fn issue(&self, samples: &[(u64, usize)], sink: &Sink) {
        self.router.issue(samples, sink);
    }

    /// The dispatch policy the run uses.
    pub fn dispatch_policy(&self) -> DispatchPolicy {
        self.policy
    }

    /// The settings the QDL runs with, after it fitted them to the run.
    pub fn settings(&self) -> &QdlSettings {
        &self.settings
    }

    /// Current counters.
    pub fn stats(&self) -> QdlStats {
        self.observer().stats()
    }
}

/// One node's share of the run so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeCounts {
    /// Samples sent and not yet completed.
    pub outstanding: u64,
    /// Samples it completed (answers that counted).
    pub completed: u64,
    /// It failed (or declined work) and gets no work until it rejoins.
    pub failed: bool,
    /// Times it was brought back after failing.
    pub rejoins: u64,
}

/// Reads the QDL's counters from another thread (a metrics endpoint)
/// while the run goes on; cheap to clone. It does not keep the links
/// open: they close with the [`NetworkSut`].
#[derive(Clone)]
pub struct NetworkObserver {
    router: Arc<QueryRouter>,
}

impl std::fmt::Debug for NetworkSut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkSut")
            .field("nodes", &self.router.urls)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for NetworkObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkObserver")
            .field("nodes", &self.router.urls)
            .finish_non_exhaustive()
    }
}

impl NetworkObserver {
    /// What crossed the fabric so far, per node in node order, each with
    /// its failure if it failed; and the seconds from the first piece sent
    /// to the last answer.
    pub fn traffic(&self) -> (Vec<(traffic::NodeTrafficReport, Option<String>)>, f64) {
        let pool = self.router.lock_pool();
        let nodes = self
            .router
            .traffic
            .iter()
            .enumerate()
            .map(|(i, t)| (t.snapshot(), pool.failure(i).map(str::to_string)))
            .collect();
        (nodes, self.router.window.seconds())
    }

    /// The node addresses, in order.
    pub fn node_urls(&self) -> &[String] {
        &self.router.urls
    }

    /// Per node, in node order: samples outstanding now, samples it
    /// completed (answers that counted), and whether it has failed.
    pub fn node_counts(&self) -> Vec<NodeCounts> {
        let pool = self.router.lock_pool();
        (0..self.router.node_count())
            .map(|i| {
                let (outstanding, completed) = pool.node_counts(i);
                NodeCounts {
                    outstanding,
                    completed,
                    failed: !pool.is_healthy(i),
                    rejoins: self.router.rejoins[i].load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// Every node state change so far (failed, declining, rejoined,
    /// refused), in order.
    pub fn node_changes(&self) -> Vec<NodeStateChange> {
        self.router.changes()
    }

    /// Current counters.
    pub fn stats(&self) -> QdlStats {
        let router = &self.router;
        let mut ever_failed: Vec<usize> = router
            .changes()
            .iter()
            .filter(|c| matches!(c.state, NodeState::Failed | NodeState::Declining))
            .map(|c| c.node)
            .collect();
        ever_failed.sort_unstable();
        ever_failed.dedup();
        let pool = router.lock_pool();
        QdlStats {
            completed: router.completed.load(Ordering::Relaxed),
            in_flight: pool.in_flight(),
            queued: pool.queued() as u64,
            resent: pool.requeued(),
            late_answers: router.late_answers.load(Ordering::Relaxed),
            first_tokens: router.first_tokens.load(Ordering::Relaxed),
            late_first_tokens: pool.late_first_tokens(),
            cancelled: router.cancels_sent.load(Ordering::Relaxed),
            nodes_failed: ever_failed.len() as u64,
            nodes_down: (0..router.node_count())
                .filter(|&i| !pool.is_healthy(i))
                .count() as u64,
            rejoins: router
                .rejoins
                .iter()
                .map(|r| r.load(Ordering::Relaxed))
                .sum(),
        }
    }
}

impl Drop for NetworkSut {
    fn drop(&mut self) {
        self.router.closing.store(true, Ordering::Release);
        if let Some(runtime) = self.runtime.take() {
            // A run that ends with samples out (the LoadGen gave up) leaves
            // no node generating answers for it.
            for node in 0..self.router.node_count() {
                let held = self.router.lock_pool().outstanding_ids(node);
                self.router.cancel_at(node, &held);
            }
            let links = self.router.current_links();
            let _ = runtime.block_on(async {
                let closing = futures::future::join_all(links.iter().map(|l| l.close()));
                tokio::time::timeout(QDL_CLOSE_TIMEOUT, closing).await
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}
