//! `loadgen-node submission`: from sut-nodes to a Network-division tree
//! the official submission checker accepts. For one benchmark of the
//! round's Datacenter suite and each of its scenarios it runs, under the
//! official LoadGen and in submission mode, the performance run, the
//! accuracy run and the compliance tests the checker expects, verifies
//! each compliance test with its official `run_verification.py`, and lays
//! out `network/<submitter>/` ([`tree`]) with the system description
//! ([`system`]). `--check` then runs the official checker ([`checker`]).
//!
//! Each run is a child process (`loadgen-node run --loadgen official
//! --submission-mode ...`, the official LoadGen reads mlperf.conf once per
//! process) writing into a work folder; a finished run is kept, so an
//! interrupted submission resumes where it stopped, and `--fresh` starts
//! over.

pub mod checker;
pub mod system;
pub mod tree;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use loadgen_node::round::Round;
use netdiv_proto::Benchmark;
use serde_json::json;

use super::args::SubmissionArgs;
use super::run::plan::RunPlan;
use tree::Tree;

/// Compliance tests netdiv runs and verifies.
const SUPPORTED_TESTS: &[&str] = &["TEST01", "TEST04", "TEST06"];

/// Flags of `submission` a child `run` does not take, with whether each
/// takes a value.
const SUBMISSION_ONLY: &[(&str, bool)] = &[
    ("--submitter", true),
    ("--system", true),
    ("--system-json", true),
    ("--accuracy-output", true),
    ("--inference", true),
    ("--python", true),
    ("--check", false),
    ("--fresh", false),
    ("--output", true),
    ("--scenario", true),
    ("--mode", true),
    ("--audit-conf", true),
    ("--loadgen", true),
    ("--submission-mode", false),
    ("--no-report", false),
];

/// Runs the whole submission.
pub fn command(args: &SubmissionArgs) -> Result<()> {
    if !cfg!(feature = "official") {
        bail!(
            "a submission's results must come from the official LoadGen, and this loadgen-node \
             was built without it: rebuild with `cargo build --release -p loadgen-node \
             --features official` (needs g++)"
        );
    }
    let run = &args.run;
    if run.network.sut_node.is_empty() {
        bail!("submission needs the sut-nodes: --sut-node URL (repeat for each)");
    }
    // Every run flag checked before any run, as a submission run reads it.
    let mut checked = RunPlan::from_args(run)?;
    checked.submission_mode = true;
    super::run::submission_mode::check_plan(&checked)?;
    let round = checked.round;
    let benchmark = run
        .data
        .benchmark
        .context("submission needs --benchmark (with its accuracy target, e.g. 3d-unet-99)")?;
    if benchmark.accuracy_target().is_none() && !benchmark.spec().accuracy_targets.is_empty() {
        bail!(
            "--benchmark {benchmark}: a submission names its accuracy target ({})",
            benchmark
                .spec()
                .accuracy_targets
                .iter()
                .map(|t| format!("{benchmark}-{t}"))
                .collect::<Vec<_>>()
                .join(" or ")
        );
    }
    let entry = round.suite_entry(&benchmark)?;
    let model = entry.model;
    let scenarios: Vec<String> = match run.scenario {
        Some(s) if s.interactive => vec!["Interactive".into()],
        Some(s) => vec![s.scenario.name().into()],
        None => entry
            .submission_scenarios()
            .into_iter()
            .map(String::from)
            .collect(),
    };
    for scenario in &scenarios {
        round.check_in_suite(&benchmark, scenario)?;
    }
    let inference = checkout(args)?;
    let tests: Vec<&str> = entry
        .compliance
        .iter()
        .copied()
        .filter(|t| SUPPORTED_TESTS.contains(t))
        .collect();
    if let Some(other) = entry
        .compliance
        .iter()
        .find(|t| !SUPPORTED_TESTS.contains(t))
    {
        bail!("{model} needs compliance test {other}, which netdiv does not run yet");
    }
    let accuracy = accuracy_outputs(&args.accuracy_output, &scenarios)?;
    if !tests.is_empty() {
        check_python(&args.python)?;
    }

    std::fs::create_dir_all(&run.output)
        .with_context(|| format!("cannot create {}", run.output.display()))?;
    // Children run in folders of their own: every path they get is whole.
    let root = std::fs::canonicalize(&run.output)
        .with_context(|| format!("cannot find {}", run.output.display()))?;
    let tree = Tree::new(&root, &args.submitter, &args.system, round);
    if args.fresh {
        for dir in [
            tree.work.clone(),
            tree.submitter_dir.join("results").join(&args.system),
        ] {
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("cannot remove {}", dir.display()))?;
            }
        }
    }
    println!(
        "Submission: {model} ({}) for round {round}, scenarios {}, compliance {}; tree in {}",
        benchmark,
        scenarios.join(", "),
        if tests.is_empty() {
            "none".into()
        } else {
            tests.join(", ")
        },
        tree.submitter_dir.display()
    );
    write_system(args, &tree)?;
    for scenario in &scenarios {
        let runs = ScenarioRuns {
            args,
            tree: &tree,
            model,
            scenario,
            inference: &inference,
        };
        runs.run_all(&tests, accuracy.for_scenario(scenario))?;
    }
    write_code_and_docs(args, &tree, model, round, &benchmark)?;
    checker::truncate_accuracy_logs(
        &inference,
        &root,
        &args.submitter,
        &args.python,
        &tree.work.join("full-accuracy-logs"),
    )?;
    println!("Submission tree written: {}", tree.submitter_dir.display());
    if args.check {
        let verdict = checker::run(&inference, &root, round, &args.submitter, &args.python)?;
        print!("{}", verdict.render());
        if !verdict.passed() {
            bail!("the official submission checker found errors (listed above)");
        }
    }
    Ok(())
}

