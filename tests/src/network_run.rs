//! Whole Network-SUT runs with real processes: sut-nodes on loopback
//! (port 0) and `loadgen-node run --sut-node ...` driving them through the
//! QDL, with a deadline so a hang fails instead of blocking CI.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use sut_node::config::FileConfig;

use crate::binaries::loadgen_node_bin;
use crate::configs::node_toml;
use crate::files::write_file;
use crate::mlperf_logs::{parse_accuracy, AccuracyEntry, Detail, ACCURACY, DETAIL};
use crate::process::run_with_deadline;
use crate::sut_client::NodeProcess;
use crate::text::tail;

/// sut-nodes of one transport, started for a test.
pub struct Cluster {
    pub nodes: Vec<NodeProcess>,
    /// "grpc" or "quic".
    pub transport: &'static str,
    /// The --dev-tls directory the nodes share (QUIC needs TLS).
    pub certs: Option<PathBuf>,
}

impl Cluster {
    /// Starts one node per name with `node_config`, written to
    /// `dir/sut-node.toml`, as `--config`.
    pub fn start(
        dir: &Path,
        transport: &'static str,
        names: &[&str],
        node_config: &FileConfig,
        extra: &[&str],
    ) -> Result<Cluster> {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let config = write_file(dir, "sut-node.toml", &node_toml(node_config)?)?;
        let certs = (transport == "quic").then(|| dir.join("certs"));
        if let Some(certs) = &certs {
            // One CA for every node, so one --dev-tls works for the QDL.
            sut_node::tls::dev_certificates(certs, false)?;
        }
        let mut args = vec![
            "--transport",
            transport,
            "--config",
            config.to_str().context("utf-8 path")?,
        ];
        args.extend_from_slice(extra);
        let nodes = names
            .iter()
            .map(|name| NodeProcess::start(name, certs.as_deref(), &args))
            .collect::<Result<Vec<_>>>()?;
        Ok(Cluster {
            nodes,
            transport,
            certs,
        })
    }

    /// The node addresses as `--sut-node` takes them.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| match self.transport {
                "quic" => format!("quic://{}", n.quic.expect("QUIC listener")),
                _ => format!("grpc://{}", n.grpc.expect("gRPC listener")),
            })
            .collect()
    }

    /// `--sut-node URL...` and, for TLS, `--dev-tls DIR`.
    pub fn loadgen_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        for url in self.urls() {
            flags.push("--sut-node".into());
            flags.push(url);
        }
        if let Some(certs) = &self.certs {
            flags.push("--dev-tls".into());
            flags.push(certs.display().to_string());
        }
        flags
    }
}

/// A finished `loadgen-node` process and what it wrote.
#[derive(Debug)]
pub struct LoadgenRun {
    /// The `--output` directory.
    pub logs: PathBuf,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// CPU time the process used (user and system), where it was
    /// measured.
    pub cpu: Option<Duration>,
    /// Its peak resident memory in bytes, where it was measured.
    pub max_rss_bytes: Option<u64>,
}

impl LoadgenRun {
    fn read(&self, name: &str) -> Result<String> {
        let path = self.logs.join(name);
        fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    pub fn summary(&self) -> Result<String> {
        self.read("mlperf_log_summary.txt")
    }

    pub fn detail(&self) -> Result<Detail> {
        Ok(Detail::parse(&self.read(DETAIL)?, &self.logs.join(DETAIL))?)
    }

    pub fn accuracy(&self) -> Result<Vec<AccuracyEntry>> {
        Ok(parse_accuracy(
            &self.read(ACCURACY)?,
            &self.logs.join(ACCURACY),
        )?)
    }

    /// The run's record (`netdiv_run.json`), read as the program reads it:
    /// a renamed field is a compile error here too.
    pub fn record(&self) -> Result<loadgen_node::run_record::RunRecord> {
        let path = self.logs.join(loadgen_node::run_record::FILE);
        Ok(loadgen_node::run_record::RunRecord::read(&path)?)
    }

    /// The run's log records (it runs with `--log-format json`).
    pub fn events(&self) -> Vec<Value> {
        crate::log_records::parse(&self.stderr)
    }

    /// The summary and the detail log of a successful, VALID run without a
    /// runtime error; fails naming what is wrong otherwise.
    pub fn expect_valid(&self) -> Result<(String, Detail)> {
        self.expect_success()?;
        let summary = self.summary()?;
        if !crate::mlperf_logs::says_valid(&summary) {
            bail!("not VALID:\n{summary}");
        }
        let detail = self.detail()?;
        let errors = detail.values("error_runtime");
        if !errors.is_empty() {
            bail!("runtime errors: {errors:?}");
        }
        Ok((summary, detail))
    }

    /// Fails with the end of stderr unless the process exited with 0.
    pub fn expect_success(&self) -> Result<&Self> {
        if !self.status.success() {
            bail!(
                "loadgen-node failed ({}):\n{}\n{}",
                self.status,
                tail(&self.stdout, 20),
                tail(&self.stderr, 20)
            );
        }
        Ok(self)
    }
}

/// Runs `loadgen-node run ARGS --output DIR/logs` in `dir`; kills it and
/// fails if it is still running after `deadline`.
pub fn loadgen(dir: &Path, args: &[String], deadline: Duration) -> Result<LoadgenRun> {
    loadgen_with(&loadgen_node_bin()?, dir, args, deadline)
}

/// [`loadgen`] with a given `loadgen-node` program.
pub fn loadgen_with(
    program: &Path,
    dir: &Path,
    args: &[String],
    deadline: Duration,
) -> Result<LoadgenRun> {
    run_loadgen(Command::new(program), dir, args, deadline)
}

/// [`loadgen`] inside network namespace `netns` (`ip netns exec`).
pub fn loadgen_in_netns(
    netns: &str,
    dir: &Path,
    args: &[String],
    deadline: Duration,
) -> Result<LoadgenRun> {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", netns])
        .arg(loadgen_node_bin()?);
    run_loadgen(command, dir, args, deadline)
}

fn run_loadgen(
    mut command: Command,
    dir: &Path,
    args: &[String],
    deadline: Duration,
) -> Result<LoadgenRun> {
    let logs = dir.join("logs");
    let stdout_path = dir.join("loadgen.stdout");
    let stderr_path = dir.join("loadgen.stderr");
    command
        .current_dir(dir)
        .arg("run")
        .args(["--log-format", "json"])
        .args(args)
        .arg("--output")
        .arg(&logs)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&stdout_path)?)
        .stderr(fs::File::create(&stderr_path)?);
    let exited = run_with_deadline(&mut command, deadline)?;
    if exited.timed_out {
        bail!(
            "loadgen-node still running after {deadline:?} (hung?):\n{}",
            tail(&fs::read_to_string(&stderr_path).unwrap_or_default(), 20)
        );
    }
    Ok(LoadgenRun {
        logs,
        status: exited.status,
        stdout: fs::read_to_string(&stdout_path)?,
        stderr: fs::read_to_string(&stderr_path)?,
        wall: exited.wall,
        cpu: Some(exited.cpu),
        max_rss_bytes: Some(exited.max_rss_bytes),
    })
}

