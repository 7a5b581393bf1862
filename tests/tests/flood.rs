//! A node flooded past its limits keeps serving a good client with bounded
//! memory. One real sut-node (gRPC and QUIC, small limits) serves a real
//! `loadgen-node` Server run while, for most of the run, other clients:
//! open far more TCP connections than it takes (some writing random
//! bytes), send random UDP datagrams to its QUIC port, open QUIC and gRPC
//! streams that send queries and never read the answers, and send
//! oversized and malformed frames. The run must be VALID with every sample
//! answered exactly once, the node's open connections never pass its
//! limit, and its resident memory stays within a bound.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use netdiv_proto::framing;
use netdiv_proto::pb::{self, quic_request};
use netdiv_tests::configs::node_toml;
use netdiv_tests::network_run::{check_exactly_once, loadgen};
use netdiv_tests::sut_client::{
    grpc_client, plain_query, quic_connect, versioned, ClientCert, NodeProcess,
};
use netdiv_tests::{test_dir, write_file, UserConf};
use sut_node::backend::synthetic::SyntheticConfig;
use sut_node::config::FileConfig;
use sut_node::limits::LimitsConfig;

/// The node's limits in this test: small, so the flood passes them.
const MAX_CONNECTIONS: usize = 8;
const MAX_STREAMS: u32 = 8;

/// How much the node's resident memory may grow under the flood. The
/// flood's never-read streams can fill at most the flow-control windows
/// of the connections the node admits, and the samples it holds are
/// capped at `max_bytes_held`.
const RSS_GROWTH_BOUND_MB: f64 = 200.0;

/// Queries a never-reading stream sends at once before it slows to one
/// per [`TRICKLE`].
const BURST: u64 = 32;
const TRICKLE: Duration = Duration::from_millis(100);

/// Longest wait for one of the flood's connections: past it, the attempt
/// is given up, so the flood stops when the run does.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Resident memory of the node, in MB.
fn rss_mb(pid: u32) -> Result<f64> {
    netdiv_tests::process::rss_mb(pid).context("the node is gone")
}

/// Random bytes from a small xorshift (no need for more).
fn noise(seed: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed as u8
        })
        .collect()
}

/// What the flood did, for the test's message.
#[derive(Default)]
struct Flooded {
    tcp_opened: AtomicU64,
    tcp_closed_by_node: AtomicU64,
    datagrams: AtomicU64,
    never_read_streams: AtomicU64,
    bad_frames_refused: AtomicU64,
}

