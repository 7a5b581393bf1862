//! `loadgen-node audit`: a demonstration, for an auditor, that a netdiv
//! system follows the Network-division rules, run from the LoadGen node
//! against the real sut-nodes. Each step says what it proves and which
//! rule it serves, measures it, and passes or fails:
//!
//! 1. every node's Name() round trip, and the aggregated name;
//! 2. Name() failing while a node is cut off (`--partition-cmd`), and
//!    answering again once healed (`--heal-cmd`);
//! 3. the bytes per sample on the wire, against docs/session-layer.md;
//! 4. a delay added on the fabric raising the measured latency by it;
//! 5. TEST04 with the official verification: the SUT caches nothing;
//! 6. the run reports to look at.
//!
//! Steps 3 and 4 put a TCP relay of this process ([`relay`]) between the
//! QDL and each gRPC node; runs are child `loadgen-node run` processes, as
//! a person would start them.

mod relay;
mod steps;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::args::AuditArgs;

/// How a step ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// It showed what it proves.
    Pass,
    /// It showed the opposite, or could not show it: why.
    Fail(String),
    /// It was not run here: why, and what would run it. An audit with a
    /// step not run is incomplete, never passed.
    NotRun(String),
}

/// One step of the demonstration.
pub(crate) struct Step {
    /// Short name (`name`, `partition`, `wire`, `delay`, `test04`, `report`).
    pub(crate) id: &'static str,
    /// What it proves.
    pub(crate) proves: &'static str,
    /// The rule it serves.
    pub(crate) rule: &'static str,
    /// What it measured, one line each.
    pub(crate) lines: Vec<String>,
    /// Its verdict.
    pub(crate) outcome: Outcome,
}

impl Step {
    fn new(id: &'static str, proves: &'static str, rule: &'static str) -> Step {
        Step {
            id,
            proves,
            rule,
            lines: Vec::new(),
            outcome: Outcome::Pass,
        }
    }

    fn print(&self, number: usize, of: usize) {
        println!("\n[{number}/{of}] {}: {}", self.id, self.proves);
        println!("      rule: {}", self.rule);
        for line in &self.lines {
            println!("      {line}");
        }
        match &self.outcome {
            Outcome::Pass => println!("      PASS"),
            Outcome::Fail(why) => println!("      FAIL: {why}"),
            Outcome::NotRun(why) => println!("      NOT RUN: {why}"),
        }
    }

    fn json(&self) -> Value {
        let (outcome, why) = match &self.outcome {
            Outcome::Pass => ("pass", None),
            Outcome::Fail(why) => ("fail", Some(why)),
            Outcome::NotRun(why) => ("not run", Some(why)),
        };
        json!({"id": self.id, "proves": self.proves, "rule": self.rule,
               "lines": self.lines, "outcome": outcome, "why": why})
    }
}

/// Runs every step, prints each as it ends, writes `audit.json` and
/// fails if a step failed.
pub(crate) fn command(args: &AuditArgs) -> Result<()> {
    if args.run.network.sut_node.is_empty() {
        bail!("give the sut-nodes to audit: --sut-node URL (one per node)");
    }
    if args.partition_cmd.is_some() != args.heal_cmd.is_some() {
        bail!("--partition-cmd and --heal-cmd go together: what cuts a node off must also heal it");
    }
    std::fs::create_dir_all(&args.audit_dir)
        .with_context(|| format!("cannot create {}", args.audit_dir.display()))?;
    let audit_dir = std::path::absolute(&args.audit_dir)?;
    println!(
        "netdiv audit of {} node(s); runs and logs in {}",
        args.run.network.sut_node.len(),
        audit_dir.display()
    );
    let ctx = steps::Context::new(args, &audit_dir)?;
    let all: [fn(&steps::Context) -> Step; 6] = [
        steps::name,
        steps::partition,
        steps::wire,
        steps::delay,
        steps::test04,
        steps::report,
    ];
    let mut done = Vec::new();
    for (i, step) in all.iter().enumerate() {
        let step = step(&ctx);
        step.print(i + 1, all.len());
        done.push(step);
    }
    let verdict = Verdict::of(&done);
    let record = json!({
        "nodes": args.run.network.sut_node.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "steps": done.iter().map(Step::json).collect::<Vec<_>>(),
        "verdict": verdict.word(),
        "passed": verdict == Verdict::Passed,
        "failed": ids_where(&done, |o| matches!(o, Outcome::Fail(_))),
        "not_run": ids_where(&done, |o| matches!(o, Outcome::NotRun(_))),
    });
    let path = audit_dir.join("audit.json");
    std::fs::write(&path, serde_json::to_string_pretty(&record)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    println!("\nAudit record: {}", path.display());
    match verdict {
        Verdict::Passed => {
            println!("PASSED: every step ran and passed.");
            Ok(())
        }
        Verdict::Failed => bail!(
            "the audit FAILED: {}",
            ids_where(&done, |o| matches!(o, Outcome::Fail(_))).join(", ")
        ),
        Verdict::Incomplete => bail!(
            "the audit is INCOMPLETE, not passed: {} did not run (each says why above)",
            ids_where(&done, |o| matches!(o, Outcome::NotRun(_))).join(", ")
        ),
    }
}

/// The audit's overall verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    /// Every step ran and passed.
    Passed,
    /// A step failed.
    Failed,
    /// None failed, but a step did not run: nothing is shown for it.
    Incomplete,
}

