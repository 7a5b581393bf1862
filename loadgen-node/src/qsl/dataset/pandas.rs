//! A pandas `DataFrame` in a pickle (`DataFrame.to_pickle`): its column
//! names and the cells of one column, read from the block manager pandas
//! pickles it as. pandas 2 pickles the manager as a call
//! `BlockManager(blocks, axes)` whose blocks are
//! `_unpickle_block(values, placement, ndim)`; pandas 1 as an object whose
//! `BUILD` state holds `{"0.14.1": {"axes": ..., "blocks": [{"values",
//! "mgr_locs"}]}}`. Columns of one dtype share a 2-D block, one row per
//! column. Strings may be numpy object arrays, pandas 3's `StringArray`,
//! or pyarrow-backed arrays pickled as their Arrow buffers (pandas 3 with
//! pyarrow, pandas 2 with `future.infer_string`), whose offsets and bytes
//! are read here without an Arrow library.

use super::numpy::{self, Array, Elements};
use super::pickle::Value;
use super::DatasetError;

/// A data frame's columns, each a block row.
#[derive(Debug)]
pub(super) struct DataFrame {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Rows in the frame.
    pub rows: usize,
    /// Per block: its values (read when a column of it is asked for: a
    /// block of another kind, strings say, need not be understood) and
    /// the column positions its rows hold.
    blocks: Vec<(Value, Vec<usize>)>,
}

/// The numpy array `v` is, or holds: pandas 3 wraps the arrays of its
/// extension types (strings) as `__pyx_unpickle_NDArrayBacked` objects
/// whose state holds the array, and pickles pyarrow-backed strings (pandas
/// 3 with pyarrow installed, pandas 2 with `future.infer_string`) as
/// Arrow buffers, read here as an object array of str.
fn array_in(v: &Value) -> Result<Option<Array>, DatasetError> {
    if let Some(array) = numpy::array(v)? {
        return Ok(Some(array));
    }
    if let Some(strings) = arrow_strings(v)? {
        return Ok(Some(Array {
            dtype: "O8".into(),
            big_endian: false,
            shape: vec![strings.len()],
            fortran: false,
            elements: Elements::Objects(strings),
        }));
    }
    if v.made_by()
        .is_some_and(|m| m.ends_with("__pyx_unpickle_NDArrayBacked"))
    {
        let Value::Object(o) = v else {
            unreachable!("made_by is Some only for objects")
        };
        let state = o.borrow().state.clone();
        for item in state.and_then(|s| s.items()).unwrap_or_default() {
            if let Some(array) = numpy::array(&item)? {
                return Ok(Some(array));
            }
        }
    }
    Ok(None)
}

/// The strings of a pandas Arrow-backed array (`ArrowStringArray`,
/// `ArrowStringArrayNumpySemantics`, `ArrowExtensionArray`): its state's
/// `_pa_array` (pandas 2 and 3) or `_data` (pandas 1.5), one pyarrow
/// array or a `chunked_array` of them; `None` for anything else.
fn arrow_strings(v: &Value) -> Result<Option<Vec<Value>>, DatasetError> {
    let made_by = v.made_by().unwrap_or_default();
    if !(made_by.starts_with("pandas.") && made_by.contains("Arrow")) {
        return Ok(None);
    }
    let Value::Object(o) = v else {
        return Ok(None);
    };
    let state = o.borrow().state.clone().unwrap_or(Value::None);
    let array = state
        .get("_pa_array")
        .or_else(|| state.get("_data"))
        .ok_or_else(|| bad(format!("a {made_by} without its pyarrow array")))?;
    let chunks = if array.made_by().as_deref() == Some("pyarrow.lib.chunked_array") {
        let Value::Object(c) = &array else {
            unreachable!("made_by is Some only for objects")
        };
        let first = c.borrow().args.first().cloned().unwrap_or(Value::None);
        first
            .items()
            .ok_or_else(|| bad("a pyarrow chunked_array without its chunks"))?
    } else {
        vec![array]
    };
    let mut strings = Vec::new();
    for chunk in &chunks {
        restore_strings(chunk, &mut strings)?;
    }
    Ok(Some(strings))
}

