//! Command-line arguments of `loadgen-node`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use loadgen_node::rng::UniformIntVariant;
use loadgen_node::settings::{Scenario, TestMode};

/// The netdiv LoadGen node: runs MLPerf Inference benchmarks.
#[derive(Debug, Parser)]
#[command(name = "loadgen-node", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one test and write the four MLPerf log files.
    Run(RunArgs),
}

/// Which system under test to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SutKind {
    /// In-process SUT that answers at once (measures the LoadGen itself).
    Null,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The system under test.
    #[arg(long, value_enum, default_value = "null")]
    pub sut: SutKind,
    /// SingleStream, MultiStream, Server or Offline.
    #[arg(long, value_parser = parse_scenario)]
    pub scenario: Scenario,
    /// PerformanceOnly, AccuracyOnly, SubmissionRun or FindPeakPerformance
    /// [default: the config's `mode` key, else PerformanceOnly].
    #[arg(long, value_parser = parse_mode)]
    pub mode: Option<TestMode>,
    /// Model name used to look up `model.scenario.key` config lines.
    #[arg(long, default_value = "null")]
    pub model: String,
    /// Replaces the embedded mlperf.conf (the only file seeds are read from).
    #[arg(long, value_name = "FILE")]
    pub mlperf_conf: Option<PathBuf>,
    /// Per-system settings applied after mlperf.conf.
    #[arg(long, value_name = "FILE")]
    pub user_conf: Option<PathBuf>,
    /// Compliance-test overrides [default: ./audit.config if it exists].
    #[arg(long, value_name = "FILE")]
    pub audit_conf: Option<PathBuf>,
    /// Samples in the QSL.
    #[arg(long, value_name = "N")]
    pub total_sample_count: usize,
    /// Samples that fit in memory at once.
    #[arg(long, value_name = "N")]
    pub performance_sample_count: usize,
    /// Directory for the mlperf_log_* files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Also write every issued QSL index, in issue order, one per line.
    #[arg(long, value_name = "FILE")]
    pub record_issued: Option<PathBuf>,
    /// Leave mlperf_log_trace.json empty.
    #[arg(long)]
    pub no_trace: bool,
    /// Name the null SUT reports.
    #[arg(long, default_value = "null-sut")]
    pub sut_name: String,
    /// libstdc++ uniform_int algorithm to reproduce: lemire (GCC >= 11) or
    /// division (older toolchains).
    #[arg(long, default_value = "lemire")]
    pub uniform_int: UniformIntVariant,
}

fn parse_scenario(s: &str) -> Result<Scenario, String> {
    s.parse()
}

fn parse_mode(s: &str) -> Result<TestMode, String> {
    s.parse()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bad_flags_are_named() {
        let err = Cli::try_parse_from(["loadgen-node", "run", "--scenario", "Sever"]).unwrap_err();
        assert!(
            err.to_string().contains("unknown scenario \"Sever\""),
            "{err}"
        );
    }
}
