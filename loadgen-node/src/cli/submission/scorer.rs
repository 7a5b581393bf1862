//! Whether a submission's accuracy scorer is the benchmark's own: the
//! official accuracy script of a mlcommons/inference checkout, run by its
//! path there. A scorer that is not (a wrapper that ignores the log, a
//! script of another checkout) needs `--rehearsal` or the submitter's
//! attestation; every file the scoring command names goes into
//! accuracy.txt with its sha256 (the script, the data set); and the
//! output must hold every accuracy metric the round's checker reads for
//! the benchmark, in the checker's own form.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::rules::{self, Finding};

/// The official accuracy script of each benchmark netdiv knows, in a
/// mlcommons/inference checkout (by the checker's model name's prefix).
const OFFICIAL_SCRIPTS: &[(&str, &str)] = &[
    (
        "resnet",
        "vision/classification_and_detection/tools/accuracy-imagenet.py",
    ),
    (
        "retinanet",
        "vision/classification_and_detection/tools/accuracy-openimages.py",
    ),
    (
        "3d-unet",
        "vision/medical_imaging/3d-unet-kits19/accuracy_kits.py",
    ),
    (
        "dlrm-v2",
        "recommendation/dlrm_v2/pytorch/tools/accuracy-dlrm.py",
    ),
    (
        "stable-diffusion-xl",
        "text_to_image/tools/accuracy_coco.py",
    ),
    ("rgat", "graph/R-GAT/tools/accuracy_igbh.py"),
    ("gptj", "language/gpt-j/evaluation.py"),
    ("llama2-70b", "language/llama2-70b/evaluate-accuracy.py"),
    ("mixtral-8x7b", "language/mixtral-8x7b/evaluate-accuracy.py"),
    (
        "llama3.1-405b",
        "language/llama3.1-405b/evaluate-accuracy.py",
    ),
    ("llama3.1-8b", "language/llama3.1-8b/evaluation.py"),
    ("deepseek-r1", "language/deepseek-r1/eval_accuracy.py"),
];

/// The official accuracy script of `model` (the checker's name), relative
/// to a mlcommons/inference checkout.
pub(crate) fn official_script(model: &str) -> Option<&'static str> {
    OFFICIAL_SCRIPTS
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map(|(_, path)| *path)
}

/// The words of a shell command that name files, as written (`--flag=FILE`
/// gives FILE), quotes taken off.
fn named_paths(command: &str) -> Vec<String> {
    command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"'))
        .map(|w| w.split_once('=').map_or(w, |(_, v)| v))
        .filter(|w| !w.is_empty() && !w.contains("{log}") && !w.contains("{scenario}"))
        .map(String::from)
        .collect()
}

/// The rule a scoring command breaks, if it does not run `model`'s
/// official script from `inference` by its path (unless `attested`).
pub(crate) fn finding(
    command: Option<&str>,
    inference: Option<&Path>,
    model: &str,
    attested: Option<&str>,
) -> Option<Finding> {
    let command = command?;
    if attested.is_some() {
        return None;
    }
    let Some(relative) = official_script(model) else {
        return Some(rules::finding(
            rules::SCORER,
            format!(
                "netdiv does not know {model}'s official accuracy script, so it cannot tell \
                 whether `{command}` runs it"
            ),
        ));
    };
    let Some(inference) = inference else {
        return Some(rules::finding(
            rules::SCORER,
            format!("no mlcommons/inference checkout is named, so {relative} cannot be found"),
        ));
    };
    let official = inference.join(relative);
    let Ok(official) = std::fs::canonicalize(&official) else {
        return Some(rules::finding(
            rules::SCORER,
            format!(
                "the checkout {} has no {relative}, {model}'s official accuracy script",
                inference.display()
            ),
        ));
    };
    let runs_it = named_paths(command)
        .iter()
        .any(|w| std::fs::canonicalize(w).is_ok_and(|p| p == official));
    (!runs_it).then(|| {
        rules::finding(
            rules::SCORER,
            format!(
                "the accuracy script `{command}` does not run {} (give it by that path)",
                official.display()
            ),
        )
    })
}