/// The mlcommons/inference checkout: `--inference` or
/// `NETDIV_INFERENCE_REPO`, checked to hold the checker and compliance
/// tests.
fn checkout(args: &SubmissionArgs) -> Result<PathBuf> {
    let dir = args.inference.clone().ok_or_else(|| {
        anyhow!(
            "name a mlcommons/inference checkout (its submission checker and compliance tests \
             are used from there): --inference DIR or NETDIV_INFERENCE_REPO=DIR"
        )
    })?;
    checker::check_checkout(&dir)?;
    Ok(dir)
}

/// Compliance verification needs Python 3 with numpy.
fn check_python(python: &Path) -> Result<()> {
    let out = Command::new(python)
        .args(["-c", "import numpy"])
        .output()
        .with_context(|| format!("cannot run {} (give --python PATH)", python.display()))?;
    if !out.status.success() {
        bail!(
            "{} has no numpy, which the official compliance verification needs: \
             `{} -m pip install numpy` (or give --python PATH to a Python that has it)",
            python.display(),
            python.display()
        );
    }
    Ok(())
}

/// The accuracy script outputs the user gave: one for every scenario, or
/// one per scenario (`SCENARIO=FILE`).
#[derive(Debug)]
struct AccuracyOutputs {
    every: Option<PathBuf>,
    per_scenario: Vec<(String, PathBuf)>,
}

impl AccuracyOutputs {
    fn for_scenario(&self, scenario: &str) -> Option<&Path> {
        self.per_scenario
            .iter()
            .find(|(s, _)| s == scenario)
            .map(|(_, p)| p.as_path())
            .or(self.every.as_deref())
    }
}

