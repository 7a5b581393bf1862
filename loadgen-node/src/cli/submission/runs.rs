//! The runs of one scenario of a submission, each a child `loadgen-node
//! run --loadgen official --submission-mode` in a work folder (the
//! official LoadGen reads mlperf.conf once per process), then laid into
//! the tree: the performance run, the accuracy run scored by the
//! benchmark's own script, and the compliance tests verified by their
//! official scripts. Each run's verdict is read from its own logs as it
//! ends: an INVALID result stops the submission (or, for a rehearsal, is
//! carried in the tree as a reason) before another run is spent.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::json;

use super::accuracy::AccuracySource;
use super::fingerprint;
use super::tree::{self, write, Tree};
use super::{checker, SubmissionArgs};
use crate::cli::verdict::Verdict;

/// Flags of `submission` a child `run` does not take, with whether each
/// takes a value.
pub(crate) const SUBMISSION_ONLY: &[(&str, bool)] = &[
    ("--submitter", true),
    ("--system", true),
    ("--system-json", true),
    ("--accuracy-output", true),
    ("--accuracy-script", true),
    ("--diagram", true),
    ("--compression-approved", true),
    ("--attest-virtual-machines", true),
    ("--attest-remote-engine", true),
    ("--attest-scorer", true),
    ("--weights-file", true),
    ("--weight-data-types", true),
    ("--inference", true),
    ("--python", true),
    ("--check", false),
    ("--stop-on-invalid", false),
    ("--fresh", false),
    ("--output", true),
    ("--scenario", true),
    ("--mode", true),
    ("--audit-conf", true),
    ("--loadgen", true),
    ("--submission-mode", false),
    ("--no-report", false),
];

/// The runs of one scenario and their place in the tree.
pub(crate) struct ScenarioRuns<'a> {
    pub(crate) args: &'a SubmissionArgs,
    pub(crate) tree: &'a Tree,
    pub(crate) model: &'a str,
    pub(crate) scenario: &'a str,
    pub(crate) inference: &'a Path,
    pub(crate) accuracy: &'a AccuracySource,
    /// The element type the samples are sent in (measurements.json).
    pub(crate) input_data_type: &'a str,
    /// The nodes the preflight found (what a kept run must have run on).
    pub(crate) nodes: &'a [(String, netdiv_proto::pb::NodeInfo)],
}

/// What one scenario's runs found that a rehearsal carries on with.
#[derive(Default)]
pub(crate) struct ScenarioOutcome {
    /// Verdicts that were not VALID, each with its reasons.
    pub(crate) invalid: Vec<String>,
}

