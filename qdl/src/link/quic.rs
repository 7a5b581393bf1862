//! The QUIC link: one connection per node (TLS 1.3, ALPN `netdiv/1`). Name
//! and Info each get a stream of their own. Queries travel on a few
//! long-lived query streams ([`QUIC_QUERY_STREAMS`]), one `Query` frame
//! per piece, spread round-robin: a stream per query cost a stream set-up
//! and a task on both ends for every query, and capped small queries at a
//! fraction of gRPC's rate. Several streams rather than one keep a lost
//! packet from holding up every query behind it (head-of-line blocking
//! stays within one stream).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::{Bytes, BytesMut};
use netdiv_proto::framing::{self, FrameDecoder};
use netdiv_proto::pb::{self, quic_request, quic_response};
use netdiv_proto::segments::SHARED_FIELD_BYTES;
use netdiv_proto::transport::QUIC_QUERY_STREAMS;
use prost::Message;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{Call, LinkError, LinkEvents};
use crate::node_url::NodeUrl;
use crate::tls::ClientTls;

pub(crate) struct QuicLink {
    conn: quinn::Connection,
    /// Kept so the client socket lives as long as the link.
    _endpoint: quinn::Endpoint,
    /// The query streams, once `start` has opened them.
    lanes: OnceLock<Lanes>,
    /// Largest frame accepted (the benchmark's message limit).
    max_message: usize,
}

/// The query streams of a started link.
struct Lanes {
    lanes: Vec<Arc<Lane>>,
    /// Round-robin position.
    next: AtomicUsize,
    /// Each stream's reader, awaited on close.
    readers: Mutex<Vec<JoinHandle<()>>>,
}

/// One long-lived query stream.
struct Lane {
    /// Encoded frames waiting for the stream's writer.
    outbox: Mutex<Outbox>,
    /// Wakes the writer when the outbox stops being empty, or closes.
    ready: Notify,
    state: Mutex<LaneState>,
}

/// Frames waiting for a query stream's writer, in the order they were
/// sent: small frames encoded one after another into a shared buffer,
/// large ones as their own buffers (a sample's bytes are not copied). A
/// Server run of small queries so costs no allocation or channel message
/// per query, and quinn one chunk per batch, not per query.
#[derive(Default)]
struct Outbox {
    /// Small frames since the last large one.
    gathered: BytesMut,
    /// Buffers ready for the writer, before `gathered`.
    chunks: Vec<Bytes>,
    /// The link is closing: the writer finishes the stream once empty.
    closed: bool,
}

impl Outbox {
    /// Appends `request` as one frame.
    fn push(&mut self, request: &pb::QuicRequest) {
        if request.encoded_len() >= SHARED_FIELD_BYTES {
            self.flush_gathered();
            self.chunks.extend(framing::encode_buffers(request));
        } else {
            framing::encode_into(request, &mut self.gathered);
        }
    }

    fn flush_gathered(&mut self) {
        if !self.gathered.is_empty() {
            self.chunks.push(self.gathered.split().freeze());
        }
    }

    fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.gathered.is_empty()
    }

    /// Moves everything waiting into `batch`.
    fn take_into(&mut self, batch: &mut Vec<Bytes>) {
        self.flush_gathered();
        batch.append(&mut self.chunks);
    }
}

/// What a query stream holds, under one lock so a sample is never added
/// to a stream that has just ended (and reported what it held).
#[derive(Default)]
struct LaneState {
    ended: bool,
    /// The QDL finished the stream (end of the run).
    closing: bool,
    /// Samples sent on this stream and not answered yet.
    unanswered: HashSet<u64, BuildHasherDefault<IdHasher>>,
}

/// Hashes response ids (distinct numbers from a counter) with one
/// multiplication: every sample passes through the set twice, and SipHash
/// showed in profiles of small-sample runs.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Lane {
    fn state(&self) -> MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `query` in the outbox as one frame and wakes the writer if it
    /// was idle (otherwise it has been woken already, or is writing and
    /// looks again when done).
    fn enqueue(&self, query: pb::Query) {
        let request = pb::QuicRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            kind: Some(quic_request::Kind::Query(query)),
        };
        let mut outbox = self.outbox();
        let was_empty = outbox.is_empty();
        outbox.push(&request);
        drop(outbox);
        if was_empty {
            self.ready.notify_one();
        }
    }

    /// Tells the writer that nothing more comes: it writes what the
    /// outbox holds, then finishes the stream.
    fn close_outbox(&self) {
        self.outbox().closed = true;
        self.ready.notify_one();
    }
}

