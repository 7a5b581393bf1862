//! Building a network run's record ([`loadgen_node::run_record`], the
//! typed `netdiv_run.json`) from the QDL's state and the run's logs: the
//! nodes, their traffic and changes, the QDL's counters and the
//! Network-division bandwidth check (the rules' Datacenter bandwidth
//! requirements against the throughput, the bytes on the wire and the NIC
//! rates).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use loadgen_node::mlperf_logs::Detail;
use loadgen_node::run_record::{
    self, BandwidthCheck, NicRecord, NodeChange, NodeRecord, QdlRecord, RunRecord, SamplesRecord,
};
use netdiv_proto::bandwidth;
use netdiv_proto::pb;

use super::plan::RunPlan;
use crate::cli::data_path;

/// Samples per second the LoadGen measured, if the run logged it.
fn throughput(output: &Path) -> Option<f64> {
    let detail = Detail::read(output).ok()?;
    detail
        .number("result_samples_per_second")
        .or_else(|| detail.number("result_completed_samples_per_sec"))
}

fn nic_record(nic: &pb::Nic) -> NicRecord {
    NicRecord {
        name: nic.name.clone(),
        speed_mbps: nic.speed_mbps,
        mtu: nic.mtu,
        state: nic.state.clone(),
    }
}

/// The rules' bandwidth requirement at the run's throughput (with the
/// element size as run), next to what was measured and the data path's
/// rate (`path_rate`, bytes/s: this LoadGen node's interfaces towards the
/// nodes).
fn bandwidth_check(
    benchmark: &netdiv_proto::Benchmark,
    dtype_size: usize,
    throughput: Option<f64>,
    wire: (f64, f64, f64),
    seconds: f64,
    path_rate: Option<f64>,
) -> BandwidthCheck {
    let Some(rule) = bandwidth::rule(benchmark) else {
        return BandwidthCheck::not_made("none: the rules' table has no row for this benchmark");
    };
    let Some(throughput) = throughput else {
        return BandwidthCheck::not_made("no throughput in the detail log (an accuracy run)");
    };
    let (need_in, need_out) = bandwidth::required(&rule, throughput, dtype_size);
    let per_s = |bytes: f64| if seconds > 0.0 { bytes / seconds } else { 0.0 };
    let (sent_wire, sent_decoded, received) = wire;
    let nic = path_rate;
    BandwidthCheck {
        rule: format!(
            "ingress >= throughput x {} x {dtype_size} B; egress {}",
            rule.ingress_elements,
            rule.egress_elements.map_or("> 0".to_string(), |e| format!(
                ">= throughput x {e} x {dtype_size} B"
            ))
        ),
        throughput_samples_per_s: Some(throughput),
        required_ingress_bytes_per_s: Some(need_in),
        required_egress_bytes_per_s: Some(need_out),
        measured_ingress_wire_bytes_per_s: Some(per_s(sent_wire)),
        measured_ingress_decoded_bytes_per_s: Some(per_s(sent_decoded)),
        measured_egress_wire_bytes_per_s: Some(per_s(received)),
        loadgen_nic_rate_bytes_per_s: nic,
        nic_rate_covers_ingress: nic.map(|r| r >= need_in.max(need_out)),
        egress_above_zero: Some(received > 0.0),
    }
}

/// Each node of the run, from its Info, the QDL's counters and its data
/// path resolved.
fn node_records(network: &qdl::NetworkSut) -> Vec<NodeRecord> {
    let (traffic, _) = network.traffic();
    let addresses: Vec<_> = network
        .node_urls()
        .iter()
        .map(|u| data_path::address_of(u))
        .collect();
    network
        .node_urls()
        .iter()
        .zip(network.node_infos())
        .zip(traffic)
        .zip(addresses)
        .map(|(((url, info), (traffic, failure)), address)| NodeRecord {
            url: url.to_string(),
            name: info.name.clone(),
            hostname: info.hostname.clone(),
            host_id: info.host_id.clone(),
            software_version: info.software_version.clone(),
            protocol_version: info.protocol_version,
            backend: info.backend.clone(),
            backend_detail: info.backend_detail.clone(),
            benchmark: info.benchmark.clone(),
            response_codec: pb::Codec::try_from(info.response_codec)
                .map(|c| c.as_str_name())
                .unwrap_or("unknown")
                .to_string(),
            nics: info.nics.iter().map(nic_record).collect(),
            cpu_latency_us: info.cpu_latency_us,
            traffic,
            failure,
            host: info.host.as_ref().map(data_path::host_record),
            data_path: data_path::data_path(info, address),
        })
        .collect()
}

