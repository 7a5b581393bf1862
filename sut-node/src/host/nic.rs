//! Network interfaces as Linux reports them under /sys/class/net, for the
//! system description (speed and MTU come from the OS, not from a guess),
//! each resolved to what carries its traffic (a device, or virtual
//! interfaces only); and the identities of the machine a process runs on.

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
    let host = host();
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "?".to_string()
        } else {
            s.to_string()
        }
    };
    format!(
        "{}/{}",
        or_unknown(&host.machine_id),
        or_unknown(&host.netns)
    )
}

/// The identities of this machine and network stack (each empty where it
/// cannot be read).
pub fn host() -> pb::HostIdentity {
    let first = |paths: &[&str]| {
        paths
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    pb::HostIdentity {
        machine_id: first(&["/etc/machine-id", "/var/lib/dbus/machine-id"]),
        boot_id: first(&["/proc/sys/kernel/random/boot_id"]),
        product_uuid: first(&["/sys/class/dmi/id/product_uuid"]),
        netns: std::fs::read_link("/proc/self/ns/net")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        virtualization: crate::host::hypervisor::virtualization(),
    }
}

/// The identities two hosts share that put them on one machine: the same
/// running kernel (boot id) or the same board (DMI product UUID); the
/// machine-id only beside one of those (a cloned VM image shares it with
/// its twin on another machine). Empty when they are separate machines.
pub fn shared_identities(a: &pb::HostIdentity, b: &pb::HostIdentity) -> Vec<String> {
    let same = |x: &str, y: &str| !x.is_empty() && x == y;
    let mut shared = Vec::new();
    if same(&a.boot_id, &b.boot_id) {
        shared.push(format!("boot id {}", a.boot_id));
    }
    if same(&a.product_uuid, &b.product_uuid) {
        shared.push(format!("DMI product UUID {}", a.product_uuid));
    }
    if !shared.is_empty() && same(&a.machine_id, &b.machine_id) {
        shared.push(format!("machine-id {}", a.machine_id));
    }
    shared
}

/// What carries an interface's traffic, resolved through /sys: the device
/// behind it, or the interfaces below a virtual one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// "device", or the virtual kind ("veth", "bridge", "bond", "vlan",
    /// "macvlan", "tun", "loopback", "dummy", "virtual").
    pub kind: String,
    /// The interfaces below it (ports, slaves, parents).
    pub lower: Vec<String>,
    /// Whether a device backs it, itself or below.
    pub backed: bool,
}

/// How deep stacked interfaces are followed (a VLAN on a bond on NICs is
/// 3); a loop in /sys stops here.
const MAX_LINK_DEPTH: usize = 8;

/// Resolves interface `name` under `sys` (`/sys/class/net`).
pub fn resolve_link(sys: &Path, name: &str) -> Link {
    resolve_at(sys, name, 0)
}

