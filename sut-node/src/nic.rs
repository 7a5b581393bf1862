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

/// Every IP address of this host, with the interface holding it, from
/// getifaddrs(3); empty if it fails.
pub fn interface_addresses() -> Vec<(String, std::net::IpAddr)> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    let mut found = Vec::new();
    // SAFETY: getifaddrs fills `list`, freed below; each entry is read
    // only while the list lives, and each address as its family says.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return found;
        }
        let mut entry = list;
        while !entry.is_null() {
            let e = &*entry;
            if !e.ifa_addr.is_null() {
                let addr = match i32::from((*e.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(e.ifa_addr as *const libc::sockaddr_in);
                        Some(std::net::IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(e.ifa_addr as *const libc::sockaddr_in6);
                        Some(std::net::IpAddr::from(sin6.sin6_addr.s6_addr))
                    }
                    _ => None,
                };
                if let Some(addr) = addr {
                    let name = std::ffi::CStr::from_ptr(e.ifa_name)
                        .to_string_lossy()
                        .into_owned();
                    found.push((name, addr));
                }
            }
            entry = e.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found
}

/// Every interface except loopback; empty where /sys is not available.
pub fn interfaces() -> Vec<pb::Nic> {
    let addresses = interface_addresses();
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
                addresses: addresses
                    .iter()
                    .filter(|(name, _)| *name == e.file_name().to_string_lossy())
                    .map(|(_, ip)| ip.to_string())
                    .collect(),
            }
        })
        .collect();
    nics.sort_by(|a, b| a.name.cmp(&b.name));
    nics
}
