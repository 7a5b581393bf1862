//! Reading a run folder for the report: the four MLPerf logs and netdiv's
//! run record, each parsed into what the report shows. A missing or
//! garbled file is an error naming the file (and the line where one can
//! be named); a file the run may legitimately leave empty (the trace with
//! `--no-trace`, or under the official LoadGen) is not.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use loadgen_node::run_record::RunRecord;
use serde::Deserialize;
use serde_json::Value;

/// The log files a run folder holds.
pub(crate) const SUMMARY: &str = "mlperf_log_summary.txt";
/// The `:::MLLOG` detail log.
pub(crate) const DETAIL: &str = "mlperf_log_detail.txt";
/// The accuracy log.
pub(crate) const ACCURACY: &str = "mlperf_log_accuracy.json";
/// The Chrome trace.
pub(crate) const TRACE: &str = "mlperf_log_trace.json";

/// Everything the report is made from.
pub(crate) struct RunLogs {
    /// The folder read.
    pub(crate) dir: PathBuf,
    pub(crate) summary: Summary,
    pub(crate) detail: Detail,
    /// Responses in the accuracy log.
    pub(crate) accuracy_entries: usize,
    pub(crate) trace: Trace,
    /// `netdiv_run.json`, for network runs.
    pub(crate) record: Option<RunRecord>,
}

/// `mlperf_log_summary.txt`, as the official LoadGen lays it out.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    /// `Result is :` — VALID or INVALID.
    pub(crate) result: String,
    /// Each `key : value` line, first occurrence.
    pub(crate) fields: HashMap<String, String>,
    /// The headline metric (the line after `Mode`), as `(label, value)`.
    pub(crate) headline: Option<(String, String)>,
    /// The constraint lines under the verdict: `(what, satisfied)`.
    pub(crate) checks: Vec<(String, bool)>,
    /// The `Recommendations:` lines, joined per bullet.
    pub(crate) recommendations: Vec<String>,
    /// Each early-stopping block: its title and its text.
    pub(crate) early_stopping: Vec<(String, String)>,
}

fn key_value(line: &str) -> Option<(String, String)> {
    let (k, v) = line.split_once(':')?;
    let k = k.trim();
    (!k.is_empty()).then(|| (k.to_string(), v.trim().to_string()))
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

impl Summary {
    /// Parses the summary's text; `path` names it in errors.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Summary> {
        let lines: Vec<&str> = text.lines().collect();
        let mut s = Summary::default();
        let result_at = lines
            .iter()
            .position(|l| l.starts_with("Result is"))
            .with_context(|| {
                format!(
                    "{}: no \"Result is :\" line (not a LoadGen summary, or a run that did not finish)",
                    path.display()
                )
            })?;
        s.result = key_value(lines[result_at])
            .map(|(_, v)| v)
            .unwrap_or_default();
        if s.result != "VALID" && s.result != "INVALID" {
            bail!(
                "{} line {}: \"Result is :\" says {:?}, neither VALID nor INVALID",
                path.display(),
                result_at + 1,
                s.result
            );
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

    /// The scenario line (`Server`, `Offline`, ...).
    pub(crate) fn scenario(&self) -> &str {
        self.fields.get("Scenario").map_or("", String::as_str)
    }
}

/// `mlperf_log_detail.txt`: each `:::MLLOG` entry's key and value.
#[derive(Debug, Default)]
pub(crate) struct Detail {
    entries: Vec<(String, Value)>,
}

impl Detail {
    /// Parses the detail log; a line that is not `:::MLLOG {json}` with a
    /// key is an error naming its line.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Detail> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = || format!("{} line {}", path.display(), i + 1);
            let json = line
                .strip_prefix(":::MLLOG ")
                .with_context(|| format!("{}: not a \":::MLLOG {{json}}\" line", at()))?;
            let entry: Value = serde_json::from_str(json)
                .with_context(|| format!("{}: garbled :::MLLOG entry", at()))?;
            let key = entry["key"]
                .as_str()
                .with_context(|| format!("{}: :::MLLOG entry without a \"key\"", at()))?;
            entries.push((key.to_string(), entry["value"].clone()));
        }
        if entries.is_empty() {
            bail!("{}: no :::MLLOG entries", path.display());
        }
        Ok(Detail { entries })
    }

    /// The first value of `key`.
    pub(crate) fn value(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The first value of `key` as a number.
    pub(crate) fn number(&self, key: &str) -> Option<f64> {
        self.value(key).and_then(Value::as_f64)
    }

    /// Every value of `key`, as text (errors and warnings repeat).
    pub(crate) fn texts(&self, key: &str) -> Vec<String> {
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
    pub(crate) fn percentiles(&self, prefix: &str, suffix: &str) -> Vec<(f64, f64)> {
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
pub(crate) struct TraceSample {
    pub(crate) query_seq: u64,
    /// When its query was scheduled.
    pub(crate) scheduled_ns: f64,
    /// Scheduled until completed.
    pub(crate) latency_ns: f64,
    /// Scheduled until its first token (token models).
    pub(crate) first_token_ns: Option<f64>,
}

/// The per-sample part of `mlperf_log_trace.json`.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    pub(crate) samples: Vec<TraceSample>,
    /// Why there are no samples, when there are none.
    pub(crate) missing: Option<String>,
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
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Trace> {
        if text.trim().is_empty() {
            return Ok(Trace {
                samples: Vec::new(),
                missing: Some(format!(
                    "{} is empty (a --no-trace run, or a LoadGen that did not trace)",
                    path.display()
                )),
            });
        }
        let file: TraceFile = serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{} line {} column {}: garbled trace: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
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

fn read(dir: &Path, name: &str) -> Result<(String, PathBuf)> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok((text, path))
}

/// Counts the accuracy log's entries; it must be a JSON array.
fn accuracy_entries(text: &str, path: &Path) -> Result<usize> {
    let entries: Vec<serde::de::IgnoredAny> = serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "{} line {} column {}: garbled accuracy log: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    Ok(entries.len())
}

/// Reads and parses every log of the run in `dir`.
pub(crate) fn read_run(dir: &Path) -> Result<RunLogs> {
    let (text, path) = read(dir, SUMMARY)?;
    let summary = Summary::parse(&text, &path)?;
    let (text, path) = read(dir, DETAIL)?;
    let detail = Detail::parse(&text, &path)?;
    let (text, path) = read(dir, ACCURACY)?;
    let accuracy_entries = accuracy_entries(&text, &path)?;
    let (text, path) = read(dir, TRACE)?;
    let trace = Trace::parse(&text, &path)?;
    let record = RunRecord::read_in(dir)?;
    Ok(RunLogs {
        dir: dir.to_path_buf(),
        summary,
        detail,
        accuracy_entries,
        trace,
        record,
    })
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
        assert_eq!(
            format!("{err}"),
            "d.txt line 2: garbled :::MLLOG entry",
            "{err:#}"
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
}
