//! Lossless codecs for samples and responses: encoding, and decoding with
//! a size limit. Which benchmark may use which, in which direction, is the
//! benchmark table's business ([`crate::benchmark`]).

use crate::pb;

/// A codec on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// The bytes as they are.
    None,
    /// An lz4 block; its decoded size travels beside it.
    Lz4,
}

impl Codec {
    /// Every codec, in the order names are listed to users.
    pub const ALL: &'static [Codec] = &[Codec::None, Codec::Lz4];

    /// The name users give on command lines and in config files.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
        }
    }

    /// The wire enum.
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

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A codec name that is not one of [`Codec::ALL`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown codec {0:?} (expected none or lz4)")]
pub struct UnknownCodec(pub String);

impl std::str::FromStr for Codec {
    type Err = UnknownCodec;
    fn from_str(s: &str) -> Result<Self, UnknownCodec> {
        Codec::ALL
            .iter()
            .copied()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownCodec(s.into()))
    }
}

/// Why bytes could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The announced decoded size is over the limit.
    #[error("decoded size {size} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The size announced (lz4) or found (none).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The lz4 block is corrupt.
    #[error("corrupt lz4 data: {0}")]
    Corrupt(#[from] lz4_flex::block::DecompressError),
    /// The lz4 block decoded to another size than the one announced.
    #[error("corrupt lz4 data: decoded {decoded} bytes, {announced} announced")]
    SizeMismatch {
        /// Bytes the block held.
        decoded: u64,
        /// Bytes the message announced.
        announced: u64,
    },
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
            let out = lz4_flex::block::decompress(data, decoded_size as usize)?;
            if out.len() as u64 != decoded_size {
                return Err(DecodeError::SizeMismatch {
                    decoded: out.len() as u64,
                    announced: decoded_size,
                });
            }
            Ok(out)
        }
    }
}

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
            Err(DecodeError::Corrupt(_) | DecodeError::SizeMismatch { .. })
        ));
        assert!(matches!(
            decode(Codec::Lz4, b"\xff\xff\xff garbage", 50, 1 << 20),
            Err(DecodeError::Corrupt(_))
        ));
    }

    #[test]
    fn unknown_wire_codec_is_none() {
        assert_eq!(Codec::from_wire(1), Some(Codec::Lz4));
        assert_eq!(Codec::from_wire(7), None);
    }

    #[test]
    fn names_parse_back() {
        for c in Codec::ALL {
            assert_eq!(c.name().parse::<Codec>(), Ok(*c));
        }
        assert_eq!(
            "zstd".parse::<Codec>().unwrap_err().to_string(),
            "unknown codec \"zstd\" (expected none or lz4)"
        );
    }
}
