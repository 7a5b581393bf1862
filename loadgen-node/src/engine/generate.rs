//! Pure query generation: which samples are loaded, which are issued in
//! which order, and when (Server). No clocks, no I/O: the same settings and
//! seeds always give the same queries, matching the official LoadGen draw
//! for draw.

use crate::engine::rng::{StdRng, UniformIntVariant};
use crate::engine::settings::{EffectiveSettings, Scenario};
use crate::sut::{QuerySample, QuerySampleIndex};

/// Samples loaded into memory together, plus MultiStream padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LoadableSet {
    /// QSL indices to load, in shuffled order, followed by the MultiStream
    /// padding (repeats of the first entries).
    pub samples: Vec<QuerySampleIndex>,
    /// Entries before the MultiStream padding.
    pub distribution_end: usize,
}

/// Shuffles the first `count` QSL indices with `qsl_rng_seed` and cuts them
/// into sets of `performance_sample_count`.
pub(super) fn loadable_sets(
    settings: &EffectiveSettings,
    qsl_total_count: usize,
    count: usize,
    variant: UniformIntVariant,
) -> Vec<LoadableSet> {
    let mut rng = StdRng::new(settings.qsl_rng_seed, variant);
    let n = count.min(qsl_total_count);
    let mut order: Vec<QuerySampleIndex> = (0..n).collect();
    rng.shuffle(&mut order);
    let set_size = (settings.performance_sample_count as usize).max(1);
    let padding = match settings.scenario {
        Scenario::MultiStream => (settings.samples_per_query as usize).saturating_sub(1),
        _ => 0,
    };
    order
        .chunks(set_size)
        .map(|chunk| {
            let mut samples = Vec::with_capacity(chunk.len() + padding);
            samples.extend_from_slice(chunk);
            for i in 0..padding {
                samples.push(samples[i % chunk.len()]);
            }
            LoadableSet {
                samples,
                distribution_end: chunk.len(),
            }
        })
        .collect()
}

/// Sequence numbers that run across a whole test, and the per-sample draws
/// of the accuracy-log sampler.
#[derive(Debug)]
pub(super) struct SequenceGen {
    next_query: u64,
    next_sample: u64,
    accuracy_log_rng: Option<StdRng>,
}

impl SequenceGen {
    /// `track_accuracy_log` draws one value per sample, as the official
    /// LoadGen does; without sampled accuracy logging they are never used.
    pub(super) fn new(track_accuracy_log: bool, variant: UniformIntVariant) -> Self {
        Self {
            next_query: 0,
            next_sample: 0,
            accuracy_log_rng: track_accuracy_log.then(|| StdRng::new(5489, variant)),
        }
    }
}

/// Whether the official run is an accuracy pass (every sample once) or a
/// performance pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pass {
    /// Every loaded sample once, every response kept for the accuracy log.
    Accuracy,
    /// A timed run drawing samples by the scenario's rules.
    Performance,
}

/// How responses are picked for the accuracy log in a performance pass.
#[derive(Clone, Copy, Debug)]
pub(super) struct AccuracyLogSampling {
    /// Shift in `[0, 1)` added (modulo 1) to each sample's draw, from
    /// `accuracy_log_rng_seed`.
    pub offset: f64,
    /// A response is kept when its shifted draw is at most this fraction.
    pub probability: f64,
}

/// The queries of one IssueQueries call, samples stored flat.
#[derive(Debug)]
pub(super) struct GeneratedQueries {
    /// Every sample of every query in order; `id` is its sequence id.
    pub samples: Vec<QuerySample>,
    /// Number of queries generated.
    pub query_count: usize,
    /// Samples per query (the last Offline accuracy query may be shorter).
    pub samples_per_query: usize,
    /// Scheduled offset of each query from the start, in ns.
    pub scheduled_ns: Vec<i64>,
    /// The timestamp after the last query: `generated_query_duration`.
    pub duration_ns: i64,
    /// Sequence id of the first sample (ids run on across the test).
    pub first_sequence_id: u64,
    /// Id of the first query (ids run on across the test).
    pub first_query_id: u64,
    /// Per sample: keep its response for the accuracy log (performance
    /// pass with sampling only).
    pub keep_for_accuracy_log: Option<Vec<bool>>,
}

impl GeneratedQueries {
    /// The samples of query `q`.
    pub(super) fn query(&self, q: usize) -> &[QuerySample] {
        let start = q * self.samples_per_query;
        let end = (start + self.samples_per_query).min(self.samples.len());
        &self.samples[start..end]
    }

    /// Samples of queries `first..=last`, contiguous in storage.
    pub(super) fn queries(&self, first: usize, last: usize) -> &[QuerySample] {
        let start = first * self.samples_per_query;
        let end = ((last + 1) * self.samples_per_query).min(self.samples.len());
        &self.samples[start..end]
    }