/// The strings of one pickled pyarrow array: `_restore_array((type,
/// length, null_count, offset, [validity, offsets, data], children,
/// dictionary))`, its type `string` (4-byte offsets) or `large_string`
/// (8-byte); a null is `None`.
fn restore_strings(array: &Value, out: &mut Vec<Value>) -> Result<(), DatasetError> {
    let Value::Object(o) = array else {
        return Err(bad(format!("a pyarrow array that is a {}", array.kind())));
    };
    if array.made_by().as_deref() != Some("pyarrow.lib._restore_array") {
        return Err(bad(format!("a pyarrow array made by {}", array.kind())));
    }
    let fields = o
        .borrow()
        .args
        .first()
        .and_then(Value::items)
        .filter(|f| f.len() >= 5)
        .ok_or_else(|| bad("a pyarrow array without its type, length and buffers"))?;
    let alias = match &fields[0] {
        Value::Object(t) => t
            .borrow()
            .args
            .first()
            .and_then(|a| a.as_str().map(String::from)),
        _ => None,
    }
    .unwrap_or_default();
    let width = match alias.as_str() {
        "string" | "utf8" => 4,
        "large_string" | "large_utf8" => 8,
        other => {
            return Err(bad(format!(
                "a pyarrow array of type {other:?}, not of strings"
            )))
        }
    };
    let number = |v: &Value, what: &str| {
        v.as_i64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| bad(format!("a pyarrow array whose {what} is a {}", v.kind())))
    };
    let length = number(&fields[1], "length")?;
    let offset = number(&fields[3], "offset")?;
    let buffers = fields[4]
        .items()
        .filter(|b| b.len() >= 3)
        .ok_or_else(|| bad("a pyarrow string array without its three buffers"))?;
    let bytes = |b: &Value| -> Option<bytes::Bytes> {
        match b {
            Value::Object(p) => match p.borrow().args.first() {
                Some(Value::Bytes(data)) => Some(data.clone()),
                _ => None,
            },
            Value::Bytes(data) => Some(data.clone()),
            _ => None,
        }
    };
    let validity = bytes(&buffers[0]);
    let offsets =
        bytes(&buffers[1]).ok_or_else(|| bad("a pyarrow string array without offsets"))?;
    let data = bytes(&buffers[2]).unwrap_or_default();
    let at = |i: usize| -> Result<usize, DatasetError> {
        let slot = offsets
            .get(i * width..(i + 1) * width)
            .ok_or_else(|| bad(format!("pyarrow string offset {i} past its buffer")))?;
        let mut raw = [0u8; 8];
        raw[..width].copy_from_slice(slot);
        usize::try_from(u64::from_le_bytes(raw)).map_err(|_| bad("a pyarrow offset too large"))
    };
    for i in offset..offset + length {
        let valid = validity
            .as_ref()
            .is_none_or(|bits| bits.get(i / 8).is_some_and(|b| b >> (i % 8) & 1 == 1));
        if !valid {
            out.push(Value::None);
            continue;
        }
        let (start, end) = (at(i)?, at(i + 1)?);
        let text = data
            .get(start..end)
            .ok_or_else(|| bad(format!("pyarrow string {i} past its data")))?;
        let text = std::str::from_utf8(text)
            .map_err(|_| bad(format!("pyarrow string {i} is not UTF-8")))?;
        out.push(Value::Str(text.into()));
    }
    Ok(())
}

fn bad(what: impl Into<String>) -> DatasetError {
    DatasetError::Format(what.into())
}

impl DataFrame {
    /// The frame `v` pickles.
    pub(super) fn from_pickle(v: &Value) -> Result<DataFrame, DatasetError> {
        let made_by = v.made_by().unwrap_or_else(|| v.kind());
        if !(made_by.starts_with("pandas.") && made_by.ends_with(".DataFrame")) {
            return Err(bad(format!(
                "a pickle of {made_by}, not of a pandas DataFrame"
            )));
        }
        let Value::Object(frame) = v else {
            unreachable!("made_by is Some only for objects")
        };
        let state = frame
            .borrow()
            .state
            .clone()
            .ok_or_else(|| bad("a DataFrame pickle without its state"))?;
        let manager = state
            .get("_mgr")
            .or_else(|| state.get("_data"))
            .ok_or_else(|| bad("a DataFrame pickle without its block manager (_mgr)"))?;
        let (blocks, axes) = manager_parts(&manager)?;
        let [columns, index] = &axes[..] else {
            return Err(bad("a block manager without two axes (columns, rows)"));
        };
        let columns = index_names(columns)?;
        let rows = index_len(index)?;
        let blocks = blocks.iter().map(block).collect::<Result<Vec<_>, _>>()?;
        Ok(DataFrame {
            columns,
            rows,
            blocks,
        })
    }

