//! The four official log files: summary, detail (`:::MLLOG` lines),
//! accuracy JSON and Chrome trace, with the official names and layout.

pub(crate) mod accuracy;
pub(crate) mod detail;
pub(crate) mod format;
pub(crate) mod summary;
pub(crate) mod trace;

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

/// Where the logs go and what is written besides them.
#[derive(Clone, Debug)]
pub struct LogSettings {
    /// Folder the log files are written to (created if missing).
    pub outdir: PathBuf,
    /// Start of every file name (`mlperf_log_` by default).
    pub prefix: String,
    /// Text between the log's name and its extension (empty by default).
    pub suffix: String,
    /// Write the Chrome trace `mlperf_log_trace.json`.
    pub enable_trace: bool,
    /// Mirrors the official option; the engine does not read it (the summary
    /// text is returned to the caller, which prints it).
    pub copy_summary_to_stdout: bool,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            outdir: PathBuf::from("."),
            prefix: "mlperf_log_".into(),
            suffix: String::new(),
            enable_trace: true,
            copy_summary_to_stdout: false,
        }
    }
}

impl LogSettings {
    /// The path of one log file, e.g. `summary` → `mlperf_log_summary.txt`.
    pub fn path(&self, name: &str, extension: &str) -> PathBuf {
        self.outdir
            .join(format!("{}{name}{}.{extension}", self.prefix, self.suffix))
    }
}

/// Creates a log file, naming it in the error.
pub fn create(path: &Path) -> io::Result<BufWriter<File>> {
    File::create(path)
        .map(|f| BufWriter::with_capacity(1 << 20, f))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))
}
