//! The router's behaviours over in-process links: nodes that answer, fail,
//! decline, answer late and come back exactly as each test says, with no
//! socket in between, so each case runs in milliseconds.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use netdiv_proto::codec::Codec;
use netdiv_proto::sample::{declined_completion, first_token_message, token_completion};
use netdiv_proto::{pb, Benchmark};

use super::*;
use crate::link::{NodeAnswers, QueryPath};
use crate::loaded::{LoadedView, StoredSample};
use crate::sink::{CompletionSink, Response};

/// A QSL whose every sample is loaded: four bytes each.
#[derive(Debug)]
struct Samples {
    benchmark: Benchmark,
    loaded: Vec<StoredSample>,
}

impl LoadedView for Samples {
    fn get(&self, index: usize) -> Option<&StoredSample> {
        self.loaded.get(index)
    }
}

impl QslBytes for Samples {
    fn benchmark(&self) -> &Benchmark {
        &self.benchmark
    }

    fn codec(&self) -> Codec {
        Codec::None
    }

    fn with_loaded(&self, read: &mut dyn FnMut(&dyn LoadedView)) {
        read(self)
    }
}

/// What arrives at a scripted node, and where its answers go.
#[derive(Default)]
struct Script {
    answers: Option<Arc<NodeAnswers>>,
    samples: Vec<u64>,
    cancelled: Vec<u64>,
    opened: usize,
}

/// A node that answers as its test says: queries are collected, and the
/// test sends answers, declines or vanishes.
struct ScriptedNode {
    name: String,
    benchmark: String,
    /// Sequences it says it runs side by side (0: it does not say).
    sequences: u32,
    script: Mutex<Script>,
    arrived: Condvar,
}

const WAIT: Duration = Duration::from_secs(5);

impl ScriptedNode {
    fn new(name: &str, benchmark: &str) -> Arc<ScriptedNode> {
        ScriptedNode::running_sequences(name, benchmark, 0)
    }

    /// A node that says it runs `sequences` sequences side by side.
    fn running_sequences(name: &str, benchmark: &str, sequences: u32) -> Arc<ScriptedNode> {
        Arc::new(ScriptedNode {
            name: name.into(),
            benchmark: benchmark.into(),
            sequences,
            script: Mutex::default(),
            arrived: Condvar::new(),
        })
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }

    /// Waits until `count` samples arrived since the last take, and takes
    /// them.
    fn take_samples(&self, count: usize) -> Vec<u64> {
        let script = self.script();
        let (mut script, timeout) = self
            .arrived
            .wait_timeout_while(script, WAIT, |s| s.samples.len() < count)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "{}: {} of {count} samples arrived",
            self.name,
            script.samples.len()
        );
        std::mem::take(&mut script.samples)
    }

    /// Sends one message of answers on the current path.
    fn send(&self, completions: Vec<pb::Completion>) {
        // Not under the script's lock: the thread that hands over the
        // last answer may poll for the next query, which needs the lock.
        let answers = self.script().answers.clone().expect("a path is open");
        answers.send(pb::CompletionBatch {
            completions,
            tokens_generated: 0,
        });
    }

    /// Answers `ids` with their own id as output.
    fn answer(&self, ids: &[u64]) {
        self.send(ids.iter().map(|&id| output(id, 0)).collect());
    }

    /// The node is gone: its answers end.
    fn vanish(&self) {
        let answers = self.script().answers.take();
        drop(answers);
    }

    fn opened(&self) -> usize {
        self.script().opened
    }
}

/// `id`'s output (its id's bytes), with `n_tokens`.
fn output(id: u64, n_tokens: i64) -> pb::Completion {
    token_completion(id, &id.to_le_bytes(), Codec::None, n_tokens)
}

impl ScriptedNode {
    fn info(&self) -> pb::NodeInfo {
        pb::NodeInfo {
            name: self.name.clone(),
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            benchmark: self.benchmark.clone(),
            backend: "scripted".into(),
            codecs: vec![Codec::None.to_proto() as i32],
            concurrent_sequences: self.sequences,
            ..Default::default()
        }
    }

    /// A query arrived on a path.
    fn arrive(&self, query: pb::Query) {
        let mut script = self.script();
        script
            .samples
            .extend(query.samples.iter().map(|s| s.response_id));
        script.cancelled.extend(query.cancel);
        self.arrived.notify_all();
    }
}