/// Lines for accuracy.txt: each existing file the command names (relative
/// ones from `work`, where it runs), with its sha256.
pub(crate) fn named_files(command: &str, work: &Path) -> Result<String> {
    let mut lines = String::new();
    for word in named_paths(command) {
        let path = work.join(&word);
        if path.is_file() {
            let sha = sha256_file(&path)?;
            lines.push_str(&format!("netdiv: the scorer read {word} (sha256 {sha})\n"));
        }
    }
    Ok(lines)
}

/// The accuracy metrics the `round`'s checker reads for `model` that no
/// line of `text` gives in the checker's form (its own patterns, read from
/// the checkout with `python`).
pub(crate) fn missing_metrics(
    inference: &Path,
    python: &Path,
    round: &str,
    model: &str,
    text: &str,
) -> Result<Vec<String>> {
    const PROGRAM: &str = "import re, sys\n\
        sys.path.insert(0, sys.argv[1])\n\
        from submission_checker.constants import MODEL_CONFIG, ACC_PATTERN\n\
        targets = MODEL_CONFIG[sys.argv[2]]['accuracy-target'][sys.argv[3]]\n\
        lines = sys.stdin.read().splitlines()\n\
        for metric in targets[0::2]:\n    \
            if not any(re.match(ACC_PATTERN[metric], l) for l in lines):\n        \
                print(metric)\n";
    let checker: PathBuf = inference.join("tools/submission");
    let mut child = Command::new(python)
        .args(["-c", PROGRAM])
        .arg(&checker)
        .args([round, model])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", python.display()))?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().context("the child's stdin")?;
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        anyhow::bail!(
            "cannot read the checker's accuracy patterns for {model} ({round}) from {}:\n{}",
            checker.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect())
}

/// The sha256 of a file, in hex.
pub(crate) fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_benchmark_names_its_script() {
        assert_eq!(
            official_script("llama2-70b-interactive-99"),
            Some("language/llama2-70b/evaluate-accuracy.py")
        );
        assert_eq!(official_script("3d-unet-99.9"), Some(OFFICIAL_SCRIPTS[2].1));
        assert_eq!(official_script("whisper"), None);
    }

    #[test]
    fn a_scorer_counts_only_when_it_runs_the_checkouts_script() {
        let checkout = tempfile::tempdir().unwrap();
        let script = checkout.path().join(OFFICIAL_SCRIPTS[0].1);
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "print('accuracy=76.5%')\n").unwrap();
        let inference = Some(checkout.path());
        let official = format!(
            "python3 {} --mlperf-accuracy-file {{log}}",
            script.display()
        );
        assert_eq!(finding(Some(&official), inference, "resnet", None), None);
        let quoted = format!(
            "python3 '{}' --mlperf-accuracy-file={{log}}",
            script.display()
        );
        assert_eq!(finding(Some(&quoted), inference, "resnet", None), None);
        let wrapper = finding(Some("true {log}"), inference, "resnet", None).unwrap();
        assert_eq!(wrapper.rule, rules::SCORER);
        assert!(wrapper.evidence.contains("does not run"), "{wrapper}");
        assert_eq!(
            finding(Some("true {log}"), inference, "resnet", Some("ours")),
            None
        );
        let elsewhere = finding(Some(&official), inference, "retinanet", None).unwrap();
        assert!(elsewhere.evidence.contains("has no"), "{elsewhere}");
        let unknown = finding(Some(&official), inference, "whisper", None).unwrap();
        assert!(unknown.evidence.contains("does not know"), "{unknown}");
        assert_eq!(finding(None, inference, "resnet", None), None);
    }

    #[test]
    fn the_files_a_scorer_reads_are_hashed() {
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("val_map.txt"), "a 1\n").unwrap();
        let lines = named_files(
            "python3 acc.py --mlperf-accuracy-file {log} --imagenet-val-file val_map.txt",
            work.path(),
        )
        .unwrap();
        assert!(
            lines.starts_with("netdiv: the scorer read val_map.txt (sha256 "),
            "{lines}"
        );
        assert_eq!(lines.lines().count(), 1, "{lines}");
    }
}
