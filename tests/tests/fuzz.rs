//! The bounded fuzzing CI runs: every fuzz target for a fixed number of
//! executions from a fixed seed, every saved regression input replayed,
//! and property tests of the decoders' round trips (frames over any
//! chunking, codecs, `.npy` files, config lines). The long campaigns run
//! with `src/bin/fuzz.rs`; `docs/fuzzing.md` has their numbers.

use loadgen_node::engine::settings::{apply_config, ConfKind, ConfigFile, Scenario, TestSettings};
use netdiv_proto::codec::{self, Codec, DecodeError};
use netdiv_proto::dtype::DType;
use netdiv_proto::framing::{self, FrameDecoder, FrameError};
use netdiv_proto::pb::{self, quic_request};
use netdiv_proto::sample::accept_sample;
use netdiv_proto::Benchmark;
use netdiv_tests::fuzz::{self, seeds, Options, TARGETS};
use netdiv_tests::workspace_root;
use proptest::prelude::*;
use proptest::sample::Index;
use sut_node::config::FileConfig;

/// Executions per target: enough to pass every seed through the mutator
/// many times, within seconds in a debug build.
const CI_EXECS: u64 = 100_000;

fn campaign(name: &str, execs: u64) {
    let target = fuzz::target(name).expect("a target of that name");
    let options = Options {
        execs: Some(execs),
        seed: 0x6e65_7464_6976,
        ..Options::default()
    };
    let summary = fuzz::fuzz(target, &options, &mut |_| {}).expect("no corpus folder to fail");
    if let Some(crash) = summary.crash {
        let input = match std::str::from_utf8(&crash.input) {
            Ok(text) => format!("{text:?}"),
            Err(_) => format!("{:02x?}", crash.input),
        };
        panic!(
            "{name} crashed after {} execs on {input}:\n{}",
            summary.execs, crash.message
        );
    }
    assert_eq!(summary.execs, execs);
    assert!(
        summary.corpus > summary.seeds,
        "{name}: mutations found nothing new ({})",
        summary.line()
    );
}

#[test]
fn fuzz_quic_frames() {
    campaign("quic_frames", CI_EXECS);
}

#[test]
fn fuzz_codecs() {
    campaign("codecs", CI_EXECS);
}

#[test]
fn fuzz_node_messages() {
    campaign("node_messages", CI_EXECS);
}

#[test]
fn fuzz_sut_node_config() {
    campaign("sut_node_config", CI_EXECS);
}

#[test]
fn fuzz_loadgen_config() {
    campaign("loadgen_config", CI_EXECS);
}

#[test]
fn fuzz_npy() {
    campaign("npy", CI_EXECS);
}

