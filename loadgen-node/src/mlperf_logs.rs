//! The files a LoadGen run writes, read the one way every part of netdiv
//! reads them (the report, a run's verdict, its record, the audit, the
//! tests): `mlperf_log_summary.txt` as the official LoadGen lays it out,
//! the `:::MLLOG` lines of `mlperf_log_detail.txt`, the per-sample events
//! of `mlperf_log_trace.json`, and `mlperf_log_accuracy.json`. Both
//! engines write the same layout. A garbled file is an error naming the
//! file, and the line where one can be named.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// The summary log's file name.
pub const SUMMARY: &str = "mlperf_log_summary.txt";
/// The `:::MLLOG` detail log's file name.
pub const DETAIL: &str = "mlperf_log_detail.txt";
/// The accuracy log's file name.
pub const ACCURACY: &str = "mlperf_log_accuracy.json";
/// The Chrome trace's file name.
pub const TRACE: &str = "mlperf_log_trace.json";

/// A log that cannot be read or is not what a LoadGen writes; the message
/// names the file (and the line where it can).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LogError(String);

macro_rules! log_error {
    ($($arg:tt)*) => { LogError(format!($($arg)*)) };
}

/// The text of `name` in the run folder `dir`.
pub fn read_log(dir: &Path, name: &str) -> Result<String, LogError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|e| log_error!("cannot read {}: {e}", path.display()))
}

/// A summary line's label and value: either side of its first `:`,
/// trimmed; `None` for a line without a label.
fn key_value(line: &str) -> Option<(String, String)> {
    let (k, v) = line.split_once(':')?;
    let k = k.trim();
    (!k.is_empty()).then(|| (k.to_string(), v.trim().to_string()))
}

/// The value of the first summary line whose label is `label` (e.g.
/// `"Samples per second"`, `"Result is"`), in a summary's text, finished
/// or not.
pub fn summary_value(text: &str, label: &str) -> Option<String> {
    text.lines()
        .filter_map(key_value)
        .find_map(|(k, v)| (k == label).then_some(v))
}

/// Whether a summary's text says `Result is : VALID` (a run that did not
/// finish says neither).
pub fn says_valid(text: &str) -> bool {
    summary_value(text, "Result is").as_deref() == Some("VALID")
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
/// Two engines' summaries of the same test have the same labels.
pub fn summary_labels(text: &str) -> Vec<String> {
    let mut labels: Vec<String> = text.lines().map(summary_label).collect();
    while labels.last().is_some_and(|l| l.is_empty()) {
        labels.pop();
    }
    labels
}

/// Bullets (` * text`) and their continuation lines, one string each.
fn bullets<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        let t = line.trim();
        if let Some(b) = t.strip_prefix("* ") {
            out.push(b.to_string());
        } else if let Some(last) = out.last_mut() {
            last.push(' ');
            last.push_str(t);
        }
    }
    out
}

/// `mlperf_log_summary.txt`, as the official LoadGen lays it out.
#[derive(Debug, Default)]
pub struct Summary {
    /// `Result is :` — VALID or INVALID.
    pub result: String,
    /// Each `key : value` line, first occurrence.
    pub fields: HashMap<String, String>,
    /// The headline metric (the line after `Mode`), as `(label, value)`.
    pub headline: Option<(String, String)>,
    /// The constraint lines under the verdict: `(what, satisfied)`.
    pub checks: Vec<(String, bool)>,
    /// The `Recommendations:` lines, joined per bullet.
    pub recommendations: Vec<String>,
    /// Each early-stopping block: its title and its text.
    pub early_stopping: Vec<(String, String)>,
}

