//! The sample store of the QSL: where sample bytes come from and the copy
//! held in DRAM between LoadSamplesToRam and UnloadSamplesFromRam.
//!
//! Samples are read, and compressed when a codec is set, at load time, which
//! LoadGen does not time; a query then only hands out bytes already in the
//! form they travel in.

mod dataset;
mod npy;
mod npy_folder;
mod synthetic;

use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use netdiv_proto::benchmark::{Benchmark, CodecNotAllowed, Direction, TokenCounts, VolumeProfile};
use netdiv_proto::codec::{encode, Codec};

pub use dataset::{open as open_dataset, Dataset, DatasetError};
pub use netdiv_proto::dtype::DType;
pub use npy::{parse_npy, read_npy, write_npy, NpyArray, NpyError, NpyFormatError};
pub use npy_folder::{check as check_npy_folder, FolderError};
pub use qdl::StoredSample;
use qdl::{LoadedView, QslBytes};
pub use synthetic::{synthetic_prompt, synthetic_sample};

/// A synthetic sample larger than this is surely a typo in a shape; no
/// benchmark input comes near it, and an error beats an out-of-memory abort.
const MAX_SYNTHETIC_BYTES: usize = 1 << 32;

/// Bytes of a tensor of `shape` and `dtype`, `None` if that overflows.
pub(crate) fn tensor_bytes(shape: &[usize], dtype: DType) -> Option<usize> {
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize)
}

/// `raw` in `codec`; kept uncompressed when lz4 would not make it
/// smaller, since the wire carries a codec per sample.
fn pack(raw: Vec<u8>, codec: Codec) -> StoredSample {
    let decoded_size = raw.len() as u64;
    if codec != Codec::None {
        let packed = encode(codec, &raw);
        if packed.len() < raw.len() {
            return StoredSample {
                data: packed.into(),
                codec,
                decoded_size,
            };
        }
    }
    StoredSample {
        data: raw.into(),
        codec: Codec::None,
        decoded_size,
    }
}

/// Where sample bytes come from.
#[derive(Clone, Debug)]
pub enum SampleSource {
    /// Deterministic data of a shape and dtype; any index is valid.
    Synthetic {
        /// Tensor shape of every sample.
        shape: Vec<usize>,
        /// Element type.
        dtype: DType,
        /// Seed of the data; the same seed gives the same bytes.
        seed: u64,
    },
    /// Deterministic token-id prompts, unpadded: each sample's length, in
    /// tokens, is drawn from `lengths` by seed and index. What a token
    /// model's QSL holds (the LLM benchmarks).
    Prompts {
        /// Prompt lengths in tokens (the benchmark's profile).
        lengths: TokenCounts,
        /// Element type of the token ids (int32; int64 also works).
        dtype: DType,
        /// Seed of the data; the same seed gives the same bytes.
        seed: u64,
    },
    /// Deterministic volumes whose size varies by index the way the data
    /// set's do (3D-UNet): sample i has the profile's shape for (seed, i).
    Volumes {
        /// The sizes (the benchmark's profile).
        profile: VolumeProfile,
        /// Element type.
        dtype: DType,
        /// Seed of the sizes and the data.
        seed: u64,
    },
    /// A reference implementation's preprocessed data set (token-id
    /// prompts of an LLM, 3D-UNet's volumes).
    Dataset(dataset::Dataset),
    /// One .npy file per sample, sample i = i-th file in name order.
    NpyDir {
        /// The folder.
        dir: PathBuf,
        /// Its `.npy` files, sorted by name.
        files: Vec<PathBuf>,
        /// int64 files are sent as int32 (each value checked to fit):
        /// token ids saved by a plain `np.save` of Python ints.
        int64_as_int32: bool,
    },
}

