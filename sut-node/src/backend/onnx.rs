//! The ONNX Runtime backend: runs an ONNX model on the CUDA execution
//! provider where the runtime has it and a GPU is usable, on the CPU
//! otherwise. ONNX Runtime is loaded at run time from a shared library (the
//! one in the PyPI `onnxruntime` wheel; see deploy/onnxruntime/fetch.sh), so
//! building the node needs nothing but Rust.
//!
//! A batch of samples runs as one inference along the model's first (batch)
//! dimension when it is dynamic, one sample at a time when it is fixed at 1.
//! A sample whose size does not fit the model's input gets its own error;
//! the rest of its batch still runs.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use netdiv_proto::dtype::DType;
use ort::ep::{self, ExecutionProvider as _};
use ort::session::Session;
use ort::value::{DynValue, Tensor, TensorElementType, ValueType};
use serde::{Deserialize, Serialize};

use super::device::SampleError;
use super::prepost::{InputElements, Postprocess, Preprocess};
use super::Backend;

/// Where the model runs.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// CUDA if this ONNX Runtime build has it, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA or an error.
    Cuda,
}

/// The `[onnx]` section of a node's config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OnnxConfig {
    /// The model file (relative paths are relative to the config file).
    pub model: Option<PathBuf>,
    /// The input that samples feed [default: the model's first input].
    pub input_name: Option<String>,
    /// The output sent back [default: the model's first output].
    pub output_name: Option<String>,
    /// Element type of sample bytes on the wire [default: the model's].
    pub wire_dtype: Option<String>,
    /// Pre-processing when converting to float32: `x * scale + offset`.
    pub scale: f32,
    /// See `scale`.
    pub offset: f32,
    /// Post-processing of each output row: none or argmax.
    pub postprocess: Postprocess,
    /// Sessions that run batches at once.
    pub devices: usize,
    /// Threads per session for one operator (0: ONNX Runtime's default).
    pub intra_threads: usize,
    /// Where the model runs.
    pub execution_provider: Provider,
    /// The ONNX Runtime shared library [default: $ORT_DYLIB_PATH, then
    /// libonnxruntime.so on the loader's path].
    pub runtime_library: Option<PathBuf>,
}

impl Default for OnnxConfig {
    fn default() -> Self {
        Self {
            model: None,
            input_name: None,
            output_name: None,
            wire_dtype: None,
            scale: 1.0,
            offset: 0.0,
            postprocess: Postprocess::None,
            devices: 1,
            intra_threads: 0,
            execution_provider: Provider::Auto,
            runtime_library: None,
        }
    }
}

/// Why the backend could not start; each names the file or setting.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// No model file was configured.
    #[error(
        "the onnx backend needs a model: give --model FILE or [onnx] model in the config file"
    )]
    NoModel,
    #[error("cannot load ONNX Runtime from {path}: {reason}. Install it with `bash deploy/onnxruntime/fetch.sh` and pass the path it prints as --onnxruntime-lib (or set ORT_DYLIB_PATH)")]
    /// The ONNX Runtime shared library could not be loaded or initialised.
    Runtime {
        /// The library tried.
        path: String,
        /// The loader's or the runtime's error.
        reason: String,
    },
    #[error("model {}: {reason}", path.display())]
    /// The model file is missing or a session could not be built from it.
    Model {
        /// The model file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The model does not fit the samples that must feed it.
    #[error("model {}: {problem}", path.display())]
    Mismatch {
        /// The model file.
        path: PathBuf,
        /// How it does not fit.
        problem: ModelMismatch,
    },
    /// CUDA was requested but the loaded runtime has no CUDA provider.
    #[error("the CUDA execution provider was asked for, but this ONNX Runtime has none (the PyPI onnxruntime wheel is CPU-only; onnxruntime-gpu has CUDA)")]
    NoCuda,
}

