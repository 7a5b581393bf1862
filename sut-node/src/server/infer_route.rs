//! The Infer call without tonic's request decoder. tonic copies every
//! DATA frame of a request into one buffer before it decodes a message
//! from it: every sample byte once more, most of what the node's runtime
//! spent on a busy link beside the kernel's own copy (docs/benchmarks.md,
//! "Bytes per CPU-second"). Here the frames are kept as they arrived and
//! a message is decoded across them, each sample a slice of the frame
//! that carried it. Name, Info, health and anything else go to tonic's
//! generated service unchanged; the answers of Infer are encoded here as
//! tonic would (5-byte prefix, grpc-status trailers).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::Stream;
use http_body::Frame;
use http_body_util::BodyExt;
use netdiv_proto::{pb, segments};
use prost::Message;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::{Code, Status};
use tower::Service;

/// The Infer method's path.
const INFER_PATH: &str = "/netdiv.v1.SutNode/Infer";
/// A gRPC message's prefix: compression flag and length.
const PREFIX_LEN: usize = 5;

/// The answers of one Infer call, as they are sent.
pub(super) type CompletionStream =
    Pin<Box<dyn Stream<Item = Result<pb::CompletionBatch, Status>> + Send>>;

/// Where an Infer call's queries come from: tonic's decoder, or this
/// module's own.
pub(super) trait QuerySource: Send + 'static {
    /// The next query; `None` when the client has ended its side.
    fn message(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Option<pb::Query>, Status>> + Send;
}

/// What serves an Infer call once its queries can be read (the node's
/// gRPC service).
pub(super) trait InferHandler: Send + Sync + 'static {
    /// Checks the call's headers and starts it; its answers, or the
    /// status it is refused with.
    fn open_infer(&self, request: tonic::Request<QueryFrames>) -> Result<CompletionStream, Status>;
}

/// tonic's generated service `S`, with Infer taken here and served by `H`.
#[derive(Debug)]
pub(super) struct InferRoute<S, H> {
    inner: S,
    handler: Arc<H>,
    max_message: usize,
}

impl<S: Clone, H> Clone for InferRoute<S, H> {
    fn clone(&self) -> Self {
        InferRoute {
            inner: self.inner.clone(),
            handler: self.handler.clone(),
            max_message: self.max_message,
        }
    }
}

impl<S, H> InferRoute<S, H> {
    pub(super) fn new(inner: S, handler: Arc<H>, max_message: usize) -> Self {
        InferRoute {
            inner,
            handler,
            max_message,
        }
    }
}

impl<S: NamedService, H> NamedService for InferRoute<S, H> {
    const NAME: &'static str = S::NAME;
}

impl<S, H> Service<http::Request<Body>> for InferRoute<S, H>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
    H: InferHandler,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() != INFER_PATH {
            return Box::pin(self.inner.call(request));
        }
        let handler = self.handler.clone();
        let max_message = self.max_message;
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let request = http::Request::from_parts(parts, QueryFrames::new(body, max_message));
            let answers = handler.open_infer(tonic::Request::from_http(request));
            Ok(match answers {
                Ok(answers) => answers_response(answers),
                Err(status) => status.into_http(),
            })
        })
    }
}

/// The Query messages of an Infer request body, decoded from its frames.
#[derive(Debug)]
pub(super) struct QueryFrames {
    body: Body,
    frames: VecDeque<Bytes>,
    buffered: usize,
    max_message: usize,
    ended: bool,
}

impl QueryFrames {
    fn new(body: Body, max_message: usize) -> QueryFrames {
        QueryFrames {
            body,
            frames: VecDeque::new(),
            buffered: 0,
            max_message,
            ended: false,
        }
    }

    /// The message prefix at the front of the frames (at least
    /// `PREFIX_LEN` bytes are buffered), not consumed.
    fn peek_prefix(&self) -> [u8; PREFIX_LEN] {
        let mut prefix = [0u8; PREFIX_LEN];
        let mut at = 0;
        for frame in &self.frames {
            let n = (PREFIX_LEN - at).min(frame.len());
            prefix[at..at + n].copy_from_slice(&frame[..n]);
            at += n;
            if at == PREFIX_LEN {
                break;
            }
        }
        prefix
    }

