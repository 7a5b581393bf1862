//! Tensor element types as samples carry them: the numpy names users
//! give on command lines and in config files, sizes, and `.npy` header
//! descriptors. Shared by the QDL's sample store and the sut-node's
//! pre-processing, so both ends spell and size types the same way.

use std::fmt;

/// Element type of a tensor sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// `uint8`.
    U8,
    /// `int8`.
    I8,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `float16`.
    F16,
    /// `float32`.
    F32,
}

impl DType {
    /// Every element type, in the order names are listed to users.
    pub const ALL: &'static [DType] = &[
        DType::U8,
        DType::I8,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::F16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 => 8,
        }
    }

    /// The numpy name.
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
        }
    }

    /// The descr numpy writes in `.npy` headers on little-endian hosts.
    pub fn npy_descr(self) -> &'static str {
        match self {
            DType::U8 => "|u1",
            DType::I8 => "|i1",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
        }
    }

    /// The dtype of a `.npy` descr; single bytes may carry `|` or `<`,
    /// wider types must be little-endian.
    pub fn from_npy_descr(descr: &str) -> Option<DType> {
        match descr {
            "|u1" | "<u1" => Some(DType::U8),
            "|i1" | "<i1" => Some(DType::I8),
            "<i4" => Some(DType::I32),
            "<i8" => Some(DType::I64),
            "<f2" => Some(DType::F16),
            "<f4" => Some(DType::F32),
            _ => None,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An element type name that is not one of [`DType::ALL`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown dtype {name:?} (expected {})", DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownDType {
    /// The name as given.
    pub name: String,
}

impl std::str::FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, UnknownDType> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDType { name: s.into() })
    }
}
