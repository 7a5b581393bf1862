//! Conformance: netdiv's `loadgen-node` against the official MLPerf LoadGen.
//!
//! Every case runs both engines (null SUT, synthetic QSL) with identical
//! flags, mlperf.conf and user.conf, then compares what must not depend on
//! timing:
//! * the detail log's `loaded_qsl_set`, `generated_query_count`,
//!   `generated_query_duration` and `generated_samples_per_query` (every
//!   occurrence, in order: accuracy runs log one per loadable set);
//! * every `requested_*` / `effective_*` setting and the QSL counts;
//! * the issued sample sequence (`--record-issued`);
//! * the accuracy log as a multiset of `(qsl_idx, data)`;
//! * `early_stopping_result` with the latency estimates masked;
//! * the summary's labels, in order (values dropped; the warnings-count
//!   line is normalised, see [`normalise_label`]).
//!
//! The settings make the issued query count deterministic, so the issued
//! sequence and the early-stopping text ("Processed at least H queries (M)",
//! "Would discard K") compare exactly: SingleStream/MultiStream use
//! `min_duration = 0`, so exactly `min_query_count` queries are generated
//! and the run ends naturally after the last one however fast the engine
//! issues them (a duration bound would race the engine's speed); Server
//! issues every generated query by construction; Offline issues one query. Validity is not
//! compared as such, but these settings make it deterministic (Server: VALID
//! as long as the 1 s / 99th percentile bound holds at 4000 QPS), so the
//! label comparison covers the VALID/INVALID layouts too.
//!
//! Mismatches of a case are collected and reported together; the run
//! directories of a failed case are kept (path in the message).

use std::fmt::{self, Debug, Write as _};
use std::time::Instant;

use netdiv_tests::engines::{run_both, RunOutput, RunSpec};
use netdiv_tests::mlperf_logs::{summary_labels, summary_value, AccuracyEntry, Detail};
use netdiv_tests::text::clip;
use netdiv_tests::{test_dir, write_file};
use serde_json::Value;

const SINGLE_STREAM: &str = "\
*.SingleStream.min_duration = 0
*.SingleStream.min_query_count = 20000
";
const MULTI_STREAM: &str = "\
*.MultiStream.min_duration = 0
*.MultiStream.min_query_count = 4000
";
/// A 1 s latency bound keeps both engines VALID even when CI runs other
/// heavy tests (release builds) beside this one.
const SERVER: &str = "\
*.Server.target_qps = 4000
*.Server.min_duration = 500
*.Server.min_query_count = 100
*.Server.target_latency = 1000
";
/// 110000 samples in one query: the null SUT answers in milliseconds, so
/// both engines are INVALID (min duration) for the same reason.
const OFFLINE: &str = "\
*.Offline.target_qps = 100000
*.Offline.min_duration = 1000
";
/// An mlperf.conf with nothing but seeds (so everything else falls back to
/// the TestSettings defaults). The qsl seed does not fit in 32 bits.
const SEEDS_ONLY_MLPERF_CONF: &str = "\
# netdiv conformance: custom seeds only
*.*.qsl_rng_seed = 12345678901234567890
*.*.sample_index_rng_seed = 42
*.*.schedule_rng_seed = 7
";

struct Case {
    name: &'static str,
    scenario: &'static str,
    mode: &'static str,
    total: u64,
    performance: u64,
    user_conf: String,
    mlperf_conf: Option<&'static str>,
    model: Option<&'static str>,
    output_tokens: Option<i64>,
    errors_expected: bool,
    round: Option<&'static str>,
}

impl Case {
    fn new(
        name: &'static str,
        scenario: &'static str,
        mode: &'static str,
        total: u64,
        performance: u64,
        user_conf: &str,
    ) -> Self {
        Case {
            name,
            scenario,
            mode,
            total,
            performance,
            user_conf: user_conf.to_string(),
            mlperf_conf: None,
            model: None,
            output_tokens: None,
            errors_expected: false,
            round: None,
        }
    }

    /// Another round: the official driver of that round's LoadGen, and
    /// `--round` for ours.
    fn round(mut self, round: &'static str) -> Self {
        self.round = Some(round);
        self
    }

    /// The SUT breaks a rule, so both engines log runtime errors.
    fn errors_expected(mut self) -> Self {
        self.errors_expected = true;
        self
    }