/// A scripted node as the QDL's local link sees it.
struct Scripted(Arc<ScriptedNode>);

impl InProcessNode for Scripted {
    fn name(&self) -> String {
        self.0.name.clone()
    }

    fn info(&self) -> pb::NodeInfo {
        self.0.info()
    }

    fn open(&self, answers: NodeAnswers) -> QueryPath {
        let mut script = self.0.script();
        script.answers = Some(Arc::new(answers));
        script.opened += 1;
        let path = OpenPath {
            node: self.0.clone(),
            opened: script.opened,
        };
        Box::new(move |query| path.node.arrive(query))
    }
}

/// A scripted node's open path: closed by the QDL, it ends the path's
/// answers, as a node does once it has answered what it held.
struct OpenPath {
    node: Arc<ScriptedNode>,
    opened: usize,
}

impl Drop for OpenPath {
    fn drop(&mut self) {
        let mut script = self.node.script();
        if script.opened == self.opened {
            let answers = script.answers.take();
            drop(script);
            drop(answers);
        }
    }
}

/// What the LoadGen saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    FirstToken(u64),
    Complete(u64, Vec<u8>),
    Fail(String),
}

#[derive(Default)]
struct RecordingSink {
    seen: Mutex<Vec<Seen>>,
    changed: Condvar,
}

impl CompletionSink for RecordingSink {
    fn first_token(&self, responses: &[Response<'_>]) {
        let mut seen = self.seen.lock().unwrap();
        seen.extend(responses.iter().map(|r| Seen::FirstToken(r.response_id)));
        self.changed.notify_all();
    }

    fn complete(&self, responses: &[Response<'_>]) {
        let mut seen = self.seen.lock().unwrap();
        seen.extend(
            responses
                .iter()
                .map(|r| Seen::Complete(r.response_id, r.data.to_vec())),
        );
        self.changed.notify_all();
    }

    fn fail(&self, reason: &str) {
        self.seen.lock().unwrap().push(Seen::Fail(reason.into()));
        self.changed.notify_all();
    }
}

impl RecordingSink {
    /// Each completed id, with how many times it completed.
    fn completions(&self) -> HashMap<u64, usize> {
        let mut counts = HashMap::new();
        for seen in self.seen.lock().unwrap().iter() {
            if let Seen::Complete(id, data) = seen {
                assert_eq!(data, &id.to_le_bytes(), "sample {id}'s own output");
                *counts.entry(*id).or_default() += 1;
            }
        }
        counts
    }

    fn wait_for_completions(&self, count: usize) {
        let seen = self.seen.lock().unwrap();
        let done = |s: &Vec<Seen>| {
            s.iter().filter(|e| matches!(e, Seen::Complete(..))).count() >= count
                || s.iter().any(|e| matches!(e, Seen::Fail(_)))
        };
        let (seen, _) = self
            .changed
            .wait_timeout_while(seen, WAIT, |s| !done(s))
            .unwrap();
        assert!(done(&seen), "{} completions: {seen:?}", seen.len());
    }
}

/// `count` scripted nodes serving `benchmark`.
fn nodes(count: usize, benchmark: &str) -> Vec<Arc<ScriptedNode>> {
    (0..count)
        .map(|i| ScriptedNode::new(&format!("node-{i}"), benchmark))
        .collect()
}

/// A QDL over `nodes`, with `total` samples of `benchmark` loaded.
fn qdl(
    nodes: &[Arc<ScriptedNode>],
    benchmark: &str,
    total: usize,
    tune: impl FnOnce(&mut QdlConfig),
) -> NetworkSut {
    let store = Samples {
        benchmark: Benchmark::parse(benchmark).unwrap(),
        loaded: (0..total)
            .map(|i| StoredSample {
                data: vec![i as u8; 4].into(),
                codec: Codec::None,
                decoded_size: 4,
            })
            .collect(),
    };
    let mut config = QdlConfig::new(Vec::new());
    config.node_timeout = None;
    config.rejoin = None;
    config.io_threads = 1;
    tune(&mut config);
    let links: Vec<Arc<dyn InProcessNode>> = nodes
        .iter()
        .map(|n| Arc::new(Scripted(n.clone())) as Arc<dyn InProcessNode>)
        .collect();
    NetworkSut::in_process(links, config, Arc::new(store)).unwrap()
}

/// A QDL over two nodes with 8 ResNet-50 samples, round robin in pieces
/// of 4: a query of all 8 gives each node one piece. `tune` changes the
/// rest.
fn halves(nodes: &[Arc<ScriptedNode>], tune: impl FnOnce(&mut QdlConfig)) -> NetworkSut {
    qdl(nodes, "resnet50", 8, |c| {
        c.policy = DispatchPolicy::RoundRobin;
        c.max_piece_samples = 4;
        tune(c);
    })
}

/// Issues the samples at `indices` (response id = QSL index + 1000).
fn issue(qdl: &NetworkSut, indices: std::ops::Range<usize>) -> Arc<RecordingSink> {
    let sink = Arc::new(RecordingSink::default());
    let pairs: Vec<(u64, usize)> = indices.map(|i| (1000 + i as u64, i)).collect();
    let as_sink: Sink = sink.clone();
    qdl.issue(&pairs, &as_sink);
    sink
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "waited {WAIT:?} for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn every_sample_completes_once_through_local_links() {
    let nodes = nodes(2, "resnet50");
    let qdl = qdl(&nodes, "resnet50", 40, |_| {});
    assert_eq!(qdl.name().unwrap(), "Network SUT [node-0, node-1]");
    let sink = issue(&qdl, 0..40);
    let mut answered = 0;
    while answered < 40 {
        for node in &nodes {
            let ids = {
                let mut script = node.script();
                std::mem::take(&mut script.samples)
            };
            answered += ids.len();
            node.answer(&ids);
        }
    }
    sink.wait_for_completions(40);
    let counts = sink.completions();
    assert_eq!(counts.len(), 40);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    let stats = qdl.stats();
    assert_eq!(
        (stats.completed, stats.in_flight, stats.late_answers),
        (40, 0, 0)
    );
}

#[test]
fn a_vanished_nodes_samples_complete_once_on_the_other() {
    let nodes = nodes(2, "resnet50");
    let qdl = halves(&nodes, |_| {});
    let sink = issue(&qdl, 0..8);
    let held_by_0 = nodes[0].take_samples(4);
    let held_by_1 = nodes[1].take_samples(4);
    nodes[1].answer(&held_by_1);
    nodes[0].vanish();
    let moved = nodes[1].take_samples(4);
    assert_eq!(
        sorted(moved.clone()),
        sorted(held_by_0),
        "node 0's samples went to node 1"
    );
    nodes[1].answer(&moved);
    sink.wait_for_completions(8);
    let counts = sink.completions();
    assert_eq!(counts.len(), 8);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    let stats = qdl.stats();
    assert_eq!(
        (stats.resent, stats.nodes_failed, stats.nodes_down),
        (4, 1, 1)
    );
    let changes = qdl.observer().node_changes();
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].node, changes[0].state), (0, NodeState::Failed));
}

