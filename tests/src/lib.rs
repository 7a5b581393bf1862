//! Shared helpers for netdiv's LoadGen conformance test and benchmark.
//!
//! Two engines take the same flags on purpose: netdiv's `loadgen-node run
//! --sut null ...` and the official MLPerf LoadGen (C++) behind
//! `tests/official/driver.cc`. Both run a null SUT that answers every sample
//! inline with its QSL index (u32 little-endian) and write
//! `mlperf_log_{summary.txt,detail.txt,accuracy.json,trace.json}`.
//!
//! This crate
//! * finds both binaries once per process: `loadgen-node` is built with
//!   `cargo build --release` (its path is taken from cargo's JSON messages, so
//!   `CARGO_TARGET_DIR` is honoured), the official driver is built and cached
//!   by `tests/official/fetch-build.sh`. `NETDIV_LOADGEN_NODE` and
//!   `NETDIV_OFFICIAL_DRIVER` name prebuilt binaries instead;
//! * runs an engine with a [`RunSpec`] in its own directory, reaping it with
//!   `wait4` to get its peak RSS, killing it after a timeout;
//! * parses what the engines write: MLLOG detail lines, summary labels and
//!   values, the accuracy log and the issued-sample record.
//!
//! Linux only (`wait4`, `ru_maxrss` in KiB).

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// The official LoadGen release `fetch-build.sh` builds.
pub const OFFICIAL_VERSION: &str = "6.0.17";

/// How long one engine run may take before it is killed.
pub mod network_run;
pub mod sut_client;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// One line naming the CPU, how many CPUs this process may use and the
/// kernel, for benchmark reports.
pub fn machine_description() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("Machine: {cpu}, {cpus} CPUs available, Linux {kernel}.")
}

/// The workspace root (the parent of this package).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests package lives inside the workspace")
}

/// The release `loadgen-node` binary, built on first use.
///
/// `NETDIV_LOADGEN_NODE=/path/to/loadgen-node` skips the build.
pub fn loadgen_node_bin() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        build_release_bin("loadgen-node", "NETDIV_LOADGEN_NODE").map_err(|e| format!("{e:#}"))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// The official driver, built (and cached) by `tests/official/fetch-build.sh`
/// on first use. `NETDIV_OFFICIAL_DRIVER=/path/to/official-driver` skips it.
pub fn official_driver_bin() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| build_official_driver().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn existing_file_from_env(var: &str) -> Result<Option<PathBuf>> {
    match std::env::var_os(var) {
        None => Ok(None),
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_file() {
                bail!("{var}={} does not name a file", path.display());
            }
            Ok(Some(path))
        }
    }
}

/// The release `sut-node` binary, built on first use.
///
/// `NETDIV_SUT_NODE=/path/to/sut-node` skips the build.
pub fn sut_node_bin() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        build_release_bin("sut-node", "NETDIV_SUT_NODE").map_err(|e| format!("{e:#}"))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// Runs `deploy/onnxruntime/fetch.sh ITEMS` and returns the paths it prints.
fn fetch_onnx(items: &'static [&'static str]) -> Result<Vec<PathBuf>> {
    let script = workspace_root().join("deploy/onnxruntime/fetch.sh");
    let output = Command::new("bash")
        .arg(&script)
        .args(items)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} {} failed ({}):\n{}",
            script.display(),
            items.join(" "),
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr), 20)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect())
}