    /// A token model: the null SUTs send first tokens and complete with
    /// `n` tokens.
    fn output_tokens(mut self, n: i64) -> Self {
        self.output_tokens = Some(n);
        self
    }

    fn with_user_conf(mut self, extra: &str) -> Self {
        self.user_conf.push_str(extra);
        self
    }

    fn mlperf_conf(mut self, text: &'static str) -> Self {
        self.mlperf_conf = Some(text);
        self
    }

    fn model(mut self, model: &'static str) -> Self {
        self.model = Some(model);
        self
    }

    fn check(self) {
        let started = Instant::now();
        let dir = test_dir(self.name).expect("test dir");
        let user_conf = write_file(&dir, "user.conf", &self.user_conf).expect("user.conf");
        let mut spec = RunSpec::new(self.scenario, self.mode, self.total, self.performance)
            .user_conf(user_conf);
        if let Some(text) = self.mlperf_conf {
            spec = spec.mlperf_conf(write_file(&dir, "mlperf.conf", text).expect("mlperf.conf"));
        }
        if let Some(model) = self.model {
            spec = spec.model(model);
        }
        if let Some(n) = self.output_tokens {
            spec = spec.null_output_tokens(n);
        }
        spec = spec.errors_expected(self.errors_expected);
        if let Some(round) = self.round {
            spec = spec.round(round);
        }
        let (official, ours) = match run_both(&spec, &dir) {
            Ok(pair) => pair,
            Err(e) => panic!(
                "case {}: a run failed (files kept in {}):\n{e:#}",
                self.name,
                dir.keep().display()
            ),
        };
        let mut report = Report::default();
        if let Err(e) = compare(&mut report, &official, &ours) {
            report.add("reading the outputs", format!("{e:#}"));
        }
        println!(
            "case {}: official {:.2}s, ours {:.2}s, case total {:.2}s",
            self.name,
            official.wall.as_secs_f64(),
            ours.wall.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        // The directory goes with `dir` unless the case failed.
        if !report.items.is_empty() {
            panic!(
                "case {}: {} comparison(s) differ (official vs ours; run files kept in {}):\n{report}",
                self.name,
                report.items.len(),
                dir.keep().display()
            );
        }
    }
}

#[derive(Default)]
struct Report {
    items: Vec<(String, String)>,
}

impl Report {
    fn add(&mut self, what: impl Into<String>, details: impl Into<String>) {
        self.items.push((what.into(), details.into()));
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, details) in &self.items {
            writeln!(f, "--- {what}")?;
            for line in details.lines() {
                writeln!(f, "    {line}")?;
            }
        }
        Ok(())
    }
}

/// Keys whose every occurrence must match, in order.
const GENERATED_KEYS: [&str; 4] = [
    "loaded_qsl_set",
    "generated_query_count",
    "generated_query_duration",
    "generated_samples_per_query",
];

fn is_settings_key(key: &str) -> bool {
    key.starts_with("requested_")
        || key.starts_with("effective_")
        || key == "qsl_reported_total_count"
        || key == "qsl_reported_performance_count"
}