    /// The next whole message, if it has arrived; errors as tonic words
    /// them.
    fn decode_next(&mut self) -> Result<Option<pb::Query>, Status> {
        if self.buffered < PREFIX_LEN {
            return Ok(None);
        }
        let prefix = self.peek_prefix();
        match prefix[0] {
            0 => {}
            1 => {
                return Err(Status::internal(
                    "protocol error: received message with compressed-flag but no grpc-encoding was specified",
                ))
            }
            flag => {
                return Err(Status::internal(format!(
                    "protocol error: received message with invalid compression flag: {flag} (valid flags are 0 and 1)"
                )))
            }
        }
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        if len > self.max_message {
            return Err(Status::out_of_range(format!(
                "Error, decoded message length too large: found {len} bytes, the limit is: {} bytes",
                self.max_message
            )));
        }
        if self.buffered < PREFIX_LEN + len {
            return Ok(None);
        }
        self.buffered -= PREFIX_LEN + len;
        let mut message = Frames::new(&mut self.frames, PREFIX_LEN + len);
        message.advance(PREFIX_LEN);
        let query = pb::Query::decode(&mut message).map_err(|e| Status::internal(e.to_string()));
        // A message that fails to decode ends the stream; what it left
        // unread goes with it.
        let left = message.remaining();
        message.advance(left);
        query.map(Some)
    }
}

impl QuerySource for QueryFrames {
    async fn message(&mut self) -> Result<Option<pb::Query>, Status> {
        loop {
            if let Some(query) = self.decode_next()? {
                return Ok(Some(query));
            }
            if self.ended {
                return if self.buffered == 0 {
                    Ok(None)
                } else {
                    Err(Status::internal("Unexpected EOF decoding stream."))
                };
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() {
                            self.buffered += data.len();
                            self.frames.push_back(data);
                        }
                    }
                }
                // A client that cancels its request has ended it.
                Some(Err(status)) if status.code() == Code::Cancelled => self.ended = true,
                Some(Err(status)) => return Err(status),
                None => self.ended = true,
            }
        }
    }
}

/// The first `len` bytes of a queue of frames, read as one buffer. A
/// field that lies within one frame (a sample's bytes, as the QDL sends
/// them) is taken as a slice of it, not copied.
struct Frames<'a> {
    frames: &'a mut VecDeque<Bytes>,
    remaining: usize,
}

impl<'a> Frames<'a> {
    fn new(frames: &'a mut VecDeque<Bytes>, len: usize) -> Frames<'a> {
        Frames {
            frames,
            remaining: len,
        }
    }
}

impl Buf for Frames<'_> {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        match self.frames.front() {
            Some(front) => &front[..front.len().min(self.remaining)],
            None => &[],
        }
    }

    fn advance(&mut self, mut cnt: usize) {
        cnt = cnt.min(self.remaining);
        self.remaining -= cnt;
        while cnt > 0 {
            let Some(front) = self.frames.front_mut() else {
                break;
            };
            if front.len() > cnt {
                front.advance(cnt);
                break;
            }
            cnt -= front.len();
            self.frames.pop_front();
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        if let Some(front) = self.frames.front_mut() {
            if len <= front.len() && len <= self.remaining {
                self.remaining -= len;
                let bytes = front.split_to(len);
                if front.is_empty() {
                    self.frames.pop_front();
                }
                return bytes;
            }
        }
        let mut copy = BytesMut::with_capacity(len);
        copy.put((&mut *self).take(len));
        copy.freeze()
    }
}

