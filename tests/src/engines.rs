//! The conformance runner: one LoadGen run of either engine with the same
//! flags. Two engines take the same flags on purpose: netdiv's
//! `loadgen-node run --sut null ...` and the official MLPerf LoadGen (C++)
//! behind `tests/official/driver.cc`. Both run a null SUT that answers
//! every sample inline with its QSL index (u32 little-endian) and write
//! `mlperf_log_{summary.txt,detail.txt,accuracy.json,trace.json}`.
//!
//! [`run`] runs an engine with a [`RunSpec`] in its own directory, through
//! [`run_with_deadline`] (peak RSS, killed after the spec's timeout);
//! [`RunOutput`] reads and parses what it wrote.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::binaries::{loadgen_node_bin, official_driver_bin_for};
use crate::mlperf_logs::{parse_accuracy, parse_issued, AccuracyEntry, Detail, ACCURACY, DETAIL};
use crate::process::run_with_deadline;
use crate::text::tail;

/// How long one engine run may take before it is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Which LoadGen implementation to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// The official MLPerf LoadGen (C++) via `tests/official/driver.cc`.
    Official,
    /// netdiv's `loadgen-node`.
    Ours,
}

impl Engine {
    /// Both engines, official first.
    pub const ALL: [Engine; 2] = [Engine::Official, Engine::Ours];

    /// A short name, also used as the engine's subdirectory.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Official => "official",
            Engine::Ours => "ours",
        }
    }

    /// The engine's binary (built on first use); the official one is
    /// linked with the LoadGen of `round` (`None`: the current round).
    pub fn binary(self, round: Option<&str>) -> Result<PathBuf> {
        match self {
            Engine::Official => official_driver_bin_for(round),
            Engine::Ours => loadgen_node_bin(),
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The settings of one run; identical for both engines.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// `SingleStream`, `MultiStream`, `Server` or `Offline`.
    pub scenario: String,
    /// `PerformanceOnly`, `AccuracyOnly`, `SubmissionRun`, ...
    pub mode: String,
    /// `--model`; both engines default to `null`.
    pub model: Option<String>,
    /// `--mlperf-conf`: replaces the built-in mlperf.conf.
    pub mlperf_conf: Option<PathBuf>,
    /// `--user-conf`.
    pub user_conf: Option<PathBuf>,
    pub total_sample_count: u64,
    pub performance_sample_count: u64,
    /// Pass `--record-issued DIR/issued.txt`.
    pub record_issued: bool,
    /// Leave the trace on (otherwise `--no-trace`).
    pub trace: bool,
    /// Kill the engine after this long.
    pub timeout: Duration,
    /// Token models: the null SUT reports a first token, then completes
    /// with this many tokens (`--null-output-tokens`).
    pub null_output_tokens: Option<i64>,
    /// The run is meant to log runtime errors: `loadgen-node` then exits 1
    /// after writing every log, which counts as a finished run.
    pub errors_expected: bool,
    /// The round (`v5.1`): the official driver of its LoadGen, and
    /// `--round` for ours. `None`: the current round, no flag.
    pub round: Option<String>,
}

impl RunSpec {
    /// A run with issued samples recorded, no trace and the default timeout.
    pub fn new(
        scenario: &str,
        mode: &str,
        total_sample_count: u64,
        performance_sample_count: u64,
    ) -> Self {
        RunSpec {
            scenario: scenario.to_string(),
            mode: mode.to_string(),
            model: None,
            mlperf_conf: None,
            user_conf: None,
            total_sample_count,
            performance_sample_count,
            record_issued: true,
            trace: false,
            timeout: DEFAULT_TIMEOUT,
            null_output_tokens: None,
            errors_expected: false,
            round: None,
        }
    }

    pub fn round(mut self, round: &str) -> Self {
        self.round = Some(round.to_string());
        self
    }

    pub fn errors_expected(mut self, on: bool) -> Self {
        self.errors_expected = on;
        self
    }

    pub fn null_output_tokens(mut self, n: i64) -> Self {
        self.null_output_tokens = Some(n);
        self
    }

    pub fn model(mut self, model: &str) -> Self {
        self.model = Some(model.to_string());
        self
    }

    pub fn mlperf_conf(mut self, path: impl Into<PathBuf>) -> Self {
        self.mlperf_conf = Some(path.into());
        self
    }

    pub fn user_conf(mut self, path: impl Into<PathBuf>) -> Self {
        self.user_conf = Some(path.into());
        self
    }

    pub fn record_issued(mut self, on: bool) -> Self {
        self.record_issued = on;
        self
    }

    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The command-line flags (after the subcommand, if any) for a run that
    /// writes into `out_dir`.
    pub fn flags(&self, out_dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--scenario".into(),
            self.scenario.clone().into(),
            "--mode".into(),
            self.mode.clone().into(),
        ];
        if let Some(model) = &self.model {
            args.extend(["--model".into(), model.into()]);
        }
        if let Some(path) = &self.mlperf_conf {
            args.extend(["--mlperf-conf".into(), path.into()]);
        }
        if let Some(path) = &self.user_conf {
            args.extend(["--user-conf".into(), path.into()]);
        }
        args.extend([
            "--total-sample-count".into(),
            self.total_sample_count.to_string().into(),
            "--performance-sample-count".into(),
            self.performance_sample_count.to_string().into(),
            "--output".into(),
            out_dir.into(),
        ]);
        if self.record_issued {
            args.extend(["--record-issued".into(), out_dir.join(ISSUED_FILE).into()]);
        }
        if !self.trace {
            args.push("--no-trace".into());
        }
        if let Some(n) = self.null_output_tokens {
            args.extend(["--null-output-tokens".into(), n.to_string().into()]);
        }
        args
    }
}