/// How a model does not fit the samples that must feed it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelMismatch {
    /// `input_name` names no input of the model.
    #[error("no input named {name:?} (inputs: {inputs})")]
    NoSuchInput {
        /// The configured name.
        name: String,
        /// The model's inputs, comma-separated.
        inputs: String,
    },
    /// The model takes nothing.
    #[error("the model has no inputs")]
    NoInputs,
    /// A sample can fill one input only.
    #[error("the model has {count} inputs ({inputs}); samples can feed only a model with one")]
    ManyInputs {
        /// How many inputs the model has.
        count: usize,
        /// Their names, comma-separated.
        inputs: String,
    },
    /// The input (named) is a sequence or a map.
    #[error("input {0:?} is not a tensor")]
    NotATensor(String),
    /// The input's element type has no wire type.
    #[error("input {input:?} has element type {element}, which samples cannot carry")]
    ElementType {
        /// The input.
        input: String,
        /// Its element type, as ONNX Runtime names it.
        element: String,
    },
    /// The input (named) has no batch dimension.
    #[error("input {0:?} is a scalar; it needs a batch dimension")]
    Scalar(String),
    /// The batch dimension is fixed above 1.
    #[error(
        "input {input:?} has a fixed batch of {batch}; only a dynamic batch or a batch of 1 is \
         supported"
    )]
    FixedBatch {
        /// The input.
        input: String,
        /// Its fixed batch.
        batch: i64,
    },
    /// A dimension after the batch is dynamic.
    #[error("input {input:?} has shape {dims:?}: only the first (batch) dimension may be dynamic")]
    DynamicDims {
        /// The input.
        input: String,
        /// Its shape (-1: dynamic).
        dims: Vec<i64>,
    },
    /// `output_name` names no output of the model.
    #[error("no output named {0:?}")]
    NoSuchOutput(String),
    /// The model gives nothing.
    #[error("the model has no outputs")]
    NoOutputs,
}

/// Why a batch could not run; every sample of the batch gets it.
#[derive(Debug, thiserror::Error)]
enum InferError {
    #[error("input tensor: {0}")]
    Input(ort::Error),
    #[error("session poisoned")]
    Poisoned,
    #[error("inference failed: {0}")]
    Run(ort::Error),
    #[error("the model gave no output {0:?}")]
    NoOutput(String),
    #[error("reading the output: {0}")]
    Read(ort::Error),
    #[error("the output is not a tensor")]
    NotATensor,
    #[error("outputs of element type {0} are not supported")]
    Unsupported(String),
    #[error("output {name:?} has {bytes} bytes, not a whole row per sample of {samples}")]
    Ragged {
        name: String,
        bytes: usize,
        samples: usize,
    },
}

/// The model's input as samples must fill it.
#[derive(Clone, Debug)]
struct InputSpec {
    name: String,
    /// Dimensions after the batch dimension.
    sample_dims: Vec<usize>,
    /// Whether the batch dimension is dynamic (else it is fixed at 1).
    dynamic_batch: bool,
}

/// A loaded model: one session per device.
#[derive(Debug)]
pub struct OnnxBackend {
    sessions: Vec<Mutex<Session>>,
    input: InputSpec,
    output_name: String,
    pre: Preprocess,
    post: Postprocess,
    provider: &'static str,
    model: PathBuf,
    runtime_version: String,
}

fn dtype_of(ty: TensorElementType) -> Option<DType> {
    Some(match ty {
        TensorElementType::Float32 => DType::F32,
        TensorElementType::Float16 => DType::F16,
        TensorElementType::Uint8 => DType::U8,
        TensorElementType::Int8 => DType::I8,
        TensorElementType::Int32 => DType::I32,
        TensorElementType::Int64 => DType::I64,
        _ => return None,
    })
}

