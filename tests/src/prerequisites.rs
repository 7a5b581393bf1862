//! What some tests need besides the workspace's own programs, and how a
//! test without it behaves: ONNX Runtime and the ResNet-50-shaped graph
//! (fetched from their PyPI wheels by `deploy/onnxruntime/fetch.sh`), the
//! digits model and data of `tests/data/digits`, and [`skip_unless_ci`],
//! which makes a missing prerequisite a SKIPPED pass outside CI and a
//! failure under CI.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};

use crate::binaries::{existing_file_from_env, workspace_root};
use crate::text::tail;

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
