//! Reading what a LoadGen run writes, the same for both engines: the
//! `:::MLLOG` lines of `mlperf_log_detail.txt`, the labels and values of
//! `mlperf_log_summary.txt`, `mlperf_log_accuracy.json`, and the
//! issued-sample record of `--record-issued`.

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use crate::text::clip;

/// Parses the `:::MLLOG {json}` lines of a detail log into `(key, value)`
/// pairs, in order. Other lines are ignored; a malformed MLLOG line is an
/// error.
pub fn parse_detail(text: &str) -> Result<Vec<(String, Value)>> {
    let mut entries = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let Some(json) = line.strip_prefix(":::MLLOG ") else {
            continue;
        };
        let mut record: Value = serde_json::from_str(json)
            .with_context(|| format!("line {}: not JSON: {}", number + 1, clip(line, 200)))?;
        let key = record["key"]
            .as_str()
            .ok_or_else(|| {
                anyhow!(
                    "line {}: no string \"key\": {}",
                    number + 1,
                    clip(line, 200)
                )
            })?
            .to_string();
        let value = record
            .get_mut("value")
            .map(Value::take)
            .unwrap_or(Value::Null);
        entries.push((key, value));
    }
    Ok(entries)
}

/// Every value logged under `key`, in order.
pub fn detail_values<'a>(detail: &'a [(String, Value)], key: &str) -> Vec<&'a Value> {
    detail
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v)
        .collect()
}

/// The first value logged under `key`.
pub fn detail_value<'a>(detail: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    detail.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The label of one summary line: the text left of its first `:` with
/// trailing blanks removed (leading blanks kept: they show nesting); a line
/// without a colon is its own label.
pub fn summary_label(line: &str) -> String {
    match line.find(':') {
        Some(i) => line[..i].trim_end().to_string(),
        None => line.trim_end().to_string(),
    }
}

/// The labels of a summary, one per line, in order, values dropped; blank
/// lines are kept (they are part of the layout) except at the very end.
pub fn summary_labels(text: &str) -> Vec<String> {
    let mut labels: Vec<String> = text.lines().map(summary_label).collect();
    while labels.last().is_some_and(|l| l.is_empty()) {
        labels.pop();
    }
    labels
}

/// The value of the first summary line whose label, trimmed, is `label`
/// (e.g. `"Samples per second"`, `"Result is"`).
pub fn summary_value(text: &str, label: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(':')?;
        (left.trim() == label).then(|| right.trim().to_string())
    })
}

/// One response in `mlperf_log_accuracy.json`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccuracyEntry {
    pub qsl_idx: u64,
    pub data: String,
    pub seq_id: u64,
    /// Token models outside Offline: the first token's bytes (hex).
    pub token_data: Option<String>,
    /// Token models: `n_tokens` of the completion.
    pub token_count: Option<i64>,
}

/// Parses `mlperf_log_accuracy.json` (a JSON array of
/// `{"seq_id", "qsl_idx", "data"}` objects, with `token_data` and
/// `token_count` for token models).
pub fn parse_accuracy(text: &str) -> Result<Vec<AccuracyEntry>> {
    let value: Value = serde_json::from_str(text).context("not JSON")?;
    let array = value
        .as_array()
        .ok_or_else(|| anyhow!("not a JSON array"))?;
    array
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let field = |name: &str| {
                entry
                    .get(name)
                    .ok_or_else(|| anyhow!("entry {i}: no {name:?}: {entry}"))
            };
            Ok(AccuracyEntry {
                seq_id: field("seq_id")?
                    .as_u64()
                    .ok_or_else(|| anyhow!("entry {i}: bad seq_id"))?,
                qsl_idx: field("qsl_idx")?
                    .as_u64()
                    .ok_or_else(|| anyhow!("entry {i}: bad qsl_idx"))?,
                data: field("data")?
                    .as_str()
                    .ok_or_else(|| anyhow!("entry {i}: bad data"))?
                    .to_string(),
                token_data: match entry.get("token_data") {
                    None => None,
                    Some(v) => Some(
                        v.as_str()
                            .ok_or_else(|| anyhow!("entry {i}: bad token_data"))?
                            .to_string(),
                    ),
                },
                token_count: match entry.get("token_count") {
                    None => None,
                    Some(v) => Some(
                        v.as_i64()
                            .ok_or_else(|| anyhow!("entry {i}: bad token_count"))?,
                    ),
                },
            })
        })
        .collect()
}

/// Parses an issued-sample record: one QSL index per line.
pub fn parse_issued(text: &str) -> Result<Vec<u64>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            l.trim()
                .parse::<u64>()
                .with_context(|| format!("line {}: {l:?} is not an index", i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_drop_values_and_keep_layout() {
        let text = "SUT name : null-sut\nResult is : VALID\n  Early stopping satisfied: Yes\n\
                    Recommendations:\n * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.\n\
                    Samples per second: 4.88863e+07\n\nNo errors encountered during test.\n\n";
        assert_eq!(
            summary_labels(text),
            vec![
                "SUT name",
                "Result is",
                "  Early stopping satisfied",
                "Recommendations",
                " * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.",
                "Samples per second",
                "",
                "No errors encountered during test.",
            ]
        );
        assert_eq!(
            summary_value(text, "Samples per second").as_deref(),
            Some("4.88863e+07")
        );
        assert_eq!(summary_value(text, "Result is").as_deref(), Some("VALID"));
    }

    #[test]
    fn detail_lines_parse() {
        let text = ":::MLLOG {\"key\": \"generated_query_count\", \"value\": 2068, \"time_ms\": 1.0}\nnoise\n\
                    :::MLLOG {\"key\": \"loaded_qsl_set\", \"value\": [3,1,2], \"time_ms\": 1.0}\n";
        let detail = parse_detail(text).unwrap();
        assert_eq!(detail.len(), 2);
        assert_eq!(
            detail_value(&detail, "generated_query_count"),
            Some(&Value::from(2068))
        );
        assert_eq!(
            detail_values(&detail, "loaded_qsl_set")[0],
            &serde_json::json!([3, 1, 2])
        );
    }

    #[test]
    fn accuracy_and_issued_parse() {
        let acc = "[\n{ \"seq_id\" : 0, \"qsl_idx\" : 216, \"data\" : \"D8000000\" },\n\
                   { \"seq_id\" : 1, \"qsl_idx\" : 3543, \"data\" : \"D70D0000\", \"token_data\" : \"AB\", \"token_count\" : 9 }\n]\n";
        let entries = parse_accuracy(acc).unwrap();
        assert_eq!(
            entries[1],
            AccuracyEntry {
                seq_id: 1,
                qsl_idx: 3543,
                data: "D70D0000".into(),
                token_data: Some("AB".into()),
                token_count: Some(9),
            }
        );
        assert_eq!(
            (entries[0].token_data.as_deref(), entries[0].token_count),
            (None, None)
        );
        assert!(parse_accuracy("[\n]\n").unwrap().is_empty());
        assert_eq!(parse_issued("5\n7\n").unwrap(), vec![5, 7]);
    }
}
