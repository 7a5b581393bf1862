//! Where a tree says it holds a rehearsal. Whether a result is a
//! rehearsal belongs to the result, so the marks are read from wherever
//! they are — run records, README banners, a precomputed accuracy score,
//! the system and nodes descriptions — not from the system file alone: a
//! later submission cannot keep a rehearsal's scenario as a result, a tree
//! holding any rehearsal result is marked as a whole, and `pack` refuses a
//! tree with a mark anywhere in it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use loadgen_node::run_record::{RunRecord, FILE as RECORD_FILE};
use serde_json::Value;

/// How a rehearsal banner starts (evidence.rs writes it).
pub(crate) const BANNER_START: &str = "> **REHEARSAL";

/// The line a precomputed accuracy score carries (accuracy.rs writes it).
pub(crate) const PRECOMPUTED_MARK: &str = "netdiv: REHEARSAL: precomputed";

/// The key of the reasons in the system and nodes descriptions.
pub(crate) const REASONS_KEY: &str = "netdiv_rehearsal";

/// One place that says rehearsal, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mark {
    /// The file that says it.
    pub(crate) path: PathBuf,
    /// Its reason (or what kind of mark it is, where it gives none).
    pub(crate) reason: String,
}

/// Every rehearsal mark in the files under `dir` (none when it does not
/// exist); a record or description that cannot be read is an error, not
/// a clean file.
pub(crate) fn marks_under(dir: &Path) -> Result<Vec<Mark>> {
    let mut marks = Vec::new();
    if dir.is_dir() {
        walk(dir, &mut marks)?;
    }
    Ok(marks)
}

fn walk(dir: &Path, marks: &mut Vec<Mark>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot read {}", dir.display()))?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, marks)?;
        } else {
            marks_of_file(&path, marks)?;
        }
    }
    Ok(())
}

fn marks_of_file(path: &Path, marks: &mut Vec<Mark>) -> Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut mark = |reason: String| {
        marks.push(Mark {
            path: path.to_path_buf(),
            reason,
        })
    };
    if name == RECORD_FILE {
        let record = RunRecord::read(path)?;
        if record.rehearsal && record.rehearsal_reasons.is_empty() {
            mark("its run record says rehearsal".into());
        }
        for reason in record.rehearsal_reasons {
            mark(reason);
        }
    } else if name == "README.md" {
        let text = read(path)?;
        if text.starts_with(BANNER_START) {
            mark("a rehearsal banner".into());
        }
    } else if name == "accuracy.txt" {
        if read(path)?.contains(PRECOMPUTED_MARK) {
            mark("a precomputed accuracy score, not a score of its log".into());
        }
    } else if name.ends_with(".json") && describes_the_system(path) {
        let value: Value = serde_json::from_str(&read(path)?)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        if let Some(reasons) = value.get(REASONS_KEY) {
            let reasons = reasons.as_array().map(Vec::as_slice).unwrap_or_default();
            if reasons.is_empty() {
                mark(format!("{REASONS_KEY} is set"));
            }
            for reason in reasons {
                mark(
                    reason
                        .as_str()
                        .map_or_else(|| reason.to_string(), String::from),
                );
            }
        }
    }
    Ok(())
}

