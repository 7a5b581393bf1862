//! Where a scenario's accuracy.txt comes from: the benchmark's own scoring
//! command run on the exact accuracy log that goes into the tree (its
//! output, with the log's sha256, becomes accuracy.txt: the truncation
//! script's `hash=` line then shows it is the same log), or, for a
//! rehearsal only, a file the user scored before.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

use super::rehearsal::PRECOMPUTED_MARK;
use super::scorer::{self, sha256_file};

/// How accuracy.txt is made.
#[derive(Debug)]
pub(crate) enum AccuracySource {
    /// `--accuracy-script`: a shell command with `{log}` (and
    /// `{scenario}`).
    Script(String),
    /// `--accuracy-output` (rehearsal only): a file for every scenario, or
    /// one per scenario.
    Given {
        every: Option<PathBuf>,
        per_scenario: Vec<(String, PathBuf)>,
    },
}

impl AccuracySource {
    /// From the flags, for `scenarios`; refused before any run when it
    /// cannot give every scenario an accuracy.txt of its own log.
    pub(crate) fn from_flags(
        script: Option<&str>,
        given: &[String],
        scenarios: &[String],
        rehearsal: bool,
    ) -> Result<AccuracySource> {
        match (script, given.is_empty()) {
            (Some(_), false) => bail!(
                "give --accuracy-script or --accuracy-output, not both: the script scores the \
                 accuracy log this submission writes"
            ),
            (Some(script), true) => {
                if !script.contains("{log}") {
                    bail!(
                        "--accuracy-script {script:?} has no {{log}}: it must name the accuracy \
                         log it scores as {{log}}"
                    );
                }
                Ok(AccuracySource::Script(script.to_string()))
            }
            (None, false) if !rehearsal => bail!(
                "--accuracy-output is a score made before this submission's accuracy runs, so \
                 it cannot be theirs: give the benchmark's scoring command with \
                 --accuracy-script 'CMD ... {{log}} ...' (or run a --rehearsal)"
            ),
            (None, false) => given_outputs(given, scenarios),
            (None, true) => bail!(
                "no accuracy scorer: give the benchmark's scoring command with \
                 --accuracy-script 'CMD ... {{log}} ...' (its accuracy script from the \
                 mlcommons/inference checkout, e.g. python3 evaluation.py \
                 --mlperf-accuracy-file {{log}} ...)"
            ),
        }
    }

    /// accuracy.txt's text for `scenario`'s accuracy log `log`, and a
    /// line saying where it came from.
    pub(crate) fn accuracy_txt(
        &self,
        scenario: &str,
        log: &Path,
        work: &Path,
    ) -> Result<(String, String)> {
        let sha = sha256_file(log)?;
        match self {
            AccuracySource::Script(script) => {
                let command = script
                    .replace("{log}", &shell_quote(&log.display().to_string()))
                    .replace("{scenario}", scenario);
                let output = run_scorer(&command, work)?;
                let files = scorer::named_files(script, work)?;
                Ok((
                    format!(
                        "{output}\nnetdiv: scored {} (sha256 {sha}) with: {command}\n{files}",
                        log.display()
                    ),
                    format!("scored by the accuracy script (log sha256 {sha})"),
                ))
            }
            AccuracySource::Given {
                every,
                per_scenario,
            } => {
                let path = per_scenario
                    .iter()
                    .find(|(s, _)| s == scenario)
                    .map(|(_, p)| p)
                    .or(every.as_ref())
                    .ok_or_else(|| anyhow!("no --accuracy-output for {scenario}"))?;
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                Ok((
                    format!(
                        "{text}\n{PRECOMPUTED_MARK} from {}, not a score of this \
                         accuracy log (sha256 {sha})\n",
                        path.display()
                    ),
                    format!("from {} (rehearsal: not this log's score)", path.display()),
                ))
            }
        }
    }
}

/// `FILE` for every scenario, or `SCENARIO=FILE`, each checked to exist.
fn given_outputs(given: &[String], scenarios: &[String]) -> Result<AccuracySource> {
    let mut every = None;
    let mut per_scenario = Vec::new();
    for item in given {
        match item.split_once('=') {
            Some((scenario, path)) if scenarios.iter().any(|s| s == scenario) => {
                per_scenario.push((scenario.to_string(), PathBuf::from(path)));
            }
            Some((scenario, _)) if !Path::new(item).exists() => bail!(
                "--accuracy-output {item}: {scenario} is not a scenario of this submission ({})",
                scenarios.join(", ")
            ),
            _ => every = Some(PathBuf::from(item)),
        }
    }
    for scenario in scenarios {
        let path = per_scenario
            .iter()
            .find(|(s, _)| s == scenario)
            .map(|(_, p)| p)
            .or(every.as_ref())
            .ok_or_else(|| {
                anyhow!("no --accuracy-output for {scenario} (give FILE or {scenario}=FILE)")
            })?;
        if !path.is_file() {
            bail!(
                "--accuracy-output: {} does not exist (the accuracy result for {scenario})",
                path.display()
            );
        }
    }
    Ok(AccuracySource::Given {
        every,
        per_scenario,
    })
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Runs the scoring command in `work`; its output (stdout then stderr).
fn run_scorer(command: &str, work: &Path) -> Result<String> {
    let out = Command::new("sh")
        .args(["-c", command])
        .current_dir(work)
        .output()
        .with_context(|| format!("cannot run the accuracy script: {command}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        bail!(
            "the accuracy script failed ({}): {command}\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(text.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenarios() -> Vec<String> {
        vec!["Offline".into(), "Server".into()]
    }

    #[test]
    fn a_precomputed_score_is_for_rehearsals_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("acc.txt");
        std::fs::write(&file, "mean = 0.86").unwrap();
        let given = [file.display().to_string()];
        let err = AccuracySource::from_flags(None, &given, &scenarios(), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--accuracy-script"), "{err}");
        assert!(AccuracySource::from_flags(None, &given, &scenarios(), true).is_ok());
        let err = AccuracySource::from_flags(None, &[], &scenarios(), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no accuracy scorer"), "{err}");
        let err = AccuracySource::from_flags(Some("score.py"), &[], &scenarios(), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no {log}"), "{err}");
        let one = [format!("Offline={}", file.display())];
        let err = AccuracySource::from_flags(None, &one, &scenarios(), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no --accuracy-output for Server"), "{err}");
    }

    #[test]
    fn the_script_scores_the_log_it_is_given_and_its_hash_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("mlperf_log_accuracy.json");
        std::fs::write(&log, "[]\n").unwrap();
        let source = AccuracySource::from_flags(
            Some("echo scored {log} for {scenario}"),
            &[],
            &scenarios(),
            false,
        )
        .unwrap();
        let (text, _) = source.accuracy_txt("Server", &log, dir.path()).unwrap();
        assert!(
            text.starts_with(&format!("scored {} for Server", log.display())),
            "{text}"
        );
        let sha = sha256_file(&log).unwrap();
        assert_eq!(
            sha,
            "37517e5f3dc66819f61f5a7bb8ace1921282415f10551d2defa5c3eb0985b570"
        );
        assert!(text.contains(&format!("(sha256 {sha})")), "{text}");
        let failing = AccuracySource::Script("false {log}".into());
        let err = failing
            .accuracy_txt("Offline", &log, dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("the accuracy script failed"), "{err}");
    }
}
