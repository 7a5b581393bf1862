//! `loadgen-node pack`: the archive a submitter uploads. It holds the
//! submitter's tree alone (`network/SUBMITTER/...`: not netdiv's work
//! folder, not the checker's own outputs beside it), is written only for
//! a tree the official checker passes and that holds no rehearsal mark
//! anywhere (a run record, a banner, a precomputed score, a description:
//! [`super::rehearsal`]), and comes with its sha256 (`ARCHIVE.sha256`, in
//! `sha256sum`'s format).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::{checker, rehearsal};
use crate::cli::args::PackArgs;

/// `loadgen-node pack`.
pub(crate) fn command(args: &PackArgs) -> Result<()> {
    let check = &args.check;
    let tree = check.input.join("network").join(&check.submitter);
    if !tree.is_dir() {
        bail!(
            "{} is not a submission tree: no network/{} in it",
            check.input.display(),
            check.submitter
        );
    }
    let marks = rehearsal::marks_under(&tree)?;
    if !marks.is_empty() {
        bail!(
            "{} is a rehearsal, not a result, and is not packed for upload:\n  {}",
            tree.display(),
            rehearsal::describe(&marks, &tree, 20).join("\n  ")
        );
    }
    let verdict = checker::verdict_of(check)?;
    if !verdict.passed() {
        print!("{}", verdict.render());
        bail!("the official submission checker found errors (listed above): nothing was packed");
    }
    let archive = args
        .archive
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.tar.gz", check.submitter)));
    let hash = write_archive(&check.input, &check.submitter, &archive)?;
    println!("packed {} (sha256 {hash})", archive.display());
    Ok(())
}

/// Writes `network/SUBMITTER` of `root` as a gzip'd tar to `archive`
/// (entries in name order, so the same tree packs the same way) and its
/// sha256 beside it; the hash.
pub(crate) fn write_archive(root: &Path, submitter: &str, archive: &Path) -> Result<String> {
    let file = std::fs::File::create(archive)
        .with_context(|| format!("cannot create {}", archive.display()))?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    let inside = Path::new("network").join(submitter);
    let mut files = Vec::new();
    list_files(&root.join(&inside), &inside, &mut files)?;
    files.sort();
    for name in &files {
        tar.append_path_with_name(root.join(name), name)
            .with_context(|| format!("cannot pack {}", name.display()))?;
    }
    tar.into_inner()?
        .finish()
        .with_context(|| format!("cannot write {}", archive.display()))?
        .flush()?;
    let bytes =
        std::fs::read(archive).with_context(|| format!("cannot read {}", archive.display()))?;
    let hash = format!("{:x}", Sha256::digest(&bytes));
    let name = archive.file_name().unwrap_or_default().to_string_lossy();
    let sums = PathBuf::from(format!("{}.sha256", archive.display()));
    std::fs::write(&sums, format!("{hash}  {name}\n"))
        .with_context(|| format!("cannot write {}", sums.display()))?;
    Ok(hash)
}

/// Every file under `dir`, named as `prefix/...`.
fn list_files(dir: &Path, prefix: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let name = prefix.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            list_files(&entry.path(), &name, out)?;
        } else {
            out.push(name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_holds_the_submitters_tree_alone_with_its_sha256() {
        let root = tempfile::tempdir().unwrap();
        let put = |name: &str, text: &str| {
            let path = root.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        put("network/org/systems/sys.json", "{}");
        put(
            "network/org/results/sys/m/Offline/performance/run_1/mlperf_log_summary.txt",
            "x",
        );
        put(".netdiv-work/sys/raw.log", "work");
        put("checker-v6.1.log", "checker");
        put("network/other/systems/x.json", "{}");
        let archive = root.path().join("org.tar.gz");
        let hash = write_archive(root.path(), "org", &archive).unwrap();
        let bytes = std::fs::read(&archive).unwrap();
        assert_eq!(hash, format!("{:x}", Sha256::digest(&bytes)));
        let sums = std::fs::read_to_string(root.path().join("org.tar.gz.sha256")).unwrap();
        assert_eq!(sums, format!("{hash}  org.tar.gz\n"));
        let mut names: Vec<String> = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]))
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "network/org/results/sys/m/Offline/performance/run_1/mlperf_log_summary.txt",
                "network/org/systems/sys.json",
            ]
        );
    }
}
