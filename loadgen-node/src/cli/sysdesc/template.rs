//! The whole system description the round's checker requires
//! (`sysdesc --template`): its general fields beside the Network-division
//! ones, filled from what the nodes report about their machines (hosts
//! counted once), `TODO` where only a person knows.

use netdiv_proto::pb;
use serde_json::{Map, Value};

use super::FILL_IN;

/// The general fields of the checker's SYSTEM_DESC_REQUIRED_FIELDS, in
/// its order.
pub(crate) const GENERAL_FIELDS: [&str; 35] = [
    "division",
    "submitter",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processor_model_name",
    "host_processors_per_node",
    "host_processor_core_count",
    "host_memory_capacity",
    "host_storage_capacity",
    "host_storage_type",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_memory_capacity",
    "framework",
    "operating_system",
    "system_type",
    "other_software_stack",
    "host_processor_frequency",
    "host_processor_caches",
    "host_memory_configuration",
    "host_processor_interconnect",
    "host_networking",
    "host_networking_topology",
    "accelerator_frequency",
    "accelerator_host_interconnect",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "accelerator_memory_configuration",
    "accelerator_on-chip_memories",
    "cooling",
    "hw_notes",
    "sw_notes",
    "host_network_card_count",
    "system_type_detail",
];

/// One machine of the SUT and the nodes on it.
pub(crate) struct Host<'a> {
    pub(crate) nodes: Vec<&'a pb::NodeInfo>,
    /// Its interfaces on the data path (each once).
    pub(crate) data_path_nics: Vec<String>,
}

/// The nodes grouped by machine (boot id, else board, else hostname), in
/// the order their first node was given.
pub(crate) fn hosts<'a>(
    nodes: &'a [pb::NodeInfo],
    data_path_nics: &[Vec<String>],
) -> Vec<Host<'a>> {
    let mut hosts: Vec<(String, Host<'a>)> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let key = machine_key(node);
        let nics = data_path_nics.get(i).cloned().unwrap_or_default();
        match hosts.iter_mut().find(|(k, _)| *k == key) {
            Some((_, host)) => {
                host.nodes.push(node);
                for nic in nics {
                    if !host.data_path_nics.contains(&nic) {
                        host.data_path_nics.push(nic);
                    }
                }
            }
            None => hosts.push((
                key,
                Host {
                    nodes: vec![node],
                    data_path_nics: nics,
                },
            )),
        }
    }
    hosts.into_iter().map(|(_, h)| h).collect()
}

/// What tells machines apart: the running kernel, the board, the name.
fn machine_key(node: &pb::NodeInfo) -> String {
    let host = node.host.clone().unwrap_or_default();
    [host.boot_id, host.product_uuid, node.hostname.clone()]
        .into_iter()
        .find(|k| !k.is_empty())
        .unwrap_or_else(|| node.name.clone())
}

/// The distinct values, joined; none when every value is empty.
fn distinct(values: impl IntoIterator<Item = String>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for v in values.into_iter().filter(|v| !v.is_empty()) {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    (!seen.is_empty()).then(|| seen.join("; "))
}

/// A host's hardware (each host's first node says it).
fn hardware<'a>(host: &Host<'a>) -> pb::Hardware {
    host.nodes[0].hardware.clone().unwrap_or_default()
}

/// A count per host: one number when all agree, else each host's.
fn per_host(hosts: &[Host<'_>], count: impl Fn(&Host<'_>) -> u64) -> Option<String> {
    let counts: Vec<u64> = hosts.iter().map(&count).collect();
    if counts.iter().all(|&c| c == 0) {
        return None;
    }
    distinct(counts.iter().map(u64::to_string))
}

/// Bytes as the descriptions write them: "1.5 TB", "512 GB".
fn capacity(bytes: u64) -> String {
    let gb = bytes as f64 / 1e9;
    if gb >= 1000.0 {
        format!("{:.1} TB", gb / 1000.0)
    } else {
        format!("{gb:.0} GB")
    }
}

/// A node's serving software: its backend and, for an engine, its name
/// and version as the node read them.
fn framework(node: &pb::NodeInfo) -> String {
    if node.backend == "synthetic" {
        return String::new(); // a cost model, not a framework
    }
    let words: Vec<&str> = node
        .backend_detail
        .split_whitespace()
        .filter(|w| w.starts_with("engine=") || w.starts_with("version=") || w.starts_with("api="))
        .collect();
    if words.is_empty() {
        node.backend.clone()
    } else {
        format!("{} ({})", node.backend, words.join(" "))
    }
}