fn compare(report: &mut Report, official: &RunOutput, ours: &RunOutput) -> anyhow::Result<()> {
    let official_detail = official.detail()?;
    let ours_detail = ours.detail()?;

    // 1. What LoadGen generated and loaded.
    for key in GENERATED_KEYS {
        let a = official_detail.values(key);
        let b = ours_detail.values(key);
        if a.len() != b.len() {
            report.add(
                format!("detail `{key}`: number of occurrences"),
                format!("official {} vs ours {}", a.len(), b.len()),
            );
        }
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            if x != y {
                report.add(
                    format!("detail `{key}` (occurrence {})", i + 1),
                    diff_values(x, y),
                );
            }
        }
    }

    // 2. Settings as logged.
    let mut seen = Vec::new();
    for (key, _) in official_detail
        .entries()
        .iter()
        .filter(|(k, _)| is_settings_key(k))
    {
        if seen.contains(key) {
            continue;
        }
        seen.push(key.clone());
        let a = official_detail.values(key);
        let b = ours_detail.values(key);
        if b.is_empty() {
            report.add(
                format!("detail `{key}`"),
                format!(
                    "missing in ours (official: {})",
                    clip(&a[0].to_string(), 200)
                ),
            );
        } else if a != b {
            report.add(format!("detail `{key}`"), diff_values_list(&a, &b));
        }
    }
    let extra: Vec<&String> = ours_detail
        .entries()
        .iter()
        .map(|(k, _)| k)
        .filter(|k| is_settings_key(k) && official_detail.value(k).is_none())
        .collect();
    if !extra.is_empty() {
        report.add("detail settings keys only ours logs", format!("{extra:?}"));
    }

    // 3. Early stopping text, latency estimates masked (token models
    // have one for TTFT and one for TPOT).
    for key in [
        "early_stopping_result",
        "early_stopping_ttft_result",
        "early_stopping_tpot_result",
    ] {
        let a: Vec<String> = official_detail
            .values(key)
            .iter()
            .map(|v| mask_estimates(&text_of(v)))
            .collect();
        let b: Vec<String> = ours_detail
            .values(key)
            .iter()
            .map(|v| mask_estimates(&text_of(v)))
            .collect();
        if a != b {
            report.add(
                format!("detail `{key}` (estimates masked)"),
                format!("official: {a:?}\nours:     {b:?}"),
            );
        }
    }

    // 3b. The verdict, the result keys logged, and the runtime errors.
    for key in ["result_validity", "early_stopping_met"] {
        let a = official_detail.values(key);
        let b = ours_detail.values(key);
        if a != b {
            report.add(format!("detail `{key}`"), diff_values_list(&a, &b));
        }
    }
    let result_keys = |detail: &Detail| -> Vec<String> {
        let mut keys: Vec<String> = detail
            .entries()
            .iter()
            .map(|(k, _)| k.clone())
            .filter(|k| k.starts_with("result_") || k.starts_with("early_stopping_"))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    };
    let (a, b) = (result_keys(&official_detail), result_keys(&ours_detail));
    if a != b {
        report.add(
            "the set of result keys (- official, + ours)",
            diff_lines(&a, &b),
        );
    }
    let errors = |detail: &Detail| -> Vec<String> {
        let mut errors: Vec<String> = detail
            .values("error_runtime")
            .iter()
            .map(|v| text_of(v))
            .collect();
        errors.sort();
        errors
    };
    let (a, b) = (errors(&official_detail), errors(&ours_detail));
    if a != b {
        report.add(
            "`error_runtime` lines (sorted; - official, + ours)",
            diff_lines(&a, &b),
        );
    }

    // 4. Issued sample sequence.
    let a = official.issued()?;
    let b = ours.issued()?;
    if let Some(diff) = diff_seq(&a, &b) {
        report.add("issued sample sequence (--record-issued)", diff);
    }

    // 5. Accuracy log as a multiset of (qsl_idx, data), with the token
    // fields of token models.
    let key = |e: &AccuracyEntry| {
        let mut data = e.data.clone();
        if let Some(token) = &e.token_data {
            data.push_str(&format!(" token_data={token}"));
        }
        if let Some(count) = e.token_count {
            data.push_str(&format!(" token_count={count}"));
        }
        (e.qsl_idx, data)
    };
    let mut a: Vec<(u64, String)> = official.accuracy()?.iter().map(key).collect();
    let mut b: Vec<(u64, String)> = ours.accuracy()?.iter().map(key).collect();
    a.sort();
    b.sort();
    if a != b {
        report.add(
            "accuracy log entries as a multiset of (qsl_idx, data)",
            diff_multiset(&a, &b),
        );
    }

    // 6. Summary labels in order.
    let official_summary = official.summary()?;
    let ours_summary = ours.summary()?;
    let a: Vec<String> = summary_labels(&official_summary)
        .iter()
        .map(|l| normalise_label(l))
        .collect();
    let b: Vec<String> = summary_labels(&ours_summary)
        .iter()
        .map(|l| normalise_label(l))
        .collect();
    if a != b {
        let validity = |s: &str| summary_value(s, "Result is").unwrap_or_else(|| "-".into());
        report.add(
            format!(
                "summary labels (Result is: official {}, ours {}; - official, + ours)",
                validity(&official_summary),
                validity(&ours_summary)
            ),
            diff_lines(&a, &b),
        );
    }
    Ok(())
}

fn text_of(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string())
}

