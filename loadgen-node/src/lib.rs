//! # loadgen-node
//!
//! The LoadGen node of netdiv, as a library the `loadgen-node` program
//! wires together:
//!
//! * [`engine`]: a Rust LoadGen that behaves like the official MLPerf
//!   LoadGen (same samples, schedule, verdict and log files for the same
//!   settings and seeds);
//! * [`sut`]: what a test runs against: the interfaces a SUT and a QSL
//!   implement, and the adapters netdiv has: an instant null SUT, the
//!   sut-node's backend in this process, the QDL over the network, and
//!   (feature `official`) the same QDL under the official C++ LoadGen;
//! * [`qsl`]: the query sample library's samples: synthetic data, `.npy`
//!   folders and the reference data sets (pickles, pandas frames, JSON),
//!   read and compressed at LoadSamplesToRam into the store the QDL sends
//!   from;
//! * [`round`]: the MLPerf round a run is for, which picks the official
//!   LoadGen release, the mlperf.conf and the Datacenter suite together;
//! * [`mlperf_logs`]: the four files a LoadGen run writes, read the one
//!   way everything here reads them;
//! * [`run_record`]: the typed record of a network run (`netdiv_run.json`)
//!   that the run writes and the report, audit, submission and tests read.
//!
//! The engine knows nothing of networks; the network is the `qdl` crate's,
//! behind [`sut::network`].

// Library crates never print: diagnostics are `tracing` events, and the
// binaries decide where they go (netdiv_proto::logging).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod engine;
pub mod mlperf_logs;
pub mod qsl;
pub mod round;
pub mod run_record;
pub mod sut;
