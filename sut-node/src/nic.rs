//! Network interfaces as Linux reports them under /sys/class/net, for the
//! system description (speed and MTU come from the OS, not from a guess).

use std::path::Path;

use netdiv_proto::pb;

fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Which host and network stack this process runs on:
/// `MACHINE-ID/net:[INODE]`. Two processes on one machine in different
/// network namespaces (a lab of namespaces joined by veth links) differ;
/// two on one network stack do not. Parts that cannot be read are `?`.
pub fn host_identity() -> String {
    let machine = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "?".into());
    let netns = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "?".into());
    format!("{machine}/{netns}")
}

/// Every interface except loopback; empty where /sys is not available.
pub fn interfaces() -> Vec<pb::Nic> {
    let Ok(entries) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut nics: Vec<pb::Nic> = entries
        .flatten()
        .filter(|e| e.file_name() != "lo")
        .map(|e| {
            let dir = e.path();
            pb::Nic {
                name: e.file_name().to_string_lossy().into_owned(),
                // Virtual links report -1 or nothing: 0 means unknown.
                speed_mbps: read(&dir, "speed")
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|&s| s > 0)
                    .unwrap_or(0) as u64,
                mtu: read(&dir, "mtu").and_then(|s| s.parse().ok()).unwrap_or(0),
                mac: read(&dir, "address").unwrap_or_default(),
                state: read(&dir, "operstate").unwrap_or_default(),
            }
        })
        .collect();
    nics.sort_by(|a, b| a.name.cmp(&b.name));
    nics
}