/// Little-endian int64 elements as int32, each checked to fit.
fn int64_to_int32(bytes: &[u8], path: &Path) -> Result<Vec<u8>, SampleError> {
    let mut out = Vec::with_capacity(bytes.len() / 2);
    for (element, chunk) in bytes.chunks_exact(8).enumerate() {
        let value = i64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let narrow = i32::try_from(value).map_err(|_| SampleError::Int64OutOfRange {
            path: path.to_path_buf(),
            element,
            value,
        })?;
        out.extend_from_slice(&narrow.to_le_bytes());
    }
    Ok(out)
}

/// Why samples could not be listed, read or found; each names the path or
/// index.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// A folder or file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// What was read.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A `.npy` file is malformed.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// A data set file is not what its reference writes.
    #[error(transparent)]
    Dataset(#[from] dataset::DatasetError),
    /// The folder holds no `.npy` file.
    #[error("no .npy files in {}", .0.display())]
    NoSamples(PathBuf),
    /// An index past the last sample.
    #[error("sample index {index} is out of range: there are {count} samples")]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// Samples there are.
        count: usize,
    },
    /// A sample asked for before LoadSamplesToRam loaded it.
    #[error("sample {0} is not loaded (LoadSamplesToRam did not load it)")]
    NotLoaded(usize),
    /// A synthetic shape too large to hold.
    #[error("synthetic samples of {dtype}{shape:?} would not fit in memory (limit {limit} bytes)")]
    TooLarge {
        /// The shape.
        shape: Vec<usize>,
        /// The element type.
        dtype: DType,
        /// The limit, in bytes.
        limit: usize,
    },
    /// An int64 value that int32 cannot hold, met while converting.
    #[error("{}: element {element} is {value}, which does not fit int32", path.display())]
    Int64OutOfRange {
        /// The file.
        path: PathBuf,
        /// The element's index.
        element: usize,
        /// Its value.
        value: i64,
    },
}

impl SampleSource {
    /// Synthetic samples like `benchmark`'s inputs: unpadded prompts of
    /// varying length for a token-id LLM, else tensors of its shape.
    pub fn synthetic(benchmark: &Benchmark, seed: u64) -> SampleSource {
        SampleSource::synthetic_with(benchmark, seed, None, None)
    }

    /// Synthetic samples for `benchmark`, with a shape or an element type
    /// the user gave (`--sample-shape`, `--sample-dtype`). A shape makes
    /// every sample a tensor of that one shape. A token-id LLM keeps its
    /// unpadded prompts unless given a shape or a dtype other than int32
    /// or int64 (token ids); then its samples have its padded shape (the
    /// longest prompt). Other benchmarks: their shape and dtype, either
    /// replaced.
    pub fn synthetic_with(
        benchmark: &Benchmark,
        seed: u64,
        shape: Option<Vec<usize>>,
        dtype: Option<DType>,
    ) -> SampleSource {
        let spec = benchmark.spec();
        if let (Some(profile), None) = (benchmark.volumes(), &shape) {
            return SampleSource::Volumes {
                profile: *profile,
                dtype: dtype.unwrap_or(spec.dtype),
                seed,
            };
        }
        let dtype_ids = dtype.unwrap_or(spec.dtype);
        match (benchmark.prompt_tokens(), &shape) {
            (Some(lengths), None) if matches!(dtype_ids, DType::I32 | DType::I64) => {
                SampleSource::Prompts {
                    lengths,
                    dtype: dtype_ids,
                    seed,
                }
            }
            _ => SampleSource::Synthetic {
                shape: shape.unwrap_or_else(|| spec.shape.to_vec()),
                dtype: dtype.unwrap_or(spec.dtype),
                seed,
            },
        }
    }

    /// The data at `path`: a reference data set ([`dataset`]: a token-id
    /// pickle or JSON file, 3D-UNet's preprocessed folder), else a folder
    /// of `.npy` files.
    pub fn from_path(path: &Path) -> Result<SampleSource, SampleError> {
        match dataset::open(path)? {
            Some(data) => Ok(SampleSource::Dataset(data)),
            None => SampleSource::npy_dir(path),
        }
    }