impl Verdict {
    fn of(steps: &[Step]) -> Verdict {
        if steps.iter().any(|s| matches!(s.outcome, Outcome::Fail(_))) {
            Verdict::Failed
        } else if steps
            .iter()
            .any(|s| matches!(s.outcome, Outcome::NotRun(_)))
        {
            Verdict::Incomplete
        } else {
            Verdict::Passed
        }
    }

    fn word(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
            Verdict::Incomplete => "incomplete",
        }
    }
}

/// The ids of the steps whose outcome matches.
fn ids_where(steps: &[Step], matches: impl Fn(&Outcome) -> bool) -> Vec<&'static str> {
    steps
        .iter()
        .filter(|s| matches(&s.outcome))
        .map(|s| s.id)
        .collect()
}

/// Flags of `audit` that a child `run` must not get.
const AUDIT_ONLY: &[(&str, bool)] = &[
    ("--sut-node", true),
    ("--scenario", true),
    ("--output", true),
    ("--audit-dir", true),
    ("--partition-cmd", true),
    ("--heal-cmd", true),
    ("--delay-ms", true),
    ("--inference", true),
    ("--python", true),
    ("--progress", true),
    ("--audit-conf", true),
    ("--record-issued", true),
    ("--metrics-listen", true),
];

/// A child `loadgen-node run` of `scenario` against `nodes`, its logs in
/// `output`; fails with the end of its output when the run fails.
fn child_run(
    user_conf: &Path,
    scenario: &str,
    nodes: &[String],
    output: &Path,
    extra: &[&str],
) -> Result<()> {
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let mut command = super::child::run_command("audit", AUDIT_ONLY)?;
    command
        .args(["--scenario", scenario, "--progress", "never"])
        .arg("--output")
        .arg(output)
        .args(extra);
    if !std::env::args().any(|a| a == "--user-conf" || a.starts_with("--user-conf=")) {
        command.arg("--user-conf").arg(user_conf);
    }
    for node in nodes {
        command.args(["--sut-node", node]);
    }
    super::child::run_logged(command, scenario, &output.join("loadgen-node.log"))
}

/// The audit's own user.conf: short runs the compose lab's nodes pass
/// (Offline's target is above their 1500 samples/s, so its runs take at
/// least min_duration).
const USER_CONF: &str = "\
# user.conf of `loadgen-node audit` (short runs; --user-conf replaces it)
*.Offline.target_qps = 1600
*.Offline.min_duration = 2000
*.Offline.min_query_count = 1
*.SingleStream.target_latency = 1
*.SingleStream.min_duration = 2000
*.SingleStream.min_query_count = 100
";

/// Where the audit's runs go.
fn run_dir(audit_dir: &Path, name: &str) -> PathBuf {
    audit_dir.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(outcome: Outcome) -> Step {
        let mut step = Step::new("x", "", "");
        step.outcome = outcome;
        step
    }

    #[test]
    fn an_audit_passes_only_when_every_step_ran_and_passed() {
        let pass = || step(Outcome::Pass);
        let not_run = || step(Outcome::NotRun("no --inference".into()));
        let fail = || step(Outcome::Fail("TEST FAIL".into()));
        assert_eq!(Verdict::of(&[pass(), pass()]), Verdict::Passed);
        assert_eq!(Verdict::of(&[pass(), not_run()]), Verdict::Incomplete);
        assert_eq!(Verdict::of(&[not_run(), fail()]), Verdict::Failed);
        assert_eq!(Verdict::of(&[]), Verdict::Passed);
        assert_eq!(
            step(Outcome::NotRun("why".into())).json()["outcome"],
            "not run"
        );
    }
}
