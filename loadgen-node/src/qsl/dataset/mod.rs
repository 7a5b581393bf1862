//! The MLPerf reference implementations' preprocessed data sets, read as
//! their QSLs read them, so a submission runs on the real validation data:
//!
//! * LLM prompts as token ids: a pandas pickle (`.pkl`, `.pkl.gz`; e.g.
//!   llama2-70b's `open_orca_gpt4_tokenized_llama.sampled_24576.pkl`)
//!   with a `tok_input` (or `input_tokens`) column, as pandas 1.5, 2 and 3
//!   write them (pyarrow-backed strings too), or JSON in any orient
//!   `pd.read_json` reads (llama3.1-8b's `cnn_eval.json` is records); each
//!   prompt is sent unpadded as int32 ids, as the references send them;
//! * 3D-UNet's KiTS19 volumes: the folder `preprocess.py` writes, with
//!   `preprocessed_files.pkl` (the case list) and one `case_XXXXX.pkl`
//!   (`[image, label]`, float32 `(1, D, H, W)`) per case; the image is
//!   the sample.
//!
//! Anything else is refused with what was expected. [`pickle`] reads the
//! pickles, [`numpy`] their arrays and [`pandas`] the data frames.

mod json;
mod numpy;
mod pandas;
mod pickle;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use pickle::Value;

/// Why a data set cannot be read, each naming the file.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file or folder cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// What was read.
        path: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// Not a pickle this reader can run.
    #[error("{}: {source}", path.display())]
    Pickle {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        source: pickle::PickleError,
    },
    /// Not JSON.
    #[error("{}: not JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        source: serde_json::Error,
    },
    /// Readable, but not what the reference's QSL reads (without the
    /// file: [`DatasetError::In`] adds it).
    #[error("{0}")]
    Format(String),
    /// [`DatasetError::Format`] in a file.
    #[error("{}: {what}", path.display())]
    In {
        /// The file.
        path: PathBuf,
        /// What it holds instead.
        what: String,
    },
    /// Not one of the formats netdiv reads.
    #[error("{}: not a data set netdiv reads: {why} (expected a pandas pickle .pkl/.pkl.gz or a JSON file of token-id prompts, a folder with preprocessed_files.pkl (3D-UNet), or a folder of .npy files)", path.display())]
    Unknown {
        /// What was given.
        path: PathBuf,
        /// What it is.
        why: String,
    },
}

impl DatasetError {
    fn in_file(self, path: &Path) -> DatasetError {
        match self {
            DatasetError::Format(what) => DatasetError::In {
                path: path.to_path_buf(),
                what,
            },
            other => other,
        }
    }
}

/// A data set found at a path.
#[derive(Clone, Debug)]
pub enum Dataset {
    /// Token-id prompts, each as int32 little-endian bytes.
    Prompts {
        /// The file.
        path: PathBuf,
        /// The column they came from.
        column: String,
        /// One per sample.
        prompts: Arc<Vec<Bytes>>,
    },
    /// KiTS19 volumes, one case file per sample, read when loaded.
    Kits {
        /// The folder.
        dir: PathBuf,
        /// Each case's file, in the reference's order.
        cases: Vec<PathBuf>,
    },
}

/// The data set at `path`, if it is one of the reference formats; `None`
/// for a folder of `.npy` files (read as such elsewhere).
pub fn open(path: &Path) -> Result<Option<Dataset>, DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        if path.join("preprocessed_files.pkl").is_file() {
            return kits(path).map(Some);
        }
        return Ok(None);
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name.ends_with(".json") {
        return json_prompts(path).map(Some);
    }
    if [".pkl", ".pkl.gz", ".pickle"]
        .iter()
        .any(|s| name.ends_with(s))
    {
        return pickled_prompts(path).map(Some);
    }
    Err(DatasetError::Unknown {
        path: path.to_path_buf(),
        why: "a file that is neither .pkl, .pkl.gz nor .json".into(),
    })
}

/// The file's bytes, gunzipped when it is gzip (`.gz`, as pandas infers).
fn read_file(path: &Path) -> Result<Bytes, DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(io)?;
        return Ok(out.into());
    }
    Ok(raw.into())
}

fn unpickle(path: &Path) -> Result<Value, DatasetError> {
    pickle::parse(read_file(path)?).map_err(|source| DatasetError::Pickle {
        path: path.to_path_buf(),
        source,
    })
}

/// The columns (or keys) a reference QSL takes its token ids from.
const TOKEN_COLUMNS: [&str; 2] = ["tok_input", "input_tokens"];

/// Token ids as int32 bytes; an error for an id outside int32.
fn int32_prompt(ids: &[i64], row: usize) -> Result<Bytes, DatasetError> {
    let mut out = Vec::with_capacity(ids.len() * 4);
    for &id in ids {
        let id = i32::try_from(id).map_err(|_| {
            DatasetError::Format(format!("row {row}: token id {id} does not fit int32"))
        })?;
        out.extend_from_slice(&id.to_le_bytes());
    }
    if out.is_empty() {
        return Err(DatasetError::Format(format!("row {row}: an empty prompt")));
    }
    Ok(out.into())
}

