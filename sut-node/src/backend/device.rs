//! The one interface the node's device threads run: every backend is a
//! [`Device`]. The node owns the queue, the limits and the answers; a
//! device takes samples from a [`DeviceQueue`] and says what became of
//! each as a [`DeviceEvent`], so the node core never asks which backend
//! it runs. Batch backends ([`Backend`]: synthetic, ONNX) become devices
//! through [`BatchDevice`]; the synthetic LLM and a serving engine stream
//! tokens and are devices themselves.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use netdiv_proto::Benchmark;

use super::openai::AnswerError;
use super::synthetic_llm::InvalidPrompt;

/// What a device needs of a sample: its decoded input bytes, and whether
/// its client took it back (`crate::reply`). The node's own record of the
/// sample (its id, its connection) rides along.
pub trait Work: AsRef<[u8]> + Send + Sync + 'static {
    /// Whether the client cancelled the sample or is gone: a token device
    /// drops it (a serving engine aborts its request).
    fn cancelled(&self) -> bool {
        false
    }
    /// Resolves once [`Work::cancelled`] would say so; never, by default.
    fn until_cancelled(&self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(std::future::pending())
    }
}

/// Bare inputs, as tests and benchmarks feed devices: never cancelled.
impl Work for Vec<u8> {}

/// Where a device's samples come from.
pub trait DeviceQueue<T> {
    /// Waits for the next sample; `None` once no more will come.
    fn wait(&mut self) -> Option<T>;
    /// The next sample if one is ready now, without waiting.
    fn poll(&mut self) -> Option<T>;
    /// The next batch, as the node's batching policy collects it; by
    /// default one sample at a time.
    fn batch(&mut self) -> Option<Vec<T>> {
        self.wait().map(|first| vec![first])
    }
    /// Whether to stop at once, leaving running sequences unanswered
    /// (their clients are gone: a node stopping after its drain timeout).
    fn abandoned(&self) -> bool {
        false
    }
}

/// Why one sample got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// The input is not a prompt the backend can read.
    #[error(transparent)]
    Prompt(#[from] InvalidPrompt),
    /// The serving engine failed or cut the answer short.
    #[error(transparent)]
    Engine(#[from] AnswerError),
    /// The input's size is not what the model takes per sample.
    #[error("sample has {got} bytes; {takes}")]
    WrongSize {
        /// Bytes received.
        got: usize,
        /// What the model takes, said for a person.
        takes: String,
    },
    /// The model ran and failed: the runtime's own words.
    #[error("{0}")]
    Inference(String),
    /// The backend gave fewer outputs than the batch had inputs.
    #[error("backend returned too few outputs")]
    Missing,
}

/// What a device produces, for the node to send.
#[derive(Debug)]
pub enum DeviceEvent<'a, T> {
    /// A batch ran: this many samples, in this many seconds.
    Batch {
        /// Samples in the batch.
        samples: usize,
        /// Its run time.
        seconds: f64,
    },
    /// A sample's whole output (batch backends).
    Output {
        /// The sample.
        item: T,
        /// Its output bytes.
        output: Vec<u8>,
    },
    /// A sample's first token (4 bytes: an int32 little-endian id), the
    /// moment it exists.
    FirstToken {
        /// The sample.
        item: &'a T,
        /// The token.
        token: &'a [u8],
    },
    /// A sample's last token: the whole answer, after its first token.
    Done {
        /// The sample.
        item: T,
        /// Every token, int32 little endian.
        tokens: Vec<u8>,
        /// How many.
        n_tokens: usize,
    },
    /// A sample that cannot be answered; it gets no first token, or no
    /// more tokens.
    Failed {
        /// The sample.
        item: T,
        /// Why.
        error: SampleError,
    },
    /// A step of continuous batching ran, with this many sequences (each
    /// gained a token).
    Step {
        /// Sequences in the step.
        sequences: usize,
    },
    /// A serving engine streamed this many tokens (of any sample): the
    /// node's token progress, which keeps a long answer's node alive in
    /// the QDL's eyes.
    Tokens {
        /// Tokens streamed.
        count: usize,
    },
    /// A sample the device did not run and another node may (its engine
    /// is down, or may not be used): the node declines it, retryable.
    Declined {
        /// The sample.
        item: T,
        /// Why, for the client.
        reason: String,
    },
    /// The sample's client cancelled it, or is gone: it was dropped
    /// unanswered (an engine's request aborted).
    Cancelled {
        /// The sample.
        item: T,
    },
}

