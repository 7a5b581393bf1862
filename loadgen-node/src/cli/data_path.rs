//! The data path of each node, as the rules mean it: the interface this
//! LoadGen node's route to the node leaves from, and the node's interface
//! holding the address it was reached at, each resolved to what carries
//! it (a device, or virtual interfaces only; `sut_node::host::nic`). Shared by
//! the run record, the system description and a submission's checks.

use std::net::{IpAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;

use loadgen_node::run_record::{DataPathRecord, HostRecord, LinkRecord};
use netdiv_proto::pb;
use qdl::NodeUrl;

/// The address each node was reached at, if it resolves.
pub(crate) fn node_addresses(urls: &[NodeUrl]) -> Vec<Option<IpAddr>> {
    urls.iter().map(node_address).collect()
}

/// The address a node's URL resolves to, if it does.
pub(crate) fn node_address(url: &NodeUrl) -> Option<IpAddr> {
    (url.host.as_str(), url.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
}

/// The address of a node's URL given as text (`grpc://host:port`).
pub(crate) fn address_of(url: &str) -> Option<IpAddr> {
    node_address(&url.parse().ok()?)
}

/// The name of this host's interface the route to `ip` leaves from: the
/// kernel's egress device ([`super::egress`]: a bridge seen through to the
/// port the node was learned on), or, where the route tables cannot be
/// read, the interface holding the source address the kernel would pick.
pub(crate) fn route_interface(ip: IpAddr) -> Option<String> {
    let addresses = sut_node::host::nic::interface_addresses();
    let own: Vec<IpAddr> = addresses.iter().map(|(_, a)| *a).collect();
    let egress = super::egress::egress_device(
        Path::new("/proc/net"),
        Path::new("/sys/class/net"),
        ip,
        &own,
    );
    if egress.is_some() {
        return egress;
    }
    let bind = if ip.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" };
    let local = UdpSocket::bind(bind)
        .and_then(|s| s.connect((ip, 9)).map(|()| s))
        .and_then(|s| s.local_addr())
        .ok()?;
    addresses
        .into_iter()
        .find(|(_, a)| *a == local.ip())
        .map(|(name, _)| name)
}

/// This host's interface `name`, resolved.
pub(crate) fn local_link(name: &str) -> LinkRecord {
    let sys = Path::new("/sys/class/net");
    let link = sut_node::host::nic::resolve_link(sys, name);
    let speed = std::fs::read_to_string(sys.join(name).join("speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(0) as u64;
    LinkRecord {
        name: name.to_string(),
        kind: link.kind,
        lower: link.lower,
        backed: link.backed,
        speed_mbps: speed,
    }
}

/// A node's interface holding `reached_at`, as its Info resolves it.
pub(crate) fn node_link(info: &pb::NodeInfo, reached_at: Option<IpAddr>) -> Option<LinkRecord> {
    let ip = reached_at?.to_string();
    let nic = info.nics.iter().find(|n| n.addresses.contains(&ip))?;
    Some(LinkRecord {
        name: nic.name.clone(),
        kind: nic.kind.clone(),
        lower: nic.lower.clone(),
        backed: nic.backed,
        speed_mbps: nic.speed_mbps,
    })
}

/// Both ends of the data path to a node reached at `reached_at`.
pub(crate) fn data_path(info: &pb::NodeInfo, reached_at: Option<IpAddr>) -> DataPathRecord {
    DataPathRecord {
        loadgen_interface: reached_at
            .and_then(route_interface)
            .map(|name| local_link(&name)),
        node_interface: node_link(info, reached_at),
    }
}

/// The record of a machine's identities.
pub(crate) fn host_record(host: &pb::HostIdentity) -> HostRecord {
    HostRecord {
        machine_id: host.machine_id.clone(),
        boot_id: host.boot_id.clone(),
        product_uuid: host.product_uuid.clone(),
        netns: host.netns.clone(),
        virtualization: host.virtualization.clone(),
    }
}

/// The rate of this LoadGen node's side of the data path, bytes/s: the
/// sum of the distinct interfaces the routes to the nodes leave from;
/// `None` when one of them reports no speed.
pub(crate) fn loadgen_rate_bytes_per_s(paths: &[DataPathRecord]) -> Option<f64> {
    let mut seen: Vec<&str> = Vec::new();
    let mut total = 0.0;
    for link in paths.iter().filter_map(|p| p.loadgen_interface.as_ref()) {
        if seen.contains(&link.name.as_str()) {
            continue;
        }
        seen.push(&link.name);
        if link.speed_mbps == 0 {
            return None;
        }
        total += link.speed_mbps as f64 * 1e6 / 8.0;
    }
    (!seen.is_empty()).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str, speed: u64) -> DataPathRecord {
        DataPathRecord {
            loadgen_interface: Some(LinkRecord {
                name: name.into(),
                speed_mbps: speed,
                ..LinkRecord::default()
            }),
            node_interface: None,
        }
    }

    #[test]
    fn the_rate_counts_each_interface_once_and_unknown_is_unknown() {
        let two_nodes_one_nic = [link("eth0", 100_000), link("eth0", 100_000)];
        assert_eq!(loadgen_rate_bytes_per_s(&two_nodes_one_nic), Some(12.5e9));
        let two_nics = [link("eth0", 100_000), link("eth1", 100_000)];
        assert_eq!(loadgen_rate_bytes_per_s(&two_nics), Some(25e9));
        assert_eq!(loadgen_rate_bytes_per_s(&[link("veth0", 0)]), None);
        assert_eq!(loadgen_rate_bytes_per_s(&[]), None);
    }

    #[test]
    fn the_route_to_loopback_leaves_from_loopback() {
        let name = route_interface("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(name, "lo");
        assert_eq!(local_link(&name).kind, "loopback");
        assert!(!local_link(&name).backed);
    }
}
