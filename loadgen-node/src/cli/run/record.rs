//! The run record, `netdiv_run.json` beside the MLPerf logs of every
//! network run (both engines, every mode): which nodes ran it (names,
//! addresses, Info, host identities), what crossed the fabric per node,
//! every Name() round trip, failovers and re-sent samples, the codecs, and
//! the Network-division bandwidth check (the rules' Datacenter bandwidth
//! requirements against the throughput, the bytes on the wire and the NIC
//! rates).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use netdiv_proto::bandwidth;
use netdiv_proto::pb;
use serde_json::{json, Value};

use crate::cli::args::RunArgs;
use crate::cli::setup;

/// The record's file name.
pub const FILE: &str = "netdiv_run.json";

/// The first numeric value of `key` in the detail log the run wrote
/// (`:::MLLOG {json}` lines).
fn detail_number(output: &Path, key: &str) -> Option<f64> {
    let text = std::fs::read_to_string(output.join("mlperf_log_detail.txt")).ok()?;
    text.lines()
        .filter_map(|l| l.strip_prefix(":::MLLOG "))
        .filter_map(|json| serde_json::from_str::<Value>(json).ok())
        .find(|entry| entry["key"] == key)?["value"]
        .as_f64()
}

/// Samples per second the LoadGen measured, if the run logged it.
fn throughput(output: &Path) -> Option<f64> {
    detail_number(output, "result_samples_per_second")
        .or_else(|| detail_number(output, "result_completed_samples_per_sec"))
}

fn nic_json(nic: &pb::Nic) -> Value {
    json!({"name": nic.name, "speed_mbps": nic.speed_mbps, "mtu": nic.mtu, "state": nic.state})
}

/// The rules' bandwidth requirement at the run's throughput, next to what
/// was measured; `Value::Null` for benchmarks the rules' table lacks.
fn bandwidth_check(
    benchmark: &netdiv_proto::Benchmark,
    dtype_size: usize,
    throughput: Option<f64>,
    wire: (f64, f64, f64),
    seconds: f64,
) -> Value {
    let Some(rule) = bandwidth::rule(benchmark) else {
        return json!({"rule": "none: the rules' table has no row for this benchmark"});
    };
    let Some(throughput) = throughput else {
        return json!({"rule": "no throughput in the detail log (an accuracy run)"});
    };
    let (need_in, need_out) = bandwidth::required(&rule, throughput, dtype_size);
    let per_s = |bytes: f64| if seconds > 0.0 { bytes / seconds } else { 0.0 };
    let (sent_wire, sent_decoded, received) = wire;
    let nic_bytes_per_s = sut_node::nic::interfaces()
        .iter()
        .filter(|n| n.state == "up")
        .map(|n| n.speed_mbps as f64 * 1e6 / 8.0)
        .fold(0.0, f64::max);
    let nic = (nic_bytes_per_s > 0.0).then_some(nic_bytes_per_s);
    json!({
        "rule": format!(
            "ingress >= throughput x {} x {dtype_size} B; egress {}",
            rule.ingress_elements,
            rule.egress_elements
                .map_or("> 0".to_string(), |e| format!(">= throughput x {e} x {dtype_size} B"))
        ),
        "throughput_samples_per_s": throughput,
        "required_ingress_bytes_per_s": need_in,
        "required_egress_bytes_per_s": need_out,
        "measured_ingress_wire_bytes_per_s": per_s(sent_wire),
        "measured_ingress_decoded_bytes_per_s": per_s(sent_decoded),
        "measured_egress_wire_bytes_per_s": per_s(received),
        "loadgen_nic_rate_bytes_per_s": nic,
        "nic_rate_covers_ingress": nic.map(|r| r >= need_in),
        "egress_above_zero": received > 0.0,
    })
}