    /// The `*.npy` files of `dir`, in file-name order (byte order: name them
    /// with zero-padded numbers so that `10.npy` follows `9.npy`).
    pub fn npy_dir(dir: &Path) -> Result<SampleSource, SampleError> {
        let io = |source| SampleError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            // is_file follows symlinks, so linked datasets count too.
            if path.extension().is_some_and(|e| e == "npy") && path.is_file() {
                files.push(path);
            }
        }
        if files.is_empty() {
            return Err(SampleError::NoSamples(dir.to_path_buf()));
        }
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        Ok(SampleSource::NpyDir {
            dir: dir.to_path_buf(),
            files,
            int64_as_int32: false,
        })
    }

    /// How many samples there are; `None` for synthetic data, which has no
    /// end.
    pub fn count(&self) -> Option<usize> {
        match self {
            SampleSource::Synthetic { .. }
            | SampleSource::Prompts { .. }
            | SampleSource::Volumes { .. } => None,
            SampleSource::Dataset(data) => Some(data.count()),
            SampleSource::NpyDir { files, .. } => Some(files.len()),
        }
    }

    /// The raw tensor bytes of sample `index` (for `.npy` files, the payload
    /// without its header).
    pub fn read(&self, index: usize) -> Result<Vec<u8>, SampleError> {
        match self {
            SampleSource::Synthetic { shape, dtype, seed } => {
                match tensor_bytes(shape, *dtype) {
                    Some(n) if n <= MAX_SYNTHETIC_BYTES => {}
                    _ => {
                        return Err(SampleError::TooLarge {
                            shape: shape.clone(),
                            dtype: *dtype,
                            limit: MAX_SYNTHETIC_BYTES,
                        })
                    }
                }
                Ok(synthetic::synthetic_sample(shape, *dtype, *seed, index))
            }
            SampleSource::Prompts {
                lengths,
                dtype,
                seed,
            } => Ok(synthetic::synthetic_prompt(lengths, *dtype, *seed, index)),
            SampleSource::Volumes {
                profile,
                dtype,
                seed,
            } => Ok(synthetic::synthetic_sample(
                &profile.shape_of(*seed, index),
                *dtype,
                *seed,
                index,
            )),
            SampleSource::Dataset(data) => {
                if index >= data.count() {
                    return Err(SampleError::IndexOutOfRange {
                        index,
                        count: data.count(),
                    });
                }
                Ok(data.read(index)?.to_vec())
            }
            SampleSource::NpyDir {
                files,
                int64_as_int32,
                ..
            } => {
                let path = files.get(index).ok_or(SampleError::IndexOutOfRange {
                    index,
                    count: files.len(),
                })?;
                let array = npy::read_npy(path)?;
                if *int64_as_int32 && array.dtype == DType::I64 {
                    return int64_to_int32(&array.data, path);
                }
                Ok(array.data)
            }
        }
    }

    /// The element type of the samples as they are sent: the synthetic
    /// data's, the data set's (int32 token ids, float32 volumes) or the
    /// first `.npy` file's; `None` if that file cannot be read.
    pub fn element_type(&self) -> Option<DType> {
        match self {
            SampleSource::Synthetic { dtype, .. }
            | SampleSource::Prompts { dtype, .. }
            | SampleSource::Volumes { dtype, .. } => Some(*dtype),
            SampleSource::Dataset(data) if data.is_prompts() => Some(DType::I32),
            SampleSource::Dataset(_) => Some(DType::F32),
            SampleSource::NpyDir {
                files,
                int64_as_int32,
                ..
            } => match npy::read_npy_header(files.first()?).ok()?.0 {
                DType::I64 if *int64_as_int32 => Some(DType::I32),
                dtype => Some(dtype),
            },
        }
    }

    /// The size in bytes of one element as sent.
    pub fn element_size(&self) -> Option<usize> {
        self.element_type().map(DType::size)
    }

    /// One line for logs and `--help`-style output.
    pub fn describe(&self) -> String {
        match self {
            SampleSource::Synthetic { shape, dtype, .. } => {
                let bytes =
                    tensor_bytes(shape, *dtype).map_or("too many".to_string(), |n| n.to_string());
                format!("synthetic {dtype}{shape:?} ({bytes} bytes per sample)")
            }
            SampleSource::Prompts { lengths, dtype, .. } => format!(
                "synthetic {dtype} prompts of {}..={} tokens (mean {}), unpadded",
                lengths.min, lengths.max, lengths.mean
            ),
            SampleSource::Volumes { profile, dtype, .. } => format!(
                "synthetic {dtype} volumes of 1 x {}..={} x {:?} (mean {} slices)",
                profile.slices.min, profile.slices.max, profile.slice, profile.slices.mean
            ),
            SampleSource::Dataset(data) => data.describe(),
            SampleSource::NpyDir { dir, files, .. } => {
                let plural = if files.len() == 1 { "" } else { "s" };
                format!("{} .npy file{plural} in {}", files.len(), dir.display())
            }
        }
    }
}

