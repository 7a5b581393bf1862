//! A JSON data set's token-id lists in row order, in every orient pandas
//! writes and `pd.read_json` reads: `records` (`[{col: v}]`, the
//! references' own files), `split` (`{"columns", "index", "data"}`),
//! `table` (`{"schema", "data": [records]}`), `columns` (`to_json()`'s
//! default: `{col: {label: v}}`, rows in the first column's key order) and
//! `index` (`{label: {col: v}}`, rows in key order). `values` (`[[v]]`)
//! holds no column names and is refused. Objects keep the file's key
//! order here, as pandas keeps it.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// A JSON object's entries in the file's order.
struct Ordered<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Entries<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(Entries(std::marker::PhantomData))
    }
}

/// The token-id column of `columns` (the first of `candidates` present).
fn find<'a>(columns: impl IntoIterator<Item = &'a str>, candidates: &[&str]) -> Option<String> {
    let columns: Vec<&str> = columns.into_iter().collect();
    candidates
        .iter()
        .find(|c| columns.contains(c))
        .map(|c| c.to_string())
}

/// The values of the first of `candidates` that the rows hold, in row
/// order, and its name; an error says what the file is instead.
pub(super) fn token_rows(text: &[u8], candidates: &[&str]) -> Result<(String, Vec<Value>), String> {
    let value: Value = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    let wanted = candidates.join(" or ");
    match &value {
        Value::Array(rows) if rows.iter().all(Value::is_array) && !rows.is_empty() => Err(
            "a JSON data set in pandas' values orient: it holds no column names, so its token \
             ids cannot be told from its other columns (write it with orient='records')"
                .into(),
        ),
        Value::Array(rows) => records(rows, candidates, &wanted),
        Value::Object(o) if o.contains_key("schema") && o.contains_key("data") => {
            let rows = o["data"]
                .as_array()
                .ok_or("a table-orient file whose data is not a list")?;
            records(rows, candidates, &wanted)
        }
        Value::Object(o) if o.contains_key("columns") && o.contains_key("data") => {
            let columns: Vec<&str> = o["columns"]
                .as_array()
                .ok_or("a split-orient file whose columns is not a list")?
                .iter()
                .map(|c| c.as_str().unwrap_or_default())
                .collect();
            let column = find(columns.iter().copied(), candidates).ok_or_else(|| {
                format!("no {wanted} column; its columns: {}", columns.join(", "))
            })?;
            let at = columns
                .iter()
                .position(|c| *c == column)
                .expect("found above");
            let rows = o["data"]
                .as_array()
                .ok_or("a split-orient file whose data is not a list")?;
            let cells = rows
                .iter()
                .enumerate()
                .map(|(row, r)| {
                    r.get(at)
                        .cloned()
                        .ok_or_else(|| format!("row {row} has no {column}"))
                })
                .collect::<Result<_, _>>()?;
            Ok((column, cells))
        }
        Value::Object(_) => keyed(text, candidates, &wanted),
        _ => Err("not a JSON data set: neither a list of rows nor an object".into()),
    }
}

/// Records: one object per row.
fn records(
    rows: &[Value],
    candidates: &[&str],
    wanted: &str,
) -> Result<(String, Vec<Value>), String> {
    let first = rows.first().ok_or("a JSON data set with no rows")?;
    let keys = first
        .as_object()
        .ok_or("a JSON list whose rows are not objects")?
        .keys()
        .map(String::as_str);
    let column = find(keys, candidates)
        .ok_or_else(|| format!("its first row has no token ids ({wanted})"))?;
    let cells = rows
        .iter()
        .enumerate()
        .map(|(row, r)| {
            r.get(&column)
                .cloned()
                .ok_or_else(|| format!("row {row} has no {column} list"))
        })
        .collect::<Result<_, _>>()?;
    Ok((column, cells))
}

