//! A run's verdict, read from its own logs (the summary and detail logs
//! either LoadGen writes): VALID or INVALID, its headline metric, the
//! constraints it did not meet, the LoadGen's recommendations, and for an
//! Offline run too short for its minimum duration the target to set,
//! computed from the rate it measured.

use std::path::Path;

use anyhow::Result;
use loadgen_node::mlperf_logs::{Detail, Summary};

/// What a run's logs say of it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Verdict {
    /// `Result is : VALID`.
    pub(crate) valid: bool,
    /// The headline metric line (`Samples per second: 1914.72`).
    pub(crate) metric: String,
    /// The constraints it did not meet (`Min duration satisfied : NO`).
    pub(crate) unmet: Vec<String>,
    /// What to change: the LoadGen's recommendations, and the target
    /// computed from the measured rate where that applies.
    pub(crate) recommendations: Vec<String>,
}

impl Verdict {
    /// The verdict of the run whose logs are in `run` (its detail log is
    /// read too where there is one, for the Offline target).
    pub(crate) fn read(run: &Path) -> Result<Verdict> {
        let summary = Summary::read(run)?;
        let detail = Detail::read(run).ok();
        Ok(Self::of(&summary, detail.as_ref()))
    }

    /// The verdict a summary and a detail log give.
    pub(crate) fn of(summary: &Summary, detail: Option<&Detail>) -> Verdict {
        let metric = summary
            .headline
            .as_ref()
            .map(|(label, value)| format!("{label}: {value}"))
            .unwrap_or_default();
        let unmet = summary
            .checks
            .iter()
            .filter(|(_, satisfied)| !satisfied)
            .map(|(what, _)| format!("{what} : NO"))
            .collect();
        // The LoadGen's recommendations, then its early-stopping advice.
        let mut recommendations = summary.recommendations.clone();
        recommendations.extend(summary.early_stopping.iter().map(|(_, text)| text.clone()));
        let valid = summary.valid();
        if !valid {
            recommendations.extend(detail.and_then(offline_target));
        }
        Verdict {
            valid,
            metric,
            unmet,
            recommendations,
        }
    }

    /// One line: `VALID (metric)` or `INVALID (metric): why`.
    pub(crate) fn line(&self) -> String {
        let word = if self.valid { "VALID" } else { "INVALID" };
        if self.valid {
            format!("{word} ({})", self.metric)
        } else {
            format!("{word} ({}): {}", self.metric, self.why())
        }
    }

    /// The unmet constraints and what to change.
    pub(crate) fn why(&self) -> String {
        let mut parts = self.unmet.clone();
        if parts.is_empty() {
            parts.push("the summary gives no unmet constraint".into());
        }
        let mut text = parts.join("; ");
        if !self.recommendations.is_empty() {
            text.push_str(". Recommended: ");
            text.push_str(&self.recommendations.join(" "));
        }
        text
    }
}

/// For an Offline run shorter than its minimum duration: the target that
/// makes the query last it at the measured rate (the LoadGen's Offline
/// query holds target_qps x min_duration x 1.1 samples; a tenth more for
/// margin).
fn offline_target(detail: &Detail) -> Option<String> {
    let number = |k: &str| detail.number(k);
    if detail.value("effective_scenario")?.as_str()? != "Offline"
        || detail.value("result_min_duration_met")?.as_bool()?
    {
        return None;
    }
    let rate = number("result_samples_per_second")?;
    let target = number("effective_target_qps")?;
    let min_ms = number("effective_min_duration_ms")?;
    let wanted = (rate * 1.1).ceil();
    Some(format!(
        "set *.Offline.target_qps to at least {wanted} in user.conf: the nodes did {rate:.1} \
         samples/s, so a target of {target} made a query of {:.1} s, under the {:.1} s minimum.",
        target * min_ms / 1000.0 * 1.1 / rate,
        min_ms / 1000.0
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The verdict of a summary's and a detail log's text.
    fn verdict(summary: &str, detail: &str) -> Verdict {
        let summary = Summary::parse(summary, Path::new("s.txt")).unwrap();
        let detail = Detail::parse(detail, Path::new("d.txt")).ok();
        Verdict::of(&summary, detail.as_ref())
    }

    const INVALID_OFFLINE: &str = "================================================\n\
MLPerf Results Summary\n================================================\n\
SUT name : Network SUT [a, b]\nScenario : Offline\nMode     : PerformanceOnly\n\
Samples per second: 1914.72\nResult is : INVALID\n  Min duration satisfied : NO\n\
  Min queries satisfied : Yes\n  Early stopping satisfied: Yes\nRecommendations:\n\
 * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.\n\n\
================================================\nAdditional Stats\n";

    fn detail(entries: &[(&str, Value)]) -> String {
        entries
            .iter()
            .map(|(k, v)| format!(":::MLLOG {}\n", serde_json::json!({"key": k, "value": v})))
            .collect()
    }

    #[test]
    fn an_invalid_offline_run_says_why_and_the_target_to_set() {
        let d = detail(&[
            ("effective_scenario", "Offline".into()),
            ("result_min_duration_met", false.into()),
            ("result_samples_per_second", 1914.72.into()),
            ("effective_target_qps", 100.into()),
            ("effective_min_duration_ms", 1000.into()),
        ]);
        let v = verdict(INVALID_OFFLINE, &d);
        assert!(!v.valid);
        assert_eq!(v.metric, "Samples per second: 1914.72");
        assert_eq!(v.unmet, ["Min duration satisfied : NO"]);
        let line = v.line();
        assert!(line.starts_with("INVALID (Samples per second: 1914.72): Min duration satisfied : NO. Recommended: Increase expected QPS"), "{line}");
        assert!(
            line.contains("set *.Offline.target_qps to at least 2107 in user.conf"),
            "{line}"
        );
    }

    #[test]
    fn early_stopping_s_explanation_is_kept_whole() {
        let summary = "================================================\nMLPerf Results Summary\n================================================\nSUT name : x\nScenario : Server\nMode     : PerformanceOnly\nCompleted samples per second    : 590.12\nResult is : INVALID\n  Performance constraints satisfied : Yes\n  Min duration satisfied : Yes\n  Min queries satisfied : Yes\n  Early stopping satisfied: NO\nRecommendations:\nEarly Stopping Result:\n * Run unsuccessful.\n * Processed 2500 queries.\n * Would need to run at least 515 more queries,\n with the run being successful if every additional\n query were under latency.\n\n================================================\nAdditional Stats\n";
        assert_eq!(
            verdict(summary, "").line(),
            "INVALID (Completed samples per second: 590.12): Early stopping satisfied : NO. \
             Recommended: Run unsuccessful. Processed 2500 queries. Would need to run at least \
             515 more queries, with the run being successful if every additional query were \
             under latency."
        );
    }

    #[test]
    fn a_valid_run_is_one_line() {
        let valid = INVALID_OFFLINE
            .replace("Result is : INVALID", "Result is : VALID")
            .replace(
                "Min duration satisfied : NO",
                "Min duration satisfied : Yes",
            );
        let v = verdict(&valid, "");
        assert!(v.valid && v.unmet.is_empty());
        assert_eq!(v.line(), "VALID (Samples per second: 1914.72)");
    }
}
