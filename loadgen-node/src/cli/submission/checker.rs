//! The official tools from a mlcommons/inference checkout: the compliance
//! tests' `audit.config` files, and the submission checker, whose verdict
//! is read back and its errors grouped by message.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use loadgen_node::round::Round;

/// What a checkout must hold for netdiv to use it.
const NEEDED: &[&str] = &[
    "tools/submission/submission_checker/main.py",
    "compliance/TEST01/run_verification.py",
    "compliance/TEST04/run_verification.py",
];

/// Checks that `dir` is a mlcommons/inference checkout with the checker
/// and the compliance tests.
pub(crate) fn check_checkout(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        bail!(
            "{} is not a folder: name a mlcommons/inference checkout (--inference DIR or \
             NETDIV_INFERENCE_REPO)",
            dir.display()
        );
    }
    let missing: Vec<&str> = NEEDED
        .iter()
        .copied()
        .filter(|p| !dir.join(p).is_file())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} is not a usable mlcommons/inference checkout: it has no {}",
            dir.display(),
            missing.join(", ")
        );
    }
    Ok(())
}

/// The `audit.config` of compliance test `test` for the checker's `model`:
/// TEST01 has one per benchmark folder, the others one for all.
pub(crate) fn audit_config(inference: &Path, test: &str, model: &str) -> Result<PathBuf> {
    let test_dir = inference.join("compliance").join(test);
    // The folders use the reference names: resnet50, 3d-unet, gpt-j, ...
    let base = strip_target(model);
    let candidates = [
        model.to_string(),
        base.to_string(),
        match base {
            "resnet" => "resnet50".into(),
            "gptj" => "gpt-j".into(),
            other => other.replace('.', "_"),
        },
    ];
    for name in &candidates {
        let path = test_dir.join(name).join("audit.config");
        if path.is_file() {
            return Ok(path);
        }
    }
    let shared = test_dir.join("audit.config");
    if shared.is_file() {
        return Ok(shared);
    }
    bail!(
        "{} has no audit.config for {model} (looked in {} and {})",
        test_dir.display(),
        candidates
            .iter()
            .map(|c| format!("{c}/"))
            .collect::<Vec<_>>()
            .join(", "),
        shared.display()
    )
}

/// `3d-unet-99.9` -> `3d-unet`.
fn strip_target(model: &str) -> &str {
    for suffix in ["-99.9", "-99", "-95"] {
        if let Some(base) = model.strip_suffix(suffix) {
            return base;
        }
    }
    model
}

/// The official `truncate_accuracy_log.py` on the tree: each accuracy
/// log cut to the size the checker takes, with the full log's hash added
/// to accuracy.txt; the full logs are kept in `backup`.
pub(crate) fn truncate_accuracy_logs(
    inference: &Path,
    root: &Path,
    submitter: &str,
    python: &Path,
    backup: &Path,
) -> Result<()> {
    let root = std::fs::canonicalize(root)
        .with_context(|| format!("cannot find the submission tree {}", root.display()))?;
    // The script refuses a file whose backup exists; the full logs of the
    // runs stay in the work folder anyway, so an old backup can go.
    if backup.exists() {
        std::fs::remove_dir_all(backup)
            .with_context(|| format!("cannot remove {}", backup.display()))?;
    }
    std::fs::create_dir_all(backup)
        .with_context(|| format!("cannot create {}", backup.display()))?;
    let script = inference.join("tools/submission/truncate_accuracy_log.py");
    let output = Command::new(python)
        .arg(&script)
        .arg("--input")
        .arg(&root)
        .args(["--submitter", submitter, "--backup"])
        .arg(std::fs::canonicalize(backup)?)
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}):\n{}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// The checker's verdict on a tree.
pub(crate) struct Verdict {
    /// Its exit status was success and it said the submission looks OK.
    pub(crate) looks_ok: bool,
    /// Its ERROR lines, grouped: normalised message -> (count, one example).
    pub(crate) errors: BTreeMap<String, (usize, String)>,
    /// Its WARNING lines, grouped likewise.
    pub(crate) warnings: BTreeMap<String, (usize, String)>,
    /// Where its whole output was written.
    pub(crate) log: PathBuf,
}

impl Verdict {
    /// No errors.
    pub(crate) fn passed(&self) -> bool {
        self.looks_ok && self.errors.is_empty()
    }

    /// The verdict and the errors grouped, for a terminal.
    pub(crate) fn render(&self) -> String {
        let mut out = format!(
            "Official submission checker: {} ({} error(s) in {} kind(s), {} warning(s); full \
             output: {})\n",
            if self.passed() {
                "submission looks OK"
            } else {
                "submission has errors"
            },
            self.errors.values().map(|(n, _)| n).sum::<usize>(),
            self.errors.len(),
            self.warnings.values().map(|(n, _)| n).sum::<usize>(),
            self.log.display()
        );
        for (count, example) in self.errors.values() {
            out.push_str(&format!("  ERROR x{count}: {example}\n"));
        }
        out
    }
}

