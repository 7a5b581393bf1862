//! Valid inputs for every target, built in code from the real encoders
//! (frames of real messages, lz4 blocks, `.npy` files, config files), and
//! the dictionaries of tokens the mutator splices in. A fuzzer without
//! coverage feedback gets deep only from good starting points: each seed
//! reaches a different success path of its target.

use netdiv_proto::benchmark::TABLE;
use netdiv_proto::codec::{self, Codec};
use netdiv_proto::dtype::DType;
use netdiv_proto::framing;
use netdiv_proto::pb::{self, quic_request, quic_response};
use netdiv_proto::sample::{completion, failed_completion, first_token_message, token_completion};
use netdiv_proto::PROTOCOL_VERSION;
use prost::Message;
use sut_node::config::FileConfig;

/// The input byte that makes the targets pick the benchmark `name`.
fn bench(name: &str) -> u8 {
    let index = TABLE
        .iter()
        .position(|spec| spec.name == name)
        .expect("a benchmark of the table");
    u8::try_from(index).expect("fewer than 256 benchmarks")
}

/// Bytes that look like data: a repeating ramp, compressible but not
/// trivially.
fn ramp(len: usize, step: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(step)).collect()
}

/// Token ids as little-endian int32s.
fn int32_tokens(ids: &[i32]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.to_le_bytes()).collect()
}

/// A wire sample of `data` in `codec`.
fn sample(response_id: u64, data: &[u8], codec: Codec) -> pb::Sample {
    pb::Sample {
        response_id,
        data: codec::encode(codec, data).into(),
        codec: codec.to_proto() as i32,
        decoded_size: data.len() as u64,
    }
}

fn query(query_id: u64, samples: Vec<pb::Sample>) -> pb::Query {
    pb::Query {
        query_id,
        samples,
        ..Default::default()
    }
}

fn request(kind: quic_request::Kind) -> pb::QuicRequest {
    pb::QuicRequest {
        protocol_version: PROTOCOL_VERSION,
        kind: Some(kind),
    }
}

/// Queries a node of each kind of benchmark would get: an image (raw, and
/// lz4 at its full size so pre-processing runs), BERT's int32 ids, an LLM
/// prompt, and samples the node must refuse.
fn queries() -> Vec<(u8, pb::Query)> {
    let image = ramp(150_528, 7);
    let bert = ramp(3 * 384 * 4, 3);
    vec![
        (
            bench("resnet50"),
            query(
                1,
                vec![
                    sample(10, &ramp(64, 1), Codec::None),
                    sample(11, &image, Codec::Lz4),
                ],
            ),
        ),
        (
            bench("bert"),
            query(
                2,
                vec![
                    sample(20, &bert, Codec::Lz4),
                    sample(21, &bert, Codec::None),
                ],
            ),
        ),
        (
            bench("llama2-70b"),
            query(
                3,
                vec![sample(30, &int32_tokens(&[1, 2, 31999, 7]), Codec::None)],
            ),
        ),
        (
            bench("gptj"),
            query(
                4,
                vec![
                    // Refused: no lz4 for GPT-J, an unknown codec, a size lie.
                    sample(40, &ramp(32, 5), Codec::Lz4),
                    pb::Sample {
                        codec: 7,
                        ..sample(41, b"x", Codec::None)
                    },
                    pb::Sample {
                        decoded_size: 3,
                        ..sample(42, &ramp(100, 0), Codec::Lz4)
                    },
                ],
            ),
        ),
        (
            bench("3d-unet"),
            query(5, vec![sample(50, &vec![0; 4096], Codec::Lz4)]),
        ),
    ]
}

