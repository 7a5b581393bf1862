//! Shared helpers of netdiv's integration tests (`tests/*.rs`) and
//! benchmarks (`src/bin/*`), by purpose:
//!
//! * [`binaries`]: the programs under test, found or built once per
//!   process (`loadgen-node`, `sut-node`, the official-LoadGen build of
//!   `loadgen-node` and the official driver), and [`workspace_root`];
//! * [`prerequisites`]: what some tests need besides those (ONNX Runtime,
//!   the digits data) and [`skip_unless_ci`] for when it is missing;
//! * [`files`]: a fresh directory per test ([`test_dir`]), removed
//!   afterwards unless `NETDIV_KEEP_TEST_DIRS` is set, and [`write_file`];
//! * [`configs`]: config files built from values: LoadGen's `user.conf`
//!   ([`UserConf`]) and a sut-node's TOML config;
//! * [`process`]: running a child process with a deadline, reporting its
//!   status, wall time and peak RSS ([`run_with_deadline`]);
//! * [`engines`]: the conformance runner, one LoadGen run of the official
//!   engine or ours with the same flags;
//! * [`mlperf_logs`]: parsing what a LoadGen run writes;
//! * [`network_run`]: whole Network-SUT runs, sut-nodes and `loadgen-node`
//!   as real processes;
//! * [`sut_client`]: a `sut-node` process and minimal gRPC and QUIC
//!   clients of it;
//! * [`llama`]: a real llama.cpp server and tiny model for the openai
//!   backend; [`misbehaving_engine`], a test-only engine that breaks its
//!   streams on purpose, and [`counting_engine`], one that answers well
//!   over HTTP/1.1 or HTTP/2 and counts requests and connections;
//! * [`bench`](mod@bench): what the benchmark binaries share;
//! * [`text`]: the end of an output for a message, and an edit that must
//!   match exactly once;
//! * [`chromium`]: a real headless Chromium (installed by
//!   `tests/setup/chromium.sh`) that renders the run report;
//! * [`submission`](mod@submission) and [`checker_log`]: the submission
//!   tests' checkout and system description, and the official checker's
//!   log read back, each error tied to its short-run cause.
//!
//! The items most tests use are re-exported here.
//!
//! Linux only (`waitid`, `wait4`, `ru_maxrss` in KiB).

pub mod bench;
pub mod binaries;
pub mod checker_log;
pub mod chromium;
pub mod configs;
pub mod counting_engine;
pub mod echo;
pub mod engines;
pub mod files;
pub mod fuzz;
pub mod lab;
pub mod llama;
pub mod log_records;
pub mod misbehaving_engine;
pub mod mlperf_logs;
pub mod netns;
pub mod network_run;
pub mod prerequisites;
pub mod process;
pub mod prometheus;
pub mod python;
pub mod soak;
pub mod submission;
pub mod sut_client;
pub mod text;
pub mod vllm;

pub use binaries::{loadgen_node_bin, sut_node_bin, workspace_root};
pub use configs::UserConf;
pub use files::{test_dir, write_file, TestDir};
pub use prerequisites::skip_unless_ci;
pub use process::run_with_deadline;
pub use text::tail;
