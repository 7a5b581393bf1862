//! The fuzz targets. Each `pub fn NAME(data: &[u8])` is a cargo-fuzz
//! `fuzz_target!` body; its `NAME_traced` twin is the same code recording
//! what the input reached, for the fuzzer's feedback.
//!
//! The targets call the real decoders and mirror, step by step, what the
//! sut-node and the QDL do with what they decode (the async servers
//! themselves need sockets): the point is to reach every check an input
//! from the network or a config file meets. Limits are the ones the real
//! code imposes, taken from the benchmark table, plus small ones so that
//! "too large" is reachable with small inputs.
//!
//! Where a property must hold (an encode/decode round trip, a decoded
//! size), the target asserts it: a broken property is a crash.

use std::path::Path;
use std::sync::OnceLock;

use bytes::Bytes;
use loadgen_node::engine::settings::{
    apply_config, ConfKind, ConfigFile, EffectiveSettings, Scenario, TestSettings,
};
use loadgen_node::qsl::{parse_npy, NpyFormatError};
use netdiv_proto::benchmark::TABLE;
use netdiv_proto::codec::{self, Codec, DecodeError};
use netdiv_proto::dtype::DType;
use netdiv_proto::framing::{self, FrameDecoder};
use netdiv_proto::pb::{self, quic_request, quic_response};
use netdiv_proto::sample::{accept_sample, completion_output};
use netdiv_proto::transport::{default_max_sample_bytes, message_limit};
use netdiv_proto::{Benchmark, Direction};
use prost::Message;
use sut_node::backend::openai::prompt_ids;
use sut_node::backend::prepost::{InputElements, Preprocess};
use sut_node::backend::synthetic_llm::{LlmConfig, SyntheticLlmBackend, TokenIds};
use sut_node::config::{FileConfig, NodeConfig};
use sut_node::server::version_mismatch;

use super::Trace;

/// Every benchmark of the table, parsed once.
fn benchmarks() -> &'static [Benchmark] {
    static ALL: OnceLock<Vec<Benchmark>> = OnceLock::new();
    ALL.get_or_init(|| {
        TABLE
            .iter()
            .map(|spec| Benchmark::parse(spec.name).expect("the table's names parse"))
            .collect()
    })
}

/// The benchmark a byte of the input picks.
fn benchmark_at(byte: u8) -> &'static Benchmark {
    let all = benchmarks();
    &all[byte as usize % all.len()]
}

/// Splits off the first `N` bytes (zeros past the end), so every input
/// drives a target whatever its length.
fn header<const N: usize>(data: &[u8]) -> ([u8; N], &[u8]) {
    let mut head = [0u8; N];
    let n = data.len().min(N);
    head[..n].copy_from_slice(&data[..n]);
    (head, &data[n..])
}

/// Decodes a protobuf message and checks the round trip every decoded
/// message must survive: encoding it and decoding that gives it back.
fn decode_message<M: Message + Default + PartialEq + std::fmt::Debug>(
    bytes: Bytes,
    what: &'static str,
    t: &mut Trace,
) -> Option<M> {
    match framing::decode::<M>(bytes, what) {
        Ok(message) => {
            t.hit(what);
            let again = M::decode(message.encode_to_vec().as_slice())
                .unwrap_or_else(|e| panic!("{what} re-encoded does not decode: {e}"));
            assert_eq!(again, message, "{what} does not survive a round trip");
            Some(message)
        }
        Err(e) => {
            t.error(what, &e);
            None
        }
    }
}

/// What a sut-node does with one query: each sample is checked and decoded
/// against the node's benchmark and sample limit (as `Node::submit_query`
/// does), then handed to what would run it.
fn submit_query(query: pb::Query, benchmark: &Benchmark, max_sample_bytes: u64, t: &mut Trace) {
    t.value("query.samples", query.samples.len() as u64);
    for sample in query.samples {
        let id = sample.response_id;
        match accept_sample(sample, benchmark, max_sample_bytes) {
            Ok(input) => {
                assert_eq!(input.response_id, id, "accept_sample changed the id");
                assert!(
                    input.data.len() as u64 <= max_sample_bytes,
                    "accept_sample let through {} bytes over the limit of {max_sample_bytes}",
                    input.data.len()
                );
                t.value("sample.accepted", input.data.len() as u64);
                backend_input(&input.data, benchmark, t);
            }
            Err(e) => {
                assert_eq!(e.response_id(), id, "a refusal names another sample");
                t.error("sample.refused", &e);
            }
        }
    }
}

