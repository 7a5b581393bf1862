//! The two transports over one node: gRPC (tonic) and QUIC (quinn).

pub mod grpc;
pub mod quic;

use netdiv_proto::{pb, PROTOCOL_VERSION};
use tokio::sync::mpsc::UnboundedReceiver;

/// Most completions one answer message carries: a busy stream sends fewer,
/// larger messages, still far below the message size limit.
pub const COMPLETIONS_PER_MESSAGE: usize = 4096;

/// Whether a client's protocol version is this node's.
pub fn version_mismatch(client: u32) -> Option<String> {
    (client != PROTOCOL_VERSION).then(|| {
        format!(
            "client speaks netdiv protocol version {client}, this node speaks {PROTOCOL_VERSION}"
        )
    })
}

/// Waits for the next completion, then takes whatever else is ready, so a
/// busy stream sends fewer, larger messages.
pub async fn next_batch(
    rx: &mut UnboundedReceiver<pb::Completion>,
    limit: usize,
) -> Option<pb::CompletionBatch> {
    let first = rx.recv().await?;
    let mut completions = vec![first];
    while completions.len() < limit {
        match rx.try_recv() {
            Ok(c) => completions.push(c),
            Err(_) => break,
        }
    }
    Some(pb::CompletionBatch { completions })
}