#[test]
fn declined_samples_go_to_the_other_node_and_the_decliner_gets_no_more() {
    let nodes = nodes(2, "resnet50");
    let qdl = halves(&nodes, |_| {});
    let sink = issue(&qdl, 0..8);
    let declined = nodes[0].take_samples(4);
    let kept = nodes[1].take_samples(4);
    nodes[0].send(
        declined
            .iter()
            .map(|&id| declined_completion(id, "shutting down"))
            .collect(),
    );
    let moved = nodes[1].take_samples(4);
    assert_eq!(sorted(moved.clone()), sorted(declined));
    nodes[1].answer(&kept);
    nodes[1].answer(&moved);
    sink.wait_for_completions(8);
    assert!(sink.completions().values().all(|&n| n == 1));
    // A later query goes to node 1 alone.
    let later = issue(&qdl, 0..4);
    let ids = nodes[1].take_samples(4);
    nodes[1].answer(&ids);
    later.wait_for_completions(4);
    assert!(nodes[0].script().samples.is_empty());
    let changes = qdl.observer().node_changes();
    assert_eq!(changes[0].state, NodeState::Declining);
    assert_eq!(changes[0].detail, "shutting down");
}

#[test]
fn a_late_answer_after_the_node_timeout_does_not_complete_twice() {
    let nodes = nodes(2, "resnet50");
    let qdl = halves(&nodes, |c| {
        c.node_timeout = Some(Duration::from_millis(100));
    });
    let sink = issue(&qdl, 0..8);
    let slow = nodes[0].take_samples(4);
    let quick = nodes[1].take_samples(4);
    nodes[1].answer(&quick);
    // Node 0 makes no progress: the watchdog moves its samples, and
    // cancels them at node 0, which is still connected.
    let moved = nodes[1].take_samples(4);
    assert_eq!(sorted(moved.clone()), sorted(slow.clone()));
    wait_until("the cancel at node 0", || {
        nodes[0].script().cancelled.len() == 4
    });
    // Node 0 answers after all: too late, and not heard twice.
    nodes[0].answer(&slow);
    nodes[1].answer(&moved);
    sink.wait_for_completions(8);
    assert!(sink.completions().values().all(|&n| n == 1));
    let stats = qdl.stats();
    assert_eq!((stats.late_answers, stats.cancelled), (4, 4));
}