/// How the node's backends read a decoded sample: a token model's prompt
/// (the LLM cost model plans it, a serving engine takes its token ids);
/// otherwise the ONNX backend's size check and pre-processing.
fn backend_input(data: &[u8], benchmark: &Benchmark, t: &mut Trace) {
    if benchmark.uses_token_latencies() {
        match SyntheticLlmBackend::new(LlmConfig::default(), benchmark) {
            Ok(llm) => match llm.plan(data) {
                Ok(plan) => t.value("llm.prompt_tokens", plan.prompt_tokens as u64),
                Err(e) => t.error("llm.plan", &e),
            },
            Err(e) => t.error("llm.new", &e),
        }
        for ids in [TokenIds::Int32, TokenIds::Int64] {
            match prompt_ids(data, ids) {
                Ok(prompt) => {
                    assert_eq!(prompt.len() * ids.size(), data.len(), "prompt length");
                    t.hit("prompt.ok");
                }
                Err(e) => t.error("prompt", &e),
            }
        }
        return;
    }
    // The ONNX backend refuses a sample of another size than the model's
    // input before converting anything; the table's shape stands in for
    // the model's.
    let wire = benchmark.spec().dtype;
    if data.len() as u64 != benchmark.largest_sample_bytes() {
        t.hit("onnx.wrong_size");
        return;
    }
    for model in [DType::F32, wire] {
        let pre = Preprocess {
            wire,
            model,
            scale: 1.0,
            offset: 0.0,
        };
        if let Err(e) = pre.check() {
            t.error("prepost.check", &e);
            continue;
        }
        let elements = match pre.convert(&[data]) {
            InputElements::F32(v) => v.len(),
            InputElements::U8(v) => v.len(),
            InputElements::I8(v) => v.len(),
            InputElements::I32(v) => v.len(),
            InputElements::I64(v) => v.len(),
        };
        assert_eq!(
            elements * wire.size(),
            data.len(),
            "pre-processing lost elements"
        );
        t.hit("prepost.converted");
    }
}

/// Where a QUIC stream is, as `sut_node::server::quic` reads it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// No request frame yet.
    First,
    /// A query stream: only more queries may follow.
    Queries,
    /// A Name or Info stream (or an empty request): nothing may follow.
    Single,
}

/// QUIC stream bytes as a sut-node reads them.
pub fn quic_frames(data: &[u8]) {
    quic_frames_traced(data, &mut Trace::off());
}

/// [`quic_frames`], recording into `t`.
///
/// Input: a control byte (chunk sizes, frame limit), a byte choosing the
/// node's benchmark, then the stream. The stream is pushed into the
/// decoder in chunks whose sizes a small generator seeded by the control
/// bytes draws, since a network delivers frames split anywhere.
pub fn quic_frames_traced(data: &[u8], t: &mut Trace) {
    let ([control, bench], stream) = header::<2>(data);
    let benchmark = benchmark_at(bench);
    // The node's own limit (the benchmark's, 256 MiB at least), or a small
    // one so that oversized frames are reachable.
    let max = match (control >> 4) & 3 {
        0 => message_limit(benchmark),
        1 => 16,
        2 => 300,
        _ => 4096,
    };
    let max_chunk = 1usize << (control & 0x0f).min(12);
    let mut chunk_state = u32::from(control) << 8 | u32::from(bench) | 1;
    let mut next_chunk = || {
        // xorshift32: any chunking the control bytes pick.
        chunk_state ^= chunk_state << 13;
        chunk_state ^= chunk_state >> 17;
        chunk_state ^= chunk_state << 5;
        1 + chunk_state as usize % max_chunk
    };
    let max_sample_bytes = default_max_sample_bytes(benchmark);
    let mut decoder = FrameDecoder::new(max);
    let mut state = Stream::First;
    let mut pos = 0;
    loop {
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => return t.error("frame", &e),
            };
            assert!(frame.len() <= max, "a frame over the limit got through");
            t.value("frame.len", frame.len() as u64);
            let Some(request) = decode_message::<pb::QuicRequest>(frame, "QuicRequest", t) else {
                return;
            };
            if let Some(reason) = version_mismatch(request.protocol_version) {
                return t.error("version", &reason);
            }
            state = match (state, request.kind) {
                (Stream::First | Stream::Queries, Some(quic_request::Kind::Query(query))) => {
                    submit_query(query, benchmark, max_sample_bytes, t);
                    Stream::Queries
                }
                (Stream::First, Some(quic_request::Kind::Name(_))) => {
                    t.hit("name");
                    Stream::Single
                }
                (Stream::First, Some(quic_request::Kind::Info(_))) => {
                    t.hit("info");
                    Stream::Single
                }
                (Stream::First, None) => {
                    t.hit("empty request");
                    Stream::Single
                }
                (Stream::Queries, _) => return t.hit("not a query"),
                (Stream::Single, _) => return t.hit("more than one"),
            };
        }
        if pos == stream.len() {
            break;
        }
        let n = next_chunk().min(stream.len() - pos);
        decoder.push(&stream[pos..pos + n]);
        pos += n;
    }
    match decoder.finish() {
        Err(e) => t.error("finish", &e),
        Ok(()) if state == Stream::First => t.hit("missing request"),
        Ok(()) => t.hit("clean end"),
    }
}

