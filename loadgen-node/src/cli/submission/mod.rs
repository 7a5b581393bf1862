//! `loadgen-node submission`: from sut-nodes to a Network-division tree
//! the official submission checker accepts, and that is a true result or
//! says plainly that it is a rehearsal. For one benchmark of the round's
//! Datacenter suite it checks, before any run, the scenario set and every
//! Network-division rule netdiv can check ([`preflight`], [`rules`]);
//! then, for each scenario, under the official LoadGen and in submission
//! mode, runs the performance run, the accuracy run (scored by the
//! benchmark's own script on the log the tree holds, [`accuracy`]) and the
//! compliance tests the checker expects ([`runs`]), stopping at the first
//! INVALID result; and lays out `network/<submitter>/` ([`tree`]) with the
//! system description ([`system`]) and the evidence a reviewer needs
//! ([`evidence`]). `--check` then runs the official checker ([`checker`]).
//!
//! Each run is a child process (`loadgen-node run --loadgen official
//! --submission-mode ...`, the official LoadGen reads mlperf.conf once per
//! process) writing into a work folder outside the submitter's tree; a
//! finished run is kept while what it ran with is unchanged
//! ([`fingerprint`]), so an interrupted submission resumes where it
//! stopped, and `--fresh` starts a benchmark or a scenario over.

pub(crate) mod accuracy;
pub(crate) mod checker;
pub(crate) mod evidence;
pub(crate) mod fingerprint;
pub(crate) mod pack;
pub(crate) mod preflight;
pub(crate) mod rehearsal;
pub(crate) mod rules;
pub(crate) mod runs;
pub(crate) mod scorer;
pub(crate) mod system;
pub(crate) mod tree;
pub(crate) mod trial;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use loadgen_node::round::Round;
use netdiv_proto::Benchmark;

use super::args::SubmissionArgs;
use super::run::plan::RunPlan;
use accuracy::AccuracySource;
use runs::ScenarioRuns;
use tree::{write, Tree};

/// Compliance tests netdiv runs and verifies.
const SUPPORTED_TESTS: &[&str] = &["TEST01", "TEST04", "TEST06"];

/// What a submission is of: the benchmark, its scenarios and tests.
struct Scope {
    round: Round,
    benchmark: Benchmark,
    entry: &'static loadgen_node::round::SuiteEntry,
    scenarios: Vec<String>,
    tests: Vec<&'static str>,
}

/// The benchmark, scenarios and compliance tests of the flags, each
/// checked against the round's suite.
fn scope(args: &SubmissionArgs, plan: &RunPlan) -> Result<Scope> {
    let run = &args.run;
    let round = plan.round;
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
    if let Some(other) = entry
        .compliance
        .iter()
        .find(|t| !SUPPORTED_TESTS.contains(t))
    {
        bail!(
            "{} needs compliance test {other}, which netdiv does not run yet",
            entry.model
        );
    }
    Ok(Scope {
        round,
        benchmark,
        entry,
        scenarios,
        tests: entry.compliance.to_vec(),
    })
}

/// The plan and scope of the flags, every run flag checked as a
/// submission run reads it.
fn setup(args: &SubmissionArgs) -> Result<(RunPlan, Scope)> {
    let run = &args.run;
    if run.network.sut_node.is_empty() {
        bail!("submission needs the sut-nodes: --sut-node URL (repeat for each)");
    }
    let mut plan = RunPlan::from_args(run)?;
    plan.submission_mode = true;
    plan.check_submission_mode()?;
    let scope = scope(args, &plan)?;
    if let Some(path) = args.diagram.as_deref().filter(|p| !p.is_file()) {
        bail!("--diagram {}: no such file", path.display());
    }
    Ok((plan, scope))
}