    /// The cells of column `name`, one per row.
    pub(super) fn column(&self, name: &str) -> Result<Vec<Cell>, DatasetError> {
        let position = self.columns.iter().position(|c| c == name).ok_or_else(|| {
            bad(format!(
                "no column {name:?} (columns: {})",
                self.columns.join(", ")
            ))
        })?;
        let (values, row) = self
            .blocks
            .iter()
            .find_map(|(values, places)| {
                places
                    .iter()
                    .position(|&p| p == position)
                    .map(|row| (values, row))
            })
            .ok_or_else(|| bad(format!("column {name:?} is in no block")))?;
        let values = array_in(values)?.ok_or_else(|| {
            bad(format!(
                "column {name:?} is a {}, not a numpy array",
                values.kind()
            ))
        })?;
        let [block_rows, n] = values.shape[..] else {
            return Err(bad(format!(
                "column {name:?}: a block of shape {:?}, not 2-D",
                values.shape
            )));
        };
        if n != self.rows || row >= block_rows {
            return Err(bad(format!(
                "column {name:?}: a block of shape {:?} for {} rows",
                values.shape, self.rows
            )));
        }
        let at = |j: usize| {
            if values.fortran {
                j * block_rows + row
            } else {
                row * n + j
            }
        };
        match &values.elements {
            Elements::Objects(cells) => (0..n)
                .map(|j| {
                    cells
                        .get(at(j))
                        .cloned()
                        .map(Cell::Object)
                        .ok_or_else(|| bad(format!("column {name:?}: fewer cells than rows")))
                })
                .collect(),
            Elements::Raw(_) => {
                let all = values.integers().map_err(|_| {
                    bad(format!(
                        "column {name:?} holds {} numbers, not token lists",
                        values.dtype
                    ))
                })?;
                Ok((0..n).map(|j| Cell::Integer(all[at(j)])).collect())
            }
        }
    }
}

/// One cell of a column.
#[derive(Debug)]
#[allow(
    dead_code,
    reason = "an integer cell is kept as the frame holds it, for the Debug output of a refused column"
)]
pub(super) enum Cell {
    /// A Python object (a list, a string, a numpy array...).
    Object(Value),
    /// A number of an integer column.
    Integer(i64),
}

impl Cell {
    /// The cell as a list of integers: a Python list of ints, or a 1-D
    /// integer numpy array.
    pub(super) fn integers(&self) -> Result<Vec<i64>, DatasetError> {
        match self {
            Cell::Integer(_) => Err(bad("a number where a list of token ids was expected")),
            Cell::Object(v) => {
                if let Some(array) = numpy::array(v)? {
                    return array.integers();
                }
                let items = v.items().ok_or_else(|| {
                    bad(format!(
                        "a {} where a list of token ids was expected",
                        v.kind()
                    ))
                })?;
                items
                    .iter()
                    .map(|x| {
                        x.as_i64()
                            .ok_or_else(|| bad(format!("a {} among the token ids", x.kind())))
                    })
                    .collect()
            }
        }
    }
}

