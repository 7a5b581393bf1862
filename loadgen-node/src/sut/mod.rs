//! What a test runs against: the interfaces a system under test and a
//! sample library plug into (the Rust counterparts of the official
//! `SystemUnderTest`, `QuerySampleLibrary` and `QuerySamplesComplete`), and
//! netdiv's adapters:
//!
//! * [`null`]: answers at once, for measuring the engine alone;
//! * [`local`]: a sut-node's backend and batcher in this process, the
//!   in-process side of the network tax;
//! * [`network`]: the QDL over the network, and its sample store as QSL;
//! * `official` (feature `official`): the same QDL and store under the
//!   official C++ LoadGen.

pub mod local;
pub mod network;
pub mod null;
#[cfg(feature = "official")]
pub mod official;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// An error a SUT or QSL reports to the engine, with its causes.
pub type SutError = Box<dyn std::error::Error + Send + Sync>;

/// Counts the SUT adapters keep while a test runs, for the progress line.
#[derive(Debug, Default)]
pub struct Counters {
    /// Samples handed to the SUT.
    pub issued: AtomicU64,
    /// Samples it completed.
    pub completed: AtomicU64,
}

/// Opaque id the SUT hands back with each response.
pub type ResponseId = u64;
/// Index of a sample in the QSL.
pub type QuerySampleIndex = usize;

/// One sample of a query: what to run and how to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuerySample {
    /// The id to answer with.
    pub id: ResponseId,
    /// The QSL sample to run.
    pub index: QuerySampleIndex,
}

/// A SUT's answer for one sample (or, through [`Responder::first_token`],
/// its first token).
#[derive(Clone, Copy, Debug)]
pub struct QuerySampleResponse<'a> {
    /// The id the sample was issued with.
    pub id: ResponseId,
    /// The output bytes; copied into the accuracy log when the sample is
    /// selected for it, ignored otherwise.
    pub data: &'a [u8],
    /// Token models: how many tokens the output holds (the official
    /// `n_tokens`; at least 2 for a time per output token). 0 otherwise.
    pub n_tokens: i64,
}

impl<'a> QuerySampleResponse<'a> {
    /// A response of a model without token latencies.
    pub fn new(id: ResponseId, data: &'a [u8]) -> Self {
        Self {
            id,
            data,
            n_tokens: 0,
        }
    }
}

/// Where a SUT sends its answers: the record of the test in progress
/// (the counterpart of the official `QuerySamplesComplete` and
/// `FirstTokenComplete`). Callable from any thread; the engine's completion
/// table implements it, so the SUT interface names nothing of the engine.
pub trait Responder: Send + Sync {
    /// These samples are done, all at this moment.
    fn complete(&self, responses: &[QuerySampleResponse<'_>]);
    /// These samples' first tokens arrived (token models; ignored
    /// otherwise).
    fn first_token(&self, responses: &[QuerySampleResponse<'_>]);
    /// The SUT cannot complete what it was given: end the test with
    /// `reason`.
    fn abort(&self, reason: String);
}

/// A responder a SUT may keep for answers that come later.
pub type SharedResponder = Arc<dyn Responder>;

/// The system under test as the LoadGen sees it.
pub trait SystemUnderTest: Send + Sync {
    /// A name for the logs. Called once per test, timed; an error ends the
    /// test before anything is issued.
    fn name(&self) -> Result<String, SutError>;
    /// Starts work on `samples`; each must later be completed exactly once
    /// through `responder`, from any thread.
    fn issue_query(&self, samples: &[QuerySample], responder: &SharedResponder);
    /// No more queries are coming for now: stop waiting for a fuller batch.
    fn flush_queries(&self);
}

/// Where samples come from.
pub trait QuerySampleLibrary: Send + Sync {
    /// A name for the logs.
    fn name(&self) -> String;
    /// Samples in the library.
    fn total_sample_count(&self) -> usize;
    /// Samples that fit in memory at once.
    fn performance_sample_count(&self) -> usize;
    /// Called, untimed, before the samples are issued; an error (a sample
    /// file that cannot be read) ends the test.
    fn load_samples_to_ram(&self, samples: &[QuerySampleIndex]) -> Result<(), SutError>;
    /// The samples are no longer needed.
    fn unload_samples_from_ram(&self, samples: &[QuerySampleIndex]);
}
