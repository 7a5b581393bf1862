//! The engine backend as a [`Device`]: it takes samples as they come and
//! opens one streamed request per sample, up to `max_in_flight` at once
//! (the engine batches them continuously), on the client's runtime. Each
//! sample gets its first token when the engine streams it, then its whole
//! answer or an error.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use netdiv_proto::Benchmark;

use super::OpenaiBackend;
use crate::backend::device::{
    Device, DeviceEvent, DeviceQueue, HealthProbe, SampleError, Sink, Work,
};

/// Longest the thread waits for a free request slot without checking
/// [`DeviceQueue::abandoned`].
const ABANDON_CHECK: Duration = Duration::from_millis(50);

impl<T: Work> Device<T> for OpenaiBackend {
    fn kind(&self) -> &'static str {
        super::KIND
    }

    fn detail(&self) -> String {
        OpenaiBackend::detail(self)
    }

    /// One thread feeds the engine; its requests run concurrently.
    fn threads(&self) -> usize {
        1
    }

    fn streams_tokens_for(&self) -> Option<&Benchmark> {
        Some(self.benchmark())
    }

    fn capacity(&self) -> Option<u64> {
        Some(OpenaiBackend::capacity(self))
    }

    fn own_batch_size(&self) -> Option<usize> {
        Some(self.config().max_in_flight)
    }

    /// The requests it keeps open: the engine runs them side by side.
    fn concurrent_sequences(&self) -> Option<usize> {
        Some(self.config().max_in_flight)
    }

    fn engine_url(&self) -> Option<&str> {
        self.config().url.as_deref()
    }

    /// The engine's `/health`, asked on the client's own runtime (and its
    /// prompt cache again when it comes back: [`OpenaiBackend::check_health`]).
    fn health(self: Arc<Self>) -> Option<HealthProbe> {
        Some(Arc::new(move || {
            let engine = self.clone();
            Box::pin(async move {
                let probe = engine.clone();
                engine
                    .client()
                    .spawn(async move { probe.check_health().await })
                    .await
                    .unwrap_or(false)
            })
        }))
    }

    fn run(self: Arc<Self>, _thread: usize, queue: &mut dyn DeviceQueue<T>, sink: &Sink<T>) {
        run_device(&self, queue, sink.clone());
    }
}

/// Runs until `source` ends; what still runs then is dropped (the node
/// stops after its drain, and those samples' clients are gone).
fn run_device<T: Work>(
    backend: &Arc<OpenaiBackend>,
    source: &mut dyn DeviceQueue<T>,
    sink: Sink<T>,
) {
    let slots = Arc::new(Semaphore::new(backend.config().max_in_flight));
    let (cancel, cancelled) = watch::channel(false);
    while let Some(item) = source.wait() {
        let prompt = match backend.prompt(item.as_ref()) {
            Ok(prompt) => prompt,
            Err(error) => {
                sink(DeviceEvent::Failed {
                    item,
                    error: SampleError::Prompt(error),
                });
                continue;
            }
        };
        let slot = backend.client().block_on(async {
            loop {
                match tokio::time::timeout(ABANDON_CHECK, slots.clone().acquire_owned()).await {
                    Ok(slot) => return slot.ok(),
                    Err(_) if source.abandoned() => return None,
                    Err(_) => {}
                }
            }
        });
        let Some(slot) = slot else { break };
        if item.cancelled() {
            // Taken back while it waited for a request slot.
            sink(DeviceEvent::Cancelled { item });
            continue;
        }
        if backend.caching_since_restart() {
            sink(DeviceEvent::Declined {
                item,
                reason: "the engine reuses cached prompts (it came back from a restart with \
                         prefix caching on)"
                    .into(),
            });
            continue;
        }
        let (backend, sink, mut cancelled) = (backend.clone(), sink.clone(), cancelled.clone());
        backend.clone().client().spawn(async move {
            let _slot = slot;
            let taken_back = item.until_cancelled();
            let result = {
                let first = |id: u32| {
                    sink(DeviceEvent::FirstToken {
                        item: &item,
                        token: &token_bytes(&[id]),
                    })
                };
                let progress = |count| sink(DeviceEvent::Tokens { count });
                // Dropping the answer's future closes its stream: the
                // engine aborts the request and frees its sequence.
                let answer = backend.client().answer(&prompt, first, progress);
                tokio::select! {
                    result = answer => Ok(result),
                    _ = taken_back => Err(true),
                    _ = cancelled.wait_for(|c| *c) => Err(false),
                }
            };
            match result {
                Err(false) => {}
                Err(true) => sink(DeviceEvent::Cancelled { item }),
                Ok(Ok(tokens)) => sink(DeviceEvent::Done {
                    n_tokens: tokens.len(),
                    tokens: token_bytes(&tokens),
                    item,
                }),
                // A broken stream or refused connection from an engine that
                // no longer answers its health check: the engine died (or
                // restarts), not this sample; another node may run it.
                Ok(Err(e)) if e.is_connection() && !backend.client().healthy().await => {
                    sink(DeviceEvent::Declined {
                        item,
                        reason: format!("the engine is down ({e})"),
                    })
                }
                Ok(Err(e)) => sink(DeviceEvent::Failed {
                    item,
                    error: SampleError::Engine(e),
                }),
            }
        });
    }
    cancel.send_replace(true);
}

/// Token ids as the node sends them: int32 little endian.
pub(super) fn token_bytes(ids: &[u32]) -> Vec<u8> {
    ids.iter()
        .flat_map(|&id| (id as i32).to_le_bytes())
        .collect()
}