/// Runs the whole submission.
pub(crate) fn command(args: &SubmissionArgs) -> Result<()> {
    if !cfg!(feature = "official") {
        bail!(
            "a submission's results must come from the official LoadGen, and this loadgen-node \
             was built without it: rebuild with `cargo build --release -p loadgen-node \
             --features official` (needs g++)"
        );
    }
    let run = &args.run;
    let (plan, scope) = setup(args)?;
    let inference = checkout(args)?;
    let accuracy = AccuracySource::from_flags(
        args.accuracy_script.as_deref(),
        &args.accuracy_output,
        &scope.scenarios,
        run.rehearsal,
    )?;
    if !scope.tests.is_empty() {
        check_python(&args.python)?;
    }
    let tree = prepare_tree(args, scope.round)?;
    if let Some(fresh) = &args.fresh {
        let scenarios = fresh_scenarios(fresh.as_deref(), &scope)?;
        start_over(&tree, scope.entry.model, &scenarios)?;
    }
    if !run.rehearsal {
        refuse_kept_rehearsals(&tree, &scope)?;
    }
    let incomplete = preflight::check_scenario_set(
        scope.entry,
        scope.round.name(),
        &scope.scenarios,
        &tree.finished_scenarios(scope.entry.model),
    );
    let mut checked = match incomplete {
        // A rehearsal may try one scenario; the tree says it is incomplete.
        Err(e) if run.rehearsal => {
            println!("rehearsal: {e:#}");
            let mut checked = preflight(args, &plan, &scope)?;
            checked.reasons.push(format!("{e:#}"));
            checked
        }
        Err(e) => return Err(e),
        Ok(()) => preflight(args, &plan, &scope)?,
    };
    checked.reasons.dedup();
    println!(
        "Submission: {} ({}) for round {}, scenarios {}, compliance {}; tree in {}",
        scope.entry.model,
        scope.benchmark,
        scope.round,
        scope.scenarios.join(", "),
        if scope.tests.is_empty() {
            "none".into()
        } else {
            scope.tests.join(", ")
        },
        tree.submitter_dir.display()
    );
    write_system(args, &tree)?;
    let qsl_type = plan
        .qsl()?
        .store
        .source()
        .element_type()
        .map_or("unknown", |d| d.name())
        .to_string();
    let mut reasons = checked.reasons;
    for scenario in &scope.scenarios {
        let runs = ScenarioRuns {
            args,
            tree: &tree,
            model: scope.entry.model,
            scenario,
            inference: &inference,
            accuracy: &accuracy,
            input_data_type: &qsl_type,
            nodes: &checked.nodes,
        };
        reasons.extend(runs.run_all(&scope.tests)?.invalid);
    }
    finish(args, &tree, &scope, &inference, &checked.nodes, &reasons)
}

/// `loadgen-node preflight`: the submission's checks alone, one line per
/// check, failing on any that would make the submission refuse or the
/// checker reject it.
pub(crate) fn preflight_command(args: &SubmissionArgs) -> Result<()> {
    let (plan, scope) = setup(args)?;
    let scenario_set =
        preflight::check_scenario_set(scope.entry, scope.round.name(), &scope.scenarios, &[]);
    let pre = checks(args, &plan, &scope, true)?;
    println!(
        "Preflight of {} ({}) for round {}, scenarios {}:",
        scope.entry.model,
        scope.benchmark,
        scope.round,
        scope.scenarios.join(", ")
    );
    match &scenario_set {
        Ok(()) => println!("  ok    the scenarios are those the round's checker requires"),
        Err(e) => println!("  FAIL  {e:#}"),
    }
    for line in pre.lines() {
        println!("  {line}");
    }
    let failed = pre.errors.len() + pre.findings.len() + usize::from(scenario_set.is_err());
    if failed > 0 {
        bail!(
            "preflight: {failed} check(s) failed: `submission` would refuse this (or the \
             checker reject it)"
        );
    }
    println!("preflight: every check held");
    Ok(())
}

/// The preflight's verdict: the nodes, and the reasons a rehearsal
/// carries (empty for a true result).
struct Checked {
    nodes: Vec<(String, netdiv_proto::pb::NodeInfo)>,
    reasons: Vec<String>,
}

/// The checks of [`preflight::run`] for these flags, with the Offline
/// trial when `trial` (a submission that will be refused skips it).
fn checks(
    args: &SubmissionArgs,
    plan: &RunPlan,
    scope: &Scope,
    trial: bool,
) -> Result<preflight::Preflight> {
    let user = system::read_user_fields(&args.system_json)?;
    let mut pre = preflight::run(
        plan,
        &preflight::Inputs {
            entry: scope.entry,
            scenarios: &scope.scenarios,
            system: &user,
            compression_approved: args.compression_approved.as_deref(),
            attested_virtual_machines: args.attest_virtual_machines.as_deref(),
            attested_remote_engine: args.attest_remote_engine.as_deref(),
            diagram: args.diagram.as_deref(),
        },
    )?;
    pre.findings.extend(scorer::finding(
        args.accuracy_script.as_deref(),
        args.inference.as_deref(),
        scope.entry.model,
        args.attest_scorer.as_deref(),
    ));
    if trial && scope.scenarios.iter().any(|s| s == "Offline") {
        pre.warnings.extend(trial::offline_warning(plan));
    }
    Ok(pre)
}