/// `quic_frames` inputs: a control byte, a benchmark byte, then a stream.
pub fn quic_frames() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let mut push = |control: u8, bench: u8, frames: &[Vec<u8>]| {
        let mut input = vec![control, bench];
        for frame in frames {
            input.extend_from_slice(frame);
        }
        seeds.push(input);
    };
    let frame = |kind: quic_request::Kind| framing::encode(&request(kind)).to_vec();
    for (i, (bench, q)) in queries().into_iter().enumerate() {
        let control = [0x0c, 0x03, 0x00, 0x08, 0x05][i % 5];
        let first = frame(quic_request::Kind::Query(q.clone()));
        push(control, bench, std::slice::from_ref(&first));
        // A query stream of several frames, and one that breaks off.
        let again = frame(quic_request::Kind::Query(query(99, vec![])));
        push(control, bench, &[first.clone(), again.clone(), again]);
        push(control, bench, &[first[..first.len() / 2].to_vec()]);
    }
    let name = frame(quic_request::Kind::Name(pb::NameRequest {
        protocol_version: PROTOCOL_VERSION,
    }));
    let info = frame(quic_request::Kind::Info(pb::InfoRequest {}));
    push(0x02, 0, std::slice::from_ref(&name));
    push(0x0f, 0, std::slice::from_ref(&info));
    // Refused: a second request, a query after a name, another version,
    // an empty request, a frame over a small limit.
    push(0x04, 0, &[name.clone(), info.clone()]);
    push(
        0x01,
        0,
        &[info, frame(quic_request::Kind::Query(query(1, vec![])))],
    );
    push(
        0x04,
        0,
        &[framing::encode(&pb::QuicRequest {
            protocol_version: 1,
            kind: Some(quic_request::Kind::Name(pb::NameRequest::default())),
        })
        .to_vec()],
    );
    push(
        0x04,
        0,
        &[framing::encode(&pb::QuicRequest {
            protocol_version: PROTOCOL_VERSION,
            kind: None,
        })
        .to_vec()],
    );
    push(0x1c, 0, std::slice::from_ref(&name));
    seeds
}

/// `codecs` inputs: a control byte, a declared size, then encoded bytes.
pub fn codecs() -> Vec<Vec<u8>> {
    let data: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"netdiv".to_vec(),
        vec![0; 1000],
        ramp(4096, 13),
        (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect(),
    ];
    let mut seeds = Vec::new();
    for d in &data {
        for (control, codec) in [
            (0x00u8, Codec::None),
            (0x05, Codec::Lz4),
            (0x07, Codec::Lz4),
        ] {
            let mut input = vec![control];
            input.extend_from_slice(&(d.len() as u64).to_le_bytes());
            input.extend_from_slice(&codec::encode(codec, d));
            seeds.push(input);
        }
    }
    seeds
}

/// `node_messages` inputs: a message type byte, a benchmark byte, a limit
/// byte, then the message.
pub fn node_messages() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let mut push = |kind: u8, bench: u8, message: Vec<u8>| {
        let mut input = vec![kind, bench, 0];
        input.extend_from_slice(&message);
        seeds.push(input);
    };
    for (bench, q) in queries() {
        push(0, bench, q.encode_to_vec());
        push(
            1,
            bench,
            request(quic_request::Kind::Query(q)).encode_to_vec(),
        );
    }
    push(
        1,
        0,
        request(quic_request::Kind::Name(pb::NameRequest {
            protocol_version: PROTOCOL_VERSION,
        }))
        .encode_to_vec(),
    );
    let unet = bench("3d-unet");
    let llama = bench("llama2-70b");
    let completions = vec![
        (unet, completion(1, &vec![3; 2000], Codec::Lz4)),
        (bench("resnet50"), completion(2, &ramp(8, 1), Codec::None)),
        (llama, first_token_message(3, &int32_tokens(&[42]))),
        (
            llama,
            token_completion(3, &int32_tokens(&[42, 7, 9]), Codec::None, 3),
        ),
        (llama, failed_completion(4, "backend failed")),
    ];
    for (bench, c) in &completions {
        push(2, *bench, c.encode_to_vec());
    }
    let batch = pb::CompletionBatch {
        completions: completions.iter().map(|(_, c)| c.clone()).collect(),
        ..Default::default()
    };
    push(3, unet, batch.encode_to_vec());
    let info = node_info();
    for kind in [
        quic_response::Kind::Completions(batch),
        quic_response::Kind::Info(info.clone()),
        quic_response::Kind::Name(pb::NameResponse {
            name: "node-a".into(),
            protocol_version: PROTOCOL_VERSION,
        }),
        quic_response::Kind::Error("refused".into()),
    ] {
        push(
            4,
            unet,
            pb::QuicResponse { kind: Some(kind) }.encode_to_vec(),
        );
    }
    push(5, bench("resnet50"), info.encode_to_vec());
    seeds
}