/// Replaces the number after each `estimate: ` with `<N>`: the only part of
/// the early-stopping text that depends on measured latencies here.
fn mask_estimates(text: &str) -> String {
    const MARK: &str = "estimate: ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(MARK) {
        out.push_str(&rest[..i + MARK.len()]);
        rest = &rest[i + MARK.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e')))
            .unwrap_or(rest.len());
        out.push_str("<N>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The official logger adds warnings of its own ("CAS failed.", "Logging
/// allocation detected: ...") whose count depends on thread timing and its
/// buffer sizes, so the summary line that counts warnings is compared only as
/// "a warnings line". Everything else is compared verbatim.
fn normalise_label(label: &str) -> String {
    let is_warnings_line = label == "No warnings encountered during test."
        || label.ends_with(" warning encountered. See detailed log.")
        || label.ends_with(" warnings encountered. See detailed log.");
    if is_warnings_line {
        "<warnings count line>".to_string()
    } else {
        label.to_string()
    }
}

fn as_u64_list(value: &Value) -> Option<Vec<u64>> {
    value.as_array()?.iter().map(Value::as_u64).collect()
}

fn diff_values(a: &Value, b: &Value) -> String {
    if let (Some(x), Some(y)) = (as_u64_list(a), as_u64_list(b)) {
        return diff_seq(&x, &y).unwrap_or_default();
    }
    format!(
        "official: {}\nours:     {}",
        clip(&a.to_string(), 300),
        clip(&b.to_string(), 300)
    )
}

fn diff_values_list(a: &[&Value], b: &[&Value]) -> String {
    let show = |v: &[&Value]| {
        v.iter()
            .map(|x| clip(&x.to_string(), 200))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("official: {}\nours:     {}", show(a), show(b))
}

/// Lengths, the first differing index and a window around it.
fn diff_seq<T: PartialEq + Debug>(a: &[T], b: &[T]) -> Option<String> {
    if a == b {
        return None;
    }
    let first = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let from = first.saturating_sub(3);
    let window = |s: &[T]| format!("{:?}", &s[from.min(s.len())..(first + 6).min(s.len())]);
    let mismatches = a.iter().zip(b).filter(|(x, y)| x != y).count();
    Some(format!(
        "lengths: official {}, ours {}; {mismatches} differing positions in the common prefix; first difference at index {first}\n\
         official[{from}..]: {}\nours[{from}..]:     {}",
        a.len(),
        b.len(),
        window(a),
        window(b)
    ))
}

fn diff_multiset(a: &[(u64, String)], b: &[(u64, String)]) -> String {
    // Both sorted: walk them together.
    let (mut i, mut j) = (0, 0);
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => {
                only_a.push(x);
                i += 1;
            }
            (Some(_), Some(y)) => {
                only_b.push(y);
                j += 1;
            }
            (Some(x), None) => {
                only_a.push(x);
                i += 1;
            }
            (None, Some(y)) => {
                only_b.push(y);
                j += 1;
            }
            (None, None) => unreachable!(),
        }
    }
    let first = |v: &[&(u64, String)]| format!("{:?}", &v[..v.len().min(6)]);
    format!(
        "entries: official {}, ours {}; only in official: {} (first {}), only in ours: {} (first {})",
        a.len(),
        b.len(),
        only_a.len(),
        first(&only_a),
        only_b.len(),
        first(&only_b)
    )
}

/// A line diff (longest common subsequence), `-` official, `+` ours, with
/// two lines of context around each change.
fn diff_lines(a: &[String], b: &[String]) -> String {
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', &a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            ops.push(('+', &b[j]));
            j += 1;
        } else {
            ops.push(('-', &a[i]));
            i += 1;
        }
    }
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, (c, _))| *c != ' ')
        .map(|(k, _)| k)
        .collect();
    let mut out = String::new();
    let mut last_shown: Option<usize> = None;
    for (k, (c, line)) in ops.iter().enumerate() {
        if changed.iter().any(|&x| x.abs_diff(k) <= 2) {
            if last_shown.is_some_and(|l| l + 1 != k) {
                out.push_str("  ...\n");
            }
            let _ = writeln!(out, "{c} {line:?}");
            last_shown = Some(k);
        }
    }
    out
}

#[test]
fn single_stream() {
    Case::new(
        "single_stream",
        "SingleStream",
        "PerformanceOnly",
        4096,
        1024,
        SINGLE_STREAM,
    )
    .check();
}