/// Limits the codec target picks from: small ones, and the node's own
/// (the default, and the largest benchmark's).
const CODEC_LIMITS: [u64; 6] = [0, 16, 4096, 1 << 20, 64 << 20, 300 << 20];

/// Bytes through the codecs.
pub fn codecs(data: &[u8]) {
    codecs_traced(data, &mut Trace::off());
}

/// [`codecs`], recording into `t`.
///
/// Input: a control byte (codec, limit, how the declared size is read),
/// 8 bytes of declared decoded size, then the encoded bytes.
pub fn codecs_traced(data: &[u8], t: &mut Trace) {
    let ([control, s0, s1, s2, s3, s4, s5, s6, s7], payload) = header::<9>(data);
    let codec = Codec::ALL[control as usize % Codec::ALL.len()];
    let limit = CODEC_LIMITS[(control as usize >> 1) % CODEC_LIMITS.len()];
    let raw = u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]);
    // Most sizes a fuzzer writes are far off; half the time, read the
    // bytes as a size near the payload's, where the interesting cases are.
    let declared = if control & 0x80 == 0 {
        raw
    } else {
        raw % (4 * payload.len() as u64 + 64)
    };
    t.hit(codec.name());
    match codec::decode(codec, payload, declared, limit) {
        Ok(out) => {
            t.value("decoded", out.len() as u64);
            assert!(out.len() as u64 <= limit, "decoded past the limit");
            match codec {
                Codec::None => assert_eq!(out, payload, "codec none changed the bytes"),
                Codec::Lz4 => assert_eq!(out.len() as u64, declared, "lz4 decoded size"),
            }
            // What decodes re-encodes and decodes to itself.
            round_trip(codec, &out, limit);
        }
        Err(e) => {
            match &e {
                DecodeError::TooLarge { size, limit: l } => {
                    assert!(*size > *l && *l == limit, "TooLarge within the limit: {e}")
                }
                DecodeError::SizeMismatch { decoded, announced } => {
                    assert_ne!(decoded, announced, "a size mismatch of equal sizes")
                }
                DecodeError::Corrupt(_) => {}
            }
            t.error("decode", &e);
        }
    }
    // Whatever the bytes, they survive every codec.
    for codec in Codec::ALL {
        round_trip(*codec, payload, u64::MAX);
    }
}

/// `decode(encode(data)) == data`, within `limit`.
fn round_trip(codec: Codec, data: &[u8], limit: u64) {
    let encoded = codec::encode(codec, data);
    match codec::decode(codec, &encoded, data.len() as u64, limit) {
        Ok(back) => assert!(back == data, "{codec} round trip changed the bytes"),
        Err(e) => panic!("{codec} round trip of {} bytes failed: {e}", data.len()),
    }
}

/// Protobuf messages of the session layer and what each end does with them.
pub fn node_messages(data: &[u8]) {
    node_messages_traced(data, &mut Trace::off());
}

