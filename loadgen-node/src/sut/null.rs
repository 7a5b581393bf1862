//! An in-process SUT that answers instantly and a synthetic QSL: the engine
//! measured on its own, with no network and no model; and the same null
//! answers as nodes behind the QDL's local link, to measure the QDL alone.

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

/// The null SUT as a node behind the QDL's local link (`--sut null
/// --local-nodes N`): a task on the QDL's I/O runtime answers each piece
/// at once, with each sample's bytes as they came; the node has no thread
/// of its own to wake. A run over N of them measures the LoadGen and the
/// QDL, with its cost per node, and nothing of the nodes. (Answering on
/// the sending thread itself would recurse: each answer frees room, and
/// the QDL sends the next piece from inside it.)
#[derive(Debug)]
pub struct NullNode {
    name: String,
    benchmark: netdiv_proto::Benchmark,
    output_tokens: Option<i64>,
}

impl NullNode {
    /// A node named `name` for `benchmark`; for token models each answer
    /// is a first token, then a completion of `output_tokens` tokens.
    pub fn new(
        name: impl Into<String>,
        benchmark: netdiv_proto::Benchmark,
        output_tokens: Option<i64>,
    ) -> Self {
        Self {
            name: name.into(),
            benchmark,
            output_tokens,
        }
    }
}

/// The answers to one piece: for token models a first token each, then
/// the completions.
fn answer(answers: &qdl::NodeAnswers, query: netdiv_proto::pb::Query, output_tokens: Option<i64>) {
    use netdiv_proto::pb::{Completion, CompletionBatch};
    // A cancel finds nothing held: every sample was answered as it came.
    if query.samples.is_empty() {
        return;
    }
    if output_tokens.is_some() {
        let firsts = query
            .samples
            .iter()
            .map(|s| netdiv_proto::sample::first_token_message(s.response_id, &s.data))
            .collect();
        answers.send(CompletionBatch {
            completions: firsts,
            ..Default::default()
        });
    }
    let completions = query
        .samples
        .into_iter()
        .map(|s| Completion {
            response_id: s.response_id,
            decoded_size: s.data.len() as u64,
            data: s.data,
            n_tokens: output_tokens.unwrap_or(0),
            ..Default::default()
        })
        .collect();
    answers.send(CompletionBatch {
        completions,
        ..Default::default()
    });
}

impl qdl::InProcessNode for NullNode {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn info(&self) -> netdiv_proto::pb::NodeInfo {
        use netdiv_proto::codec::Codec;
        use netdiv_proto::Direction;
        netdiv_proto::pb::NodeInfo {
            name: self.name.clone(),
            software_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            backend: "null".into(),
            backend_detail: "answers at once, from a task of the QDL's runtime".into(),
            codecs: self
                .benchmark
                .codecs(Direction::Input)
                .iter()
                .map(|c| c.to_proto() as i32)
                .collect(),
            response_codec: Codec::None.to_proto() as i32,
            benchmark: self.benchmark.to_string(),
            ..Default::default()
        }
    }

    fn open(&self, answers: qdl::NodeAnswers) -> qdl::QueryPath {
        let output_tokens = self.output_tokens;
        let (pieces, mut arriving) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(query) = arriving.recv().await {
                answer(&answers, query, output_tokens);
            }
            // The path is closed and every piece answered.
            drop(answers);
        });
        Box::new(move |query| {
            // Fails only once the task is gone, with the runtime.
            let _ = pieces.send(query);
        })
    }
}