/// Opens TCP connections and keeps them; every fourth writes noise.
async fn tcp_flood(node: &NodeProcess, stop: &AtomicBool, done: &Flooded) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = node.grpc.expect("gRPC");
    let mut held = Vec::new();
    let mut seed = 7u64;
    while !stop.load(Ordering::Relaxed) && held.len() < 200 {
        // A full accept backlog drops SYNs: a connect may otherwise wait
        // out TCP's retries, long after the flood should have stopped.
        let Ok(Ok(mut socket)) =
            tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await
        else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        done.tcp_opened.fetch_add(1, Ordering::Relaxed);
        if held.len() % 4 == 0 {
            let _ = socket.write_all(&noise(&mut seed, 4096)).await;
        }
        // A connection past the limit is closed at once: its read ends.
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(20), socket.read(&mut byte)).await
        {
            done.tcp_closed_by_node.fetch_add(1, Ordering::Relaxed);
        }
        held.push(socket);
    }
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Random datagrams at the QUIC port.
async fn udp_flood(node: &NodeProcess, stop: &AtomicBool, done: &Flooded) -> Result<()> {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
    let addr = node.quic.expect("QUIC");
    let mut seed = 11u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..200 {
            let len = 1 + (seed % 1400) as usize;
            let _ = socket.send_to(&noise(&mut seed, len), addr).await;
            done.datagrams.fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// QUIC connections whose streams send queries and never read answers,
/// and streams with an oversized or a malformed frame.
async fn quic_flood(node: &NodeProcess, stop: &AtomicBool, done: &Flooded) -> Result<()> {
    let mut writers = Vec::new();
    let mut connections = Vec::new();
    for _ in 0..4 {
        let Ok(Ok(conn)) = tokio::time::timeout(
            CONNECT_TIMEOUT,
            quic_connect(node, ClientCert::None, netdiv_proto::ALPN),
        )
        .await
        else {
            continue;
        };
        for s in 0..MAX_STREAMS * 2 {
            let conn = conn.clone();
            writers.push(tokio::spawn(async move {
                let Ok((mut send, _never_read)) = conn.open_bi().await else {
                    return;
                };
                let sample = vec![s as u8; 150_528];
                for q in 0u64.. {
                    let query = plain_query(q, q, std::slice::from_ref(&sample));
                    let frame = framing::encode(&pb::QuicRequest {
                        protocol_version: netdiv_proto::PROTOCOL_VERSION,
                        kind: Some(quic_request::Kind::Query(query)),
                    });
                    if send.write_all(&frame).await.is_err() {
                        return;
                    }
                    // A burst, then a trickle: a slow client, not a load
                    // test of the backend.
                    if q >= BURST {
                        tokio::time::sleep(TRICKLE).await;
                    }
                }
            }));
            done.never_read_streams.fetch_add(1, Ordering::Relaxed);
        }
        connections.push(conn);
    }
    // Oversized and malformed frames, each on a stream of its own.
    let mut seed = 13u64;
    if let Ok(Ok(conn)) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        quic_connect(node, ClientCert::None, netdiv_proto::ALPN),
    )
    .await
    {
        while !stop.load(Ordering::Relaxed) {
            let mut oversized = u32::MAX.to_be_bytes().to_vec();
            oversized.extend(noise(&mut seed, 64));
            let mut malformed = 200u32.to_be_bytes().to_vec();
            malformed.extend(noise(&mut seed, 200));
            for bytes in [oversized, malformed] {
                let refused = tokio::time::timeout(Duration::from_secs(2), async {
                    let (mut send, mut recv) = conn.open_bi().await?;
                    send.write_all(&bytes).await?;
                    let _ = send.finish();
                    anyhow::Ok(recv.read_to_end(1 << 16).await?)
                })
                .await;
                if let Ok(Ok(answer)) = refused {
                    if !answer.is_empty() {
                        done.bad_frames_refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for w in writers {
        w.abort();
    }
    Ok(())
}

/// gRPC streams that send queries and never read the answers.
async fn grpc_flood(node: &NodeProcess, stop: &AtomicBool, done: &Flooded) -> Result<()> {
    let mut held = Vec::new();
    for s in 0..4u8 {
        let Ok(Ok(mut client)) =
            tokio::time::timeout(CONNECT_TIMEOUT, grpc_client(node, ClientCert::None)).await
        else {
            continue;
        };
        let sample = vec![s; 150_528];
        let queries = futures::stream::iter(0u64..).then(move |q| {
            let query = plain_query(q, q, std::slice::from_ref(&sample));
            async move {
                if q >= BURST {
                    tokio::time::sleep(TRICKLE).await;
                }
                query
            }
        });
        if let Ok(response) =
            tokio::time::timeout(Duration::from_secs(2), client.infer(versioned(queries))).await
        {
            done.never_read_streams.fetch_add(1, Ordering::Relaxed);
            held.push((client, response));
        }
    }
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[test]
fn a_flooded_node_keeps_serving_a_good_client_with_bounded_memory() -> Result<()> {
    let dir = test_dir("flood")?;
    let config = FileConfig {
        benchmark: Some("resnet50".into()),
        synthetic: SyntheticConfig {
            batch_cost_us: 200,
            sample_cost_us: 50,
            output_bytes: 8,
            ..SyntheticConfig::default()
        },
        limits: LimitsConfig {
            max_connections: Some(MAX_CONNECTIONS),
            max_streams_per_connection: Some(MAX_STREAMS),
            max_bytes_held: Some(64 << 20),
            max_unread_answers: Some(64),
            ..LimitsConfig::default()
        },
        ..FileConfig::default()
    };
    let config = write_file(&dir, "sut-node.toml", &node_toml(&config)?)?;
    let certs = dir.join("certs");
    sut_node::tls::dev_certificates(&certs, false)?;
    let node = NodeProcess::start(
        "flooded",
        Some(&certs),
        &[
            "--transport",
            "both",
            "--config",
            config.to_str().context("utf-8")?,
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    )?;
    let pid = node.child.id();
    let before = rss_mb(pid)?;
    let conf = UserConf::new()
        .set("*.*.min_duration", 8000)
        .set("*.Server.target_qps", 200)
        .set("*.Server.target_latency", 1000)
        .set("*.Server.min_query_count", 100)
        .set("*.*.accuracy_log_sampling_target", 100000000);
    let conf = write_file(&dir, "user.conf", &conf.to_string())?;
    let quic = node.quic.context("QUIC")?;
    let flags: Vec<String> = [
        "--scenario",
        "Server",
        "--benchmark",
        "resnet50",
        "--total-sample-count",
        "256",
        "--performance-sample-count",
        "256",
        "--user-conf",
        conf.to_str().context("utf-8")?,
        "--record-issued",
        "issued.txt",
        "--no-report",
        "--sut-node",
        &format!("quic://{quic}"),
        "--dev-tls",
        certs.to_str().context("utf-8")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    netdiv_tests::loadgen_node_bin()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flooded = Arc::new(Flooded::default());
    let peak = Arc::new(AtomicU64::new(0));
    let max_open = Arc::new(AtomicU64::new(0));
    let run = std::thread::scope(|scope| -> Result<_> {
        let runner = scope.spawn(|| loadgen(&dir, &flags, Duration::from_secs(90)));
        // The good client connects first; then the flood.
        std::thread::sleep(Duration::from_millis(1500));
        let flood = scope.spawn(|| -> Result<()> {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(async {
                let (a, b, c, d) = tokio::join!(
                    tcp_flood(&node, &stop, &flooded),
                    udp_flood(&node, &stop, &flooded),
                    quic_flood(&node, &stop, &flooded),
                    grpc_flood(&node, &stop, &flooded),
                );
                let () = a;
                b.and(c).and(d)
            })
        });
        let watcher = scope.spawn(|| -> Result<()> {
            let metrics = node.metrics.context("metrics")?;
            while !stop.load(Ordering::Relaxed) {
                let mb = rss_mb(pid)?;
                peak.fetch_max(mb as u64, Ordering::Relaxed);
                let scrape = netdiv_tests::prometheus::scrape(metrics)?;
                for transport in ["grpc", "quic"] {
                    let open = scrape
                        .values("netdiv_node_open_connections", &[("transport", transport)])
                        .first()
                        .copied()
                        .unwrap_or(0.0);
                    max_open.fetch_max(open as u64, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(())
        });
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(6) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let run = runner.join().expect("loadgen thread");
        stop.store(true, Ordering::Relaxed);
        flood.join().expect("flood thread")?;
        watcher.join().expect("watcher thread")?;
        run
    })?;
    let peak = peak.load(Ordering::Relaxed) as f64;
    let report = format!(
        "RSS {before:.0} MB before, peak {peak:.0} MB; at most {} connections open per \
         transport; {} TCP connections opened, {} closed by the node at once; {} datagrams; \
         {} never-read streams; {} bad frames answered with an error",
        max_open.load(Ordering::Relaxed),
        flooded.tcp_opened.load(Ordering::Relaxed),
        flooded.tcp_closed_by_node.load(Ordering::Relaxed),
        flooded.datagrams.load(Ordering::Relaxed),
        flooded.never_read_streams.load(Ordering::Relaxed),
        flooded.bad_frames_refused.load(Ordering::Relaxed),
    );
    eprintln!("{report}");
    run.expect_valid().context(report.clone())?;
    check_exactly_once(&run, &dir.join("issued.txt"))?;
    ensure!(
        max_open.load(Ordering::Relaxed) <= MAX_CONNECTIONS as u64,
        "more connections open than the limit: {report}"
    );
    ensure!(
        flooded.tcp_closed_by_node.load(Ordering::Relaxed) > 0,
        "the flood never passed the connection limit: {report}"
    );
    ensure!(
        flooded.bad_frames_refused.load(Ordering::Relaxed) > 0,
        "no bad frame was answered: {report}"
    );
    ensure!(
        peak - before < RSS_GROWTH_BOUND_MB,
        "memory grew by {:.0} MB under the flood: {report}",
        peak - before
    );
    // The node lives on.
    ensure!(
        node_is_alive(&node),
        "the node died under the flood: {}",
        node.stderr()
    );
    Ok(())
}

fn node_is_alive(node: &NodeProcess) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(node.child.id() as libc::pid_t, 0) == 0 }
}