#[test]
fn multi_stream() {
    Case::new(
        "multi_stream",
        "MultiStream",
        "PerformanceOnly",
        4096,
        1024,
        MULTI_STREAM,
    )
    .check();
}

#[test]
fn server() {
    Case::new("server", "Server", "PerformanceOnly", 4096, 1024, SERVER).check();
}

#[test]
fn offline() {
    Case::new("offline", "Offline", "PerformanceOnly", 4096, 1024, OFFLINE).check();
}

#[test]
fn equal_issue_single_stream() {
    Case::new(
        "equal_issue_single_stream",
        "SingleStream",
        "PerformanceOnly",
        4096,
        1024,
        SINGLE_STREAM,
    )
    .with_user_conf("*.SingleStream.sample_concatenate_permutation = 1\n")
    .check();
}

#[test]
fn equal_issue_offline() {
    Case::new(
        "equal_issue_offline",
        "Offline",
        "PerformanceOnly",
        4096,
        1024,
        OFFLINE,
    )
    .with_user_conf("*.Offline.sample_concatenate_permutation = 1\n")
    .check();
}

/// 4096 samples, 1000 per loadable set: five sets (the last one partial).
#[test]
fn accuracy_single_stream_five_sets() {
    Case::new(
        "accuracy_single_stream",
        "SingleStream",
        "AccuracyOnly",
        4096,
        1000,
        SINGLE_STREAM,
    )
    .check();
}

#[test]
fn accuracy_multi_stream_five_sets() {
    Case::new(
        "accuracy_multi_stream",
        "MultiStream",
        "AccuracyOnly",
        4096,
        1000,
        MULTI_STREAM,
    )
    .check();
}

#[test]
fn accuracy_offline_five_sets() {
    Case::new(
        "accuracy_offline",
        "Offline",
        "AccuracyOnly",
        4096,
        1000,
        OFFLINE,
    )
    .check();
}

#[test]
fn submission_run_single_stream() {
    Case::new(
        "submission_run_single_stream",
        "SingleStream",
        "SubmissionRun",
        4096,
        1024,
        SINGLE_STREAM,
    )
    .check();
}

/// More than 65535 samples: libstdc++'s std::shuffle draws one random
/// number per swap instead of one per two swaps.
#[test]
fn large_qsl_single_stream() {
    Case::new(
        "large_qsl_single_stream",
        "SingleStream",
        "PerformanceOnly",
        100_000,
        70_000,
        SINGLE_STREAM,
    )
    .check();
}

/// Accuracy mode shuffles the 70000-sample set itself (and a 30000 one).
#[test]
fn large_qsl_accuracy_offline() {
    Case::new(
        "large_qsl_accuracy_offline",
        "Offline",
        "AccuracyOnly",
        100_000,
        70_000,
        OFFLINE,
    )
    .check();
}

/// TEST04 knob: each loaded sample once. 20000 loaded samples and
/// min_query_count 20000, so the run ends exactly when they are all issued.
#[test]
fn performance_issue_unique() {
    Case::new(
        "performance_issue_unique",
        "SingleStream",
        "PerformanceOnly",
        40_000,
        20_000,
        SINGLE_STREAM,
    )
    .with_user_conf("*.SingleStream.performance_issue_unique = 1\n")
    .check();
}

/// TEST04 knob: the same loaded sample (index 3 of the loaded set) every time.
#[test]
fn performance_issue_same() {
    Case::new("performance_issue_same", "SingleStream", "PerformanceOnly", 4096, 1024, SINGLE_STREAM)
        .with_user_conf("*.SingleStream.performance_issue_same = 1\n*.SingleStream.performance_issue_same_index = 3\n")
        .check();
}

/// TEST01: responses sampled into the accuracy log of a performance run by
/// the accuracy-log seed and sampling target (compared entry by entry).
#[test]
fn accuracy_log_sampling_test01() {
    Case::new(
        "accuracy_log_sampling_test01",
        "SingleStream",
        "PerformanceOnly",
        4096,
        1024,
        SINGLE_STREAM,
    )
    .with_user_conf(
        "*.*.accuracy_log_rng_seed = 720381539243781796\n*.*.accuracy_log_sampling_target = 512\n",
    )
    .check();
}

