//! Fuzzing on stable Rust: the targets, their seeds and a small mutational
//! fuzzer that drives them (`src/bin/fuzz.rs`, and `tests/fuzz.rs` for a
//! bounded run in CI). `docs/fuzzing.md` says how to run them and what
//! the last campaign found.
//!
//! Each target is a plain `pub fn NAME(data: &[u8])`, the shape of a
//! cargo-fuzz `fuzz_target!` body, so the same functions can be handed to
//! libFuzzer on a nightly toolchain unchanged:
//!
//! ```ignore
//! fuzz_target!(|data: &[u8]| netdiv_tests::fuzz::targets::npy(data));
//! ```
//!
//! A target must never panic, hang or allocate without bound on any input;
//! errors are expected. Where the code has a property that must hold (a
//! round trip, an invariant of a decoded value) the target asserts it, so
//! a broken property is a crash too.
//!
//! * [`targets`]: the six targets, each with a traced twin that records
//!   what the input reached, for the fuzzer's feedback;
//! * [`trace`]: that record ([`Trace`]);
//! * [`seeds`]: valid inputs built in code, and each target's dictionary;
//! * [`mutate`]: the deterministic random source and the mutations;
//! * [`engine`]: the fuzzing loop, crash capture, corpus and replay.

pub mod engine;
pub mod mutate;
pub mod seeds;
pub mod targets;
pub mod trace;

pub use engine::{fuzz, replay, replay_one, Crash, Options, Summary};
pub use trace::Trace;

/// One fuzz target: its name, the `fuzz_target!`-shaped function, the
/// traced twin the fuzzer runs, its seeds and its dictionary.
#[derive(Clone, Copy)]
pub struct Target {
    /// The name on the command line and of its corpus and crash folders.
    pub name: &'static str,
    /// One line on what it covers.
    pub about: &'static str,
    /// The target as cargo-fuzz would call it.
    pub run: fn(&[u8]),
    /// The same target, recording what the input reached in a [`Trace`].
    pub traced: fn(&[u8], &mut Trace),
    /// Valid inputs to start from, built in code.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Tokens the mutator inserts: keywords, magic bytes, numbers.
    pub dictionary: fn() -> Vec<Vec<u8>>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("name", &self.name).finish()
    }
}

/// Every target, in the order `fuzz list` shows them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "quic_frames",
        about: "QUIC stream bytes, in chunks sized by the input, through FrameDecoder and the \
                node's QuicRequest handling (version check, query streams, sample checks)",
        run: targets::quic_frames,
        traced: targets::quic_frames_traced,
        seeds: seeds::quic_frames,
        dictionary: seeds::protobuf_dictionary,
    },
    Target {
        name: "codecs",
        about: "codec::decode of every codec with a declared size and a limit from the input; \
                encode/decode round trips",
        run: targets::codecs,
        traced: targets::codecs_traced,
        seeds: seeds::codecs,
        dictionary: seeds::lz4_dictionary,
    },
    Target {
        name: "node_messages",
        about: "protobuf decoding of Query, QuicRequest, Completion, CompletionBatch, \
                QuicResponse and NodeInfo, then what the node and the QDL do with them \
                (accept_sample, token prompts, pre-processing, completion_output)",
        run: targets::node_messages,
        traced: targets::node_messages_traced,
        seeds: seeds::node_messages,
        dictionary: seeds::protobuf_dictionary,
    },
    Target {
        name: "sut_node_config",
        about: "the sut-node TOML config file (FileConfig) and the checks the node runs on it \
                at startup; serialization round trip",
        run: targets::sut_node_config,
        traced: targets::sut_node_config_traced,
        seeds: seeds::sut_node_config,
        dictionary: seeds::toml_dictionary,
    },
    Target {
        name: "loadgen_config",
        about: "mlperf.conf/user.conf/audit.config parsing (ConfigFile::parse), apply_config \
                and the effective settings derived from them",
        run: targets::loadgen_config,
        traced: targets::loadgen_config_traced,
        seeds: seeds::loadgen_config,
        dictionary: seeds::loadgen_conf_dictionary,
    },
    Target {
        name: "npy",
        about: "loadgen_node::qsl::parse_npy: .npy headers of versions 1.0, 2.0 and 3.0 and \
                their payloads",
        run: targets::npy,
        traced: targets::npy_traced,
        seeds: seeds::npy,
        dictionary: seeds::npy_dictionary,
    },
];

/// The target of that name.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The names of every target, comma separated, for error messages.
pub fn target_names() -> String {
    TARGETS
        .iter()
        .map(|t| t.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Largest input the fuzzer builds or loads: the targets are linear in
/// their input at worst, so this bounds the time of one execution.
pub const MAX_INPUT_BYTES: usize = 1 << 20;
