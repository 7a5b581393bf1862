//! What a submission's run ran with, kept beside it (its `.netdiv-finished`
//! mark) so that a resumed submission keeps a finished run only when
//! nothing it depends on changed: its flags, the contents of the files
//! they name (user.conf, data set, node configs), the nodes (their
//! software, backend and engine, batching, codecs) and this program.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use netdiv_proto::pb;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a run ran with: the one shape of a `.netdiv-finished` mark.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Fingerprint {
    /// The child run's arguments.
    pub(crate) arguments: Vec<String>,
    /// Each file an argument names, by path: its identity
    /// ([`file_identity`]).
    pub(crate) files: BTreeMap<String, String>,
    /// The nodes as they described themselves.
    pub(crate) nodes: Vec<NodePrint>,
    /// This program's version and sha256.
    pub(crate) loadgen_node: String,
}

/// What of a node a kept run depends on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NodePrint {
    url: String,
    name: String,
    hostname: String,
    software_version: String,
    backend: String,
    backend_detail: String,
    benchmark: String,
    max_batch_size: u32,
    max_batch_wait_us: u64,
    codecs: Vec<i32>,
    response_codec: i32,
}

/// Files up to this size are hashed; larger ones (data sets) are known by
/// their size and modification time.
const HASHED_UP_TO: u64 = 64 << 20;

/// The fingerprint of a child run about to start.
pub(crate) fn of(command: &Command, nodes: &[(String, pb::NodeInfo)]) -> Fingerprint {
    let arguments: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut files = BTreeMap::new();
    for (i, arg) in arguments.iter().enumerate() {
        // The run's own output folder is what it writes, not what it reads.
        if i > 0 && arguments[i - 1] == "--output" {
            continue;
        }
        let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
        let path = Path::new(value);
        if path.is_absolute() && path.exists() {
            files.insert(value.to_string(), file_identity(path));
        }
    }
    let nodes = nodes
        .iter()
        .map(|(url, info)| NodePrint {
            url: url.clone(),
            name: info.name.clone(),
            hostname: info.hostname.clone(),
            software_version: info.software_version.clone(),
            backend: info.backend.clone(),
            backend_detail: info.backend_detail.clone(),
            benchmark: info.benchmark.clone(),
            max_batch_size: info.max_batch_size,
            max_batch_wait_us: info.max_batch_wait_us,
            codecs: info.codecs.clone(),
            response_codec: info.response_codec,
        })
        .collect();
    Fingerprint {
        arguments,
        files,
        nodes,
        loadgen_node: this_program().to_string(),
    }
}

/// What changed between the fingerprint a run was kept with (`None`: its
/// mark says nothing readable) and the one it would run with now, one
/// line per part (empty: nothing).
pub(crate) fn changes(kept: Option<&Fingerprint>, now: &Fingerprint) -> Vec<String> {
    let Some(kept) = kept else {
        return vec!["the earlier run recorded nothing of what it ran with".into()];
    };
    let mut changed = Vec::new();
    if kept.arguments != now.arguments {
        changed.push("its flags".to_string());
    }
    let names: std::collections::BTreeSet<&String> =
        kept.files.keys().chain(now.files.keys()).collect();
    for name in names {
        if kept.files.get(name) != now.files.get(name) {
            changed.push(format!("the file {name}"));
        }
    }
    if kept.nodes != now.nodes {
        changed.push("the nodes (software, backend, engine or settings)".into());
    }
    if kept.loadgen_node != now.loadgen_node {
        changed.push("the loadgen-node program".into());
    }
    changed
}

/// A file's sha256, a folder's listing, or a large file's size and time.
fn file_identity(path: &Path) -> String {
    let Ok(meta) = std::fs::metadata(path) else {
        return "unreadable".into();
    };
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    if meta.is_dir() {
        let mut listing: Vec<String> = std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some(format!("{:?} {}", e.file_name(), m.len()))
            })
            .collect();
        listing.sort();
        return format!("folder sha256:{:x}", Sha256::digest(listing.join("\n")));
    }
    if meta.len() > HASHED_UP_TO {
        return format!("{} bytes, modified {modified}", meta.len());
    }
    match std::fs::read(path) {
        Ok(bytes) => format!("sha256:{:x}", Sha256::digest(bytes)),
        Err(_) => "unreadable".into(),
    }
}

/// This program's sha256 (once per process).
fn this_program() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| match std::env::current_exe() {
        Ok(exe) => {
            let hash = std::fs::read(&exe)
                .map(|b| format!("{:x}", Sha256::digest(b)))
                .unwrap_or_default();
            format!("{} {hash}", env!("CARGO_PKG_VERSION"))
        }
        Err(_) => env!("CARGO_PKG_VERSION").into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_flag_or_node_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("user.conf");
        std::fs::write(&conf, "*.Offline.target_qps = 10\n").unwrap();
        let mut command = Command::new("loadgen-node");
        command.arg("run").arg("--user-conf").arg(&conf);
        let node = pb::NodeInfo {
            name: "a".into(),
            software_version: "0.1.0".into(),
            ..Default::default()
        };
        let nodes = vec![("grpc://10.0.0.2:7000".to_string(), node)];
        let kept = of(&command, &nodes);
        assert!(changes(Some(&kept), &of(&command, &nodes)).is_empty());
        std::fs::write(&conf, "*.Offline.target_qps = 20\n").unwrap();
        let now = of(&command, &nodes);
        assert_eq!(
            changes(Some(&kept), &now),
            [format!("the file {}", conf.display())]
        );
        let mut upgraded = nodes.clone();
        upgraded[0].1.software_version = "0.2.0".into();
        assert_eq!(
            changes(Some(&now), &of(&command, &upgraded)),
            ["the nodes (software, backend, engine or settings)"]
        );
        command.arg("--sample-codec").arg("lz4");
        assert_eq!(changes(Some(&now), &of(&command, &nodes)), ["its flags"]);
        assert_eq!(changes(None, &now).len(), 1);
    }
}
