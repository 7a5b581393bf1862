//! The embedded default: `loadgen-node run` with no SUT flags starts two
//! sut-node processes with the synthetic backend on loopback, runs a short
//! Offline and Server test through the QDL, prints each summary and where
//! its logs are, and stops the nodes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use loadgen_node::engine::settings::Scenario;
use qdl::NodeUrl;

use super::plan::{RunPlan, Target};
use crate::cli::args::Engine;

const USER_CONF: &str = include_str!("embedded-user.conf");
const NODE_CONFIG: &str = include_str!("embedded-node.toml");
const NODES: usize = 2;

/// A sut-node this program started; stopped (SIGTERM, then SIGKILL) when
/// dropped.
struct LocalNode {
    child: Child,
    url: NodeUrl,
}

impl LocalNode {
    fn start(
        program: &Path,
        name: &str,
        benchmark: &str,
        config: &Path,
        log: &Path,
    ) -> Result<LocalNode> {
        let ready_file = log.with_extension("ready.json");
        // The node writes it once listening: a stale one would mislead.
        let _ = std::fs::remove_file(&ready_file);
        let mut child = Command::new(program)
            .args([
                "--name",
                name,
                "--benchmark",
                benchmark,
                "--listen",
                "127.0.0.1:0",
                "--transport",
                "grpc",
                "--log-format",
                "text",
            ])
            .arg("--config")
            .arg(config)
            .arg("--ready-file")
            .arg(&ready_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(log)
                    .with_context(|| format!("cannot create {}", log.display()))?,
            )
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let ready = sut_node::ready::wait(&mut child, &ready_file, Duration::from_secs(20))
            .ok()
            .and_then(|ready| ready.grpc.map(|a| a.to_string()));
        let mut node = LocalNode {
            child,
            url: "grpc://127.0.0.1:1".parse().expect("placeholder"),
        };
        let addr = ready.ok_or_else(|| {
            anyhow!(
                "sut-node {name} did not start (see {}): {}",
                log.display(),
                std::fs::read_to_string(log).unwrap_or_default().trim()
            )
        })?;
        node.url = format!("grpc://{addr}")
            .parse()
            .map_err(|e| anyhow!("sut-node {name} is ready at {addr:?}: {e}"))?;
        Ok(node)
    }
}

impl Drop for LocalNode {
    fn drop(&mut self) {
        // SIGTERM lets the node drain and say it stopped.
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sut-node program: the flag, `$NETDIV_SUT_NODE`, next to this
/// program (as cargo builds them), or on PATH.
fn sut_node_program(plan: &RunPlan) -> Result<PathBuf> {
    if let Target::Embedded {
        sut_node_bin: Some(p),
    } = &plan.target
    {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("NETDIV_SUT_NODE") {
        return Ok(p.into());
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("sut-node")));
    if let Some(p) = sibling.filter(|p| p.is_file()) {
        return Ok(p);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("sut-node"))
            .find(|p| p.is_file())
    });
    on_path.ok_or_else(|| {
        anyhow!(
            "the embedded default needs the sut-node program: build it with \
             `cargo build --release -p sut-node -p loadgen-node`, or give --sut-node-bin"
        )
    })
}

/// The official LoadGen reads mlperf.conf only in the first test of a
/// process (a static in `TestSettings::FromConfig`), so each scenario runs
/// in a process of its own, as a submitter runs it: this program again,
/// with the same flags, against the nodes already started.
fn official_in_child(
    plan: &RunPlan,
    scenario: Scenario,
    urls: &[NodeUrl],
    output: &Path,
) -> Result<()> {
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let mut command = crate::cli::child::run_command("run", OWN)?;
    command
        .args(["--scenario", scenario.name()])
        .arg("--output")
        .arg(output);
    for url in urls {
        command.arg("--sut-node").arg(url.to_string());
    }
    if plan.configs.user.is_none() {
        let conf = output.join("embedded-user.conf");
        std::fs::write(&conf, USER_CONF)
            .with_context(|| format!("cannot write {}", conf.display()))?;
        command.arg("--user-conf").arg(conf);
    }
    let status = command.status().context("cannot start loadgen-node")?;
    if !status.success() {
        bail!(
            "the official LoadGen's {} test failed ({status})",
            scenario.name()
        );
    }
    Ok(())
}

/// The flags of this `run` a child gets its own value of.
const OWN: &[(&str, bool)] = &[
    ("--output", true),
    ("--scenario", true),
    ("--sut-node-bin", true),
];

/// Starts the local nodes, runs the test(s) through the QDL, stops them.
pub(crate) fn run_default(plan: &RunPlan) -> Result<()> {
    let scenarios = plan.scenarios();
    let program = sut_node_program(plan)?;
    let dir = &plan.outputs.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config = dir.join("embedded-sut-node.toml");
    std::fs::write(&config, NODE_CONFIG)
        .with_context(|| format!("cannot write {}", config.display()))?;
    // The nodes serve the run's benchmark (the config's is ResNet-50).
    let benchmark = plan.benchmark.to_string();
    let mut nodes = Vec::new();
    for i in 1..=NODES {
        let name = format!("local-node-{i}");
        let log = dir.join(format!("{name}.log"));
        nodes.push(LocalNode::start(
            &program, &name, &benchmark, &config, &log,
        )?);
    }
    let urls: Vec<NodeUrl> = nodes.iter().map(|n| n.url.clone()).collect();
    println!(
        "Embedded default: {NODES} local sut-nodes (synthetic backend) at {}",
        urls.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut verdicts = Vec::new();
    let scenarios_run: Vec<&str> = scenarios.iter().map(|s| s.name()).collect();
    for scenario in scenarios.iter().copied() {
        println!("\n== {} through the QDL ==", scenario.name());
        let output = dir.join(scenario.name());
        if plan.engine == Engine::Official {
            official_in_child(plan, scenario, &urls, &output)?;
        } else {
            super::network::run(plan, scenario, urls.clone(), Some(USER_CONF), &output)?;
            // (The official LoadGen's child run writes its own.)
            super::report_after(plan, &output);
        }
        verdicts.push(format!("{:<8} {}", scenario.name(), verdict(&output)));
    }
    drop(nodes);
    println!("\nNode logs and configuration are in {}", dir.display());
    println!("\nVerdict:");
    for line in &verdicts {
        println!("  {line}");
    }
    let reports: Vec<PathBuf> = scenarios_run
        .iter()
        .map(|s| dir.join(s).join(crate::cli::report::FILE))
        .filter(|p| p.is_file())
        .collect();
    if !reports.is_empty() {
        println!("\nReports:");
        for path in reports {
            println!("  {}", path.display());
        }
    }
    Ok(())
}

/// One line from a run's logs (either engine writes them): VALID or
/// INVALID, the headline number, and for INVALID why.
fn verdict(output: &Path) -> String {
    match crate::cli::verdict::Verdict::read(output) {
        Ok(v) => v.line(),
        Err(_) => format!(
            "no summary ({} missing)",
            output.join("mlperf_log_summary.txt").display()
        ),
    }
}