/// The QSL's memory: samples loaded at LoadSamplesToRam (untimed),
/// compressed there with `codec` when that is not [`Codec::None`].
///
/// A sample lz4 does not shrink is kept as [`Codec::None`]; the wire
/// carries the codec of each sample, so receivers handle the mix.
#[derive(Debug)]
pub struct SampleStore {
    benchmark: Benchmark,
    source: SampleSource,
    codec: Codec,
    slots: RwLock<Vec<Option<StoredSample>>>,
}

/// A read guard over the loaded samples; hold it only while copying out
/// what a query needs, since loads wait for it.
#[derive(Debug)]
pub struct LoadedSamples<'a>(RwLockReadGuard<'a, Vec<Option<StoredSample>>>);

impl LoadedView for LoadedSamples<'_> {
    fn get(&self, index: usize) -> Option<&StoredSample> {
        self.0.get(index)?.as_ref()
    }
}

/// What the QDL reads: the loaded samples, as they travel.
impl QslBytes for SampleStore {
    fn benchmark(&self) -> &Benchmark {
        &self.benchmark
    }

    fn codec(&self) -> Codec {
        self.codec
    }

    fn with_loaded(&self, read: &mut dyn FnMut(&dyn LoadedView)) {
        read(&self.loaded())
    }
}

impl SampleStore {
    /// A store of `total` slots (the QSL's total sample count), all
    /// empty, for `benchmark`'s samples from `source`, stored in `codec`;
    /// an error if the rules allow no such compression of its inputs.
    pub fn new(
        benchmark: Benchmark,
        source: SampleSource,
        codec: Codec,
        total: usize,
    ) -> Result<SampleStore, CodecNotAllowed> {
        benchmark.check_codec(Direction::Input, codec)?;
        Ok(SampleStore {
            benchmark,
            source,
            codec,
            slots: RwLock::new(vec![None; total]),
        })
    }

    /// The benchmark whose samples these are.
    pub fn benchmark(&self) -> &Benchmark {
        &self.benchmark
    }

    /// The QSL's total sample count.
    pub fn total(&self) -> usize {
        self.read_slots().len()
    }

    /// The codec samples are stored in (some may stay uncompressed).
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Where the samples come from.
    pub fn source(&self) -> &SampleSource {
        &self.source
    }