/// The same sampling in Offline, where the expected count is samples.
#[test]
fn accuracy_log_sampling_offline() {
    Case::new(
        "accuracy_log_sampling_offline",
        "Offline",
        "PerformanceOnly",
        4096,
        1024,
        OFFLINE,
    )
    .with_user_conf(
        "*.*.accuracy_log_rng_seed = 720381539243781796\n*.*.accuracy_log_sampling_target = 4000\n",
    )
    .check();
}

/// `--mlperf-conf` replaces the built-in text and is where seeds come from.
#[test]
fn custom_mlperf_conf_seeds() {
    Case::new(
        "custom_mlperf_conf_seeds",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .mlperf_conf(SEEDS_ONLY_MLPERF_CONF)
    .check();
}

/// Seeds in user.conf are ignored by the official LoadGen.
#[test]
fn user_conf_seeds_ignored() {
    Case::new(
        "user_conf_seeds_ignored",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .with_user_conf(
        "*.*.qsl_rng_seed = 1\n*.*.sample_index_rng_seed = 2\n*.*.schedule_rng_seed = 3\n",
    )
    .check();
}

/// Model-specific mlperf.conf keys: resnet50 overrides the performance
/// sample count (1024) and sets Offline min_query_count = 24576.
#[test]
fn model_resnet50_offline() {
    Case::new(
        "model_resnet50_offline",
        "Offline",
        "PerformanceOnly",
        4096,
        500,
        "*.Offline.target_qps = 10000\n*.Offline.min_duration = 1000\n",
    )
    .model("resnet50")
    .check();
}

// Token models (use_token_latencies = 1 in mlperf.conf): the null SUTs
// report each sample's payload as its first token, then complete it with
// `n_tokens`. Time to first token and time per output token are measured,
// judged against mlperf.conf's bounds and logged as upstream logs them.

#[test]
fn llama2_70b_server() {
    Case::new(
        "llama2_70b_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .model("llama2-70b")
    .output_tokens(10)
    .check();
}

#[test]
fn llama2_70b_offline() {
    Case::new(
        "llama2_70b_offline",
        "Offline",
        "PerformanceOnly",
        4096,
        1024,
        OFFLINE,
    )
    .model("llama2-70b")
    .output_tokens(10)
    .check();
}

#[test]
fn llama2_70b_accuracy_server() {
    Case::new(
        "llama2_70b_accuracy_server",
        "Server",
        "AccuracyOnly",
        600,
        200,
        SERVER,
    )
    .model("llama2-70b")
    .output_tokens(7)
    .check();
}

#[test]
fn mixtral_8x7b_server() {
    Case::new(
        "mixtral_8x7b_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .model("mixtral-8x7b")
    .output_tokens(3)
    .check();
}

/// The interactive variant: the `llama2-70b-interactive` keys of
/// mlperf.conf (450 ms / 40 ms), run as Server.
#[test]
fn llama2_70b_interactive_server() {
    Case::new(
        "llama2_70b_interactive_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .model("llama2-70b-interactive")
    .output_tokens(10)
    .check();
}

/// A TTFT bound of 0 ms that every sample misses (user.conf overrides
/// mlperf.conf's), the TPOT bound kept: INVALID for TTFT, with TTFT's
/// early stopping failing and its recommendation.
#[test]
fn tight_ttft_server() {
    Case::new(
        "tight_ttft_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .with_user_conf("llama2-70b.Server.ttft_latency = 0\n")
    .model("llama2-70b")
    .output_tokens(10)
    .check();
}

/// Both bounds at 0 ms: TPOT's early stopping fails first (TTFT's is then
/// not run) and both constraints are named.
#[test]
fn tight_ttft_and_tpot_server() {
    Case::new(
        "tight_ttft_and_tpot_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .with_user_conf("llama2-70b.Server.ttft_latency = 0\nllama2-70b.Server.tpot_latency = 0\n")
    .model("llama2-70b")
    .output_tokens(2)
    .check();
}

/// A SUT that answers with one token: the official runtime error per
/// sample ("Number of tokens need to be greater than 1"), the count taken
/// as 0, in SingleStream's token summary.
#[test]
fn one_token_answers_single_stream() {
    Case::new(
        "one_token_answers_single_stream",
        "SingleStream",
        "PerformanceOnly",
        256,
        256,
        "*.SingleStream.min_duration = 0\n*.SingleStream.min_query_count = 300\n",
    )
    .model("llama2-70b")
    .output_tokens(1)
    .errors_expected()
    .check();
}

/// GPT-J infers its token throughput from samples
/// (`infer_token_latencies`, 69 tokens per sample in mlperf.conf).
#[test]
fn gptj_offline_infers_tokens() {
    Case::new(
        "gptj_offline_infers_tokens",
        "Offline",
        "PerformanceOnly",
        4096,
        1024,
        OFFLINE,
    )
    .model("gptj")
    .check();
}

#[test]
fn gptj_server_infers_tokens() {
    Case::new(
        "gptj_server_infers_tokens",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .model("gptj")
    .check();
}

// Round v5.1 against the official LoadGen 5.1.2: the round's seeds from
// each engine's built-in mlperf.conf, the performance set drawn from the
// whole QSL (4096 samples, 1024 loaded), no accuracy sample count
// override (a user.conf line for it is not read).

#[test]
fn v5_1_single_stream() {
    Case::new(
        "v5_1_single_stream",
        "SingleStream",
        "PerformanceOnly",
        4096,
        1024,
        SINGLE_STREAM,
    )
    .round("v5.1")
    .check();
}

#[test]
fn v5_1_server() {
    Case::new(
        "v5_1_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .round("v5.1")
    .check();
}

#[test]
fn v5_1_multi_stream() {
    Case::new(
        "v5_1_multi_stream",
        "MultiStream",
        "PerformanceOnly",
        4096,
        1024,
        MULTI_STREAM,
    )
    .round("v5.1")
    .check();
}

#[test]
fn v5_1_accuracy_offline_ignores_the_accuracy_override() {
    Case::new(
        "v5_1_accuracy_offline",
        "Offline",
        "AccuracyOnly",
        1000,
        200,
        OFFLINE,
    )
    .with_user_conf("*.Offline.accuracy_sample_count_override = 300\n")
    .round("v5.1")
    .check();
}

#[test]
fn v5_1_llama2_70b_server() {
    Case::new(
        "v5_1_llama2_70b_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .model("llama2-70b")
    .output_tokens(10)
    .round("v5.1")
    .check();
}

/// Round v5.0 against LoadGen 5.0.21, whose summary says "Time to Output
/// Token" for the min, max and mean of the time per output token.
#[test]
fn v5_0_llama2_70b_server() {
    Case::new(
        "v5_0_llama2_70b_server",
        "Server",
        "PerformanceOnly",
        4096,
        1024,
        SERVER,
    )
    .model("llama2-70b")
    .output_tokens(10)
    .round("v5.0")
    .check();
}

/// The current round's LoadGen reads the override: 300 of 1000 samples.
#[test]
fn accuracy_offline_with_the_accuracy_override() {
    Case::new(
        "accuracy_offline_override",
        "Offline",
        "AccuracyOnly",
        1000,
        200,
        OFFLINE,
    )
    .with_user_conf("*.Offline.accuracy_sample_count_override = 300\n")
    .check();
}

#[test]
fn helpers_mask_and_normalise() {
    assert_eq!(
        mask_estimates(" * Would discard 9441 highest latency queries.\n * Early stopping 90.0th percentile estimate: 321\n * Early stopping 99.0th percentile estimate: 641"),
        " * Would discard 9441 highest latency queries.\n * Early stopping 90.0th percentile estimate: <N>\n * Early stopping 99.0th percentile estimate: <N>"
    );
    assert_eq!(
        normalise_label("7 warnings encountered. See detailed log."),
        "<warnings count line>"
    );
    assert_eq!(
        normalise_label("1 warning encountered. See detailed log."),
        "<warnings count line>"
    );
    assert_eq!(
        normalise_label("No warnings encountered during test."),
        "<warnings count line>"
    );
    assert_eq!(
        normalise_label("No errors encountered during test."),
        "No errors encountered during test."
    );
    assert!(diff_seq(&[1, 2, 3], &[1, 2, 3]).is_none());
    assert!(diff_seq(&[1, 2, 3], &[1, 5, 3])
        .unwrap()
        .contains("first difference at index 1"));
    let d = diff_lines(
        &["a".into(), "b".into(), "c".into()],
        &["a".into(), "x".into(), "c".into()],
    );
    assert!(d.contains("- \"b\"") && d.contains("+ \"x\""), "{d}");
}