/// The general fields, filled where the nodes' reports allow: the
/// `network` fields of [`super::describe`] are added by the caller.
pub(crate) fn general_fields(hosts: &[Host<'_>]) -> (Map<String, Value>, Vec<&'static str>) {
    let nodes: Vec<&pb::NodeInfo> = hosts.iter().flat_map(|h| h.nodes.clone()).collect();
    let measured = |field: &str| -> Option<String> {
        match field {
            "division" => Some("network".into()),
            "number_of_nodes" => Some(hosts.len().to_string()),
            "host_processor_model_name" => distinct(hosts.iter().map(|h| hardware(h).cpu_model)),
            "host_processors_per_node" => per_host(hosts, |h| hardware(h).cpu_sockets.into()),
            "host_processor_core_count" => per_host(hosts, |h| hardware(h).cores_per_socket.into()),
            "host_memory_capacity" => {
                distinct(hosts.iter().map(|h| match hardware(h).memory_bytes {
                    0 => String::new(),
                    b => capacity(b),
                }))
            }
            "accelerators_per_node" => per_host(hosts, |h| hardware(h).accelerators.len() as u64),
            "accelerator_model_name" => {
                distinct(hosts.iter().flat_map(|h| hardware(h).accelerators))
            }
            "framework" => distinct(nodes.iter().map(|n| framework(n))),
            "operating_system" => distinct(nodes.iter().map(|n| n.os.clone())),
            "other_software_stack" => distinct(
                nodes
                    .iter()
                    .map(|n| format!("netdiv sut-node {}", n.software_version)),
            ),
            "host_networking" => distinct(hosts.iter().flat_map(|h| h.data_path_nics.clone())),
            "host_network_card_count" => per_host(hosts, |h| h.data_path_nics.len() as u64),
            // Notes may stay empty: the checker takes "" for them.
            "hw_notes" | "sw_notes" => Some(String::new()),
            _ => None,
        }
    };
    let mut fields = Map::new();
    let mut todo = Vec::new();
    for field in GENERAL_FIELDS {
        let value = measured(field);
        if value.is_none() {
            todo.push(field);
        }
        fields.insert(field.into(), value.unwrap_or_else(|| FILL_IN.into()).into());
    }
    (fields, todo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, boot: &str, gpus: usize) -> pb::NodeInfo {
        pb::NodeInfo {
            name: name.into(),
            software_version: "0.1.0".into(),
            os: "Linux 6.8".into(),
            backend: "openai".into(),
            backend_detail: "api=vllm engine=vllm version=0.11.0 url=http://127.0.0.1:8000".into(),
            host: Some(pb::HostIdentity {
                boot_id: boot.into(),
                ..Default::default()
            }),
            hardware: Some(pb::Hardware {
                cpu_model: "Intel Xeon 8480+".into(),
                cpu_sockets: 2,
                cores_per_socket: 56,
                memory_bytes: 2_000_000_000_000,
                accelerators: vec!["NVIDIA H100 80GB HBM3".into(); gpus],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hosts_are_counted_once_and_their_hardware_fills_the_fields() {
        // Two nodes on one GPU server, one on another.
        let nodes = [
            node("a0", "boot-a", 8),
            node("a1", "boot-a", 8),
            node("b0", "boot-b", 8),
        ];
        let nics = [
            vec!["ens1".to_string()],
            vec!["ens2".to_string()],
            vec!["ens1".to_string()],
        ];
        let hosts = hosts(&nodes, &nics);
        assert_eq!(hosts.len(), 2);
        let (fields, todo) = general_fields(&hosts);
        assert_eq!(fields["number_of_nodes"], "2");
        assert_eq!(fields["host_processors_per_node"], "2");
        assert_eq!(fields["host_processor_core_count"], "56");
        assert_eq!(fields["host_memory_capacity"], "2.0 TB");
        assert_eq!(fields["accelerators_per_node"], "8");
        assert_eq!(fields["accelerator_model_name"], "NVIDIA H100 80GB HBM3");
        // Host a's two data-path NICs, host b's one.
        assert_eq!(fields["host_network_card_count"], "2; 1");
        assert_eq!(
            fields["framework"],
            "openai (api=vllm engine=vllm version=0.11.0)"
        );
        assert_eq!(fields["division"], "network");
        assert!(todo.contains(&"system_type") && todo.contains(&"cooling"));
        assert!(!todo.contains(&"host_processor_model_name"));
        assert_eq!(fields.len(), GENERAL_FIELDS.len());
    }

    #[test]
    fn what_no_node_reports_is_left_to_a_person() {
        let bare = pb::NodeInfo {
            name: "n".into(),
            backend: "synthetic".into(),
            ..Default::default()
        };
        let hosts = hosts(std::slice::from_ref(&bare), &[]);
        let (fields, todo) = general_fields(&hosts);
        for field in [
            "host_processor_model_name",
            "accelerators_per_node",
            "framework",
        ] {
            assert_eq!(fields[field], FILL_IN, "{field}");
            assert!(todo.contains(&field));
        }
    }
}