    /// Reads (and compresses) each sample not already loaded. All or
    /// nothing: on an error no sample of this call is stored.
    pub fn load(&self, indices: &[usize]) -> Result<(), SampleError> {
        let total = self.total();
        if let Some(&index) = indices.iter().find(|&&i| i >= total) {
            return Err(SampleError::IndexOutOfRange {
                index,
                count: total,
            });
        }
        let wanted: Vec<usize> = {
            let slots = self.read_slots();
            indices
                .iter()
                .copied()
                .filter(|&i| slots[i].is_none())
                .collect()
        };
        // Read and compress without the lock so queries on samples already
        // loaded are not held up.
        let mut ready = Vec::with_capacity(wanted.len());
        for index in wanted {
            let raw = self.source.read(index)?;
            ready.push((index, pack(raw, self.codec)));
        }
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        for (index, sample) in ready {
            slots[index] = Some(sample);
        }
        // What the QSL holds now: the floor of the LoadGen node's memory.
        if tracing::enabled!(tracing::Level::DEBUG) {
            let (samples, bytes) = slots
                .iter()
                .flatten()
                .fold((0usize, 0usize), |(n, b), s| (n + 1, b + s.data.len()));
            tracing::debug!(samples, bytes, "samples loaded");
        }
        Ok(())
    }

    /// Drops the given samples; indices out of range or not loaded are
    /// ignored, as unloading them again changes nothing.
    pub fn unload(&self, indices: &[usize]) {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        for &index in indices {
            if let Some(slot) = slots.get_mut(index) {
                *slot = None;
            }
        }
    }