/// ONNX Runtime's shared library and the ResNet-50-shaped graph, fetched
/// from their PyPI wheels on first use.
///
/// `Ok(None)` means they could not be fetched (no PyPI) and the caller
/// should skip, saying so; under CI (`CI` set) that is an error instead, so
/// CI never passes an ONNX test it did not run. `NETDIV_ONNXRUNTIME_LIB`
/// names a library to use instead of fetching one.
pub fn onnxruntime_files() -> Result<Option<OnnxFiles>> {
    static FILES: OnceLock<Result<OnnxFiles, String>> = OnceLock::new();
    let fetched = FILES.get_or_init(|| {
        let paths = fetch_onnx(&["runtime", "resnet50"]).map_err(|e| format!("{e:#}"))?;
        let [library, resnet50] = &paths[..] else {
            return Err(format!("fetch.sh printed {paths:?}, not two paths"));
        };
        let library = existing_file_from_env("NETDIV_ONNXRUNTIME_LIB")
            .map_err(|e| format!("{e:#}"))?
            .unwrap_or_else(|| library.clone());
        Ok(OnnxFiles {
            library,
            resnet50: resnet50.clone(),
        })
    });
    match fetched {
        Ok(files) => Ok(Some(files.clone())),
        Err(e) => skip_unless_ci(&format!("ONNX Runtime ({e})")).map(|()| None),
    }
}

/// A test's prerequisite (`what`) is missing: outside CI the test says
/// SKIPPED and passes (`Ok`); under CI (`CI` set) that is an error, so CI
/// never passes a test it did not run.
pub fn skip_unless_ci(what: &str) -> Result<()> {
    if std::env::var_os("CI").is_some() {
        bail!("{what} is missing, and CI must run this test");
    }
    eprintln!("SKIPPED: {what} is missing; CI runs this test");
    Ok(())
}

/// What the ONNX backend tests load.
#[derive(Clone, Debug)]
pub struct OnnxFiles {
    /// `libonnxruntime.so.*` from the onnxruntime wheel.
    pub library: PathBuf,
    /// `light_resnet50.onnx` from the onnx wheel.
    pub resnet50: PathBuf,
}

/// `tests/data/digits`: the digits classifier, its samples and labels.
pub fn digits_dir() -> PathBuf {
    workspace_root().join("tests/data/digits")
}

/// `loadgen-node` built with the official LoadGen (`--features official`),
/// in a target directory of its own so the default build is not rebuilt.
/// `NETDIV_LOADGEN_NODE_OFFICIAL=/path` skips the build.
pub fn loadgen_node_official_bin() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| build_official_engine().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn build_official_engine() -> Result<PathBuf> {
    if let Some(path) = existing_file_from_env("NETDIV_LOADGEN_NODE_OFFICIAL")? {
        return Ok(path);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let target = workspace_root().join("target/official");
    let output = Command::new(&cargo)
        .current_dir(workspace_root())
        .args([
            "build",
            "--release",
            "-p",
            "loadgen-node",
            "--bin",
            "loadgen-node",
        ])
        .args(["--features", "loadgen-node/official", "--target-dir"])
        .arg(&target)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", Path::new(&cargo).display()))?;
    if !output.status.success() {
        bail!(
            "building loadgen-node --features official failed ({}):\n{}",
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr), 60)
        );
    }
    let bin = target.join("release/loadgen-node");
    if !bin.is_file() {
        bail!(
            "cargo built loadgen-node --features official but {} is missing",
            bin.display()
        );
    }
    Ok(bin)
}

/// The daemons every test drives, built in one cargo invocation: one
/// feature resolution, so their shared dependencies compile once instead of
/// once per binary.
const RELEASE_BINS: &[&str] = &["loadgen-node", "sut-node"];

/// The release binary `name` (one of [`RELEASE_BINS`]), as cargo reports
/// it after building all of them; `env_override` names a prebuilt file.
fn build_release_bin(name: &str, env_override: &str) -> Result<PathBuf> {
    if let Some(path) = existing_file_from_env(env_override)? {
        return Ok(path);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut args = vec!["build", "--release"];
    for bin in RELEASE_BINS {
        args.extend(["-p", bin, "--bin", bin]);
    }
    args.push("--message-format=json-render-diagnostics");
    let output = Command::new(&cargo)
        .current_dir(workspace_root())
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", Path::new(&cargo).display()))?;
    if !output.status.success() {
        bail!(
            "`cargo {}` failed ({}):\n{}",
            args.join(" "),
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr), 60)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut executable = None;
    for line in stdout.lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if message["reason"] == "compiler-artifact" && message["target"]["name"] == name {
            if let Some(path) = message["executable"].as_str() {
                executable = Some(PathBuf::from(path));
            }
        }
    }
    let executable = executable
        .ok_or_else(|| anyhow!("cargo built {name} but reported no executable for it"))?;
    if !executable.is_file() {
        bail!(
            "cargo reported {} but it does not exist",
            executable.display()
        );
    }
    Ok(executable)
}