/// A system description (`systems/*.json`) or the nodes' (`nodes.json`).
fn describes_the_system(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "nodes.json")
        || path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "systems")
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The marks as lines, one per file (its first reason, and how many
/// more it gives), the system's descriptions first, each path relative to
/// `base`; at most `limit` files (and a count of the rest).
pub(crate) fn describe(marks: &[Mark], base: &Path, limit: usize) -> Vec<String> {
    let mut files: Vec<(&Path, &str, usize)> = Vec::new();
    for mark in marks {
        match files.iter_mut().find(|(p, _, _)| *p == mark.path) {
            Some((_, _, more)) => *more += 1,
            None => files.push((&mark.path, &mark.reason, 0)),
        }
    }
    files.sort_by_key(|(p, _, _)| !describes_the_system(p));
    let mut lines: Vec<String> = files
        .iter()
        .take(limit)
        .map(|(path, reason, more)| {
            let path = path.strip_prefix(base).unwrap_or(path);
            let more = match more {
                0 => String::new(),
                n => format!(" (and {n} more reason(s))"),
            };
            format!("{}: {reason}{more}", path.display())
        })
        .collect();
    if files.len() > limit {
        lines.push(format!(
            "... and {} more file(s) that say rehearsal",
            files.len() - limit
        ));
    }
    lines
}

/// The distinct reasons of the marks, each with the first file that gives
/// it, leaving out those already in `known`.
pub(crate) fn carried_reasons(marks: &[Mark], base: &Path, known: &[String]) -> Vec<String> {
    let mut seen: BTreeSet<&str> = known.iter().map(String::as_str).collect();
    let mut reasons = Vec::new();
    for mark in marks {
        if seen.insert(mark.reason.as_str()) {
            let path = mark.path.strip_prefix(base).unwrap_or(&mark.path);
            reasons.push(format!(
                "the tree holds a rehearsal's result ({}): {}",
                path.display(),
                mark.reason
            ));
        }
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, name: &str, text: &str) {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn record(rehearsal: bool, reasons: &[&str]) -> String {
        use loadgen_node::run_record::{BandwidthCheck, QdlRecord, SamplesRecord};
        let record = RunRecord {
            schema_version: loadgen_node::run_record::SCHEMA_VERSION,
            netdiv_version: "0.1.0".into(),
            round: "v6.1".into(),
            loadgen: "official".into(),
            loadgen_release: "6.0.17".into(),
            submission_mode: true,
            cpu_latency_us: None,
            benchmark: "resnet50".into(),
            scenario: "Offline".into(),
            samples: SamplesRecord {
                source: "f".into(),
                codec: "none".into(),
                dtype: "uint8".into(),
            },
            nodes: vec![],
            node_changes: vec![],
            qdl: QdlRecord::default(),
            bandwidth: BandwidthCheck::not_made("none"),
            failure: None,
            loadgen_host: None,
            rehearsal,
            rehearsal_reasons: reasons.iter().map(|s| s.to_string()).collect(),
        };
        serde_json::to_string(&record).unwrap()
    }

    #[test]
    fn a_clean_tree_has_no_marks() {
        let root = tempfile::tempdir().unwrap();
        put(root.path(), "systems/sys.json", r#"{"system_name": "x"}"#);
        put(root.path(), "documentation/nodes.json", r#"{"nodes": []}"#);
        put(
            root.path(),
            "results/sys/m/Offline/README.md",
            "# m Offline\n",
        );
        put(
            root.path(),
            "results/sys/m/Offline/accuracy/accuracy.txt",
            "acc=76.1\n",
        );
        put(
            root.path(),
            &format!("results/sys/m/Offline/performance/run_1/{RECORD_FILE}"),
            &record(false, &[]),
        );
        assert_eq!(marks_under(root.path()).unwrap(), []);
        assert_eq!(marks_under(&root.path().join("absent")).unwrap(), []);
    }

    #[test]
    fn every_kind_of_mark_is_found_wherever_it_is() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path();
        put(
            base,
            "systems/sys.json",
            r#"{"netdiv_rehearsal": ["one machine"]}"#,
        );
        put(
            base,
            "documentation/nodes.json",
            r#"{"netdiv_rehearsal": [], "nodes": []}"#,
        );
        put(
            base,
            "results/sys/a/Server/README.md",
            "> **REHEARSAL — x\n# a\n",
        );
        put(
            base,
            "results/sys/a/Server/accuracy/accuracy.txt",
            "acc\nnetdiv: REHEARSAL: precomputed from f, not a score\n",
        );
        put(
            base,
            &format!("results/sys/b/Offline/performance/run_1/{RECORD_FILE}"),
            &record(true, &["a loopback node", "synthetic samples"]),
        );
        put(
            base,
            &format!("results/sys/b/Offline/accuracy/{RECORD_FILE}"),
            &record(true, &[]),
        );
        let marks = marks_under(base).unwrap();
        let lines = describe(&marks, base, 10);
        assert_eq!(
            lines,
            [
                "documentation/nodes.json: netdiv_rehearsal is set",
                "systems/sys.json: one machine",
                "results/sys/a/Server/README.md: a rehearsal banner",
                "results/sys/a/Server/accuracy/accuracy.txt: a precomputed accuracy score, \
                 not a score of its log",
                "results/sys/b/Offline/accuracy/netdiv_run.json: its run record says rehearsal",
                "results/sys/b/Offline/performance/run_1/netdiv_run.json: a loopback node \
                 (and 1 more reason(s))",
            ]
        );
        assert_eq!(
            describe(&marks, base, 2).last().unwrap(),
            "... and 4 more file(s) that say rehearsal"
        );
        let carried = carried_reasons(&marks, base, &["one machine".into()]);
        assert_eq!(carried.len(), 6, "{carried:?}");
        assert!(carried
            .iter()
            .all(|r| r.starts_with("the tree holds a rehearsal's result (")));
    }

    #[test]
    fn an_unreadable_record_is_an_error_not_a_clean_file() {
        let root = tempfile::tempdir().unwrap();
        put(root.path(), RECORD_FILE, "{not json");
        assert!(marks_under(root.path()).is_err());
        put(root.path(), RECORD_FILE, &record(false, &[]));
        put(root.path(), "systems/s.json", "[");
        let err = marks_under(root.path()).unwrap_err();
        assert!(format!("{err:#}").contains("s.json is not JSON"), "{err:#}");
    }
}
