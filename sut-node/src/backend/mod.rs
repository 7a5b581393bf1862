//! Accelerator backends: a batch of decoded inputs in, one output (or a
//! per-sample error) per input out. Backends run on the node's device
//! threads; they know nothing of transports or batching policy.

pub mod onnx;
pub mod prepost;
pub mod synthetic;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use self::onnx::{OnnxBackend, OnnxConfig};
use self::synthetic::{SyntheticBackend, SyntheticConfig};

/// What runs the model.
pub trait Backend: Send + Sync + 'static {
    /// Kind for `NodeInfo.backend` ("synthetic", "onnx", ...).
    fn kind(&self) -> &'static str;
    /// Human-readable parameters for `NodeInfo.backend_detail`.
    fn detail(&self) -> String;
    /// How many batches can run at once (devices).
    fn devices(&self) -> usize;
    /// Runs one batch on `device`; returns one result per input, in order.
    fn run(&self, device: usize, inputs: &[&[u8]]) -> Vec<Result<Vec<u8>, String>>;
}

/// Which backend a node runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// A cost model with a deterministic output (tests, benchmarks).
    #[default]
    Synthetic,
    /// An ONNX model run by ONNX Runtime (CUDA or CPU).
    Onnx,
}

/// A backend and the settings of each kind.
#[derive(Clone, Debug, Default)]
pub struct BackendConfig {
    /// Which backend runs.
    pub kind: BackendKind,
    /// The synthetic backend's settings.
    pub synthetic: SyntheticConfig,
    /// The ONNX backend's settings.
    pub onnx: OnnxConfig,
}

impl BackendConfig {
    /// Starts the configured backend.
    pub fn build(&self) -> Result<Arc<dyn Backend>, onnx::OnnxError> {
        Ok(match self.kind {
            BackendKind::Synthetic => Arc::new(SyntheticBackend::new(self.synthetic.clone())),
            BackendKind::Onnx => Arc::new(OnnxBackend::load(&self.onnx)?),
        })
    }
}