fn accuracy_outputs(given: &[String], scenarios: &[String]) -> Result<AccuracyOutputs> {
    let mut outputs = AccuracyOutputs {
        every: None,
        per_scenario: Vec::new(),
    };
    for item in given {
        match item.split_once('=') {
            Some((scenario, path)) if scenarios.iter().any(|s| s == scenario) => {
                outputs
                    .per_scenario
                    .push((scenario.into(), PathBuf::from(path)));
            }
            Some((scenario, _)) if !Path::new(item).exists() => bail!(
                "--accuracy-output {item}: {scenario} is not a scenario of this submission ({})",
                scenarios.join(", ")
            ),
            _ => outputs.every = Some(PathBuf::from(item)),
        }
    }
    for scenario in scenarios {
        match outputs.for_scenario(scenario) {
            Some(path) if !path.is_file() => bail!(
                "--accuracy-output: {} does not exist (the benchmark's accuracy script's output \
                 for {scenario})",
                path.display()
            ),
            Some(_) => {}
            None => bail!(
                "no accuracy result for {scenario}: run the benchmark's accuracy script on the \
                 accuracy log and give its output with --accuracy-output FILE (or \
                 {scenario}=FILE); netdiv has no scorer of its own for MLPerf data sets"
            ),
        }
    }
    Ok(outputs)
}

/// `systems/SYSTEM.json`: the person's fields and the measured ones.
fn write_system(args: &SubmissionArgs, tree: &Tree) -> Result<()> {
    let user = system::read_user_fields(&args.system_json)?;
    let (measured, _, _) = super::sysdesc::measure(&args.run.network)?;
    let merged = system::merge(user, &measured, &args.submitter, &args.system_json)?;
    write(
        &tree.system_json(),
        &(serde_json::to_string_pretty(&merged)? + "\n"),
    )
}

/// The runs of one scenario and their place in the tree.
struct ScenarioRuns<'a> {
    args: &'a SubmissionArgs,
    tree: &'a Tree,
    model: &'a str,
    scenario: &'a str,
    inference: &'a Path,
}

