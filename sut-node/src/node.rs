//! The node's core, shared by both transports: accept a query's samples
//! (decoding is timed SUT work), queue them for the device threads (or,
//! with `run_on_io_thread`, run them on the I/O thread that received
//! them), and send exactly one completion per sample back to the
//! connection it came from. For a benchmark with token latencies the
//! device threads run the LLM backend, and each sample's first token goes
//! to the same connection first. Nothing is kept once a sample is
//! answered.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use netdiv_proto::codec::Codec;
use netdiv_proto::sample::{
    accept_sample, cancelled_completion, completion, declined_completion, failed_completion,
    first_token_message, token_completion,
};
use netdiv_proto::{pb, Benchmark, Direction};
use tokio::sync::watch;

use crate::backend::device::{run_batch, BatchDevice, Device, DeviceEvent, DeviceQueue, Sink};
use crate::backend::synthetic_llm::SyntheticLlmBackend;
use crate::backend::{check_benchmark, Backend, BackendConfig, BackendError};
use crate::batcher::BatchPolicy;
use crate::limits::Limits;
use crate::metrics::NodeMetrics;
use crate::reply::Cancel;
pub use crate::reply::ReplyTo;

/// What the node is configured to do, independent of transports.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    /// The node's unique name.
    pub name: String,
    /// The benchmark whose codec table applies.
    pub benchmark: Benchmark,
    /// The codec of responses (one the benchmark allows for outputs).
    pub response_codec: Codec,
    /// Largest decoded sample accepted, in bytes.
    pub max_sample_bytes: u64,
    /// SUT-side batching.
    pub batching: BatchPolicy,
    /// What the node takes on at once.
    pub limits: Limits,
    /// Run each query's samples on the I/O thread that received it, as
    /// batches of the query's own samples, instead of handing them to
    /// device threads: a latency-bound scenario saves two thread
    /// hand-offs per query. Batch backends of one device only.
    pub run_on_io_thread: bool,
}

/// One accepted sample on its way through a device: its decoded input,
/// where its answer goes, and (token samples) its cancel flag.
#[derive(Debug)]
pub struct WorkItem {
    response_id: u64,
    data: Bytes,
    reply: ReplyTo,
    cancel: Option<Cancel>,
}

impl AsRef<[u8]> for WorkItem {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl crate::backend::device::Work for WorkItem {
    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_set) || self.reply.is_closed()
    }

    fn until_cancelled(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> {
        let closed = self.reply.closed();
        let cancel = self.cancel.clone();
        Box::pin(async move {
            match cancel {
                Some(cancel) => {
                    tokio::select! {
                        _ = cancel.wait() => {}
                        _ = closed => {}
                    }
                }
                None => closed.await,
            }
        })
    }
}

/// What a node's device threads run: any backend.
pub type NodeDevice = Arc<dyn Device<WorkItem>>;