const ISSUED_FILE: &str = "issued.txt";

/// What one engine run left behind.
#[derive(Debug)]
pub struct RunOutput {
    pub engine: Engine,
    /// The `--output` directory (also holds `stdout.txt`, `stderr.txt` and,
    /// when recorded, `issued.txt`).
    pub dir: PathBuf,
    /// Wall-clock time from spawn to exit (of the process, not of our wait).
    pub wall: Duration,
    /// Peak resident set size of the process, bytes (`ru_maxrss`).
    pub max_rss_bytes: u64,
    /// The full command line, for messages.
    pub command: String,
}

impl RunOutput {
    fn read(&self, name: &str) -> Result<String> {
        let path = self.dir.join(name);
        fs::read_to_string(&path)
            .with_context(|| format!("{}: cannot read {}", self.engine, path.display()))
    }

    pub fn stdout(&self) -> Result<String> {
        self.read("stdout.txt")
    }

    pub fn stderr(&self) -> Result<String> {
        self.read("stderr.txt")
    }

    /// `mlperf_log_summary.txt`.
    pub fn summary(&self) -> Result<String> {
        self.read("mlperf_log_summary.txt")
    }

    /// `mlperf_log_detail.txt`, parsed.
    pub fn detail(&self) -> Result<Detail> {
        let path = self.dir.join(DETAIL);
        Detail::parse(&self.read(DETAIL)?, &path).with_context(|| {
            format!(
                "{}: bad mlperf_log_detail.txt in {}",
                self.engine,
                self.dir.display()
            )
        })
    }

    /// `mlperf_log_accuracy.json`, parsed.
    pub fn accuracy(&self) -> Result<Vec<AccuracyEntry>> {
        parse_accuracy(&self.read(ACCURACY)?, &self.dir.join(ACCURACY)).with_context(|| {
            format!(
                "{}: bad mlperf_log_accuracy.json in {}",
                self.engine,
                self.dir.display()
            )
        })
    }

    /// The `--record-issued` file, parsed.
    pub fn issued(&self) -> Result<Vec<u64>> {
        parse_issued(&self.read(ISSUED_FILE)?).with_context(|| {
            format!(
                "{}: bad {ISSUED_FILE} in {}",
                self.engine,
                self.dir.display()
            )
        })
    }
}

/// Runs `engine` with `spec`, writing into `dir/<engine name>/`. The process
/// runs with `dir` as its working directory (so the official LoadGen finds no
/// stray `audit.config`). Fails if the engine cannot start, times out or
/// exits unsuccessfully; the error carries the end of its stderr.
pub fn run(engine: Engine, spec: &RunSpec, dir: &Path) -> Result<RunOutput> {
    let binary = engine.binary(spec.round.as_deref())?;
    let out_dir = dir.join(engine.name());
    fs::create_dir_all(&out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mut command = Command::new(&binary);
    if engine == Engine::Ours {
        command.args(["run", "--sut", "null"]);
        if let Some(round) = &spec.round {
            command.args(["--round", round]);
        }
    }
    command.args(spec.flags(&out_dir));
    let shown = format!("{command:?}");
    let stdout = File::create(out_dir.join("stdout.txt"))?;
    let stderr = File::create(out_dir.join("stderr.txt"))?;
    command
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);

    let exited = run_with_deadline(&mut command, spec.timeout)?;
    let output = RunOutput {
        engine,
        dir: out_dir,
        wall: exited.wall,
        max_rss_bytes: exited.max_rss_bytes,
        command: shown,
    };
    if exited.timed_out {
        bail!(
            "{engine} timed out after {:?} and was killed: {}\nstderr (end):\n{}",
            spec.timeout,
            output.command,
            tail(&output.stderr().unwrap_or_default(), 30)
        );
    }
    let logged_errors = engine == Engine::Ours
        && spec.errors_expected
        && exited.status.code() == Some(1)
        && output.stderr().is_ok_and(|e| e.contains("the run logged"));
    if !exited.status.success() && !logged_errors {
        bail!(
            "{engine} failed ({}): {}\nstderr (end):\n{}",
            exited.status,
            output.command,
            tail(&output.stderr().unwrap_or_default(), 30)
        );
    }
    Ok(output)
}

/// Runs the official engine and then ours with the same `spec`, each in its
/// own subdirectory of `dir`.
pub fn run_both(spec: &RunSpec, dir: &Path) -> Result<(RunOutput, RunOutput)> {
    let official = run(Engine::Official, spec, dir)?;
    let ours = run(Engine::Ours, spec, dir)?;
    Ok((official, ours))
}
