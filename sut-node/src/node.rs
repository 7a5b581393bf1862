//! The node's core, shared by both transports: accept a query's samples
//! (decoding is timed SUT work), queue them for the device threads, and
//! send exactly one completion per sample back to the connection it came
//! from. Nothing is kept once a sample is answered.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use netdiv_proto::codec::Codec;
use netdiv_proto::sample::{accept_sample, completion, declined_completion, failed_completion};
use netdiv_proto::{pb, Benchmark, Direction};
use tokio::sync::{mpsc::UnboundedSender, watch};

use crate::backend::Backend;
use crate::batcher::BatchPolicy;

/// Where a sample's completion goes: the stream it arrived on.
pub type ReplyTo = UnboundedSender<pb::Completion>;

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
}

struct WorkItem {
    response_id: u64,
    data: Bytes,
    reply: ReplyTo,
}

/// A running node: device threads behind a shared queue.
pub struct Node {
    settings: NodeSettings,
    backend: Arc<dyn Backend>,
    queue: Mutex<Option<mpsc::Sender<WorkItem>>>,
    accepting: AtomicBool,
    in_flight: AtomicU64,
    idle: watch::Sender<u64>,
    batches_run: AtomicU64,
    samples_run: AtomicU64,
    largest_batch: AtomicU32,
    devices: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Node {
    /// Starts the device threads.
    pub fn start(settings: NodeSettings, backend: Arc<dyn Backend>) -> Arc<Node> {
        let (tx, rx) = mpsc::channel::<WorkItem>();
        let node = Arc::new(Node {
            settings,
            backend: backend.clone(),
            queue: Mutex::new(Some(tx)),
            accepting: AtomicBool::new(true),
            in_flight: AtomicU64::new(0),
            idle: watch::channel(0).0,
            batches_run: AtomicU64::new(0),
            samples_run: AtomicU64::new(0),
            largest_batch: AtomicU32::new(0),
            devices: Mutex::new(Vec::new()),
        });
        let rx = Arc::new(Mutex::new(rx));
        let handles = (0..backend.devices())
            .map(|device| {
                let node = node.clone();
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("device-{device}"))
                    .spawn(move || node.device_loop(device, &rx))
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

    fn device_loop(&self, device: usize, rx: &Mutex<mpsc::Receiver<WorkItem>>) {
        loop {
            let batch = {
                let Ok(mut rx) = rx.lock() else { return };
                match self.settings.batching.collect(&mut *rx) {
                    Some(batch) => batch,
                    None => return,
                }
            };
            let inputs: Vec<&[u8]> = batch.iter().map(|w| &w.data[..]).collect();
            let outputs = self.backend.run(device, &inputs);
            self.batches_run.fetch_add(1, Ordering::Relaxed);
            self.samples_run
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            self.largest_batch
                .fetch_max(batch.len() as u32, Ordering::Relaxed);
            let mut outputs = outputs.into_iter();
            for item in batch {
                let reply = match outputs.next() {
                    Some(Ok(out)) => {
                        completion(item.response_id, &out, self.settings.response_codec)
                    }
                    Some(Err(e)) => failed_completion(item.response_id, e),
                    None => failed_completion(item.response_id, "backend returned too few outputs"),
                };
                // A closed stream means the client left; nothing to answer.
                let _ = item.reply.send(reply);
                self.finish_one();
            }
        }
    }

    fn finish_one(&self) {
        let left = self.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0 {
            self.idle.send_replace(left);
        }
    }

    /// Accepts one query. Every sample gets exactly one completion on
    /// `reply`: its output, or an error naming why it was refused. Returns
    /// the number of samples.
    pub fn submit_query(&self, query: pb::Query, reply: &ReplyTo) -> usize {
        let count = query.samples.len();
        let queue = self.queue.lock().expect("queue").clone();
        for sample in query.samples {
            let id = sample.response_id;
            let Some(queue) = queue
                .as_ref()
                .filter(|_| self.accepting.load(Ordering::Acquire))
            else {
                let _ = reply.send(declined_completion(id, "node is shutting down"));
                continue;
            };
            match accept_sample(
                sample,
                &self.settings.benchmark,
                self.settings.max_sample_bytes,
            ) {
                Ok(input) => {
                    self.in_flight.fetch_add(1, Ordering::AcqRel);
                    let item = WorkItem {
                        response_id: input.response_id,
                        data: input.data,
                        reply: reply.clone(),
                    };
                    if queue.send(item).is_err() {
                        self.finish_one();
                        let _ = reply.send(declined_completion(id, "node is shutting down"));
                    }
                }
                Err(e) => {
                    eprintln!(
                        "sut-node {}: query {}: {e}",
                        self.settings.name, query.query_id
                    );
                    let _ = reply.send(failed_completion(id, e.to_string()));
                }
            }
        }
        count
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

    /// Ends the device threads once drained.
    pub fn stop_devices(&self) {
        self.queue.lock().expect("queue").take();
        for handle in self.devices.lock().expect("devices").drain(..) {
            let _ = handle.join();
        }
    }

    /// The node as `Info` reports it.
    pub fn info(&self, nics: Vec<pb::Nic>) -> pb::NodeInfo {
        let s = &self.settings;
        pb::NodeInfo {
            name: s.name.clone(),
            software_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            backend: self.backend.kind().into(),
            backend_detail: self.backend.detail(),
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
            max_batch_size: s.batching.max_batch_size as u32,
            max_batch_wait_us: s.batching.max_wait_us,
            batches_run: self.batches_run.load(Ordering::Relaxed),
            samples_run: self.samples_run.load(Ordering::Relaxed),
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
            response_codec: s.response_codec.to_proto() as i32,
            benchmark: s.benchmark.to_string(),
        }
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
            },
            Arc::new(SyntheticBackend::new(SyntheticConfig::default())),
        )
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
        let q = pb::Query {
            query_id: 1,
            samples: vec![sample(1, b"a", 0), sample(2, b"b", 1), sample(3, b"c", 9)],
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
            },
            &tx,
        );
        assert!(rx.recv().await.unwrap().error.contains("shutting down"));
        node.stop_devices();
        assert!(rx.try_recv().is_err());
    }
}
