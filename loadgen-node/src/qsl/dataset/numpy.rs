//! numpy arrays in a pickle: the two forms numpy pickles them in,
//! `numpy.core.multiarray._reconstruct(ndarray, (0,), b'b')` with a
//! `BUILD` state `(version, shape, dtype, is_fortran, data)` and
//! `numpy.core.numeric._frombuffer(buffer, dtype, shape, order)` (numpy
//! 2 spells the modules `numpy._core.*`), with `numpy.dtype(...)` and its
//! state for the element type and byte order.

use bytes::Bytes;

use super::pickle::Value;
use super::DatasetError;

/// An array's elements.
#[derive(Clone, Debug)]
pub(super) enum Elements {
    /// Numbers: their raw bytes in `dtype`'s order.
    Raw(Bytes),
    /// Python objects (an `object` array).
    Objects(Vec<Value>),
}

/// A numpy array read from a pickle.
#[derive(Clone, Debug)]
pub(super) struct Array {
    /// numpy's type code without byte order (`f4`, `i8`, `u1`, `O8`).
    pub dtype: String,
    /// Whether the elements are big-endian.
    pub big_endian: bool,
    /// Its dimensions.
    pub shape: Vec<usize>,
    /// Column-major (`is_fortran`, order `F`).
    pub fortran: bool,
    /// What it holds.
    pub elements: Elements,
}

/// Whether `module.name` is numpy's `name` in either spelling.
fn numpy(global: Option<String>, names: &[&str]) -> bool {
    global.is_some_and(|g| {
        names
            .iter()
            .any(|n| g == format!("numpy.core.{n}") || g == format!("numpy._core.{n}"))
    })
}

fn bad(what: &str) -> DatasetError {
    DatasetError::Format(format!("a numpy array whose {what}"))
}

/// The array `v` pickles, or `None` if `v` is not a numpy array.
pub(super) fn array(v: &Value) -> Result<Option<Array>, DatasetError> {
    let Value::Object(o) = v else {
        return Ok(None);
    };
    let o = o.borrow();
    let made_by = o.callable.global_name();
    if numpy(made_by.clone(), &["multiarray._reconstruct"]) {
        let state = o.state.as_ref().ok_or_else(|| bad("state is missing"))?;
        let s = state.items().ok_or_else(|| bad("state is not a tuple"))?;
        let [_, shape, dtype, fortran, data] = &s[..] else {
            return Err(bad("state is not (version, shape, dtype, order, data)"));
        };
        let (dtype, big_endian) = dtype_of(dtype)?;
        let elements = match data {
            Value::Bytes(b) => Elements::Raw(b.clone()),
            Value::List(l) => Elements::Objects(l.borrow().clone()),
            other => return Err(bad(&format!("data is a {}", other.kind()))),
        };
        return Ok(Some(Array {
            dtype,
            big_endian,
            shape: shape_of(shape)?,
            fortran: matches!(fortran, Value::Bool(true)),
            elements,
        }));
    }
    if numpy(made_by, &["numeric._frombuffer"]) {
        let [buffer, dtype, shape, order] = &o.args[..] else {
            return Err(bad("_frombuffer call does not have 4 arguments"));
        };
        let Value::Bytes(raw) = buffer else {
            return Err(bad("buffer is not bytes"));
        };
        let (dtype, big_endian) = dtype_of(dtype)?;
        return Ok(Some(Array {
            dtype,
            big_endian,
            shape: shape_of(shape)?,
            fortran: order.as_str() == Some("F"),
            elements: Elements::Raw(raw.clone()),
        }));
    }
    Ok(None)
}

fn shape_of(v: &Value) -> Result<Vec<usize>, DatasetError> {
    v.items()
        .ok_or_else(|| bad("shape is not a tuple"))?
        .iter()
        .map(|d| {
            d.as_i64()
                .and_then(|d| usize::try_from(d).ok())
                .ok_or_else(|| bad("shape holds a negative or non-integer size"))
        })
        .collect()
}

/// `numpy.dtype('f4', False, True)` and its state: the type code and
/// whether it is big-endian.
fn dtype_of(v: &Value) -> Result<(String, bool), DatasetError> {
    let Value::Object(o) = v else {
        return Err(bad("dtype is not a numpy.dtype"));
    };
    let o = o.borrow();
    let made_by = o.callable.global_name().unwrap_or_default();
    if !(made_by == "numpy.dtype" || made_by.starts_with("numpy.") && made_by.ends_with(".dtype")) {
        return Err(bad("dtype is not a numpy.dtype"));
    }
    let code = o
        .args
        .first()
        .and_then(Value::as_str)
        .ok_or_else(|| bad("dtype has no type code"))?
        .to_string();
    // State (version, byte order '<' '>' '|' '=', ...).
    let order = o
        .state
        .as_ref()
        .and_then(Value::items)
        .and_then(|s| s.get(1).and_then(|b| b.as_str().map(str::to_string)));
    Ok((code, order.as_deref() == Some(">")))
}

impl Array {
    /// Elements in all.
    pub(super) fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The raw bytes of a little-endian, C-order numeric array of
    /// `dtype` (`f4`, `u1`, ...); an error naming what it is instead.
    pub(super) fn raw_c_order(&self, dtype: &str) -> Result<&Bytes, DatasetError> {
        let Elements::Raw(raw) = &self.elements else {
            return Err(DatasetError::Format(format!(
                "an array of Python objects where {dtype} numbers were expected"
            )));
        };
        if self.dtype != dtype || (self.big_endian && dtype != "u1" && dtype != "i1") {
            return Err(DatasetError::Format(format!(
                "an array of {}{} where little-endian {dtype} was expected",
                if self.big_endian { "big-endian " } else { "" },
                self.dtype
            )));
        }
        if self.fortran && self.shape.iter().filter(|&&d| d > 1).count() > 1 {
            return Err(DatasetError::Format(
                "a column-major (Fortran-order) array where C order was expected".into(),
            ));
        }
        let element = dtype[1..].parse::<usize>().unwrap_or(1);
        if raw.len() != self.len() * element {
            return Err(DatasetError::Format(format!(
                "an array of shape {:?} holding {} bytes, not {}",
                self.shape,
                raw.len(),
                self.len() * element
            )));
        }
        Ok(raw)
    }

    /// The elements of a 1-D integer array (any width, either order).
    pub(super) fn integers(&self) -> Result<Vec<i64>, DatasetError> {
        let Elements::Raw(raw) = &self.elements else {
            return Err(DatasetError::Format(
                "an object array where integers were expected".into(),
            ));
        };
        let width: usize = match self.dtype.as_str() {
            "i1" | "u1" => 1,
            "i2" | "u2" => 2,
            "i4" | "u4" => 4,
            "i8" | "u8" => 8,
            other => {
                return Err(DatasetError::Format(format!(
                    "an array of {other} where integers were expected"
                )))
            }
        };
        let signed = self.dtype.starts_with('i');
        if raw.len() != self.len() * width {
            return Err(DatasetError::Format(
                "an integer array of the wrong size".into(),
            ));
        }
        Ok(raw
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                if self.big_endian {
                    for (i, x) in c.iter().rev().enumerate() {
                        b[i] = *x;
                    }
                } else {
                    b[..width].copy_from_slice(c);
                }
                let negative = signed && b[width - 1] & 0x80 != 0;
                if negative {
                    for x in &mut b[width..] {
                        *x = 0xff;
                    }
                }
                i64::from_le_bytes(b)
            })
            .collect())
    }
}