impl ScenarioRuns<'_> {
    fn run_all(&self, tests: &[&str], accuracy_output: Option<&Path>) -> Result<()> {
        let dir = self.tree.scenario_dir(self.model, self.scenario);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;

        let perf = self.child_run("performance", "PerformanceOnly", None)?;
        if let Some(line) = bandwidth_line(&perf) {
            println!("  {} performance: {line}", self.scenario);
        }
        copy_logs(
            &perf,
            &dir.join("performance/run_1"),
            &["detail", "summary"],
        )?;
        let acc = self.child_run("accuracy", "AccuracyOnly", None)?;
        copy_logs(
            &acc,
            &dir.join("accuracy"),
            &["detail", "summary", "accuracy"],
        )?;
        let source = accuracy_output.expect("checked before any run");
        std::fs::copy(source, dir.join("accuracy/accuracy.txt"))
            .with_context(|| format!("cannot copy {}", source.display()))?;
        println!(
            "  {}: accuracy.txt from {} (the benchmark's accuracy script, as given)",
            self.scenario,
            source.display()
        );
        let compliance = self.tree.compliance_dir(self.model, self.scenario);
        for test in tests {
            let audit = checker::audit_config(self.inference, test, self.model)?;
            let run = self.child_run(test, "PerformanceOnly", Some(&audit))?;
            self.verify(test, &run, &dir, &compliance)?;
        }
        let measurements = self.tree.measurements_dir(self.model, self.scenario);
        self.write_confs(&dir, &measurements)?;
        write(
            &measurements.join(self.tree.measurements_file(self.scenario)),
            &(serde_json::to_string_pretty(&self.measurements())? + "\n"),
        )
    }

    /// One official-LoadGen run in a child process; a finished one is
    /// kept (resume), an unfinished one is started over.
    fn child_run(&self, name: &str, mode: &str, audit: Option<&Path>) -> Result<PathBuf> {
        let out = self.tree.run_dir(self.model, self.scenario, name);
        if tree::finished(&out) {
            println!(
                "  {} {name}: kept from an earlier run ({})",
                self.scenario,
                out.display()
            );
            return Ok(out);
        }
        if out.exists() {
            std::fs::remove_dir_all(&out)
                .with_context(|| format!("cannot clear the unfinished run in {}", out.display()))?;
        }
        std::fs::create_dir_all(&out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        println!("  {} {name}: running ({mode})", self.scenario);
        let mut command =
            Command::new(std::env::current_exe().context("cannot find this program")?);
        command
            .arg("run")
            .args(passed_through(std::env::args().skip(2)))
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
        let log = std::fs::File::create(out.join("loadgen-node.log"))?;
        let status = command
            .stdout(log.try_clone()?)
            .stderr(log)
            .status()
            .context("cannot start a child run")?;
        if !status.success() {
            bail!(
                "the {} {name} run failed ({status}); its output is in {}",
                self.scenario,
                out.join("loadgen-node.log").display()
            );
        }
        tree::mark_finished(&out)?;
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
    /// beside the measurements, and the round's mlperf.conf with the runs.
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
                 command.\n",
                self.model,
                self.scenario,
                self.tree.round.release().version
            ),
        )?;
        let mlperf = self.inference.join("loadgen/mlperf.conf");
        if mlperf.is_file() {
            std::fs::copy(&mlperf, dir.join("mlperf.conf"))
                .with_context(|| format!("cannot copy {}", mlperf.display()))?;
        }
        Ok(())
    }

    /// What the measurements file says about the model and the harness.
    fn measurements(&self) -> serde_json::Value {
        let benchmark = self.args.run.data.benchmark.expect("checked");
        json!({
            "input_data_types": benchmark.spec().dtype.name(),
            "retraining": "No",
            "starting_weights_filename": "N/A (netdiv: see code/ and the node's backend)",
            "weight_data_types": "N/A",
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

/// `code/MODEL/README.md` and `documentation/`: how the results were made.
fn write_code_and_docs(
    args: &SubmissionArgs,
    tree: &Tree,
    model: &str,
    round: Round,
    benchmark: &Benchmark,
) -> Result<()> {
    let command: Vec<String> = std::env::args().collect();
    let readme = format!(
        "# {model} with netdiv\n\n\
         Network division, round {round}. The LoadGen node ran the official MLPerf LoadGen \
         {} with netdiv's QDL (loadgen-node {}), over the network to {} sut-node(s).\n\n\
         Benchmark as named to netdiv: `{benchmark}`.\n\n\
         Reproduce with:\n\n```sh\n{}\n```\n",
        round.release().version,
        env!("CARGO_PKG_VERSION"),
        args.run.network.sut_node.len(),
        command.join(" ")
    );
    write(&tree.code_dir(model).join("README.md"), &readme)?;
    let docs = "# Documentation\n\nThe harness is netdiv (https://github.com/netdiv); its \
                docs/network-division.md says how each Network-division rule is met.\n";
    write(&tree.documentation_dir().join("README.md"), docs)
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// This command's flags without the ones a child run gets its own value
/// of, or does not take; file names made absolute.
fn passed_through(args: impl Iterator<Item = String>) -> Vec<String> {
    super::child::run_flags(args, SUBMISSION_ONLY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_get_run_flags_only() {
        let given = [
            "--benchmark",
            "3d-unet-99",
            "--submitter",
            "acme",
            "--check",
            "--sut-node",
            "grpc://10.0.0.2:1",
            "--output=sub",
            "--system-json",
            "s.json",
            "--round",
            "v6.1",
            "--user-conf",
            "/abs/user.conf",
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
                "/abs/user.conf"
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

    #[test]
    fn every_scenario_needs_an_accuracy_result() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("acc.txt");
        std::fs::write(&file, "mean = 0.86").unwrap();
        let scenarios = vec!["Offline".to_string(), "Server".to_string()];
        let every = accuracy_outputs(&[file.display().to_string()], &scenarios).unwrap();
        assert_eq!(every.for_scenario("Server"), Some(file.as_path()));
        let one = format!("Offline={}", file.display());
        let err = accuracy_outputs(&[one], &scenarios)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no accuracy result for Server"), "{err}");
        let err = accuracy_outputs(&["Offline=/nope".into(), "Server=/nope".into()], &scenarios)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nope does not exist"), "{err}");
    }
}
