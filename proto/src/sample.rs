//! Checking wire samples and completions at the edge, with errors that name
//! the field and the response id.

use bytes::Bytes;

use crate::codec::{self, Codec, DecodeError};
use crate::pb;

/// A sample whose codec is known and allowed and whose data decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSample {
    pub response_id: u64,
    pub data: Bytes,
}

/// Why a wire sample was refused. Each names the response id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidSample {
    /// `codec` holds a value this protocol version does not define.
    #[error("sample {response_id}: unknown codec value {value}")]
    UnknownCodec { response_id: u64, value: i32 },
    /// `codec` is not approved for this node's benchmark.
    #[error("sample {response_id}: codec {codec} is not allowed here (allowed: {allowed})")]
    CodecNotAllowed {
        response_id: u64,
        codec: &'static str,
        allowed: String,
    },
    /// `data` could not be decoded.
    #[error("sample {response_id}: {source}")]
    Decode {
        response_id: u64,
        source: DecodeError,
    },
}

impl InvalidSample {
    pub fn response_id(&self) -> u64 {
        match self {
            InvalidSample::UnknownCodec { response_id, .. }
            | InvalidSample::CodecNotAllowed { response_id, .. }
            | InvalidSample::Decode { response_id, .. } => *response_id,
        }
    }
}

/// Decodes and checks one wire sample. Decoding is timed SUT work.
pub fn accept_sample(
    sample: pb::Sample,
    allowed: &[Codec],
    max_decoded: u64,
) -> Result<InputSample, InvalidSample> {
    let response_id = sample.response_id;
    let codec = Codec::from_wire(sample.codec).ok_or(InvalidSample::UnknownCodec {
        response_id,
        value: sample.codec,
    })?;
    if !allowed.contains(&codec) {
        return Err(InvalidSample::CodecNotAllowed {
            response_id,
            codec: codec.name(),
            allowed: allowed
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let data = match codec {
        Codec::None => {
            if sample.data.len() as u64 > max_decoded {
                return Err(InvalidSample::Decode {
                    response_id,
                    source: DecodeError::TooLarge {
                        size: sample.data.len() as u64,
                        limit: max_decoded,
                    },
                });
            }
            sample.data
        }
        c => Bytes::from(
            codec::decode(c, &sample.data, sample.decoded_size, max_decoded).map_err(|source| {
                InvalidSample::Decode {
                    response_id,
                    source,
                }
            })?,
        ),
    };
    Ok(InputSample { response_id, data })
}

/// Builds a wire completion, encoding the output with `codec`.
pub fn completion(response_id: u64, output: &[u8], codec: Codec) -> pb::Completion {
    pb::Completion {
        response_id,
        data: codec::encode(codec, output).into(),
        codec: codec.to_proto() as i32,
        decoded_size: output.len() as u64,
        error: String::new(),
        retryable: false,
    }
}

/// The decoded output of a completion without an error, at most `limit`
/// bytes. Decoding is timed work of whoever receives it (the QDL).
pub fn completion_output(c: pb::Completion, limit: u64) -> Result<Bytes, String> {
    match Codec::from_wire(c.codec) {
        Some(Codec::None) => Ok(c.data),
        Some(codec) => codec::decode(codec, &c.data, c.decoded_size, limit)
            .map(Bytes::from)
            .map_err(|e| e.to_string()),
        None => Err(format!("unknown response codec value {}", c.codec)),
    }
}

/// A completion that reports a per-sample failure.
pub fn failed_completion(response_id: u64, error: impl Into<String>) -> pb::Completion {
    pb::Completion {
        response_id,
        error: error.into(),
        ..Default::default()
    }
}

/// A completion for a sample this node did not run and another node may
/// (it is shutting down).
pub fn declined_completion(response_id: u64, reason: impl Into<String>) -> pb::Completion {
    pb::Completion {
        retryable: true,
        ..failed_completion(response_id, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(codec: i32, data: Vec<u8>, decoded_size: u64) -> pb::Sample {
        pb::Sample {
            response_id: 9,
            data: data.into(),
            codec,
            decoded_size,
        }
    }

    #[test]
    fn accepts_plain_and_lz4_samples() {
        let plain = accept_sample(wire(0, vec![1, 2, 3], 0), &[Codec::None], 10).unwrap();
        assert_eq!(&plain.data[..], &[1, 2, 3]);
        let raw = vec![5u8; 1000];
        let packed = codec::encode(Codec::Lz4, &raw);
        let s = accept_sample(wire(1, packed, 1000), &[Codec::None, Codec::Lz4], 4096).unwrap();
        assert_eq!(&s.data[..], &raw[..]);
    }

    #[test]
    fn completion_outputs_decode_or_say_why_not() {
        let out = vec![7u8; 500];
        let c = completion(3, &out, Codec::Lz4);
        assert_eq!(&completion_output(c.clone(), 1000).unwrap()[..], &out[..]);
        assert!(completion_output(c.clone(), 10)
            .unwrap_err()
            .contains("exceeds"));
        let unknown = pb::Completion { codec: 9, ..c };
        assert_eq!(
            completion_output(unknown, 1000).unwrap_err(),
            "unknown response codec value 9"
        );
    }

    #[test]
    fn refusals_name_the_sample_and_the_reason() {
        let e = accept_sample(wire(5, vec![], 0), &[Codec::None], 10).unwrap_err();
        assert_eq!(e.to_string(), "sample 9: unknown codec value 5");
        let e = accept_sample(wire(1, vec![], 0), &[Codec::None], 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sample 9: codec lz4 is not allowed here (allowed: none)"
        );
        let e = accept_sample(wire(0, vec![0; 11], 0), &[Codec::None], 10).unwrap_err();
        assert!(e.to_string().contains("exceeds the limit of 10"));
        let e = accept_sample(wire(1, vec![0xf0, 1], 100), &[Codec::Lz4], 1000).unwrap_err();
        assert!(
            e.to_string().starts_with("sample 9: corrupt lz4 data"),
            "{e}"
        );
        assert_eq!(e.response_id(), 9);
    }
}
