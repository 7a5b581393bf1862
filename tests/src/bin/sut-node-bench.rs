//! `sut-node-bench`: queries per second through one `sut-node` on loopback.
//!
//! Starts the release `sut-node` with the synthetic backend at zero cost
//! (`--benchmark resnet50`, which allows lz4 inputs) and drives it with one
//! client on one connection that keeps a window of W queries outstanding
//! (one sample per query):
//!
//! * transports: gRPC without TLS, gRPC with TLS, QUIC (always TLS; both
//!   TLS transports on one `--dev-tls` node);
//! * samples: 4 bytes and 150528 bytes (a 224x224x3 ResNet-50 image)
//!   without a codec, and 150528 bytes of an image-like gradient sent as
//!   lz4 (encoded once up front, like a QSL load would; decoded on the node).
//!
//! gRPC: one `Infer` stream, queries fed through an mpsc channel. QUIC: W
//! tasks, each with one query (one bidirectional stream) at a time. Every
//! completion is checked: no error, output equal to the synthetic
//! backend's `expected_output(input, 8)`, each response id exactly once.
//!
//! Usage: `cargo run --release -p netdiv-tests --bin sut-node-bench`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use netdiv_proto::codec::{self, Codec};
use netdiv_proto::pb;
use netdiv_tests::bench::{finish_benchmark, machine_description};
use netdiv_tests::sut_client::{
    grpc_client, quic_connect, quic_query, versioned, ClientCert, NodeProcess,
};
use netdiv_tests::test_dir;
use sut_node::backend::synthetic::expected_output;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Measures queries/s and round-trip latency through one sut-node
/// (synthetic backend, zero cost) on loopback, over gRPC (plain and TLS) and
/// QUIC, with 4-byte and 150528-byte samples (one per query) and 150528-byte
/// lz4 samples, one client connection keeping W queries outstanding. Prints
/// a markdown table. NETDIV_SUT_NODE uses a prebuilt sut-node.
#[derive(Debug, clap::Parser)]
#[command(name = "sut-node-bench")]
struct Cli {
    /// Measured seconds per case, after a short warm-up [default: 3; 1 with --quick].
    #[arg(long)]
    seconds: Option<f64>,
    /// 1 s per case.
    #[arg(long)]
    quick: bool,
    /// Queries outstanding.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    window: u64,
}

/// Decoded size of the large samples: one 224x224x3 ResNet-50 input.
const LARGE: usize = 224 * 224 * 3;
/// The synthetic backend's default output size.
const OUTPUT_BYTES: usize = 8;

struct Options {
    seconds: f64,
    window: usize,
}

impl Cli {
    fn options(self) -> Result<Options, String> {
        let seconds = self.seconds.unwrap_or(if self.quick { 1.0 } else { 3.0 });
        if !(seconds > 0.0 && seconds <= 3600.0) {
            return Err("--seconds must be in (0, 3600]".into());
        }
        Ok(Options {
            seconds,
            window: self.window as usize,
        })
    }
}

fn main() -> ExitCode {
    let options = match <Cli as clap::Parser>::parse().options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("sut-node-bench: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    finish_benchmark("sut-node-bench", runtime.block_on(bench(&options)))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    GrpcPlain,
    GrpcTls,
    Quic,
}

impl Transport {
    fn label(self) -> &'static str {
        match self {
            Transport::GrpcPlain => "gRPC (no TLS)",
            Transport::GrpcTls => "gRPC (TLS)",
            Transport::Quic => "QUIC (TLS)",
        }
    }
}

/// A pool of distinct inputs of one kind, their wire form and the output
/// the synthetic backend must give for each. Response id `i` carries input
/// `i % len`.
struct Inputs {
    decoded_len: usize,
    codec: Codec,
    wire: Vec<Vec<u8>>,
    expected: Vec<Vec<u8>>,
}

impl Inputs {
    fn new(raw: Vec<Vec<u8>>, codec: Codec) -> Inputs {
        let decoded_len = raw[0].len();
        assert!(raw.iter().all(|r| r.len() == decoded_len));
        let expected = raw
            .iter()
            .map(|r| expected_output(r, OUTPUT_BYTES))
            .collect::<Vec<_>>();
        let distinct: std::collections::HashSet<&Vec<u8>> = expected.iter().collect();
        assert_eq!(distinct.len(), raw.len(), "pool inputs must differ");
        let wire = raw.iter().map(|r| codec::encode(codec, r)).collect();
        Inputs {
            decoded_len,
            codec,
            wire,
            expected,
        }
    }