/// The `columns` and `index` orients, read with the file's key order.
fn keyed(text: &[u8], candidates: &[&str], wanted: &str) -> Result<(String, Vec<Value>), String> {
    let outer: Ordered<Ordered<Value>> = serde_json::from_slice(text).map_err(|e| {
        format!("an object that is neither pandas' columns nor its index orient ({e})")
    })?;
    // columns orient: the token column is a key of the outer object.
    if let Some(column) = find(outer.0.iter().map(|(k, _)| k.as_str()), candidates) {
        let (_, cells) = outer
            .0
            .into_iter()
            .find(|(k, _)| *k == column)
            .expect("found above");
        return Ok((column, cells.0.into_iter().map(|(_, v)| v).collect()));
    }
    // index orient: each outer value is a row.
    let first = outer.0.first().ok_or("a JSON data set with no rows")?;
    let column = find(first.1 .0.iter().map(|(k, _)| k.as_str()), candidates)
        .ok_or_else(|| format!("no {wanted} column in the columns or index orient"))?;
    let cells = outer
        .0
        .into_iter()
        .map(|(label, row)| {
            row.0
                .into_iter()
                .find(|(k, _)| *k == column)
                .map(|(_, v)| v)
                .ok_or_else(|| format!("row {label} has no {column}"))
        })
        .collect::<Result<_, _>>()?;
    Ok((column, cells))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKENS: &[&str] = &["tok_input", "input_tokens"];

    fn rows(text: &str) -> Result<(String, Vec<Value>), String> {
        token_rows(text.as_bytes(), TOKENS)
    }

    #[test]
    fn every_orient_pandas_reads_gives_the_rows_in_order() {
        let want = (
            "tok_input".to_string(),
            vec![serde_json::json!([1, 2]), serde_json::json!([3])],
        );
        for (orient, text) in [
            (
                "records",
                r#"[{"id":"a","tok_input":[1,2]},{"id":"b","tok_input":[3]}]"#,
            ),
            (
                "split",
                r#"{"columns":["id","tok_input"],"index":[0,1],"data":[["a",[1,2]],["b",[3]]]}"#,
            ),
            (
                "table",
                r#"{"schema":{"fields":[{"name":"index"}],"primaryKey":["index"]},
                    "data":[{"index":0,"id":"a","tok_input":[1,2]},{"index":1,"id":"b","tok_input":[3]}]}"#,
            ),
            (
                "columns",
                r#"{"id":{"0":"a","1":"b"},"tok_input":{"0":[1,2],"1":[3]}}"#,
            ),
            (
                "index",
                r#"{"0":{"id":"a","tok_input":[1,2]},"1":{"id":"b","tok_input":[3]}}"#,
            ),
        ] {
            assert_eq!(rows(text).as_ref(), Ok(&want), "{orient}");
        }
    }

    #[test]
    fn the_files_key_order_is_the_row_order() {
        // Labels 10, 2, 7 stay in the file's order, as pandas keeps them.
        let text = r#"{"tok_input":{"10":[10],"2":[2],"7":[7]}}"#;
        let (_, cells) = rows(text).unwrap();
        assert_eq!(
            cells,
            [
                serde_json::json!([10]),
                serde_json::json!([2]),
                serde_json::json!([7])
            ]
        );
        let index = r#"{"10":{"tok_input":[10]},"2":{"tok_input":[2]}}"#;
        assert_eq!(
            rows(index).unwrap().1,
            [serde_json::json!([10]), serde_json::json!([2])]
        );
    }

    #[test]
    fn what_is_not_a_token_data_set_is_named() {
        let values = rows(r#"[["a",[1,2]],["b",[3]]]"#).unwrap_err();
        assert!(values.contains("values orient"), "{values}");
        let none = rows(r#"{"text":{"0":"hi"}}"#).unwrap_err();
        assert!(
            none.contains("no tok_input or input_tokens column"),
            "{none}"
        );
        assert!(rows("42").unwrap_err().contains("neither a list of rows"));
        assert!(rows("[]").unwrap_err().contains("no rows"));
    }
}
