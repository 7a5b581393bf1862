//! A short Offline trial before the first run: how fast the nodes answer a
//! burst of the run's own samples through the QDL. An Offline query holds
//! `target_qps x min_duration x 1.1` samples; nodes much faster than the
//! target finish it before the minimum duration and the run is INVALID,
//! which the trial can say in seconds instead of after the run.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use loadgen_node::engine::settings::{EffectiveSettings, Scenario};
use qdl::{CompletionSink, LoadedView, NetworkSut, Response};

use crate::cli::run::plan::{RunPlan, Target};

/// Samples the trial sends at most, and at least.
const MOST_SAMPLES: usize = 8192;
const LEAST_SAMPLES: usize = 32;
/// The trial holds at most about this many bytes of samples in memory,
/// and sends at most about this many.
const LOADED_BYTES: usize = 256 << 20;
const SENT_BYTES: usize = 1 << 30;
/// The trial aims at about this long at the target rate.
const AIM: Duration = Duration::from_secs(2);
/// And waits no longer than this for its answers.
const LIMIT: Duration = Duration::from_secs(10);

/// What a trial measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Trial {
    /// Samples answered.
    pub(crate) answered: usize,
    /// From the first sample sent to the last answer (or the limit).
    pub(crate) seconds: f64,
}

impl Trial {
    /// Samples per second.
    pub(crate) fn rate(&self) -> f64 {
        self.answered as f64 / self.seconds.max(1e-9)
    }
}

/// Counts answers and wakes the waiter when all are in or a node fails.
#[derive(Default)]
struct Counter {
    state: Mutex<(usize, Option<String>)>,
    changed: Condvar,
}

impl CompletionSink for Counter {
    fn first_token(&self, _: &[Response<'_>]) {}

    fn complete(&self, responses: &[Response<'_>]) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0 += responses.len();
        self.changed.notify_all();
    }

    fn fail(&self, reason: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.1 = Some(reason.to_string());
        self.changed.notify_all();
    }
}

/// Sends `samples` of the performance set as one query and times the
/// answers, waiting at most [`LIMIT`].
fn run(plan: &RunPlan, samples: usize) -> Result<Trial> {
    let Target::Network { nodes } = &plan.target else {
        anyhow::bail!("the trial needs sut-nodes");
    };
    let qsl = plan.qsl()?;
    let (_, performance) = plan.counts(qsl.store.source().count())?;
    // Load what fits the memory budget (a 3D-UNet volume is 132 MB on
    // average), and send no more than the wire budget.
    let mut loaded = Vec::new();
    let mut loaded_bytes = 0usize;
    for index in 0..performance.min(samples) {
        qsl.store
            .load(&[index])
            .with_context(|| format!("loading sample {index} for the trial"))?;
        loaded.push(index);
        loaded_bytes += qsl.store.loaded().get(index).map_or(0, |s| s.data.len());
        if loaded_bytes >= LOADED_BYTES {
            break;
        }
    }
    let average = (loaded_bytes / loaded.len().max(1)).max(1);
    let samples = samples.min((SENT_BYTES / average).max(loaded.len()));
    let config = plan.qdl.config(nodes.clone(), &plan.benchmark)?;
    let sut = NetworkSut::connect(config, qsl.store.clone())?;
    let counter = Arc::new(Counter::default());
    let sink: Arc<dyn CompletionSink> = counter.clone();
    let query: Vec<(u64, usize)> = (0..samples)
        .map(|i| (i as u64, loaded[i % loaded.len()]))
        .collect();
    let start = Instant::now();
    sut.issue(&query, &sink);
    let mut state = counter.state.lock().unwrap_or_else(|e| e.into_inner());
    while state.0 < samples && state.1.is_none() && start.elapsed() < LIMIT {
        let left = LIMIT.saturating_sub(start.elapsed());
        state = counter
            .changed
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    if let Some(reason) = &state.1 {
        anyhow::bail!("the trial failed: {reason}");
    }
    Ok(Trial {
        answered: state.0,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The warning for an Offline run whose query the nodes would finish
/// before its minimum duration, with the numbers; `None` when it lasts
/// long enough.
pub(crate) fn offline_too_short(settings: &EffectiveSettings, trial: &Trial) -> Option<String> {
    let rate = trial.rate();
    let min_s = settings.min_duration_ms as f64 / 1000.0;
    let query_s = settings.samples_per_query as f64 / rate;
    if trial.answered == 0 || query_s >= min_s {
        return None;
    }
    Some(format!(
        "Offline: in a trial the nodes answered {} samples in {:.2} s ({rate:.1} samples/s); \
         the Offline query of {} samples (target_qps {}) would last about {query_s:.1} s, under \
         the {min_s:.1} s minimum duration, and the run would be INVALID: set \
         *.Offline.target_qps to at least {:.0} in user.conf",
        trial.answered,
        trial.seconds,
        settings.samples_per_query,
        settings.requested.offline_expected_qps,
        (rate * 1.1).ceil()
    ))
}

/// Runs the trial for the Offline scenario as the plan sets it up and
/// says whether its query would end too soon. A trial that cannot run is
/// a warning too, not a refusal: the runs will say more.
pub(crate) fn offline_warning(plan: &RunPlan) -> Option<String> {
    let settings = match offline_settings(plan) {
        Ok(settings) => settings,
        Err(e) => return Some(format!("Offline: no trial before the runs: {e:#}")),
    };
    let target = settings.requested.offline_expected_qps;
    let samples = ((target * AIM.as_secs_f64() * 1.1).ceil() as usize)
        .clamp(LEAST_SAMPLES, MOST_SAMPLES)
        .min(settings.samples_per_query.max(1) as usize);
    match run(plan, samples) {
        Ok(trial) => offline_too_short(&settings, &trial),
        Err(e) => Some(format!("Offline: the trial before the runs failed: {e:#}")),
    }
}

/// The Offline performance run's settings, as the LoadGen derives them.
fn offline_settings(plan: &RunPlan) -> Result<EffectiveSettings> {
    let settings = plan.settings(Scenario::Offline, None)?;
    let qsl = plan.qsl()?;
    let (total, performance) = plan.counts(qsl.store.source().count())?;
    Ok(EffectiveSettings::new(
        &settings,
        performance as u64,
        total as u64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_node::engine::settings::TestSettings;

    fn offline(target: f64, min_ms: u64) -> EffectiveSettings {
        let settings = TestSettings {
            scenario: Scenario::Offline,
            offline_expected_qps: target,
            min_duration_ms: min_ms,
            ..TestSettings::default()
        };
        EffectiveSettings::new(&settings, 1024, 1024)
    }

    #[test]
    fn a_query_the_nodes_finish_before_the_minimum_duration_is_named_with_its_numbers() {
        // 100/s for 600 s: 66000 samples; at 1000/s they take 66 s.
        let s = offline(100.0, 600_000);
        let fast = Trial {
            answered: 2000,
            seconds: 2.0,
        };
        let said = offline_too_short(&s, &fast).unwrap();
        assert!(
            said.contains("1000.0 samples/s")
                && said.contains("query of 66000 samples")
                && said.contains("about 66.0 s, under the 600.0 s minimum")
                && said.contains("target_qps to at least 1100"),
            "{said}"
        );
        // At 100/s the query lasts 660 s: no warning.
        let even = Trial {
            answered: 200,
            seconds: 2.0,
        };
        assert_eq!(offline_too_short(&s, &even), None);
        // Nothing answered within the limit: nothing to say.
        let none = Trial {
            answered: 0,
            seconds: 10.0,
        };
        assert_eq!(offline_too_short(&s, &none), None);
    }
}
