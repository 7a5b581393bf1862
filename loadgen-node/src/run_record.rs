//! The run record, `netdiv_run.json` beside the MLPerf logs of every
//! network run (both engines, every mode): which nodes ran it (names,
//! addresses, Info, host identities), what crossed the fabric per node,
//! every Name() round trip, failovers and re-sent samples, the codecs, and
//! the Network-division bandwidth check.
//!
//! One typed document: `loadgen-node run` writes it, and the report, the
//! audit, `submission` and the tests read it through [`RunRecord::read`],
//! so a renamed field is a compile error, not a silently empty report.
//! [`SCHEMA_VERSION`] says which shape a file has; records of an older
//! shape load where their fields still fit and fail with a message that
//! names the file and the version otherwise.

use std::path::{Path, PathBuf};

use qdl::{NodeTrafficReport, QdlSettings};
use serde::{Deserialize, Serialize};

/// The record's file name.
pub const FILE: &str = "netdiv_run.json";

/// The shape of the record this netdiv writes. 1: the untyped record of
/// netdiv before the field existed (it reads as 1 when absent).
pub const SCHEMA_VERSION: u32 = 2;

/// Why a run record cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file cannot be read.
    #[error("cannot read the run record {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not a run record this netdiv understands.
    #[error("{path} line {line} column {column}: not a run record of schema {expected} or older ({found}): {reason}")]
    Garbled {
        /// The file.
        path: PathBuf,
        /// Where the parser stopped.
        line: usize,
        /// Where the parser stopped.
        column: usize,
        /// The schema this netdiv writes.
        expected: u32,
        /// The schema the file says it has.
        found: String,
        /// The parser's complaint.
        reason: String,
    },
    /// A newer netdiv wrote it.
    #[error("{path} is a run record of schema {found}, newer than this netdiv's {expected}: read it with the netdiv that wrote it ({writer})")]
    Newer {
        /// The file.
        path: PathBuf,
        /// Its schema.
        found: u32,
        /// This netdiv's.
        expected: u32,
        /// The netdiv version that wrote it.
        writer: String,
    },
}

/// A network run, as `netdiv_run.json` records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The record's shape ([`SCHEMA_VERSION`]); 1 when absent.
    #[serde(default = "schema_one")]
    pub schema_version: u32,
    /// The netdiv that ran it.
    pub netdiv_version: String,
    /// The MLPerf round (`v6.1`).
    pub round: String,
    /// `netdiv` or `official`.
    pub loadgen: String,
    /// The official LoadGen release of the round (`6.0.17`).
    pub loadgen_release: String,
    /// Whether the run kept the rules of a submission run.
    pub submission_mode: bool,
    /// The CPU wake-up latency bound this LoadGen node held, if any (µs).
    pub cpu_latency_us: Option<u32>,
    /// The benchmark, as the table names it.
    pub benchmark: String,
    /// The scenario as the rules name it (Interactive for an interactive
    /// run).
    pub scenario: String,
    /// Where the samples came from.
    pub samples: SamplesRecord,
    /// Every node, in the order Name() lists them.
    pub nodes: Vec<NodeRecord>,
    /// Nodes failing, declining, rejoining or refused during the run.
    #[serde(default)]
    pub node_changes: Vec<NodeChange>,
    /// The QDL's counters.
    pub qdl: QdlRecord,
    /// The rules' bandwidth requirement against what was measured.
    pub bandwidth: BandwidthCheck,
    /// How the run ended, when it did not end well: the error that ended
    /// it (a record is written whatever the outcome).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// This LoadGen node's machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadgen_host: Option<HostRecord>,
    /// A rehearsal: the run broke Network-division rules netdiv checks
    /// (`--rehearsal`), and is not a result.
    #[serde(default)]
    pub rehearsal: bool,
    /// Which rules, and the evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rehearsal_reasons: Vec<String>,
}

/// A machine's identities (empty where unreadable).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    /// /etc/machine-id.
    pub machine_id: String,
    /// The running kernel's boot id.
    pub boot_id: String,
    /// The board's DMI product UUID (root only).
    pub product_uuid: String,
    /// The network namespace.
    pub netns: String,
    /// The signs of a hypervisor under it (empty on bare metal).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub virtualization: String,
}

/// The interfaces a node's traffic crosses, each resolved to what carries
/// it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataPathRecord {
    /// This LoadGen node's interface the route to the node leaves from.
    pub loadgen_interface: Option<LinkRecord>,
    /// The node's interface holding the address it was reached at.
    pub node_interface: Option<LinkRecord>,
}

/// One interface and what carries it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// The interface's name.
    pub name: String,
    /// "device" or a virtual kind (veth, bridge, bond, ...).
    pub kind: String,
    /// The interfaces below it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lower: Vec<String>,
    /// Whether a device backs it.
    pub backed: bool,
    /// Its link speed, Mbit/s (0: the kernel does not say).
    pub speed_mbps: u64,
}