/// Writes the record of a network run into `output`; returns its path and
/// a one-line bandwidth summary.
pub fn write(
    args: &RunArgs,
    network: &qdl::NetworkSut,
    store: &qdl::samples::SampleStore,
    scenario: &str,
    output: &Path,
) -> Result<(PathBuf, Option<String>)> {
    let (traffic, seconds) = network.traffic();
    let stats = network.stats();
    let benchmark = store.benchmark();
    let nodes: Vec<Value> = network
        .node_urls()
        .iter()
        .zip(network.node_infos())
        .zip(&traffic)
        .map(|((url, info), (t, failure))| {
            json!({
                "url": url,
                "name": info.name,
                "hostname": info.hostname,
                "host_id": info.host_id,
                "software_version": info.software_version,
                "protocol_version": info.protocol_version,
                "backend": info.backend,
                "backend_detail": info.backend_detail,
                "benchmark": info.benchmark,
                "response_codec": pb::Codec::try_from(info.response_codec)
                    .map(|c| c.as_str_name())
                    .unwrap_or("unknown"),
                "nics": info.nics.iter().map(nic_json).collect::<Vec<_>>(),
                "cpu_latency_us": info.cpu_latency_us,
                "traffic": t,
                "failure": failure,
            })
        })
        .collect();
    let sum = |f: fn(&qdl::network::traffic::NodeTrafficReport) -> u64| {
        traffic.iter().map(|(t, _)| f(t)).sum::<u64>() as f64
    };
    let wire = (
        sum(|t| t.bytes_sent),
        sum(|t| t.decoded_bytes_sent),
        sum(|t| t.bytes_received),
    );
    let check = bandwidth_check(
        benchmark,
        benchmark.spec().dtype.size(),
        throughput(output),
        wire,
        seconds,
    );
    let summary = check
        .get("required_ingress_bytes_per_s")
        .and_then(Value::as_f64)
        .map(|need| {
            let mb = |v: Option<f64>| v.map_or("?".into(), |v| format!("{:.1} MB/s", v / 1e6));
            format!(
                "bandwidth (rules, Datacenter): ingress of at least {} needed at this throughput; \
                 {} measured on the wire ({} decoded), NIC rate {}",
                mb(Some(need)),
                mb(check["measured_ingress_wire_bytes_per_s"].as_f64()),
                mb(check["measured_ingress_decoded_bytes_per_s"].as_f64()),
                mb(check["loadgen_nic_rate_bytes_per_s"].as_f64()),
            )
        });
    let record = json!({
        "netdiv_version": env!("CARGO_PKG_VERSION"),
        "round": setup::round(args).name(),
        "loadgen": format!("{:?}", args.loadgen).to_lowercase(),
        "loadgen_release": setup::round(args).release().version,
        "submission_mode": args.submission_mode,
        "cpu_latency_us": args.cpu_latency_us,
        "benchmark": benchmark.to_string(),
        "scenario": scenario,
        "samples": {
            "source": store.source().describe(),
            "codec": store.codec().name(),
            "dtype": benchmark.spec().dtype.name(),
        },
        "nodes": nodes,
        "node_changes": network
            .observer()
            .node_changes()
            .iter()
            .map(|c| json!({
                "node": network.node_urls()[c.node],
                "at_s": c.at.as_secs_f64(),
                "state": c.state.as_str(),
                "detail": c.detail,
            }))
            .collect::<Vec<_>>(),
        "qdl": {
            "completed": stats.completed,
            "resent": stats.resent,
            "late_answers": stats.late_answers,
            "first_tokens": stats.first_tokens,
            "late_first_tokens": stats.late_first_tokens,
            "nodes_failed": stats.nodes_failed,
            "nodes_down": stats.nodes_down,
            "rejoins": stats.rejoins,
            "traffic_seconds": seconds,
        },
        "bandwidth": check,
    });
    let path = output.join(FILE);
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    std::fs::write(&path, serde_json::to_string_pretty(&record)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok((path, summary))
}
