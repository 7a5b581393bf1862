//! Where completed samples go: the LoadGen's `QuerySamplesComplete`, behind
//! a trait so the QDL serves our engine and the official one alike.

/// One completed sample: the id the LoadGen issued and the decoded output.
#[derive(Clone, Copy, Debug)]
pub struct Response<'a> {
    /// The sample's id as the LoadGen issued it.
    pub response_id: u64,
    /// The sample's output bytes (borrowed: copy what must be kept).
    pub data: &'a [u8],
}

/// The LoadGen side of a query. Called from the QDL's I/O threads.
pub trait CompletionSink: Send + Sync {
    /// These samples are done; each id arrives here exactly once.
    fn complete(&self, responses: &[Response<'_>]);
    /// The run cannot finish (a sample failed for good, or every node is
    /// gone); `reason` says why, naming the node and the sample.
    fn fail(&self, reason: &str);
}
