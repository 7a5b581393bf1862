//! Where tests and benchmarks put their files: a fresh directory per test
//! under `$TMPDIR/netdiv-tests/` ([`test_dir`]), removed when the test is
//! done unless `NETDIV_KEEP_TEST_DIRS` is set, and [`write_file`].

use std::ffi::OsStr;
use std::fs;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tempfile::TempDir;

/// The environment variable that keeps test directories (any value).
pub const KEEP_VAR: &str = "NETDIV_KEEP_TEST_DIRS";

/// A test's own directory: removed with everything in it when dropped,
/// unless [`KEEP_VAR`] was set when it was made or [`TestDir::keep`] was
/// called. It dereferences to its [`Path`].
#[derive(Debug)]
pub struct TestDir {
    dir: TempDir,
}

impl TestDir {
    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Keeps the directory after all (e.g. for a failure message that
    /// points into it) and returns its path.
    pub fn keep(self) -> PathBuf {
        self.dir.keep()
    }
}

impl Deref for TestDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

/// So a [`TestDir`] is a command-line argument as it is.
impl AsRef<OsStr> for TestDir {
    fn as_ref(&self) -> &OsStr {
        self.path().as_os_str()
    }
}

/// Whether [`KEEP_VAR`] asks to keep test directories and files.
fn keep_requested() -> bool {
    std::env::var_os(KEEP_VAR).is_some()
}

/// The folder every test directory and file is made in:
/// `$TMPDIR/netdiv-tests/`.
fn base_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir().join("netdiv-tests");
    fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    Ok(base)
}

/// A fresh, empty directory `$TMPDIR/netdiv-tests/<prefix>-XXXXXX`, unique
/// per call (a [`tempfile::TempDir`]).
///
/// It is removed when the returned [`TestDir`] is dropped. Set
/// `NETDIV_KEEP_TEST_DIRS` (to any value) to keep every test directory,
/// e.g. to read the logs of a failed run whose error names a path in it;
/// each kept directory is then named on stderr.
pub fn test_dir(prefix: &str) -> Result<TestDir> {
    test_dir_kept_if(prefix, keep_requested())
}

/// [`test_dir`], kept on drop when `keep`.
fn test_dir_kept_if(prefix: &str, keep: bool) -> Result<TestDir> {
    let base = base_dir()?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .disable_cleanup(keep)
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a {prefix} directory in {}", base.display()))?;
    if keep {
        eprintln!("{KEEP_VAR}: keeping {}", dir.path().display());
    }
    Ok(TestDir { dir })
}

/// A fresh, empty file `$TMPDIR/netdiv-tests/<prefix>-XXXXXX<suffix>`,
/// removed when the returned [`tempfile::NamedTempFile`] is dropped, kept
/// like a [`test_dir`] when `NETDIV_KEEP_TEST_DIRS` is set.
pub fn test_file(prefix: &str, suffix: &str) -> Result<tempfile::NamedTempFile> {
    let base = base_dir()?;
    let keep = keep_requested();
    let file = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .suffix(suffix)
        .disable_cleanup(keep)
        .tempfile_in(&base)
        .with_context(|| format!("cannot create a {prefix} file in {}", base.display()))?;
    if keep {
        eprintln!("{KEEP_VAR}: keeping {}", file.path().display());
    }
    Ok(file)
}

/// Writes `contents` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, contents: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    fs::write(&path, contents).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_dir_is_fresh_and_removed_on_drop() {
        let a = test_dir_kept_if("files-unit", false).unwrap();
        let b = test_dir_kept_if("files-unit", false).unwrap();
        assert_ne!(a.path(), b.path());
        assert!(a.is_dir() && fs::read_dir(&a).unwrap().next().is_none());
        let file = write_file(&a, "x.txt", "hello").unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "hello");
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
        let kept = b.keep();
        assert!(kept.is_dir());
        fs::remove_dir_all(kept).unwrap();
    }
}