/// The library to load: the configured path, then `$ORT_DYLIB_PATH`, then
/// the loader's search path.
fn runtime_library(config: &OnnxConfig) -> PathBuf {
    config
        .runtime_library
        .clone()
        .or_else(|| {
            std::env::var_os("ORT_DYLIB_PATH")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from("libonnxruntime.so"))
}

const CUDA: &str = "CUDAExecutionProvider";
const CPU: &str = "CPUExecutionProvider";

/// One session of `model`, on CUDA (or failing) when `cuda`, else the CPU.
fn open_session(
    environment: &ort::environment::Environment,
    model: &Path,
    intra_threads: usize,
    cuda: bool,
) -> Result<Session, String> {
    let mut builder = Session::builder(environment).map_err(|e| e.to_string())?;
    if intra_threads > 0 {
        builder = builder
            .with_intra_threads(intra_threads)
            .map_err(|e| e.to_string())?;
    }
    if cuda {
        builder = builder
            .with_execution_providers([ep::CUDA::default().build().error_on_failure()])
            .map_err(|e| format!("CUDA execution provider: {e}"))?;
    }
    builder.commit_from_file(model).map_err(|e| e.to_string())
}

/// The release of the loaded ONNX Runtime, for Info, with the commit it was
/// built from where the build says, e.g. "1.32.0+fab30a4" (semver build
/// metadata: one word, for the key=value detail line).
///
/// ort offers no safe query of it: `ort::info()` gives the build's branch
/// and commit, and PyPI builds name their branch `HEAD`, not the release.
/// The release comes from the library's own `OrtGetApiBase()->
/// GetVersionString()`, with ort's declaration of that table, so nothing
/// here spells the C ABI by hand.
fn runtime_version(library: &Path) -> String {
    let commit = ort::info()
        .split([',', ' '])
        .find_map(|field| field.strip_prefix("git-commit-id="))
        .map(|c| format!("+{c}"))
        .unwrap_or_default();
    // SAFETY: ort::init_from already loaded this library and checked its
    // API version, so OrtGetApiBase exists with ort-sys's signature; the
    // version string is static and NUL-terminated.
    let release = unsafe {
        libloading::Library::new(library).ok().and_then(|lib| {
            let get_base = lib
                .get::<unsafe extern "system" fn() -> *const ort::sys::OrtApiBase>(b"OrtGetApiBase")
                .ok()?;
            let base = get_base().as_ref()?;
            let version = (base.GetVersionString)();
            (!version.is_null()).then(|| {
                std::ffi::CStr::from_ptr(version)
                    .to_string_lossy()
                    .into_owned()
            })
        })
    };
    format!("{}{commit}", release.as_deref().unwrap_or("unknown"))
}

impl OnnxBackend {
    /// Loads ONNX Runtime and the model, and checks that samples of the
    /// configured wire type can feed it.
    pub fn load(config: &OnnxConfig) -> Result<Self, OnnxError> {
        let model = config.model.clone().ok_or(OnnxError::NoModel)?;
        let model_error = |reason: String| OnnxError::Model {
            path: model.clone(),
            reason,
        };
        if !model.is_file() {
            return Err(model_error("no such file".into()));
        }
        let library = runtime_library(config);
        let runtime_error = |reason: String| OnnxError::Runtime {
            path: library.display().to_string(),
            reason,
        };
        let environment = ort::init_from(&library)
            .map_err(|e| runtime_error(e.to_string()))?
            .with_name("netdiv-sut-node")
            .build()
            .map_err(|e| runtime_error(e.to_string()))?;
        let cuda_built = ep::CUDA::is_available().unwrap_or(false);
        let open = |cuda: bool| open_session(&environment, &model, config.intra_threads, cuda);
        let (first, provider) = match (config.execution_provider, cuda_built) {
            (Provider::Cuda, false) => return Err(OnnxError::NoCuda),
            (Provider::Cuda, true) => (open(true).map_err(model_error)?, CUDA),
            // A GPU build on a machine whose GPU is missing or busy: the
            // CPU still serves, and Info says which one runs.
            (Provider::Auto, true) => match open(true) {
                Ok(session) => (session, CUDA),
                Err(e) => {
                    tracing::warn!("CUDA is not usable ({}); running on the CPU", e.trim_end());
                    (open(false).map_err(model_error)?, CPU)
                }
            },
            _ => (open(false).map_err(model_error)?, CPU),
        };
        let mut sessions = vec![first];
        for _ in 1..config.devices.max(1) {
            sessions.push(open(provider == CUDA).map_err(model_error)?);
        }
        let mismatch = |problem| OnnxError::Mismatch {
            path: model.clone(),
            problem,
        };
        let (input, model_dtype) = input_spec(&sessions[0], config).map_err(mismatch)?;
        let output_name = output_name(&sessions[0], config).map_err(mismatch)?;
        let wire = match &config.wire_dtype {
            Some(name) => name
                .parse::<DType>()
                .map_err(|e| model_error(format!("wire_dtype: {e}")))?,
            None => model_dtype,
        };
        let pre = Preprocess {
            wire,
            model: model_dtype,
            scale: config.scale,
            offset: config.offset,
        };
        pre.check().map_err(model_error)?;
        Ok(Self {
            sessions: sessions.into_iter().map(Mutex::new).collect(),
            input,
            output_name,
            pre,
            post: config.postprocess,
            provider,
            model,
            runtime_version: runtime_version(&library),
        })
    }

    /// Bytes one sample must have on the wire.
    pub fn sample_bytes(&self) -> usize {
        self.input.sample_dims.iter().product::<usize>() * self.pre.wire.size()
    }

    fn shape_text(&self) -> String {
        let dims: Vec<String> = self
            .input
            .sample_dims
            .iter()
            .map(|d| d.to_string())
            .collect();
        format!("{}[{}]", self.pre.wire, dims.join(","))
    }

    /// Runs `samples` (all of the right size) as one inference; returns one
    /// response per sample or one error for all.
    fn infer(&self, device: usize, samples: &[&[u8]]) -> Result<Vec<Vec<u8>>, InferError> {
        let n = samples.len();
        let mut shape = vec![n as i64];
        shape.extend(self.input.sample_dims.iter().map(|&d| d as i64));
        let tensor: DynValue = match self.pre.convert(samples) {
            InputElements::F32(v) => Tensor::from_array((shape, v)).map(|t| t.into_dyn()),
            InputElements::U8(v) => Tensor::from_array((shape, v)).map(|t| t.into_dyn()),
            InputElements::I8(v) => Tensor::from_array((shape, v)).map(|t| t.into_dyn()),
            InputElements::I32(v) => Tensor::from_array((shape, v)).map(|t| t.into_dyn()),
            InputElements::I64(v) => Tensor::from_array((shape, v)).map(|t| t.into_dyn()),
        }
        .map_err(InferError::Input)?;
        let session = &self.sessions[device % self.sessions.len()];
        let mut session = session.lock().map_err(|_| InferError::Poisoned)?;
        let outputs = session
            .run(ort::inputs![self.input.name.as_str() => tensor])
            .map_err(InferError::Run)?;
        let output = outputs
            .get(&self.output_name)
            .ok_or_else(|| InferError::NoOutput(self.output_name.clone()))?;
        let (dtype, bytes) = output_bytes(output)?;
        if n == 0 || bytes.len() % n != 0 {
            return Err(InferError::Ragged {
                name: self.output_name.clone(),
                bytes: bytes.len(),
                samples: n,
            });
        }
        Ok(bytes
            .chunks_exact(bytes.len() / n)
            .map(|row| self.post.apply(row, dtype))
            .collect())
    }
}

/// The input samples feed and the element type the model takes there.
fn input_spec(session: &Session, config: &OnnxConfig) -> Result<(InputSpec, DType), ModelMismatch> {
    let names = || {
        session
            .inputs()
            .iter()
            .map(|i| i.name().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let outlet = match &config.input_name {
        Some(name) => session
            .inputs()
            .iter()
            .find(|i| i.name() == name)
            .ok_or_else(|| ModelMismatch::NoSuchInput {
                name: name.clone(),
                inputs: names(),
            })?,
        None => session.inputs().first().ok_or(ModelMismatch::NoInputs)?,
    };
    if session.inputs().len() > 1 {
        return Err(ModelMismatch::ManyInputs {
            count: session.inputs().len(),
            inputs: names(),
        });
    }
    let input = || outlet.name().to_string();
    let ValueType::Tensor { ty, shape, .. } = outlet.dtype() else {
        return Err(ModelMismatch::NotATensor(input()));
    };
    let dtype = dtype_of(*ty).ok_or_else(|| ModelMismatch::ElementType {
        input: input(),
        element: ty.to_string(),
    })?;
    let dims: &[i64] = shape;
    let Some((&batch, rest)) = dims.split_first() else {
        return Err(ModelMismatch::Scalar(input()));
    };
    if batch != -1 && batch != 1 {
        return Err(ModelMismatch::FixedBatch {
            input: input(),
            batch,
        });
    }
    let mut sample_dims = Vec::with_capacity(rest.len());
    for &d in rest {
        if d < 1 {
            return Err(ModelMismatch::DynamicDims {
                input: input(),
                dims: dims.to_vec(),
            });
        }
        sample_dims.push(d as usize);
    }
    Ok((
        InputSpec {
            name: outlet.name().to_string(),
            sample_dims,
            dynamic_batch: batch == -1,
        },
        dtype,
    ))
}

fn output_name(session: &Session, config: &OnnxConfig) -> Result<String, ModelMismatch> {
    match &config.output_name {
        Some(name) if session.outputs().iter().any(|o| o.name() == name) => Ok(name.clone()),
        Some(name) => Err(ModelMismatch::NoSuchOutput(name.clone())),
        None => session
            .outputs()
            .first()
            .map(|o| o.name().to_string())
            .ok_or(ModelMismatch::NoOutputs),
    }
}

/// An output tensor as little-endian bytes and its element type.
fn output_bytes(value: &DynValue) -> Result<(DType, Vec<u8>), InferError> {
    fn le<T: Copy, const N: usize>(data: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
        data.iter().flat_map(|&v| to(v)).collect()
    }
    let err = InferError::Read;
    let ValueType::Tensor { ty, .. } = value.dtype() else {
        return Err(InferError::NotATensor);
    };
    let unsupported = || InferError::Unsupported(ty.to_string());
    let dtype = dtype_of(*ty).ok_or_else(unsupported)?;
    let bytes = match dtype {
        DType::F32 => le(
            value.try_extract_tensor::<f32>().map_err(err)?.1,
            f32::to_le_bytes,
        ),
        DType::I64 => le(
            value.try_extract_tensor::<i64>().map_err(err)?.1,
            i64::to_le_bytes,
        ),
        DType::I32 => le(
            value.try_extract_tensor::<i32>().map_err(err)?.1,
            i32::to_le_bytes,
        ),
        DType::U8 => value.try_extract_tensor::<u8>().map_err(err)?.1.to_vec(),
        DType::I8 => le(
            value.try_extract_tensor::<i8>().map_err(err)?.1,
            i8::to_le_bytes,
        ),
        DType::F16 => return Err(unsupported()),
    };
    Ok((dtype, bytes))
}

impl Backend for OnnxBackend {
    fn kind(&self) -> &'static str {
        "onnx"
    }

    fn detail(&self) -> String {
        format!(
            "model={} input={}:{} execution_provider={} onnxruntime={} sessions={} batch={} postprocess={}",
            self.model.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned()),
            self.input.name,
            self.shape_text(),
            self.provider,
            self.runtime_version,
            self.sessions.len(),
            if self.input.dynamic_batch { "dynamic" } else { "1" },
            self.post.name(),
        )
    }

    fn devices(&self) -> usize {
        self.sessions.len()
    }

    fn run(&self, device: usize, inputs: &[&[u8]]) -> Vec<Result<Vec<u8>, SampleError>> {
        let want = self.sample_bytes();
        let mut results: Vec<Result<Vec<u8>, SampleError>> = inputs
            .iter()
            .map(|i| {
                if i.len() == want {
                    Ok(Vec::new())
                } else {
                    Err(SampleError::WrongSize {
                        got: i.len(),
                        takes: format!(
                            "input {:?} of {} takes {} ({} bytes) per sample",
                            self.input.name,
                            self.model.display(),
                            self.shape_text(),
                            want
                        ),
                    })
                }
            })
            .collect();
        let good: Vec<usize> = (0..inputs.len()).filter(|&i| results[i].is_ok()).collect();
        // One inference for the batch, or one per sample for a batch of 1.
        let per_inference = if self.input.dynamic_batch {
            good.len().max(1)
        } else {
            1
        };
        for group in good.chunks(per_inference) {
            let samples: Vec<&[u8]> = group.iter().map(|&i| inputs[i]).collect();
            match self.infer(device, &samples) {
                Ok(outputs) => {
                    for (&i, out) in group.iter().zip(outputs) {
                        results[i] = Ok(out);
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    for &i in group {
                        results[i] = Err(SampleError::Inference(e.clone()));
                    }
                }
            }
        }
        results
    }
}