fn build_official_driver() -> Result<PathBuf> {
    if let Some(path) = existing_file_from_env("NETDIV_OFFICIAL_DRIVER")? {
        return Ok(path);
    }
    let script = workspace_root().join("tests/official/fetch-build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run bash {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}):\n{}",
            script.display(),
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr), 40)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| anyhow!("{} printed no driver path", script.display()))?;
    let path = PathBuf::from(last.trim());
    if !path.is_file() {
        bail!(
            "{} printed {}, which does not exist",
            script.display(),
            path.display()
        );
    }
    Ok(path)
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A fresh, empty directory under `$TMPDIR/netdiv-tests/`, unique per call.
/// It is not removed automatically, so failed runs can be inspected.
pub fn unique_temp_dir(prefix: &str) -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join("netdiv-tests").join(format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Writes `contents` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, contents: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    fs::write(&path, contents).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

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

    /// The engine's binary (built on first use).
    pub fn binary(self) -> Result<PathBuf> {
        match self {
            Engine::Official => official_driver_bin(),
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
        }
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
    pub fn detail(&self) -> Result<Vec<(String, Value)>> {
        parse_detail(&self.read("mlperf_log_detail.txt")?).with_context(|| {
            format!(
                "{}: bad mlperf_log_detail.txt in {}",
                self.engine,
                self.dir.display()
            )
        })
    }

    /// `mlperf_log_accuracy.json`, parsed.
    pub fn accuracy(&self) -> Result<Vec<AccuracyEntry>> {
        parse_accuracy(&self.read("mlperf_log_accuracy.json")?).with_context(|| {
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
    let binary = engine.binary()?;
    let out_dir = dir.join(engine.name());
    fs::create_dir_all(&out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mut command = Command::new(&binary);
    if engine == Engine::Ours {
        command.args(["run", "--sut", "null"]);
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

    let started = Instant::now();
    let child = command
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let (status, rusage, exited_at, timed_out) = wait_with_rusage(child, spec.timeout)?;
    let wall = exited_at - started;
    let output = RunOutput {
        engine,
        dir: out_dir,
        wall,
        max_rss_bytes: (rusage.ru_maxrss.max(0) as u64) * 1024,
        command: shown,
    };
    if timed_out {
        bail!(
            "{engine} timed out after {:?} and was killed: {}\nstderr (end):\n{}",
            spec.timeout,
            output.command,
            tail(&output.stderr().unwrap_or_default(), 30)
        );
    }
    if !status.success() {
        bail!(
            "{engine} failed ({status}): {}\nstderr (end):\n{}",
            output.command,
            tail(&output.stderr().unwrap_or_default(), 30)
        );
    }
    Ok(output)
}

/// Waits for `child` and reaps it with `wait4`, returning its exit status,
/// resource usage, the moment it exited and whether the watchdog killed it
/// (after `timeout`). The child is first waited for without being reaped,
/// then reaped under the lock the watchdog takes before killing, so the
/// watchdog can never signal a recycled pid.
fn wait_with_rusage(
    child: std::process::Child,
    timeout: Duration,
) -> Result<(ExitStatus, libc::rusage, Instant, bool)> {
    let pid = child.id() as libc::pid_t;
    // (reaped, timed_out)
    let state = Arc::new((Mutex::new((false, false)), Condvar::new()));
    let watchdog = {
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let deadline = Instant::now() + timeout;
            let (lock, wake) = &*state;
            let mut guard = lock.lock().unwrap();
            loop {
                if guard.0 {
                    return;
                }
                let now = Instant::now();
                if now >= deadline {
                    guard.1 = true;
                    // SAFETY: plain syscall; the pid is not reaped yet (guard.0
                    // is false and reaping happens under this lock).
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return;
                }
                guard = wake.wait_timeout(guard, deadline - now).unwrap().0;
            }
        })
    };

    // Wait until the child has exited, leaving it a zombie.
    loop {
        // SAFETY: siginfo_t is plain data; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err).context("waitid on the engine process");
        }
    }
    let exited_at = Instant::now();
    let (lock, wake) = &*state;
    let mut guard = lock.lock().unwrap();
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; wait4 fills it in.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut rusage) };
        if rc == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err).context("wait4 on the engine process");
        }
    }
    guard.0 = true;
    let timed_out = guard.1;
    drop(guard);
    wake.notify_all();
    let _ = watchdog.join();
    drop(child); // already reaped; dropping a Child does not wait
    Ok((ExitStatus::from_raw(status), rusage, exited_at, timed_out))
}