    /// The loaded samples, read-locked.
    pub fn loaded(&self) -> LoadedSamples<'_> {
        LoadedSamples(self.read_slots())
    }

    /// How many samples are loaded.
    pub fn loaded_count(&self) -> usize {
        self.read_slots().iter().filter(|s| s.is_some()).count()
    }

    // A panic elsewhere while holding the lock leaves the slots consistent
    // (each write is one assignment), so a poisoned lock is still usable.
    fn read_slots(&self) -> RwLockReadGuard<'_, Vec<Option<StoredSample>>> {
        self.slots.read().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use netdiv_proto::codec::decode;

    /// A temporary directory, removed on drop.
    pub(crate) fn scratch_dir() -> tempfile::TempDir {
        tempfile::tempdir().expect("temporary directory")
    }

    /// A store for the benchmark that allows lz4 inputs.
    fn store(source: SampleSource, codec: Codec, total: usize) -> SampleStore {
        SampleStore::new(Benchmark::parse("resnet50").unwrap(), source, codec, total).unwrap()
    }

    fn image_source() -> SampleSource {
        SampleSource::Synthetic {
            shape: vec![3, 224, 224],
            dtype: DType::U8,
            seed: 5,
        }
    }

    #[test]
    fn dtype_names_and_descrs() {
        for &d in DType::ALL {
            assert_eq!(d.name().parse::<DType>(), Ok(d));
            assert_eq!(DType::from_npy_descr(d.npy_descr()), Some(d));
        }
        assert_eq!(DType::from_npy_descr("<u1"), Some(DType::U8));
        assert_eq!(DType::from_npy_descr(">i4"), None);
        assert_eq!(DType::from_npy_descr("|b1"), None);
        assert_eq!(
            "f32".parse::<DType>().unwrap_err().to_string(),
            "unknown dtype \"f32\" (expected uint8, int8, int32, int64, float16, float32)"
        );
        assert_eq!(tensor_bytes(&[3, 224, 224], DType::U8), Some(150528));
        assert_eq!(tensor_bytes(&[], DType::I64), Some(8));
        assert_eq!(tensor_bytes(&[usize::MAX, 2], DType::U8), None);
    }

    #[test]
    fn synthetic_source_reads_and_describes() {
        let source = image_source();
        assert_eq!(source.count(), None);
        assert_eq!(
            source.describe(),
            "synthetic uint8[3, 224, 224] (150528 bytes per sample)"
        );
        let raw = source.read(1_000_000).unwrap();
        assert_eq!(
            raw,
            synthetic::synthetic_sample(&[3, 224, 224], DType::U8, 5, 1_000_000)
        );
        let huge = SampleSource::Synthetic {
            shape: vec![1 << 20, 1 << 20],
            dtype: DType::F32,
            seed: 0,
        };
        let e = huge.read(0).unwrap_err();
        assert!(matches!(e, SampleError::TooLarge { .. }));
        assert!(e
            .to_string()
            .starts_with("synthetic samples of float32[1048576, 1048576] would not fit"));
    }

    #[test]
    fn token_models_get_prompts_unless_a_shape_or_dtype_is_given() {
        let llama = Benchmark::parse("llama2-70b-99").unwrap();
        let source = SampleSource::synthetic(&llama, 9);
        assert!(matches!(
            source,
            SampleSource::Prompts {
                dtype: DType::I32,
                seed: 9,
                ..
            }
        ));
        assert_eq!(source.count(), None);
        assert_eq!(
            source.describe(),
            "synthetic int32 prompts of 8..=1024 tokens (mean 294), unpadded"
        );
        let store = SampleStore::new(llama, source.clone(), Codec::None, 64).unwrap();
        store.load(&(0..64).collect::<Vec<_>>()).unwrap();
        let sizes: std::collections::HashSet<u64> = (0..64)
            .map(|i| store.loaded().get(i).unwrap().decoded_size)
            .collect();
        assert!(sizes.len() > 10, "prompt lengths vary: {sizes:?}");
        assert!(sizes.iter().all(|s| s % 4 == 0 && (32..=4096).contains(s)));
        // A shape from the user: one fixed shape, as before; so is a dtype
        // that cannot hold token ids.
        let fixed = SampleSource::synthetic_with(&llama, 9, Some(vec![16]), None);
        assert_eq!(fixed.read(3).unwrap().len(), 64);
        let floats = SampleSource::synthetic_with(&llama, 9, None, Some(DType::F32));
        assert_eq!(floats.read(3).unwrap().len(), 1024 * 4);
        // int64 token ids: the same prompts, twice the bytes.
        let wide = SampleSource::synthetic_with(&llama, 9, None, Some(DType::I64));
        assert_eq!(
            wide.read(3).unwrap().len(),
            2 * source.read(3).unwrap().len()
        );
        // Other benchmarks are unchanged, and Whisper's inputs are features.
        for name in ["resnet50", "whisper", "gptj"] {
            let b = Benchmark::parse(name).unwrap();
            assert!(
                matches!(SampleSource::synthetic(&b, 1), SampleSource::Synthetic { ref shape, .. } if shape == b.spec().shape),
                "{name}"
            );
        }
    }

    #[test]
    fn store_without_codec_holds_raw_bytes() {
        let store = store(image_source(), Codec::None, 100);
        assert_eq!((store.total(), store.codec()), (100, Codec::None));
        assert_eq!(store.loaded_count(), 0);
        store.load(&[3, 7, 99]).unwrap();
        assert_eq!(store.loaded_count(), 3);
        {
            let loaded = store.loaded();
            let sample = loaded.get(7).unwrap();
            assert_eq!(sample.codec, Codec::None);
            assert_eq!(sample.decoded_size, 150528);
            assert_eq!(sample.data, store.source().read(7).unwrap());
            assert!(loaded.get(4).is_none());
            assert!(loaded.get(100).is_none());
        }
        store.unload(&[3, 99, 50, 1000]);
        assert_eq!(store.loaded_count(), 1);
        assert!(store.loaded().get(3).is_none());
        assert!(store.loaded().get(7).is_some());
    }

    #[test]
    fn store_with_lz4_decodes_back_to_raw() {
        let store = store(image_source(), Codec::Lz4, 10);
        store.load(&[0, 1, 2]).unwrap();
        let loaded = store.loaded();
        for i in 0..3 {
            let sample = loaded.get(i).unwrap();
            let raw = store.source().read(i).unwrap();
            assert_eq!(sample.codec, Codec::Lz4);
            assert_eq!(sample.decoded_size, raw.len() as u64);
            assert!(sample.data.len() < raw.len() / 2);
            let decoded = decode(Codec::Lz4, &sample.data, sample.decoded_size, 1 << 20).unwrap();
            assert_eq!(decoded, raw);
        }
    }

    #[test]
    fn incompressible_samples_stay_uncompressed() {
        // One 4-byte element: lz4 can only add framing to it.
        let source = SampleSource::Synthetic {
            shape: vec![1],
            dtype: DType::I32,
            seed: 0,
        };
        let store = store(source, Codec::Lz4, 4);
        store.load(&[2]).unwrap();
        let loaded = store.loaded();
        let sample = loaded.get(2).unwrap();
        assert_eq!(sample.codec, Codec::None);
        assert_eq!(sample.data.len(), 4);
        assert_eq!(sample.decoded_size, 4);
    }

    #[test]
    fn out_of_range_loads_fail_and_load_nothing() {
        let store = store(image_source(), Codec::None, 8);
        let e = store.load(&[1, 8]).unwrap_err();
        assert!(matches!(
            e,
            SampleError::IndexOutOfRange { index: 8, count: 8 }
        ));
        assert_eq!(
            e.to_string(),
            "sample index 8 is out of range: there are 8 samples"
        );
        assert_eq!(store.loaded_count(), 0);
        assert_eq!(
            SampleError::NotLoaded(3).to_string(),
            "sample 3 is not loaded (LoadSamplesToRam did not load it)"
        );
    }

    #[test]
    fn npy_dir_lists_files_in_name_order() {
        let dir = scratch_dir();
        npy::write_npy(&dir.path().join("b.npy"), DType::U8, &[2], &[2, 2]).unwrap();
        npy::write_npy(&dir.path().join("a.npy"), DType::U8, &[3], &[1, 1, 1]).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a sample").unwrap();
        std::fs::create_dir(dir.path().join("sub.npy")).unwrap();

        let source = SampleSource::npy_dir(dir.path()).unwrap();
        assert_eq!(source.count(), Some(2));
        assert_eq!(
            source.describe(),
            format!("2 .npy files in {}", dir.path().display())
        );
        assert_eq!(source.read(0).unwrap(), vec![1, 1, 1]);
        assert_eq!(source.read(1).unwrap(), vec![2, 2]);
        let e = source.read(2).unwrap_err();
        assert!(matches!(
            e,
            SampleError::IndexOutOfRange { index: 2, count: 2 }
        ));

        let store = store(source, Codec::Lz4, 2);
        store.load(&[0, 1]).unwrap();
        assert_eq!(store.loaded().get(1).unwrap().data, vec![2u8, 2]);
    }

    #[test]
    fn npy_dir_errors_name_the_path() {
        let dir = scratch_dir();
        let e = SampleSource::npy_dir(dir.path()).unwrap_err();
        assert!(matches!(e, SampleError::NoSamples(_)));
        assert_eq!(
            e.to_string(),
            format!("no .npy files in {}", dir.path().display())
        );

        let missing = dir.path().join("missing");
        let e = SampleSource::npy_dir(&missing).unwrap_err();
        assert!(matches!(e, SampleError::Io { .. }));
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );

        // A broken file fails the load, naming the file, and loads nothing.
        std::fs::write(dir.path().join("0.npy"), b"broken").unwrap();
        npy::write_npy(&dir.path().join("1.npy"), DType::U8, &[1], &[9]).unwrap();
        let store = store(SampleSource::npy_dir(dir.path()).unwrap(), Codec::None, 2);
        let e = store.load(&[1, 0]).unwrap_err();
        assert!(matches!(e, SampleError::Npy(_)));
        assert!(e.to_string().contains("0.npy"), "{e}");
        assert_eq!(store.loaded_count(), 0);
    }
}
