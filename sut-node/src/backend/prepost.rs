//! SUT-side pre- and post-processing around a model, which the rules allow
//! on the SUT (never in the QDL): converting the wire's element type to the
//! model's (with a scale and offset), and reducing a model's output row to
//! its argmax. Pure functions over bytes, so they are tested without a
//! model.

use netdiv_proto::dtype::DType;
use serde::{Deserialize, Serialize};

/// How the bytes of a sample become the model's input elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Preprocess {
    /// Element type of the sample bytes on the wire.
    pub wire: DType,
    /// Element type the model takes.
    pub model: DType,
    /// `model = wire * scale + offset`, applied only when converting to float32.
    pub scale: f32,
    /// Added after scaling (float32 models only).
    pub offset: f32,
}

/// Input elements of one batch, in the model's type.
#[derive(Clone, Debug, PartialEq)]
pub enum InputElements {
    /// A float32 model input.
    F32(Vec<f32>),
    /// A uint8 model input.
    U8(Vec<u8>),
    /// An int8 model input.
    I8(Vec<i8>),
    /// An int32 model input.
    I32(Vec<i32>),
    /// An int64 model input.
    I64(Vec<i64>),
}

impl Preprocess {
    /// Checks that this conversion exists; the error names both types.
    pub fn check(&self) -> Result<(), String> {
        let supported_model = matches!(
            self.model,
            DType::F32 | DType::U8 | DType::I8 | DType::I32 | DType::I64
        );
        let ok = if self.model == DType::F32 {
            self.wire != DType::F16
        } else {
            supported_model && self.wire == self.model && self.scale == 1.0 && self.offset == 0.0
        };
        if ok {
            Ok(())
        } else if !supported_model {
            Err(format!("model inputs of type {} are not supported (float32, uint8, int8, int32 and int64 are)", self.model))
        } else if self.wire != self.model && self.model != DType::F32 {
            Err(format!(
                "samples of type {} cannot be converted to the model's {}: only conversion to float32 is supported",
                self.wire, self.model
            ))
        } else if self.model != DType::F32 {
            Err(format!(
                "scale and offset apply only when converting to float32, and the model takes {}",
                self.model
            ))
        } else {
            Err(format!(
                "samples of type {} cannot be converted to float32",
                self.wire
            ))
        }
    }

    /// Converts the samples of a batch, each exactly `elements` elements of
    /// the wire type, into one contiguous input.
    pub fn convert(&self, samples: &[&[u8]]) -> InputElements {
        let bytes = || samples.iter().flat_map(|s| s.iter().copied());
        match self.model {
            DType::F32 => {
                let (scale, offset) = (self.scale, self.offset);
                let mut out = Vec::with_capacity(
                    samples.iter().map(|s| s.len()).sum::<usize>() / self.wire.size(),
                );
                for s in samples {
                    out.extend(wire_values(s, self.wire).map(|v| v as f32 * scale + offset));
                }
                InputElements::F32(out)
            }
            DType::U8 => InputElements::U8(bytes().collect()),
            DType::I8 => InputElements::I8(bytes().map(|b| b as i8).collect()),
            DType::I32 => InputElements::I32(le_words(samples, i32::from_le_bytes)),
            DType::I64 => InputElements::I64(le_words(samples, i64::from_le_bytes)),
            DType::F16 => unreachable!("refused by Preprocess::check"),
        }
    }
}

fn le_words<const N: usize, T>(samples: &[&[u8]], from: fn([u8; N]) -> T) -> Vec<T> {
    samples
        .iter()
        .flat_map(|s| s.chunks_exact(N))
        .map(|w| from(w.try_into().expect("N bytes")))
        .collect()
}

/// The elements of little-endian `bytes` of type `dtype`, as f64 (exact
/// for every type but int64 beyond 2^53, which no pixel or logit reaches).
fn wire_values(bytes: &[u8], dtype: DType) -> Box<dyn Iterator<Item = f64> + '_> {
    match dtype {
        DType::U8 => Box::new(bytes.iter().map(|&b| b as f64)),
        DType::I8 => Box::new(bytes.iter().map(|&b| b as i8 as f64)),
        DType::I32 => Box::new(
            bytes
                .chunks_exact(4)
                .map(|w| i32::from_le_bytes(w.try_into().expect("4 bytes")) as f64),
        ),
        DType::I64 => Box::new(
            bytes
                .chunks_exact(8)
                .map(|w| i64::from_le_bytes(w.try_into().expect("8 bytes")) as f64),
        ),
        DType::F32 => Box::new(
            bytes
                .chunks_exact(4)
                .map(|w| f32::from_le_bytes(w.try_into().expect("4 bytes")) as f64),
        ),
        DType::F16 => Box::new(std::iter::empty()),
    }
}