    /// Decoded bytes per wire byte over the pool.
    fn ratio(&self) -> f64 {
        let wire: usize = self.wire.iter().map(Vec::len).sum();
        (self.decoded_len * self.wire.len()) as f64 / wire as f64
    }

    fn query(&self, id: u64) -> pb::Query {
        let i = (id % self.wire.len() as u64) as usize;
        pb::Query {
            query_id: id,
            samples: vec![pb::Sample {
                response_id: id,
                data: self.wire[i].clone().into(),
                codec: self.codec.to_proto() as i32,
                decoded_size: if self.codec == Codec::None {
                    0
                } else {
                    self.decoded_len as u64
                },
            }],
            ..Default::default()
        }
    }

    /// Checks a completion of response id `c.response_id`.
    fn verify(&self, c: &pb::Completion) -> Result<()> {
        let id = c.response_id;
        if !c.error.is_empty() {
            bail!("response {id} failed: {}", c.error);
        }
        let codec = Codec::from_wire(c.codec)
            .ok_or_else(|| anyhow!("response {id}: unknown codec value {}", c.codec))?;
        let expected = &self.expected[(id % self.expected.len() as u64) as usize];
        let ok = match codec {
            Codec::None => c.data == *expected,
            other => {
                codec::decode(other, &c.data, c.decoded_size, 1 << 30)
                    .with_context(|| format!("response {id}: cannot decode"))?
                    == *expected
            }
        };
        if !ok {
            bail!(
                "response {id}: output {:02x?} is not the expected {:02x?}",
                c.data,
                expected
            );
        }
        Ok(())
    }
}

/// Cheap deterministic bytes (xorshift64*), incompressible for lz4.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545f4914f6cdd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// An image-like 224x224x3 buffer: coarse gradients per channel (a
/// horizontal, a vertical and a diagonal one, in steps of 3, 5 and 7
/// pixels), shifted by `seed` so every input of the pool differs. lz4
/// compresses it about 3.9:1; real photos compress far less.
fn gradient_image(seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(LARGE);
    for y in 0..224u64 {
        for x in 0..224u64 {
            out.push(((x + seed) / 3) as u8);
            out.push(((y + 2 * seed) / 5) as u8);
            out.push((((x + y) / 2 + 3 * seed) / 7) as u8);
        }
    }
    out
}

/// One completed query: when it completed and its round trip.
struct Record {
    done: Instant,
    rtt: Duration,
}

struct CaseResult {
    transport: Transport,
    inputs: Arc<Inputs>,
    qps: f64,
    mean_us: f64,
    p99_us: f64,
    queries: usize,
}

struct Timing {
    warmup: Duration,
    measure: Duration,
}

impl Timing {
    /// Queries/s and latency of the records completed in the measured
    /// interval `[start + warmup, start + warmup + measure)`.
    fn summarize(&self, start: Instant, records: &[Record]) -> (usize, f64, f64, f64) {
        let from = start + self.warmup;
        let to = from + self.measure;
        let mut rtts: Vec<Duration> = records
            .iter()
            .filter(|r| r.done >= from && r.done < to)
            .map(|r| r.rtt)
            .collect();
        rtts.sort_unstable();
        let n = rtts.len();
        if n == 0 {
            return (0, 0.0, 0.0, 0.0);
        }
        let mean = rtts.iter().map(|d| d.as_secs_f64()).sum::<f64>() / n as f64;
        let p99 = rtts[((n as f64 * 0.99).ceil() as usize).clamp(1, n) - 1];
        (
            n,
            n as f64 / self.measure.as_secs_f64(),
            mean * 1e6,
            p99.as_secs_f64() * 1e6,
        )
    }
}

