//! Where a node's serving engine runs, as the node sees it: the addresses
//! its URL's host resolves to, and whether each is one of this machine's
//! own. The rules measure the SUT as the nodes across the fabric, so an
//! engine elsewhere (a cheap node forwarding every prompt to GPUs on
//! another machine, the LoadGen node's included) must show in the tree.

use std::net::{IpAddr, ToSocketAddrs};

use netdiv_proto::pb;

/// The location of the engine at `url` from this node.
pub fn locate(url: &str) -> pb::EngineLocation {
    let own: Vec<IpAddr> = crate::host::nic::interface_addresses()
        .into_iter()
        .map(|(_, ip)| ip)
        .collect();
    locate_among(url, &own)
}

/// The location of the engine at `url` for a machine holding `own`.
pub fn locate_among(url: &str, own: &[IpAddr]) -> pb::EngineLocation {
    let addresses: Vec<IpAddr> = host_and_port(url)
        .and_then(|(host, port)| (host.as_str(), port).to_socket_addrs().ok())
        .map(|found| found.map(|a| a.ip()).collect())
        .unwrap_or_default();
    let on_this_host =
        !addresses.is_empty() && addresses.iter().all(|a| a.is_loopback() || own.contains(a));
    let mut addresses: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
    addresses.dedup();
    pb::EngineLocation {
        url: url.to_string(),
        addresses,
        on_this_host,
    }
}

/// The host and port of an `http(s)://host[:port]/...` URL.
fn host_and_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after
            .strip_prefix(':')
            .map_or(Some(default), |p| p.parse().ok())?;
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((authority.to_string(), default)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_on_loopback_or_an_own_address_is_on_this_host() {
        let own: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap()];
        let local = locate_among("http://127.0.0.1:8000", &own);
        assert!(local.on_this_host);
        assert_eq!(local.addresses, ["127.0.0.1"]);
        assert!(locate_among("http://10.0.0.2:8000/v1", &own).on_this_host);
        assert!(locate_among("http://[::1]:8000", &own).on_this_host);
        assert!(locate_among("http://localhost:8000", &own).on_this_host);
    }

    #[test]
    fn an_engine_elsewhere_or_unresolved_is_not() {
        let own: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap()];
        let remote = locate_among("http://10.0.0.9:8000", &own);
        assert!(!remote.on_this_host);
        assert_eq!(remote.addresses, ["10.0.0.9"]);
        let unresolved = locate_among("http://no-such-host.invalid:8000", &own);
        assert!(!unresolved.on_this_host && unresolved.addresses.is_empty());
        assert!(!locate_among("not a url", &own).on_this_host);
    }

    #[test]
    fn urls_are_split_into_host_and_port() {
        let split = |u: &str| host_and_port(u);
        assert_eq!(split("http://h:81/x"), Some(("h".into(), 81)));
        assert_eq!(split("https://h"), Some(("h".into(), 443)));
        assert_eq!(split("http://u:p@h:9?q"), Some(("h".into(), 9)));
        assert_eq!(split("http://[fe80::1]:7"), Some(("fe80::1".into(), 7)));
        assert_eq!(split("http://h:port"), None);
    }
}
