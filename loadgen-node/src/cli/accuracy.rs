//! Scoring an accuracy log: each response of `mlperf_log_accuracy.json`
//! (hex bytes of the SUT's output) is read as a class index and compared
//! with the sample's label. This is what a benchmark's accuracy script does
//! for a classifier whose SUT returns its top-1 class.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loadgen_node::mlperf_logs::{parse_accuracy, AccuracyEntry, LogError, ACCURACY};
use loadgen_node::qsl::DType;

/// Why a log or label file could not be scored; each names the file and
/// the entry or line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScoreError {
    #[error("cannot read {}: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{}: line {line}: {text:?} is not an integer label", path.display())]
    Label {
        path: PathBuf,
        line: usize,
        text: String,
    },
    #[error("accuracy log entry {entry} (qsl_idx {qsl_idx}): {reason}")]
    Entry {
        entry: usize,
        qsl_idx: u64,
        reason: String,
    },
    #[error("the accuracy log has no entries: was the run in AccuracyOnly mode?")]
    Empty,
    #[error("class responses must be an integer type, not {0}")]
    NotAnInteger(DType),
}

/// Top-1 accuracy over the distinct samples of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Top1 {
    pub(crate) correct: usize,
    /// Distinct samples scored.
    pub(crate) samples: usize,
    /// Entries for a sample already scored (the LoadGen may log a sample
    /// more than once in performance runs); they must agree with the first.
    pub(crate) repeats: usize,
}

impl Top1 {
    pub(crate) fn accuracy(&self) -> f64 {
        self.correct as f64 / self.samples as f64
    }
}

impl std::fmt::Display for Top1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "top-1 accuracy {:.3}% ({} of {} samples)",
            100.0 * self.accuracy(),
            self.correct,
            self.samples
        )
    }
}

/// Reads labels: one integer per line, in sample order.
pub(crate) fn read_labels(path: &Path) -> Result<Vec<i64>, ScoreError> {
    let text = std::fs::read_to_string(path).map_err(|cause| ScoreError::Io {
        path: path.to_path_buf(),
        cause,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            l.trim().parse().map_err(|_| ScoreError::Label {
                path: path.to_path_buf(),
                line: i + 1,
                text: l.to_string(),
            })
        })
        .collect()
}

/// Scores the accuracy log at `path` (a file, or a folder holding
/// `mlperf_log_accuracy.json`).
pub(crate) fn score_file(path: &Path, labels: &[i64], dtype: DType) -> Result<Top1, ScoreError> {
    let file = if path.is_dir() {
        path.join(ACCURACY)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|cause| ScoreError::Io {
        path: file.clone(),
        cause,
    })?;
    score(&parse_accuracy(&text, &file)?, labels, dtype)
}

fn score(entries: &[AccuracyEntry], labels: &[i64], dtype: DType) -> Result<Top1, ScoreError> {
    if !matches!(dtype, DType::U8 | DType::I8 | DType::I32 | DType::I64) {
        return Err(ScoreError::NotAnInteger(dtype));
    }
    let mut classes: BTreeMap<usize, i64> = BTreeMap::new();
    let mut repeats = 0;
    for (i, e) in entries.iter().enumerate() {
        let fail = |reason: String| ScoreError::Entry {
            entry: i,
            qsl_idx: e.qsl_idx,
            reason,
        };
        let Some(index) = usize::try_from(e.qsl_idx)
            .ok()
            .filter(|&i| i < labels.len())
        else {
            return Err(fail(format!("there are only {} labels", labels.len())));
        };
        let class = class_of(&e.data, dtype).map_err(fail)?;
        match classes.insert(index, class) {
            Some(first) if first != class => {
                return Err(fail(format!(
                    "class {class} differs from {first} logged earlier for the same sample"
                )))
            }
            Some(_) => repeats += 1,
            None => {}
        }
    }
    if classes.is_empty() {
        return Err(ScoreError::Empty);
    }
    let correct = classes
        .iter()
        .filter(|(&idx, &class)| labels[idx] == class)
        .count();
    Ok(Top1 {
        correct,
        samples: classes.len(),
        repeats,
    })
}