/// A pandas pickle's token-id column.
fn pickled_prompts(path: &Path) -> Result<Dataset, DatasetError> {
    let value = unpickle(path)?;
    let frame = pandas::DataFrame::from_pickle(&value).map_err(|e| e.in_file(path))?;
    let Some(column) = TOKEN_COLUMNS
        .iter()
        .find(|c| frame.columns.iter().any(|x| x == *c))
    else {
        let text = frame.columns.iter().any(|c| c == "text_input");
        return Err(DatasetError::In {
            path: path.to_path_buf(),
            what: format!(
                "no token-id column ({}){}; its columns: {}",
                TOKEN_COLUMNS.join(" or "),
                if text {
                    ": it holds prompts as text (text_input), which the benchmark's \
                     reference tokenizes at run time; netdiv sends token ids"
                } else {
                    ""
                },
                frame.columns.join(", ")
            ),
        });
    };
    let cells = frame.column(column).map_err(|e| e.in_file(path))?;
    let prompts = cells
        .iter()
        .enumerate()
        .map(|(row, cell)| {
            let ids = cell
                .integers()
                .map_err(|e| DatasetError::Format(format!("{column} row {row}: {e}")))?;
            int32_prompt(&ids, row)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.in_file(path))?;
    Ok(Dataset::Prompts {
        path: path.to_path_buf(),
        column: column.to_string(),
        prompts: Arc::new(prompts),
    })
}

/// A JSON data set of token ids, in any orient `pd.read_json` reads
/// ([`json`]).
fn json_prompts(path: &Path) -> Result<Dataset, DatasetError> {
    let text = read_file(path)?;
    let in_file = |what: String| DatasetError::In {
        path: path.to_path_buf(),
        what,
    };
    let (column, cells) = json::token_rows(&text, &TOKEN_COLUMNS).map_err(in_file)?;
    let prompts = cells
        .iter()
        .enumerate()
        .map(|(row, cell)| {
            let ids = cell
                .as_array()
                .ok_or_else(|| in_file(format!("row {row}: {column} is not a list")))?
                .iter()
                .map(|id| {
                    id.as_i64()
                        .ok_or_else(|| in_file(format!("row {row}: {id} is not a token id")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            int32_prompt(&ids, row).map_err(|e| e.in_file(path))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Dataset::Prompts {
        path: path.to_path_buf(),
        column,
        prompts: Arc::new(prompts),
    })
}

/// 3D-UNet's preprocessed folder: the case list of
/// `preprocessed_files.pkl` (its `file_list`), each case a `.pkl` beside
/// it.
fn kits(dir: &Path) -> Result<Dataset, DatasetError> {
    let index = dir.join("preprocessed_files.pkl");
    let aux = unpickle(&index)?;
    let list = aux
        .get("file_list")
        .and_then(|l| l.items())
        .ok_or_else(|| DatasetError::In {
            path: index.clone(),
            what: "no file_list (the list of case names preprocess.py writes)".into(),
        })?;
    let cases = list
        .iter()
        .map(|case| {
            let name = case.as_str().ok_or_else(|| DatasetError::In {
                path: index.clone(),
                what: format!("a case name that is a {}", case.kind()),
            })?;
            let file = dir.join(format!("{name}.pkl"));
            if !file.is_file() {
                return Err(DatasetError::In {
                    path: index.clone(),
                    what: format!("lists {name}, but {} is missing", file.display()),
                });
            }
            Ok(file)
        })
        .collect::<Result<Vec<_>, _>>()?;
    if cases.is_empty() {
        return Err(DatasetError::In {
            path: index,
            what: "an empty file_list".into(),
        });
    }
    Ok(Dataset::Kits {
        dir: dir.to_path_buf(),
        cases,
    })
}

/// One KiTS19 case's image: `[image, label]`, the image float32
/// `(1, D, H, W)` in C order.
pub(super) fn kits_image(path: &Path) -> Result<Bytes, DatasetError> {
    let value = unpickle(path)?;
    let first = value
        .items()
        .and_then(|items| items.into_iter().next())
        .ok_or_else(|| DatasetError::In {
            path: path.to_path_buf(),
            what: format!("a {}, not the [image, label] list of a case", value.kind()),
        })?;
    let image = numpy::array(&first)
        .map_err(|e| e.in_file(path))?
        .ok_or_else(|| DatasetError::In {
            path: path.to_path_buf(),
            what: format!("an image that is a {}, not a numpy array", first.kind()),
        })?;
    if image.shape.len() != 4 || image.shape[0] != 1 {
        return Err(DatasetError::In {
            path: path.to_path_buf(),
            what: format!("an image of shape {:?}, not (1, D, H, W)", image.shape),
        });
    }
    let raw = image.raw_c_order("f4").map_err(|e| e.in_file(path))?;
    // A copy of the image alone: the label need not stay in memory.
    Ok(Bytes::copy_from_slice(raw))
}

impl Dataset {
    /// Samples in the data set.
    pub fn count(&self) -> usize {
        match self {
            Dataset::Prompts { prompts, .. } => prompts.len(),
            Dataset::Kits { cases, .. } => cases.len(),
        }
    }

    /// One line saying what it is.
    pub fn describe(&self) -> String {
        match self {
            Dataset::Prompts {
                path,
                column,
                prompts,
            } => {
                let tokens: usize = prompts.iter().map(|p| p.len() / 4).sum();
                format!(
                    "{} prompts ({column}, {} tokens in all, int32, unpadded) from {}",
                    prompts.len(),
                    tokens,
                    path.display()
                )
            }
            Dataset::Kits { dir, cases } => format!(
                "{} KiTS19 cases (float32 volumes, preprocessed) in {}",
                cases.len(),
                dir.display()
            ),
        }
    }

    /// Sample `index`'s bytes.
    pub fn read(&self, index: usize) -> Result<Bytes, DatasetError> {
        match self {
            Dataset::Prompts { prompts, .. } => Ok(prompts[index].clone()),
            Dataset::Kits { cases, .. } => kits_image(&cases[index]),
        }
    }

    /// Whether it holds token-id prompts (LLM benchmarks) rather than
    /// volumes.
    pub fn is_prompts(&self) -> bool {
        matches!(self, Dataset::Prompts { .. })
    }
}