/// [`node_messages`], recording into `t`.
///
/// Input: a byte choosing the message type, one choosing the benchmark,
/// one choosing the sample limit, then the message.
pub fn node_messages_traced(data: &[u8], t: &mut Trace) {
    let ([kind, bench, limit], message) = header::<3>(data);
    let benchmark = benchmark_at(bench);
    // The node's default limit, or a small one a config file could set.
    let max_sample_bytes = match limit % 4 {
        0 => default_max_sample_bytes(benchmark),
        1 => 0,
        2 => 100,
        _ => 1 << 16,
    };
    // The QDL accepts responses up to its message limit.
    let max_response = message_limit(benchmark) as u64;
    // Decoding from Bytes, as both ends do, so `bytes` fields share it.
    let bytes = Bytes::copy_from_slice(message);
    match kind % 6 {
        // gRPC: the node's Infer stream carries Query messages.
        0 => {
            if let Some(query) = decode_message::<pb::Query>(bytes, "Query", t) {
                submit_query(query, benchmark, max_sample_bytes, t);
            }
        }
        // QUIC: one request frame.
        1 => {
            let Some(request) = decode_message::<pb::QuicRequest>(bytes, "QuicRequest", t) else {
                return;
            };
            if let Some(reason) = version_mismatch(request.protocol_version) {
                return t.error("version", &reason);
            }
            match request.kind {
                Some(quic_request::Kind::Query(query)) => {
                    submit_query(query, benchmark, max_sample_bytes, t)
                }
                Some(_) => t.hit("name or info"),
                None => t.hit("empty request"),
            }
        }
        // The QDL's side: one completion, a gRPC batch of them, a QUIC
        // response.
        2 => {
            if let Some(c) = decode_message::<pb::Completion>(bytes, "Completion", t) {
                completion(c, benchmark, max_response, t);
            }
        }
        3 => {
            if let Some(batch) = decode_message::<pb::CompletionBatch>(bytes, "CompletionBatch", t)
            {
                for c in batch.completions {
                    completion(c, benchmark, max_response, t);
                }
            }
        }
        4 => {
            let Some(response) = decode_message::<pb::QuicResponse>(bytes, "QuicResponse", t)
            else {
                return;
            };
            match response.kind {
                Some(quic_response::Kind::Completions(batch)) => {
                    for c in batch.completions {
                        completion(c, benchmark, max_response, t);
                    }
                }
                Some(quic_response::Kind::Info(info)) => node_info(&info, benchmark, t),
                Some(quic_response::Kind::Name(name)) => {
                    t.value("name.len", name.name.len() as u64)
                }
                Some(quic_response::Kind::Error(e)) => t.value("error.len", e.len() as u64),
                None => t.hit("empty response"),
            }
        }
        _ => {
            if let Some(info) = decode_message::<pb::NodeInfo>(bytes, "NodeInfo", t) {
                node_info(&info, benchmark, t);
            }
        }
    }
}

/// What the QDL does with a completion: a failure is passed on as it is,
/// an output is checked and decoded.
fn completion(c: pb::Completion, benchmark: &Benchmark, limit: u64, t: &mut Trace) {
    if !c.error.is_empty() {
        return t.hit(if c.retryable { "declined" } else { "failed" });
    }
    match completion_output(c, benchmark, limit) {
        Ok(out) => {
            assert!(out.len() as u64 <= limit, "an output over the limit");
            t.value("output", out.len() as u64);
        }
        Err(e) => t.error("completion", &e),
    }
}

/// The QDL's checks of a node's info: the same benchmark as the run's,
/// and the codecs it accepts (as `qdl::network` checks them).
fn node_info(info: &pb::NodeInfo, run: &Benchmark, t: &mut Trace) {
    match Benchmark::parse(&info.benchmark) {
        Ok(node) => t.hit(if node.same_benchmark(run) {
            "info.same"
        } else {
            "info.other"
        }),
        Err(e) => t.error("info.benchmark", &e),
    }
    for &value in info.codecs.iter().chain([&info.response_codec]) {
        match Codec::from_wire(value) {
            Some(codec) => match run.check_codec(Direction::Input, codec) {
                Ok(()) => t.hit("info.codec"),
                Err(e) => t.error("info.codec", &e),
            },
            None => t.hit("info.unknown codec"),
        }
    }
    t.value("info.nics", info.nics.len() as u64);
}