    /// The number of samples in each query, in order.
    pub(super) fn query_sizes(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        (0..self.query_count).map(|q| self.query(q).len())
    }
}

/// A shuffled list of `[0, stride, 2*stride, ...)` consumed in order.
struct UniqueDistribution {
    indices: Vec<usize>,
    next: usize,
}

impl UniqueDistribution {
    fn new(count: usize, stride: usize, rng: &mut StdRng) -> Self {
        let mut indices: Vec<usize> = (0..count).step_by(stride.max(1)).collect();
        rng.shuffle(&mut indices);
        Self { indices, next: 0 }
    }

    fn next(&mut self) -> usize {
        // The official code throws past the end; wrap instead of panicking
        // (reachable only with settings it cannot run either).
        let v = self.indices[self.next % self.indices.len().max(1)];
        self.next += 1;
        v
    }
}

/// Whole permutations of the loaded set, appended one per `set_size`
/// queries of `min_queries`, reshuffling one vector cumulatively.
struct EqualIssueDistribution {
    indices: Vec<usize>,
    next: usize,
}

impl EqualIssueDistribution {
    fn new(min_queries: usize, set_size: usize, rng: &mut StdRng) -> Self {
        let mut perm: Vec<usize> = (0..set_size).collect();
        let mut indices = Vec::new();
        let mut j = 0;
        while j < min_queries {
            rng.shuffle(&mut perm);
            indices.extend_from_slice(&perm);
            j += set_size.max(1);
        }
        Self { indices, next: 0 }
    }

    fn next(&mut self) -> usize {
        let v = self.indices[self.next % self.indices.len().max(1)];
        self.next += 1;
        v
    }
}

/// Generates the queries of one IssueQueries call.
pub(super) fn generate_queries(
    settings: &EffectiveSettings,
    pass: Pass,
    set: &LoadableSet,
    seq: &mut SequenceGen,
    sampling: Option<AccuracyLogSampling>,
    variant: UniformIntVariant,
) -> GeneratedQueries {
    let scenario = settings.scenario;
    let loaded = &set.samples;
    let multi_stream = scenario == Scenario::MultiStream;
    let accuracy = pass == Pass::Accuracy;

    let mut gen_duration_ns: i64 = (if scenario == Scenario::Server { 1 } else { 2 })
        * settings.target_duration_ms as i64
        * 1_000_000;
    let mut min_queries = settings.min_query_count as usize;
    let mut spq = settings.samples_per_query as usize;
    if accuracy && scenario == Scenario::Offline {
        spq = set.distribution_end;
    }
    if accuracy || settings.performance_issue_unique {
        gen_duration_ns = 0;
        min_queries = loaded.len() / spq.max(1);
    }

    let mut sample_rng = StdRng::new(settings.sample_index_rng_seed, variant);
    let mut schedule_rng = StdRng::new(settings.schedule_rng_seed, variant);
    let stride = if multi_stream { spq } else { 1 };

    // The draw order matters: each distribution below consumes sample_rng
    // at construction whether or not it is used.
    let mut accuracy_distribution =
        accuracy.then(|| UniqueDistribution::new(set.distribution_end, stride, &mut sample_rng));
    let mut unique = UniqueDistribution::new(set.distribution_end, stride, &mut sample_rng);
    let mut equal_issue = EqualIssueDistribution::new(min_queries, loaded.len(), &mut sample_rng);
    let performance_draw = |rng: &mut StdRng| -> usize {
        rng.uniform_int(0, set.distribution_end.saturating_sub(1) as u64) as usize
    };
    let mut next_index = |rng: &mut StdRng| -> usize {
        match accuracy_distribution.as_mut() {
            Some(d) => d.next(),
            None => performance_draw(rng),
        }
    };

    // Equal issue picks samples in every pass but pads only performance.
    let equal_issue_on = settings.sample_concatenate_permutation;
    if equal_issue_on && !accuracy {
        if scenario == Scenario::Offline && !spq.is_multiple_of(loaded.len()) {
            spq += loaded.len() - spq % loaded.len();
        } else if scenario != Scenario::Offline && !min_queries.is_multiple_of(loaded.len()) {
            min_queries += loaded.len() - min_queries % loaded.len();
        }
    }

    let period_ns = ((1.0 / settings.target_qps) * 1e9) as i64;
    let exponential = scenario == Scenario::Server;
    let same = settings.performance_issue_same_index as usize;

    let first_sequence_id = seq.next_sample;
    let first_query_id = seq.next_query;
    let mut samples: Vec<QuerySample> = Vec::new();
    let mut scheduled_ns: Vec<i64> = Vec::new();
    let mut keep: Option<Vec<bool>> = sampling.map(|_| Vec::new());
    let mut query_buf: Vec<QuerySampleIndex> = vec![0; spq];
    let mut timestamp: i64 = 0;
    let mut prev_timestamp: i64 = 0;
    let mut query_count = 0usize;

    while prev_timestamp < gen_duration_ns || query_count < min_queries {
        if multi_stream {
            let start = if settings.performance_issue_unique {
                unique.next()
            } else if settings.performance_issue_same {
                same
            } else {
                next_index(&mut sample_rng)
            };
            for (offset, s) in query_buf.iter_mut().enumerate() {
                *s = loaded[(start + offset) % loaded.len()];
            }
        } else if scenario == Scenario::Offline {
            fill_offline_query(&mut query_buf, loaded, settings, same, &mut sample_rng);
        } else {
            for s in query_buf.iter_mut() {
                let i = if settings.performance_issue_unique {
                    unique.next()
                } else if settings.performance_issue_same {
                    same
                } else if equal_issue_on {
                    equal_issue.next()
                } else {
                    next_index(&mut sample_rng)
                };
                *s = loaded[i % loaded.len()];
            }
        }
        push_query(&mut samples, &mut keep, &query_buf, seq, sampling, accuracy);
        scheduled_ns.push(timestamp);
        query_count += 1;
        prev_timestamp = timestamp;
        timestamp += if exponential {
            (schedule_rng.exponential(settings.target_qps) * 1e9) as i64
        } else {
            period_ns
        };
        if equal_issue_on
            && query_count >= min_queries
            && prev_timestamp < gen_duration_ns
            && scenario != Scenario::Offline
        {
            min_queries += loaded.len();
        }
    }

    // Offline accuracy: one more query for what did not fill a whole one.
    if scenario == Scenario::Offline && accuracy {
        let remaining = loaded.len() % spq.max(1);
        if remaining != 0 {
            query_buf.truncate(remaining);
            for s in query_buf.iter_mut() {
                *s = loaded[next_index(&mut sample_rng) % loaded.len()];
            }
            push_query(&mut samples, &mut keep, &query_buf, seq, sampling, accuracy);
            scheduled_ns.push(timestamp);
            query_count += 1;
        }
    }

    GeneratedQueries {
        samples,
        query_count,
        samples_per_query: spq,
        scheduled_ns,
        duration_ns: timestamp,
        first_sequence_id,
        first_query_id,
        keep_for_accuracy_log: keep,
    }
}

