//! `mlperf_log_detail.txt`: one `:::MLLOG {...}` JSON line per event.

use std::io::{self, Write};
use std::time::Instant;

use super::format::{json_double, json_string};

/// A logged value, printed as the official logger prints each C++ type.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// A string, printed JSON-quoted.
    Str(String),
    /// Any integer type, printed in decimal.
    Int(i128),
    /// A double, printed as the official logger prints doubles.
    Float(f64),
    /// A bool, printed `true` or `false`.
    Bool(bool),
    /// A list of indices, such as a loaded sample set.
    List(Vec<usize>),
}

impl Value {
    fn render(&self) -> String {
        match self {
            Value::Str(s) => json_string(s),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => json_double(*f),
            Value::Bool(b) => b.to_string(),
            Value::List(v) => {
                let items: Vec<String> = v.iter().map(usize::to_string).collect();
                format!("[{}]", items.join(","))
            }
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $arm:ident $(as $cast:ty)?),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(v: $t) -> Self { Value::$arm((v $(as $cast)?).into()) }
        })*
    };
}
value_from!(
    &str => Str, String => Str, u64 => Int as i128, i64 => Int as i128,
    usize => Int as i128, u32 => Int as i128, i32 => Int as i128,
    f64 => Float, bool => Bool, Vec<usize> => List,
);

/// The kind of an event, flagged in its metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// An ordinary event.
    Info,
    /// Flagged `is_warning` and counted in the summary.
    Warning,
    /// Flagged `is_error` and counted in the summary.
    Error,
}

/// Writes detail lines, timestamped from the start of logging.
#[derive(Debug)]
pub(crate) struct DetailLog<W: Write> {
    out: W,
    origin: Instant,
    pid: u32,
    errors: u64,
    warnings: u64,
}

impl<W: Write> DetailLog<W> {
    /// Writes to `out`, timestamping each event from `origin`.
    pub(crate) fn new(out: W, origin: Instant) -> Self {
        Self {
            out,
            origin,
            pid: std::process::id(),
            errors: 0,
            warnings: 0,
        }
    }

    /// Writes one event; `file` and `line` name the netdiv source of it.
    pub(crate) fn event(
        &mut self,
        level: Level,
        key: &str,
        value: Value,
        file: &str,
        line: u32,
    ) -> io::Result<()> {
        match level {
            Level::Error => self.errors += 1,
            Level::Warning => self.warnings += 1,
            Level::Info => {}
        }
        let ns = self.origin.elapsed().as_nanos();
        let file = file.rsplit(['/', '\\']).next().unwrap_or(file);
        writeln!(
            self.out,
            ":::MLLOG {{\"key\": {}, \"value\": {}, \"time_ms\": {}.{:06}, \"namespace\": \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {{\"is_error\": {}, \"is_warning\": {}, \"file\": \"{file}\", \"line_no\": {line}, \"pid\": {}, \"tid\": {}}}}}",
            json_string(key),
            value.render(),
            ns / 1_000_000,
            ns % 1_000_000,
            level == Level::Error,
            level == Level::Warning,
            self.pid,
            self.pid,
        )
    }

    /// Error events written so far.
    pub(crate) fn error_count(&self) -> u64 {
        self.errors
    }

    /// Counts `n` errors that are summarised in a line already written
    /// rather than written one by one, so `num_errors` stays exact.
    pub(crate) fn count_unwritten_errors(&mut self, n: u64) {
        self.errors += n;
    }

    /// Warning events written so far.
    pub(crate) fn warning_count(&self) -> u64 {
        self.warnings
    }

    /// Flushes the underlying writer.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Logs an event with the caller's source location.
#[macro_export]
macro_rules! mllog {
    ($log:expr, $key:expr, $value:expr) => {
        $log.event(
            $crate::engine::logs::detail::Level::Info,
            $key,
            $value.into(),
            file!(),
            line!(),
        )
    };
    ($log:expr, warning $key:expr, $value:expr) => {
        $log.event(
            $crate::engine::logs::detail::Level::Warning,
            $key,
            $value.into(),
            file!(),
            line!(),
        )
    };
    ($log:expr, error $key:expr, $value:expr) => {
        $log.event(
            $crate::engine::logs::detail::Level::Error,
            $key,
            $value.into(),
            file!(),
            line!(),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_follow_the_mllog_layout() {
        let mut log = DetailLog::new(Vec::new(), Instant::now());
        mllog!(log, "effective_target_qps", 2000.0f64).unwrap();
        mllog!(log, error "error_runtime", "Ending early").unwrap();
        mllog!(log, "loaded_qsl_set", vec![3usize, 1, 2]).unwrap();
        let text = String::from_utf8(log.out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(
            ":::MLLOG {\"key\": \"effective_target_qps\", \"value\": 2000, \"time_ms\": 0."
        ));
        assert!(lines[0].contains("\"namespace\": \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {\"is_error\": false, \"is_warning\": false, \"file\": \"detail.rs\""));
        assert!(lines[1].contains("\"is_error\": true"));
        assert!(lines[2].contains("\"value\": [3,1,2]"));
        assert_eq!(log.errors, 1);
    }
}
