//! The official config-file grammar: `model.scenario.key = value` lines.
//!
//! Parsing accepts exactly the values the official parser accepts (a whole
//! C integer or a whole C double), but reports every problem with the file,
//! line and reason instead of a bare line number. Lookups follow the official
//! precedence `model.scenario`, `*.scenario`, `model.*`, `*.*`.

use std::collections::HashMap;
use std::path::Path;

use super::{Scenario, TestMode, TestSettings};

/// The defaults of this MLPerf round, compiled in.
pub const EMBEDDED_MLPERF_CONF: &str = include_str!("mlperf-conf/v6.1.conf");

/// A problem with a config file, naming where and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file's path, as given.
        path: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// A line is not `key = value`.
    #[error("{origin}:{line}: {reason}\n    {text}")]
    BadLine {
        /// The file's path, or a name for embedded text.
        origin: String,
        /// Line number, from 1.
        line: usize,
        /// The offending line, trailing whitespace removed.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `mode` key holds a number that names no test mode.
    #[error("{origin}:{line}: mode must be 0 (SubmissionRun), 1 (AccuracyOnly), 2 (PerformanceOnly) or 3 (FindPeakPerformance), not {value}")]
    BadMode {
        /// The file's path, or a name for embedded text.
        origin: String,
        /// Line number, from 1.
        line: usize,
        /// The value as written.
        value: String,
    },
}

/// Which role a config file plays; it decides which keys it may set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfKind {
    /// mlperf.conf: may also set the seeds and accuracy_log_probability.
    Mlperf,
    /// user.conf: per-system values.
    User,
    /// audit.config of a compliance test (read with model `*`).
    Audit,
}

#[derive(Clone, Debug)]
struct Entry {
    value: String,
    line: usize,
}

/// The key/value pairs of one parsed config file.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    origin: String,
    entries: HashMap<String, Entry>,
    /// Keys whose last part names no setting: kept for a warning.
    pub unknown_keys: Vec<(usize, String)>,
}

/// Setting names that a config file may carry.
const KNOWN_KEYS: &[&str] = &[
    "mode",
    "qsl_rng_seed",
    "sample_index_rng_seed",
    "schedule_rng_seed",
    "accuracy_log_probability",
    "test05",
    "test05_qsl_rng_seed",
    "test05_sample_index_rng_seed",
    "test05_schedule_rng_seed",
    "use_token_latencies",
    "ttft_latency",
    "tpot_latency",
    "infer_token_latencies",
    "token_latency_scaling_factor",
    "target_latency_percentile",
    "samples_per_query",
    "target_latency",
    "performance_issue_unique",
    "performance_issue_same",
    "performance_issue_same_index",
    "sample_concatenate_permutation",
    "coalesce_queries",
    "max_async_queries",
    "min_duration",
    "max_duration",
    "min_query_count",
    "max_query_count",
    "performance_sample_count_override",
    "accuracy_sample_count_override",
    "target_qps",
    "print_timestamps",
    "accuracy_log_rng_seed",
    "accuracy_log_sampling_target",
    // Present in the official mlperf.conf though no release reads it.
    "target_duration",
];

