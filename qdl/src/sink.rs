//! Where completed samples go: the LoadGen's `QuerySamplesComplete`, behind
//! a trait so the QDL serves our engine and the official one alike.

/// One completed sample (or its first token): the id the LoadGen issued
/// and the decoded output.
#[derive(Clone, Copy, Debug)]
pub struct Response<'a> {
    /// The sample's id as the LoadGen issued it.
    pub response_id: u64,
    /// The sample's output bytes (borrowed: copy what must be kept).
    pub data: &'a [u8],
    /// Token models: the tokens the output holds (the LoadGen's
    /// `n_tokens`); 0 for first tokens and other models.
    pub n_tokens: i64,
}

/// The LoadGen side of a query. Called from the QDL's I/O threads.
pub trait CompletionSink: Send + Sync {
    /// The first tokens of these samples arrived (token models; the
    /// LoadGen's `FirstTokenComplete`). Each id arrives here at most once,
    /// and before its completion.
    fn first_token(&self, responses: &[Response<'_>]);
    /// These samples are done; each id arrives here exactly once.
    fn complete(&self, responses: &[Response<'_>]);
    /// The run cannot finish (a sample failed for good, or every node is
    /// gone); `reason` says why, naming the node and the sample.
    fn fail(&self, reason: &str);
}
