//! Reading the official submission checker's log of a short test
//! submission, and tying each error it reports to the cause a short run
//! on synthetic data must have: the checker is allowed to complain only
//! about what the test did on purpose (runs under 600 s, a reduced data
//! set, synthetic data that has no ground truth), each complaint checked
//! against the tree itself, and every scenario's own result must be VALID.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::mlperf_logs::Detail;

/// One line of the checker's log: `[DATE TIME FILE:LINE LEVEL] message`.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckerLine {
    /// `ERROR`, `WARNING` or `INFO`.
    pub level: String,
    pub message: String,
    /// The path of the check that was running (its "Starting X for:
    /// PATH" line), if any.
    pub context: Option<String>,
}

/// The checker's log lines, each with the check it came from.
pub fn parse(log: &str) -> Vec<CheckerLine> {
    let mut lines = Vec::new();
    let mut context: Option<String> = None;
    for raw in log.lines() {
        let Some(rest) = raw.strip_prefix('[') else {
            continue;
        };
        let Some((head, message)) = rest.split_once("] ") else {
            continue;
        };
        let Some(level) = head.split_whitespace().last() else {
            continue;
        };
        if let Some((_, path)) = message.split_once(" for: ") {
            if message.starts_with("Starting ") {
                context = Some(path.trim().to_string());
            }
        }
        lines.push(CheckerLine {
            level: level.to_string(),
            message: message.trim().to_string(),
            context: context.clone(),
        });
    }
    lines
}

/// What the test did on purpose, which the checker may complain about.
#[derive(Clone, Debug)]
pub struct ShortRun<'a> {
    /// The tree's root (`submission/`).
    pub root: &'a Path,
    /// `--total-sample-count`, when the test reduced the data set.
    pub total_sample_count: Option<u64>,
}

