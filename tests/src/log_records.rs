//! The structured log records netdiv's binaries write with
//! `--log-format json` (one JSON object per line on stderr): tests check
//! their fields, not the wording of human messages.

use serde_json::Value;

/// Every line of `stderr` that is a JSON object, in order; other lines
/// (a final plain error message) are skipped.
pub fn parse(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(Value::is_object)
        .collect()
}

/// The records whose `event` field is `event`.
pub fn with_event<'a>(records: &'a [Value], event: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["event"] == event).collect()
}
