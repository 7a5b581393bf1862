//! The kernel's egress device towards an address, read as the kernel
//! routes (not which interface owns the source address): the longest
//! matching route of the main table (`/proc/net/route`,
//! `/proc/net/ipv6_route`), `lo` for this host's own addresses, and, when
//! the device is a bridge, the bridge port the address's MAC was learned
//! on (`/proc/net/arp`, then the bridge's forwarding table in
//! `/sys/class/net/BRIDGE/brforward`). A bridge with one physical port
//! and virtual machines' taps on the others is then seen as the tap it
//! is. Reading from root folders keeps it testable against written files.

use std::net::IpAddr;
use std::path::Path;

/// The device the kernel sends packets for `ip` out of, resolved through
/// a bridge to its port; `None` when no route matches.
pub(crate) fn egress_device(
    proc_net: &Path,
    sys_net: &Path,
    ip: IpAddr,
    own: &[IpAddr],
) -> Option<String> {
    if ip.is_loopback() || own.contains(&ip) {
        // The local table: this host's own addresses go out through lo.
        return Some("lo".into());
    }
    let device = match ip {
        IpAddr::V4(v4) => route_v4(&read(&proc_net.join("route")), u32::from(v4)),
        IpAddr::V6(v6) => route_v6(&read(&proc_net.join("ipv6_route")), u128::from(v6)),
    }?;
    if sys_net.join(&device).join("bridge").is_dir() {
        let port = neighbour_mac(&read(&proc_net.join("arp")), ip, &device)
            .and_then(|mac| learned_port(sys_net, &device, mac));
        if let Some(port) = port {
            return Some(port);
        }
    }
    Some(device)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The longest up route of `/proc/net/route` holding `ip` (its fields are
/// in the kernel's byte order: little-endian here), lowest metric first.
fn route_v4(table: &str, ip: u32) -> Option<String> {
    let mut best: Option<(u32, u32, String)> = None;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::swap_bytes);
        let (Some(dest), Some(flags), Some(metric), Some(mask)) = (
            hex(f[1]),
            u32::from_str_radix(f[3], 16).ok(),
            f[6].parse::<u32>().ok(),
            hex(f[7]),
        ) else {
            continue;
        };
        if flags & 1 == 0 || ip & mask != dest {
            continue;
        }
        let better = best.as_ref().is_none_or(|(m, b, _)| {
            mask.count_ones() > m.count_ones() || (mask == *m && metric < *b)
        });
        if better {
            best = Some((mask, metric, f[0].to_string()));
        }
    }
    best.map(|(_, _, device)| device)
}

/// The longest route of `/proc/net/ipv6_route` holding `ip`.
fn route_v6(table: &str, ip: u128) -> Option<String> {
    let mut best: Option<(u32, u32, String)> = None;
    for line in table.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let (Ok(dest), Ok(len), Ok(metric)) = (
            u128::from_str_radix(f[0], 16),
            u32::from_str_radix(f[1], 16),
            u32::from_str_radix(f[5], 16),
        ) else {
            continue;
        };
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len.min(128))
        };
        if ip & mask != dest || f[9] == "lo" {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|(l, m, _)| len > *l || (len == *l && metric < *m))
        {
            best = Some((len, metric, f[9].to_string()));
        }
    }
    best.map(|(_, _, device)| device)
}