impl ConfigFile {
    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses config text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let mut entries = HashMap::new();
        let mut unknown_keys = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let bad = |reason: String| ConfigError::BadLine {
                origin: origin.to_string(),
                line,
                text: raw.trim_end().to_string(),
                reason,
            };
            let mut tokens = raw.split_whitespace();
            let Some(key) = tokens.next() else { continue };
            if key == "#" || key.starts_with('#') {
                // The official parser only knows a lone '#'; '#text' would
                // be a key there and fail on its next word. Both end here.
                if key != "#" && tokens.clone().next().is_some() {
                    return Err(bad(format!(
                        "a comment starts with '#' followed by a space (the official LoadGen reads {key:?} as a key)"
                    )));
                }
                continue;
            }
            match tokens.next() {
                Some("=") => {}
                Some(other) => {
                    return Err(bad(format!(
                    "expected 'key = value' with spaces around '=', found {other:?} after the key"
                )))
                }
                None if key.contains('=') => {
                    return Err(bad(
                        "expected 'key = value' with spaces around '='".to_string()
                    ))
                }
                None => return Err(bad(format!("key {key:?} has no '= value'"))),
            }
            let mut value = None;
            for token in tokens {
                if !is_c_integer(token) && c_strtod_full(token).is_none() {
                    let hint = if token.starts_with('#') {
                        " (comments must be on their own line)"
                    } else {
                        ""
                    };
                    return Err(bad(format!(
                        "value {token:?} is not an integer or a number{hint}"
                    )));
                }
                // Like the official parser, a later value on the line wins.
                value = Some(token);
            }
            let Some(value) = value else {
                return Err(bad(format!("key {key:?} has no value after '='")));
            };
            // Model names may hold dots ("wan-2.2-t2v-a14b"): split from the right.
            let parts: Vec<&str> = key.rsplitn(3, '.').collect();
            if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
                return Err(bad(format!(
                    "key {key:?} is not of the form model.scenario.name ('*' for any)"
                )));
            }
            if !KNOWN_KEYS.contains(&parts[0]) {
                unknown_keys.push((line, key.to_string()));
            }
            entries.insert(
                key.to_string(),
                Entry {
                    value: value.to_string(),
                    line,
                },
            );
        }
        Ok(Self {
            origin: origin.to_string(),
            entries,
            unknown_keys,
        })
    }

    /// Where this config came from (a path or "embedded mlperf.conf").
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Every key with the line it was last set on, in no set order.
    pub fn keys(&self) -> impl Iterator<Item = (usize, &str)> {
        self.entries.iter().map(|(key, e)| (e.line, key.as_str()))
    }

    fn lookup(&self, model: &str, scenario: &str, key: &str) -> Option<&Entry> {
        [
            format!("{model}.{scenario}.{key}"),
            format!("*.{scenario}.{key}"),
            format!("{model}.*.{key}"),
            format!("*.*.{key}"),
        ]
        .iter()
        .find_map(|k| self.entries.get(k))
    }

    fn int(&self, model: &str, scenario: &str, key: &str, multiplier: u64) -> Option<u64> {
        self.lookup(model, scenario, key)
            .map(|e| c_strtoull(&e.value).wrapping_mul(multiplier))
    }

    fn float(&self, model: &str, scenario: &str, key: &str, multiplier: f64) -> Option<f64> {
        self.lookup(model, scenario, key)
            .map(|e| c_strtod_prefix(&e.value) * multiplier)
    }
}