/// The kind of an answer, for errors about unexpected ones.
fn kind_name(kind: &quic_response::Kind) -> &'static str {
    match kind {
        quic_response::Kind::Name(_) => "a Name answer",
        quic_response::Kind::Info(_) => "an Info answer",
        quic_response::Kind::Completions(_) => "completions",
        quic_response::Kind::Error(_) => "an error",
    }
}

impl QuicLink {
    /// Connects to `url`'s node at `addr` (its host, resolved).
    pub(crate) async fn connect(
        url: &NodeUrl,
        addr: SocketAddr,
        tls: &ClientTls,
        max_message: usize,
    ) -> Result<QuicLink, LinkError> {
        let crypto = tls.rustls(netdiv_proto::ALPN)?;
        let mut config = quinn::ClientConfig::new(Arc::new(
            quinn::crypto::rustls::QuicClientConfig::try_from(crypto)?,
        ));
        config.transport_config(netdiv_proto::transport::quic_client_config(addr));
        let local: SocketAddr = if addr.is_ipv6() {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let mut endpoint =
            netdiv_proto::transport::quic_endpoint(local, None).map_err(LinkError::Socket)?;
        endpoint.set_default_client_config(config);
        let server_name = tls
            .server_name
            .as_deref()
            .or(url.server_name.as_deref())
            .unwrap_or(&url.host);
        let conn = endpoint.connect(addr, server_name)?.await?;
        Ok(QuicLink {
            conn,
            _endpoint: endpoint,
            lanes: OnceLock::new(),
            max_message,
        })
    }

    async fn request(
        &self,
        call: Call,
        kind: quic_request::Kind,
    ) -> Result<quic_response::Kind, LinkError> {
        let (mut send, mut recv) = self.conn.open_bi().await?;
        let request = pb::QuicRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            kind: Some(kind),
        };
        send.write_chunk(framing::encode(&request)).await?;
        send.finish()?;
        let bytes = recv.read_to_end(self.max_message).await?;
        let mut decoder = FrameDecoder::new(self.max_message);
        decoder.push(&bytes);
        let frame = decoder.next_frame()?.ok_or(LinkError::UnexpectedAnswer {
            call,
            got: "nothing",
        })?;
        let response: pb::QuicResponse = framing::decode(frame, "QuicResponse")?;
        match response.kind {
            Some(quic_response::Kind::Error(reason)) => Err(LinkError::Refused { call, reason }),
            Some(kind) => Ok(kind),
            None => Err(LinkError::UnexpectedAnswer {
                call,
                got: "an empty answer",
            }),
        }
    }