/// The MAC the neighbour table holds for `ip` on `device` (IPv4).
fn neighbour_mac(arp: &str, ip: IpAddr, device: &str) -> Option<[u8; 6]> {
    let ip = ip.to_string();
    arp.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 6 && f[0] == ip && f[5] == device)
            .then(|| parse_mac(f[3]))
            .flatten()
    })
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let bytes: Vec<u8> = text
        .split(':')
        .map(|b| u8::from_str_radix(b, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let mac: [u8; 6] = bytes.try_into().ok()?;
    (mac != [0; 6]).then_some(mac)
}

/// The port of `bridge` its forwarding table learned `mac` on: entries of
/// 16 bytes (MAC, port number's low byte, is-local, ageing timer, port
/// number's high byte), ports named by `brif/*/port_no`.
fn learned_port(sys_net: &Path, bridge: &str, mac: [u8; 6]) -> Option<String> {
    let table = std::fs::read(sys_net.join(bridge).join("brforward")).ok()?;
    let port_no = table.chunks_exact(16).find_map(|e| {
        (e[..6] == mac && e[7] == 0).then(|| u16::from(e[12]) << 8 | u16::from(e[6]))
    })?;
    let ports = std::fs::read_dir(sys_net.join(bridge).join("brif")).ok()?;
    ports.flatten().find_map(|port| {
        let text = std::fs::read_to_string(port.path().join("port_no")).ok()?;
        let number = u16::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()?;
        (number == port_no).then(|| port.file_name().to_string_lossy().into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
        br0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
        eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        down0\t050011AC\t00000000\t0000\t0\t0\t0\tFFFFFFFF\t0\t0\t0\n";

    fn v4(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    #[test]
    fn the_longest_up_route_wins() {
        assert_eq!(route_v4(ROUTE, v4("192.0.2.7")).as_deref(), Some("eth0"));
        assert_eq!(route_v4(ROUTE, v4("172.17.0.5")).as_deref(), Some("br0"));
        assert_eq!(route_v4(ROUTE, v4("8.8.8.8")).as_deref(), Some("eth0"));
        assert_eq!(route_v4("Iface\n", v4("8.8.8.8")), None);
        let v6 = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth1\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 00000400 00000001 00000000 00000003 eth0\n";
        let ip = |s: &str| u128::from(s.parse::<std::net::Ipv6Addr>().unwrap());
        assert_eq!(route_v6(v6, ip("fd00::9")).as_deref(), Some("eth1"));
        assert_eq!(route_v6(v6, ip("2001:db8::1")).as_deref(), Some("eth0"));
    }

    #[test]
    fn own_and_loopback_addresses_leave_through_lo() {
        let none = Path::new("/nonexistent");
        let own: Vec<IpAddr> = vec!["10.1.1.1".parse().unwrap()];
        let device = |ip: &str| egress_device(none, none, ip.parse().unwrap(), &own);
        assert_eq!(device("127.0.0.1").as_deref(), Some("lo"));
        assert_eq!(device("10.1.1.1").as_deref(), Some("lo"));
        assert_eq!(device("10.1.1.2"), None);
    }

    #[test]
    fn a_bridge_is_seen_through_to_the_port_the_node_was_learned_on() {
        let root = tempfile::tempdir().unwrap();
        let proc_net = root.path().join("proc");
        let sys_net = root.path().join("net");
        std::fs::create_dir_all(&proc_net).unwrap();
        std::fs::write(proc_net.join("route"), ROUTE).unwrap();
        std::fs::write(
            proc_net.join("arp"),
            "IP address       HW type     Flags       HW address            Mask     Device\n\
             172.17.0.5       0x1         0x2         52:54:00:12:34:56     *        br0\n",
        )
        .unwrap();
        for (port, number) in [("enp1s0", "0x1"), ("tap0", "0x2")] {
            let dir = sys_net.join("br0/brif").join(port);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("port_no"), format!("{number}\n")).unwrap();
        }
        std::fs::create_dir_all(sys_net.join("br0/bridge")).unwrap();
        let entry = |mac: [u8; 6], port: u8| {
            let mut e = [0u8; 16];
            e[..6].copy_from_slice(&mac);
            e[6] = port;
            e
        };
        let mut table = entry([2, 0, 0, 0, 0, 1], 1).to_vec();
        table.extend(entry([0x52, 0x54, 0, 0x12, 0x34, 0x56], 2));
        std::fs::write(sys_net.join("br0/brforward"), table).unwrap();
        let ip: IpAddr = "172.17.0.5".parse().unwrap();
        assert_eq!(
            egress_device(&proc_net, &sys_net, ip, &[]).as_deref(),
            Some("tap0")
        );
        // Not learned yet: the bridge itself.
        let other: IpAddr = "172.17.0.9".parse().unwrap();
        assert_eq!(
            egress_device(&proc_net, &sys_net, other, &[]).as_deref(),
            Some("br0")
        );
    }
}