/// A sut-node config file.
pub fn sut_node_config(data: &[u8]) {
    sut_node_config_traced(data, &mut Trace::off());
}

/// [`sut_node_config`], recording into `t`.
///
/// The input is the file (invalid UTF-8 replaced: `FileConfig::load`
/// refuses such a file before parsing, which is not worth fuzzing). The
/// steps after parsing are those of `FileConfig::load` (paths made
/// relative to its folder), then `NodeConfig::from_file`, as for a node
/// started with only `--config`.
pub fn sut_node_config_traced(data: &[u8], t: &mut Trace) {
    let text = String::from_utf8_lossy(data);
    let mut file: FileConfig = match toml::from_str(&text) {
        Ok(file) => file,
        Err(e) => return t.error("toml", &toml_message(&e)),
    };
    t.hit("parsed");
    if quote_run_over_limit(&text) {
        // toml_write 0.1.2 counts a string's consecutive quotes in a u8
        // (string.rs:327): 256 in a row overflow it, a panic in builds with
        // overflow checks. A bug of the serializer, which the node does not
        // run; tests/fuzz-regressions/sut_node_config/ keeps the input.
        t.hit("quote run");
    } else {
        round_trip_config(&file);
    }
    // FileConfig::load: paths are relative to the file's folder.
    let base = Path::new("/etc/netdiv");
    for p in [&mut file.onnx.model, &mut file.onnx.runtime_library]
        .into_iter()
        .flatten()
    {
        *p = base.join(&*p);
    }
    // What the file resolves to, as the node resolves it.
    if let Ok(Some(benchmark)) = file.benchmark() {
        t.hit(benchmark.name());
    }
    t.hit(file.backend_config().kind.name());
    match NodeConfig::from_file(file) {
        Ok(config) => t.value("max_sample_bytes", config.max_sample_bytes),
        Err(e) => t.error("config", &format!("{e:#}")),
    }
}

/// Whether a string of the file holds 256 quotes in a row, on which
/// toml_write overflows (see above). Strings, not the text: escapes
/// (`\"`, `\u0027`) make quotes too.
fn quote_run_over_limit(text: &str) -> bool {
    fn over(value: &toml::Value) -> bool {
        match value {
            toml::Value::String(s) => longest_quote_run(s) > usize::from(u8::MAX),
            toml::Value::Array(items) => items.iter().any(over),
            toml::Value::Table(table) => table.values().any(over),
            _ => false,
        }
    }
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.values().any(over))
}

/// The longest run of one quote character (`'` or `"`) in `text`.
fn longest_quote_run(text: &str) -> usize {
    let (mut longest, mut run, mut last) = (0, 0, 0u8);
    for &b in text.as_bytes() {
        let quote = b == b'\'' || b == b'"';
        run = if quote && b == last {
            run + 1
        } else {
            usize::from(quote)
        };
        last = b;
        longest = longest.max(run);
    }
    longest
}

/// What parsed serializes back to a file that parses to the same.
fn round_trip_config(file: &FileConfig) {
    let written = toml::to_string(file)
        .unwrap_or_else(|e| panic!("a parsed config does not serialize: {e}\n{file:#?}"));
    let back: FileConfig = toml::from_str(&written).unwrap_or_else(|e| {
        panic!("a parsed config, written back, does not parse: {e}\n{written}")
    });
    assert_eq!(
        format!("{back:?}"),
        format!("{file:?}"),
        "a config changed when written back:\n{written}"
    );
}

/// A TOML error's message without the file it quotes (its Display does)
/// nor the unknown name in "unknown field `x`" and "unknown variant": that
/// name is the input's, may hold backquotes, and would make every input a
/// new feature.
fn toml_message(e: &toml::de::Error) -> String {
    let message = e.message();
    for unknown in ["unknown field", "unknown variant"] {
        if let Some(rest) = message.strip_prefix(unknown) {
            let expected = rest.rfind(", expected").map_or("", |i| &rest[i..]);
            return format!("{unknown}{expected}");
        }
    }
    message.to_string()
}