/// What is sent back for each sample.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Postprocess {
    /// The model's output row, little-endian, unchanged.
    #[default]
    None,
    /// The index of the largest element of the row, as int64 little-endian
    /// (a classifier's top-1 class).
    Argmax,
}

impl std::str::FromStr for Postprocess {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Postprocess::None),
            "argmax" => Ok(Postprocess::Argmax),
            other => Err(format!(
                "unknown post-processing {other:?} (expected none or argmax)"
            )),
        }
    }
}

impl Postprocess {
    /// The config spelling (`none` or `argmax`), also shown in the backend
    /// detail.
    pub fn name(self) -> &'static str {
        match self {
            Postprocess::None => "none",
            Postprocess::Argmax => "argmax",
        }
    }

    /// The response for one output row of type `dtype`.
    pub fn apply(self, row: &[u8], dtype: DType) -> Vec<u8> {
        match self {
            Postprocess::None => row.to_vec(),
            Postprocess::Argmax => {
                let mut best: Option<(usize, f64)> = None;
                for (i, v) in wire_values(row, dtype).enumerate() {
                    // The first maximum wins, as numpy's argmax; NaN never does.
                    if best.is_none_or(|(_, b)| v > b) {
                        best = Some((i, v));
                    }
                }
                (best.map_or(0, |(i, _)| i) as i64).to_le_bytes().to_vec()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre(wire: DType, model: DType, scale: f32, offset: f32) -> Preprocess {
        Preprocess {
            wire,
            model,
            scale,
            offset,
        }
    }

    #[test]
    fn uint8_pixels_become_scaled_floats() {
        let p = pre(DType::U8, DType::F32, 1.0 / 16.0, 0.0);
        p.check().unwrap();
        assert_eq!(
            p.convert(&[&[0, 16], &[8, 4]]),
            InputElements::F32(vec![0.0, 1.0, 0.5, 0.25])
        );
        let p = pre(DType::I8, DType::F32, 2.0, 1.0);
        assert_eq!(p.convert(&[&[0xff]]), InputElements::F32(vec![-1.0]));
    }

    #[test]
    fn same_types_pass_through() {
        let p = pre(DType::I64, DType::I64, 1.0, 0.0);
        p.check().unwrap();
        let a = 7i64.to_le_bytes();
        let b = (-2i64).to_le_bytes();
        assert_eq!(p.convert(&[&a, &b]), InputElements::I64(vec![7, -2]));
        let f = pre(DType::F32, DType::F32, 1.0, 0.0);
        assert_eq!(
            f.convert(&[&1.5f32.to_le_bytes()]),
            InputElements::F32(vec![1.5])
        );
    }

    #[test]
    fn impossible_conversions_are_named() {
        let e = pre(DType::F32, DType::U8, 1.0, 0.0).check().unwrap_err();
        assert!(
            e.contains("float32 cannot be converted to the model's uint8"),
            "{e}"
        );
        let e = pre(DType::U8, DType::U8, 0.5, 0.0).check().unwrap_err();
        assert!(e.contains("scale and offset"), "{e}");
        let e = pre(DType::F16, DType::F32, 1.0, 0.0).check().unwrap_err();
        assert!(e.contains("float16 cannot be converted"), "{e}");
        let e = pre(DType::F16, DType::F16, 1.0, 0.0).check().unwrap_err();
        assert!(e.contains("model inputs of type float16"), "{e}");
    }

    #[test]
    fn argmax_takes_the_first_largest() {
        let row: Vec<u8> = [0.1f32, 0.7, 0.7, 0.2]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            Postprocess::Argmax.apply(&row, DType::F32),
            1i64.to_le_bytes()
        );
        assert_eq!(Postprocess::None.apply(&row, DType::F32), row);
        assert_eq!(
            Postprocess::Argmax.apply(&[3, 9, 2], DType::U8),
            1i64.to_le_bytes()
        );
        assert_eq!("argmax".parse::<Postprocess>(), Ok(Postprocess::Argmax));
        assert!("top5".parse::<Postprocess>().unwrap_err().contains("top5"));
    }
}