/// A number after `key` in `text` (`found=1000` -> 1000).
fn number_after(text: &str, key: &str) -> Option<u64> {
    let rest = &text[text.find(key)? + key.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The detail log at `path`: the file itself, or the one in the run
/// folder `path` (or in its `performance/run_1`).
fn detail_of(path: &Path) -> Result<Detail> {
    let direct = path.join("mlperf_log_detail.txt");
    let file = if path.is_file() {
        path.to_path_buf()
    } else if direct.is_file() {
        direct
    } else {
        path.join("performance/run_1/mlperf_log_detail.txt")
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    Ok(Detail::parse(&text, &file)?)
}

fn detail_u64(detail: &Detail, key: &str) -> Option<u64> {
    detail.value(key).and_then(Value::as_u64)
}

/// The first word of a checker message that is a path.
fn path_in(message: &str) -> Option<PathBuf> {
    message
        .split_whitespace()
        .find(|w| w.starts_with('/'))
        .map(|w| PathBuf::from(w.trim_end_matches([',', ':'])))
}

/// Why a short run on synthetic data explains `line`, checked against the
/// tree: `Ok(reason)`, or an error saying what does not fit.
fn cause(line: &CheckerLine, all: &[CheckerLine], short: &ShortRun<'_>) -> Result<String> {
    let m = &line.message;
    if m.contains("Test duration less than 600s in user config") {
        let path = path_in(m).context("no run folder in the message")?;
        let found = number_after(m, "found=").context("no found= in the message")?;
        let detail = detail_of(&path)?;
        let min = detail_u64(&detail, "effective_min_duration_ms")
            .context("no effective_min_duration_ms in its detail log")?;
        if min != found || min >= 600_000 {
            bail!("its detail log says min_duration {min} ms, the checker {found}");
        }
        return Ok(format!("the run's min_duration is {min} ms on purpose"));
    }
    if m.contains("accurcy run does not cover all dataset") {
        let samples = number_after(m, "accuracy samples:").context("no sample count")?;
        let size = number_after(m, "dataset size:").context("no dataset size")?;
        match short.total_sample_count {
            Some(total) if samples == total && total < size => {
                return Ok(format!(
                    "--total-sample-count {total} of the data set's {size}"
                ))
            }
            other => {
                bail!("{samples} accuracy samples of {size}, with --total-sample-count {other:?}")
            }
        }
    }
    if m.contains("performance_sample_count, found") {
        let found = number_after(m, "found").context("no count")?;
        let needed = number_after(m, ">=").context("no bound")?;
        match short.total_sample_count {
            Some(total) if found <= total && found < needed => {
                return Ok(format!("--total-sample-count {total} caps it at {found}"))
            }
            other => bail!("{found} of {needed}, with --total-sample-count {other:?}"),
        }
    }
    if m.starts_with("Early stopping condition was not met") {
        let path = line
            .context
            .as_deref()
            .context("no check context for this error")?;
        let detail = detail_of(Path::new(path))?;
        let met = detail.value("early_stopping_met").and_then(Value::as_bool);
        let min = detail_u64(&detail, "effective_min_duration_ms").unwrap_or(u64::MAX);
        if met != Some(false) || min >= 600_000 {
            bail!("{path}: early_stopping_met {met:?}, min_duration {min} ms");
        }
        return Ok(format!(
            "{path} ran {min} ms, too few queries for early stopping"
        ));
    }
    if let Some((_, path)) = m.split_once("Checks failed for: ") {
        let path = path.trim();
        let inner: Vec<&CheckerLine> = all
            .iter()
            .filter(|l| !std::ptr::eq(*l, line))
            .filter(|l| l.context.as_deref().is_some_and(|c| c.starts_with(path)))
            .filter(|l| !l.message.contains("Checks failed for: "))
            .collect();
        let explained = inner
            .iter()
            .filter(|l| l.level == "ERROR")
            .any(|l| cause(l, all, short).is_ok());
        let synthetic_accuracy = m.contains("accuracy checks")
            && inner.iter().any(|l| l.message.contains("accuracy not met"))
            && synthetic_score(Path::new(path));
        if explained || synthetic_accuracy {
            return Ok("follows from the errors explained inside it".into());
        }
        bail!("nothing short-run explains the failed checks of {path}");
    }
    if let Some(path) = m.strip_prefix("NoResults ") {
        let path = path.trim();
        let explained = all
            .iter()
            .filter(|l| l.level == "ERROR" && l.message.contains(path))
            .filter(|l| !l.message.starts_with("NoResults"))
            .any(|l| cause(l, all, short).is_ok());
        if explained {
            return Ok("its run was rejected for an explained reason".into());
        }
        bail!("no explained error rejects {path}");
    }
    bail!("no short-run cause is known for it")
}

/// Whether the accuracy.txt of the scenario folder holding `path` says
/// it scored synthetic data.
fn synthetic_score(path: &Path) -> bool {
    path.ancestors().take(4).any(|dir| {
        std::fs::read_to_string(dir.join("accuracy/accuracy.txt"))
            .or_else(|_| std::fs::read_to_string(dir.join("accuracy.txt")))
            .is_ok_and(|t| t.contains("synthetic"))
    })
}

/// Every ERROR of the checker's `log`, each tied to its short-run cause in
/// the tree; an error naming the ones that are not. Returns the
/// explanations, one per error.
pub fn explain_errors(log: &str, short: &ShortRun<'_>) -> Result<Vec<String>> {
    let lines = parse(log);
    let mut explained = Vec::new();
    let mut unexplained = Vec::new();
    for line in lines.iter().filter(|l| l.level == "ERROR") {
        if line.message.starts_with("SUMMARY") {
            continue;
        }
        match cause(line, &lines, short) {
            Ok(why) => explained.push(format!("{}: {why}", line.message)),
            Err(e) => unexplained.push(format!("{}\n    ({e:#})", line.message)),
        }
    }
    if !unexplained.is_empty() {
        bail!(
            "the checker reported errors a short synthetic run does not explain:\n  {}",
            unexplained.join("\n  ")
        );
    }
    Ok(explained)
}

/// The performance run of every scenario in the tree's results, each of
/// which must be VALID: `(scenario folder, validity)`.
pub fn performance_validity(root: &Path) -> Result<Vec<(PathBuf, String)>> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.ends_with("performance/run_1")
                    && path.join("mlperf_log_detail.txt").is_file()
                    && !path.components().any(|c| {
                        c.as_os_str()
                            .to_str()
                            .is_some_and(|s| s.starts_with("TEST0"))
                    })
                {
                    let detail = detail_of(&path)?;
                    let validity = detail
                        .value("result_validity")
                        .and_then(Value::as_str)
                        .unwrap_or("missing")
                        .to_string();
                    found.push((path, validity));
                } else {
                    stack.push(path);
                }
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Fails unless the tree has at least one performance run and each is
/// VALID.
pub fn expect_every_result_valid(root: &Path) -> Result<()> {
    let runs = performance_validity(root)?;
    if runs.is_empty() {
        bail!("no performance run in {}", root.display());
    }
    let invalid: Vec<String> = runs
        .iter()
        .filter(|(_, v)| v != "VALID")
        .map(|(p, v)| format!("{}: {v}", p.display()))
        .collect();
    if !invalid.is_empty() {
        bail!("results that are not VALID:\n  {}", invalid.join("\n  "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run folder whose detail log holds `entries`.
    fn run(dir: &Path, rel: &str, entries: &[(&str, Value)]) -> PathBuf {
        let run = dir.join(rel);
        std::fs::create_dir_all(&run).unwrap();
        let text: String = entries
            .iter()
            .map(|(k, v)| {
                format!(
                    ":::MLLOG {}\n",
                    serde_json::json!({"key": k, "value": v, "time_ms": 1, "namespace": "mlperf::logging", "event_type": "POINT_IN_TIME", "metadata": {"is_error": false, "is_warning": false, "file": "x", "line_no": 1, "pid": 1, "tid": 1}})
                )
            })
            .collect();
        std::fs::write(run.join("mlperf_log_detail.txt"), text).unwrap();
        run
    }

    fn line(level: &str, message: String) -> String {
        format!("[2026-11-26 14:35:06,767 x.py:1 {level}] {message}\n")
    }

    #[test]
    fn each_error_must_have_its_cause_in_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let short = run(
            root,
            "results/s/resnet/Server/performance/run_1",
            &[
                ("effective_min_duration_ms", 2000.into()),
                ("result_validity", "VALID".into()),
            ],
        );
        let full = run(
            root,
            "results/s/resnet/Offline/performance/run_1",
            &[
                ("effective_min_duration_ms", 600000.into()),
                ("result_validity", "INVALID".into()),
            ],
        );
        let detail = |p: &Path| p.join("mlperf_log_detail.txt").display().to_string();
        let short_run = ShortRun {
            root,
            total_sample_count: Some(2048),
        };
        // A short run's duration error, its summary line and NoResults.
        let log = line(
            "INFO",
            format!("Starting performance checks for: {}", detail(&short)),
        ) + &line(
            "ERROR",
            format!(
                "{} Test duration less than 600s in user config. expected=600000, found=2000",
                detail(&short)
            ),
        ) + &line(
            "ERROR",
            format!(
                "Some performance checks Checks failed for: {}",
                detail(&short)
            ),
        ) + &line("ERROR", format!("NoResults {}", detail(&short)));
        assert_eq!(explain_errors(&log, &short_run).unwrap().len(), 3);
        // The same error for a run that was 600 s long is not explained.
        let log = line(
            "ERROR",
            format!(
                "{} Test duration less than 600s in user config. expected=600000, found=2000",
                detail(&full)
            ),
        );
        let err = explain_errors(&log, &short_run).unwrap_err().to_string();
        assert!(err.contains("min_duration 600000 ms"), "{err}");
        // A missed latency bound has no short-run cause.
        let log = line("INFO", format!("Starting performance checks for: {}", detail(&short)))
            + &line(
                "ERROR",
                format!(
                    "{} Latency constraint with early stopping not met, expected=15000000, found=30000000",
                    detail(&short)
                ),
            )
            + &line("ERROR", format!("Some performance checks Checks failed for: {}", detail(&short)));
        let err = explain_errors(&log, &short_run).unwrap_err().to_string();
        assert!(err.contains("Latency constraint"), "{err}");
        assert!(err.contains("nothing short-run explains"), "{err}");
        // A reduced data set explains the coverage error only when the
        // test reduced it to that size.
        let coverage = line(
            "ERROR",
            "/x/accuracy/mlperf_log_detail.txt accurcy run does not cover all dataset, accuracy samples: 2048, dataset size: 50000".into(),
        );
        explain_errors(&coverage, &short_run).unwrap();
        let full_set = ShortRun {
            root,
            total_sample_count: None,
        };
        assert!(explain_errors(&coverage, &full_set).is_err());
        // Every performance result must be VALID.
        let err = expect_every_result_valid(root).unwrap_err().to_string();
        assert!(err.contains("Offline/performance/run_1: INVALID"), "{err}");
        std::fs::remove_dir_all(root.join("results/s/resnet/Offline")).unwrap();
        expect_every_result_valid(root).unwrap();
    }
}
