//! What a Network-division tree holds besides the logs, so a reviewer can
//! check the result: the QDL's source above the session layer (built into
//! this program, with its commit) and the session-layer documentation,
//! the system diagram, each node's configuration and Info, the approval
//! of any compression on the wire, every run's record beside its logs,
//! and, for a rehearsal, marks no reader or script can miss.

use std::path::Path;

use anyhow::{Context, Result};
use netdiv_proto::pb;
use serde_json::{json, Value};

use super::rehearsal::{BANNER_START, REASONS_KEY};
use super::tree::{write, Tree};

/// The QDL's and the session layer's sources (`qdl/`, `proto/`) with the
/// commit they came from, built into this program.
const QDL_SOURCE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/qdl-source.tar"));

/// The session-layer API's documentation (the rules require it).
const SESSION_LAYER: &str = include_str!("../../../../docs/session-layer.md");

/// The banner a rehearsal tree's every README starts with.
pub(crate) fn rehearsal_banner(reasons: &[String]) -> String {
    let mut text = String::from(
        "> **REHEARSAL — NOT A RESULT.** This tree breaks Network-division rules netdiv \
         checks, or holds results that did (netdiv's `submission` says why):\n",
    );
    for reason in reasons {
        text.push_str(&format!(">\n> - {reason}\n"));
    }
    text.push('\n');
    text
}

/// `documentation/`: the QDL source, the session-layer documentation, the
/// diagram, the nodes, the compression approval, and a README naming them.
pub(crate) fn write_documentation(
    tree: &Tree,
    diagram: Option<&Path>,
    nodes: &[(String, pb::NodeInfo)],
    compression_approved: Option<&str>,
    attestations: &[(&str, String)],
) -> Result<()> {
    let docs = tree.documentation_dir();
    write_bytes(&docs.join("netdiv-qdl-source.tar"), QDL_SOURCE)?;
    write(&docs.join("session-layer.md"), SESSION_LAYER)?;
    let diagram_name = match diagram {
        Some(path) => {
            let name = format!(
                "system-diagram{}",
                path.extension()
                    .map(|e| format!(".{}", e.to_string_lossy()))
                    .unwrap_or_default()
            );
            std::fs::copy(path, docs.join(&name))
                .with_context(|| format!("cannot copy the diagram {}", path.display()))?;
            Some(name)
        }
        None => None,
    };
    write(
        &docs.join("nodes.json"),
        &(serde_json::to_string_pretty(&json!({ "nodes": nodes_json(nodes) }))? + "\n"),
    )?;
    if let Some(approval) = compression_approved {
        write(
            &docs.join("compression-approval.txt"),
            &format!("Working-group approval of the compression on the wire: {approval}\n"),
        )?;
    }
    if !attestations.is_empty() {
        let text: String = attestations
            .iter()
            .map(|(what, text)| format!("The submitter attests that {what}: {text}\n"))
            .collect();
        write(&docs.join("attestations.txt"), &text)?;
    }
    let readme = format!(
        "# Documentation\n\n\
         The harness is netdiv: a Rust LoadGen node whose QDL (Query Dispatch Library) sends \
         every query over the network to the SUT's nodes, run here under the official MLPerf \
         LoadGen.\n\n\
         - `netdiv-qdl-source.tar`: the QDL's source above the OSI session layer (`qdl/`) and \
         the session-layer API (`proto/`), with the commit it came from (`SOURCE.txt`).\n\
         - `session-layer.md`: the session-layer API, field by field, with the bytes each \
         query and answer carries.\n\
         - {}\n\
         - `nodes.json`: each SUT node's Info: name, host, backend and its settings (model, \
         batching, serving engine and version), codecs and network interfaces.\n\
         {}{}- Every run's `netdiv_run.json` beside its logs (a compliance test's in its TESTxx \
         folder): the nodes' machines and data paths, the traffic per node, every Name() round \
         trip and the rules' bandwidth check.\n",
        match &diagram_name {
            Some(name) => format!("`{name}`: the system diagram."),
            None => "No system diagram was given (a rehearsal).".into(),
        },
        if compression_approved.is_some() {
            "- `compression-approval.txt`: the working group's approval of the compression on \
             the wire.\n"
        } else {
            ""
        },
        if attestations.is_empty() {
            ""
        } else {
            "- `attestations.txt`: what the submitter attests to that netdiv could not check \
             (virtual machines, a serving engine on another machine).\n"
        }
    );
    write(&docs.join("README.md"), &readme)
}