    pub(crate) async fn name(&self) -> Result<String, LinkError> {
        let request = pb::NameRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        };
        match self
            .request(Call::Name, quic_request::Kind::Name(request))
            .await?
        {
            quic_response::Kind::Name(n) => Ok(n.name),
            other => Err(LinkError::UnexpectedAnswer {
                call: Call::Name,
                got: kind_name(&other),
            }),
        }
    }

    pub(crate) async fn info(&self) -> Result<pb::NodeInfo, LinkError> {
        match self
            .request(Call::Info, quic_request::Kind::Info(pb::InfoRequest {}))
            .await?
        {
            quic_response::Kind::Info(info) => Ok(info),
            other => Err(LinkError::UnexpectedAnswer {
                call: Call::Info,
                got: kind_name(&other),
            }),
        }
    }

    /// Opens the query streams; from now on events for `node` go to
    /// `events`.
    pub(crate) async fn start(
        &self,
        node: usize,
        events: Arc<dyn LinkEvents>,
    ) -> Result<(), LinkError> {
        let mut lanes = Vec::with_capacity(QUIC_QUERY_STREAMS);
        let mut readers = Vec::with_capacity(QUIC_QUERY_STREAMS);
        for _ in 0..QUIC_QUERY_STREAMS {
            // A stream reaches the node with its first frame, so opening
            // costs no round trip.
            let (send, recv) = self.conn.open_bi().await?;
            let lane = Arc::new(Lane {
                outbox: Mutex::new(Outbox::default()),
                ready: Notify::new(),
                state: Mutex::new(LaneState::default()),
            });
            tokio::spawn(write_frames(send, lane.clone()));
            readers.push(tokio::spawn(read_answers(
                recv,
                lane.clone(),
                node,
                events.clone(),
                self.max_message,
            )));
            lanes.push(lane);
        }
        let _ = self.lanes.set(Lanes {
            lanes,
            next: AtomicUsize::new(0),
            readers: Mutex::new(readers),
        });
        Ok(())
    }

    /// Finishes the query streams, waits until the node has answered what
    /// they hold and ended them, then closes the connection.
    pub(crate) async fn close(&self) {
        if let Some(lanes) = self.lanes.get() {
            for lane in &lanes.lanes {
                lane.state().closing = true;
                lane.close_outbox();
            }
            let readers =
                std::mem::take(&mut *lanes.readers.lock().unwrap_or_else(|e| e.into_inner()));
            for reader in readers {
                let _ = reader.await;
            }
        }
        let stats = self.conn.stats();
        // What the path carried: the datagram size MTU discovery reached,
        // and datagrams per send call (above 1 when segmentation offload
        // batches them).
        tracing::info!(
            mtu = stats.path.current_mtu,
            datagrams_sent = stats.udp_tx.datagrams,
            send_calls = stats.udp_tx.ios,
            datagrams_received = stats.udp_rx.datagrams,
            receive_calls = stats.udp_rx.ios,
            lost_packets = stats.path.lost_packets,
            mtu_probes_sent = stats.path.sent_plpmtud_probes,
            mtu_probes_lost = stats.path.lost_plpmtud_probes,
            black_holes = stats.path.black_holes_detected,
            "QUIC link closed"
        );
        self.conn.close(0u32.into(), b"done");
    }

    /// Cancels samples at the node: one cancel message on each query
    /// stream that carried some of them (a cancel names samples of its own
    /// stream, and arrives after them).
    pub(crate) fn cancel(&self, ids: &[u64]) {
        let Some(lanes) = self.lanes.get() else {
            return;
        };
        for lane in &lanes.lanes {
            let cancel: Vec<u64> = {
                let state = lane.state();
                if state.ended {
                    continue;
                }
                ids.iter()
                    .copied()
                    .filter(|id| state.unanswered.contains(id))
                    .collect()
            };
            if cancel.is_empty() {
                continue;
            }
            lane.enqueue(pb::Query {
                cancel,
                ..Default::default()
            });
        }
    }

    /// Queues `query` on the next query stream that is still open. A
    /// stream that failed has reported its samples; the node's other
    /// samples follow when the connection's failure is reported.
    pub(crate) fn send(&self, query: pb::Query) {
        let Some(lanes) = self.lanes.get() else {
            return;
        };
        for _ in 0..lanes.lanes.len() {
            let at = lanes.next.fetch_add(1, Ordering::Relaxed) % lanes.lanes.len();
            let lane = &lanes.lanes[at];
            let mut state = lane.state();
            if state.ended {
                continue;
            }
            state
                .unanswered
                .extend(query.samples.iter().map(|s| s.response_id));
            // A writer that is gone has failed its stream, and the reader
            // reports these samples with the rest.
            lane.enqueue(query);
            return;
        }
    }
}

/// Writes what the lane's outbox holds to its query stream, everything
/// that is waiting at once, and finishes the stream when the link closes.
/// A failed write ends the writer; the stream's reader sees the failure
/// and reports it.
async fn write_frames(mut send: quinn::SendStream, lane: Arc<Lane>) {
    let mut batch = Vec::new();
    loop {
        let closed = {
            let mut outbox = lane.outbox();
            outbox.take_into(&mut batch);
            outbox.closed
        };
        if batch.is_empty() {
            if closed {
                break;
            }
            // A notification sent since the outbox was looked at is kept,
            // so none is missed.
            lane.ready.notified().await;
            continue;
        }
        if send.write_all_chunks(&mut batch).await.is_err() {
            return;
        }
        batch.clear();
    }
    let _ = send.finish();
}