/// The class index in a response's hex bytes (one little-endian integer).
fn class_of(hex: &str, dtype: DType) -> Result<i64, String> {
    let bytes = decode_hex(hex)?;
    if bytes.len() != dtype.size() {
        return Err(format!(
            "response has {} bytes; a {dtype} class has {}",
            bytes.len(),
            dtype.size()
        ));
    }
    Ok(match dtype {
        DType::U8 => bytes[0] as i64,
        DType::I8 => bytes[0] as i8 as i64,
        DType::I32 => i32::from_le_bytes(bytes[..].try_into().expect("4 bytes")) as i64,
        _ => i64::from_le_bytes(bytes[..].try_into().expect("8 bytes")),
    })
}

fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits in {hex:?}"));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("{hex:?} is not hexadecimal"))
        })
        .collect()
}

/// `loadgen-node accuracy`: top-1 of a classifier's accuracy log.
pub(crate) fn command(args: &super::args::AccuracyArgs) -> anyhow::Result<()> {
    let labels = read_labels(&args.labels)?;
    let top1 = score_file(&args.log, &labels, args.class_dtype)?;
    println!("{top1}");
    if top1.repeats > 0 {
        println!("({} repeated entries agreed with the first)", top1.repeats);
    }
    if let Some(min) = args.min_top1 {
        if top1.accuracy() < min {
            anyhow::bail!(
                "top-1 accuracy {:.5} is below --min-top1 {min}",
                top1.accuracy()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(qsl_idx: u64, data: String) -> AccuracyEntry {
        AccuracyEntry {
            qsl_idx,
            data,
            seq_id: 0,
            token_data: None,
            token_count: None,
        }
    }

    fn entry(qsl_idx: u64, class: i64) -> AccuracyEntry {
        let data = class
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        logged(qsl_idx, data)
    }

    #[test]
    fn counts_each_sample_once() {
        let labels = [3, 1, 4, 1];
        let entries = [entry(0, 3), entry(1, 2), entry(2, 4), entry(0, 3)];
        let top1 = score(&entries, &labels, DType::I64).unwrap();
        assert_eq!(
            top1,
            Top1 {
                correct: 2,
                samples: 3,
                repeats: 1
            }
        );
        assert!(top1.to_string().contains("66.667% (2 of 3 samples)"));
    }

    #[test]
    fn bad_entries_are_named() {
        let labels = [3, 1];
        let e = score(&[entry(0, 3), entry(0, 4)], &labels, DType::I64).unwrap_err();
        assert!(e.to_string().contains("entry 1 (qsl_idx 0)"), "{e}");
        let e = score(&[entry(5, 3)], &labels, DType::I64).unwrap_err();
        assert!(e.to_string().contains("only 2 labels"), "{e}");
        let short = logged(0, "0300".into());
        let e = score(&[short], &labels, DType::I64).unwrap_err();
        assert!(e.to_string().contains("2 bytes"), "{e}");
        let bad = logged(0, "zz".into());
        assert!(score(&[bad], &labels, DType::U8)
            .unwrap_err()
            .to_string()
            .contains("not hexadecimal"));
        assert!(matches!(
            score(&[], &labels, DType::I64),
            Err(ScoreError::Empty)
        ));
        assert!(matches!(
            score(&[entry(0, 1)], &labels, DType::F32),
            Err(ScoreError::NotAnInteger(DType::F32))
        ));
    }

    #[test]
    fn label_files_name_the_bad_line() {
        let dir = std::env::temp_dir().join(format!("netdiv-labels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("labels.txt");
        std::fs::write(&path, "1\n2\nseven\n").unwrap();
        let e = read_labels(&path).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("seven"), "{e}");
        std::fs::write(&path, "1\n2\n\n").unwrap();
        assert_eq!(read_labels(&path).unwrap(), vec![1, 2]);
    }
}