impl Summary {
    /// Parses the summary's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Summary, LogError> {
        let lines: Vec<&str> = text.lines().collect();
        let mut s = Summary::default();
        let result_at = lines
            .iter()
            .position(|l| l.starts_with("Result is"))
            .ok_or_else(|| {
                log_error!(
                    "{}: no \"Result is :\" line (not a LoadGen summary, or a run that did not finish)",
                    path.display()
                )
            })?;
        s.result = key_value(lines[result_at])
            .map(|(_, v)| v)
            .unwrap_or_default();
        if s.result != "VALID" && s.result != "INVALID" {
            return Err(log_error!(
                "{} line {}: \"Result is :\" says {:?}, neither VALID nor INVALID",
                path.display(),
                result_at + 1,
                s.result
            ));
        }
        for line in &lines {
            if let Some((k, v)) = key_value(line) {
                s.fields.entry(k).or_insert(v);
            }
        }
        s.headline = lines
            .iter()
            .position(|l| l.starts_with("Mode "))
            .and_then(|i| lines.get(i + 1))
            .and_then(|l| key_value(l));
        // The indented "... satisfied : Yes/NO" lines under the verdict.
        for line in lines[result_at + 1..]
            .iter()
            .take_while(|l| l.starts_with("  "))
        {
            if let Some((k, v)) = key_value(line) {
                s.checks.push((k, v == "Yes"));
            }
        }
        let block = |start: usize| {
            lines[start + 1..]
                .iter()
                .take_while(|l| !l.is_empty() && !l.starts_with("====") && !l.ends_with("Result:"))
                .copied()
        };
        for (i, line) in lines.iter().enumerate() {
            if *line == "Recommendations:" {
                s.recommendations = bullets(block(i));
            } else if line.ends_with("Early Stopping Result:") {
                let text = bullets(block(i)).join(" ");
                s.early_stopping
                    .push((line.trim_end_matches(':').to_string(), text));
            }
        }
        Ok(s)
    }

    /// The summary of the run in `dir`.
    pub fn read(dir: &Path) -> Result<Summary, LogError> {
        Summary::parse(&read_log(dir, SUMMARY)?, &dir.join(SUMMARY))
    }

    /// `Result is : VALID`.
    pub fn valid(&self) -> bool {
        self.result == "VALID"
    }

    /// The value of the first line labelled `label`.
    pub fn value(&self, label: &str) -> Option<&str> {
        self.fields.get(label).map(String::as_str)
    }

    /// The value of the first line labelled `label`, as a number.
    pub fn number(&self, label: &str) -> Option<f64> {
        self.value(label)?.parse().ok()
    }

    /// The scenario line (`Server`, `Offline`, ...).
    pub fn scenario(&self) -> &str {
        self.fields.get("Scenario").map_or("", String::as_str)
    }
}

/// `mlperf_log_detail.txt`: each `:::MLLOG` entry's key and value.
#[derive(Debug, Default)]
pub struct Detail {
    entries: Vec<(String, Value)>,
}

impl Detail {
    /// Parses the detail log; a line that is not `:::MLLOG {json}` with a
    /// key is an error naming its line.
    pub fn parse(text: &str, path: &Path) -> Result<Detail, LogError> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = || format!("{} line {}", path.display(), i + 1);
            let json = line
                .strip_prefix(":::MLLOG ")
                .ok_or_else(|| log_error!("{}: not a \":::MLLOG {{json}}\" line", at()))?;
            let mut entry: Value = serde_json::from_str(json)
                .map_err(|e| log_error!("{}: garbled :::MLLOG entry: {e}", at()))?;
            let key = entry["key"]
                .as_str()
                .ok_or_else(|| log_error!("{}: :::MLLOG entry without a \"key\"", at()))?
                .to_string();
            let value = entry.get_mut("value").map_or(Value::Null, Value::take);
            entries.push((key, value));
        }
        if entries.is_empty() {
            return Err(log_error!("{}: no :::MLLOG entries", path.display()));
        }
        Ok(Detail { entries })
    }

    /// The detail log of the run in `dir`.
    pub fn read(dir: &Path) -> Result<Detail, LogError> {
        Detail::parse(&read_log(dir, DETAIL)?, &dir.join(DETAIL))
    }

    /// Every `(key, value)` entry, in order.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    /// Every value of `key`, in order.
    pub fn values(&self, key: &str) -> Vec<&Value> {
        self.entries
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v)
            .collect()
    }

    /// The first value of `key`.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The first value of `key` as a number.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.value(key).and_then(Value::as_f64)
    }

    /// Every value of `key`, as text (errors and warnings repeat).
    pub fn texts(&self, key: &str) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect()
    }

    /// `(percentile, value)` of every key `{prefix}{pct}{suffix}`, sorted.
    pub fn percentiles(&self, prefix: &str, suffix: &str) -> Vec<(f64, f64)> {
        let mut out: Vec<(f64, f64)> = self
            .entries
            .iter()
            .filter_map(|(k, v)| {
                let pct = k.strip_prefix(prefix)?.strip_suffix(suffix)?;
                Some((pct.parse().ok()?, v.as_f64()?))
            })
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }
}

/// One sample as the trace shows it; times in ns from the test's origin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceSample {
    /// The sequence number of its query.
    pub query_seq: u64,
    /// When its query was scheduled.
    pub scheduled_ns: f64,
    /// Scheduled until completed.
    pub latency_ns: f64,
    /// Scheduled until its first token (token models).
    pub first_token_ns: Option<f64>,
}

/// The per-sample part of `mlperf_log_trace.json`.
#[derive(Debug, Default)]
pub struct Trace {
    /// Every sample traced, in the order of its events.
    pub samples: Vec<TraceSample>,
    /// Why there are no samples, when there are none.
    pub missing: Option<String>,
}