/// A node's info with every field set.
fn node_info() -> pb::NodeInfo {
    pb::NodeInfo {
        name: "node-a".into(),
        software_version: "0.1.0".into(),
        protocol_version: PROTOCOL_VERSION,
        backend: "synthetic".into(),
        backend_detail: "batch_cost_us=10".into(),
        nics: vec![pb::Nic {
            name: "eth0".into(),
            speed_mbps: 100_000,
            mtu: 9000,
            mac: "02:00:00:00:00:01".into(),
            state: "up".into(),
            addresses: vec!["10.0.0.2/24".into()],
            kind: "device".into(),
            lower: Vec::new(),
            backed: true,
            driver: "mlx5_core".into(),
        }],
        codecs: vec![pb::Codec::None as i32, pb::Codec::Lz4 as i32],
        hostname: "sut-1".into(),
        os: "linux".into(),
        max_batch_size: 8,
        max_batch_wait_us: 100,
        batches_run: 5,
        samples_run: 40,
        largest_batch: 8,
        response_codec: pb::Codec::Lz4 as i32,
        benchmark: "resnet50".into(),
        concurrent_sequences: 64,
        host_id: "abc".into(),
        cpu_latency_us: Some(0),
        host: Some(pb::HostIdentity {
            machine_id: "m".into(),
            boot_id: "b".into(),
            product_uuid: "u".into(),
            netns: "net:[1]".into(),
            virtualization: String::new(),
        }),
        engine: Some(pb::EngineLocation {
            url: "http://127.0.0.1:8000".into(),
            addresses: vec!["127.0.0.1".into()],
            on_this_host: true,
        }),
        hardware: Some(pb::Hardware {
            cpu_model: "cpu".into(),
            cpu_sockets: 2,
            cores_per_socket: 8,
            memory_bytes: 1 << 30,
            accelerators: vec!["gpu".into()],
        }),
    }
}

/// sut-node config files: every key at its default (serialized from
/// [`FileConfig::default`], so new keys are seeded as they are added), and
/// one file per backend.
pub fn sut_node_config() -> Vec<Vec<u8>> {
    let mut seeds = vec![toml::to_string(&FileConfig::default())
        .expect("the default config serializes")
        .into_bytes()];
    for text in [
        "transport = \"both\"\nbenchmark = \"resnet50\"\nresponse_codec = \"none\"\n\
         max_sample_bytes = 1048576\nbackend = \"synthetic\"\n\n[synthetic]\n\
         batch_cost_us = 100\nsample_cost_us = 5\ndevices = 2\noutput_bytes = 4\n\n\
         [batching]\nmax_batch_size = 8\nmax_wait_us = 200\n\n[limits]\n\
         max_connections = 16\nmax_streams_per_connection = 8\nmax_samples_held = 4096\n\
         max_bytes_held = 67108864\nmax_unread_answers = 64\n",
        "benchmark = \"3d-unet-99.9\"\nresponse_codec = \"lz4\"\ntransport = \"quic\"\n\
         [synthetic]\noutput_fraction = 0.5\n",
        "benchmark = \"llama2-70b-interactive\"\n[llm]\nprefill_us_per_token = 0.5\n\
         decode_us_per_token = 500\nmax_sequences = 128\ndevices = 2\n\
         output_tokens_mean = 200\noutput_tokens_min = 2\noutput_tokens_max = 1000\n\
         token_ids = \"int64\"\n",
        "benchmark = \"deepseek-r1\"\nbackend = \"synthetic-llm\"\n[llm]\noutput_tokens = 300\n",
        "benchmark = \"digits\"\nbackend = \"onnx\"\n[onnx]\nmodel = \"digits.onnx\"\n\
         input_name = \"x\"\nwire_dtype = \"uint8\"\nscale = 0.00392\noffset = -0.5\n\
         postprocess = \"argmax\"\nexecution_provider = \"cpu\"\n\
         runtime_library = \"/opt/ort/libonnxruntime.so\"\n",
        "benchmark = \"llama3.1-8b\"\nbackend = \"openai\"\n[openai]\n\
         url = \"http://127.0.0.1:8080\"\napi = \"vllm\"\nmodel = \"m\"\nmax_tokens = 128\n\
         ignore_eos = true\nstop_token_ids = [2, 128001]\nmax_in_flight = 64\n\
         max_waiting = 0\nfirst_token_timeout_s = 30.0\n",
    ] {
        seeds.push(text.as_bytes().to_vec());
    }
    seeds
}

