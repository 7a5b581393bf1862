//! `loadgen-node report LOGDIR`: one self-contained HTML page of a run
//! (`LOGDIR/netdiv_report.html`, its plots also as `LOGDIR/report/*.svg`)
//! from the four MLPerf logs and, for network runs, netdiv's run record:
//! the verdict and why, latency and throughput, tokens, nodes and the
//! Network-division checks. Reading the logs is in [`logs`], drawing in
//! [`plots`], the page in [`html`]. `loadgen-node run` writes one after
//! each run unless `--no-report`.

pub(crate) mod html;
pub(crate) mod logs;
pub(crate) mod plots;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::args::ReportArgs;

/// The page's file name in the run folder.
pub(crate) const FILE: &str = "netdiv_report.html";
/// The folder the plots are written to, beside the page.
pub(crate) const SVG_DIR: &str = "report";

/// Writes the report of the run in `dir`; returns the page's path.
pub(crate) fn write(dir: &Path, page: Option<&Path>) -> Result<PathBuf> {
    let logs = logs::read_run(dir)?;
    let plots = plots::all(&logs);
    let page = page.map_or_else(|| dir.join(FILE), Path::to_path_buf);
    let base = page.parent().unwrap_or(Path::new("."));
    let svg_dir = base.join(SVG_DIR);
    std::fs::create_dir_all(&svg_dir)
        .with_context(|| format!("cannot create {}", svg_dir.display()))?;
    for p in &plots {
        if let plots::PlotBody::Svg { svg, .. } = &p.body {
            let path = svg_dir.join(format!("{}.svg", p.id));
            std::fs::write(&path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    std::fs::write(&page, html::render(&logs, &plots, SVG_DIR))
        .with_context(|| format!("cannot write {}", page.display()))?;
    Ok(page)
}

/// The run folders under `dir`: itself if it holds a summary, else its
/// subfolders that do (the embedded default writes one per scenario).
fn run_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.join(logs::SUMMARY).exists() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(logs::SUMMARY).is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        bail!(
            "{} holds no {} (nor do its subfolders): not a run's log folder",
            dir.display(),
            logs::SUMMARY
        );
    }
    Ok(dirs)
}

/// `loadgen-node report`.
pub(crate) fn command(args: &ReportArgs) -> Result<()> {
    let dirs = run_dirs(&args.logdir)?;
    if args.output.is_some() && dirs.len() > 1 {
        bail!(
            "{} holds {} runs; --output names one page (report each run folder on its own)",
            args.logdir.display(),
            dirs.len()
        );
    }
    for dir in dirs {
        let page = write(&dir, args.output.as_deref())?;
        println!("report: {}", page.display());
    }
    Ok(())
}

/// After a run: writes its report and prints where, one line. A report
/// that cannot be written is a warning, not the run's failure.
pub(crate) fn after_run(output: &Path) {
    match write(output, None) {
        Ok(page) => println!("report: {}", page.display()),
        Err(e) => tracing::warn!("no report: {e:#}"),
    }
}