/// One `Infer` stream with `window` queries outstanding until `stop`, then
/// drained; every completion verified and matched to its query.
async fn run_grpc(
    node: &NodeProcess,
    inputs: &Inputs,
    window: usize,
    stop: Instant,
) -> Result<Vec<Record>> {
    let mut client = grpc_client(node, ClientCert::None).await?;
    let (tx, rx) = mpsc::channel::<pb::Query>(window + 1);
    let mut outstanding: HashMap<u64, Instant> = HashMap::with_capacity(2 * window);
    let mut next_id = 0u64;
    for _ in 0..window {
        outstanding.insert(next_id, Instant::now());
        tx.send(inputs.query(next_id))
            .await
            .map_err(|_| anyhow!("request stream closed"))?;
        next_id += 1;
    }
    let mut stream = client
        .infer(versioned(ReceiverStream::new(rx)))
        .await
        .context("Infer")?
        .into_inner();
    let mut records = Vec::with_capacity(1 << 16);
    while !outstanding.is_empty() {
        let batch = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .map_err(|_| anyhow!("no completion for 30 s, {} outstanding", outstanding.len()))?
            .context("Infer stream")?
            .ok_or_else(|| {
                anyhow!(
                    "Infer stream ended with {} queries outstanding",
                    outstanding.len()
                )
            })?;
        for c in &batch.completions {
            let now = Instant::now();
            let sent = outstanding.remove(&c.response_id).ok_or_else(|| {
                anyhow!(
                    "completion for response {} that is not outstanding (duplicate or unknown)",
                    c.response_id
                )
            })?;
            inputs.verify(c)?;
            records.push(Record {
                done: now,
                rtt: now - sent,
            });
            if now < stop {
                outstanding.insert(next_id, Instant::now());
                tx.send(inputs.query(next_id))
                    .await
                    .map_err(|_| anyhow!("request stream closed"))?;
                next_id += 1;
            }
        }
    }
    drop(tx);
    // The node ends the stream once the requests end; nothing may follow.
    let tail = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .map_err(|_| anyhow!("Infer stream did not end after the last completion"))?
        .context("Infer stream")?;
    if let Some(batch) = tail {
        bail!(
            "{} completions after every query was answered (first: response {})",
            batch.completions.len(),
            batch.completions.first().map_or(0, |c| c.response_id)
        );
    }
    if records.len() as u64 != next_id {
        bail!("{next_id} queries sent, {} completed", records.len());
    }
    Ok(records)
}

/// `window` tasks on one QUIC connection, each with one query (one stream)
/// outstanding until `stop`.
async fn run_quic(
    node: &NodeProcess,
    inputs: &Arc<Inputs>,
    window: usize,
    stop: Instant,
) -> Result<Vec<Record>> {
    let conn = quic_connect(node, ClientCert::None, netdiv_proto::ALPN).await?;
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(window);
    for _ in 0..window {
        let conn = conn.clone();
        let inputs = inputs.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut records = Vec::with_capacity(1 << 12);
            loop {
                let sent = Instant::now();
                if sent >= stop {
                    return Ok::<_, anyhow::Error>(records);
                }
                let id = next.fetch_add(1, Ordering::Relaxed);
                let completions = tokio::time::timeout(
                    Duration::from_secs(30),
                    quic_query(&conn, inputs.query(id)),
                )
                .await
                .map_err(|_| anyhow!("query {id}: no answer for 30 s"))??;
                let done = Instant::now();
                match completions.as_slice() {
                    [c] if c.response_id == id => inputs.verify(c)?,
                    other => bail!(
                        "query {id}: expected one completion for response {id}, got ids {:?}",
                        other.iter().map(|c| c.response_id).collect::<Vec<_>>()
                    ),
                }
                records.push(Record {
                    done,
                    rtt: done - sent,
                });
            }
        }));
    }
    let mut records = Vec::new();
    for task in tasks {
        records.extend(task.await.context("QUIC task panicked")??);
    }
    conn.close(0u32.into(), b"done");
    Ok(records)
}

async fn run_case(
    transport: Transport,
    node: &NodeProcess,
    inputs: &Arc<Inputs>,
    window: usize,
    timing: &Timing,
) -> Result<CaseResult> {
    let start = Instant::now();
    let stop = start + timing.warmup + timing.measure;
    let records = match transport {
        Transport::GrpcPlain | Transport::GrpcTls => run_grpc(node, inputs, window, stop).await?,
        Transport::Quic => run_quic(node, inputs, window, stop).await?,
    };
    let (queries, qps, mean_us, p99_us) = timing.summarize(start, &records);
    if queries == 0 {
        bail!("no query completed in the measured interval");
    }
    Ok(CaseResult {
        transport,
        inputs: inputs.clone(),
        qps,
        mean_us,
        p99_us,
        queries,
    })
}

