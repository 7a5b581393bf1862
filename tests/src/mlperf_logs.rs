//! What a LoadGen run writes, as the tests read it: the MLPerf logs through
//! the library's one reader (`loadgen_node::mlperf_logs`, re-exported
//! here, so a test reads a log exactly as the report and the submission
//! do), and netdiv's own issued-sample record of `--record-issued`.

use anyhow::{Context, Result};

pub use loadgen_node::mlperf_logs::*;

/// Parses an issued-sample record: one QSL index per line.
pub fn parse_issued(text: &str) -> Result<Vec<u64>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            l.trim()
                .parse::<u64>()
                .with_context(|| format!("line {}: {l:?} is not an index", i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_records_parse_and_bad_lines_are_named() {
        assert_eq!(parse_issued("5\n7\n").unwrap(), vec![5, 7]);
        let e = parse_issued("5\nx\n").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }
}