/// Runs the official engine and then ours with the same `spec`, each in its
/// own subdirectory of `dir`.
pub fn run_both(spec: &RunSpec, dir: &Path) -> Result<(RunOutput, RunOutput)> {
    let official = run(Engine::Official, spec, dir)?;
    let ours = run(Engine::Ours, spec, dir)?;
    Ok((official, ours))
}

/// Parses the `:::MLLOG {json}` lines of a detail log into `(key, value)`
/// pairs, in order. Other lines are ignored; a malformed MLLOG line is an
/// error.
pub fn parse_detail(text: &str) -> Result<Vec<(String, Value)>> {
    let mut entries = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let Some(json) = line.strip_prefix(":::MLLOG ") else {
            continue;
        };
        let mut record: Value = serde_json::from_str(json)
            .with_context(|| format!("line {}: not JSON: {}", number + 1, clip(line, 200)))?;
        let key = record["key"]
            .as_str()
            .ok_or_else(|| {
                anyhow!(
                    "line {}: no string \"key\": {}",
                    number + 1,
                    clip(line, 200)
                )
            })?
            .to_string();
        let value = record
            .get_mut("value")
            .map(Value::take)
            .unwrap_or(Value::Null);
        entries.push((key, value));
    }
    Ok(entries)
}

/// Every value logged under `key`, in order.
pub fn detail_values<'a>(detail: &'a [(String, Value)], key: &str) -> Vec<&'a Value> {
    detail
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v)
        .collect()
}

/// The first value logged under `key`.
pub fn detail_value<'a>(detail: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    detail.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The label of one summary line: the text left of its first `:` with
/// trailing blanks removed (leading blanks kept: they show nesting); a line
/// without a colon is its own label.
pub fn summary_label(line: &str) -> String {
    match line.find(':') {
        Some(i) => line[..i].trim_end().to_string(),
        None => line.trim_end().to_string(),
    }
}

/// The labels of a summary, one per line, in order, values dropped; blank
/// lines are kept (they are part of the layout) except at the very end.
pub fn summary_labels(text: &str) -> Vec<String> {
    let mut labels: Vec<String> = text.lines().map(summary_label).collect();
    while labels.last().is_some_and(|l| l.is_empty()) {
        labels.pop();
    }
    labels
}

/// The value of the first summary line whose label, trimmed, is `label`
/// (e.g. `"Samples per second"`, `"Result is"`).
pub fn summary_value(text: &str, label: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(':')?;
        (left.trim() == label).then(|| right.trim().to_string())
    })
}

/// One response in `mlperf_log_accuracy.json`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccuracyEntry {
    pub qsl_idx: u64,
    pub data: String,
    pub seq_id: u64,
}

