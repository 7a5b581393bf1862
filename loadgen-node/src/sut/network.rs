//! The QDL as a system under test of this engine, and the QDL's sample
//! store as its QSL. Thin adapters: the QDL does the work.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::qsl::SampleStore;
use qdl::{CompletionSink, NetworkSut};

use crate::sut::{
    Counters, QuerySample, QuerySampleIndex, QuerySampleLibrary, QuerySampleResponse,
    SharedResponder, SutError, SystemUnderTest,
};

/// Completions from the QDL to the test's responder.
pub struct ResponderSink {
    /// Where the test in progress takes its answers.
    pub responder: SharedResponder,
    /// Counted as completions arrive.
    pub counters: Arc<Counters>,
}

/// Batches up to this many answers are viewed on the stack: no
/// allocation for them.
const ON_STACK: usize = 64;

/// Hands the QDL's responses to `deliver` as the engine's, in one call
/// (the engine stamps a batch's completions with one time); the output
/// bytes are borrowed, never copied, and a batch of up to [`ON_STACK`]
/// answers costs no allocation.
fn hand_on<'a>(responses: &[qdl::Response<'a>], deliver: impl Fn(&[QuerySampleResponse<'a>])) {
    fn view<'a>(r: &qdl::Response<'a>) -> QuerySampleResponse<'a> {
        QuerySampleResponse {
            id: r.response_id,
            data: r.data,
            n_tokens: r.n_tokens,
        }
    }
    if responses.len() <= ON_STACK {
        let mut stack = [QuerySampleResponse::new(0, &[]); ON_STACK];
        for (slot, r) in stack.iter_mut().zip(responses) {
            *slot = view(r);
        }
        deliver(&stack[..responses.len()]);
    } else {
        deliver(&responses.iter().map(view).collect::<Vec<_>>());
    }
}

impl CompletionSink for ResponderSink {
    fn first_token(&self, responses: &[qdl::Response<'_>]) {
        hand_on(responses, |view| self.responder.first_token(view));
    }

    fn complete(&self, responses: &[qdl::Response<'_>]) {
        hand_on(responses, |view| self.responder.complete(view));
        self.counters
            .completed
            .fetch_add(responses.len() as u64, Ordering::Relaxed);
    }

    fn fail(&self, reason: &str) {
        self.responder.abort(reason.to_string());
    }
}

/// Several sut-nodes, as one SUT.
pub struct QdlSut {
    /// The QDL, connected.
    pub network: NetworkSut,
    /// Counted as samples are issued and completed.
    pub counters: Arc<Counters>,
    /// The sink of the test in progress, made once per responder.
    sink: Mutex<Option<(SharedResponder, Arc<dyn CompletionSink>)>>,
}

impl std::fmt::Debug for ResponderSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponderSink")
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for QdlSut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdlSut")
            .field("network", &self.network)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl QdlSut {
    /// `network` as a SUT, counting in `counters`.
    pub fn new(network: NetworkSut, counters: Arc<Counters>) -> Self {
        Self {
            network,
            counters,
            sink: Mutex::new(None),
        }
    }

    /// The sink for `responder`: the one made for it before, or a new one
    /// (each pass of a test has its own responder).
    fn sink_for(&self, responder: &SharedResponder) -> Arc<dyn CompletionSink> {
        let mut current = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((known, sink)) = &*current {
            if Arc::ptr_eq(known, responder) {
                return sink.clone();
            }
        }
        let sink: Arc<dyn CompletionSink> = Arc::new(ResponderSink {
            responder: responder.clone(),
            counters: self.counters.clone(),
        });
        *current = Some((responder.clone(), sink.clone()));
        sink
    }
}

impl SystemUnderTest for QdlSut {
    fn name(&self) -> Result<String, SutError> {
        Ok(self.network.name()?)
    }

    fn issue_query(&self, samples: &[QuerySample], responder: &SharedResponder) {
        self.counters
            .issued
            .fetch_add(samples.len() as u64, Ordering::Relaxed);
        let pairs: Vec<(u64, usize)> = samples.iter().map(|s| (s.id, s.index)).collect();
        self.network.issue(&pairs, &self.sink_for(responder));
    }

    /// The QDL never holds queries back to batch them, so there is
    /// nothing to flush.
    fn flush_queries(&self) {}
}

/// The samples of a run, held in this process's memory.
#[derive(Debug)]
pub struct StoreQsl {
    /// The samples.
    pub store: Arc<SampleStore>,
    /// How many fit in memory at once.
    pub performance_sample_count: usize,
}

impl QuerySampleLibrary for StoreQsl {
    fn name(&self) -> String {
        format!("netdiv-qsl: {}", self.store.source().describe())
    }
    fn total_sample_count(&self) -> usize {
        self.store.total()
    }
    fn performance_sample_count(&self) -> usize {
        self.performance_sample_count
    }
    fn load_samples_to_ram(&self, samples: &[QuerySampleIndex]) -> Result<(), SutError> {
        Ok(self.store.load(samples)?)
    }
    fn unload_samples_from_ram(&self, samples: &[QuerySampleIndex]) {
        self.store.unload(samples);
    }
}