/// Every input that once crashed a target, kept under
/// `tests/fuzz-regressions/TARGET/`, runs clean.
#[test]
fn saved_regressions_replay_clean() {
    let root = workspace_root().join("tests/fuzz-regressions");
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(&root).expect("tests/fuzz-regressions") {
        let entry = entry.expect("a folder entry");
        if !entry.file_type().expect("a file type").is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let target = fuzz::target(&name).unwrap_or_else(|| {
            panic!(
                "tests/fuzz-regressions/{name} names no target ({})",
                fuzz::target_names()
            )
        });
        for (path, outcome) in fuzz::replay(target, &entry.path()).expect("readable inputs") {
            if let Err(message) = outcome {
                failures.push(format!("{}: {message}", path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The seeds reach the success paths of their targets: a seed that no
/// longer parses would leave the fuzzer knocking at the door.
#[test]
fn seeds_are_valid_inputs() {
    for input in seeds::npy() {
        loadgen_node::qsl::parse_npy(&input).expect("an npy seed parses");
    }
    for input in seeds::loadgen_config() {
        let text = String::from_utf8(input).expect("UTF-8");
        let cfg = ConfigFile::parse(&text, "seed").expect("a config seed parses");
        assert!(cfg.unknown_keys.is_empty(), "{:?}", cfg.unknown_keys);
    }
    for input in seeds::sut_node_config() {
        let text = String::from_utf8(input).expect("UTF-8");
        let file: FileConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let benchmark = file.benchmark().expect("a known benchmark");
        if let Some(b) = benchmark {
            file.backend_config()
                .check(&b)
                .expect("a backend that fits");
        }
    }
    for input in seeds::codecs() {
        let declared = u64::from_le_bytes(input[1..9].try_into().expect("8 bytes"));
        let codec = Codec::ALL[input[0] as usize % 2];
        codec::decode(codec, &input[9..], declared, 1 << 20).expect("a codec seed decodes");
    }
    for t in TARGETS {
        assert!(!(t.seeds)().is_empty(), "{} has no seeds", t.name);
        assert!(!(t.dictionary)().is_empty(), "{} has no dictionary", t.name);
    }
}

fn arb_sample() -> impl Strategy<Value = pb::Sample> {
    (
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..64),
        any::<i32>(),
        any::<u64>(),
    )
        .prop_map(|(response_id, data, codec, decoded_size)| pb::Sample {
            response_id,
            data: data.into(),
            codec,
            decoded_size,
        })
}

fn arb_request() -> impl Strategy<Value = pb::QuicRequest> {
    let kind = prop_oneof![
        Just(None),
        any::<u32>().prop_map(|v| Some(quic_request::Kind::Name(pb::NameRequest {
            protocol_version: v
        }))),
        Just(Some(quic_request::Kind::Info(pb::InfoRequest {}))),
        (any::<u64>(), prop::collection::vec(arb_sample(), 0..4)).prop_map(|(id, samples)| {
            Some(quic_request::Kind::Query(pb::Query {
                query_id: id,
                samples,
                ..Default::default()
            }))
        }),
    ];
    (any::<u32>(), kind).prop_map(|(protocol_version, kind)| pb::QuicRequest {
        protocol_version,
        kind,
    })
}

/// Bytes that compress (runs, ramps) and bytes that do not.
fn arb_data() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048),
        (any::<u8>(), 0usize..20_000).prop_map(|(b, n)| vec![b; n]),
        (1u8..8, 0usize..20_000)
            .prop_map(|(step, n)| (0..n).map(|i| (i / step as usize) as u8).collect()),
    ]
}

/// Settings a `user.conf` line sets one for one (multiplier 1), with the
/// field each lands in.
type Getter = fn(&TestSettings) -> u64;
const U64_KEYS: &[(&str, Getter)] = &[
    ("min_query_count", |s| s.min_query_count),
    ("max_query_count", |s| s.max_query_count),
    ("min_duration", |s| s.min_duration_ms),
    ("max_duration", |s| s.max_duration_ms),
    ("performance_sample_count_override", |s| {
        s.performance_sample_count_override
    }),
    ("accuracy_sample_count_override", |s| {
        s.accuracy_sample_count_override
    }),
    ("performance_issue_same_index", |s| {
        s.performance_issue_same_index
    }),
    ("accuracy_log_rng_seed", |s| s.accuracy_log_rng_seed),
    ("accuracy_log_sampling_target", |s| {
        s.accuracy_log_sampling_target
    }),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Frames of any requests, split anywhere, decode to the same requests.
    #[test]
    fn frames_round_trip_over_any_chunking(
        requests in prop::collection::vec(arb_request(), 0..6),
        cuts in prop::collection::vec(any::<Index>(), 0..12),
    ) {
        let stream: Vec<u8> = requests.iter().flat_map(|r| framing::encode(r).to_vec()).collect();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.sort_unstable();
        points.push(stream.len());
        let mut decoder = FrameDecoder::new(1 << 20);
        let mut got = Vec::new();
        let mut from = 0;
        for to in points {
            decoder.push(&stream[from..to]);
            from = to;
            while let Some(frame) = decoder.next_frame().expect("frames within the limit") {
                got.push(framing::decode::<pb::QuicRequest>(frame, "QuicRequest").expect("a request"));
            }
        }
        prop_assert_eq!(got, requests);
        prop_assert_eq!(decoder.finish(), Ok(()));
    }

    /// A length prefix over the limit is refused before anything is
    /// buffered for it; one within waits for its bytes.
    #[test]
    fn frames_over_the_limit_are_refused(len in any::<u32>(), max in 0usize..100_000) {
        let mut decoder = FrameDecoder::new(max);
        decoder.push(&len.to_be_bytes());
        let got = decoder.next_frame();
        if len as usize > max {
            prop_assert_eq!(got, Err(FrameError::TooLarge { len: len as usize, limit: max }));
        } else if len == 0 {
            prop_assert_eq!(got.map(|f| f.map(|f| f.len())), Ok(Some(0)));
        } else {
            prop_assert_eq!(got, Ok(None));
            prop_assert_eq!(decoder.finish(), Err(FrameError::Truncated { buffered: 4 }));
        }
    }

    /// Every codec decodes what it encoded, and refuses it under a limit
    /// one byte short.
    #[test]
    fn codecs_round_trip(data in arb_data()) {
        let len = data.len() as u64;
        for &c in Codec::ALL {
            let encoded = codec::encode(c, &data);
            prop_assert_eq!(codec::decode(c, &encoded, len, len).expect("round trip"), data.clone());
            if len > 0 {
                let refused = codec::decode(c, &encoded, len, len - 1);
                let too_large = matches!(refused, Err(DecodeError::TooLarge { .. }));
                prop_assert!(too_large, "{} under a limit one short: {:?}", c, refused);
            }
        }
    }

    /// A sample encoded as the QDL encodes it is accepted by a node whose
    /// benchmark allows the codec, unchanged.
    #[test]
    fn encoded_samples_are_accepted(data in arb_data(), id in any::<u64>(), lz4 in any::<bool>()) {
        let codec = if lz4 { Codec::Lz4 } else { Codec::None };
        let sample = pb::Sample {
            response_id: id,
            data: codec::encode(codec, &data).into(),
            codec: codec.to_proto() as i32,
            decoded_size: data.len() as u64,
        };
        let bert = Benchmark::parse("bert-99").expect("bert");
        let input = accept_sample(sample, &bert, 1 << 20).expect("accepted");
        prop_assert_eq!(input.response_id, id);
        prop_assert_eq!(&input.data[..], &data[..]);
    }

    /// A `.npy` file written by `write_npy` (or with a header of version
    /// 2.0 or 3.0) parses back to the same array.
    #[test]
    fn npy_round_trip(
        dtype in 0usize..DType::ALL.len(),
        shape in prop::collection::vec(0usize..6, 0..4),
        fill in any::<u64>(),
        version in 1u8..=3,
    ) {
        let dtype = DType::ALL[dtype];
        let len = shape.iter().product::<usize>() * dtype.size();
        let data: Vec<u8> = (0..len).map(|i| (fill >> (i % 8 * 8)) as u8 ^ i as u8).collect();
        let bytes = if version == 1 {
            let dir = tempfile::tempdir().expect("a temp dir");
            let path = dir.path().join("a.npy");
            loadgen_node::qsl::write_npy(&path, dtype, &shape, &data).expect("written");
            std::fs::read(&path).expect("read back")
        } else {
            seeds::npy_file((version, 0), &seeds::npy_dict(dtype, &shape), &data)
        };
        let array = loadgen_node::qsl::parse_npy(&bytes).expect("parses");
        prop_assert_eq!(array.dtype, dtype);
        prop_assert_eq!(array.shape, shape);
        prop_assert_eq!(array.data, data);
    }

    /// `model.scenario.key = value` lines, in any integer syntax of C's
    /// strtoull and with any wildcard, set the value they say; a later
    /// line of the same key wins.
    #[test]
    fn user_conf_lines_round_trip(
        model in "[a-z][a-z0-9_.-]{0,12}",
        scenario in 0usize..4,
        key in 0usize..U64_KEYS.len(),
        values in prop::collection::vec(any::<u64>(), 1..4),
        syntax in 0usize..3,
        wildcard in 0usize..4,
    ) {
        let scenario = Scenario::ALL[scenario];
        let (name, get) = U64_KEYS[key];
        let (m, s) = match wildcard {
            0 => (model.as_str(), scenario.name()),
            1 => ("*", scenario.name()),
            2 => (model.as_str(), "*"),
            _ => ("*", "*"),
        };
        let mut text = String::from("# user.conf\n\n");
        for v in &values {
            let v = match syntax {
                0 => v.to_string(),
                1 => format!("0x{v:x}"),
                _ => format!("0{v:o}"),
            };
            text.push_str(&format!("{m}.{s}.{name} = {v}\n"));
        }
        let cfg = ConfigFile::parse(&text, "user.conf").expect("parses");
        let mut settings = TestSettings { scenario, ..TestSettings::default() };
        apply_config(&mut settings, &cfg, &model, scenario, ConfKind::User).expect("applies");
        prop_assert_eq!(get(&settings), *values.last().expect("one value"));
    }

    /// A float setting reads back what was written, in either notation.
    #[test]
    fn user_conf_floats_round_trip(qps in 1e-6f64..1e12, exponent in any::<bool>()) {
        let v = if exponent { format!("{qps:e}") } else { format!("{qps}") };
        let text = format!("m.Server.target_qps = {v}\n");
        let cfg = ConfigFile::parse(&text, "user.conf").expect("parses");
        let mut settings = TestSettings { scenario: Scenario::Server, ..TestSettings::default() };
        apply_config(&mut settings, &cfg, "m", Scenario::Server, ConfKind::User).expect("applies");
        prop_assert_eq!(settings.server_target_qps, qps);
    }
}