/// Where a device's events go; called from the device's threads and, for
/// a serving engine, from its client's runtime.
pub type Sink<T> = Arc<dyn Fn(DeviceEvent<'_, T>) + Send + Sync>;

/// A device's own health, for one that depends on something outside the
/// node (a serving engine): true while it can answer.
pub type HealthProbe = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// What runs the model, as the node's device threads see it.
pub trait Device<T: Work>: Send + Sync {
    /// Kind for `NodeInfo.backend` ("synthetic", "onnx", ...).
    fn kind(&self) -> &'static str;
    /// Parameters for `NodeInfo.backend_detail`.
    fn detail(&self) -> String;
    /// Device threads to run.
    fn threads(&self) -> usize;
    /// The benchmark a token-streaming device was built for; `None` for
    /// a device that answers whole samples.
    fn streams_tokens_for(&self) -> Option<&Benchmark>;
    /// Samples it can take at once when that is fewer than the node's
    /// own limit (a serving engine's open and waiting requests).
    fn capacity(&self) -> Option<u64> {
        None
    }
    /// Its largest batch as `Info` reports it, when it batches by itself
    /// (sequences in a step, requests in flight); `None`: the node's
    /// batching policy.
    fn own_batch_size(&self) -> Option<usize> {
        None
    }
    /// Token devices: how many sequences it runs side by side, all its
    /// threads together (`NodeInfo.concurrent_sequences`: the QDL sends
    /// no more at once); `None` for a device that answers whole samples.
    fn concurrent_sequences(&self) -> Option<usize> {
        None
    }
    /// The URL of the serving engine it forwards to, if it does.
    fn engine_url(&self) -> Option<&str> {
        None
    }
    /// Its own health check, if it has one.
    fn health(self: Arc<Self>) -> Option<HealthProbe> {
        None
    }
    /// Runs device thread `thread` until `queue` ends.
    fn run(self: Arc<Self>, thread: usize, queue: &mut dyn DeviceQueue<T>, sink: &Sink<T>);
    /// The backend under a device that runs whole batches, which a node
    /// may run on its I/O thread ([`run_batch`]); `None` for a device
    /// that streams tokens on its own threads.
    fn batch_backend(&self) -> Option<Arc<dyn Backend>> {
        None
    }
}

/// What runs the model, a batch at a time.
pub trait Backend: Send + Sync + 'static {
    /// Kind for `NodeInfo.backend` ("synthetic", "onnx", ...).
    fn kind(&self) -> &'static str;
    /// Human-readable parameters for `NodeInfo.backend_detail`.
    fn detail(&self) -> String;
    /// How many batches can run at once (devices).
    fn devices(&self) -> usize;
    /// Runs one batch on `device`; returns one result per input, in order.
    fn run(&self, device: usize, inputs: &[&[u8]]) -> Vec<Result<Vec<u8>, SampleError>>;
}

/// A batch backend as a device: each batch the node's policy collects
/// runs at once, and each sample gets its whole output.
pub struct BatchDevice {
    backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for BatchDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchDevice")
            .field("backend", &self.backend.kind())
            .finish()
    }
}

impl BatchDevice {
    /// The device of `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> BatchDevice {
        BatchDevice { backend }
    }
}

impl<T: Work> Device<T> for BatchDevice {
    fn kind(&self) -> &'static str {
        self.backend.kind()
    }

    fn detail(&self) -> String {
        self.backend.detail()
    }

    fn threads(&self) -> usize {
        self.backend.devices()
    }

    fn streams_tokens_for(&self) -> Option<&Benchmark> {
        None
    }

    fn run(self: Arc<Self>, thread: usize, queue: &mut dyn DeviceQueue<T>, sink: &Sink<T>) {
        while let Some(batch) = queue.batch() {
            run_batch(&*self.backend, thread, batch, &**sink);
        }
    }

    fn batch_backend(&self) -> Option<Arc<dyn Backend>> {
        Some(self.backend.clone())
    }
}

/// Runs one batch on `device` of `backend`, on the calling thread: a
/// device thread's, or a node's I/O thread's when it runs its samples
/// there. Says the batch ran, then each sample's output or failure.
pub fn run_batch<T: Work>(
    backend: &dyn Backend,
    device: usize,
    batch: Vec<T>,
    sink: &dyn Fn(DeviceEvent<'_, T>),
) {
    let inputs: Vec<&[u8]> = batch.iter().map(|w| w.as_ref()).collect();
    let started = Instant::now();
    let outputs = backend.run(device, &inputs);
    sink(DeviceEvent::Batch {
        samples: batch.len(),
        seconds: started.elapsed().as_secs_f64(),
    });
    let mut outputs = outputs.into_iter();
    for item in batch {
        sink(match outputs.next().unwrap_or(Err(SampleError::Missing)) {
            Ok(output) => DeviceEvent::Output { item, output },
            Err(error) => DeviceEvent::Failed { item, error },
        });
    }
}
