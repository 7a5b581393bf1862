//! Submission mode (`run --submission-mode`, always on under
//! `submission`): the Network-division rules a run for a submission must
//! keep, checked before and after it. Nodes must be across a real network
//! from this LoadGen node, the official settings apply (the plan's own
//! check, `plan.rs`), and a run that lost a node is not a result.

use std::net::IpAddr;

use anyhow::{bail, Result};
use netdiv_proto::pb;
use qdl::NodeUrl;

/// Why an address is not across a network from here, if it is not.
fn local_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        _ if ip.is_loopback() => Some("a loopback address"),
        _ if ip.is_unspecified() => Some("an unspecified address"),
        IpAddr::V4(v4) if v4.is_link_local() => Some("a link-local address"),
        IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => Some("a link-local address"),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .and_then(|v4| local_address(IpAddr::V4(v4))),
        _ => None,
    }
}

/// Why the nodes are not across a network from this LoadGen node, each
/// reason with its evidence: an address that is not routable, or a node
/// on this LoadGen node's own host and network stack (`own_host_id`), or
/// on its machine (the identities `own` shares with the node's).
pub(crate) fn check_nodes(
    urls: &[NodeUrl],
    infos: &[pb::NodeInfo],
    own_host_id: &str,
    own: &pb::HostIdentity,
) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for url in urls {
        let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(url.host.as_str(), url.port))
            .map_err(|e| anyhow::anyhow!("cannot resolve {url}: {e}"))?;
        for addr in addrs {
            if let Some(why) = local_address(addr.ip()) {
                found.push(format!(
                    "node {url} is at {} ({why}); the Network division needs the SUT across \
                     a network from the LoadGen node",
                    addr.ip()
                ));
            }
        }
    }
    for (url, info) in urls.iter().zip(infos) {
        if info.host_id.is_empty() {
            bail!(
                "submission mode: node {url} ({}) does not report its host (a sut-node older \
                 than this LoadGen node); upgrade it",
                info.name
            );
        }
        if info.host_id == own_host_id {
            found.push(format!(
                "node {url} ({}) runs on this LoadGen node's own host and network stack \
                 ({own_host_id}); the Network division needs the SUT on other hosts",
                info.name
            ));
            continue;
        }
        let shared = info
            .host
            .as_ref()
            .map(|h| sut_node::host::nic::shared_identities(own, h))
            .unwrap_or_default();
        if !shared.is_empty() {
            found.push(format!(
                "node {url} ({}) runs on this LoadGen node's own machine (the same {}); the \
                 Network division needs the SUT on physically separate systems",
                info.name,
                shared.join(", ")
            ));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_link_local_addresses_are_local() {
        for text in [
            "127.0.0.1",
            "::1",
            "169.254.3.4",
            "fe80::1",
            "0.0.0.0",
            "::ffff:127.0.0.1",
        ] {
            assert!(local_address(text.parse().unwrap()).is_some(), "{text}");
        }
        for text in ["10.0.0.2", "192.168.1.5", "2001:db8::1"] {
            assert!(local_address(text.parse().unwrap()).is_none(), "{text}");
        }
    }

    #[test]
    fn a_node_on_this_host_or_machine_is_found() {
        let url: NodeUrl = "grpc://10.0.0.2:7000".parse().unwrap();
        let host = |boot: &str| pb::HostIdentity {
            machine_id: "m1".into(),
            boot_id: boot.into(),
            ..Default::default()
        };
        let info = pb::NodeInfo {
            name: "a".into(),
            host_id: "m1/net:[1]".into(),
            host: Some(host("b1")),
            ..Default::default()
        };
        let one = |own_id: &str, own: &pb::HostIdentity| {
            check_nodes(
                std::slice::from_ref(&url),
                std::slice::from_ref(&info),
                own_id,
                own,
            )
            .unwrap()
        };
        let found = one("m1/net:[1]", &host("b1"));
        assert!(found[0].contains("own host"), "{found:?}");
        // Another network namespace of the same machine: the boot id says so.
        let found = one("m1/net:[2]", &host("b1"));
        assert!(
            found[0].contains("own machine (the same boot id b1"),
            "{found:?}"
        );
        assert!(one("m1/net:[2]", &host("b2")).is_empty());
        let local: NodeUrl = "grpc://127.0.0.1:7000".parse().unwrap();
        let found = check_nodes(&[local], &[info], "m2/x", &host("b9")).unwrap();
        assert!(found[0].contains("loopback"), "{found:?}");
    }
}
