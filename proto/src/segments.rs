//! Encoding a message as a list of buffers instead of one: the message's
//! large `bytes` fields (a sample's data, an output) are not copied but
//! become buffers of their own, sharing the memory they came from, and the
//! small parts between them (tags, lengths, ids) are gathered into buffers
//! of their own. A vectored write (`writev`, HTTP/2 DATA frames, QUIC
//! stream chunks) then sends the pieces as if they were one.
//!
//! Encoding a 150 KB sample into a fresh buffer was two thirds of the
//! LoadGen node's I/O thread on a busy gRPC link (docs/benchmarks.md,
//! "Bytes per CPU-second").

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

/// A `bytes` field at least this long becomes a buffer of its own; shorter
/// ones are copied beside the message's other small parts, where a copy
/// costs less than one more buffer to write.
pub const SHARED_FIELD_BYTES: usize = 4096;

/// `msg` encoded after `prefix` (a frame's header), as buffers whose
/// concatenation is exactly `prefix` followed by `msg.encode_to_vec()`.
pub fn encode<M: Message>(prefix: &[u8], msg: &M) -> Vec<Bytes> {
    let mut out = Segments::default();
    out.small.reserve(prefix.len() + msg.encoded_len().min(256));
    out.small.put_slice(prefix);
    msg.encode(&mut out)
        .expect("a segment list has room for any message");
    out.finish()
}

/// gRPC's 5-byte message header for a message of `len` bytes: not
/// compressed, then the length, big-endian.
pub fn grpc_header(len: usize) -> [u8; 5] {
    let len = u32::try_from(len).expect("messages are smaller than 4 GiB");
    let mut header = [0u8; 5];
    header[1..].copy_from_slice(&len.to_be_bytes());
    header
}

/// A message framed for gRPC: [`grpc_header`], then the message.
pub fn encode_grpc<M: Message>(msg: &M) -> Vec<Bytes> {
    encode(&grpc_header(msg.encoded_len()), msg)
}

/// The buffer list being built: finished buffers, and the small parts
/// gathered since the last shared field.
#[derive(Default)]
struct Segments {
    done: Vec<Bytes>,
    small: BytesMut,
}

impl Segments {
    fn flush_small(&mut self) {
        if !self.small.is_empty() {
            self.done.push(self.small.split().freeze());
        }
    }

    fn finish(mut self) -> Vec<Bytes> {
        self.flush_small();
        self.done
    }
}

// SAFETY: every method that hands out or advances over uninitialised
// memory delegates to `BytesMut`'s own implementation on `small`.
unsafe impl BufMut for Segments {
    fn remaining_mut(&self) -> usize {
        self.small.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `small`'s chunk.
        unsafe { self.small.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.small.chunk_mut()
    }

    /// prost writes a `bytes` field held as [`Bytes`] with `put`; taking
    /// it whole with `copy_to_bytes` shares its memory instead of copying.
    fn put<T: Buf>(&mut self, mut src: T)
    where
        Self: Sized,
    {
        if src.remaining() < SHARED_FIELD_BYTES {
            while src.has_remaining() {
                let chunk = src.chunk();
                let n = chunk.len();
                self.small.put_slice(chunk);
                src.advance(n);
            }
            return;
        }
        self.flush_small();
        let len = src.remaining();
        self.done.push(src.copy_to_bytes(len));
    }

    fn put_slice(&mut self, src: &[u8]) {
        self.small.put_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    fn sample(id: u64, len: usize) -> pb::Sample {
        pb::Sample {
            response_id: id,
            data: Bytes::from((0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>()),
            ..Default::default()
        }
    }

    fn query(sizes: &[usize]) -> pb::Query {
        pb::Query {
            samples: sizes
                .iter()
                .enumerate()
                .map(|(i, &len)| sample(i as u64 + 7, len))
                .collect(),
            ..Default::default()
        }
    }

    fn joined(segments: &[Bytes]) -> Vec<u8> {
        segments.iter().flat_map(|s| s.iter().copied()).collect()
    }

    /// Whatever the sizes, the buffers spell exactly prost's encoding.
    #[test]
    fn buffers_join_to_the_plain_encoding() {
        for sizes in [
            &[][..],
            &[0],
            &[4],
            &[SHARED_FIELD_BYTES - 1],
            &[SHARED_FIELD_BYTES],
            &[150_528, 3, 150_528],
            &[1, 2, 3, 70_000, 5],
        ] {
            let q = query(sizes);
            let mut expected = vec![9u8, 8];
            expected.extend(q.encode_to_vec());
            assert_eq!(joined(&encode(&[9, 8], &q)), expected, "sizes {sizes:?}");
        }
    }

    /// A large sample's buffer is the sample's own memory, not a copy.
    #[test]
    fn large_fields_share_their_memory() {
        let q = query(&[3, 150_528, 9]);
        let data = q.samples[1].data.clone();
        let segments = encode(&[], &q);
        let shared = segments
            .iter()
            .filter(|s| s.as_ptr() == data.as_ptr() && s.len() == data.len())
            .count();
        assert_eq!(shared, 1, "{} buffers", segments.len());
        // The small fields around it are gathered: before, the sample, after.
        assert_eq!(segments.len(), 3);
    }

    /// gRPC's header: not compressed, then the message's length.
    #[test]
    fn grpc_frames_carry_the_message_length() {
        let q = query(&[10_000]);
        let bytes = joined(&encode_grpc(&q));
        assert_eq!(bytes[0], 0);
        let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        assert_eq!(len, q.encoded_len());
        assert_eq!(pb::Query::decode(&bytes[5..]).unwrap(), q);
    }
}