fn resolve_at(sys: &Path, name: &str, depth: usize) -> Link {
    let dir = sys.join(name);
    let virtual_link = |kind: &str, lower: Vec<String>| {
        let backed =
            depth < MAX_LINK_DEPTH && lower.iter().any(|l| resolve_at(sys, l, depth + 1).backed);
        Link {
            kind: kind.to_string(),
            lower,
            backed,
        }
    };
    let flags = read(&dir, "flags")
        .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    if name == "lo" || flags & 0x8 != 0 {
        return virtual_link("loopback", Vec::new());
    }
    if dir.join("device").exists() {
        return Link {
            kind: "device".into(),
            lower: Vec::new(),
            backed: true,
        };
    }
    let listed = |sub: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join(sub))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    if dir.join("bridge").is_dir() {
        return virtual_link("bridge", listed("brif"));
    }
    if let Some(slaves) = read(&dir, "bonding/slaves") {
        return virtual_link(
            "bond",
            slaves.split_whitespace().map(String::from).collect(),
        );
    }
    let lower: Vec<String> = listed("")
        .into_iter()
        .filter_map(|f| f.strip_prefix("lower_").map(String::from))
        .collect();
    let devtype = read(&dir, "uevent").and_then(|u| {
        u.lines()
            .find_map(|l| l.strip_prefix("DEVTYPE=").map(String::from))
    });
    if !lower.is_empty() {
        return virtual_link(devtype.as_deref().unwrap_or("stacked"), lower);
    }
    if dir.join("tun_flags").exists() {
        return virtual_link("tun", Vec::new());
    }
    let iflink = read(&dir, "iflink");
    let ifindex = read(&dir, "ifindex");
    let kind = match devtype.as_deref() {
        Some(t) => t,
        // A veth's peer index differs from its own (and it has no lower).
        None if iflink.is_some() && iflink != ifindex => "veth",
        None => "virtual",
    };
    virtual_link(kind, Vec::new())
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
            let name = e.file_name().to_string_lossy().into_owned();
            let link = resolve_link(Path::new("/sys/class/net"), &name);
            pb::Nic {
                driver: crate::host::hypervisor::nic_driver(Path::new("/sys/class/net"), &name),
                kind: link.kind,
                lower: link.lower,
                backed: link.backed,
                name,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /sys/class/net entry.
    fn iface(sys: &Path, name: &str, files: &[(&str, &str)], dirs: &[&str]) {
        let dir = sys.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for d in dirs {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        for (f, text) in files {
            std::fs::create_dir_all(dir.join(f).parent().unwrap()).unwrap();
            std::fs::write(dir.join(f), text).unwrap();
        }
    }

    #[test]
    fn links_resolve_to_a_device_or_say_they_are_virtual() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = tmp.path();
        iface(
            sys,
            "eth0",
            &[("ifindex", "2"), ("iflink", "2")],
            &["device"],
        );
        iface(
            sys,
            "eth1",
            &[("ifindex", "3"), ("iflink", "3")],
            &["device"],
        );
        iface(sys, "veth0", &[("ifindex", "9"), ("iflink", "8")], &[]);
        iface(sys, "lo", &[("flags", "0x9")], &[]);
        iface(
            sys,
            "tap0",
            &[("ifindex", "5"), ("iflink", "5")],
            &["tun_flags"],
        );
        iface(
            sys,
            "br-veth",
            &[("uevent", "DEVTYPE=bridge\n")],
            &["bridge", "brif/veth0"],
        );
        iface(
            sys,
            "br-nic",
            &[("uevent", "DEVTYPE=bridge\n")],
            &["bridge", "brif/veth0", "brif/eth0"],
        );
        iface(
            sys,
            "bond0",
            &[("bonding/slaves", "eth0 eth1")],
            &["bonding"],
        );
        iface(
            sys,
            "bond0.100",
            &[("uevent", "DEVTYPE=vlan\n")],
            &["lower_bond0"],
        );
        iface(
            sys,
            "mv0",
            &[("uevent", "DEVTYPE=macvlan\n")],
            &["lower_veth0"],
        );
        let kind = |n: &str| {
            let l = resolve_link(sys, n);
            (l.kind, l.backed)
        };
        assert_eq!(kind("eth0"), ("device".into(), true));
        assert_eq!(kind("veth0"), ("veth".into(), false));
        assert_eq!(kind("lo"), ("loopback".into(), false));
        assert_eq!(kind("tap0"), ("tun".into(), false));
        assert_eq!(kind("br-veth"), ("bridge".into(), false));
        assert_eq!(kind("br-nic"), ("bridge".into(), true));
        assert_eq!(resolve_link(sys, "br-nic").lower, ["eth0", "veth0"]);
        assert_eq!(kind("bond0"), ("bond".into(), true));
        assert_eq!(kind("bond0.100"), ("vlan".into(), true));
        assert_eq!(kind("mv0"), ("macvlan".into(), false));
        assert_eq!(kind("missing"), ("virtual".into(), false));
    }

    #[test]
    fn one_kernel_or_one_board_is_one_machine() {
        let host = |m: &str, b: &str, u: &str| pb::HostIdentity {
            machine_id: m.into(),
            boot_id: b.into(),
            product_uuid: u.into(),
            netns: String::new(),
            virtualization: String::new(),
        };
        // Containers: their own machine-ids, one kernel.
        let shared = shared_identities(&host("m1", "b1", ""), &host("m2", "b1", ""));
        assert_eq!(shared, ["boot id b1"]);
        // One board seen from two boots is one machine.
        assert_eq!(
            shared_identities(&host("m1", "b1", "u1"), &host("m1", "b2", "u1")),
            ["DMI product UUID u1", "machine-id m1"]
        );
        // A cloned image on another machine shares only its machine-id.
        assert!(shared_identities(&host("m1", "b1", "u1"), &host("m1", "b2", "u2")).is_empty());
        // Nothing readable is nothing shared.
        assert!(shared_identities(&host("", "", ""), &host("", "", "")).is_empty());
    }
}