/// LoadGen config files: the embedded mlperf.conf, a user.conf with every
/// number syntax the official parser takes, and an audit.config.
pub fn loadgen_config() -> Vec<Vec<u8>> {
    use loadgen_node::engine::settings::EMBEDDED_MLPERF_CONF;
    vec![
        EMBEDDED_MLPERF_CONF.as_bytes().to_vec(),
        b"# user.conf\n\
          *.Server.target_qps = 100\n\
          resnet50.Offline.target_qps = 1000.5\n\
          resnet50.SingleStream.target_latency = 10\n\
          *.*.min_duration = 600000\n\
          *.*.max_duration = 0\n\
          gptj.Offline.min_query_count = 0x10\n\
          *.*.performance_sample_count_override = 017\n\
          *.SingleStream.sample_concatenate_permutation = 1\n\
          resnet50.Server.target_latency_percentile = 99.9\n\
          resnet50.Server.max_async_queries = -1\n\
          resnet50.MultiStream.samples_per_query = 8\n"
            .to_vec(),
        b"llama2-70b.Server.use_token_latencies = 1\n\
          llama2-70b.Server.ttft_latency = 2000\n\
          llama2-70b.Server.tpot_latency = 200\n\
          llama2-70b.*.infer_token_latencies = 1\n\
          llama2-70b.*.token_latency_scaling_factor = 69\n\
          wan-2.2-t2v-a14b.Offline.target_qps = 1e-3\n"
            .to_vec(),
        b"# audit.config\n\
          *.*.mode = 2\n\
          *.*.accuracy_log_rng_seed = 720381539243781796\n\
          *.*.accuracy_log_sampling_target = 128\n\
          *.*.performance_issue_same = 1\n\
          *.*.performance_issue_same_index = 3\n\
          *.*.performance_issue_unique = 0\n\
          *.*.test05 = 1\n"
            .to_vec(),
    ]
}

/// A `.npy` file with a hand-written header dict of any version.
pub fn npy_file(version: (u8, u8), dict: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version.0, version.1]);
    if version.0 == 1 {
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// The header dict numpy writes for `dtype` and `shape`.
pub fn npy_dict(dtype: DType, shape: &[usize]) -> String {
    let shape = match shape {
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}\n",
        dtype.npy_descr()
    )
}

/// `.npy` files of every dtype, of several shapes and all three versions.
pub fn npy() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let shapes: [&[usize]; 5] = [&[3, 5, 7], &[5], &[], &[0], &[2, 1, 2]];
    for (i, &dtype) in DType::ALL.iter().enumerate() {
        let shape = shapes[i % shapes.len()];
        let len = shape.iter().product::<usize>() * dtype.size();
        let version = [(1, 0), (2, 0), (3, 0)][i % 3];
        seeds.push(npy_file(version, &npy_dict(dtype, shape), &ramp(len, 11)));
    }
    // Python 2 longs, double quotes, other keys, a list shape, key order.
    seeds.push(npy_file(
        (1, 0),
        "{\"descr\": \"<f2\", \"fortran_order\": False, \"shape\": (2L,), 'extra': [1, None]}\n",
        &[0; 4],
    ));
    seeds.push(npy_file(
        (3, 0),
        "{'shape': [2, 2], 'fortran_order': False, 'descr': '<i4'}      \n",
        &[1; 16],
    ));
    seeds
}

/// Tokens of protobuf messages: varints at their edges, field tags of
/// the session layer's messages, the protocol version, a frame prefix.
pub fn protobuf_dictionary() -> Vec<Vec<u8>> {
    let mut d: Vec<Vec<u8>> = vec![
        vec![0x80, 0x80, 0x80, 0x80, 0x01],
        vec![0xff; 9],
        vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        vec![0x08, PROTOCOL_VERSION as u8],
        vec![0x00, 0x00, 0x00, 0x00],
        vec![0x10, 0x00, 0x00, 0x00],
        vec![0x7f, 0xff, 0xff, 0xff],
        vec![0x18, 0x01],
        vec![0x18, 0x07],
    ];
    // Tag bytes of fields 1 to 17, each wire type that occurs.
    for field in 1u8..=15 {
        for wire_type in [0u8, 2] {
            d.push(vec![field << 3 | wire_type]);
        }
    }
    d.push(vec![0x82, 0x01]);
    d.push(vec![0x8a, 0x01]);
    d
}

