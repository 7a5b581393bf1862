//! Lossless codecs for samples and responses, and which benchmark may use
//! which (the compression table of the Network-division rules).

use crate::pb;

/// A codec on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    None,
    Lz4,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
        }
    }

    pub fn to_proto(self) -> pb::Codec {
        match self {
            Codec::None => pb::Codec::None,
            Codec::Lz4 => pb::Codec::Lz4,
        }
    }

    /// The wire value, or `None` for a codec this version does not know.
    pub fn from_wire(value: i32) -> Option<Codec> {
        match pb::Codec::try_from(value).ok()? {
            pb::Codec::None => Some(Codec::None),
            pb::Codec::Lz4 => Some(Codec::Lz4),
        }
    }
}

impl std::str::FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Codec::None),
            "lz4" => Ok(Codec::Lz4),
            other => Err(format!("unknown codec {other:?} (expected none or lz4)")),
        }
    }
}

/// Why bytes could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The announced decoded size is over the limit.
    #[error("decoded size {size} exceeds the limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64 },
    /// The lz4 block is corrupt or does not match the announced size.
    #[error("corrupt lz4 data: {0}")]
    Corrupt(String),
}

/// Encodes `data` (lz4: a raw block; the decoded size travels beside it).
pub fn encode(codec: Codec, data: &[u8]) -> Vec<u8> {
    match codec {
        Codec::None => data.to_vec(),
        Codec::Lz4 => lz4_flex::block::compress(data),
    }
}

/// Decodes `data` that should hold `decoded_size` bytes once decoded.
pub fn decode(
    codec: Codec,
    data: &[u8],
    decoded_size: u64,
    limit: u64,
) -> Result<Vec<u8>, DecodeError> {
    match codec {
        Codec::None => {
            if data.len() as u64 > limit {
                return Err(DecodeError::TooLarge {
                    size: data.len() as u64,
                    limit,
                });
            }
            Ok(data.to_vec())
        }
        Codec::Lz4 => {
            if decoded_size > limit {
                return Err(DecodeError::TooLarge {
                    size: decoded_size,
                    limit,
                });
            }
            let out = lz4_flex::block::decompress(data, decoded_size as usize)
                .map_err(|e| DecodeError::Corrupt(e.to_string()))?;
            if out.len() as u64 != decoded_size {
                return Err(DecodeError::Corrupt(format!(
                    "decoded {} bytes, {} announced",
                    out.len(),
                    decoded_size
                )));
            }
            Ok(out)
        }
    }
}

/// Codecs the rules' compression table allows for a benchmark's inputs
/// (and, for 3D-UNet and DLRMv2, outputs). JPEG, where allowed, is the
/// dataset's own encoding and not a netdiv codec. Benchmarks the table does
/// not name get no compression: a scheme needs the Working Group's approval.
pub fn allowed_codecs(benchmark: &str) -> &'static [Codec] {
    const LOSSLESS: &[Codec] = &[Codec::None, Codec::Lz4];
    const NONE_ONLY: &[Codec] = &[Codec::None];
    match benchmark {
        "resnet50" | "retinanet" | "3d-unet" | "bert" | "bert-99" | "bert-99.9" | "dlrm-v2"
        | "dlrm-v2-99" | "dlrm-v2-99.9" => LOSSLESS,
        // GPT-J, Llama2, Mixtral-8x7B and SDXL: no compression allowed.
        _ => NONE_ONLY,
    }
}

/// The benchmarks the table names, for documentation and `--help`.
pub const TABLE: &[(&str, &str)] = &[
    ("resnet50", "none, lz4 (or the dataset's JPEG)"),
    ("retinanet", "none, lz4 (or the dataset's JPEG)"),
    ("3d-unet", "none, lz4 (inputs and outputs)"),
    ("bert", "none, lz4"),
    ("gptj", "none"),
    ("llama2-70b", "none (the table allows no scheme)"),
    ("mixtral-8x7b", "none"),
    ("dlrm-v2", "none, lz4 (per query in Server)"),
    ("stable-diffusion-xl", "none"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz4_round_trip_and_size_checks() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
        let packed = encode(Codec::Lz4, &data);
        assert!(packed.len() < data.len() / 4);
        assert_eq!(
            decode(Codec::Lz4, &packed, data.len() as u64, 1 << 20).unwrap(),
            data
        );
        assert!(matches!(
            decode(Codec::Lz4, &packed, data.len() as u64, 100),
            Err(DecodeError::TooLarge { .. })
        ));
        assert!(matches!(
            decode(Codec::Lz4, &packed, data.len() as u64 - 1, 1 << 20),
            Err(DecodeError::Corrupt(_))
        ));
        assert!(matches!(
            decode(Codec::Lz4, b"\xff\xff\xff garbage", 50, 1 << 20),
            Err(DecodeError::Corrupt(_))
        ));
    }

    #[test]
    fn table_follows_the_rules() {
        for b in [
            "gptj",
            "mixtral-8x7b",
            "stable-diffusion-xl",
            "llama2-70b",
            "unknown",
        ] {
            assert_eq!(allowed_codecs(b), &[Codec::None], "{b}");
        }
        for b in ["resnet50", "bert", "3d-unet", "dlrm-v2", "retinanet"] {
            assert!(allowed_codecs(b).contains(&Codec::Lz4), "{b}");
        }
    }

    #[test]
    fn unknown_wire_codec_is_none() {
        assert_eq!(Codec::from_wire(1), Some(Codec::Lz4));
        assert_eq!(Codec::from_wire(7), None);
    }
}
