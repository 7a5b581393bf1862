//! A node that breaks the token protocol on purpose, behind the real QDL
//! and engine: a test-only gRPC `SutNode` on loopback that, for every
//! sample of an LLM benchmark, sends a first token for a sample it was
//! never given, the sample's own first token, its completion, then a
//! second first token and a second completion of the finished sample.
//! Everything the node should not have sent must be dropped and counted by
//! the QDL, never crash the run or count twice: the run is VALID, the
//! LoadGen logs no runtime error, and every sample is completed once.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use futures::Stream;
use netdiv_proto::pb;
use netdiv_proto::pb::sut_node_server::{SutNode, SutNodeServer};
use netdiv_proto::sample::{first_token_message, token_completion};
use netdiv_tests::mlperf_logs::parse_issued;
use netdiv_tests::network_run::loadgen;
use netdiv_tests::{test_dir, write_file, UserConf};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// A response id no sample of the run has.
const FOREIGN_ID_OFFSET: u64 = 1 << 40;
const TOKENS: i64 = 4;

struct RogueNode;

type Batches = Pin<Box<dyn Stream<Item = Result<pb::CompletionBatch, Status>> + Send>>;

fn batch(completions: Vec<pb::Completion>) -> Result<pb::CompletionBatch, Status> {
    Ok(pb::CompletionBatch {
        completions,
        ..Default::default()
    })
}

#[tonic::async_trait]
impl SutNode for RogueNode {
    async fn name(
        &self,
        _: Request<pb::NameRequest>,
    ) -> Result<Response<pb::NameResponse>, Status> {
        Ok(Response::new(pb::NameResponse {
            name: "rogue".into(),
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
        }))
    }

    async fn info(&self, _: Request<pb::InfoRequest>) -> Result<Response<pb::NodeInfo>, Status> {
        Ok(Response::new(pb::NodeInfo {
            name: "rogue".into(),
            protocol_version: netdiv_proto::PROTOCOL_VERSION,
            benchmark: "llama2-70b".into(),
            codecs: vec![pb::Codec::None as i32],
            backend: "rogue".into(),
            ..Default::default()
        }))
    }

    type InferStream = Batches;

    async fn infer(
        &self,
        request: Request<Streaming<pb::Query>>,
    ) -> Result<Response<Self::InferStream>, Status> {
        let mut queries = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            while let Ok(Some(query)) = queries.message().await {
                for sample in query.samples {
                    let id = sample.response_id;
                    let token = &sample.data[..4.min(sample.data.len())];
                    let before = vec![
                        first_token_message(id + FOREIGN_ID_OFFSET, token),
                        first_token_message(id, token),
                    ];
                    let after = vec![
                        token_completion(id, &sample.data, pb_none(), TOKENS),
                        first_token_message(id, token),
                        token_completion(id, &sample.data, pb_none(), TOKENS),
                    ];
                    if tx.send(batch(before)).await.is_err() || tx.send(batch(after)).await.is_err()
                    {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

fn pb_none() -> netdiv_proto::codec::Codec {
    netdiv_proto::codec::Codec::None
}

/// Serves the rogue node on a loopback port until the runtime ends.
fn serve(runtime: &tokio::runtime::Runtime) -> Result<SocketAddr> {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    runtime.spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let _ = tonic::transport::Server::builder()
            .add_service(SutNodeServer::new(RogueNode))
            .serve_with_incoming(incoming)
            .await;
    });
    Ok(addr)
}

#[test]
fn stray_first_tokens_and_second_completions_are_dropped_not_counted() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let addr = serve(&runtime)?;
    let dir = test_dir("misbehaving-node")?;
    let conf = UserConf::new()
        .set("*.Server.target_qps", 500)
        .set("*.Server.min_duration", 500)
        .set("*.Server.min_query_count", 600)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let conf = write_file(&dir, "user.conf", &conf.to_string())?;
    let flags: Vec<String> = [
        "--scenario",
        "Server",
        "--benchmark",
        "llama2-70b",
        "--sample-shape",
        "8",
        "--sample-dtype",
        "int32",
        "--total-sample-count",
        "600",
        "--performance-sample-count",
        "600",
        "--user-conf",
        conf.to_str().context("utf-8 path")?,
        "--record-issued",
        "issued.txt",
        "--progress",
        "never",
        "--sut-node",
        &format!("grpc://{addr}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = loadgen(&dir, &flags, Duration::from_secs(60))?;
    run.expect_success()?;
    let summary = run.summary()?;
    ensure!(netdiv_tests::mlperf_logs::says_valid(&summary), "{summary}");
    let detail = run.detail()?;
    let errors = detail.values("error_runtime");
    ensure!(
        errors.is_empty(),
        "the LoadGen saw the node's mistakes: {errors:?}"
    );
    // Each sample: one foreign and one second first token dropped (the
    // count is read as the run ends, so the last sample's may still be on
    // their way).
    let issued = parse_issued(&std::fs::read_to_string(dir.join("issued.txt"))?)?;
    let dropped = run
        .events()
        .iter()
        .find_map(|r| r["late_first_tokens"].as_u64())
        .map(|n| n as usize)
        .with_context(|| format!("no count of dropped first tokens in:\n{}", run.stderr))?;
    let expected = 2 * issued.len();
    ensure!(
        (expected - 2..=expected).contains(&dropped),
        "{dropped} first tokens dropped, expected {expected}"
    );
    // Each sample completed once, with its own bytes and count.
    let entries = run.accuracy()?;
    ensure!(
        entries.len() == issued.len(),
        "{} answers for {} samples",
        entries.len(),
        issued.len()
    );
    for e in &entries {
        ensure!(
            e.token_count == Some(TOKENS),
            "token_count {:?}",
            e.token_count
        );
        let first = e.token_data.as_deref().unwrap_or_default();
        ensure!(
            e.data.starts_with(first) && first.len() == 8,
            "first token {first} of {}",
            e.data
        );
    }
    Ok(())
}