/// A running node: device threads behind a shared queue.
pub struct Node {
    settings: NodeSettings,
    device: NodeDevice,
    queue: Mutex<Option<mpsc::Sender<WorkItem>>>,
    /// The backend the I/O thread runs samples on, when the node runs
    /// them there (`run_on_io_thread`); no device threads then.
    io_thread_backend: Option<Arc<dyn Backend>>,
    accepting: AtomicBool,
    /// Set by `stop_devices`: token sequences still running are dropped.
    stopped: AtomicBool,
    in_flight: AtomicU64,
    /// Tokens generated since start, for all samples: what query streams
    /// report as the node's token progress.
    tokens_generated: AtomicU64,
    /// Decoded bytes of the samples in flight.
    held_bytes: AtomicU64,
    idle: watch::Sender<u64>,
    batches_run: AtomicU64,
    samples_run: AtomicU64,
    largest_batch: AtomicU32,
    devices: Mutex<Vec<std::thread::JoinHandle<()>>>,
    metrics: Arc<NodeMetrics>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.settings.name)
            .field("benchmark", &self.settings.benchmark)
            .field("backend", &self.device.kind())
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Starts the device threads of a batch backend. The backend is not
    /// checked against the benchmark: [`Node::launch`] does that.
    pub fn start(settings: NodeSettings, backend: Arc<dyn Backend>) -> Arc<Node> {
        Node::start_unchecked(settings, Arc::new(BatchDevice::new(backend)))
    }

    /// Starts the device threads of the synthetic LLM backend: each sample
    /// gets a first-token message, then its completion with `n_tokens`.
    /// Not checked against the benchmark: [`Node::launch`] does that.
    pub fn start_tokens(settings: NodeSettings, backend: Arc<SyntheticLlmBackend>) -> Arc<Node> {
        Node::start_unchecked(settings, backend)
    }

    /// Starts a node whose backend answers the way its benchmark is
    /// measured: streamed tokens exactly when it has token latencies, and
    /// an LLM backend built for that very benchmark.
    /// With `run_on_io_thread` the device must run whole batches, on one
    /// device (the one I/O thread runs them all).
    pub fn launch(settings: NodeSettings, device: NodeDevice) -> Result<Arc<Node>, BackendError> {
        check_benchmark(&*device, &settings.benchmark)?;
        if settings.run_on_io_thread {
            let backend = device
                .batch_backend()
                .ok_or(BackendError::NotOnIoThread(device.kind()))?;
            if backend.devices() > 1 {
                return Err(BackendError::IoThreadDevices {
                    backend: backend.kind(),
                    devices: backend.devices(),
                });
            }
        }
        Ok(Node::start_unchecked(settings, device))
    }

    /// Starts the backend `config` describes for the node's benchmark
    /// ([`BackendConfig::build_for`]: `synthetic` runs the LLM cost model
    /// for a benchmark with token latencies), then the node. What the
    /// daemon and in-process nodes call.
    pub fn from_config(
        settings: NodeSettings,
        config: &BackendConfig,
    ) -> Result<Arc<Node>, BackendError> {
        let device = config.build_for(&settings.benchmark)?;
        Node::launch(settings, device)
    }

    fn start_unchecked(settings: NodeSettings, device: NodeDevice) -> Arc<Node> {
        let (tx, rx) = mpsc::channel::<WorkItem>();
        let io_thread_backend = settings
            .run_on_io_thread
            .then(|| device.batch_backend())
            .flatten();
        let threads = match io_thread_backend {
            Some(_) => 0,
            None => device.threads(),
        };
        let node = Arc::new(Node {
            settings,
            device,
            queue: Mutex::new(Some(tx)),
            io_thread_backend,
            accepting: AtomicBool::new(true),
            stopped: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
            tokens_generated: AtomicU64::new(0),
            held_bytes: AtomicU64::new(0),
            idle: watch::channel(0).0,
            batches_run: AtomicU64::new(0),
            samples_run: AtomicU64::new(0),
            largest_batch: AtomicU32::new(0),
            devices: Mutex::new(Vec::new()),
            metrics: Arc::new(NodeMetrics::default()),
        });
        let rx = Arc::new(Mutex::new(rx));
        let handles = (0..threads)
            .map(|thread| {
                let node = node.clone();
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("device-{thread}"))
                    .spawn(move || {
                        let mut queue = SharedQueue {
                            queue: &rx,
                            stopped: &node.stopped,
                            batching: &node.settings.batching,
                        };
                        let sink: Sink<WorkItem> = {
                            let node = node.clone();
                            Arc::new(move |event| node.device_event(event))
                        };
                        node.device.clone().run(thread, &mut queue, &sink);
                    })
                    .expect("spawn device thread")
            })
            .collect();
        *node.devices.lock().expect("devices") = handles;
        node
    }

    /// What the node was started with.
    pub fn settings(&self) -> &NodeSettings {
        &self.settings
    }

    /// What runs the model.
    pub fn device(&self) -> &NodeDevice {
        &self.device
    }

    /// What the node counts, for its metrics endpoint.
    pub fn metrics(&self) -> &Arc<NodeMetrics> {
        &self.metrics
    }

    /// Tokens generated since start, for all samples of all clients.
    pub fn tokens_generated(&self) -> u64 {
        self.tokens_generated.load(Ordering::Relaxed)
    }

    /// Sends one answer, counted by what it is.
    fn answer(&self, reply: &ReplyTo, message: pb::Completion) {
        self.metrics.answer(&message);
        reply.send(message);
    }

    /// Sends what a device produced to the sample's connection.
    fn device_event(&self, event: DeviceEvent<'_, WorkItem>) {
        match event {
            DeviceEvent::Batch { samples, seconds } => self.count_batch(samples, Some(seconds)),
            DeviceEvent::Output { item, output } => {
                let reply = completion(item.response_id, &output, self.settings.response_codec);
                self.answer(&item.reply, reply);
                self.finish_one(&item);
            }
            DeviceEvent::FirstToken { item, token } => {
                self.answer(&item.reply, first_token_message(item.response_id, token));
            }
            DeviceEvent::Done {
                item,
                tokens,
                n_tokens,
            } => {
                let reply = token_completion(
                    item.response_id,
                    &tokens,
                    self.settings.response_codec,
                    n_tokens as i64,
                );
                self.answer(&item.reply, reply);
                self.samples_run.fetch_add(1, Ordering::Relaxed);
                self.finish_one(&item);
            }
            DeviceEvent::Failed { item, error } => {
                let message = format!("sample {}: {error}", item.response_id);
                tracing::warn!(
                    node = %self.settings.name,
                    response_id = item.response_id,
                    "sample failed: {error}"
                );
                self.answer(&item.reply, failed_completion(item.response_id, message));
                self.finish_one(&item);
            }
            DeviceEvent::Tokens { count } => self.count_tokens(count),
            DeviceEvent::Declined { item, reason } => {
                tracing::warn!(
                    node = %self.settings.name,
                    response_id = item.response_id,
                    "sample declined: {reason}"
                );
                self.answer(&item.reply, declined_completion(item.response_id, reason));
                self.finish_one(&item);
            }
            DeviceEvent::Cancelled { item } => {
                tracing::debug!(
                    node = %self.settings.name,
                    response_id = item.response_id,
                    "sample cancelled by its client"
                );
                self.metrics.cancelled();
                if !item.reply.is_closed() {
                    self.answer(&item.reply, cancelled_completion(item.response_id));
                }
                self.finish_one(&item);
            }
            DeviceEvent::Step { sequences } => {
                self.count_tokens(sequences);
                self.batches_run.fetch_add(1, Ordering::Relaxed);
                self.largest_batch
                    .fetch_max(sequences as u32, Ordering::Relaxed);
                self.metrics.batch(sequences, None);
            }
        }
    }

    fn count_tokens(&self, tokens: usize) {
        self.tokens_generated
            .fetch_add(tokens as u64, Ordering::Relaxed);
        self.metrics.tokens(tokens as u64);
    }

    fn count_batch(&self, samples: usize, seconds: Option<f64>) {
        self.metrics.batch(samples, seconds);
        self.batches_run.fetch_add(1, Ordering::Relaxed);
        self.samples_run
            .fetch_add(samples as u64, Ordering::Relaxed);
        self.largest_batch
            .fetch_max(samples as u32, Ordering::Relaxed);
    }

    fn finish_one(&self, item: &WorkItem) {
        if item.cancel.is_some() {
            item.reply.release(item.response_id);
        }
        self.held_bytes
            .fetch_sub(item.data.len() as u64, Ordering::AcqRel);
        let left = self.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        self.metrics.set_in_flight(left);
        if left == 0 {
            self.idle.send_replace(left);
        }
    }

    /// Accepts one query. Every sample gets exactly one completion on
    /// `reply`: its output, or an error naming why it was refused. Returns
    /// the number of samples.
    /// A query that cancels (`Query.cancel`) flags the token samples this
    /// stream still holds; their devices drop them and each gets a
    /// `cancelled` completion.
    pub fn submit_query(&self, query: pb::Query, reply: &ReplyTo) -> usize {
        if !query.cancel.is_empty() {
            let held = reply.cancel(&query.cancel);
            tracing::debug!(
                node = %self.settings.name,
                asked = query.cancel.len(),
                held,
                "client cancels samples"
            );
        }
        let count = query.samples.len();
        let bytes = query.samples.iter().map(|s| s.data.len()).sum();
        self.metrics.query(count, bytes);
        let queue = self.queue.lock().expect("queue").clone();
        let capacity = self.capacity();
        let mut here = Vec::new();
        for sample in query.samples {
            let id = sample.response_id;
            let Some(queue) = queue
                .as_ref()
                .filter(|_| self.accepting.load(Ordering::Acquire))
            else {
                self.answer(reply, declined_completion(id, "node is shutting down"));
                continue;
            };
            if self.in_flight.load(Ordering::Acquire) >= capacity {
                self.answer(
                    reply,
                    declined_completion(
                        id,
                        format!("node is full: it holds {capacity} samples, its limit"),
                    ),
                );
                continue;
            }
            match accept_sample(
                sample,
                &self.settings.benchmark,
                self.settings.max_sample_bytes,
            ) {
                Ok(input) => {
                    let bytes = input.data.len() as u64;
                    let held_bytes = self.held_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
                    if held_bytes > self.settings.limits.max_bytes_held {
                        self.held_bytes.fetch_sub(bytes, Ordering::AcqRel);
                        let limit = self.settings.limits.max_bytes_held;
                        self.answer(
                            reply,
                            declined_completion(
                                id,
                                format!("node is full: it holds {limit} sample bytes, its limit"),
                            ),
                        );
                        continue;
                    }
                    let held = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
                    self.metrics.set_in_flight(held);
                    let cancel = self
                        .settings
                        .benchmark
                        .uses_token_latencies()
                        .then(|| reply.hold(input.response_id));
                    let item = WorkItem {
                        response_id: input.response_id,
                        data: input.data,
                        reply: reply.clone(),
                        cancel,
                    };
                    if self.io_thread_backend.is_some() {
                        here.push(item);
                    } else if let Err(refused) = queue.send(item) {
                        self.finish_one(&refused.0);
                        self.answer(reply, declined_completion(id, "node is shutting down"));
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        node = %self.settings.name,
                        query_id = query.query_id,
                        response_id = id,
                        "sample refused: {e}"
                    );
                    self.answer(reply, failed_completion(id, e.to_string()));
                }
            }
        }
        if let Some(backend) = &self.io_thread_backend {
            self.run_here(&**backend, here);
        }
        count
    }

    /// Runs a query's accepted samples on this thread (the I/O thread
    /// that received them), in batches of at most the policy's size.
    fn run_here(&self, backend: &dyn Backend, mut samples: Vec<WorkItem>) {
        let max = self.settings.batching.max_batch_size.max(1);
        while !samples.is_empty() {
            let rest = samples.split_off(samples.len().min(max));
            run_batch(backend, 0, samples, &|event| self.device_event(event));
            samples = rest;
        }
    }

    /// Samples the node holds at most before it declines more: its
    /// configured limit, or a serving engine's open and waiting requests
    /// when fewer.
    fn capacity(&self) -> u64 {
        let limit = self.settings.limits.max_samples_held;
        self.device.capacity().map_or(limit, |c| c.min(limit))
    }

    /// Stops taking new samples; those already queued still run.
    pub fn begin_shutdown(&self) {
        self.accepting.store(false, Ordering::Release);
    }

    /// Resolves once no sample is in flight.
    pub async fn drained(&self) {
        let mut rx = self.idle.subscribe();
        while self.in_flight.load(Ordering::Acquire) != 0 {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Ends the device threads once drained. A batch device first runs
    /// what is still queued; a token device drops the sequences it still
    /// runs at once (the drain timed out, and their clients are gone: a
    /// long answer could otherwise hold the stop for minutes).
    pub fn stop_devices(&self) {
        self.stopped.store(true, Ordering::Release);
        self.queue.lock().expect("queue").take();
        for handle in self.devices.lock().expect("devices").drain(..) {
            let _ = handle.join();
        }
    }

    /// The node as `Info` reports it. For the LLM backend a "batch" is a
    /// step, and its size the sequences in it: `max_batch_size` is then
    /// `max_sequences`, `samples_run` the samples completed.
    pub fn info(&self, nics: Vec<pb::Nic>) -> pb::NodeInfo {
        let s = &self.settings;
        let (max_batch_size, max_batch_wait_us) = match self.device.own_batch_size() {
            Some(size) => (size, 0),
            None => (s.batching.max_batch_size, s.batching.max_wait_us),
        };
        pb::NodeInfo {
            name: s.name.clone(),
            software_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            backend: self.device.kind().into(),
            backend_detail: self.device.detail(),
            nics,
            codecs: s
                .benchmark
                .codecs(Direction::Input)
                .iter()
                .map(|c| c.to_proto() as i32)
                .collect(),
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            os: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|r| format!("Linux {}", r.trim()))
                .unwrap_or_else(|_| std::env::consts::OS.into()),
            max_batch_size: max_batch_size as u32,
            max_batch_wait_us,
            batches_run: self.batches_run.load(Ordering::Relaxed),
            samples_run: self.samples_run.load(Ordering::Relaxed),
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
            response_codec: s.response_codec.to_proto() as i32,
            benchmark: s.benchmark.to_string(),
            host_id: crate::host::nic::host_identity(),
            host: Some(crate::host::nic::host()),
            hardware: Some(crate::host::hardware::hardware()),
            cpu_latency_us: crate::host::cpu_latency::held_micros(),
            concurrent_sequences: self.device.concurrent_sequences().unwrap_or(0) as u32,
            engine: self
                .device
                .engine_url()
                .map(crate::host::engine_location::locate),
        }
    }
}

