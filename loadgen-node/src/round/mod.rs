//! The MLPerf Inference rounds netdiv runs for. A submission is for one
//! round and uses that round's LoadGen, so `--round` chooses everything
//! that differs between rounds at once:
//!
//! * the official LoadGen release (`official/releases`: version and sdist
//!   sha256) that `--loadgen official` runs, and the release whose
//!   behaviour the Rust engine reproduces ([`LoadgenRelease`]);
//! * the mlperf.conf the Rust engine embeds (that release's settings and
//!   the round's seeds);
//! * the round's Datacenter suite: benchmarks, required and optional
//!   scenarios, compliance tests ([`SuiteEntry`]);
//! * the submission checker version (`--version` of the checker).

mod suites;

use std::fmt;
use std::str::FromStr;

use netdiv_proto::Benchmark;

use crate::engine::release::LoadgenRelease;

/// One round of MLPerf Inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Round {
    /// v5.0 (LoadGen 5.0.21).
    V5_0,
    /// v5.1 (LoadGen 5.1.2).
    V5_1,
    /// v6.0 (LoadGen 6.0.15).
    V6_0,
    /// v6.1 (LoadGen 6.0.17), the current round.
    V6_1,
}

/// One benchmark of a round's Datacenter suite, as the checker names it.
#[derive(Debug, PartialEq, Eq)]
pub struct SuiteEntry {
    /// The checker's model name (`3d-unet-99`, `llama3.1-8b`, `resnet`).
    pub model: &'static str,
    /// Scenarios a submission of it must have.
    pub required: &'static [&'static str],
    /// Scenarios it may also have.
    pub optional: &'static [&'static str],
    /// Compliance tests the checker expects (`TEST01`, `TEST04`, ...).
    pub compliance: &'static [&'static str],
}

impl SuiteEntry {
    /// The scenarios a complete submission of it has: the required ones,
    /// and Server where Interactive and Server are both optional (the
    /// checker wants one of the two).
    pub fn submission_scenarios(&self) -> Vec<&'static str> {
        let mut scenarios = self.required.to_vec();
        let optional_pair =
            self.optional.contains(&"Interactive") && self.optional.contains(&"Server");
        if optional_pair && !scenarios.contains(&"Server") && !scenarios.contains(&"Interactive") {
            scenarios.push("Server");
        }
        scenarios
    }

    /// Whether a submission may have `scenario`.
    pub fn allows(&self, scenario: &str) -> bool {
        self.required.contains(&scenario) || self.optional.contains(&scenario)
    }

    /// What the checker would find missing in a submission of `scenarios`:
    /// a required scenario, or one of Server or Interactive where both are
    /// optional and neither is required.
    pub fn missing(&self, scenarios: &[&str]) -> Vec<String> {
        let mut missing: Vec<String> = self
            .required
            .iter()
            .filter(|r| !scenarios.contains(r))
            .map(|r| r.to_string())
            .collect();
        let pair = self.optional.contains(&"Interactive") && self.optional.contains(&"Server");
        let has_one = ["Server", "Interactive"]
            .iter()
            .any(|s| scenarios.contains(s) || self.required.contains(s));
        if pair && !has_one {
            missing.push("one of Server or Interactive".into());
        }
        missing
    }

    /// The fewest samples an Offline query of it may hold: the checker's
    /// `OFFLINE_MIN_SPQ_SINCE_V4` (it enforces it for the Closed division
    /// only; the Network division inherits the Closed rules), else the
    /// general 24576.
    pub fn offline_min_samples_per_query(&self) -> u64 {
        OFFLINE_MIN_SAMPLES_PER_QUERY
            .iter()
            .find(|(m, _)| *m == self.model)
            .map_or(24_576, |(_, n)| *n)
    }
}