fn schema_one() -> u32 {
    1
}

/// The samples a run sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplesRecord {
    /// What the QSL read or made (a folder of .npy files, synthetic data).
    pub source: String,
    /// The codec samples travelled in (`none`, `lz4`).
    pub codec: String,
    /// The element type of the benchmark's input.
    pub dtype: String,
}

/// One node of the run, from its Info and the QDL's counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Its address (`grpc://host:port`).
    pub url: String,
    /// Its name, unique in the run.
    pub name: String,
    /// Its host's name.
    pub hostname: String,
    /// Its host identity (machine-id and network namespace).
    pub host_id: String,
    /// The sut-node version.
    pub software_version: String,
    /// The session-layer protocol version it speaks.
    pub protocol_version: u32,
    /// Its backend kind.
    pub backend: String,
    /// Its backend's settings and versions, in a line.
    pub backend_detail: String,
    /// The benchmark it serves.
    pub benchmark: String,
    /// The codec of its answers.
    pub response_codec: String,
    /// Its network interfaces.
    pub nics: Vec<NicRecord>,
    /// The CPU wake-up latency bound it holds, if any (µs).
    pub cpu_latency_us: Option<u32>,
    /// What crossed the fabric to and from it.
    pub traffic: NodeTrafficReport,
    /// Why it failed during the run, if it did.
    pub failure: Option<String>,
    /// Its machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostRecord>,
    /// The data path to it, resolved on both ends.
    #[serde(default)]
    pub data_path: DataPathRecord,
}

/// A network interface of a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NicRecord {
    /// Its name (`eth0`).
    pub name: String,
    /// Its link speed, Mbit/s (0 when the kernel does not say).
    pub speed_mbps: u64,
    /// Its MTU.
    pub mtu: u32,
    /// `up`, `down`, ...
    pub state: String,
}

/// A node's state changing during the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeChange {
    /// The node's address.
    pub node: String,
    /// Seconds from the QDL's start.
    pub at_s: f64,
    /// `failed`, `declining`, `rejoined` or `refused`.
    pub state: String,
    /// Why.
    pub detail: String,
}

/// The QDL's counters at the end of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QdlRecord {
    /// Samples completed to the LoadGen.
    pub completed: u64,
    /// Samples sent again after their node failed or declined them.
    pub resent: u64,
    /// Answers that came after their sample was completed elsewhere.
    pub late_answers: u64,
    /// First tokens handed to the LoadGen.
    pub first_tokens: u64,
    /// First tokens dropped (late, or a re-sent sample's second).
    pub late_first_tokens: u64,
    /// Node failures during the run.
    pub nodes_failed: u64,
    /// Nodes down at the end.
    pub nodes_down: u64,
    /// Times a failed node rejoined.
    pub rejoins: u64,
    /// Seconds from the first sample sent to the last answer.
    pub traffic_seconds: f64,
    /// The dispatch policy (`--dispatch`) that shared the work ("" in
    /// records older than it).
    #[serde(default)]
    pub dispatch: String,
    /// Samples taken back from nodes still connected and cancelled there
    /// (token models), so they stopped generating them.
    #[serde(default)]
    pub cancelled: u64,
    /// The settings the QDL ran with: pieces, windows, I/O threads, the
    /// poll for the next query, timeout, failover (absent in records
    /// older than it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<QdlSettings>,
}

/// The rules' Datacenter bandwidth requirement at the run's throughput,
/// beside what was measured. Only `rule` is set when the check cannot be
/// made (no row for the benchmark, or no throughput: an accuracy run).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BandwidthCheck {
    /// The rule applied, or why none was.
    pub rule: String,
    /// Samples per second the LoadGen measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_samples_per_s: Option<f64>,
    /// Ingress the rules require at that throughput, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_ingress_bytes_per_s: Option<f64>,
    /// Egress the rules require, bytes/s (where the table has a row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_egress_bytes_per_s: Option<f64>,
    /// Sample bytes sent per second, as they travelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_ingress_wire_bytes_per_s: Option<f64>,
    /// The same samples decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_ingress_decoded_bytes_per_s: Option<f64>,
    /// Answer bytes received per second, as they travelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_egress_wire_bytes_per_s: Option<f64>,
    /// The LoadGen node's NIC rate the requirement was held against,
    /// bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadgen_nic_rate_bytes_per_s: Option<f64>,
    /// Whether that rate covers the required ingress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_rate_covers_ingress: Option<bool>,
    /// Whether any answer bytes came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_above_zero: Option<bool>,
}

impl BandwidthCheck {
    /// A check that could not be made, and why.
    pub fn not_made(why: impl Into<String>) -> BandwidthCheck {
        BandwidthCheck {
            rule: why.into(),
            ..BandwidthCheck::default()
        }
    }