#[derive(Deserialize)]
struct TraceFile {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<TraceEvent>,
}

#[derive(Deserialize)]
struct TraceEvent {
    #[serde(default)]
    name: String,
    #[serde(default)]
    ph: String,
    ts: Option<f64>,
    id: Option<u64>,
    #[serde(default)]
    args: TraceArgs,
}

#[derive(Default, Deserialize)]
struct TraceArgs {
    query_seq: Option<u64>,
    complete_ns: Option<f64>,
    issue_delay: Option<f64>,
    issue_to_done: Option<f64>,
}

impl Trace {
    /// Parses the trace; an empty file is a trace without samples.
    pub fn parse(text: &str, path: &Path) -> Result<Trace, LogError> {
        if text.trim().is_empty() {
            return Ok(Trace {
                samples: Vec::new(),
                missing: Some(format!(
                    "{} is empty (a --no-trace run, or a LoadGen that did not trace)",
                    path.display()
                )),
            });
        }
        let file: TraceFile = serde_json::from_str(text).map_err(|e| garbled(path, "trace", &e))?;
        let mut samples: Vec<TraceSample> = Vec::new();
        // Token events name their sample by id; Server's Token_Latency
        // counter follows its sample's event.
        let mut by_id: HashMap<u64, usize> = HashMap::new();
        for event in &file.trace_events {
            let a = &event.args;
            match (event.name.as_str(), event.ph.as_str()) {
                ("Sample", "b") => {
                    let (Some(ts), Some(done)) = (event.ts, a.complete_ns) else {
                        continue;
                    };
                    if let Some(id) = event.id {
                        by_id.insert(id, samples.len());
                    }
                    samples.push(TraceSample {
                        query_seq: a.query_seq.unwrap_or(0),
                        scheduled_ns: ts * 1e3,
                        latency_ns: done,
                        first_token_ns: None,
                    });
                }
                ("Token", "b") => {
                    let at = event.id.and_then(|id| by_id.get(&id));
                    if let (Some(&i), Some(done)) = (at, a.complete_ns) {
                        samples[i].first_token_ns = Some(done);
                    }
                }
                ("Token_Latency", "C") => {
                    if let (Some(last), Some(delay), Some(done)) =
                        (samples.last_mut(), a.issue_delay, a.issue_to_done)
                    {
                        last.first_token_ns = Some(delay + done);
                    }
                }
                _ => {}
            }
        }
        let missing = samples.is_empty().then(|| {
            format!(
                "{} holds no per-sample events (the official LoadGen traces only some)",
                path.display()
            )
        });
        Ok(Trace { samples, missing })
    }
}

/// One response in `mlperf_log_accuracy.json`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
pub struct AccuracyEntry {
    /// The QSL index of the sample answered.
    pub qsl_idx: u64,
    /// The response's bytes, in hex.
    pub data: String,
    /// The order of the response in the log.
    pub seq_id: u64,
    /// Token models outside Offline: the first token's bytes (hex).
    #[serde(default)]
    pub token_data: Option<String>,
    /// Token models: `n_tokens` of the completion.
    #[serde(default)]
    pub token_count: Option<i64>,
}

/// `mlperf_log_accuracy.json`: a JSON array of `{"seq_id", "qsl_idx",
/// "data"}` objects, with `token_data` and `token_count` for token models.
pub fn parse_accuracy(text: &str, path: &Path) -> Result<Vec<AccuracyEntry>, LogError> {
    serde_json::from_str(text).map_err(|e| garbled(path, "accuracy log", &e))
}

/// How many responses the accuracy log holds; it must be a JSON array.
pub fn accuracy_count(text: &str, path: &Path) -> Result<usize, LogError> {
    let entries: Vec<serde::de::IgnoredAny> =
        serde_json::from_str(text).map_err(|e| garbled(path, "accuracy log", &e))?;
    Ok(entries.len())
}