/// The submission checker's `OFFLINE_MIN_SPQ_SINCE_V4` (constants.py at
/// mlcommons/inference b66003e1): the samples an Offline query of each
/// model must hold at least.
const OFFLINE_MIN_SAMPLES_PER_QUERY: &[(&str, u64)] = &[
    ("resnet", 24576),
    ("retinanet", 24576),
    ("bert-99", 10833),
    ("bert-99.9", 10833),
    ("dlrm-v2-99", 24576),
    ("dlrm-v2-99.9", 24576),
    ("3d-unet-99", 43),
    ("3d-unet-99.9", 43),
    ("rnnt", 2513),
    ("llama3.1-8b", 13368),
    ("llama3.1-8b-edge", 5000),
    ("llama2-70b-99", 24576),
    ("llama2-70b-99.9", 24576),
    ("llama2-70b-interactive-99", 24576),
    ("llama2-70b-interactive-99.9", 24576),
    ("stable-diffusion-xl", 5000),
    ("mixtral-8x7b", 15000),
    ("llama3.1-405b", 8313),
    ("rgat", 788379),
    ("deepseek-r1", 4388),
    ("gpt-oss-120b", 6396),
    ("whisper", 1633),
    ("pointpainting", 6636),
    ("yolo-99", 1525),
    ("yolo-95", 1525),
    ("dlrm-v3", 349823),
    ("qwen3-vl-235b-a22b", 48289),
    ("wan-2.2-t2v-a14b", 50),
    ("e2e-rag-qna", 824),
    ("e2e-rag-db", 2515),
];

/// A round name that is not one of netdiv's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown round {0:?} (netdiv knows {names}; the current round is {current})", names = Round::names(), current = Round::CURRENT)]
pub struct UnknownRound(pub String);

/// A benchmark or scenario a round's Datacenter suite does not have.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotInSuite {
    /// The benchmark is not in the suite.
    #[error(
        "{benchmark} is not in the Datacenter suite of round {round} (its benchmarks: {list})"
    )]
    Benchmark {
        /// The benchmark as named.
        benchmark: String,
        /// The round.
        round: Round,
        /// The suite's benchmarks.
        list: String,
    },
    /// The benchmark is, the scenario is not.
    #[error("round {round} has no {scenario} scenario for {model} in the Datacenter suite (it has: {list})")]
    Scenario {
        /// The checker's model name.
        model: &'static str,
        /// The scenario as asked.
        scenario: String,
        /// The round.
        round: Round,
        /// The scenarios it has.
        list: String,
    },
}

impl Round {
    /// Every round, oldest first.
    pub const ALL: [Round; 4] = [Round::V5_0, Round::V5_1, Round::V6_0, Round::V6_1];
    /// The round netdiv runs for by default.
    pub const CURRENT: Round = Round::V6_1;

