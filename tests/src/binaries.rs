//! The programs the tests drive, found or built once per process:
//!
//! * the release `loadgen-node` and `sut-node`, built together by one
//!   `cargo build --release` (their paths are taken from cargo's JSON
//!   messages, so `CARGO_TARGET_DIR` is honoured);
//! * `loadgen-node` built with the official LoadGen (`--features
//!   official`), in a target directory of its own;
//! * the official LoadGen's driver (`tests/official/driver.cc`), built and
//!   cached by `tests/official/fetch-build.sh`.
//!
//! `NETDIV_LOADGEN_NODE`, `NETDIV_SUT_NODE`, `NETDIV_LOADGEN_NODE_OFFICIAL`
//! and `NETDIV_OFFICIAL_DRIVER` name prebuilt binaries instead.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::text::tail;

/// The official LoadGen release `fetch-build.sh` builds.
pub const OFFICIAL_VERSION: &str = "6.0.17";

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

/// The official driver of the current round, built (and cached) by
/// `tests/official/fetch-build.sh` on first use.
/// `NETDIV_OFFICIAL_DRIVER=/path/to/official-driver` skips it.
pub fn official_driver_bin() -> Result<PathBuf> {
    official_driver_bin_for(None)
}

/// The official driver linked with the LoadGen of `round` (`v5.1`; `None`:
/// the current round), built and cached on first use.
pub fn official_driver_bin_for(round: Option<&str>) -> Result<PathBuf> {
    static BINS: Mutex<BTreeMap<String, Result<PathBuf, String>>> = Mutex::new(BTreeMap::new());
    let key = round.unwrap_or("").to_string();
    let mut bins = BINS.lock().unwrap_or_else(|p| p.into_inner());
    bins.entry(key)
        .or_insert_with(|| build_official_driver(round).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
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

/// The file `var` names, if it is set, as an absolute path (the
/// processes started from it run in their own directories); an error if it
/// names no file.
pub(crate) fn existing_file_from_env(var: &str) -> Result<Option<PathBuf>> {
    match std::env::var_os(var) {
        None => Ok(None),
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_file() {
                bail!("{var}={} does not name a file", path.display());
            }
            Ok(Some(std::path::absolute(&path)?))
        }
    }
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

fn build_official_driver(round: Option<&str>) -> Result<PathBuf> {
    if round.is_none() {
        if let Some(path) = existing_file_from_env("NETDIV_OFFICIAL_DRIVER")? {
            return Ok(path);
        }
    }
    let script = workspace_root().join("tests/official/fetch-build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .args(round)
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