/// The answers as an HTTP response: one gRPC message per batch, then the
/// status in the trailers.
fn answers_response(answers: CompletionStream) -> http::Response<Body> {
    let mut response = http::Response::new(Body::new(AnswerBody {
        answers: Some(answers),
    }));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

struct AnswerBody {
    /// `None` once the trailers are out.
    answers: Option<CompletionStream>,
}

impl http_body::Body for AnswerBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(answers) = self.answers.as_mut() else {
            return Poll::Ready(None);
        };
        let status = match answers.as_mut().poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(batch))) => {
                let len = batch.encoded_len();
                let mut message = BytesMut::with_capacity(PREFIX_LEN + len);
                message.put_slice(&segments::grpc_header(len));
                batch.encode_raw(&mut message);
                return Poll::Ready(Some(Ok(Frame::data(message.freeze()))));
            }
            Poll::Ready(Some(Err(status))) => status,
            Poll::Ready(None) => Status::ok(""),
        };
        self.answers = None;
        let mut trailers = http::HeaderMap::new();
        if let Err(e) = status.add_header(&mut trailers) {
            return Poll::Ready(Some(Err(e)));
        }
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.answers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;
    use http_body_util::StreamBody;

    fn body(frames: Vec<Bytes>) -> Body {
        let frames = frames
            .into_iter()
            .map(|f| Ok::<_, Infallible>(Frame::data(f)));
        Body::new(StreamBody::new(stream::iter(frames)))
    }

    /// A query's gRPC message: prefix and protobuf.
    fn message(query: &pb::Query) -> Vec<u8> {
        let mut out = vec![0];
        out.extend_from_slice(&(query.encoded_len() as u32).to_be_bytes());
        query.encode(&mut out).unwrap();
        out
    }

    fn query(id: u64, sample: Bytes) -> pb::Query {
        pb::Query {
            query_id: id,
            samples: vec![pb::Sample {
                response_id: id * 10,
                data: sample,
                ..Default::default()
            }],
            cancel: vec![],
        }
    }

    async fn all(mut frames: QueryFrames) -> Result<Vec<pb::Query>, Status> {
        let mut queries = Vec::new();
        while let Some(q) = frames.message().await? {
            queries.push(q);
        }
        Ok(queries)
    }

    #[tokio::test]
    async fn messages_cut_anywhere_across_frames_decode_alike() {
        let queries: Vec<_> = (1..4)
            .map(|i| query(i, Bytes::from(vec![i as u8; 1000 * i as usize])))
            .collect();
        let wire: Vec<u8> = queries.iter().flat_map(message).collect();
        for cut in [1, 3, 5, 7, 100, 999, 1003, wire.len() - 1] {
            let frames = wire
                .chunks(cut)
                .map(Bytes::copy_from_slice)
                .collect::<Vec<_>>();
            let got = all(QueryFrames::new(body(frames), 1 << 20)).await.unwrap();
            assert_eq!(got, queries, "frames of {cut} bytes");
        }
    }

    #[tokio::test]
    async fn a_sample_within_one_frame_is_that_frame_s_memory() {
        // As the QDL sends it: the message up to the sample's bytes, the
        // bytes, then the rest.
        let sample = Bytes::from(vec![7u8; 150_528]);
        let wire = message(&query(5, sample.clone()));
        let at = wire
            .windows(64)
            .position(|w| w.iter().all(|&b| b == 7))
            .unwrap();
        let frame = Bytes::copy_from_slice(&wire[at..at + sample.len()]);
        let frames = vec![
            Bytes::copy_from_slice(&wire[..at]),
            frame.clone(),
            Bytes::copy_from_slice(&wire[at + sample.len()..]),
        ];
        let got = all(QueryFrames::new(body(frames), 1 << 20)).await.unwrap();
        let data = &got[0].samples[0].data;
        assert_eq!(data, &sample);
        assert_eq!(data.as_ptr(), frame.as_ptr(), "the sample was copied");
    }

    #[tokio::test]
    async fn bad_messages_end_the_stream_with_tonic_s_words() {
        let ok = message(&query(1, Bytes::from_static(b"abc")));
        let mut too_long = ok.clone();
        too_long[1..5].copy_from_slice(&(2_000_000u32).to_be_bytes());
        let mut compressed = ok.clone();
        compressed[0] = 1;
        let mut flag = ok.clone();
        flag[0] = 9;
        let truncated = ok[..ok.len() - 1].to_vec();
        let garbage = [&[0, 0, 0, 0, 3][..], &[0xff, 0xff, 0xff]].concat();
        for (wire, code, words) in [
            (
                too_long,
                Code::OutOfRange,
                "decoded message length too large",
            ),
            (compressed, Code::Internal, "compressed-flag"),
            (flag, Code::Internal, "invalid compression flag: 9"),
            (truncated, Code::Internal, "Unexpected EOF"),
            (garbage, Code::Internal, ""),
        ] {
            let frames = vec![Bytes::from(ok.clone()), Bytes::from(wire)];
            let mut source = QueryFrames::new(body(frames), 1 << 20);
            assert!(source.message().await.unwrap().is_some(), "{words}");
            let err = source.message().await.unwrap_err();
            assert_eq!(err.code(), code, "{words}: {err:?}");
            assert!(err.message().contains(words), "{words}: {err:?}");
        }
    }
}
