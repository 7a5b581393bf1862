//! What the submission tests share: the mlcommons/inference checkout the
//! official tools come from, a complete system description, the arguments
//! of a submission refused before any run, and reading back the verdict
//! `loadgen-node submission --check` prints.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::{workspace_root, write_file};

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

/// `loadgen-node submission` arguments for a llama2-70b-99.9 submission
/// over `nodes` (`--sut-node` URLs) that a refusal stops before any run
/// (its scorer is never reached): `system.json` and `user.conf` are
/// written into `dir`, the official tools come from `inference`. Replace
/// the first argument with `preflight` for the preflight alone.
pub fn refused_llm_submission(
    dir: &Path,
    inference: &Path,
    nodes: &[String],
) -> Result<Vec<String>> {
    write_file(dir, "system.json", SYSTEM_JSON)?;
    write_file(dir, "user.conf", "*.Offline.target_qps = 10\n")?;
    let mut args: Vec<String> = [
        "submission",
        "--submitter",
        "netdiv-ci",
        "--system",
        "lab",
        "--system-json",
        "system.json",
        "--benchmark",
        "llama2-70b-99.9",
        "--round",
        "v6.1",
        "--user-conf",
        "user.conf",
        "--output",
        "submission",
        "--progress",
        "never",
        "--accuracy-script",
        "true {log}",
    ]
    .map(String::from)
    .into();
    args.extend([
        "--inference".into(),
        inference.display().to_string(),
        "--python".into(),
        crate::python::python_for_official_tools()?
            .display()
            .to_string(),
    ]);
    for node in nodes {
        args.extend(["--sut-node".into(), node.clone()]);
    }
    Ok(args)
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