/// Reads a query stream's answers and reports them. When the stream ends,
/// what it still held is reported: refused if the node said why (an error
/// frame), else as a failure of the node, unless the QDL was closing it
/// and everything was answered.
async fn read_answers(
    mut recv: quinn::RecvStream,
    lane: Arc<Lane>,
    node: usize,
    events: Arc<dyn LinkEvents>,
    max_message: usize,
) {
    let ended = read_completions(&mut recv, &lane, node, &*events, max_message).await;
    // The stream is over either way: the writer need not wait for more,
    // and would otherwise wait for ever on a connection that failed.
    lane.close_outbox();
    let (unanswered, closing) = {
        let mut state = lane.state();
        state.ended = true;
        (std::mem::take(&mut state.unanswered), state.closing)
    };
    match ended {
        Ok(None) if closing && unanswered.is_empty() => {}
        Ok(None) => events.failed(
            node,
            LinkError::QueryStreamEnded {
                unanswered: unanswered.len(),
            },
        ),
        Ok(Some(reason)) => {
            let error = LinkError::Refused {
                call: Call::Infer,
                reason,
            };
            events.refused(node, unanswered.into_iter().collect(), error);
        }
        Err(e) => events.failed(node, e),
    }
}

/// Reports completions as their frames arrive, until the stream ends:
/// `Some(reason)` if the node refused what the stream carried.
async fn read_completions(
    recv: &mut quinn::RecvStream,
    lane: &Lane,
    node: usize,
    events: &dyn LinkEvents,
    max_message: usize,
) -> Result<Option<String>, LinkError> {
    let mut decoder = FrameDecoder::new(max_message);
    let mut refused = None;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await? {
        decoder.push(&chunk.bytes);
        while let Some(frame) = decoder.next_frame()? {
            let response: pb::QuicResponse = framing::decode(frame, "QuicResponse")?;
            match response.kind {
                Some(quic_response::Kind::Completions(batch)) => {
                    {
                        // A first token is not an answer.
                        let mut state = lane.state();
                        for c in batch.completions.iter().filter(|c| !c.first_token) {
                            state.unanswered.remove(&c.response_id);
                        }
                    }
                    if batch.tokens_generated > 0 {
                        events.token_progress(node, batch.tokens_generated);
                    }
                    if !batch.completions.is_empty() {
                        events.completions(node, batch.completions);
                    }
                }
                // The node answers what it had accepted, then ends the
                // stream: what is left then is what it refused.
                Some(quic_response::Kind::Error(reason)) => refused = Some(reason),
                other => {
                    return Err(LinkError::UnexpectedAnswer {
                        call: Call::Infer,
                        got: other.as_ref().map_or("an empty answer", kind_name),
                    })
                }
            }
        }
    }
    decoder.finish()?;
    Ok(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_frame(id: u64, data_len: usize) -> pb::QuicRequest {
        pb::QuicRequest {
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            kind: Some(quic_request::Kind::Query(pb::Query {
                samples: vec![pb::Sample {
                    response_id: id,
                    data: Bytes::from(vec![id as u8; data_len]),
                    ..Default::default()
                }],
                ..Default::default()
            })),
        }
    }

    /// Small and large frames come out in the order they went in, each
    /// exactly as `framing::encode` writes it; small ones share buffers,
    /// a large sample's bytes are not copied.
    #[test]
    fn the_outbox_keeps_frames_in_order_and_large_samples_uncopied() {
        let frames: Vec<pb::QuicRequest> = [4, 4, 100_000, 4, 4, 4, 50_000]
            .iter()
            .enumerate()
            .map(|(i, &len)| query_frame(i as u64, len))
            .collect();
        let mut outbox = Outbox::default();
        assert!(outbox.is_empty());
        let mut batch = Vec::new();
        for (i, frame) in frames.iter().enumerate() {
            outbox.push(frame);
            if i == 4 {
                outbox.take_into(&mut batch);
                assert!(outbox.is_empty());
            }
        }
        outbox.take_into(&mut batch);
        let written: Vec<u8> = batch.iter().flat_map(|b| b.iter().copied()).collect();
        let expected: Vec<u8> = frames
            .iter()
            .flat_map(|f| framing::encode(f).to_vec())
            .collect();
        assert_eq!(written, expected);
        // The two small frames before the first large one are one buffer.
        let two_small = framing::encode(&frames[0]).len() + framing::encode(&frames[1]).len();
        assert_eq!(batch[0].len(), two_small);
        let large = match &frames[2].kind {
            Some(quic_request::Kind::Query(q)) => q.samples[0].data.as_ptr(),
            _ => unreachable!(),
        };
        assert!(batch.iter().any(|b| b.as_ptr() == large));
    }
}