/// Tokens of lz4 blocks: token bytes, extended lengths, offsets.
pub fn lz4_dictionary() -> Vec<Vec<u8>> {
    vec![
        vec![0x00],
        vec![0xf0],
        vec![0x0f],
        vec![0xff],
        vec![0x1f, 0x01, 0x00],
        vec![0xff, 0xff, 0xff],
        vec![0x01, 0x00],
        vec![0x00, 0x00],
        vec![0xff, 0xff],
        vec![0x40, 0x41, 0x42, 0x43],
    ]
}

/// The keys and sections of a sut-node config (from the default file, so
/// new keys join by themselves) and TOML's edge values.
pub fn toml_dictionary() -> Vec<Vec<u8>> {
    let default = toml::to_string(&FileConfig::default()).unwrap_or_default();
    let mut d: Vec<Vec<u8>> = default
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('[') {
                Some(line.to_string())
            } else {
                line.split(" = ").next().map(|key| format!("\n{key} = "))
            }
        })
        .filter(|token| !token.trim().is_empty())
        .map(String::into_bytes)
        .collect();
    for token in [
        "benchmark = ",
        "response_codec = ",
        "max_sample_bytes = ",
        "transport = ",
        "backend = ",
        "\"resnet50\"",
        "\"llama2-70b\"",
        "\"3d-unet-99\"",
        "\"gpt-oss-120b\"",
        "\"lz4\"",
        "\"quic\"",
        "\"onnx\"",
        "\"openai\"",
        "\"synthetic-llm\"",
        "\"int64\"",
        "\"http://127.0.0.1:8080\"",
        "\"vllm\"",
        "\"argmax\"",
        "\"cuda\"",
        "[llm]",
        "[openai]",
        "[onnx]",
        "[limits]",
        "\n",
        "\"",
        "'",
        "'''",
        "\"\"\"",
        "[",
        "]",
        "{",
        "}",
        ",",
        ".",
        "=",
        "nan",
        "inf",
        "-inf",
        "-0.0",
        "1e400",
        "0.5",
        "-1",
        "0",
        "18446744073709551615",
        "9223372036854775807",
        "4294967295",
        "true",
        "false",
        "1979-05-27T07:32:00Z",
        "\\u0000",
    ] {
        d.push(token.as_bytes().to_vec());
    }
    d
}

/// Every key, scenario and model of the embedded mlperf.conf, and numbers
/// in each syntax C's strtoull and strtod take.
pub fn loadgen_conf_dictionary() -> Vec<Vec<u8>> {
    use loadgen_node::engine::settings::EMBEDDED_MLPERF_CONF;
    let mut words: Vec<String> = EMBEDDED_MLPERF_CONF
        .split_whitespace()
        .filter(|w| !w.starts_with('#'))
        .flat_map(|w| w.split('.').map(str::to_string).collect::<Vec<_>>())
        .collect();
    words.sort();
    words.dedup();
    let mut d: Vec<Vec<u8>> = words.into_iter().map(String::into_bytes).collect();
    for token in [
        " = ",
        "=",
        "\n",
        "#",
        "# ",
        "*.",
        ".*.",
        "*.*.",
        "0x",
        "0X1f",
        "017",
        "-",
        "+",
        "1e308",
        "1e-308",
        "1e999",
        "nan",
        "inf",
        "-0",
        "18446744073709551615",
        "18446744073709551616",
        "9223372036854775807",
        "4294967295",
        "2147483648",
        ".5",
        "5.",
    ] {
        d.push(token.as_bytes().to_vec());
    }
    d
}

/// `.npy` header tokens.
pub fn npy_dictionary() -> Vec<Vec<u8>> {
    let mut d: Vec<Vec<u8>> = [
        "\x01\x00",
        "\x02\x00",
        "\x03\x00",
        "'descr'",
        "'fortran_order'",
        "'shape'",
        "True",
        "False",
        "None",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        " ",
        "\n",
        "L",
        "-1",
        "0",
        "4294967296",
        "18446744073709551616",
        "170141183460469231731687303715884105728",
        "\\'",
        "'",
        "\"",
        "'>i4'",
        "'<f8'",
    ]
    .iter()
    .map(|t| t.as_bytes().to_vec())
    .collect();
    d.push(b"\x93NUMPY".to_vec());
    for dtype in DType::ALL {
        d.push(format!("'{}'", dtype.npy_descr()).into_bytes());
    }
    d
}
