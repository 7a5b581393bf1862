//! The body of the gRPC `Infer` request: queries as gRPC messages, each
//! already encoded as buffers ([`netdiv_proto::segments`]), passed to HTTP/2
//! as DATA without being copied into one buffer first. A sample's bytes
//! go from the QSL's memory to the socket's `writev`.
//!
//! Small buffers (a query's ids and lengths, a whole query of small
//! samples) waiting together are gathered into one DATA frame, as tonic's
//! own encoder does, so a burst of small queries does not cost a frame
//! header and a write each.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use netdiv_proto::segments::SHARED_FIELD_BYTES;
use tokio::sync::mpsc::UnboundedReceiver;

/// Most bytes of small buffers gathered into one DATA frame.
const GATHER_BYTES: usize = 32 << 10;

/// Encoded queries in, DATA frames out; ends when the sending half is
/// dropped (the link closes).
pub(super) struct QueryBody {
    queries: UnboundedReceiver<Vec<Bytes>>,
    pending: VecDeque<Bytes>,
    ended: bool,
}

impl QueryBody {
    pub fn new(queries: UnboundedReceiver<Vec<Bytes>>) -> QueryBody {
        QueryBody {
            queries,
            pending: VecDeque::new(),
            ended: false,
        }
    }

    /// Moves every query already waiting into `pending`, without waiting.
    /// Returns false if nothing is pending and the channel has nothing yet.
    fn fill(&mut self, cx: &mut Context<'_>) -> bool {
        while !self.ended {
            match self.queries.poll_recv(cx) {
                Poll::Ready(Some(buffers)) => self.pending.extend(buffers),
                Poll::Ready(None) => self.ended = true,
                Poll::Pending => break,
            }
            if self.pending.len() > 1024 {
                break;
            }
        }
        !self.pending.is_empty()
    }

    /// The next DATA frame: a large buffer alone, or small buffers
    /// gathered up to [`GATHER_BYTES`].
    fn next_frame(&mut self) -> Option<Bytes> {
        let first = self.pending.pop_front()?;
        if first.len() >= SHARED_FIELD_BYTES {
            return Some(first);
        }
        let small = |b: Option<&Bytes>| b.is_some_and(|b| b.len() < SHARED_FIELD_BYTES);
        if !small(self.pending.front()) {
            return Some(first);
        }
        let mut gathered = BytesMut::with_capacity(GATHER_BYTES.min(64 << 10));
        gathered.put(first);
        while small(self.pending.front()) && gathered.len() < GATHER_BYTES {
            let next = self.pending.pop_front().expect("checked above");
            gathered.put(next);
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
        if !this.fill(cx) {
            return if this.ended {
                Poll::Ready(None)
            } else {
                Poll::Pending
            };
        }
        Poll::Ready(this.next_frame().map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    fn drain(body: &mut QueryBody) -> Vec<Bytes> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut frames = Vec::new();
        while let Poll::Ready(Some(frame)) = Pin::new(&mut *body).poll_frame(&mut cx) {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        frames
    }

    /// Every byte goes out once and in order; small buffers are gathered,
    /// large ones pass on as they are.
    #[test]
    fn frames_carry_every_byte_in_order() {
        let (tx, rx) = mpsc::unbounded_channel();
        let large = Bytes::from(vec![7u8; 100_000]);
        tx.send(vec![Bytes::from_static(b"ab"), large.clone()])
            .unwrap();
        tx.send(vec![Bytes::from_static(b"cd"), Bytes::from_static(b"ef")])
            .unwrap();
        drop(tx);
        let mut body = QueryBody::new(rx);
        let frames = drain(&mut body);
        assert_eq!(frames.len(), 3);
        assert_eq!(&frames[0][..], b"ab");
        assert_eq!(
            frames[1].as_ptr(),
            large.as_ptr(),
            "the sample is not copied"
        );
        assert_eq!(&frames[2][..], b"cdef");
        assert!(body.is_end_stream());
    }

    /// An open channel with nothing waiting is pending, not the end.
    #[test]
    fn an_idle_link_waits() {
        let (tx, rx) = mpsc::unbounded_channel::<Vec<Bytes>>();
        let mut body = QueryBody::new(rx);
        assert!(drain(&mut body).is_empty());
        assert!(!body.is_end_stream());
        drop(tx);
        assert!(drain(&mut body).is_empty());
        assert!(body.is_end_stream());
    }
}
