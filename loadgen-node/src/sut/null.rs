//! An in-process SUT that answers instantly and a synthetic QSL: the engine
//! measured on its own, with no network and no model.

use crate::engine::completion::Completer;
use crate::sut::{
    QuerySample, QuerySampleIndex, QuerySampleLibrary, QuerySampleResponse, SutError,
    SystemUnderTest,
};

/// Completes every sample inside `issue_query`, answering with the sample's
/// QSL index as 4 little-endian bytes (so accuracy logs are checkable).
#[derive(Clone, Debug)]
pub struct NullSut {
    name: String,
}

impl NullSut {
    /// A null SUT that reports `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

/// Samples answered per `complete` call.
const CHUNK: usize = 4096;

impl SystemUnderTest for NullSut {
    fn name(&self) -> Result<String, SutError> {
        Ok(self.name.clone())
    }

    fn issue_query(&self, samples: &[QuerySample], completer: &Completer) {
        // Chunks keep the response buffers small and in cache, so a
        // ten-million-sample Offline query needs no extra memory.
        let mut data = [[0u8; 4]; CHUNK];
        for chunk in samples.chunks(CHUNK) {
            for (d, s) in data.iter_mut().zip(chunk) {
                *d = (s.index as u32).to_le_bytes();
            }
            let responses: Vec<QuerySampleResponse<'_>> = chunk
                .iter()
                .zip(&data)
                .map(|(s, d)| QuerySampleResponse { id: s.id, data: d })
                .collect();
            completer.complete(&responses);
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