/// A message with its paths and numbers-in-paths made comparable.
pub(crate) fn normalise(message: &str) -> String {
    message
        .split_whitespace()
        .map(|word| if word.contains('/') { "<path>" } else { word })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads the checker's output: `[DATE TIME FILE:LINE LEVEL] message`
/// lines (and `LEVEL:logger:message` from tools with Python's default
/// format).
fn group(output: &str, level: &str) -> BTreeMap<String, (usize, String)> {
    let mut groups: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let bracketed = format!(" {level}] ");
    let plain = format!("{level}:");
    for line in output.lines() {
        let message = if let Some((_, m)) = line.split_once(&bracketed) {
            m.trim()
        } else if let Some(rest) = line.strip_prefix(&plain) {
            rest.split_once(':').map_or(rest, |(_, m)| m).trim()
        } else {
            continue;
        };
        if message.starts_with("SUMMARY") {
            continue;
        }
        let entry = groups
            .entry(normalise(message))
            .or_insert_with(|| (0, message.to_string()));
        entry.0 += 1;
    }
    groups
}

/// The checker's verdict on the tree `args` name.
pub(crate) fn verdict_of(args: &crate::cli::args::CheckArgs) -> Result<Verdict> {
    let inference = args.inference.clone().ok_or_else(|| {
        anyhow::anyhow!(
            "name a mlcommons/inference checkout: --inference DIR or NETDIV_INFERENCE_REPO=DIR"
        )
    })?;
    let round = args.round.unwrap_or(Round::CURRENT);
    run(
        &inference,
        &args.input,
        round,
        &args.submitter,
        &args.python,
    )
}

/// `loadgen-node check`: the checker's verdict on a tree.
pub(crate) fn command(args: &crate::cli::args::CheckArgs) -> Result<()> {
    let verdict = verdict_of(args)?;
    print!("{}", verdict.render());
    if !verdict.passed() {
        bail!("the official submission checker found errors (listed above)");
    }
    Ok(())
}

/// Runs the checker of `inference` on the tree under `root` for `round`.
pub(crate) fn run(
    inference: &Path,
    root: &Path,
    round: Round,
    submitter: &str,
    python: &Path,
) -> Result<Verdict> {
    check_checkout(inference)?;
    let root = std::fs::canonicalize(root)
        .with_context(|| format!("cannot find the submission tree {}", root.display()))?;
    let tools = inference.join("tools/submission");
    // Its summary table would land in the checkout otherwise.
    let csv = root.join(format!("checker-{}.csv", round.checker_version()));
    let output = Command::new(python)
        .args(["-m", "submission_checker.main", "--input"])
        .arg(&root)
        .args([
            "--version",
            round.checker_version(),
            "--submitter",
            submitter,
        ])
        .arg("--csv")
        .arg(&csv)
        .current_dir(&tools)
        .output()
        .with_context(|| format!("cannot run {} for the checker", python.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let log = root.join(format!("checker-{}.log", round.checker_version()));
    std::fs::write(&log, &text).with_context(|| format!("cannot write {}", log.display()))?;
    if !text.contains("SUMMARY:") {
        bail!(
            "the submission checker did not finish ({}); its output is in {}:\n{}",
            output.status,
            log.display(),
            text.lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok(Verdict {
        looks_ok: output.status.success() && text.contains("SUMMARY: submission looks OK"),
        errors: group(&text, "ERROR"),
        warnings: group(&text, "WARNING"),
        log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_grouped_by_message_without_paths() {
        let out = "[2026-11-24 06:58:55,972 base.py:53 INFO] Starting x\n\
                   [2026-11-24 06:58:55,972 p.py:381 ERROR] /a/b/Offline/performance/run_1 has issues\n\
                   [2026-11-24 06:58:55,973 p.py:381 ERROR] /a/c/Server/performance/run_1 has issues\n\
                   ERROR:main:seeds wrong\n\
                   [2026-11-24 06:58:55,973 base.py:1 WARNING] odd\n\
                   [2026-11-24 06:58:55,974 main.py:361 ERROR] SUMMARY: submission has errors\n";
        let errors = group(out, "ERROR");
        assert_eq!(errors.len(), 2);
        assert_eq!(errors["<path> has issues"].0, 2);
        assert_eq!(group(out, "WARNING").len(), 1);
    }

    #[test]
    fn audit_configs_are_found_by_reference_name() {
        let dir = tempfile::tempdir().unwrap();
        let t01 = dir.path().join("compliance/TEST01/resnet50");
        std::fs::create_dir_all(&t01).unwrap();
        std::fs::write(t01.join("audit.config"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("compliance/TEST04")).unwrap();
        std::fs::write(dir.path().join("compliance/TEST04/audit.config"), "").unwrap();
        assert!(audit_config(dir.path(), "TEST01", "resnet")
            .unwrap()
            .ends_with("resnet50/audit.config"));
        assert!(audit_config(dir.path(), "TEST04", "resnet")
            .unwrap()
            .ends_with("TEST04/audit.config"));
        let err = audit_config(dir.path(), "TEST01", "3d-unet-99")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no audit.config for 3d-unet-99"), "{err}");
    }
}