impl ScenarioRuns<'_> {
    /// Every run of the scenario, in order; the first INVALID one ends the
    /// submission unless it is a rehearsal.
    pub(crate) fn run_all(&self, tests: &[&str]) -> Result<ScenarioOutcome> {
        let mut outcome = ScenarioOutcome::default();
        let dir = self.tree.scenario_dir(self.model, self.scenario);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;

        let perf = self.child_run("performance", "PerformanceOnly", None)?;
        self.judge("performance", &perf, &mut outcome)?;
        if let Some(line) = bandwidth_line(&perf) {
            println!("  {} performance: {line}", self.scenario);
        }
        let perf_dir = dir.join("performance/run_1");
        copy_logs(&perf, &perf_dir, &["detail", "summary"])?;
        copy_record(&perf, &perf_dir)?;
        let acc = self.child_run("accuracy", "AccuracyOnly", None)?;
        copy_logs(
            &acc,
            &dir.join("accuracy"),
            &["detail", "summary", "accuracy"],
        )?;
        copy_record(&acc, &dir.join("accuracy"))?;
        // The log the tree holds (before truncation) is the one scored.
        let log = dir.join("accuracy/mlperf_log_accuracy.json");
        let (text, said) = self.accuracy.accuracy_txt(self.scenario, &log, &acc)?;
        if matches!(self.accuracy, AccuracySource::Script(_)) {
            let missing = super::scorer::missing_metrics(
                self.inference,
                &self.args.python,
                self.tree.round.name(),
                self.model,
                &text,
            )?;
            if !missing.is_empty() {
                write(&acc.join("accuracy.txt"), &text)?;
                bail!(
                    "the accuracy script's output for {} holds no {} line in the form the \
                     round's checker reads (its output: {}); a scorer must score",
                    self.scenario,
                    missing.join(", "),
                    acc.join("accuracy.txt").display()
                );
            }
        }
        write(&dir.join("accuracy/accuracy.txt"), &text)?;
        println!("  {} accuracy: accuracy.txt {said}", self.scenario);
        let compliance = self.tree.compliance_dir(self.model, self.scenario);
        for test in tests {
            let audit = checker::audit_config(self.inference, test, self.model)?;
            let run = self.child_run(test, "PerformanceOnly", Some(&audit))?;
            // The checker reads TEST01's and TEST04's performance logs.
            if *test != "TEST06" {
                self.judge(test, &run, &mut outcome)?;
            }
            self.verify(test, &run, &dir, &compliance)?;
            copy_record(&run, &compliance.join(test))?;
        }
        let measurements = self.tree.measurements_dir(self.model, self.scenario);
        self.write_confs(&dir, &measurements)?;
        write(
            &measurements.join(self.tree.measurements_file(self.scenario)),
            &(serde_json::to_string_pretty(&self.measurements())? + "\n"),
        )?;
        Ok(outcome)
    }

    /// Reads `name`'s verdict from its own logs and says it; an INVALID
    /// one stops the submission with its reasons and what to change, or,
    /// for a rehearsal, is noted.
    fn judge(&self, name: &str, run: &Path, outcome: &mut ScenarioOutcome) -> Result<()> {
        let verdict = Verdict::read(run)?;
        println!("  {} {name}: {}", self.scenario, verdict.line());
        if verdict.valid {
            return Ok(());
        }
        let what = format!(
            "the {} {name} run is INVALID: {}",
            self.scenario,
            verdict.why()
        );
        if an_invalid_run_stops(self.args.run.rehearsal, self.args.stop_on_invalid) {
            bail!(
                "{what}\n(logs: {}; no further run was started)",
                run.join("mlperf_log_summary.txt").display()
            );
        }
        println!(
            "  {} {name}: rehearsal: carried on, and the tree says so",
            self.scenario
        );
        outcome.invalid.push(what);
        Ok(())
    }

    /// One official-LoadGen run in a child process; a finished one is
    /// kept (resume) while what it ran with is unchanged, else, like an
    /// unfinished one, started over.
    fn child_run(&self, name: &str, mode: &str, audit: Option<&Path>) -> Result<PathBuf> {
        let out = self.tree.run_dir(self.model, self.scenario, name);
        let mut command = crate::cli::child::run_command("submission", SUBMISSION_ONLY)?;
        command
            .args(["--loadgen", "official", "--submission-mode"])
            // No report in the run folders the official verification
            // scripts read: `loadgen-node report` renders one afterwards.
            .arg("--no-report")
            .args(["--scenario", self.scenario, "--mode", mode])
            .arg("--output")
            .arg(&out)
            // The official LoadGen looks for audit.config in its working
            // directory: the run's own folder, so no stray file applies.
            .current_dir(&out);
        if let Some(audit) = audit {
            command.arg("--audit-conf").arg(audit);
        }
        let fingerprint = fingerprint::of(&command, self.nodes);
        if tree::finished(&out) {
            let changed = fingerprint::changes(tree::finished_with(&out).as_ref(), &fingerprint);
            if changed.is_empty() {
                println!(
                    "  {} {name}: kept from an earlier run ({})",
                    self.scenario,
                    out.display()
                );
                return Ok(out);
            }
            println!(
                "  {} {name}: redone: since the earlier run, changed: {}",
                self.scenario,
                changed.join("; ")
            );
        }
        if out.exists() {
            std::fs::remove_dir_all(&out)
                .with_context(|| format!("cannot clear the earlier run in {}", out.display()))?;
        }
        std::fs::create_dir_all(&out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        println!("  {} {name}: running ({mode})", self.scenario);
        crate::cli::child::run_logged(
            command,
            &format!("{} {name}", self.scenario),
            &out.join("loadgen-node.log"),
        )?;
        tree::mark_finished(&out, &fingerprint)?;
        Ok(out)
    }

    /// The compliance test's official verification, writing `TESTxx/`
    /// beside the scenario's runs; its verdict must be a pass.
    fn verify(&self, test: &str, run: &Path, scenario_dir: &Path, output: &Path) -> Result<()> {
        let script = self
            .inference
            .join("compliance")
            .join(test)
            .join("run_verification.py");
        let mut command = Command::new(&self.args.python);
        command.arg(&script);
        if test == "TEST06" {
            // TEST06 reads the compliance run alone (first tokens, EOS,
            // token counts); its token ids are int32, as netdiv sends them.
            command.args(["-s", self.scenario]);
        } else {
            command.arg("-r").arg(scenario_dir);
        }
        command
            .arg("-c")
            .arg(run)
            .arg("-o")
            .arg(output)
            .current_dir(run);
        let out = command
            .output()
            .with_context(|| format!("cannot run {}", script.display()))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        write(&run.join("verification.log"), &text)?;
        let failed: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("TEST FAIL") || l.ends_with(": False"))
            .collect();
        if !out.status.success() || !failed.is_empty() || !text.contains("verification complete") {
            let shown = if failed.is_empty() {
                text.trim().to_string()
            } else {
                failed.join("\n")
            };
            bail!(
                "{test} of {} did not pass its official verification ({}):\n{}\n(full output: {})",
                self.scenario,
                script.display(),
                shown,
                run.join("verification.log").display()
            );
        }
        println!(
            "  {} {test}: verified ({})",
            self.scenario,
            script.display()
        );
        Ok(())
    }

    /// user.conf as given (or a comment saying none was) and a README
    /// beside the measurements, and the round's own mlperf.conf (the one
    /// its LoadGen ran with) with the runs.
    fn write_confs(&self, dir: &Path, measurements: &Path) -> Result<()> {
        let user = match &self.args.run.user_conf {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?,
            None => "# netdiv: no user.conf was given; mlperf.conf applies as it is.\n".into(),
        };
        write(&measurements.join("user.conf"), &user)?;
        write(
            &measurements.join("README.md"),
            &format!(
                "# {} {}\n\nRun by netdiv's `loadgen-node submission` with the official LoadGen \
                 {} over the network (Network division); see src/ (v5.x: code/) for the \
                 command and documentation/ for the QDL's source and the nodes.\n",
                self.model,
                self.scenario,
                self.tree.round.release().version
            ),
        )?;
        write(&dir.join("mlperf.conf"), self.tree.round.mlperf_conf())
    }

    /// What the measurements file says about the model and the harness.
    fn measurements(&self) -> serde_json::Value {
        json!({
            "input_data_types": self.input_data_type,
            "retraining": "No",
            "starting_weights_filename": self.args.weights_file,
            "weight_data_types": self.args.weight_data_types,
            "weight_transformations": "No",
            "network_harness": format!(
                "netdiv loadgen-node {} (QDL) with the official LoadGen {}",
                env!("CARGO_PKG_VERSION"),
                self.tree.round.release().version
            ),
        })
    }
}

