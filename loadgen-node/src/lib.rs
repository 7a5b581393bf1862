//! # loadgen-node
//!
//! The LoadGen node of netdiv: a Rust engine that behaves like the official
//! MLPerf LoadGen (same samples, schedule, verdict and log files for the
//! same settings and seeds), and the pieces a `loadgen-node` CLI wires
//! together.
//!
//! It owns the settings and config files ([`settings`]), bit-exact random
//! numbers ([`rng`]), query generation ([`generate`]), issuing
//! ([`issue`]), completion recording ([`completion`]), results and early
//! stopping ([`results`], [`early_stopping`]) and the four log files
//! ([`logs`]). It knows nothing of networks: a SUT is anything that
//! implements [`sut::SystemUnderTest`]: in-process ([`null_sut`], or the
//! sut-node's backend in this process, [`local_sut`]) or the QDL of the
//! `qdl` crate over the network ([`network_sut`]), with a live
//! [`progress`] line on long runs. With the `official` feature, `official`
//! runs the same QDL and sample store under the official C++ LoadGen;
//! [`sysdesc`] writes the Network-division system-description fields, and
//! [`score`] scores a classifier's accuracy log against its labels.

pub mod completion;
pub mod early_stopping;
pub mod generate;
pub mod issue;
pub mod local_sut;
pub mod logs;
pub mod network_sut;
pub mod null_sut;
#[cfg(feature = "official")]
pub mod official;
pub mod progress;
pub mod results;
pub mod rng;
pub mod run;
pub mod score;
pub mod settings;
pub mod sut;
pub mod sysdesc;
