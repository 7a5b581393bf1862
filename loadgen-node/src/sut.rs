//! The interfaces a system under test and a sample library plug into: the
//! Rust counterparts of the official `SystemUnderTest`,
//! `QuerySampleLibrary` and `QuerySamplesComplete`.

use crate::completion::Completer;

/// Opaque id the SUT hands back with each response.
pub type ResponseId = u64;
/// Index of a sample in the QSL.
pub type QuerySampleIndex = usize;

/// One sample of a query: what to run and how to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuerySample {
    pub id: ResponseId,
    pub index: QuerySampleIndex,
}

/// A SUT's answer for one sample.
#[derive(Clone, Copy, Debug)]
pub struct QuerySampleResponse<'a> {
    pub id: ResponseId,
    /// The output bytes; copied into the accuracy log when the sample is
    /// selected for it, ignored otherwise.
    pub data: &'a [u8],
}

/// The system under test as the LoadGen sees it.
pub trait SystemUnderTest: Send + Sync {
    /// A name for the logs. Called once per test, timed; an error ends the
    /// test before anything is issued.
    fn name(&self) -> Result<String, String>;
    /// Starts work on `samples`; each must later be completed exactly once
    /// through `completer`, from any thread.
    fn issue_query(&self, samples: &[QuerySample], completer: &Completer);
    /// No more queries are coming for now: stop waiting for a fuller batch.
    fn flush_queries(&self);
}

/// Where samples come from.
pub trait QuerySampleLibrary: Send + Sync {
    fn name(&self) -> String;
    fn total_sample_count(&self) -> usize;
    fn performance_sample_count(&self) -> usize;
    /// Called, untimed, before the samples are issued; an error (a sample
    /// file that cannot be read) ends the test.
    fn load_samples_to_ram(&self, samples: &[QuerySampleIndex]) -> Result<(), String>;
    fn unload_samples_from_ram(&self, samples: &[QuerySampleIndex]);
}