/// Offline: the loaded set repeated to fill the query (each repeat shuffled
/// in equal-issue mode), or one sample repeated (TEST04 "same").
fn fill_offline_query(
    buf: &mut [QuerySampleIndex],
    loaded: &[QuerySampleIndex],
    settings: &EffectiveSettings,
    same: usize,
    rng: &mut StdRng,
) {
    if settings.performance_issue_same {
        buf.fill(loaded[same % loaded.len()]);
        return;
    }
    let n = loaded.len();
    let full = buf.len() / n;
    for block in buf.chunks_exact_mut(n).take(full) {
        block.copy_from_slice(loaded);
        if settings.sample_concatenate_permutation {
            rng.shuffle(block);
        }
    }
    let remainder = buf.len() % n;
    buf[full * n..].copy_from_slice(&loaded[..remainder]);
}

fn push_query(
    samples: &mut Vec<QuerySample>,
    keep: &mut Option<Vec<bool>>,
    query: &[QuerySampleIndex],
    seq: &mut SequenceGen,
    sampling: Option<AccuracyLogSampling>,
    accuracy: bool,
) {
    seq.next_query += 1;
    samples.reserve(query.len());
    for &index in query {
        samples.push(QuerySample {
            id: seq.next_sample,
            index,
        });
        seq.next_sample += 1;
        if let Some(rng) = seq.accuracy_log_rng.as_mut() {
            let value = rng.uniform_unit();
            if let (Some(flags), Some(s)) = (keep.as_mut(), sampling) {
                let shifted = if value + s.offset < 1.0 {
                    value + s.offset
                } else {
                    value + s.offset - 1.0
                };
                flags.push(accuracy || shifted <= s.probability);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::settings::{TestMode, TestSettings};

    /// The spec's test vector, from the official 6.0.17 built with GCC 12.
    fn test_vector_settings() -> EffectiveSettings {
        let req = TestSettings {
            scenario: Scenario::Server,
            mode: TestMode::PerformanceOnly,
            qsl_rng_seed: 2085463073848966840,
            sample_index_rng_seed: 2747215439041700203,
            schedule_rng_seed: 16159082839903944936,
            server_target_qps: 2000.0,
            min_duration_ms: 1000,
            min_query_count: 100,
            ..TestSettings::default()
        };
        EffectiveSettings::new(&req, 1024, 4096)
    }

    #[test]
    fn official_test_vector_loaded_set_and_schedule() {
        let settings = test_vector_settings();
        let variant = UniformIntVariant::Lemire;
        let sets = loadable_sets(&settings, 4096, 1024, variant);
        assert_eq!(sets.len(), 1);
        assert_eq!(
            sets[0].samples[..10],
            [216, 267, 822, 906, 663, 580, 710, 908, 410, 882]
        );
        let mut seq = SequenceGen::new(false, variant);
        let q = generate_queries(
            &settings,
            Pass::Performance,
            &sets[0],
            &mut seq,
            None,
            variant,
        );
        assert_eq!(q.query_count, 2068);
        assert_eq!(q.duration_ns, 1000333625);
        let issued: Vec<usize> = q.samples[..12].iter().map(|s| s.index).collect();
        assert_eq!(
            issued,
            [784, 618, 960, 248, 513, 635, 155, 667, 431, 242, 804, 751]
        );
        let gaps: Vec<i64> = q
            .scheduled_ns
            .windows(2)
            .take(5)
            .map(|w| w[1] - w[0])
            .collect();
        assert_eq!(gaps, [921827, 228961, 642931, 356497, 193203]);
        assert_eq!(seq.next_sample, 2068);
    }

    #[test]
    fn multistream_sets_are_padded_and_queries_contiguous() {
        let req = TestSettings {
            scenario: Scenario::MultiStream,
            min_query_count: 10,
            min_duration_ms: 0,
            ..TestSettings::default()
        };
        let settings = EffectiveSettings::new(&req, 100, 1000);
        let sets = loadable_sets(&settings, 1000, 1000, UniformIntVariant::Lemire);
        assert_eq!(sets.len(), 10);
        assert_eq!(sets[0].samples.len(), 107);
        assert_eq!(sets[0].samples[100..], sets[0].samples[..7]);
        let mut seq = SequenceGen::new(false, UniformIntVariant::Lemire);
        let q = generate_queries(
            &settings,
            Pass::Accuracy,
            &sets[0],
            &mut seq,
            None,
            UniformIntVariant::Lemire,
        );
        // ceil(100 / 8) queries of 8 contiguous loaded samples.
        assert_eq!(q.query_count, 13);
        let starts: Vec<usize> = (0..q.query_count)
            .map(|i| {
                sets[0]
                    .samples
                    .iter()
                    .position(|&s| s == q.query(i)[0].index)
                    .unwrap()
            })
            .collect();
        assert!(starts.iter().all(|s| s % 8 == 0));
    }

    #[test]
    fn offline_accuracy_issues_each_loaded_sample_once() {
        let req = TestSettings {
            scenario: Scenario::Offline,
            ..TestSettings::default()
        };
        let settings = EffectiveSettings::new(&req, 300, 1000);
        let sets = loadable_sets(&settings, 1000, 1000, UniformIntVariant::Lemire);
        assert_eq!(
            sets.iter().map(|s| s.samples.len()).collect::<Vec<_>>(),
            [300, 300, 300, 100]
        );
        let mut seq = SequenceGen::new(true, UniformIntVariant::Lemire);
        for set in &sets {
            let q = generate_queries(
                &settings,
                Pass::Accuracy,
                set,
                &mut seq,
                None,
                UniformIntVariant::Lemire,
            );
            assert_eq!(q.query_count, 1);
            let issued: Vec<usize> = q.samples.iter().map(|s| s.index).collect();
            assert_eq!(issued, set.samples);
        }
        assert_eq!(seq.next_sample, 1000);
    }

    #[test]
    fn equal_issue_offline_pads_to_whole_permutations() {
        let req = TestSettings {
            scenario: Scenario::Offline,
            sample_concatenate_permutation: true,
            offline_expected_qps: 1000.0,
            min_duration_ms: 1000,
            min_query_count: 1,
            ..TestSettings::default()
        };
        let settings = EffectiveSettings::new(&req, 64, 64);
        let sets = loadable_sets(&settings, 64, 64, UniformIntVariant::Lemire);
        let mut seq = SequenceGen::new(false, UniformIntVariant::Lemire);
        let q = generate_queries(
            &settings,
            Pass::Performance,
            &sets[0],
            &mut seq,
            None,
            UniformIntVariant::Lemire,
        );
        assert_eq!(q.samples_per_query, 1152); // 1100 rounded up to 18 * 64
        for block in q.samples.chunks(64) {
            let mut idx: Vec<usize> = block.iter().map(|s| s.index).collect();
            idx.sort_unstable();
            let mut want = sets[0].samples.clone();
            want.sort_unstable();
            assert_eq!(idx, want);
        }
    }
}