/// The blocks and axes of a block manager, in either pandas' form.
fn manager_parts(manager: &Value) -> Result<(Vec<Value>, Vec<Value>), DatasetError> {
    let Value::Object(o) = manager else {
        return Err(bad(format!("a block manager that is a {}", manager.kind())));
    };
    let o = o.borrow();
    // pandas 2: BlockManager(blocks, axes).
    if let [blocks, axes, ..] = &o.args[..] {
        if let (Some(blocks), Some(axes)) = (blocks.items(), axes.items()) {
            return Ok((blocks, axes));
        }
    }
    // pandas 1: the state {"0.14.1": {"axes": [...], "blocks": [...]}}.
    let state = o
        .state
        .as_ref()
        .and_then(|s| {
            s.items()
                .and_then(|t| t.last().cloned())
                .or(Some(s.clone()))
        })
        .and_then(|s| s.get("0.14.1"))
        .ok_or_else(|| bad("a block manager in a form this reader does not know"))?;
    let axes = state
        .get("axes")
        .and_then(|a| a.items())
        .ok_or_else(|| bad("a block manager without axes"))?;
    let blocks = state
        .get("blocks")
        .and_then(|b| b.items())
        .ok_or_else(|| bad("a block manager without blocks"))?;
    Ok((blocks, axes))
}

/// A block's values and the column positions it holds.
fn block(b: &Value) -> Result<(Value, Vec<usize>), DatasetError> {
    let (values, placement) = if let Some(values) = b.get("values") {
        (values, b.get("mgr_locs").unwrap_or(Value::None))
    } else {
        let Value::Object(o) = b else {
            return Err(bad(format!("a block that is a {}", b.kind())));
        };
        let o = o.borrow();
        match &o.args[..] {
            [values, placement, ..] => (values.clone(), placement.clone()),
            _ => return Err(bad("a block without values and placement")),
        }
    };
    Ok((values, positions(&placement)?))
}

/// Column positions: a `slice(start, stop, step)`, or an integer array.
fn positions(placement: &Value) -> Result<Vec<usize>, DatasetError> {
    if placement.made_by().as_deref() == Some("builtins.slice") {
        let Value::Object(o) = placement else {
            unreachable!("made_by is Some only for objects")
        };
        let args = o.borrow().args.clone();
        let number = |v: Option<&Value>, default: i64| v.and_then(Value::as_i64).unwrap_or(default);
        let (start, stop, step) = (
            number(args.first(), 0),
            number(args.get(1), 0),
            number(args.get(2), 1),
        );
        if step <= 0 || start < 0 || stop < start {
            return Err(bad("a block placement slice this reader does not take"));
        }
        return Ok((start..stop)
            .step_by(step as usize)
            .map(|p| p as usize)
            .collect());
    }
    let array = numpy::array(placement)?
        .ok_or_else(|| bad(format!("a block placement that is a {}", placement.kind())))?;
    array
        .integers()?
        .into_iter()
        .map(|p| usize::try_from(p).map_err(|_| bad("a negative column position")))
        .collect()
}

/// An Index's labels as strings (the columns).
fn index_names(index: &Value) -> Result<Vec<String>, DatasetError> {
    let data = index_data(index)?;
    let array = array_in(&data)?.ok_or_else(|| bad("an Index whose data is not an array"))?;
    let Elements::Objects(names) = &array.elements else {
        return Err(bad("column names that are not strings"));
    };
    names
        .iter()
        .map(|n| {
            n.as_str()
                .map(str::to_string)
                .ok_or_else(|| bad(format!("a column name that is a {}", n.kind())))
        })
        .collect()
}

/// `_new_Index(cls, {"data": ..., ...})`: the data.
fn index_data(index: &Value) -> Result<Value, DatasetError> {
    let Value::Object(o) = index else {
        return Err(bad(format!("an Index that is a {}", index.kind())));
    };
    let o = o.borrow();
    o.args
        .iter()
        .find_map(|a| a.get("data"))
        .or_else(|| o.state.as_ref().and_then(|s| s.get("data")))
        .ok_or_else(|| bad("an Index without data"))
}