/// Applies a config to settings the way the official `FromConfig` does, key
/// by key, for the given model and scenario name.
///
/// This one long function is a deliberate mirror of the official
/// `TestSettings::FromConfig` (`test_settings_internal.cc`): the same keys
/// in the same order, with the same unit multipliers and the same
/// mlperf.conf-only rules (seeds, `use_token_latencies`), so the two can be
/// compared line by line when a LoadGen release changes a key. Split it
/// and that comparison is lost.
pub fn apply_config(
    s: &mut TestSettings,
    cfg: &ConfigFile,
    model: &str,
    scenario: Scenario,
    kind: ConfKind,
) -> Result<(), ConfigError> {
    let sc = scenario.name();
    let flag = |v: u64| v != 0;
    let set_u64 = |slot: &mut u64, key: &str, sc: &str, mult: u64| {
        if let Some(v) = cfg.int(model, sc, key, mult) {
            *slot = v;
        }
    };
    let set_f64 = |slot: &mut f64, key: &str, sc: &str, mult: f64| {
        if let Some(v) = cfg.float(model, sc, key, mult) {
            *slot = v;
        }
    };

    if let Some(entry) = cfg.lookup(model, sc, "mode") {
        let code = c_strtoull(&entry.value);
        s.mode = TestMode::from_config_code(code).ok_or_else(|| ConfigError::BadMode {
            origin: cfg.origin.clone(),
            line: entry.line,
            value: entry.value.clone(),
        })?;
    }

    if kind == ConfKind::Mlperf {
        set_u64(&mut s.qsl_rng_seed, "qsl_rng_seed", sc, 1);
        set_u64(&mut s.sample_index_rng_seed, "sample_index_rng_seed", sc, 1);
        set_u64(&mut s.schedule_rng_seed, "schedule_rng_seed", sc, 1);
        set_f64(
            &mut s.accuracy_log_probability,
            "accuracy_log_probability",
            sc,
            0.01,
        );
        if let Some(v) = cfg.int(model, sc, "test05", 1) {
            s.test05 = v == 1;
        }
        set_u64(&mut s.test05_qsl_rng_seed, "test05_qsl_rng_seed", sc, 1);
        set_u64(
            &mut s.test05_sample_index_rng_seed,
            "test05_sample_index_rng_seed",
            sc,
            1,
        );
        set_u64(
            &mut s.test05_schedule_rng_seed,
            "test05_schedule_rng_seed",
            sc,
            1,
        );
    }

    if let Some(v) = cfg.int(model, sc, "use_token_latencies", 1) {
        s.use_token_latencies = v == 1;
    }
    if s.use_token_latencies {
        set_u64(
            &mut s.server_ttft_latency,
            "ttft_latency",
            "Server",
            1_000_000,
        );
        set_u64(
            &mut s.server_tpot_latency,
            "tpot_latency",
            "Server",
            1_000_000,
        );
    }
    if let Some(v) = cfg.int(model, sc, "infer_token_latencies", 1) {
        s.infer_token_latencies = v == 1;
    }
    if s.infer_token_latencies {
        set_u64(
            &mut s.token_latency_scaling_factor,
            "token_latency_scaling_factor",
            sc,
            1,
        );
    }

    set_f64(
        &mut s.single_stream_target_latency_percentile,
        "target_latency_percentile",
        "SingleStream",
        0.01,
    );
    set_f64(
        &mut s.multi_stream_target_latency_percentile,
        "target_latency_percentile",
        "MultiStream",
        0.01,
    );
    set_u64(
        &mut s.multi_stream_samples_per_query,
        "samples_per_query",
        "MultiStream",
        1,
    );
    set_f64(
        &mut s.server_target_latency_percentile,
        "target_latency_percentile",
        "Server",
        0.01,
    );
    set_u64(
        &mut s.server_target_latency_ns,
        "target_latency",
        "Server",
        1_000_000,
    );

    if let Some(v) = cfg.int(model, sc, "performance_issue_unique", 1) {
        s.performance_issue_unique = flag(v);
    }
    if let Some(v) = cfg.int(model, sc, "performance_issue_same", 1) {
        s.performance_issue_same = flag(v);
    }
    set_u64(
        &mut s.performance_issue_same_index,
        "performance_issue_same_index",
        sc,
        1,
    );
    if let Some(v) = cfg.int(model, sc, "sample_concatenate_permutation", 1) {
        s.sample_concatenate_permutation = v == 1;
    }
    if let Some(v) = cfg.int(model, "Server", "coalesce_queries", 1) {
        s.server_coalesce_queries = flag(v);
    }
    if let Some(v) = cfg.int(model, "Server", "max_async_queries", 1) {
        // The official code narrows through int here.
        s.server_max_async_queries = v as i32 as i64 as u64;
    }

    set_u64(&mut s.min_duration_ms, "min_duration", sc, 1);
    set_u64(&mut s.max_duration_ms, "max_duration", sc, 1);
    set_u64(&mut s.min_query_count, "min_query_count", sc, 1);
    set_u64(&mut s.max_query_count, "max_query_count", sc, 1);
    set_u64(
        &mut s.performance_sample_count_override,
        "performance_sample_count_override",
        sc,
        1,
    );
    set_u64(
        &mut s.accuracy_sample_count_override,
        "accuracy_sample_count_override",
        sc,
        1,
    );
    set_f64(
        &mut s.single_stream_expected_latency_ns,
        "target_latency",
        "SingleStream",
        1_000_000.0,
    );
    set_f64(
        &mut s.multi_stream_expected_latency_ns,
        "target_latency",
        "MultiStream",
        1_000_000.0,
    );
    set_f64(&mut s.server_target_qps, "target_qps", "Server", 1.0);
    set_f64(&mut s.offline_expected_qps, "target_qps", "Offline", 1.0);
    if let Some(v) = cfg.int(model, sc, "print_timestamps", 1) {
        s.print_timestamps = flag(v);
    }
    set_u64(&mut s.accuracy_log_rng_seed, "accuracy_log_rng_seed", sc, 1);
    set_u64(
        &mut s.accuracy_log_sampling_target,
        "accuracy_log_sampling_target",
        sc,
        1,
    );
    Ok(())
}

/// Splits an optional sign and the radix prefix the way `strtoull(s, _, 0)`
/// reads them: `0x` hexadecimal, a leading `0` octal, else decimal.
fn c_integer_parts(s: &str) -> (bool, u32, &str) {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = rest.get(..2).map(|p| p.to_ascii_lowercase());
    if lower.as_deref() == Some("0x") && rest[2..].starts_with(|c: char| c.is_ascii_hexdigit()) {
        (negative, 16, &rest[2..])
    } else if rest.starts_with('0') {
        (negative, 8, rest)
    } else {
        (negative, 10, rest)
    }
}