/// The node's queue as a device thread sees it. A busy token device only
/// takes what it can without blocking: when another, idle, device is
/// waiting on the queue, new samples go to that one. Batches are collected
/// by the node's batching policy.
struct SharedQueue<'a> {
    queue: &'a Mutex<mpsc::Receiver<WorkItem>>,
    stopped: &'a AtomicBool,
    batching: &'a BatchPolicy,
}

impl DeviceQueue<WorkItem> for SharedQueue<'_> {
    fn batch(&mut self) -> Option<Vec<WorkItem>> {
        let mut queue = self.queue.lock().ok()?;
        self.batching.collect(&mut *queue)
    }

    fn wait(&mut self) -> Option<WorkItem> {
        self.queue.lock().ok()?.recv().ok()
    }

    fn poll(&mut self) -> Option<WorkItem> {
        self.queue.try_lock().ok()?.try_recv().ok()
    }

    fn abandoned(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::synthetic::{expected_output, SyntheticBackend, SyntheticConfig};

    fn node(benchmark: &str) -> Arc<Node> {
        Node::start(
            NodeSettings {
                name: "t".into(),
                benchmark: Benchmark::parse(benchmark).unwrap(),
                response_codec: Codec::None,
                max_sample_bytes: 1 << 20,
                batching: BatchPolicy::default(),
                limits: Limits::defaults(&Benchmark::parse(benchmark).unwrap()),
                run_on_io_thread: false,
            },
            Arc::new(SyntheticBackend::new(SyntheticConfig::default())),
        )
    }

    fn settings(benchmark: &str) -> NodeSettings {
        NodeSettings {
            name: "t".into(),
            benchmark: Benchmark::parse(benchmark).unwrap(),
            response_codec: Codec::None,
            max_sample_bytes: 1 << 20,
            batching: BatchPolicy::default(),
            limits: Limits::defaults(&Benchmark::parse(benchmark).unwrap()),
            run_on_io_thread: false,
        }
    }

    fn llm_node(benchmark: &str, llm: crate::backend::synthetic_llm::LlmConfig) -> Arc<Node> {
        let config = BackendConfig {
            llm,
            ..BackendConfig::default()
        };
        Node::from_config(settings(benchmark), &config).unwrap()
    }

    fn sample(id: u64, data: &[u8], codec: i32) -> pb::Sample {
        pb::Sample {
            response_id: id,
            data: bytes::Bytes::copy_from_slice(data),
            codec,
            decoded_size: 0,
        }
    }

    #[tokio::test]
    async fn every_sample_gets_exactly_one_completion() {
        let node = node("gptj");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tx = ReplyTo::new(tx);
        let q = pb::Query {
            query_id: 1,
            samples: vec![sample(1, b"a", 0), sample(2, b"b", 1), sample(3, b"c", 9)],
            ..Default::default()
        };
        assert_eq!(node.submit_query(q, &tx), 3);
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(rx.recv().await.unwrap());
        }
        got.sort_by_key(|c| c.response_id);
        assert_eq!(got[0].data, expected_output(b"a", 8));
        assert!(
            got[1]
                .error
                .contains("the rules allow no lz4 inputs for gptj"),
            "{:?}",
            got[1]
        );
        assert!(got[2].error.contains("unknown codec value 9"));
        node.drained().await;
        node.begin_shutdown();
        node.submit_query(
            pb::Query {
                query_id: 2,
                samples: vec![sample(4, b"d", 0)],
                ..Default::default()
            },
            &tx,
        );
        assert!(rx.recv().await.unwrap().error.contains("shutting down"));
        node.stop_devices();
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn token_nodes_send_a_first_token_then_one_completion() {
        use crate::backend::synthetic_llm::{expected_tokens, LlmConfig};
        let node = llm_node("llama2-70b-interactive", LlmConfig::zero_cost());
        let info = node.info(Vec::new());
        assert_eq!(
            (info.backend.as_str(), info.max_batch_size),
            ("synthetic-llm", 64)
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tx = ReplyTo::new(tx);
        let prompts: Vec<Vec<u8>> = (1..=20u8).map(|i| vec![i; 4 * i as usize]).collect();
        let mut samples: Vec<pb::Sample> = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| sample(i as u64, p, 0))
            .collect();
        samples.push(sample(100, &[1, 2, 3], 0));
        samples.push(sample(101, &[1, 2, 3, 4], 1));
        node.submit_query(
            pb::Query {
                query_id: 1,
                samples,
                ..Default::default()
            },
            &tx,
        );
        let mut firsts = vec![None; prompts.len()];
        let mut done = 0;
        let mut errors = Vec::new();
        while done + errors.len() < prompts.len() + 2 {
            let c = rx.recv().await.unwrap();
            if !c.error.is_empty() {
                errors.push(c.error);
                continue;
            }
            let i = c.response_id as usize;
            if c.first_token {
                assert!(firsts[i].is_none(), "two first tokens for {i}");
                assert_eq!(c.n_tokens, 0);
                firsts[i] = Some(c.data);
            } else {
                let first = firsts[i].as_ref().expect("completion before first token");
                assert!(c.n_tokens >= 2);
                assert_eq!(c.data, expected_tokens(&prompts[i], c.n_tokens as usize));
                assert_eq!(first[..], c.data[..4]);
                done += 1;
            }
        }
        errors.sort();
        assert_eq!(
            errors,
            [
                "sample 100: an input of 3 bytes is not a whole number of int32 token ids",
                "sample 101: the rules allow no lz4 inputs for llama2-70b-interactive (allowed: none)"
            ]
        );
        node.drained().await;
        let info = node.info(Vec::new());
        assert_eq!(info.samples_run, 20);
        assert!(info.largest_batch > 1, "{info:?}");
        node.begin_shutdown();
        node.stop_devices();
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn token_samples_stay_in_flight_until_their_completion() {
        use crate::backend::synthetic_llm::LlmConfig;
        // 40 tokens of 1 ms each: the first token comes long before the end.
        let node = llm_node(
            "mixtral-8x7b",
            LlmConfig {
                prefill_us_per_token: 0.0,
                decode_us_per_token: 1000.0,
                output_tokens: Some(40),
                ..LlmConfig::default()
            },
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tx = ReplyTo::new(tx);
        node.submit_query(
            pb::Query {
                query_id: 1,
                samples: vec![sample(7, &[0; 16], 0)],
                ..Default::default()
            },
            &tx,
        );
        let first = rx.recv().await.unwrap();
        assert!(first.first_token);
        node.begin_shutdown();
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(5), node.drained())
                .await
                .is_err(),
            "drained before the completion"
        );
        node.drained().await;
        let last = rx.try_recv().unwrap();
        assert_eq!((last.first_token, last.n_tokens), (false, 40));
        node.stop_devices();
    }

    /// Long answers (1 ms per token, 10,000 tokens each) that the client
    /// takes back: a cancelled sample leaves its device at once with one
    /// `cancelled` answer, and the token count shows the node working.
    #[tokio::test]
    async fn a_cancelled_token_sample_is_dropped_with_one_cancelled_answer() {
        use crate::backend::synthetic_llm::LlmConfig;
        let node = llm_node(
            "deepseek-r1",
            LlmConfig {
                prefill_us_per_token: 0.0,
                decode_us_per_token: 1000.0,
                output_tokens: Some(10_000),
                ..LlmConfig::default()
            },
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tx = ReplyTo::new(tx);
        let samples = (1..=3).map(|id| sample(id, &[0; 16], 0)).collect();
        node.submit_query(
            pb::Query {
                query_id: 1,
                samples,
                ..Default::default()
            },
            &tx,
        );
        for _ in 0..3 {
            assert!(rx.recv().await.unwrap().first_token);
        }
        let before = node.tokens_generated();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(node.tokens_generated() > before + 10, "no tokens counted");
        // 2 and 3 taken back (4 was never sent): each answered once,
        // as cancelled; 1 runs on.
        node.submit_query(
            pb::Query {
                cancel: vec![2, 3, 4],
                ..Default::default()
            },
            &tx,
        );
        let mut cancelled = Vec::new();
        for _ in 0..2 {
            let c = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
                .await
                .expect("cancelled within 5 s, not after the answer")
                .unwrap();
            assert!(
                c.cancelled && c.data.is_empty() && c.error.is_empty(),
                "{c:?}"
            );
            cancelled.push(c.response_id);
        }
        cancelled.sort_unstable();
        assert_eq!(cancelled, [2, 3]);
        assert_eq!(node.in_flight.load(Ordering::Acquire), 1);
        // The client gone: its last sample is dropped too, unanswered.
        drop(rx);
        tokio::time::timeout(std::time::Duration::from_secs(5), node.drained())
            .await
            .expect("the last sample dropped when its client left");
        node.begin_shutdown();
        node.stop_devices();
    }

    #[test]
    fn backends_that_do_not_fit_the_benchmark_are_refused() {
        let batch: NodeDevice = Arc::new(BatchDevice::new(Arc::new(SyntheticBackend::new(
            SyntheticConfig::default(),
        ))));
        let e = Node::launch(settings("deepseek-r1"), batch).err().unwrap();
        assert!(matches!(e, BackendError::NotStreaming { .. }), "{e}");
        let llm = crate::backend::synthetic_llm::SyntheticLlmBackend::new(
            Default::default(),
            &Benchmark::parse("llama2-70b").unwrap(),
        )
        .unwrap();
        let e = Node::launch(settings("bert"), Arc::new(llm)).err().unwrap();
        assert!(matches!(e, BackendError::NotATokenModel { .. }), "{e}");
        let llm = crate::backend::synthetic_llm::SyntheticLlmBackend::new(
            Default::default(),
            &Benchmark::parse("llama2-70b").unwrap(),
        )
        .unwrap();
        let e = Node::launch(settings("mixtral-8x7b"), Arc::new(llm))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "a node of benchmark mixtral-8x7b cannot run an LLM backend built for llama2-70b"
        );
    }
}
