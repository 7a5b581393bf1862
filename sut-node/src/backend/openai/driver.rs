//! The engine backend's device thread: it takes samples as they come and
//! opens one streamed request per sample, up to `max_in_flight` at once
//! (the engine batches them continuously), on the client's runtime. Each
//! sample gets its first token when the engine streams it, then its whole
//! answer or an error.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use super::OpenaiBackend;
use crate::backend::llm::driver::{SequenceSource, TokenEvent};

/// Longest the thread waits for a free request slot without checking
/// [`SequenceSource::abandoned`].
const ABANDON_CHECK: Duration = Duration::from_millis(50);

/// Where a device's events go; called from the client's runtime.
pub type Sink<T> = Arc<dyn Fn(TokenEvent<'_, T>) + Send + Sync>;

/// Runs until `source` ends; what still runs then is dropped (the node
/// stops after its drain, and those samples' clients are gone).
pub fn run_device<T: Send + Sync + 'static>(
    backend: &Arc<OpenaiBackend>,
    source: &mut impl SequenceSource<T>,
    input: fn(&T) -> &[u8],
    sink: Sink<T>,
) {
    let slots = Arc::new(Semaphore::new(backend.config().max_in_flight));
    let (cancel, cancelled) = watch::channel(false);
    while let Some(item) = source.wait() {
        let prompt = match backend.prompt(input(&item)) {
            Ok(prompt) => prompt,
            Err(error) => {
                sink(TokenEvent::Failed {
                    item,
                    error: error.to_string(),
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
        let (backend, sink, mut cancelled) = (backend.clone(), sink.clone(), cancelled.clone());
        backend.clone().client().spawn(async move {
            let _slot = slot;
            let result = {
                let first = |id: u32| {
                    sink(TokenEvent::FirstToken {
                        item: &item,
                        token: &token_bytes(&[id]),
                    })
                };
                let answer = backend.client().answer(&prompt, first);
                tokio::select! {
                    result = answer => Some(result),
                    _ = cancelled.wait_for(|c| *c) => None,
                }
            };
            match result {
                None => {}
                Some(Ok(tokens)) => sink(TokenEvent::Done {
                    n_tokens: tokens.len(),
                    tokens: token_bytes(&tokens),
                    item,
                }),
                Some(Err(e)) => sink(TokenEvent::Failed {
                    item,
                    error: e.to_string(),
                }),
            }
        });
    }
    cancel.send_replace(true);
}

/// Token ids as the node sends them: int32 little endian.
pub fn token_bytes(ids: &[u32]) -> Vec<u8> {
    ids.iter()
        .flat_map(|&id| (id as i32).to_le_bytes())
        .collect()
}