/// Parses `mlperf_log_accuracy.json` (a JSON array of
/// `{"seq_id", "qsl_idx", "data"}` objects).
pub fn parse_accuracy(text: &str) -> Result<Vec<AccuracyEntry>> {
    let value: Value = serde_json::from_str(text).context("not JSON")?;
    let array = value
        .as_array()
        .ok_or_else(|| anyhow!("not a JSON array"))?;
    array
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let field = |name: &str| {
                entry
                    .get(name)
                    .ok_or_else(|| anyhow!("entry {i}: no {name:?}: {entry}"))
            };
            Ok(AccuracyEntry {
                seq_id: field("seq_id")?
                    .as_u64()
                    .ok_or_else(|| anyhow!("entry {i}: bad seq_id"))?,
                qsl_idx: field("qsl_idx")?
                    .as_u64()
                    .ok_or_else(|| anyhow!("entry {i}: bad qsl_idx"))?,
                data: field("data")?
                    .as_str()
                    .ok_or_else(|| anyhow!("entry {i}: bad data"))?
                    .to_string(),
            })
        })
        .collect()
}

/// Parses an issued-sample record: one QSL index per line.
pub fn parse_issued(text: &str) -> Result<Vec<u64>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            l.trim()
                .parse::<u64>()
                .with_context(|| format!("line {}: {l:?} is not an index", i + 1))
        })
        .collect()
}

/// `text` cut to at most `max` characters, with a marker when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}... ({} chars)", text.chars().count())
    }
}

/// The median of `values` (mean of the middle two for an even count); NaN
/// when empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// A benchmark binary's ending: its report on stdout, or its error on
/// stderr and a failing exit status.
pub fn finish_benchmark(name: &str, report: Result<String>) -> std::process::ExitCode {
    match report {
        Ok(text) => {
            print!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_drop_values_and_keep_layout() {
        let text = "SUT name : null-sut\nResult is : VALID\n  Early stopping satisfied: Yes\n\
                    Recommendations:\n * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.\n\
                    Samples per second: 4.88863e+07\n\nNo errors encountered during test.\n\n";
        assert_eq!(
            summary_labels(text),
            vec![
                "SUT name",
                "Result is",
                "  Early stopping satisfied",
                "Recommendations",
                " * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.",
                "Samples per second",
                "",
                "No errors encountered during test.",
            ]
        );
        assert_eq!(
            summary_value(text, "Samples per second").as_deref(),
            Some("4.88863e+07")
        );
        assert_eq!(summary_value(text, "Result is").as_deref(), Some("VALID"));
    }

    #[test]
    fn detail_lines_parse() {
        let text = ":::MLLOG {\"key\": \"generated_query_count\", \"value\": 2068, \"time_ms\": 1.0}\nnoise\n\
                    :::MLLOG {\"key\": \"loaded_qsl_set\", \"value\": [3,1,2], \"time_ms\": 1.0}\n";
        let detail = parse_detail(text).unwrap();
        assert_eq!(detail.len(), 2);
        assert_eq!(
            detail_value(&detail, "generated_query_count"),
            Some(&Value::from(2068))
        );
        assert_eq!(
            detail_values(&detail, "loaded_qsl_set")[0],
            &serde_json::json!([3, 1, 2])
        );
    }

    #[test]
    fn accuracy_and_issued_parse() {
        let acc = "[\n{ \"seq_id\" : 0, \"qsl_idx\" : 216, \"data\" : \"D8000000\" },\n\
                   { \"seq_id\" : 1, \"qsl_idx\" : 3543, \"data\" : \"D70D0000\" }\n]\n";
        let entries = parse_accuracy(acc).unwrap();
        assert_eq!(
            entries[1],
            AccuracyEntry {
                seq_id: 1,
                qsl_idx: 3543,
                data: "D70D0000".into()
            }
        );
        assert!(parse_accuracy("[\n]\n").unwrap().is_empty());
        assert_eq!(parse_issued("5\n7\n").unwrap(), vec![5, 7]);
    }

    #[test]
    fn median_of_three_and_four() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
