//! A pandas `DataFrame` in a pickle (`DataFrame.to_pickle`): its column
//! names and the cells of one column, read from the block manager pandas
//! pickles it as. pandas 2 pickles the manager as a call
//! `BlockManager(blocks, axes)` whose blocks are
//! `_unpickle_block(values, placement, ndim)`; pandas 1 as an object whose
//! `BUILD` state holds `{"0.14.1": {"axes": ..., "blocks": [{"values",
//! "mgr_locs"}]}}`. Columns of one dtype share a 2-D block, one row per
//! column.

use super::numpy::{self, Array, Elements};
use super::pickle::Value;
use super::DatasetError;

/// A data frame's columns, each a block row.
pub struct DataFrame {
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
/// whose state holds the array.
fn array_in(v: &Value) -> Result<Option<Array>, DatasetError> {
    if let Some(array) = numpy::array(v)? {
        return Ok(Some(array));
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

fn bad(what: impl Into<String>) -> DatasetError {
    DatasetError::Format(what.into())
}

impl DataFrame {
    /// The frame `v` pickles.
    pub fn from_pickle(v: &Value) -> Result<DataFrame, DatasetError> {
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
    pub fn column(&self, name: &str) -> Result<Vec<Cell>, DatasetError> {
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
pub enum Cell {
    /// A Python object (a list, a string, a numpy array...).
    Object(Value),
    /// A number of an integer column.
    Integer(i64),
}

impl Cell {
    /// The cell as a list of integers: a Python list of ints, or a 1-D
    /// integer numpy array.
    pub fn integers(&self) -> Result<Vec<i64>, DatasetError> {
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
