//! A folder of `.npy` samples held against the benchmark it is given for,
//! before anything is sent: every file's element type (one for the whole
//! folder), and for token-id prompts and volumes the type and rank their
//! nodes read. An int64 prompt folder (what `np.save` of Python ints
//! writes) would otherwise reach an engine as `[id, 0, id, 0, ...]`.

use std::path::{Path, PathBuf};

use netdiv_proto::Benchmark;

use super::npy::{read_npy_header, NpyError};
use super::DType;

/// Why a folder does not fit its benchmark; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// A header could not be read.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// Two files of one folder hold different element types.
    #[error("{} holds {dtype}, but {} holds {first}: the samples of a folder share one element type", path.display(), first_path.display())]
    Mixed {
        /// The file that differs.
        path: PathBuf,
        /// Its type.
        dtype: DType,
        /// The folder's first file.
        first_path: PathBuf,
        /// Its type.
        first: DType,
    },
    /// int64 token ids without the flag that converts them.
    #[error("{} holds int64 token ids; {benchmark}'s prompts travel as int32 (what its nodes read): save the folder as int32 (np.save(f, ids.astype(np.int32))), or give --npy-int64-as-int32 to convert while loading (each value checked to fit)", path.display())]
    Int64Prompts {
        /// The file.
        path: PathBuf,
        /// The benchmark.
        benchmark: String,
    },
    /// An element type the benchmark's nodes do not read.
    #[error("{} holds {dtype}; {benchmark}'s {what} are {wanted}", path.display())]
    WrongType {
        /// The file.
        path: PathBuf,
        /// Its type.
        dtype: DType,
        /// The benchmark.
        benchmark: String,
        /// What its samples are.
        what: &'static str,
        /// The type they must have.
        wanted: DType,
    },
    /// A shape the benchmark's samples cannot have.
    #[error("{} has shape {shape:?}; {benchmark}'s {what} are {rank}", path.display())]
    WrongShape {
        /// The file.
        path: PathBuf,
        /// Its shape.
        shape: Vec<usize>,
        /// The benchmark.
        benchmark: String,
        /// What its samples are.
        what: &'static str,
        /// The shapes allowed, in words.
        rank: &'static str,
    },
}

/// Checks every file's header against `benchmark`; `int64_as_int32` is
/// the flag that converts int64 prompts.
pub fn check(
    files: &[PathBuf],
    benchmark: &Benchmark,
    int64_as_int32: bool,
) -> Result<(), FolderError> {
    let mut first: Option<(&Path, DType)> = None;
    for path in files {
        let (dtype, shape) = read_npy_header(path)?;
        match first {
            None => first = Some((path, dtype)),
            Some((first_path, first)) if first != dtype => {
                return Err(FolderError::Mixed {
                    path: path.clone(),
                    dtype,
                    first_path: first_path.to_path_buf(),
                    first,
                })
            }
            Some(_) => {}
        }
        check_one(path, dtype, &shape, benchmark, int64_as_int32)?;
    }
    Ok(())
}

fn check_one(
    path: &Path,
    dtype: DType,
    shape: &[usize],
    benchmark: &Benchmark,
    int64_as_int32: bool,
) -> Result<(), FolderError> {
    let name = || benchmark.to_string();
    if benchmark.prompt_tokens().is_some() {
        let what = "prompts";
        match dtype {
            DType::I32 => {}
            DType::I64 if int64_as_int32 => {}
            DType::I64 => {
                return Err(FolderError::Int64Prompts {
                    path: path.to_path_buf(),
                    benchmark: name(),
                })
            }
            _ => {
                return Err(FolderError::WrongType {
                    path: path.to_path_buf(),
                    dtype,
                    benchmark: name(),
                    what,
                    wanted: DType::I32,
                })
            }
        }
        if !(shape.len() == 1 || (shape.len() == 2 && shape[0] == 1)) {
            return Err(FolderError::WrongShape {
                path: path.to_path_buf(),
                shape: shape.to_vec(),
                benchmark: name(),
                what,
                rank: "one row of token ids: (n,) or (1, n)",
            });
        }
    } else if benchmark.volumes().is_some() {
        let wanted = benchmark.spec().dtype;
        let what = "volumes";
        if dtype != wanted {
            return Err(FolderError::WrongType {
                path: path.to_path_buf(),
                dtype,
                benchmark: name(),
                what,
                wanted,
            });
        }
        if !(3..=5).contains(&shape.len()) {
            return Err(FolderError::WrongShape {
                path: path.to_path_buf(),
                shape: shape.to_vec(),
                benchmark: name(),
                what,
                rank: "3-D to 5-D arrays",
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qsl::npy::write_npy;

    fn folder(arrays: &[(DType, &[usize])]) -> (tempfile::TempDir, Vec<PathBuf>) {
        let dir = tempfile::tempdir().unwrap();
        let files = arrays
            .iter()
            .enumerate()
            .map(|(i, (dtype, shape))| {
                let path = dir.path().join(format!("{i:03}.npy"));
                let n: usize = shape.iter().product::<usize>() * dtype.size();
                write_npy(&path, *dtype, shape, &vec![1u8; n]).unwrap();
                path
            })
            .collect();
        (dir, files)
    }

    fn llama() -> Benchmark {
        Benchmark::parse("llama2-70b").unwrap()
    }

    #[test]
    fn int64_prompts_are_refused_unless_converted_and_named() {
        let (_d, files) = folder(&[(DType::I64, &[7])]);
        let e = check(&files, &llama(), false).unwrap_err().to_string();
        assert!(
            e.contains("000.npy holds int64 token ids") && e.contains("--npy-int64-as-int32"),
            "{e}"
        );
        check(&files, &llama(), true).unwrap();
    }

    #[test]
    fn types_shapes_and_mixed_folders_are_named() {
        let (_d, files) = folder(&[(DType::F32, &[7])]);
        let e = check(&files, &llama(), false).unwrap_err().to_string();
        assert!(
            e.contains("holds float32") && e.contains("prompts are int32"),
            "{e}"
        );
        let (_d, files) = folder(&[(DType::I32, &[2, 7])]);
        let e = check(&files, &llama(), false).unwrap_err().to_string();
        assert!(e.contains("shape [2, 7]"), "{e}");
        let (_d, files) = folder(&[(DType::U8, &[4]), (DType::F32, &[4])]);
        let e = check(&files, &Benchmark::parse("resnet50").unwrap(), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("001.npy holds float32, but") && e.contains("000.npy holds uint8"),
            "{e}"
        );
        let (_d, files) = folder(&[(DType::I32, &[1, 5]), (DType::I32, &[9])]);
        check(&files, &llama(), false).unwrap();
    }
}