/// Runs the checks before any run: refuses with every reason at once, or
/// for a rehearsal says them and returns them.
fn preflight(args: &SubmissionArgs, plan: &RunPlan, scope: &Scope) -> Result<Checked> {
    let mut pre = checks(args, plan, scope, false)?;
    let refused = !pre.errors.is_empty() || (!pre.findings.is_empty() && !args.run.rehearsal);
    // The trial costs seconds of the nodes' time: only for a run that goes on.
    if !refused && scope.scenarios.iter().any(|s| s == "Offline") {
        pre.warnings.extend(trial::offline_warning(plan));
    }
    for line in pre.lines() {
        println!("preflight: {line}");
    }
    if !pre.errors.is_empty() {
        bail!(
            "the preflight failed; nothing was run:\n  {}",
            pre.errors.join("\n  ")
        );
    }
    let reasons: Vec<String> = pre.findings.iter().map(ToString::to_string).collect();
    if !reasons.is_empty() && !args.run.rehearsal {
        bail!(
            "this submission would not be a Network-division result; nothing was run:\n  {}\n\
             (--rehearsal runs anyway and marks the tree as a rehearsal)",
            reasons.join("\n  ")
        );
    }
    for reason in &reasons {
        println!("rehearsal: {reason}");
    }
    Ok(Checked {
        nodes: pre.nodes,
        reasons,
    })
}

/// The tree's root and work folder, created.
fn prepare_tree(args: &SubmissionArgs, round: Round) -> Result<Tree> {
    let output = &args.run.output;
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    // Children run in folders of their own: every path they get is whole.
    let root = std::fs::canonicalize(output)
        .with_context(|| format!("cannot find {}", output.display()))?;
    Ok(Tree::new(&root, &args.submitter, &args.system, round))
}

/// The scenarios `--fresh` starts over: all of this benchmark's (no
/// value), or the one it names, with or without this benchmark's name.
fn fresh_scenarios(fresh: Option<&str>, scope: &Scope) -> Result<Vec<String>> {
    const ALL: [&str; 5] = [
        "Offline",
        "Server",
        "Interactive",
        "SingleStream",
        "MultiStream",
    ];
    let Some(value) = fresh else {
        return Ok(ALL.map(String::from).to_vec());
    };
    let (benchmark, scenario) = match value.rsplit_once('/') {
        Some((b, s)) => (Some(b), s),
        None if ALL.contains(&value) => (None, value),
        None => (Some(value), ""),
    };
    if let Some(name) = benchmark {
        let named = Benchmark::parse(name).map_err(|e| anyhow::anyhow!("--fresh {value}: {e}"))?;
        if named != scope.benchmark {
            bail!(
                "--fresh {value} names {named}, but this submission runs {}: give its name, a \
                 scenario of it, or --fresh alone (another benchmark's runs are never dropped \
                 from here)",
                scope.benchmark
            );
        }
    }
    if scenario.is_empty() {
        return Ok(ALL.map(String::from).to_vec());
    }
    if !ALL.contains(&scenario) {
        bail!(
            "--fresh {value}: {scenario:?} is not a scenario ({})",
            ALL.join(", ")
        );
    }
    Ok(vec![scenario.to_string()])
}

/// Drops the earlier runs and results of `scenarios` of this benchmark:
/// the work folders and each place in the tree they were laid into.
fn start_over(tree: &Tree, model: &str, scenarios: &[String]) -> Result<()> {
    for scenario in scenarios {
        let places = [
            tree.work.join(model).join(scenario),
            tree.scenario_dir(model, scenario),
            tree.compliance_dir(model, scenario),
            tree.measurements_dir(model, scenario),
        ];
        for dir in places.iter().filter(|d| d.exists()) {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot remove {}", dir.display()))?;
            println!("fresh: dropped {}", dir.display());
        }
    }
    Ok(())
}

/// A result cannot stand on a rehearsal's: a scenario of this benchmark
/// that the tree keeps from an earlier submission (this one does not redo
/// it) and whose files say rehearsal refuses the submission, before any
/// run.
fn refuse_kept_rehearsals(tree: &Tree, scope: &Scope) -> Result<()> {
    let model = scope.entry.model;
    for scenario in tree.finished_scenarios(model) {
        if scope.scenarios.contains(&scenario) {
            continue;
        }
        let mut places = vec![
            tree.scenario_dir(model, &scenario),
            tree.measurements_dir(model, &scenario),
            tree.compliance_dir(model, &scenario),
        ];
        places.dedup();
        let mut marks = Vec::new();
        for place in &places {
            marks.extend(rehearsal::marks_under(place)?);
        }
        if !marks.is_empty() {
            bail!(
                "the tree keeps {model} {scenario} from a rehearsal, and a result cannot keep a \
                 rehearsal's scenario; nothing was run:\n  {}\n\
                 Redo it as a result (--scenario {scenario} --fresh {}/{scenario}), or \
                 give --rehearsal",
                rehearsal::describe(&marks, &tree.submitter_dir, 6).join("\n  "),
                scope.benchmark
            );
        }
    }
    Ok(())
}