/// Each node's Info as JSON.
fn nodes_json(nodes: &[(String, pb::NodeInfo)]) -> Value {
    Value::Array(
        nodes
            .iter()
            .map(|(url, i)| {
                json!({
                    "url": url,
                    "name": i.name,
                    "software_version": i.software_version,
                    "protocol_version": i.protocol_version,
                    "hostname": i.hostname,
                    "os": i.os,
                    "host": i.host.as_ref().map(|h| json!({
                        "machine_id": h.machine_id, "boot_id": h.boot_id,
                        "product_uuid": h.product_uuid, "netns": h.netns,
                        "virtualization": h.virtualization,
                    })),
                    "engine": i.engine.as_ref().map(|e| json!({
                        "url": e.url, "addresses": e.addresses, "on_this_host": e.on_this_host,
                    })),
                    "benchmark": i.benchmark,
                    "backend": i.backend,
                    "backend_detail": i.backend_detail,
                    "max_batch_size": i.max_batch_size,
                    "max_batch_wait_us": i.max_batch_wait_us,
                    "response_codec": pb::Codec::try_from(i.response_codec)
                        .map(|c| c.as_str_name())
                        .unwrap_or("unknown"),
                    "cpu_latency_us": i.cpu_latency_us,
                    "nics": i.nics.iter().map(|n| json!({
                        "name": n.name, "speed_mbps": n.speed_mbps, "mtu": n.mtu,
                        "state": n.state, "addresses": n.addresses, "kind": n.kind,
                        "lower": n.lower, "backed": n.backed, "driver": n.driver,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

fn write_bytes(path: &Path, data: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, data).with_context(|| format!("cannot write {}", path.display()))
}

/// A rehearsal's marks: " (rehearsal)" on the system name and the reasons
/// in the system JSON (where a results table takes names from) and in
/// `nodes.json`, the banner at the top of every README of the submitter's
/// tree, and every run record inside it saying so.
pub(crate) fn mark_rehearsal(tree: &Tree, reasons: &[String]) -> Result<()> {
    let nodes = tree.documentation_dir().join("nodes.json");
    if nodes.is_file() {
        let mut value: Value = serde_json::from_str(
            &std::fs::read_to_string(&nodes)
                .with_context(|| format!("cannot read {}", nodes.display()))?,
        )
        .with_context(|| format!("{} is not JSON", nodes.display()))?;
        if let Some(object) = value.as_object_mut() {
            object.insert(REASONS_KEY.into(), json!(reasons));
        }
        write(&nodes, &(serde_json::to_string_pretty(&value)? + "\n"))?;
    }
    let path = tree.system_json();
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut system: Value = serde_json::from_str(&text)?;
    if let Some(object) = system.as_object_mut() {
        let name = object
            .get("system_name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !name.ends_with(" (rehearsal)") {
            object.insert("system_name".into(), json!(format!("{name} (rehearsal)")));
        }
        object.insert(REASONS_KEY.into(), json!(reasons));
    }
    write(&path, &(serde_json::to_string_pretty(&system)? + "\n"))?;
    let banner = rehearsal_banner(reasons);
    for_each_file(&tree.submitter_dir, &mut |file| {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "README.md" {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            if !text.starts_with(BANNER_START) {
                write(file, &format!("{banner}{text}"))?;
            }
        } else if name == loadgen_node::run_record::FILE {
            let mut record = loadgen_node::run_record::RunRecord::read(file)?;
            record.rehearsal = true;
            for reason in reasons {
                if !record.rehearsal_reasons.contains(reason) {
                    record.rehearsal_reasons.push(reason.clone());
                }
            }
            record.write(file.parent().expect("a file has a folder"))?;
        }
        Ok(())
    })
}

/// Calls `f` on every file under `dir`.
fn for_each_file(dir: &Path, f: &mut dyn FnMut(&Path) -> Result<()>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            for_each_file(&path, f)?;
        } else {
            f(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_qdl_source_is_an_archive_with_its_commit() {
        let tar = super::QDL_SOURCE;
        // ustar: the first entry's name, and its magic at 257.
        assert!(tar.starts_with(b"netdiv-qdl-source/SOURCE.txt"));
        assert_eq!(&tar[257..262], b"ustar");
        let text = String::from_utf8_lossy(&tar[512..1024]);
        assert!(text.contains("Commit: "), "{text}");
        let names = String::from_utf8_lossy(tar);
        for file in [
            "netdiv-qdl-source/qdl/src/network/router.rs",
            "netdiv-qdl-source/proto/netdiv/v1/sut_node.proto",
            "netdiv-qdl-source/loadgen-node/official/shim.cc",
            "netdiv-qdl-source/loadgen-node/src/sut/official.rs",
        ] {
            assert!(names.contains(file), "{file} is not in the archive");
        }
    }
}