/// The bandwidth check of a run's record, in one line.
fn bandwidth_line(run: &Path) -> Option<String> {
    let record = loadgen_node::run_record::RunRecord::read_in(run).ok()??;
    let line = record.bandwidth.summary()?;
    Some(format!(
        "{line}; see {}",
        run.join(loadgen_node::run_record::FILE).display()
    ))
}

/// Copies the logs a tree folder holds (`detail`, `summary`, `accuracy`).
fn copy_logs(from: &Path, to: &Path, which: &[&str]) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for kind in which {
        let name = match *kind {
            "accuracy" => "mlperf_log_accuracy.json".to_string(),
            other => format!("mlperf_log_{other}.txt"),
        };
        std::fs::copy(from.join(&name), to.join(&name))
            .with_context(|| format!("cannot copy {}", from.join(&name).display()))?;
    }
    Ok(())
}

/// The run's record beside its logs in the tree.
fn copy_record(run: &Path, to: &Path) -> Result<()> {
    let name = loadgen_node::run_record::FILE;
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    std::fs::copy(run.join(name), to.join(name))
        .with_context(|| format!("cannot copy {}", run.join(name).display()))?;
    Ok(())
}

/// Whether an INVALID run ends the submission: always for a result (no
/// INVALID run can be part of one), and for a rehearsal only when asked
/// (`--stop-on-invalid`); otherwise the rehearsal carries on, marked.
fn an_invalid_run_stops(rehearsal: bool, stop_on_invalid: bool) -> bool {
    !rehearsal || stop_on_invalid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_run_ends_every_submission_that_is_not_a_rehearsal() {
        // A result stops at an INVALID run, whatever --stop-on-invalid
        // says; a rehearsal carries on unless told to stop. (On one
        // machine every submission is a rehearsal, so the integration
        // test reaches the stop through --stop-on-invalid only.)
        assert!(an_invalid_run_stops(false, false));
        assert!(an_invalid_run_stops(false, true));
        assert!(an_invalid_run_stops(true, true));
        assert!(!an_invalid_run_stops(true, false));
    }

    fn passed_through(args: impl Iterator<Item = String>) -> Vec<String> {
        crate::cli::child::run_flags(args, SUBMISSION_ONLY)
    }

    #[test]
    fn children_get_run_flags_only() {
        let given = [
            "--benchmark",
            "3d-unet-99",
            "--submitter",
            "acme",
            "--check",
            "--fresh",
            "resnet50/Offline",
            "--sut-node",
            "grpc://10.0.0.2:1",
            "--fresh",
            "--output=sub",
            "--system-json",
            "s.json",
            "--round",
            "v6.1",
            "--user-conf",
            "/abs/user.conf",
            "--accuracy-script",
            "score {log}",
            "--rehearsal",
        ]
        .map(String::from);
        assert_eq!(
            passed_through(given.into_iter()),
            [
                "--benchmark",
                "3d-unet-99",
                "--sut-node",
                "grpc://10.0.0.2:1",
                "--round",
                "v6.1",
                "--user-conf",
                "/abs/user.conf",
                "--rehearsal"
            ]
        );
        let relative = [
            "--user-conf".to_string(),
            "u.conf".to_string(),
            "--data-dir=d".into(),
        ];
        let kept = passed_through(relative.into_iter());
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(kept[1], cwd.join("u.conf").display().to_string());
        assert_eq!(kept[2], format!("--data-dir={}", cwd.join("d").display()));
    }
}