    /// `v6.1`: how the rules, the checker and `--round` name it.
    pub fn name(self) -> &'static str {
        self.release().round
    }

    fn names() -> String {
        Round::ALL.map(Round::name).join(", ")
    }

    /// The official LoadGen release pinned for this round.
    pub fn release(self) -> LoadgenRelease {
        match self {
            Round::V5_0 => LoadgenRelease::V5_0_21,
            Round::V5_1 => LoadgenRelease::V5_1_2,
            Round::V6_0 => LoadgenRelease::V6_0_15,
            Round::V6_1 => LoadgenRelease::V6_0_17,
        }
    }

    /// sha256 of the PyPI sdist of that release (also in
    /// `official/releases`, which the build and the scripts read).
    pub fn sdist_sha256(self) -> &'static str {
        match self {
            Round::V5_0 => "216bd94c377f6cdbb449b2521fc7b93eed8aceadbee9f22e696ada46561c4458",
            Round::V5_1 => "cd686a6223c978d1056e38a417e4807bfa21c855189f7882d24c8313174bca74",
            Round::V6_0 => "5b5c5c0545526a767c35a5f295a7680e9380b5a08bcea058422c61bc9f608fb5",
            Round::V6_1 => "a2e85d09e3cc0c606f89bfe1fbf97537c8b5b238ae0afbd923ad9c710fcf2ca8",
        }
    }

    /// The settings of that release's mlperf.conf (the round's seeds).
    pub fn mlperf_conf(self) -> &'static str {
        match self {
            Round::V5_0 => include_str!("../engine/settings/mlperf-conf/v5.0.conf"),
            Round::V5_1 => include_str!("../engine/settings/mlperf-conf/v5.1.conf"),
            Round::V6_0 => include_str!("../engine/settings/mlperf-conf/v6.0.conf"),
            Round::V6_1 => crate::engine::settings::EMBEDDED_MLPERF_CONF,
        }
    }

    /// The submission checker's `--version` for this round.
    pub fn checker_version(self) -> &'static str {
        self.name()
    }

    /// The round's Datacenter suite.
    pub fn datacenter_suite(self) -> &'static [SuiteEntry] {
        match self {
            Round::V5_0 => suites::V5_0,
            Round::V5_1 => suites::V5_1,
            Round::V6_0 => suites::V6_0,
            Round::V6_1 => suites::V6_1,
        }
    }

    /// Whether the interactive variant of an LLM is a model of its own
    /// (v5.0: `llama2-70b-interactive-99`, run as Server) rather than an
    /// `Interactive` scenario of the model (from v5.1).
    pub fn interactive_is_a_model(self) -> bool {
        self == Round::V5_0
    }

    /// The checker's model name of `benchmark` in this round: its checker
    /// spelling and accuracy target; with `-interactive` in v5.0.
    pub fn checker_model(self, benchmark: &Benchmark) -> String {
        let spec = benchmark.spec();
        let mut name = spec.checker_name.unwrap_or(spec.name).to_string();
        if benchmark.is_interactive() && self.interactive_is_a_model() {
            name.push_str("-interactive");
        }
        if let Some(target) = benchmark.accuracy_target() {
            name.push('-');
            name.push_str(target);
        }
        name
    }

    /// The suite's entry for `benchmark`, or an error naming the suite. A
    /// name without its accuracy target matches either target.
    pub fn suite_entry(self, benchmark: &Benchmark) -> Result<&'static SuiteEntry, NotInSuite> {
        let model = self.checker_model(benchmark);
        let suite = self.datacenter_suite();
        let exact = suite.iter().find(|e| e.model == model);
        let any_target = || {
            benchmark.accuracy_target().is_none().then(|| {
                suite.iter().find(|e| {
                    e.model
                        .strip_prefix(model.as_str())
                        .and_then(|rest| rest.strip_prefix('-'))
                        .is_some_and(|t| benchmark.spec().accuracy_targets.contains(&t))
                })
            })?
        };
        exact
            .or_else(any_target)
            .ok_or_else(|| NotInSuite::Benchmark {
                benchmark: benchmark.to_string(),
                round: self,
                list: suite.iter().map(|e| e.model).collect::<Vec<_>>().join(", "),
            })
    }

    /// Checks that `benchmark` in `scenario` (`Offline`, `Server`,
    /// `Interactive`, ...) is part of the round's Datacenter suite.
    pub fn check_in_suite(
        self,
        benchmark: &Benchmark,
        scenario: &str,
    ) -> Result<&'static SuiteEntry, NotInSuite> {
        let entry = self.suite_entry(benchmark)?;
        if entry.allows(scenario) {
            Ok(entry)
        } else {
            Err(NotInSuite::Scenario {
                model: entry.model,
                scenario: scenario.into(),
                round: self,
                list: entry
                    .required
                    .iter()
                    .chain(entry.optional)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }
}

impl fmt::Display for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Round {
    type Err = UnknownRound;
    /// `v6.1` or `6.1`.
    fn from_str(s: &str) -> Result<Round, UnknownRound> {
        let wanted = s.strip_prefix('v').unwrap_or(s);
        Round::ALL
            .into_iter()
            .find(|r| &r.name()[1..] == wanted)
            .ok_or_else(|| UnknownRound(s.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::settings::ConfigFile;

    fn bench(name: &str) -> Benchmark {
        Benchmark::parse(name).unwrap()
    }

    #[test]
    fn rounds_parse_with_or_without_the_v_and_unknown_ones_name_the_known() {
        assert_eq!("v6.1".parse::<Round>().unwrap(), Round::V6_1);
        assert_eq!("5.1".parse::<Round>().unwrap(), Round::V5_1);
        let err = "v4.1".parse::<Round>().unwrap_err().to_string();
        assert!(err.contains("v5.0, v5.1, v6.0, v6.1"), "{err}");
        assert!(err.contains("current round is v6.1"), "{err}");
    }

    /// The table here and `official/releases` (read by the build and the
    /// scripts) say the same.
    #[test]
    fn releases_file_matches_the_rounds() {
        let file = include_str!("../../official/releases");
        let rows: Vec<Vec<&str>> = file
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), Round::ALL.len());
        for (row, round) in rows.iter().zip(Round::ALL) {
            assert_eq!(
                row[..3],
                [round.name(), round.release().version, round.sdist_sha256()]
            );
            // The mlcommons/inference commit check-sources.sh compares with.
            assert!(row[3].len() == 40 && row[3].chars().all(|c| c.is_ascii_hexdigit()));
        }
        assert_eq!(rows.last().unwrap()[0], Round::CURRENT.name());
    }

    /// Each embedded mlperf.conf parses and carries the seeds the checker
    /// expects for its round (the checker's `seeds` table).
    #[test]
    fn each_rounds_mlperf_conf_has_its_seeds() {
        let seeds = [
            (Round::V5_0, 6023615788873153749u64),
            (Round::V5_1, 1780908523862526354),
            (Round::V6_0, 2465351861681999779),
            (Round::V6_1, 2085463073848966840),
        ];
        for (round, seed) in seeds {
            ConfigFile::parse(round.mlperf_conf(), round.name())
                .unwrap_or_else(|e| panic!("{round}: {e}"));
            let line = format!("*.*.qsl_rng_seed = {seed}");
            assert!(round.mlperf_conf().contains(&line), "{round}: no {line}");
        }
    }

    #[test]
    fn suites_follow_the_rounds() {
        // ResNet-50 left the Datacenter suite after v5.0.
        assert_eq!(
            Round::V5_0.suite_entry(&bench("resnet50")).unwrap().model,
            "resnet"
        );
        let err = Round::V6_1
            .suite_entry(&bench("resnet50"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("resnet50 is not in the Datacenter suite of round v6.1"),
            "{err}"
        );
        assert!(err.contains("3d-unet-99, 3d-unet-99.9"), "{err}");
        // A name without its target matches either target.
        assert_eq!(
            Round::V6_1.suite_entry(&bench("3d-unet")).unwrap().model,
            "3d-unet-99"
        );
        assert_eq!(
            Round::V6_1
                .suite_entry(&bench("3d-unet-99.9"))
                .unwrap()
                .compliance,
            &["TEST01"]
        );
        // llama2-70b-99 left in v6.1; 99.9 stayed.
        assert!(Round::V6_1.suite_entry(&bench("llama2-70b-99")).is_err());
        assert!(Round::V6_1.suite_entry(&bench("llama2-70b-99.9")).is_ok());
        // The checker's spellings.
        assert_eq!(
            Round::V6_1.checker_model(&bench("llama3_1-8b")),
            "llama3.1-8b"
        );
        assert_eq!(
            Round::V5_0.checker_model(&bench("llama2-70b-interactive-99")),
            "llama2-70b-interactive-99"
        );
        assert_eq!(
            Round::V6_1.checker_model(&bench("llama2-70b-interactive-99.9")),
            "llama2-70b-99.9"
        );
    }

    #[test]
    fn a_submission_has_one_of_interactive_or_server_where_both_are_optional() {
        let llama = Round::V6_0.suite_entry(&bench("llama2-70b-99")).unwrap();
        assert_eq!(llama.submission_scenarios(), ["Offline", "Server"]);
        let unet = Round::V6_1.suite_entry(&bench("3d-unet-99")).unwrap();
        assert_eq!(unet.submission_scenarios(), ["Offline"]);
        let resnet = Round::V5_0.suite_entry(&bench("resnet50")).unwrap();
        assert_eq!(resnet.submission_scenarios(), ["Server", "Offline"]);
    }

    #[test]
    fn a_scenario_set_the_checker_would_reject_is_named() {
        let llama8b = Round::V6_1.suite_entry(&bench("llama3.1-8b")).unwrap();
        assert_eq!(
            llama8b.missing(&["Offline"]),
            ["one of Server or Interactive"]
        );
        assert!(llama8b.missing(&["Offline", "Interactive"]).is_empty());
        let resnet = Round::V5_0.suite_entry(&bench("resnet50")).unwrap();
        assert_eq!(resnet.missing(&["Offline"]), ["Server"]);
        assert!(resnet.missing(&["Server", "Offline"]).is_empty());
        let unet = Round::V6_1.suite_entry(&bench("3d-unet-99")).unwrap();
        assert_eq!(unet.offline_min_samples_per_query(), 43);
        assert_eq!(llama8b.offline_min_samples_per_query(), 13368);
    }

    #[test]
    fn scenarios_follow_the_suite() {
        let unet = bench("3d-unet-99");
        assert!(Round::V6_1.check_in_suite(&unet, "Offline").is_ok());
        let err = Round::V6_1
            .check_in_suite(&unet, "Server")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no Server scenario for 3d-unet-99"), "{err}");
        let llama = bench("llama2-70b-99.9");
        assert!(Round::V6_1.check_in_suite(&llama, "Interactive").is_ok());
        assert!(Round::V5_0.check_in_suite(&llama, "Interactive").is_err());
    }

    #[test]
    fn every_suite_benchmark_is_in_the_benchmark_table() {
        for round in Round::ALL {
            for entry in round.datacenter_suite() {
                let b = Benchmark::parse(entry.model)
                    .unwrap_or_else(|e| panic!("{round}: {}: {e}", entry.model));
                assert_eq!(round.checker_model(&b), entry.model, "{round}");
            }
        }
    }
}