/// A JSON log that does not parse, named with the line and column.
fn garbled(path: &Path, what: &str, e: &serde_json::Error) -> LogError {
    log_error!(
        "{} line {} column {}: garbled {what}: {e}",
        path.display(),
        e.line(),
        e.column()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMMARY_TEXT: &str = "================================================\nMLPerf Results Summary\n================================================\nSUT name : x\nScenario : Server\nMode     : PerformanceOnly\nCompleted samples per second    : 590.12\nResult is : INVALID\n  Performance constraints satisfied : Yes\n  Min duration satisfied : NO\n  Min queries satisfied : Yes\n  Early stopping satisfied: NO\nRecommendations:\n * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.\nEarly Stopping Result:\n * Run unsuccessful.\n * Would need to run at least 515 more queries,\n with the run being successful if every additional\n query were under latency.\n\n================================================\nAdditional Stats\n================================================\n";

    #[test]
    fn the_summary_gives_verdict_checks_and_reasons() {
        let s = Summary::parse(SUMMARY_TEXT, Path::new("s.txt")).unwrap();
        assert_eq!(s.result, "INVALID");
        assert_eq!(s.scenario(), "Server");
        assert_eq!(
            s.headline,
            Some(("Completed samples per second".into(), "590.12".into()))
        );
        assert_eq!(s.checks.len(), 4);
        assert_eq!(s.checks[1], ("Min duration satisfied".into(), false));
        assert_eq!(s.recommendations.len(), 1);
        assert_eq!(s.early_stopping.len(), 1);
        assert!(s.early_stopping[0]
            .1
            .ends_with("if every additional query were under latency."));
        let err = Summary::parse("hello\n", Path::new("s.txt")).unwrap_err();
        assert!(err.to_string().contains("s.txt: no \"Result is :\" line"));
    }

    #[test]
    fn a_garbled_detail_line_is_named() {
        let text = ":::MLLOG {\"key\": \"a\", \"value\": 1}\n:::MLLOG {\"key\": \"b\", \"val\n";
        let err = Detail::parse(text, Path::new("d.txt")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("d.txt line 2: garbled :::MLLOG entry: "),
            "{err}"
        );
        let d = Detail::parse(
            ":::MLLOG {\"key\": \"result_50.00_percentile_latency_ns\", \"value\": 5}\n:::MLLOG {\"key\": \"result_99.00_percentile_latency_ns\", \"value\": 9}\n",
            Path::new("d.txt"),
        )
        .unwrap();
        assert_eq!(
            d.percentiles("result_", "_percentile_latency_ns"),
            vec![(50.0, 5.0), (99.0, 9.0)]
        );
    }

    #[test]
    fn trace_samples_and_first_tokens() {
        let text = "{\"traceEvents\":[\n{\"name\":\"Sample\",\"cat\":\"default\",\"ph\":\"b\",\"pid\":1,\"id\":7,\"ts\":10.000,\"args\":{\"sample_seq\":7,\"query_seq\":3,\"sample_idx\":1,\"issue_start_ns\":5,\"complete_ns\":2000}},\n{\"name\":\"Sample\",\"cat\":\"default\",\"ph\":\"e\", \"pid\":1,\"id\":7,\"ts\":12.000},\n{\"name\":\"Token_Latency\",\"ph\": \"C\",\"pid\":1,\"ts\":10.000,\"args\":{ \"issue_delay\":5,\"issue_to_done\":995}},\n{\"name\":\"LastTrace\"}\n]}\n";
        let t = Trace::parse(text, Path::new("t.json")).unwrap();
        assert_eq!(
            t.samples,
            vec![TraceSample {
                query_seq: 3,
                scheduled_ns: 10_000.0,
                latency_ns: 2000.0,
                first_token_ns: Some(1000.0)
            }]
        );
        let err = Trace::parse("{\"traceEvents\":[\n{\"name\":}", Path::new("t.json")).unwrap_err();
        assert!(err.to_string().starts_with("t.json line 2 column"), "{err}");
        assert!(Trace::parse("", Path::new("t.json"))
            .unwrap()
            .missing
            .is_some());
    }

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
        assert!(says_valid(text) && !says_valid("Result is : INVALID\n") && !says_valid(""));
        let s = Summary::parse(text, Path::new("s.txt")).unwrap();
        assert!(s.valid());
        assert_eq!(s.number("Samples per second"), Some(4.88863e7));
    }

    #[test]
    fn accuracy_entries_parse_and_garbled_ones_are_named() {
        let acc = "[\n{ \"seq_id\" : 0, \"qsl_idx\" : 216, \"data\" : \"D8000000\" },\n\
                   { \"seq_id\" : 1, \"qsl_idx\" : 3543, \"data\" : \"D70D0000\", \"token_data\" : \"AB\", \"token_count\" : 9 }\n]\n";
        let entries = parse_accuracy(acc, Path::new("a.json")).unwrap();
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
        assert_eq!(accuracy_count(acc, Path::new("a.json")).unwrap(), 2);
        assert!(parse_accuracy("[\n]\n", Path::new("a.json"))
            .unwrap()
            .is_empty());
        let err = parse_accuracy("[\n{ \"seq_id\": 0 }\n]", Path::new("a.json")).unwrap_err();
        assert!(err.to_string().starts_with("a.json line 2 column"), "{err}");
    }
}