async fn bench(options: &Options) -> Result<String> {
    let timing = Timing {
        warmup: Duration::from_secs_f64((options.seconds / 6.0).clamp(0.2, 0.5)),
        measure: Duration::from_secs_f64(options.seconds),
    };
    // Start (and on first use build) the nodes before any timing.
    let node_args = ["--benchmark", "resnet50"];
    let plain = NodeProcess::start(
        "bench-plain",
        None,
        &["--benchmark", "resnet50", "--transport", "grpc"],
    )?;
    let certs = test_dir("sut-node-bench-certs")?;
    let tls = NodeProcess::start("bench-tls", Some(certs.path()), &node_args)?;
    eprintln!(
        "sut-node-bench: plain node grpc={:?}; TLS node grpc={:?} quic={:?}",
        plain.grpc, tls.grpc, tls.quic
    );

    let small = Arc::new(Inputs::new(
        (0..1024u32).map(|i| i.to_le_bytes().to_vec()).collect(),
        Codec::None,
    ));
    let large = Arc::new(Inputs::new(
        (0..64).map(|i| noise(i + 1, LARGE)).collect(),
        Codec::None,
    ));
    let large_lz4 = Arc::new(Inputs::new(
        (0..64).map(gradient_image).collect(),
        Codec::Lz4,
    ));
    // What the zero-cost backend still does per sample: hash the input.
    let hash_us = {
        let input = &large_lz4.wire[0];
        let decoded = codec::decode(Codec::Lz4, input, LARGE as u64, 1 << 30)?;
        let t = Instant::now();
        let mut n = 0u32;
        while t.elapsed() < Duration::from_millis(200) {
            std::hint::black_box(expected_output(std::hint::black_box(&decoded), 8));
            n += 1;
        }
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    };
    let lz4_decode_us = {
        let input = &large_lz4.wire[0];
        let t = Instant::now();
        let mut n = 0u32;
        while t.elapsed() < Duration::from_millis(200) {
            std::hint::black_box(codec::decode(Codec::Lz4, input, LARGE as u64, 1 << 30)?);
            n += 1;
        }
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    };

    let mut results = Vec::new();
    for transport in [Transport::GrpcPlain, Transport::GrpcTls, Transport::Quic] {
        let node = if transport == Transport::GrpcPlain {
            &plain
        } else {
            &tls
        };
        for inputs in [&small, &large, &large_lz4] {
            let r = run_case(transport, node, inputs, options.window, &timing)
                .await
                .with_context(|| {
                    format!(
                        "{}, {} B, {}",
                        transport.label(),
                        inputs.decoded_len,
                        inputs.codec.name()
                    )
                })
                .map_err(|e| anyhow!("{e:#}\nnode stderr:\n{}", node.stderr()))?;
            eprintln!(
                "sut-node-bench: {} {} B {}: {:.0} queries/s ({} verified in the measured interval)",
                transport.label(),
                inputs.decoded_len,
                inputs.codec.name(),
                r.qps,
                r.queries
            );
            results.push(r);
        }
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}\n\nOne sut-node (synthetic backend, zero cost, 1 device, `--benchmark resnet50`), \
         one client connection, window {} queries, 1 sample per query; {:.1} s measured per case \
         after {:.1} s of warm-up. Every completion verified.\n",
        machine_description(),
        options.window,
        timing.measure.as_secs_f64(),
        timing.warmup.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| Transport | Sample bytes | Codec | Queries/s | Input MB/s | Mean RTT (µs) | p99 RTT (µs) |"
    );
    let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---:|");
    for r in &results {
        let codec = match r.inputs.codec {
            Codec::None => "none".to_string(),
            c => format!("{} ({:.1}:1)", c.name(), r.inputs.ratio()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.1} | {:.0} | {:.0} |",
            r.transport.label(),
            r.inputs.decoded_len,
            codec,
            r.qps,
            r.qps * r.inputs.decoded_len as f64 / 1e6,
            r.mean_us,
            r.p99_us
        );
    }
    let _ = writeln!(
        out,
        "\nInput MB/s counts decoded sample bytes (10^6 B/s). lz4 inputs: a 224x224x3 \
         gradient image per sample, compression ratio {:.1}:1 ({} B on the wire), encoded \
         once before the run. Per 150528-byte sample, in this process: the synthetic \
         backend's output hash takes {:.0} µs, an lz4 decode {:.0} µs.",
        large_lz4.ratio(),
        large_lz4.wire.iter().map(Vec::len).sum::<usize>() / large_lz4.wire.len(),
        hash_us,
        lz4_decode_us
    );
    Ok(out)
}
