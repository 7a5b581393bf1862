//! What the submission tests share: the mlcommons/inference checkout the
//! official tools come from, a complete system description, and reading
//! back the verdict `loadgen-node submission --check` prints.

use std::path::PathBuf;

use crate::workspace_root;

/// The checkout: `NETDIV_INFERENCE_REPO`, else the shared copy beside the
/// workspace (`../shared/mlcommons-inference`), if either exists.
pub fn inference_checkout() -> Option<PathBuf> {
    let from_env = std::env::var_os("NETDIV_INFERENCE_REPO").map(PathBuf::from);
    let shared = workspace_root().join("../shared/mlcommons-inference");
    from_env.or(Some(shared)).filter(|p| {
        p.join("tools/submission/submission_checker/main.py")
            .is_file()
    })
}

/// A system description with every field a person fills in (the network
/// fields netdiv measures are left out, as a user would).
pub const SYSTEM_JSON: &str = r#"{
  "status": "available", "system_type": "datacenter",
  "system_name": "netdiv test lab: sut-nodes in network namespaces",
  "number_of_nodes": "2", "host_processor_model_name": "x86_64 (CI machine)",
  "host_processors_per_node": "1", "host_processor_core_count": "2",
  "host_memory_capacity": "24 GB", "host_storage_capacity": "N/A", "host_storage_type": "SSD",
  "accelerators_per_node": "0", "accelerator_model_name": "none (synthetic backend)",
  "accelerator_memory_capacity": "N/A", "framework": "netdiv synthetic backend",
  "operating_system": "Linux", "other_software_stack": "netdiv",
  "host_processor_frequency": "N/A", "host_processor_caches": "N/A",
  "host_memory_configuration": "N/A", "host_processor_interconnect": "N/A",
  "host_networking": "veth", "host_networking_topology": "point to point",
  "accelerator_frequency": "N/A", "accelerator_host_interconnect": "N/A",
  "accelerator_interconnect": "N/A", "accelerator_interconnect_topology": "N/A",
  "accelerator_memory_configuration": "N/A", "accelerator_on-chip_memories": "N/A",
  "cooling": "air", "hw_notes": "", "sw_notes": "", "host_network_card_count": "1",
  "system_type_detail": "test lab",
  "network_type": "Ethernet (veth pairs)", "network_media": "virtual",
  "network_topology": "one veth pair per sut-node"
}
"#;

/// The checker's errors as `submission --check` prints them
/// (`  ERROR xN: message`), messages only.
pub fn checker_errors(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ERROR x"))
        .filter_map(|l| l.split_once(": ").map(|(_, m)| m.to_string()))
        .collect()
}