    /// The check in one line, when it was made.
    pub fn summary(&self) -> Option<String> {
        let need = self.required_ingress_bytes_per_s?;
        let mb = |v: Option<f64>| v.map_or("?".into(), |v| format!("{:.1} MB/s", v / 1e6));
        Some(format!(
            "bandwidth (rules, Datacenter): ingress of at least {} needed at {:.2} samples/s; \
             {} measured on the wire ({} decoded), NIC rate {}",
            mb(Some(need)),
            self.throughput_samples_per_s.unwrap_or(0.0),
            mb(self.measured_ingress_wire_bytes_per_s),
            mb(self.measured_ingress_decoded_bytes_per_s),
            mb(self.loadgen_nic_rate_bytes_per_s),
        ))
    }
}

impl RunRecord {
    /// Writes the record as `dir/netdiv_run.json`; returns the path.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE);
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&path, text + "\n")?;
        Ok(path)
    }

    /// Reads `dir/netdiv_run.json`; `Ok(None)` when there is none (a run
    /// without the network).
    pub fn read_in(dir: &Path) -> Result<Option<RunRecord>, RecordError> {
        let path = dir.join(FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(RecordError::Read { path, source }),
        }
    }

    /// Reads the record file `path`.
    pub fn read(path: &Path) -> Result<RunRecord, RecordError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecordError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a record's text (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<RunRecord, RecordError> {
        // The version first, so a newer record is named as such rather
        // than as garbled.
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| garbled(path, &e, "?".into()))?;
        let found = value
            .get("schema_version")
            .and_then(serde_json::Value::as_u64);
        if let Some(found) = found.filter(|v| *v > u64::from(SCHEMA_VERSION)) {
            return Err(RecordError::Newer {
                path: path.to_path_buf(),
                found: found as u32,
                expected: SCHEMA_VERSION,
                writer: value["netdiv_version"].as_str().unwrap_or("?").to_string(),
            });
        }
        let found = found.map_or("1".to_string(), |v| v.to_string());
        serde_json::from_str(text).map_err(|e| garbled(path, &e, found))
    }
}

fn garbled(path: &Path, e: &serde_json::Error, found: String) -> RecordError {
    RecordError::Garbled {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        expected: SCHEMA_VERSION,
        found,
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunRecord {
        RunRecord {
            schema_version: SCHEMA_VERSION,
            netdiv_version: "0.1.0".into(),
            round: "v6.1".into(),
            loadgen: "netdiv".into(),
            loadgen_release: "6.0.17".into(),
            submission_mode: false,
            cpu_latency_us: None,
            benchmark: "resnet50".into(),
            scenario: "Offline".into(),
            samples: SamplesRecord {
                source: "synthetic".into(),
                codec: "none".into(),
                dtype: "uint8".into(),
            },
            nodes: vec![NodeRecord {
                url: "grpc://10.0.0.2:7000".into(),
                name: "a".into(),
                hostname: "h".into(),
                host_id: "m/net:[1]".into(),
                software_version: "0.1.0".into(),
                protocol_version: 2,
                backend: "synthetic".into(),
                backend_detail: String::new(),
                benchmark: "resnet50".into(),
                response_codec: "CODEC_NONE".into(),
                nics: vec![],
                cpu_latency_us: Some(0),
                traffic: NodeTrafficReport::default(),
                failure: None,
                host: None,
                data_path: DataPathRecord::default(),
            }],
            node_changes: vec![],
            qdl: QdlRecord::default(),
            bandwidth: BandwidthCheck::not_made("none"),
            failure: None,
            loadgen_host: None,
            rehearsal: false,
            rehearsal_reasons: Vec::new(),
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = record().write(dir.path()).unwrap();
        assert_eq!(RunRecord::read(&path).unwrap(), record());
        assert_eq!(RunRecord::read_in(dir.path()).unwrap(), Some(record()));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(RunRecord::read_in(empty.path()).unwrap(), None);
    }

    #[test]
    fn an_old_record_loads_and_a_newer_or_garbled_one_says_why_not() {
        // Schema 1 had no version and no failure field.
        let mut old = serde_json::to_value(record()).unwrap();
        old.as_object_mut().unwrap().remove("schema_version");
        let text = old.to_string();
        let read = RunRecord::parse(&text, Path::new("old.json")).unwrap();
        assert_eq!(read.schema_version, 1);
        assert_eq!(read.nodes, record().nodes);

        let mut newer = serde_json::to_value(record()).unwrap();
        newer["schema_version"] = 99.into();
        let err = RunRecord::parse(&newer.to_string(), Path::new("new.json")).unwrap_err();
        assert!(
            err.to_string()
                .contains("schema 99, newer than this netdiv's"),
            "{err}"
        );

        let mut renamed = serde_json::to_value(record()).unwrap();
        renamed.as_object_mut().unwrap().remove("nodes");
        let err = RunRecord::parse(&renamed.to_string(), Path::new("r.json")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("r.json") && text.contains("missing field `nodes`"),
            "{text}"
        );
    }
}
