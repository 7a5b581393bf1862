//! An in-process SUT that answers instantly and a synthetic QSL: the engine
//! measured on its own, with no network and no model.

use crate::sut::{
    QuerySample, QuerySampleIndex, QuerySampleLibrary, QuerySampleResponse, SharedResponder,
    SutError, SystemUnderTest,
};

/// Completes every sample inside `issue_query`, answering with the sample's
/// QSL index as 4 little-endian bytes (so accuracy logs are checkable). For
/// token models it first reports that same payload as the first token,
/// then completes with a fixed `n_tokens`.
#[derive(Clone, Debug)]
pub struct NullSut {
    name: String,
    output_tokens: Option<i64>,
}

impl NullSut {
    /// A null SUT that reports `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            output_tokens: None,
        }
    }

    /// Answers each sample with a first token and then a completion of
    /// `n_tokens` tokens (any value, so the LoadGen's checks of bad counts
    /// can be exercised too).
    pub fn with_output_tokens(mut self, n_tokens: i64) -> Self {
        self.output_tokens = Some(n_tokens);
        self
    }
}

/// Samples answered per `complete` call.
const CHUNK: usize = 4096;

impl SystemUnderTest for NullSut {
    fn name(&self) -> Result<String, SutError> {
        Ok(self.name.clone())
    }

    fn issue_query(&self, samples: &[QuerySample], responder: &SharedResponder) {
        // Chunks keep the response buffers small and in cache, so a
        // ten-million-sample Offline query needs no extra memory.
        let mut data = [[0u8; 4]; CHUNK];
        for chunk in samples.chunks(CHUNK) {
            for (d, s) in data.iter_mut().zip(chunk) {
                *d = (s.index as u32).to_le_bytes();
            }
            let mut responses: Vec<QuerySampleResponse<'_>> = chunk
                .iter()
                .zip(&data)
                .map(|(s, d)| QuerySampleResponse::new(s.id, d))
                .collect();
            if let Some(n_tokens) = self.output_tokens {
                responder.first_token(&responses);
                for r in &mut responses {
                    r.n_tokens = n_tokens;
                }
            }
            responder.complete(&responses);
        }
    }

    fn flush_queries(&self) {}
}

/// A QSL of `total` samples with no data behind them.
#[derive(Clone, Debug)]
pub struct SyntheticQsl {
    total: usize,
    performance: usize,
}

impl SyntheticQsl {
    /// `total` samples, `performance` of which fit in memory at once.
    pub fn new(total: usize, performance: usize) -> Self {
        Self { total, performance }
    }
}

impl QuerySampleLibrary for SyntheticQsl {
    fn name(&self) -> String {
        "netdiv-synthetic-qsl".into()
    }
    fn total_sample_count(&self) -> usize {
        self.total
    }
    fn performance_sample_count(&self) -> usize {
        self.performance
    }
    fn load_samples_to_ram(&self, _samples: &[QuerySampleIndex]) -> Result<(), SutError> {
        Ok(())
    }
    fn unload_samples_from_ram(&self, _samples: &[QuerySampleIndex]) {}
}
