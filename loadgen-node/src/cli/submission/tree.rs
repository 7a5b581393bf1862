//! Where everything of a Network-division submission goes: the tree the
//! official submission checker reads (`network/<submitter>/...`), and a
//! work folder beside it for the raw runs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::fingerprint::Fingerprint;

use loadgen_node::round::Round;

/// The paths of one submitter's tree under a submission root, laid out
/// as the checker of its round reads it: v6.x keeps measurements and
/// compliance results in each scenario's folder and the code in `src/`;
/// v5.x has `measurements/` and `compliance/` trees and `code/`.
pub(crate) struct Tree {
    /// The round whose layout applies.
    pub(crate) round: Round,
    /// `ROOT/network/SUBMITTER`.
    pub(crate) submitter_dir: PathBuf,
    /// The system's name (`systems/NAME.json`, `results/NAME/`).
    pub(crate) system: String,
    /// Raw runs, resumable: `ROOT/.netdiv-work/SYSTEM`.
    pub(crate) work: PathBuf,
}

impl Tree {
    /// The tree of `submitter`'s `system` under `root` (the folder the
    /// checker's `--input` names).
    pub(crate) fn new(root: &Path, submitter: &str, system: &str, round: Round) -> Tree {
        Tree {
            round,
            submitter_dir: root.join("network").join(submitter),
            system: system.to_string(),
            work: root.join(".netdiv-work").join(system),
        }
    }

    /// `systems/SYSTEM.json`.
    pub(crate) fn system_json(&self) -> PathBuf {
        self.submitter_dir
            .join("systems")
            .join(format!("{}.json", self.system))
    }

    /// `results/SYSTEM/MODEL/SCENARIO`.
    pub(crate) fn scenario_dir(&self, model: &str, scenario: &str) -> PathBuf {
        self.submitter_dir
            .join("results")
            .join(&self.system)
            .join(model)
            .join(scenario)
    }

    /// Whether this round's checker reads v5.x's separate trees.
    fn separate_trees(&self) -> bool {
        self.round < Round::V6_0
    }

    /// Where measurements.json (v5.x: `SYSTEM_SCENARIO.json`), user.conf
    /// and README.md go.
    pub(crate) fn measurements_dir(&self, model: &str, scenario: &str) -> PathBuf {
        if self.separate_trees() {
            self.submitter_dir
                .join("measurements")
                .join(&self.system)
                .join(model)
                .join(scenario)
        } else {
            self.scenario_dir(model, scenario)
        }
    }

    /// The measurements file's name.
    pub(crate) fn measurements_file(&self, scenario: &str) -> String {
        if self.separate_trees() {
            format!("{}_{scenario}.json", self.system)
        } else {
            "measurements.json".into()
        }
    }

    /// The folder the compliance tests' `TESTxx/` folders go in.
    pub(crate) fn compliance_dir(&self, model: &str, scenario: &str) -> PathBuf {
        if self.separate_trees() {
            self.submitter_dir
                .join("compliance")
                .join(&self.system)
                .join(model)
                .join(scenario)
        } else {
            self.scenario_dir(model, scenario)
        }
    }

    /// The source code folder (`src/MODEL`, v5.x `code/MODEL`).
    pub(crate) fn code_dir(&self, model: &str) -> PathBuf {
        let name = if self.separate_trees() { "code" } else { "src" };
        self.submitter_dir.join(name).join(model)
    }

    /// `documentation/`.
    pub(crate) fn documentation_dir(&self) -> PathBuf {
        self.submitter_dir.join("documentation")
    }

    /// The scenarios of `model` whose results the tree already holds (a
    /// performance run laid out by an earlier submission).
    pub(crate) fn finished_scenarios(&self, model: &str) -> Vec<String> {
        let dir = self
            .submitter_dir
            .join("results")
            .join(&self.system)
            .join(model);
        let mut found: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.path()
                            .join("performance/run_1/mlperf_log_detail.txt")
                            .is_file()
                    })
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    }

    /// The raw output of one run (`performance`, `accuracy`, `TEST01`).
    pub(crate) fn run_dir(&self, model: &str, scenario: &str, run: &str) -> PathBuf {
        self.work.join(model).join(scenario).join(run)
    }
}

/// Whether a run folder holds a finished run: its summary and detail logs
/// were written (the LoadGen writes the summary last).
pub(crate) fn finished(run_dir: &Path) -> bool {
    run_dir.join("mlperf_log_summary.txt").is_file()
        && run_dir.join("mlperf_log_detail.txt").is_file()
        && run_dir.join(".netdiv-finished").is_file()
}

/// Marks a run folder finished (the child exited successfully), with what
/// it ran with.
pub(crate) fn mark_finished(run_dir: &Path, fingerprint: &Fingerprint) -> std::io::Result<()> {
    std::fs::write(
        run_dir.join(".netdiv-finished"),
        serde_json::to_string_pretty(fingerprint)? + "\n",
    )
}

/// What a finished run ran with (`None` when its mark does not say).
pub(crate) fn finished_with(run_dir: &Path) -> Option<Fingerprint> {
    let text = std::fs::read_to_string(run_dir.join(".netdiv-finished")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes `text` to `path`, making its folder first.
pub(crate) fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
