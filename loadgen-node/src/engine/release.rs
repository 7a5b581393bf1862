//! The official LoadGen releases the engine reproduces, and what a test
//! does differently under each. netdiv runs a round with that round's
//! LoadGen (see `crate::round`); the releases it pins differ in only a few
//! places, all listed here so the passes and logs ask one value.

/// One official LoadGen release's observable behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadgenRelease {
    /// The MLPerf round it is pinned for (`v6.1`).
    pub round: &'static str,
    /// The release's version (`6.0.17`).
    pub version: &'static str,
    /// Before 6.0 the performance pass shuffled every QSL index and loaded
    /// the first `performance_sample_count` of them; from 6.0 it shuffles
    /// only the first `performance_sample_count` indices. Different seeds
    /// give different loaded sets, so this changes the samples a run uses.
    pub performance_sets_from_whole_qsl: bool,
    /// From 6.0: the `accuracy_sample_count_override` key, its two detail
    /// log keys and the summary's `accuracy_sample_count` line. Before,
    /// accuracy runs covered the whole QSL and the key was not read.
    pub accuracy_sample_count_override: bool,
    /// 5.0 labelled the min, max and mean of the time per output token
    /// "Time to Output Token" in the summary.
    pub tpot_summary_says_to: bool,
}

impl LoadgenRelease {
    /// LoadGen 5.0.21 (round v5.0).
    pub const V5_0_21: LoadgenRelease = LoadgenRelease {
        round: "v5.0",
        version: "5.0.21",
        performance_sets_from_whole_qsl: true,
        accuracy_sample_count_override: false,
        tpot_summary_says_to: true,
    };
    /// LoadGen 5.1.2 (round v5.1).
    pub const V5_1_2: LoadgenRelease = LoadgenRelease {
        round: "v5.1",
        version: "5.1.2",
        tpot_summary_says_to: false,
        ..LoadgenRelease::V5_0_21
    };
    /// LoadGen 6.0.15 (round v6.0).
    pub const V6_0_15: LoadgenRelease = LoadgenRelease {
        round: "v6.0",
        version: "6.0.15",
        performance_sets_from_whole_qsl: false,
        accuracy_sample_count_override: true,
        tpot_summary_says_to: false,
    };
    /// LoadGen 6.0.17 (round v6.1).
    pub const V6_0_17: LoadgenRelease = LoadgenRelease {
        round: "v6.1",
        version: "6.0.17",
        ..LoadgenRelease::V6_0_15
    };
    /// The release of the current round.
    pub const CURRENT: LoadgenRelease = LoadgenRelease::V6_0_17;
}

impl Default for LoadgenRelease {
    fn default() -> Self {
        LoadgenRelease::CURRENT
    }
}
