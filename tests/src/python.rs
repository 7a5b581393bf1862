//! A Python for the official tools: the compliance verification needs
//! numpy and the checker PyYAML; the data-set tests write the reference
//! formats with pandas. The system `python3` if it has them,
//! else a virtual environment in the cache (`~/.cache/netdiv/python`),
//! made once with pip, so a fresh machine needs nothing by hand.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};

/// The modules the official tools import beyond the standard library.
const MODULES: &str = "import numpy, yaml, pandas";

fn has_modules(python: &std::path::Path) -> bool {
    Command::new(python)
        .args(["-c", MODULES])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A Python 3 with numpy, PyYAML and pandas (set up on first use).
pub fn python_for_official_tools() -> Result<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| set_up().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn set_up() -> Result<PathBuf> {
    let system = PathBuf::from("python3");
    if has_modules(&system) {
        return Ok(system);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or_else(|| anyhow!("neither XDG_CACHE_HOME nor HOME is set"))?
        .join("netdiv/python");
    std::fs::create_dir_all(&cache)
        .with_context(|| format!("cannot create {}", cache.display()))?;
    // One installer at a time across test processes.
    let lock = std::fs::File::create(cache.join(".lock"))?;
    // SAFETY: a valid descriptor; the lock is released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!("cannot lock {}", cache.join(".lock").display());
    }
    let venv = cache.join("venv");
    let python = venv.join("bin/python3");
    if has_modules(&python) {
        return Ok(python);
    }
    let run = |cmd: &mut Command, what: &str| -> Result<()> {
        let out = cmd.output().with_context(|| format!("cannot {what}"))?;
        if !out.status.success() {
            bail!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rev()
                    .take(10)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        Ok(())
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "create a Python virtual environment",
    )?;
    run(
        Command::new(&python).args([
            "-m", "pip", "install", "--quiet", "numpy", "pyyaml", "pandas",
        ]),
        "pip install numpy pyyaml pandas",
    )?;
    if !has_modules(&python) {
        bail!(
            "{} still cannot import numpy, yaml and pandas",
            python.display()
        );
    }
    Ok(python)
}

/// The program `program` of the PyPI package `package`, installed once
/// into a virtual environment of its own under the cache
/// (`netdiv/tools/PACKAGE`), so a fresh machine needs nothing by hand.
pub fn pypi_tool(package: &str, program: &str) -> Result<PathBuf> {
    let venv = pypi_venv(package, &[package])?;
    let tool = venv.join("bin").join(program);
    if !tool.is_file() {
        bail!(
            "pip installed {package} but {} is not there",
            tool.display()
        );
    }
    Ok(tool)
}

/// The Python of a virtual environment `name` under the cache
/// (`netdiv/tools/NAME`) with exactly `packages` (pinned `name==version`
/// specs) installed by pip, made once and shared by test processes.
pub fn pypi_python(name: &str, packages: &[&str]) -> Result<PathBuf> {
    Ok(pypi_venv(name, packages)?.join("bin/python3"))
}

fn pypi_venv(name: &str, packages: &[&str]) -> Result<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or_else(|| anyhow!("neither XDG_CACHE_HOME nor HOME is set"))?
        .join("netdiv/tools");
    std::fs::create_dir_all(&cache)
        .with_context(|| format!("cannot create {}", cache.display()))?;
    let lock = std::fs::File::create(cache.join(format!(".{name}.lock")))?;
    // SAFETY: a valid descriptor; the lock is released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!("cannot lock the cache of {name}");
    }
    let venv = cache.join(name);
    // The mark is written last: a half-made environment is made again.
    let done = venv.join(".netdiv-installed");
    if !done.is_file() {
        if venv.exists() {
            std::fs::remove_dir_all(&venv)
                .with_context(|| format!("cannot clear {}", venv.display()))?;
        }
        install(&venv, packages)?;
        std::fs::write(&done, packages.join("\n"))
            .with_context(|| format!("cannot write {}", done.display()))?;
    }
    Ok(venv)
}

/// A virtual environment at `venv` with `packages` installed by pip.
fn install(venv: &std::path::Path, packages: &[&str]) -> Result<()> {
    let run = |cmd: &mut Command, what: &str| -> Result<()> {
        let out = cmd.output().with_context(|| format!("cannot {what}"))?;
        if !out.status.success() {
            bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(venv),
        "create a Python virtual environment",
    )?;
    run(
        Command::new(venv.join("bin/python3"))
            .args(["-m", "pip", "install", "--quiet"])
            .args(packages),
        &format!("pip install {}", packages.join(" ")),
    )
}