#[test]
fn first_tokens_reach_the_loadgen_before_their_completions_and_once() {
    let nodes = nodes(1, "llama2-70b");
    let qdl = qdl(&nodes, "llama2-70b", 4, |_| {});
    let sink = issue(&qdl, 0..2);
    let ids = nodes[0].take_samples(2);
    let (a, b) = (ids[0], ids[1]);
    nodes[0].send(vec![
        first_token_message(a, &[1, 0, 0, 0]),
        first_token_message(b, &[2, 0, 0, 0]),
        output(a, 8),
    ]);
    // A second first token for b is dropped.
    nodes[0].send(vec![first_token_message(b, &[3, 0, 0, 0]), output(b, 9)]);
    sink.wait_for_completions(2);
    let seen = sink.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            Seen::FirstToken(a),
            Seen::FirstToken(b),
            Seen::Complete(a, a.to_le_bytes().to_vec()),
            Seen::Complete(b, b.to_le_bytes().to_vec()),
        ]
    );
    let stats = qdl.stats();
    assert_eq!((stats.first_tokens, stats.late_first_tokens), (2, 1));
}

#[test]
fn a_vanished_node_rejoins_and_takes_work_again() {
    let nodes = nodes(2, "resnet50");
    let qdl = halves(&nodes, |c| {
        c.rejoin = Some(Backoff {
            first: Duration::from_millis(1),
            max: Duration::from_millis(10),
        });
    });
    nodes[0].vanish();
    wait_until("node 0 to rejoin", || nodes[0].opened() == 2);
    wait_until("the rejoin recorded", || {
        qdl.observer()
            .node_changes()
            .iter()
            .any(|c| c.state == NodeState::Rejoined)
    });
    let sink = issue(&qdl, 0..8);
    let ids0 = nodes[0].take_samples(4);
    let ids1 = nodes[1].take_samples(4);
    nodes[0].answer(&ids0);
    nodes[1].answer(&ids1);
    sink.wait_for_completions(8);
    assert!(sink.completions().values().all(|&n| n == 1));
    assert_eq!(qdl.stats().rejoins, 1);
}

#[test]
fn a_lost_node_in_submission_mode_fails_the_run_and_moves_nothing() {
    let nodes = nodes(2, "resnet50");
    let qdl = halves(&nodes, |c| {
        c.no_failover = true;
    });
    let sink = issue(&qdl, 0..8);
    nodes[0].take_samples(4);
    nodes[1].take_samples(4);
    nodes[0].vanish();
    sink.wait_for_completions(8);
    let seen = sink.seen.lock().unwrap().clone();
    assert!(
        matches!(&seen[..], [Seen::Fail(reason)] if reason.contains("no failover")),
        "{seen:?}"
    );
    assert!(nodes[1].script().samples.is_empty(), "nothing moved");
}

