//! Checking wire samples and completions at the edge, with errors that name
//! the field and the response id.

use bytes::Bytes;

use crate::benchmark::{Benchmark, CodecNotAllowed, Direction};
use crate::codec::{self, Codec, DecodeError};
use crate::pb;

/// A sample whose codec is known and allowed and whose data decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSample {
    /// The LoadGen's response id, echoed in the completion.
    pub response_id: u64,
    /// The decoded input.
    pub data: Bytes,
}

/// Why a wire sample was refused. Each names the response id.
#[derive(Debug, thiserror::Error)]
pub enum InvalidSample {
    /// `codec` holds a value this protocol version does not define.
    #[error("sample {response_id}: unknown codec value {value}")]
    UnknownCodec {
        /// The sample.
        response_id: u64,
        /// The wire value.
        value: i32,
    },
    /// `codec` is not approved for this node's benchmark.
    #[error("sample {response_id}: {source}")]
    CodecNotAllowed {
        /// The sample.
        response_id: u64,
        /// What the rules allow instead.
        source: CodecNotAllowed,
    },
    /// `data` could not be decoded.
    #[error("sample {response_id}: {source}")]
    Decode {
        /// The sample.
        response_id: u64,
        /// Why.
        source: DecodeError,
    },
}

impl InvalidSample {
    /// The sample refused.
    pub fn response_id(&self) -> u64 {
        match self {
            InvalidSample::UnknownCodec { response_id, .. }
            | InvalidSample::CodecNotAllowed { response_id, .. }
            | InvalidSample::Decode { response_id, .. } => *response_id,
        }
    }
}

