//! Test settings: what a user asks for ([`TestSettings`], filled from the
//! official config-file grammar) and what the engine actually runs
//! ([`EffectiveSettings`], derived exactly as the official LoadGen does).

mod config;
mod effective;
mod requested;

pub use config::{apply_config, ConfKind, ConfigError, ConfigFile, EMBEDDED_MLPERF_CONF};
pub use effective::EffectiveSettings;
pub use requested::TestSettings;

use std::fmt;
use std::str::FromStr;

/// The four MLPerf inference scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// One sample per query, each issued when the previous one completes.
    SingleStream,
    /// Several samples per query, each query issued when the previous one
    /// completes.
    MultiStream,
    /// One sample per query, issued at Poisson-distributed arrival times.
    Server,
    /// Every sample in one large query, issued at once.
    Offline,
}

impl Scenario {
    /// Every scenario, in the official order.
    pub const ALL: [Scenario; 4] = [
        Scenario::SingleStream,
        Scenario::MultiStream,
        Scenario::Server,
        Scenario::Offline,
    ];

    /// The name used in config keys and logs.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::SingleStream => "SingleStream",
            Scenario::MultiStream => "MultiStream",
            Scenario::Server => "Server",
            Scenario::Offline => "Offline",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Scenario::ALL
            .into_iter()
            .find(|sc| sc.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown scenario {s:?} (expected SingleStream, MultiStream, Server or Offline)")
            })
    }
}

/// What a test run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TestMode {
    /// Accuracy then performance.
    SubmissionRun,
    /// Every sample once, responses logged.
    AccuracyOnly,
    /// A timed run judged VALID or INVALID.
    PerformanceOnly,
    /// Server only: search for the highest QPS that meets the constraints.
    FindPeakPerformance,
}

impl TestMode {
    /// Every mode, in the order of their config codes (0 to 3).
    pub const ALL: [TestMode; 4] = [
        TestMode::SubmissionRun,
        TestMode::AccuracyOnly,
        TestMode::PerformanceOnly,
        TestMode::FindPeakPerformance,
    ];

    /// The official name, used in logs and accepted by `FromStr`.
    pub fn name(self) -> &'static str {
        match self {
            TestMode::SubmissionRun => "SubmissionRun",
            TestMode::AccuracyOnly => "AccuracyOnly",
            TestMode::PerformanceOnly => "PerformanceOnly",
            TestMode::FindPeakPerformance => "FindPeakPerformance",
        }
    }

    /// The numeric code of the config key `mode`.
    pub fn from_config_code(code: u64) -> Option<TestMode> {
        TestMode::ALL.get(code as usize).copied()
    }
}

impl fmt::Display for TestMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TestMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TestMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown mode {s:?} (expected PerformanceOnly, AccuracyOnly, SubmissionRun or FindPeakPerformance)")
            })
    }
}
