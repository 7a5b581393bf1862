//! QUIC framing: a 4-byte big-endian length, then that many bytes of
//! protobuf. The decoder is a pure state machine (bytes in, frames out) so
//! it is tested, and fuzzable, without sockets.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

/// A framing problem; the stream cannot continue after it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The length prefix announces more than the limit.
    #[error("frame of {len} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// The length announced.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame ({buffered} bytes buffered)")]
    Truncated {
        /// Bytes of the unfinished frame.
        buffered: usize,
    },
    /// The frame is not a valid protobuf message of the expected type.
    #[error("frame is not a valid {what}: {source}")]
    Malformed {
        /// The message type expected.
        what: &'static str,
        /// What protobuf decoding found.
        source: prost::DecodeError,
    },
}

/// Encodes one message as a frame.
pub fn encode<M: Message>(msg: &M) -> Bytes {
    let mut buf = BytesMut::new();
    encode_into(msg, &mut buf);
    buf.freeze()
}

/// Appends one message as a frame to `out`, after what it holds.
pub fn encode_into<M: Message>(msg: &M, out: &mut BytesMut) {
    let len = msg.encoded_len();
    out.reserve(4 + len);
    out.put_u32(u32::try_from(len).expect("frames are smaller than 4 GiB"));
    msg.encode(out)
        .expect("the buffer was reserved for the frame");
}

/// Encodes one message as a frame, in buffers whose large `bytes` fields
/// share the message's memory ([`crate::segments`]).
pub fn encode_buffers<M: Message>(msg: &M) -> Vec<Bytes> {
    let len = u32::try_from(msg.encoded_len()).expect("frames are smaller than 4 GiB");
    crate::segments::encode(&len.to_be_bytes(), msg)
}

/// Splits a byte stream into frames.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max: usize,
}

impl FrameDecoder {
    /// A decoder that refuses frames over `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max,
        }
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes(self.buf[..4].try_into().expect("4 bytes")) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge {
                len,
                limit: self.max,
            });
        }
        if self.buf.len() < 4 + len {
            self.buf.reserve(4 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// Call at end of stream: an error if a partial frame is left.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Truncated {
                buffered: self.buf.len(),
            })
        }
    }
}

/// Decodes a frame's message. Given the frame as [`Bytes`], the message's
/// `bytes` fields (sample data, outputs) share its buffer instead of being
/// copied into an allocation each: with small samples, that allocation per
/// sample was a tenth of a busy link's CPU.
pub fn decode<M: Message + Default>(frame: impl Buf, what: &'static str) -> Result<M, FrameError> {
    M::decode(frame).map_err(|source| FrameError::Malformed { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    #[test]
    fn frames_survive_arbitrary_splits() {
        let a = pb::NameResponse {
            name: "node-a".into(),
            protocol_version: 1,
        };
        let b = pb::NameResponse {
            name: "node-b".into(),
            protocol_version: 1,
        };
        let mut stream = encode(&a).to_vec();
        stream.extend_from_slice(&encode(&b));
        for split in 0..stream.len() {
            let mut d = FrameDecoder::new(1024);
            d.push(&stream[..split]);
            let mut got = Vec::new();
            while let Some(f) = d.next_frame().unwrap() {
                got.push(decode::<pb::NameResponse>(f, "NameResponse").unwrap());
            }
            d.push(&stream[split..]);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(decode::<pb::NameResponse>(f, "NameResponse").unwrap());
            }
            assert_eq!(got, vec![a.clone(), b.clone()]);
            d.finish().unwrap();
        }
    }

    /// A frame in buffers is the same bytes as a frame in one.
    #[test]
    fn buffered_frames_match_whole_ones() {
        let request = pb::QuicRequest {
            protocol_version: 2,
            kind: Some(pb::quic_request::Kind::Query(pb::Query {
                query_id: 3,
                samples: vec![pb::Sample {
                    response_id: 9,
                    data: Bytes::from(vec![5u8; 20_000]),
                    ..Default::default()
                }],
                ..Default::default()
            })),
        };
        let buffers = encode_buffers(&request);
        assert!(buffers.len() > 1);
        let joined: Vec<u8> = buffers.iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(joined, encode(&request).to_vec());
    }

    #[test]
    fn oversized_truncated_and_malformed_frames_are_errors() {
        let mut d = FrameDecoder::new(16);
        d.push(&1000u32.to_be_bytes());
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                len: 1000,
                limit: 16
            })
        );

        let mut d = FrameDecoder::new(16);
        d.push(&[0, 0, 0, 8, 1, 2]);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(d.finish(), Err(FrameError::Truncated { buffered: 6 }));

        let err = decode::<pb::QuicRequest>(&[0xff_u8, 0xff, 0xff][..], "QuicRequest").unwrap_err();
        assert!(matches!(
            err,
            FrameError::Malformed {
                what: "QuicRequest",
                ..
            }
        ));
    }
}