/// Every sample the run issued (its `--record-issued FILE`) is in the
/// accuracy log exactly once, and no response is logged twice.
pub fn check_exactly_once(run: &LoadgenRun, issued: &Path) -> Result<()> {
    let entries = run.accuracy()?;
    anyhow::ensure!(!entries.is_empty(), "the accuracy log is empty");
    let text =
        fs::read_to_string(issued).with_context(|| format!("cannot read {}", issued.display()))?;
    let mut issued = crate::mlperf_logs::parse_issued(&text)?;
    let mut answered: Vec<u64> = entries.iter().map(|e| e.qsl_idx).collect();
    issued.sort_unstable();
    answered.sort_unstable();
    anyhow::ensure!(
        issued == answered,
        "{} samples issued, {} completed: not each exactly once",
        issued.len(),
        answered.len()
    );
    let mut seen = std::collections::HashSet::new();
    for e in &entries {
        anyhow::ensure!(
            seen.insert(e.seq_id),
            "sample seq_id {} completed twice",
            e.seq_id
        );
    }
    Ok(())
}

/// Where a benchmark runs its backend: in the LoadGen node's process, or
/// through the QDL to sut-nodes over gRPC or QUIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    InProcess,
    Grpc,
    Quic,
}

impl Setup {
    /// In the order benchmark tables list them, the baseline first.
    pub const ALL: [Setup; 3] = [Setup::InProcess, Setup::Grpc, Setup::Quic];

    pub fn name(self) -> &'static str {
        match self {
            Setup::InProcess => "in-process",
            Setup::Grpc => "gRPC",
            Setup::Quic => "QUIC",
        }
    }
}

/// The same nodes started twice, once per transport, for a benchmark that
/// compares the network setups with in-process.
pub struct BenchClusters {
    grpc: Cluster,
    quic: Cluster,
}

impl BenchClusters {
    /// Starts `names` over gRPC (in `dir/grpc`) and over QUIC (`dir/quic`).
    pub fn start(
        dir: &Path,
        names: &[&str],
        node_config: &FileConfig,
        extra: &[&str],
    ) -> Result<BenchClusters> {
        Ok(BenchClusters {
            grpc: Cluster::start(&dir.join("grpc"), "grpc", names, node_config, extra)?,
            quic: Cluster::start(&dir.join("quic"), "quic", names, node_config, extra)?,
        })
    }

    /// The nodes of a network setup.
    pub fn cluster(&self, setup: Setup) -> &Cluster {
        match setup {
            Setup::Quic => &self.quic,
            _ => &self.grpc,
        }
    }

    /// The `loadgen-node` flags that reach the nodes of `setup`; `None`
    /// for in-process.
    pub fn flags(&self, setup: Setup) -> Option<Vec<String>> {
        match setup {
            Setup::InProcess => None,
            Setup::Grpc => Some(self.grpc.loadgen_flags()),
            Setup::Quic => Some(self.quic.loadgen_flags()),
        }
    }
}

/// A llama2-70b run of fixed-length synthetic prompts (`prompt_tokens`
/// int32 ids each, drawn with `seed`, `samples` of them), so a test can
/// rebuild any sample's ids: `loadgen-node run` flags, with `conf`
/// written to `dir/user.conf`, then `extra`.
pub fn llama2_prompt_flags(
    dir: &Path,
    scenario: &str,
    conf: &crate::UserConf,
    (prompt_tokens, seed, samples): (usize, u64, usize),
    extra: &[String],
) -> Result<Vec<String>> {
    let conf = write_file(dir, "user.conf", &conf.to_string())?;
    let mut flags: Vec<String> = [
        "--scenario",
        scenario,
        "--benchmark",
        "llama2-70b",
        "--sample-shape",
        &prompt_tokens.to_string(),
        "--sample-dtype",
        "int32",
        "--sample-seed",
        &seed.to_string(),
        "--total-sample-count",
        &samples.to_string(),
        "--performance-sample-count",
        &samples.to_string(),
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
        "--progress",
        "never",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.extend(extra.iter().cloned());
    Ok(flags)
}