/// After the runs: the documentation and code folders, the truncated
/// accuracy logs, the rehearsal's marks, the verdict line and, with
/// `--check`, the official checker's.
fn finish(
    args: &SubmissionArgs,
    tree: &Tree,
    scope: &Scope,
    inference: &Path,
    nodes: &[(String, netdiv_proto::pb::NodeInfo)],
    reasons: &[String],
) -> Result<()> {
    evidence::write_documentation(
        tree,
        args.diagram.as_deref(),
        nodes,
        args.compression_approved.as_deref(),
        &attestations(args),
    )?;
    write_code(args, tree, scope.entry.model, scope.round, &scope.benchmark)?;
    let root = tree
        .submitter_dir
        .parent()
        .and_then(Path::parent)
        .context("the tree's root")?
        .to_path_buf();
    checker::truncate_accuracy_logs(
        inference,
        &root,
        &args.submitter,
        &args.python,
        &tree.work.join("full-accuracy-logs"),
    )?;
    // Another benchmark's rehearsal results make the whole tree one (a
    // rehearsal is marked anyway, with its own reasons).
    let mut reasons = reasons.to_vec();
    if !args.run.rehearsal {
        let marks = rehearsal::marks_under(&tree.submitter_dir)?;
        reasons.extend(rehearsal::carried_reasons(
            &marks,
            &tree.submitter_dir,
            &reasons,
        ));
    }
    if args.run.rehearsal || !reasons.is_empty() {
        evidence::mark_rehearsal(tree, &reasons)?;
    }
    println!("Submission tree written: {}", tree.submitter_dir.display());
    if reasons.is_empty() {
        println!("Every result in the tree is VALID, and no rule netdiv checks is broken.");
    } else {
        println!(
            "REHEARSAL, not a result: {} reason(s), each in the tree (systems/{}.json \
             and documentation/nodes.json netdiv_rehearsal, every README and run record).",
            reasons.len(),
            args.system
        );
    }
    if args.check {
        let verdict = checker::run(inference, &root, scope.round, &args.submitter, &args.python)?;
        print!("{}", verdict.render());
        if !verdict.passed() {
            bail!("the official submission checker found errors (listed above)");
        }
    }
    Ok(())
}

/// The submitter's attestations, each with what it attests to.
fn attestations(args: &SubmissionArgs) -> Vec<(&'static str, String)> {
    [
        (
            "the machines are separate although under a hypervisor",
            &args.attest_virtual_machines,
        ),
        (
            "where the nodes' serving engines run",
            &args.attest_remote_engine,
        ),
        (
            "the accuracy scorer gives the benchmark's official score",
            &args.attest_scorer,
        ),
    ]
    .into_iter()
    .filter_map(|(what, text)| text.clone().map(|t| (what, t)))
    .collect()
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

/// `systems/SYSTEM.json`: the person's fields and the measured ones.
fn write_system(args: &SubmissionArgs, tree: &Tree) -> Result<()> {
    let user = system::read_user_fields(&args.system_json)?;
    let measured = super::sysdesc::measure(&args.run.network)?.fields;
    let merged = system::merge(user, &measured, &args.submitter, &args.system_json)?;
    write(
        &tree.system_json(),
        &(serde_json::to_string_pretty(&merged)? + "\n"),
    )
}

/// `src/MODEL/README.md` (v5.x `code/`): how the results were made.
fn write_code(
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
         {} with netdiv's QDL (loadgen-node {}), over the network to {} sut-node(s). The \
         QDL's source above the session layer is in documentation/netdiv-qdl-source.tar.\n\n\
         Benchmark as named to netdiv: `{benchmark}`.\n\n\
         Reproduce with:\n\n```sh\n{}\n```\n",
        round.release().version,
        env!("CARGO_PKG_VERSION"),
        args.run.network.sut_node.len(),
        command.join(" ")
    );
    write(&tree.code_dir(model).join("README.md"), &readme)
}