fn digit_run(digits: &str, radix: u32) -> usize {
    digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len())
}

/// True when the whole token is an integer `strtoul(s, _, 0)` consumes.
fn is_c_integer(s: &str) -> bool {
    let (_, radix, digits) = c_integer_parts(s);
    !digits.is_empty() && digit_run(digits, radix) == digits.len()
}

/// `strtoull(s, nullptr, 0)`: the leading integer, saturating on overflow,
/// negated modulo 2^64 for a minus sign, 0 when there is none.
fn c_strtoull(s: &str) -> u64 {
    let (negative, radix, digits) = c_integer_parts(s);
    let run = &digits[..digit_run(digits, radix)];
    let mut value: u64 = 0;
    for c in run.chars() {
        let d = c.to_digit(radix).unwrap_or(0) as u64;
        match value
            .checked_mul(radix as u64)
            .and_then(|v| v.checked_add(d))
        {
            Some(v) => value = v,
            None => return u64::MAX,
        }
    }
    if negative {
        value.wrapping_neg()
    } else {
        value
    }
}

/// The whole token as a C double, or `None` if `strtod` would stop early.
fn c_strtod_full(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    if lower.contains("0x") {
        return None;
    }
    lower.parse::<f64>().ok()
}

/// `strtod` of a token already known to be a whole integer or double.
fn c_strtod_prefix(s: &str) -> f64 {
    if let Some(v) = c_strtod_full(s) {
        return v;
    }
    // A hexadecimal integer: strtod reads it as hexadecimal too.
    let (negative, radix, digits) = c_integer_parts(s);
    let magnitude = if radix == 16 {
        u64::from_str_radix(&digits[..digit_run(digits, 16)], 16)
            .map_or(f64::INFINITY, |v| v as f64)
    } else {
        0.0
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings_from(text: &str, model: &str, scenario: Scenario, kind: ConfKind) -> TestSettings {
        let cfg = ConfigFile::parse(text, "test.conf").unwrap();
        let mut s = TestSettings::default();
        apply_config(&mut s, &cfg, model, scenario, kind).unwrap();
        s
    }

    fn parse_error(text: &str) -> String {
        ConfigFile::parse(text, "user.conf")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn embedded_mlperf_conf_parses_without_unknown_keys() {
        let cfg = ConfigFile::parse(EMBEDDED_MLPERF_CONF, "embedded").unwrap();
        assert!(cfg.unknown_keys.is_empty(), "{:?}", cfg.unknown_keys);
    }

    #[test]
    fn embedded_defaults_give_the_round_seeds_and_model_values() {
        let cfg = ConfigFile::parse(EMBEDDED_MLPERF_CONF, "embedded").unwrap();
        let mut s = TestSettings::default();
        apply_config(&mut s, &cfg, "resnet50", Scenario::Server, ConfKind::Mlperf).unwrap();
        assert_eq!(s.qsl_rng_seed, 2085463073848966840);
        assert_eq!(s.sample_index_rng_seed, 2747215439041700203);
        assert_eq!(s.schedule_rng_seed, 16159082839903944936);
        assert_eq!(s.server_target_latency_ns, 15_000_000);
        assert_eq!(s.performance_sample_count_override, 1024);
        assert_eq!(s.min_duration_ms, 600_000);
        assert!((s.server_target_latency_percentile - 0.99).abs() < 1e-12);
        let mut s = TestSettings::default();
        apply_config(&mut s, &cfg, "gptj", Scenario::Offline, ConfKind::Mlperf).unwrap();
        assert!(s.sample_concatenate_permutation);
        assert_eq!(s.min_query_count, 13368);
        assert!(s.infer_token_latencies);
        assert_eq!(s.token_latency_scaling_factor, 69);
    }

    #[test]
    fn lookup_precedence_is_model_scenario_then_wildcards() {
        let text = "*.*.min_query_count = 1\nm.*.min_query_count = 2\n*.Server.min_query_count = 3\nm.Server.min_query_count = 4\n";
        let get = |model, sc| settings_from(text, model, sc, ConfKind::User).min_query_count;
        assert_eq!(get("m", Scenario::Server), 4);
        assert_eq!(get("x", Scenario::Server), 3);
        assert_eq!(get("m", Scenario::Offline), 2);
        assert_eq!(get("x", Scenario::Offline), 1);
    }

    #[test]
    fn seeds_are_ignored_outside_mlperf_conf() {
        let text = "*.*.qsl_rng_seed = 7\n*.*.accuracy_log_rng_seed = 9\n";
        let user = settings_from(text, "m", Scenario::Offline, ConfKind::User);
        assert_eq!(user.qsl_rng_seed, 0);
        assert_eq!(user.accuracy_log_rng_seed, 9);
        let mlperf = settings_from(text, "m", Scenario::Offline, ConfKind::Mlperf);
        assert_eq!(mlperf.qsl_rng_seed, 7);
    }

    #[test]
    fn units_and_c_number_forms_match_the_official_parser() {
        let text = "*.*.min_query_count = 0x10\n*.*.max_query_count = 010\n*.*.min_duration = 2.9\n*.Server.target_latency = 15\n*.SingleStream.target_latency = 0.5\n*.Server.target_qps = 1e3\n*.*.target_latency_percentile = 97\n";
        let s = settings_from(text, "m", Scenario::Server, ConfKind::User);
        assert_eq!(s.min_query_count, 16);
        assert_eq!(s.max_query_count, 8);
        assert_eq!(s.min_duration_ms, 2, "integer keys truncate");
        assert_eq!(s.server_target_latency_ns, 15_000_000);
        assert_eq!(s.single_stream_expected_latency_ns, 500_000.0);
        assert_eq!(s.server_target_qps, 1000.0);
        assert!((s.server_target_latency_percentile - 0.97).abs() < 1e-12);
    }

    #[test]
    fn comments_blank_lines_and_last_value_wins() {
        let s = settings_from(
            "# a comment\n\n   \n*.*.min_query_count = 5 6\n",
            "m",
            Scenario::Offline,
            ConfKind::User,
        );
        assert_eq!(s.min_query_count, 6);
    }

    #[test]
    fn mode_key_selects_the_test_mode() {
        let s = settings_from("*.*.mode = 1\n", "m", Scenario::Offline, ConfKind::Audit);
        assert_eq!(s.mode, TestMode::AccuracyOnly);
        let cfg = ConfigFile::parse("*.*.mode = 7\n", "audit.config").unwrap();
        let err = apply_config(
            &mut TestSettings::default(),
            &cfg,
            "m",
            Scenario::Offline,
            ConfKind::Audit,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("audit.config:1: mode must be"), "{err}");
    }

    #[test]
    fn bad_lines_name_file_line_and_reason() {
        let err = parse_error("*.*.min_duration = 10\n*.*.min_query_count = ten\n");
        assert!(
            err.starts_with("user.conf:2: value \"ten\" is not an integer or a number"),
            "{err}"
        );
        assert!(err.contains("*.*.min_query_count = ten"), "{err}");

        let err = parse_error("*.*.min_duration=10\n");
        assert!(
            err.starts_with("user.conf:1: expected 'key = value'"),
            "{err}"
        );

        let err = parse_error("*.*.min_duration =\n");
        assert!(err.contains("has no value"), "{err}");

        let err = parse_error("*.*.min_duration\n");
        assert!(err.contains("has no '= value'"), "{err}");

        let err = parse_error("*.*.min_duration = 10 # ten seconds\n");
        assert!(err.contains("comments must be on their own line"), "{err}");

        let err = parse_error("min_duration = 10\n");
        assert!(err.contains("model.scenario.name"), "{err}");

        let err = parse_error("#note this\n");
        assert!(err.contains("followed by a space"), "{err}");

        let err = parse_error("*.*.min_duration = 0x\n");
        assert!(err.contains("is not an integer"), "{err}");
    }

    #[test]
    fn unknown_setting_names_are_collected_for_a_warning() {
        let cfg = ConfigFile::parse("*.*.min_durration = 10\n", "u").unwrap();
        assert_eq!(cfg.unknown_keys, vec![(1, "*.*.min_durration".to_string())]);
    }

    #[test]
    fn c_integer_helpers_follow_strtoull() {
        assert_eq!(c_strtoull("42"), 42);
        assert_eq!(c_strtoull("0x1F"), 31);
        assert_eq!(c_strtoull("017"), 15);
        assert_eq!(c_strtoull("1.5"), 1);
        assert_eq!(c_strtoull("-1"), u64::MAX);
        assert_eq!(c_strtoull("99999999999999999999999"), u64::MAX);
        assert!(is_c_integer("+7"));
        assert!(!is_c_integer("7a"));
        assert_eq!(c_strtod_prefix("0x10"), 16.0);
        assert_eq!(c_strtod_prefix("010"), 10.0);
    }
}
