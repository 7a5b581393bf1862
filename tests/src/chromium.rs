//! A real headless Chromium for tests of the HTML report: installed once
//! by `tests/setup/chromium.sh` (Debian's `chromium`, flock'd), then run
//! with a deadline to dump a page's DOM after its scripts ran, or to take
//! a screenshot. Each call gets its own profile folder, so tests may run
//! it at the same time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::binaries::workspace_root;
use crate::files::test_dir;
use crate::process::run_with_deadline;
use crate::text::tail;

/// The chromium program, installed by the setup script if missing.
pub fn chromium() -> Result<PathBuf> {
    static FOUND: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let script = workspace_root().join("tests/setup/chromium.sh");
            let out = Command::new("bash")
                .arg(&script)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed ({}):\n{}",
                    script.display(),
                    out.status,
                    tail(&String::from_utf8_lossy(&out.stderr), 20)
                ));
            }
            Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// What Chromium made of a page: the DOM after its scripts ran, and its
/// log (console messages included).
pub struct Rendered {
    pub dom: String,
    pub log: String,
}

/// Runs headless Chromium on `page` with `args` (before the URL); its
/// stdout and stderr.
fn run(page: &Path, args: &[String]) -> Result<(String, String)> {
    let profile = test_dir("chromium-profile")?;
    let out_path = profile.join("stdout");
    let err_path = profile.join("stderr");
    let url = format!(
        "file://{}",
        std::fs::canonicalize(page)
            .with_context(|| format!("cannot find {}", page.display()))?
            .display()
    );
    let mut command = Command::new(chromium()?);
    command
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.join("data").display()
        ))
        .args(args)
        .arg(&url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?);
    let exited = run_with_deadline(&mut command, Duration::from_secs(120))?;
    let stdout = std::fs::read_to_string(&out_path)?;
    let stderr = std::fs::read_to_string(&err_path)?;
    if exited.timed_out || !exited.status.success() {
        bail!(
            "chromium on {url} failed ({}{}):\n{}",
            exited.status,
            if exited.timed_out { ", timed out" } else { "" },
            tail(&stderr, 30)
        );
    }
    Ok((stdout, stderr))
}

/// The page's DOM after its scripts ran (`--dump-dom`).
pub fn render(page: &Path) -> Result<Rendered> {
    let (dom, log) = run(page, &["--dump-dom".into()])?;
    if !dom.contains("</html>") {
        bail!("chromium dumped no page:\n{}", tail(&log, 30));
    }
    Ok(Rendered { dom, log })
}

/// A PNG screenshot of `page` at `width` x `height`.
pub fn screenshot(page: &Path, png: &Path, (width, height): (u32, u32)) -> Result<()> {
    run(
        page,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
            "--hide-scrollbars".into(),
        ],
    )?;
    if !png.is_file() {
        bail!("chromium wrote no screenshot {}", png.display());
    }
    Ok(())
}

/// The attributes of each `<tag ...>` start tag in `html`, in order
/// (double-quoted values, as the report and Chromium's dump write them).
pub fn start_tags(html: &str, tag: &str) -> Vec<Vec<(String, String)>> {
    let open = format!("<{tag} ");
    html.match_indices(&open)
        .filter_map(|(at, _)| {
            let rest = &html[at + open.len()..];
            let end = rest.find('>')?;
            Some(attributes(&rest[..end]))
        })
        .collect()
}

fn attributes(mut text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while let Some(eq) = text.find("=\"") {
        let name = text[..eq].trim().to_string();
        let rest = &text[eq + 2..];
        let Some(close) = rest.find('"') else { break };
        out.push((name, rest[..close].to_string()));
        text = &rest[close + 1..];
    }
    out
}

/// The value of attribute `name` among `attrs`.
pub fn attr<'a>(attrs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}