/// Why a completion's output cannot be handed to the LoadGen.
#[derive(Debug, thiserror::Error)]
pub enum InvalidCompletion {
    /// `codec` holds a value this protocol version does not define.
    #[error("unknown response codec value {0}")]
    UnknownCodec(i32),
    /// The rules allow no such compression of this benchmark's outputs.
    #[error(transparent)]
    CodecNotAllowed(#[from] CodecNotAllowed),
    /// `data` could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Decodes and checks one wire sample against the codecs `benchmark`
/// allows for inputs. Decoding is timed SUT work.
pub fn accept_sample(
    sample: pb::Sample,
    benchmark: &Benchmark,
    max_decoded: u64,
) -> Result<InputSample, InvalidSample> {
    let response_id = sample.response_id;
    let codec = Codec::from_wire(sample.codec).ok_or(InvalidSample::UnknownCodec {
        response_id,
        value: sample.codec,
    })?;
    benchmark
        .check_codec(Direction::Input, codec)
        .map_err(|source| InvalidSample::CodecNotAllowed {
            response_id,
            source,
        })?;
    let decode_error = |source| InvalidSample::Decode {
        response_id,
        source,
    };
    let data = match codec {
        Codec::None => {
            if sample.data.len() as u64 > max_decoded {
                return Err(decode_error(DecodeError::TooLarge {
                    size: sample.data.len() as u64,
                    limit: max_decoded,
                }));
            }
            sample.data
        }
        c => Bytes::from(
            codec::decode(c, &sample.data, sample.decoded_size, max_decoded)
                .map_err(decode_error)?,
        ),
    };
    Ok(InputSample { response_id, data })
}

/// Builds a wire completion, encoding the output with `codec`.
pub fn completion(response_id: u64, output: &[u8], codec: Codec) -> pb::Completion {
    token_completion(response_id, output, codec, 0)
}

/// The completion of a token model's sample: its whole output, encoded
/// with `codec`, and the number of tokens it holds (`n_tokens`, handed to
/// the LoadGen for the time per output token). It follows the sample's
/// [`first_token_message`] on the same stream.
pub fn token_completion(
    response_id: u64,
    output: &[u8],
    codec: Codec,
    n_tokens: i64,
) -> pb::Completion {
    pb::Completion {
        response_id,
        data: codec::encode(codec, output).into(),
        codec: codec.to_proto() as i32,
        decoded_size: output.len() as u64,
        n_tokens,
        ..Default::default()
    }
}

/// A sample's first token (token models), sent the moment it exists and
/// before the sample's completion, on the same stream: `first_token` set,
/// `data` the token's bytes, `n_tokens` 0. Never compressed: a token is a
/// few bytes, and the rules allow no compression for LLMs.
pub fn first_token_message(response_id: u64, token: &[u8]) -> pb::Completion {
    pb::Completion {
        response_id,
        data: Bytes::copy_from_slice(token),
        decoded_size: token.len() as u64,
        first_token: true,
        ..Default::default()
    }
}

/// The decoded output of a completion without an error, at most `limit`
/// bytes, in a codec `benchmark` allows for outputs: a sample's output, or
/// for a first-token message (`first_token` set) the token's bytes.
/// Decoding is timed work of whoever receives it (the QDL).
pub fn completion_output(
    c: pb::Completion,
    benchmark: &Benchmark,
    limit: u64,
) -> Result<Bytes, InvalidCompletion> {
    let codec = Codec::from_wire(c.codec).ok_or(InvalidCompletion::UnknownCodec(c.codec))?;
    benchmark.check_codec(Direction::Output, codec)?;
    match codec {
        Codec::None => Ok(c.data),
        codec => Ok(codec::decode(codec, &c.data, c.decoded_size, limit)?.into()),
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

/// The answer to a sample the client cancelled (`Query.cancel`): the
/// node dropped it unrun or part run.
pub fn cancelled_completion(response_id: u64) -> pb::Completion {
    pb::Completion {
        response_id,
        cancelled: true,
        ..Default::default()
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

    fn benchmark(name: &str) -> Benchmark {
        Benchmark::parse(name).unwrap()
    }

    #[test]
    fn accepts_plain_and_lz4_samples() {
        let plain = accept_sample(wire(0, vec![1, 2, 3], 0), &benchmark("gptj"), 10).unwrap();
        assert_eq!(&plain.data[..], &[1, 2, 3]);
        let raw = vec![5u8; 1000];
        let packed = codec::encode(Codec::Lz4, &raw);
        let s = accept_sample(wire(1, packed, 1000), &benchmark("bert-99"), 4096).unwrap();
        assert_eq!(&s.data[..], &raw[..]);
    }

    #[test]
    fn completion_outputs_decode_or_say_why_not() {
        let unet = benchmark("3d-unet-99.9");
        let out = vec![7u8; 500];
        let c = completion(3, &out, Codec::Lz4);
        assert_eq!(
            &completion_output(c.clone(), &unet, 1000).unwrap()[..],
            &out[..]
        );
        assert!(matches!(
            completion_output(c.clone(), &unet, 10),
            Err(InvalidCompletion::Decode(DecodeError::TooLarge { .. }))
        ));
        assert_eq!(
            completion_output(c.clone(), &benchmark("resnet50"), 1000)
                .unwrap_err()
                .to_string(),
            "the rules allow no lz4 outputs for resnet50 (allowed: none)"
        );
        let unknown = pb::Completion { codec: 9, ..c };
        assert!(matches!(
            completion_output(unknown, &unet, 1000),
            Err(InvalidCompletion::UnknownCodec(9))
        ));
    }

    #[test]
    fn token_messages_carry_their_kind_and_count() {
        let llama = benchmark("llama2-70b-interactive");
        let first = first_token_message(4, &[1, 0, 0, 0]);
        assert!(first.first_token);
        assert_eq!((first.n_tokens, first.decoded_size), (0, 4));
        assert_eq!((first.codec, first.error.as_str()), (0, ""));
        assert_eq!(
            &completion_output(first, &llama, 100).unwrap()[..],
            &[1, 0, 0, 0]
        );
        let tokens: Vec<u8> = (0..12).collect();
        let done = token_completion(4, &tokens, Codec::None, 3);
        assert!(!done.first_token);
        assert_eq!((done.n_tokens, done.decoded_size), (3, 12));
        assert_eq!(
            &completion_output(done, &llama, 100).unwrap()[..],
            &tokens[..]
        );
        // The rules allow LLMs no compressed outputs, token counts or not.
        assert!(matches!(
            completion_output(token_completion(4, &tokens, Codec::Lz4, 3), &llama, 100),
            Err(InvalidCompletion::CodecNotAllowed(_))
        ));
        // A model without token latencies: n_tokens stays 0.
        let plain = completion(5, b"out", Codec::None);
        assert_eq!((plain.n_tokens, plain.first_token), (0, false));
    }

    /// The bytes `docs/session-layer.md` shows for example C.
    #[test]
    fn token_message_bytes_match_the_docs() {
        use prost::Message;
        let id = 0x55d0_c8a4_1e40;
        let hex = |c: pb::Completion| {
            c.encode_to_vec()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let tokens = [1234i32, 87, 31999]
            .iter()
            .flat_map(|t| t.to_le_bytes())
            .collect::<Vec<u8>>();
        assert_eq!(
            hex(first_token_message(id, &tokens[..4])),
            "08 c0 bc 90 c5 8c ba 15 12 04 d2 04 00 00 20 04 40 01"
        );
        assert_eq!(
            hex(token_completion(id, &tokens, Codec::None, 3)),
            "08 c0 bc 90 c5 8c ba 15 12 0c d2 04 00 00 57 00 00 00 ff 7c 00 00 20 0c 38 03"
        );
    }

    #[test]
    fn refusals_name_the_sample_and_the_reason() {
        let gptj = benchmark("gptj");
        let e = accept_sample(wire(5, vec![], 0), &gptj, 10).unwrap_err();
        assert_eq!(e.to_string(), "sample 9: unknown codec value 5");
        let e = accept_sample(wire(1, vec![], 0), &gptj, 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sample 9: the rules allow no lz4 inputs for gptj (allowed: none)"
        );
        let e = accept_sample(wire(0, vec![0; 11], 0), &gptj, 10).unwrap_err();
        assert!(e.to_string().contains("exceeds the limit of 10"));
        let e = accept_sample(wire(1, vec![0xf0, 1], 100), &benchmark("bert"), 1000).unwrap_err();
        assert!(
            e.to_string().starts_with("sample 9: corrupt lz4 data"),
            "{e}"
        );
        assert_eq!(e.response_id(), 9);
    }
}