/// What a network run's record is built from.
pub(crate) struct RecordInputs<'a> {
    pub(crate) plan: &'a RunPlan,
    pub(crate) network: &'a qdl::NetworkSut,
    pub(crate) store: &'a loadgen_node::qsl::SampleStore,
    /// The scenario as the rules name it.
    pub(crate) scenario: &'a str,
    /// The run's log folder.
    pub(crate) output: &'a Path,
    /// Rules this run broke that `--rehearsal` let it go on with.
    pub(crate) rehearsal_reasons: &'a [String],
}

/// The record of a network run that wrote its logs into `output`;
/// `failure` is the error that ended it, if one did.
pub(crate) fn build(inputs: &RecordInputs<'_>, failure: Option<String>) -> RunRecord {
    let RecordInputs {
        plan,
        network,
        store,
        scenario,
        output,
        rehearsal_reasons,
    } = *inputs;
    let (traffic, seconds) = network.traffic();
    let stats = network.stats();
    let benchmark = store.benchmark();
    let sum = |f: fn(&qdl::NodeTrafficReport) -> u64| {
        traffic.iter().map(|(t, _)| f(t)).sum::<u64>() as f64
    };
    let wire = (
        sum(|t| t.bytes_sent),
        sum(|t| t.decoded_bytes_sent),
        sum(|t| t.bytes_received),
    );
    let urls = network.node_urls();
    let nodes = node_records(network);
    let paths: Vec<_> = nodes.iter().map(|n| n.data_path.clone()).collect();
    RunRecord {
        schema_version: run_record::SCHEMA_VERSION,
        netdiv_version: env!("CARGO_PKG_VERSION").to_string(),
        round: plan.round.name().to_string(),
        loadgen: format!("{:?}", plan.engine).to_lowercase(),
        loadgen_release: plan.round.release().version.to_string(),
        submission_mode: plan.submission_mode,
        cpu_latency_us: plan.cpu_latency_us,
        benchmark: benchmark.to_string(),
        scenario: scenario.to_string(),
        samples: SamplesRecord {
            source: store.source().describe(),
            codec: store.codec().name().to_string(),
            dtype: store.source().element_type().map_or_else(
                || benchmark.spec().dtype.name().to_string(),
                |d| d.name().to_string(),
            ),
        },
        nodes,
        node_changes: network
            .observer()
            .node_changes()
            .iter()
            .map(|c| NodeChange {
                node: urls[c.node].to_string(),
                at_s: c.at.as_secs_f64(),
                state: c.state.as_str().to_string(),
                detail: c.detail.clone(),
            })
            .collect(),
        qdl: QdlRecord {
            completed: stats.completed,
            resent: stats.resent,
            late_answers: stats.late_answers,
            first_tokens: stats.first_tokens,
            late_first_tokens: stats.late_first_tokens,
            nodes_failed: stats.nodes_failed,
            nodes_down: stats.nodes_down,
            rejoins: stats.rejoins,
            traffic_seconds: seconds,
            dispatch: network.dispatch_policy().to_string(),
            cancelled: stats.cancelled,
            settings: Some(network.settings().clone()),
        },
        bandwidth: bandwidth_check(
            benchmark,
            store
                .source()
                .element_size()
                .unwrap_or(benchmark.spec().dtype.size()),
            throughput(output),
            wire,
            seconds,
            data_path::loadgen_rate_bytes_per_s(&paths),
        ),
        failure,
        loadgen_host: Some(data_path::host_record(&sut_node::host::nic::host())),
        rehearsal: !rehearsal_reasons.is_empty(),
        rehearsal_reasons: rehearsal_reasons.to_vec(),
    }
}

/// Writes the record of a network run into its output folder; returns its
/// path and a one-line bandwidth summary.
pub(crate) fn write(
    inputs: &RecordInputs<'_>,
    failure: Option<String>,
) -> Result<(PathBuf, Option<String>)> {
    let record = build(inputs, failure);
    let path = record.write(inputs.output).with_context(|| {
        format!(
            "cannot write the run record into {}",
            inputs.output.display()
        )
    })?;
    Ok((path, record.bandwidth.summary()))
}