#[test]
fn the_settings_are_the_ones_the_qdl_ran_with() {
    let nodes = nodes(2, "resnet50");
    let submission = halves(&nodes, |c| {
        c.poll_next_query = Duration::from_micros(50);
        c.node_timeout = Some(Duration::from_secs(7));
        c.rejoin = Some(Backoff::default());
        c.no_failover = true;
        c.max_piece_bytes = 1000;
    });
    let settings = submission.settings();
    assert_eq!(
        (
            settings.max_piece_samples,
            settings.io_threads,
            settings.poll_next_query_us,
            settings.node_timeout_s,
        ),
        (4, 1, 50, Some(7.0))
    );
    assert!(!settings.tls, "local links carry no TLS");
    assert!(
        !settings.failover && !settings.rejoin,
        "submission mode neither moves samples nor brings nodes back: {settings:?}"
    );
    assert!(settings.window_sequences.is_empty());
    let line = settings.to_string();
    assert!(
        line.contains(
            "windows of 1024 samples / 64 MiB per node; pieces of at most 4 samples / 1000 B;"
        ),
        "sizes are shown as set, not rounded: {line}"
    );

    // A token model: pieces of one sample, and each node's window its
    // sequences, or the sample window where that is smaller.
    let token_nodes = [
        ScriptedNode::running_sequences("a", "llama2-70b", 3),
        ScriptedNode::running_sequences("b", "llama2-70b", 5000),
    ];
    let tokens = qdl(&token_nodes, "llama2-70b", 4, |c| c.window.samples = 64);
    let settings = tokens.settings();
    assert_eq!(settings.max_piece_samples, 1);
    assert_eq!(settings.window_sequences, [3, 64]);
    let line = settings.to_string();
    assert!(
        line.starts_with(
            "no TLS; windows of [3, 64] sequences per node; pieces of at most 1 samples"
        ),
        "{line}"
    );
}

fn sorted(mut ids: Vec<u64>) -> Vec<u64> {
    ids.sort_unstable();
    ids
}

/// Answers `ids` on a thread of its own, as a link's I/O thread would,
/// and says when that thread is done with the answer.
fn answer_on_a_thread(node: &Arc<ScriptedNode>, ids: Vec<u64>) -> std::sync::mpsc::Receiver<()> {
    let (done, returned) = std::sync::mpsc::channel();
    let node = node.clone();
    std::thread::spawn(move || {
        node.answer(&ids);
        let _ = done.send(());
    });
    returned
}

#[test]
fn the_last_answers_thread_polls_until_the_next_query_is_handed_over() {
    const LONG: Duration = Duration::from_secs(60);
    let nodes = nodes(1, "resnet50");
    let qdl = qdl(&nodes, "resnet50", 4, |c| c.poll_next_query = LONG);
    let sink = issue(&qdl, 0..1);
    let returned = answer_on_a_thread(&nodes[0], nodes[0].take_samples(1));
    sink.wait_for_completions(1);
    // The LoadGen has its answer; the answering thread waits for more.
    assert!(
        returned.recv_timeout(Duration::from_millis(100)).is_err(),
        "the thread that handed over the last answer returned without polling"
    );
    issue(&qdl, 1..2);
    returned
        .recv_timeout(WAIT)
        .expect("the poll ends once the next query is handed over");
    assert_eq!(nodes[0].take_samples(1).len(), 1);
}

#[test]
fn the_poll_for_the_next_query_is_bounded_and_only_after_the_last_answer() {
    // Bounded: no next query, and the thread still returns.
    let nodes = nodes(1, "resnet50");
    let qdl = qdl(&nodes, "resnet50", 4, |c| {
        c.poll_next_query = Duration::from_millis(20)
    });
    let sink = issue(&qdl, 0..1);
    let returned = answer_on_a_thread(&nodes[0], nodes[0].take_samples(1));
    sink.wait_for_completions(1);
    returned.recv_timeout(WAIT).expect("the poll is bounded");

    // Not while another piece is still out: the first half's answer
    // returns at once although the poll would last seconds.
    let nodes = self::nodes(2, "resnet50");
    let qdl = halves(&nodes, |c| c.poll_next_query = Duration::from_secs(5));
    let sink = issue(&qdl, 0..8);
    let first = nodes[0].take_samples(4);
    let second = nodes[1].take_samples(4);
    answer_on_a_thread(&nodes[0], first)
        .recv_timeout(Duration::from_secs(2))
        .expect("no poll while samples are in flight");
    // The second half is the last: its thread polls, and the LoadGen
    // does not wait for that; the next query ends the poll.
    let last = answer_on_a_thread(&nodes[1], second);
    sink.wait_for_completions(8);
    assert!(sink.completions().values().all(|&n| n == 1));
    issue(&qdl, 0..1);
    last.recv_timeout(WAIT)
        .expect("the poll ends once the next query is handed over");
}