/// Test modes, kinds and QSL sizes the LoadGen target applies a config
/// with, picked by the input.
const CONF_KINDS: [ConfKind; 3] = [ConfKind::Mlperf, ConfKind::User, ConfKind::Audit];
const QSL_COUNTS: [(u64, u64); 4] = [(1024, 50000), (1, 1), (64, 24781), (13368, 13368)];

/// A LoadGen config file: mlperf.conf, user.conf or audit.config.
pub fn loadgen_config(data: &[u8]) {
    loadgen_config_traced(data, &mut Trace::off());
}

/// [`loadgen_config`], recording into `t`.
///
/// The input is the file (invalid UTF-8 replaced, as for the sut-node's).
/// A file that parses is applied for the model its first line names, in a
/// scenario and role and for QSL sizes the input's bytes pick, and the
/// run's effective settings are derived, as `loadgen-node run` does.
pub fn loadgen_config_traced(data: &[u8], t: &mut Trace) {
    let text = String::from_utf8_lossy(data);
    let cfg = match ConfigFile::parse(&text, "fuzz.conf") {
        Ok(cfg) => cfg,
        Err(e) => return t.error("parse", &e),
    };
    t.value("unknown keys", cfg.unknown_keys.len() as u64);
    let model = first_model(&text).unwrap_or("resnet50");
    let pick = data.iter().fold(0usize, |a, &b| a.wrapping_add(b as usize));
    let scenario = Scenario::ALL[pick % Scenario::ALL.len()];
    let kind = CONF_KINDS[(pick / 4) % CONF_KINDS.len()];
    let (performance, total) = QSL_COUNTS[(pick / 12) % QSL_COUNTS.len()];
    let mut settings = TestSettings {
        scenario,
        ..TestSettings::default()
    };
    if let Err(e) = apply_config(&mut settings, &cfg, model, scenario, kind) {
        return t.error("apply", &e);
    }
    t.hit(scenario.name());
    let effective = EffectiveSettings::new(&settings, performance, total);
    t.value("samples per query", effective.samples_per_query);
    t.value("min queries", effective.min_query_count);
    t.value("problems", effective.problems.len() as u64);
}

/// The model part of the first `model.scenario.key` in a config text.
fn first_model(text: &str) -> Option<&str> {
    let key = text
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .find(|key| !key.starts_with('#'))?;
    let mut parts = key.rsplitn(3, '.');
    let (_, _, model) = (parts.next()?, parts.next()?, parts.next()?);
    Some(model)
}

/// A `.npy` file.
pub fn npy(data: &[u8]) {
    npy_traced(data, &mut Trace::off());
}

/// [`npy`], recording into `t`.
pub fn npy_traced(data: &[u8], t: &mut Trace) {
    match parse_npy(data) {
        Ok(array) => {
            let elements = array
                .shape
                .iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .expect("an accepted shape's size fits");
            assert_eq!(
                elements.checked_mul(array.dtype.size()),
                Some(array.data.len()),
                "the payload is not the shape's size"
            );
            assert!(
                array.data.len() <= data.len(),
                "payload larger than the file"
            );
            t.hit(array.dtype.name());
            t.value("ndim", array.shape.len() as u64);
            t.value("payload", array.data.len() as u64);
        }
        Err(e) => t.error(npy_site(&e), &e),
    }
}

/// A site per kind of refusal, so that kinds whose texts quote the input
/// (a descr, a shape) do not crowd out the others (see [`Trace::errors`]).
fn npy_site(e: &NpyFormatError) -> &'static str {
    match e {
        NpyFormatError::BadMagic => "npy.magic",
        NpyFormatError::UnsupportedVersion { .. } => "npy.version",
        NpyFormatError::TruncatedHeader { .. } => "npy.truncated",
        NpyFormatError::HeaderSyntax(_) => "npy.syntax",
        NpyFormatError::MissingKey(_) => "npy.missing",
        NpyFormatError::BadValue { .. } => "npy.value",
        NpyFormatError::UnsupportedDescr(_) => "npy.descr",
        NpyFormatError::FortranOrder => "npy.fortran",
        NpyFormatError::ShapeTooLarge { .. } => "npy.shape",
        NpyFormatError::PayloadLength { .. } => "npy.payload",
    }
}
