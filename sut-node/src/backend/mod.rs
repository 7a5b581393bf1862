//! Accelerator backends: a batch of decoded inputs in, one output (or a
//! per-sample error) per input out. Backends run on the node's device
//! threads; they know nothing of transports or batching policy.

pub mod synthetic;

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
