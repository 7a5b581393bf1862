//! Reading a run folder for the report: the four MLPerf logs (read by the
//! library's `mlperf_logs`) and netdiv's run record. A missing or garbled
//! file is an error naming the file (and the line where one can be
//! named); a file the run may legitimately leave empty (the trace with
//! `--no-trace`, or under the official LoadGen) is not.

use std::path::{Path, PathBuf};

use anyhow::Result;
use loadgen_node::mlperf_logs::{self, read_log, Detail, Summary, Trace, ACCURACY, TRACE};
use loadgen_node::run_record::RunRecord;

pub(crate) use loadgen_node::mlperf_logs::{TraceSample, SUMMARY};

/// Everything the report is made from.
pub(crate) struct RunLogs {
    /// The folder read.
    pub(crate) dir: PathBuf,
    /// `mlperf_log_summary.txt`.
    pub(crate) summary: Summary,
    /// `mlperf_log_detail.txt`.
    pub(crate) detail: Detail,
    /// Responses in the accuracy log.
    pub(crate) accuracy_entries: usize,
    /// The per-sample events of `mlperf_log_trace.json`.
    pub(crate) trace: Trace,
    /// `netdiv_run.json`, for network runs.
    pub(crate) record: Option<RunRecord>,
}

/// Reads and parses every log of the run in `dir`.
pub(crate) fn read_run(dir: &Path) -> Result<RunLogs> {
    let summary = Summary::read(dir)?;
    let detail = Detail::read(dir)?;
    let accuracy_entries =
        mlperf_logs::accuracy_count(&read_log(dir, ACCURACY)?, &dir.join(ACCURACY))?;
    let trace = Trace::parse(&read_log(dir, TRACE)?, &dir.join(TRACE))?;
    let record = RunRecord::read_in(dir)?;
    Ok(RunLogs {
        dir: dir.to_path_buf(),
        summary,
        detail,
        accuracy_entries,
        trace,
        record,
    })
}
