//! The LoadGen engine: the Rust counterpart of the official MLPerf LoadGen.
//!
//! In the order a test uses them:
//!
//! * [`release`]: what differs between the official releases it
//!   reproduces (one per round);
//! * [`settings`]: mlperf.conf, user.conf and audit.config, and the
//!   effective settings derived from them;
//! * [`rng`]: the official LoadGen's random numbers, bit for bit;
//! * [`generate`]: loadable sample sets and the queries of a pass, with
//!   their schedule;
//! * [`issue`]: the issuing thread that hands queries to the SUT on time;
//! * [`completion`]: recording completions, lock-free, exactly once;
//! * [`results`] and [`early_stopping`]: latencies, percentiles, the
//!   verdict;
//! * [`logs`]: the four MLPerf log files;
//! * [`start_test`](mod@start_test): the whole test (the official `StartTest`) that runs
//!   them.

mod completion;
mod early_stopping;
mod generate;
mod issue;
pub mod logs;
pub(crate) mod release;
mod results;
pub mod rng;
pub mod settings;
pub mod start_test;

pub use start_test::{start_test, EngineOptions, TestError, TestOutcome};
