//! The body of the gRPC `Infer` request: queries as gRPC messages, encoded
//! where HTTP/2 takes them (the link's I/O task), as DATA frames.
//!
//! A query holding a large sample goes as buffers
//! ([`netdiv_proto::segments`]): its samples' bytes are passed to HTTP/2
//! from the QSL's memory, not copied into one buffer first, and reach the
//! socket's `writev` so. Small queries waiting together are encoded into
//! one buffer and one DATA frame, as tonic's own encoder does, so a burst
//! of them does not cost a frame header, a buffer and a write each.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use netdiv_proto::pb;
use netdiv_proto::segments::{self, SHARED_FIELD_BYTES};
use prost::Message;
use tokio::sync::mpsc::UnboundedReceiver;

/// Most bytes of small queries gathered into one DATA frame.
const GATHER_BYTES: usize = 32 << 10;

/// Most queries taken from the channel before a frame goes out.
const MOST_WAITING: usize = 1024;

/// Queries in, DATA frames out; ends when the sending half is dropped
/// (the link closes).
pub(super) struct QueryBody {
    queries: UnboundedReceiver<pb::Query>,
    /// Received, not yet encoded.
    waiting: VecDeque<pb::Query>,
    /// The buffers of a large query still to go, in order.
    buffers: VecDeque<Bytes>,
    ended: bool,
}

/// Whether `query` holds a sample large enough to go as a buffer of its
/// own.
fn is_large(query: &pb::Query) -> bool {
    query
        .samples
        .iter()
        .any(|s| s.data.len() >= SHARED_FIELD_BYTES)
}

/// Appends `query` as one gRPC message: [`segments::grpc_header`], then
/// the message.
fn put_message(out: &mut BytesMut, query: &pb::Query, len: usize) {
    out.reserve(5 + len);
    out.put_slice(&segments::grpc_header(len));
    query
        .encode(out)
        .expect("the buffer was reserved for the message");
}

impl QueryBody {
    pub(super) fn new(queries: UnboundedReceiver<pb::Query>) -> QueryBody {
        QueryBody {
            queries,
            waiting: VecDeque::new(),
            buffers: VecDeque::new(),
            ended: false,
        }
    }

    /// Moves queries already sent into `waiting`, without waiting for
    /// more.
    fn fill(&mut self, cx: &mut Context<'_>) {
        while !self.ended && self.waiting.len() < MOST_WAITING {
            match self.queries.poll_recv(cx) {
                Poll::Ready(Some(query)) => self.waiting.push_back(query),
                Poll::Ready(None) => self.ended = true,
                Poll::Pending => break,
            }
        }
    }

    /// The next DATA frame: the next buffer of a large query, or small
    /// queries gathered up to [`GATHER_BYTES`].
    fn next_frame(&mut self) -> Option<Bytes> {
        if let Some(buffer) = self.buffers.pop_front() {
            return Some(buffer);
        }
        let first = self.waiting.pop_front()?;
        if is_large(&first) {
            self.buffers.extend(segments::encode_grpc(&first));
            return self.buffers.pop_front();
        }
        // The small queries at the front, and the room they need.
        let mut lens = vec![first.encoded_len()];
        let mut room = 5 + lens[0];
        for query in &self.waiting {
            if room >= GATHER_BYTES || is_large(query) {
                break;
            }
            let len = query.encoded_len();
            lens.push(len);
            room += 5 + len;
        }
        let mut gathered = BytesMut::with_capacity(room);
        put_message(&mut gathered, &first, lens[0]);
        for &len in &lens[1..] {
            let query = self.waiting.pop_front().expect("counted above");
            put_message(&mut gathered, &query, len);
        }
        Some(gathered.freeze())
    }
}

impl Body for QueryBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.buffers.is_empty() {
            this.fill(cx);
        }
        match this.next_frame() {
            Some(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
            None if this.ended => Poll::Ready(None),
            None => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.waiting.is_empty() && self.buffers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    fn query(id: u64, sizes: &[usize]) -> pb::Query {
        pb::Query {
            query_id: id,
            samples: sizes
                .iter()
                .map(|&n| pb::Sample {
                    response_id: id,
                    data: Bytes::from(vec![id as u8; n]),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn drain(body: &mut QueryBody) -> Vec<Bytes> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut frames = Vec::new();
        while let Poll::Ready(Some(frame)) = Pin::new(&mut *body).poll_frame(&mut cx) {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        frames
    }

    /// The gRPC messages in a byte stream.
    fn messages(stream: &[u8]) -> Vec<pb::Query> {
        let mut rest = stream;
        let mut out = Vec::new();
        while !rest.is_empty() {
            assert_eq!(rest[0], 0, "not compressed");
            let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
            out.push(pb::Query::decode(&rest[5..5 + len]).unwrap());
            rest = &rest[5 + len..];
        }
        out
    }

    /// Every query goes out once and in order; small ones are gathered,
    /// a large sample's bytes pass on as they are.
    #[test]
    fn frames_carry_every_query_in_order() {
        let (tx, rx) = mpsc::unbounded_channel();
        let sent = vec![
            query(1, &[4]),
            query(2, &[4, 4]),
            query(3, &[100_000]),
            query(4, &[8]),
        ];
        let large = sent[2].samples[0].data.clone();
        for q in &sent {
            tx.send(q.clone()).unwrap();
        }
        drop(tx);
        let mut body = QueryBody::new(rx);
        let frames = drain(&mut body);
        // Queries 1 and 2 in one frame, query 3's head and its sample,
        // then query 4.
        assert_eq!(frames.len(), 4, "{frames:?}");
        assert_eq!(
            frames[2].as_ptr(),
            large.as_ptr(),
            "the sample is not copied"
        );
        let stream: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
        assert_eq!(messages(&stream), sent);
        assert!(body.is_end_stream());
    }

    /// An open channel with nothing waiting is pending, not the end.
    #[test]
    fn an_idle_link_waits() {
        let (tx, rx) = mpsc::unbounded_channel::<pb::Query>();
        let mut body = QueryBody::new(rx);
        assert!(drain(&mut body).is_empty());
        assert!(!body.is_end_stream());
        drop(tx);
        assert!(drain(&mut body).is_empty());
        assert!(body.is_end_stream());
    }

    /// A burst of small queries goes in frames of about [`GATHER_BYTES`].
    #[test]
    fn a_burst_of_small_queries_shares_frames() {
        let (tx, rx) = mpsc::unbounded_channel();
        for id in 0..10_000 {
            tx.send(query(id, &[4])).unwrap();
        }
        drop(tx);
        let frames = drain(&mut QueryBody::new(rx));
        let stream: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
        assert_eq!(messages(&stream).len(), 10_000);
        assert!(frames.len() < 20, "{} frames", frames.len());
    }
}