/// The number of rows of the row index: a RangeIndex's, or an Index's
/// data length.
fn index_len(index: &Value) -> Result<usize, DatasetError> {
    let Value::Object(o) = index else {
        return Err(bad(format!("a row index that is a {}", index.kind())));
    };
    let range = o
        .borrow()
        .args
        .iter()
        .find(|a| a.get("start").is_some())
        .cloned();
    if let Some(r) = range {
        let get = |k: &str, d: i64| r.get(k).and_then(|v| v.as_i64()).unwrap_or(d);
        let (start, stop, step) = (get("start", 0), get("stop", 0), get("step", 1));
        if step == 0 {
            return Err(bad("a RangeIndex of step 0"));
        }
        let n = ((stop - start) + step - step.signum()) / step;
        return Ok(n.max(0) as usize);
    }
    let data = index_data(index)?;
    let array = array_in(&data)?.ok_or_else(|| bad("a row index whose data is not an array"))?;
    Ok(array.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pd.DataFrame({"id": ["a", "b"], "tok_input": [[1, 300], [70000]]})`
    /// as each pandas pickles it (`to_pickle`; written by the versions
    /// named, the bytes kept here).
    const PICKLES: [(&str, &[u8]); 3] = [
        ("pandas 3.1.1 with pyarrow 26.0.1", b"\x80\x05\x95\xec\x03\x00\x00\x00\x00\x00\x00\x8c\x06pandas\x94\x8c\x09DataFrame\x94\x93\x94)\x81\x94}\x94(\x8c\x04_mgr\x94\x8c\x1epandas.core.internals.managers\x94\x8c\x0cBlockManager\x94\x93\x94\x8c\x16pandas._libs.internals\x94\x8c\x0f_unpickle_block\x94\x93\x94\x8c\x0dpandas.arrays\x94\x8c\x10ArrowStringArray\x94\x93\x94)\x81\x94}\x94(\x8c\x09_pa_array\x94\x8c\x0bpyarrow.lib\x94\x8c\x0e_restore_array\x94\x93\x94(h\x12\x8c\x0etype_for_alias\x94\x93\x94\x8c\x0clarge_string\x94\x85\x94R\x94K\x02K\x00K\x00]\x94(Nh\x12\x8c\x09py_buffer\x94\x93\x94\x96\x18\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x94\x85\x94R\x94h\x1c\x96\x02\x00\x00\x00\x00\x00\x00\x00ab\x94\x85\x94R\x94e]\x94Nt\x94\x85\x94R\x94\x8c\x06_dtype\x94h\x00\x8c\x0bStringDtype\x94\x93\x94\x8c\x07pyarrow\x94G\x7f\xf8\x00\x00\x00\x00\x00\x00\x86\x94R\x94\x8c\x06_cache\x94}\x94ub\x8c\x08builtins\x94\x8c\x05slice\x94\x93\x94K\x00K\x01K\x01\x87\x94R\x94K\x02\x87\x94R\x94h\x0b\x8c\x16numpy._core.multiarray\x94\x8c\x0c_reconstruct\x94\x93\x94\x8c\x05numpy\x94\x8c\x07ndarray\x94\x93\x94K\x00\x85\x94C\x01b\x94\x87\x94R\x94(K\x01K\x01K\x02\x86\x94h9\x8c\x05dtype\x94\x93\x94\x8c\x02O8\x94\x89\x88\x87\x94R\x94(K\x03\x8c\x01|\x94NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?t\x94b\x89]\x94(]\x94(K\x01M,\x01e]\x94Jp\x11\x01\x00aet\x94bh1K\x01K\x02K\x01\x87\x94R\x94K\x02\x87\x94R\x94\x86\x94]\x94(\x8c\x18pandas.core.indexes.base\x94\x8c\x0a_new_Index\x94\x93\x94h\x00\x8c\x05Index\x94\x93\x94}\x94(\x8c\x04data\x94h\x0e)\x81\x94}\x94(h\x11h\x14(h\x16\x8c\x0clarge_string\x94\x85\x94R\x94K\x02K\x00K\x00]\x94(Nh\x1c\x96\x18\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x0b\x00\x00\x00\x00\x00\x00\x00\x94\x85\x94R\x94h\x1c\x96\x0b\x00\x00\x00\x00\x00\x00\x00idtok_input\x94\x85\x94R\x94e]\x94Nt\x94\x85\x94R\x94h'h)h*G\x7f\xf8\x00\x00\x00\x00\x00\x00\x86\x94R\x94h-}\x94ub\x8c\x04name\x94Nu\x86\x94R\x94hTh\x00\x8c\x0aRangeIndex\x94\x93\x94}\x94(hlN\x8c\x05start\x94K\x00\x8c\x04stop\x94K\x02\x8c\x04step\x94K\x01u\x86\x94R\x94e\x86\x94R\x94\x8c\x04_typ\x94\x8c\x09dataframe\x94\x8c\x09_metadata\x94]\x94\x8c\x05attrs\x94}\x94\x8c\x06_flags\x94}\x94\x8c\x17allows_duplicate_labels\x94\x88sub."),
        ("pandas 2.2.3 with future.infer_string", b"\x80\x05\x95`\x04\x00\x00\x00\x00\x00\x00\x8c\x11pandas.core.frame\x94\x8c\x09DataFrame\x94\x93\x94)\x81\x94}\x94(\x8c\x04_mgr\x94\x8c\x1epandas.core.internals.managers\x94\x8c\x0cBlockManager\x94\x93\x94\x8c\x16pandas._libs.internals\x94\x8c\x0f_unpickle_block\x94\x93\x94\x8c\x1fpandas.core.arrays.string_arrow\x94\x8c\x1eArrowStringArrayNumpySemantics\x94\x93\x94)\x81\x94}\x94(\x8c\x09_pa_array\x94\x8c\x0bpyarrow.lib\x94\x8c\x0e_restore_array\x94\x93\x94(h\x12\x8c\x0etype_for_alias\x94\x93\x94\x8c\x0clarge_string\x94\x85\x94R\x94K\x02K\x00K\x00]\x94(Nh\x12\x8c\x09py_buffer\x94\x93\x94\x96\x18\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x94\x85\x94R\x94h\x1c\x96\x02\x00\x00\x00\x00\x00\x00\x00ab\x94\x85\x94R\x94e]\x94Nt\x94\x85\x94R\x94\x8c\x06_dtype\x94\x8c\x1apandas.core.arrays.string_\x94\x8c\x0bStringDtype\x94\x93\x94)\x81\x94}\x94\x8c\x07storage\x94\x8c\x0dpyarrow_numpy\x94sbub\x8c\x08builtins\x94\x8c\x05slice\x94\x93\x94K\x00K\x01K\x01\x87\x94R\x94K\x02\x87\x94R\x94h\x0b\x8c\x16numpy._core.multiarray\x94\x8c\x0c_reconstruct\x94\x93\x94\x8c\x05numpy\x94\x8c\x07ndarray\x94\x93\x94K\x00\x85\x94C\x01b\x94\x87\x94R\x94(K\x01K\x01K\x02\x86\x94h9\x8c\x05dtype\x94\x93\x94\x8c\x02O8\x94\x89\x88\x87\x94R\x94(K\x03\x8c\x01|\x94NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?t\x94b\x89]\x94(]\x94(K\x01M,\x01e]\x94Jp\x11\x01\x00aet\x94bh1K\x01K\x02K\x01\x87\x94R\x94K\x02\x87\x94R\x94\x86\x94]\x94(\x8c\x18pandas.core.indexes.base\x94\x8c\x0a_new_Index\x94\x93\x94hR\x8c\x05Index\x94\x93\x94}\x94(\x8c\x04data\x94h\x0e)\x81\x94}\x94(h\x11h\x14(h\x16\x8c\x0clarge_string\x94\x85\x94R\x94K\x02K\x00K\x00]\x94(Nh\x1c\x96\x18\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x0b\x00\x00\x00\x00\x00\x00\x00\x94\x85\x94R\x94h\x1c\x96\x0b\x00\x00\x00\x00\x00\x00\x00idtok_input\x94\x85\x94R\x94e]\x94Nt\x94\x85\x94R\x94h'h*)\x81\x94}\x94(h-h.\x8c\x06_cache\x94}\x94\x8c\x0bindex_class\x94hVsubub\x8c\x04name\x94Nu\x86\x94R\x94hT\x8c\x19pandas.core.indexes.range\x94\x8c\x0aRangeIndex\x94\x93\x94}\x94(hnN\x8c\x05start\x94K\x00\x8c\x04stop\x94K\x02\x8c\x04step\x94K\x01u\x86\x94R\x94e\x86\x94R\x94\x8c\x04_typ\x94\x8c\x09dataframe\x94\x8c\x09_metadata\x94]\x94\x8c\x05attrs\x94}\x94\x8c\x06_flags\x94}\x94\x8c\x17allows_duplicate_labels\x94\x88sub."),
        ("pandas 3.1.1 without pyarrow", b"\x80\x05\x95C\x03\x00\x00\x00\x00\x00\x00\x8c\x06pandas\x94\x8c\x09DataFrame\x94\x93\x94)\x81\x94}\x94(\x8c\x04_mgr\x94\x8c\x1epandas.core.internals.managers\x94\x8c\x0cBlockManager\x94\x93\x94\x8c\x16pandas._libs.internals\x94\x8c\x0f_unpickle_block\x94\x93\x94\x8c\x13pandas._libs.arrays\x94\x8c\x1c__pyx_unpickle_NDArrayBacked\x94\x93\x94\x8c\x0dpandas.arrays\x94\x8c\x0bStringArray\x94\x93\x94J\x1f\x06\xf1\x04N\x87\x94R\x94h\x00\x8c\x0bStringDtype\x94\x93\x94\x8c\x06python\x94G\x7f\xf8\x00\x00\x00\x00\x00\x00\x86\x94R\x94\x8c\x16numpy._core.multiarray\x94\x8c\x0c_reconstruct\x94\x93\x94\x8c\x05numpy\x94\x8c\x07ndarray\x94\x93\x94K\x00\x85\x94C\x01b\x94\x87\x94R\x94(K\x01K\x02\x85\x94h\x1c\x8c\x05dtype\x94\x93\x94\x8c\x02O8\x94\x89\x88\x87\x94R\x94(K\x03\x8c\x01|\x94NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?t\x94b\x89]\x94(\x8c\x01a\x94\x8c\x01b\x94et\x94b\x86\x94b\x8c\x08builtins\x94\x8c\x05slice\x94\x93\x94K\x00K\x01K\x01\x87\x94R\x94K\x02\x87\x94R\x94h\x0bh\x1bh\x1eK\x00\x85\x94h \x87\x94R\x94(K\x01K\x01K\x02\x86\x94h(\x89]\x94(]\x94(K\x01M,\x01e]\x94Jp\x11\x01\x00aet\x94bh2K\x01K\x02K\x01\x87\x94R\x94K\x02\x87\x94R\x94\x86\x94]\x94(\x8c\x18pandas.core.indexes.base\x94\x8c\x0a_new_Index\x94\x93\x94h\x00\x8c\x05Index\x94\x93\x94}\x94(\x8c\x04data\x94h\x0eh\x11J\x1f\x06\xf1\x04N\x87\x94R\x94h\x15h\x16G\x7f\xf8\x00\x00\x00\x00\x00\x00\x86\x94R\x94h\x1bh\x1eK\x00\x85\x94h \x87\x94R\x94(K\x01K\x02\x85\x94h(\x89]\x94(\x8c\x02id\x94\x8c\x09tok_input\x94et\x94b\x86\x94b\x8c\x04name\x94Nu\x86\x94R\x94hGh\x00\x8c\x0aRangeIndex\x94\x93\x94}\x94(hYN\x8c\x05start\x94K\x00\x8c\x04stop\x94K\x02\x8c\x04step\x94K\x01u\x86\x94R\x94e\x86\x94R\x94\x8c\x04_typ\x94\x8c\x09dataframe\x94\x8c\x09_metadata\x94]\x94\x8c\x05attrs\x94}\x94\x8c\x06_flags\x94}\x94\x8c\x17allows_duplicate_labels\x94\x88sub."),
    ];

    #[test]
    fn arrow_backed_and_python_strings_give_the_same_frame() {
        for (writer, bytes) in PICKLES {
            let value = super::super::pickle::parse(bytes::Bytes::from_static(bytes))
                .unwrap_or_else(|e| panic!("{writer}: {e}"));
            let frame = DataFrame::from_pickle(&value).unwrap_or_else(|e| panic!("{writer}: {e}"));
            assert_eq!(frame.columns, ["id", "tok_input"], "{writer}");
            assert_eq!(frame.rows, 2, "{writer}");
            let ids: Vec<Vec<i64>> = frame
                .column("tok_input")
                .unwrap()
                .iter()
                .map(|c| c.integers().unwrap())
                .collect();
            assert_eq!(ids, [vec![1, 300], vec![70000]], "{writer}");
        }
    }
}
