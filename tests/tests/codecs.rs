//! The node and the QDL decide codecs from one benchmark table, so they
//! must accept and refuse the same codec for every name of every benchmark
//! in both directions. Each side is asked through the entry point it really
//! uses: for inputs, the QSL's sample store (which decides what the QDL
//! sends) and a running node core (which decodes what arrives); for
//! outputs, the node's configuration (which decides what it may answer in)
//! and the decoder the QDL runs on every response.

use anyhow::{bail, Result};
use loadgen_node::qsl::{SampleSource, SampleStore};
use netdiv_proto::benchmark::{Benchmark, Direction, TABLE};
use netdiv_proto::codec::{self, Codec};
use netdiv_proto::pb;
use netdiv_proto::sample::completion_output;
use sut_node::backend::synthetic_llm::LlmConfig;
use sut_node::backend::BackendConfig;
use sut_node::config::{FileConfig, NodeConfig};
use sut_node::node::{Node, NodeSettings};

/// Every name each benchmark answers to: canonical, with each accuracy
/// target, interactive (with and without a target), the checker's.
fn every_name() -> Vec<String> {
    let mut names = Vec::new();
    for spec in TABLE {
        let mut bases = vec![spec.name.to_string()];
        if spec.interactive {
            bases.push(format!("{}-interactive", spec.name));
        }
        for base in bases {
            names.extend(spec.accuracy_targets.iter().map(|t| format!("{base}-{t}")));
            names.push(base);
        }
        names.extend(spec.checker_name.map(String::from));
    }
    names
}

/// Whether the QDL's side sends samples stored in `codec`.
fn qdl_sends(benchmark: Benchmark, codec: Codec) -> bool {
    let source = SampleSource::synthetic(&benchmark, 1);
    SampleStore::new(benchmark, source, codec, 1).is_ok()
}

/// Whether a running node runs a sample that arrives in `codec`. The node
/// runs the backend its benchmark gets by default: the synthetic LLM (at
/// no cost) for benchmarks with token latencies, the batch model else.
async fn node_runs(benchmark: Benchmark, codec: Codec) -> Result<bool> {
    let node = Node::from_config(
        NodeSettings {
            name: "codecs".into(),
            benchmark,
            response_codec: Codec::None,
            max_sample_bytes: 1 << 20,
            batching: Default::default(),
            limits: sut_node::limits::Limits::defaults(&benchmark),
            run_on_io_thread: false,
        },
        &BackendConfig {
            llm: LlmConfig::zero_cost(),
            ..BackendConfig::default()
        },
    )?;
    let input = vec![7u8; 4096];
    let (reply, mut replies) = tokio::sync::mpsc::unbounded_channel();
    let reply = sut_node::node::ReplyTo::new(reply);
    node.submit_query(
        pb::Query {
            query_id: 1,
            samples: vec![pb::Sample {
                response_id: 1,
                data: codec::encode(codec, &input).into(),
                codec: codec.to_proto() as i32,
                decoded_size: input.len() as u64,
            }],
            ..Default::default()
        },
        &reply,
    );
    let Some(completion) = replies.recv().await else {
        bail!("the node sent no completion");
    };
    node.begin_shutdown();
    node.stop_devices();
    if !completion.error.is_empty() && !completion.error.contains("the rules allow no") {
        bail!("unexpected error: {}", completion.error);
    }
    // A token model's first message for a sample it runs is its first token.
    if completion.error.is_empty() && completion.first_token != benchmark.uses_token_latencies() {
        bail!("{benchmark}: first message {completion:?}");
    }
    Ok(completion.error.is_empty())
}

/// Whether a node may be configured to answer in `codec`.
fn node_answers_in(name: &str, codec: Codec) -> bool {
    let file = FileConfig {
        benchmark: Some(name.to_string()),
        response_codec: Some(codec.name().to_string()),
        ..FileConfig::default()
    };
    NodeConfig::from_file(file).is_ok()
}

/// Whether the QDL hands a response in `codec` to the LoadGen.
fn qdl_takes_response(benchmark: &Benchmark, codec: Codec) -> bool {
    let output = vec![3u8; 4096];
    let completion = netdiv_proto::sample::completion(1, &output, codec);
    completion_output(completion, benchmark, 1 << 20).is_ok_and(|d| d[..] == output[..])
}

#[tokio::test]
async fn node_and_qdl_agree_on_every_codec_of_every_benchmark() -> Result<()> {
    let names = every_name();
    assert!(names.len() > TABLE.len(), "aliases are covered: {names:?}");
    let mut lz4_inputs = Vec::new();
    let mut lz4_outputs = Vec::new();
    for name in &names {
        let benchmark = Benchmark::parse(name)?;
        for &codec in Codec::ALL {
            let allowed_in = benchmark.check_codec(Direction::Input, codec).is_ok();
            let (sends, runs) = (
                qdl_sends(benchmark, codec),
                node_runs(benchmark, codec).await?,
            );
            if sends != runs || sends != allowed_in {
                bail!("{name} inputs in {codec}: QDL sends {sends}, node runs {runs}, table {allowed_in}");
            }
            let allowed_out = benchmark.check_codec(Direction::Output, codec).is_ok();
            let (answers, takes) = (
                node_answers_in(name, codec),
                qdl_takes_response(&benchmark, codec),
            );
            if answers != takes || answers != allowed_out {
                bail!("{name} outputs in {codec}: node answers {answers}, QDL takes {takes}, table {allowed_out}");
            }
            if codec == Codec::Lz4 && allowed_in {
                lz4_inputs.push(benchmark.name());
            }
            if codec == Codec::Lz4 && allowed_out {
                lz4_outputs.push(benchmark.name());
            }
        }
    }
    // The rules' table: lossless inputs for five benchmarks, outputs for
    // 3D-UNet alone.
    lz4_inputs.dedup();
    lz4_outputs.dedup();
    assert_eq!(
        lz4_inputs,
        ["resnet50", "retinanet", "bert", "3d-unet", "dlrm-v2"]
    );
    assert_eq!(lz4_outputs, ["3d-unet"]);
    Ok(())
}
