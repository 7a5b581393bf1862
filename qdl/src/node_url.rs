//! Node addresses: `grpc://host:port` or `quic://host:port`.

use std::fmt;

/// The transport of a node connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// `grpc://`: one HTTP/2 connection, queries on one bidirectional stream.
    Grpc,
    /// `quic://`: one QUIC connection, one stream per query.
    Quic,
}

/// A parsed node address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeUrl {
    /// The scheme's transport.
    pub transport: Transport,
    /// Host name or IP address, without the brackets of an IPv6 address.
    pub host: String,
    /// TCP (gRPC) or UDP (QUIC) port, never 0.
    pub port: u16,
    /// The name the node's TLS certificate carries when it is not `host`:
    /// the DNS name an address was found under ([`NodeUrl::expand_dns`]).
    pub server_name: Option<String>,
}

/// Why a node address was refused; each names the text given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidNodeUrl {
    /// No `scheme://` before the host.
    #[error("node address {0:?} has no scheme: use grpc://host:port or quic://host:port")]
    NoScheme(String),
    /// A scheme other than `grpc` or `quic`; holds the address and the scheme.
    #[error("node address {0:?}: unknown scheme {1:?} (expected grpc or quic)")]
    UnknownScheme(String, String),
    /// No `:port` after the host.
    #[error("node address {0:?} has no port")]
    NoPort(String),
    /// The port is not a number from 1 to 65535; holds the address and the
    /// port text.
    #[error("node address {0:?}: port {1:?} is not a number from 1 to 65535")]
    BadPort(String, String),
    /// Nothing before the `:port`.
    #[error("node address {0:?} has no host")]
    NoHost(String),
    /// A path after `host:port`; holds the address and the path.
    #[error("node address {0:?}: only host:port may follow the scheme, found {1:?}")]
    TrailingPath(String, String),
}

impl std::str::FromStr for NodeUrl {
    type Err = InvalidNodeUrl;

    fn from_str(text: &str) -> Result<Self, InvalidNodeUrl> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| InvalidNodeUrl::NoScheme(text.into()))?;
        let transport = match scheme {
            "grpc" => Transport::Grpc,
            "quic" => Transport::Quic,
            other => return Err(InvalidNodeUrl::UnknownScheme(text.into(), other.into())),
        };
        let authority = match rest.split_once('/') {
            Some((_, path)) if !path.is_empty() => {
                return Err(InvalidNodeUrl::TrailingPath(
                    text.into(),
                    format!("/{path}"),
                ))
            }
            Some((a, _)) => a,
            None => rest,
        };
        // "[::1]:port" for IPv6, "host:port" otherwise.
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| InvalidNodeUrl::NoPort(text.into()))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| InvalidNodeUrl::NoPort(text.into()))?;
            (host, port)
        } else {
            authority
                .rsplit_once(':')
                .ok_or_else(|| InvalidNodeUrl::NoPort(text.into()))?
        };
        if host.is_empty() {
            return Err(InvalidNodeUrl::NoHost(text.into()));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| InvalidNodeUrl::BadPort(text.into(), port.into()))?;
        Ok(NodeUrl {
            transport,
            host: host.into(),
            port,
            server_name: None,
        })
    }
}

/// A node name that resolves to no address, or cannot be resolved.
#[derive(Debug, thiserror::Error)]
#[error("node address {url}: cannot expand {host:?} to its addresses: {reason}")]
pub struct DnsExpansionError {
    /// The address as given.
    pub url: String,
    /// The name looked up.
    pub host: String,
    /// What the resolver said.
    pub reason: String,
}

impl NodeUrl {
    /// One node per address `host` resolves to (a Kubernetes headless
    /// Service, compose replicas), in address order, each keeping `host`
    /// as the name its certificate must carry. An IP address stays one
    /// node.
    pub fn expand_dns(&self) -> Result<Vec<NodeUrl>, DnsExpansionError> {
        if self.host.parse::<std::net::IpAddr>().is_ok() {
            return Ok(vec![self.clone()]);
        }
        let error = |reason: String| DnsExpansionError {
            url: self.to_string(),
            host: self.host.clone(),
            reason,
        };
        let mut addresses: Vec<std::net::IpAddr> =
            std::net::ToSocketAddrs::to_socket_addrs(&(self.host.as_str(), self.port))
                .map_err(|e| error(e.to_string()))?
                .map(|a| a.ip())
                .collect();
        addresses.sort_unstable();
        addresses.dedup();
        if addresses.is_empty() {
            return Err(error("no address".into()));
        }
        Ok(addresses
            .into_iter()
            .map(|ip| NodeUrl {
                transport: self.transport,
                host: ip.to_string(),
                port: self.port,
                server_name: Some(self.server_name.clone().unwrap_or(self.host.clone())),
            })
            .collect())
    }
}

impl fmt::Display for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.transport {
            Transport::Grpc => "grpc",
            Transport::Quic => "quic",
        };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_expands_to_one_node_per_address_and_keeps_the_name_for_tls() {
        let nodes = "grpc://localhost:7000"
            .parse::<NodeUrl>()
            .unwrap()
            .expand_dns()
            .unwrap();
        assert!(!nodes.is_empty());
        assert!(nodes.iter().any(|n| n.host == "127.0.0.1"), "{nodes:?}");
        for n in &nodes {
            assert_eq!(n.server_name.as_deref(), Some("localhost"));
            assert_eq!((n.port, n.transport), (7000, Transport::Grpc));
        }
        let ip: NodeUrl = "quic://10.0.0.7:7000".parse().unwrap();
        assert_eq!(ip.expand_dns().unwrap(), vec![ip]);
        let e = "grpc://no-such-node.invalid:7000"
            .parse::<NodeUrl>()
            .unwrap()
            .expand_dns()
            .unwrap_err()
            .to_string();
        assert!(e.contains("grpc://no-such-node.invalid:7000"), "{e}");
    }

    #[test]
    fn parses_both_transports_and_ipv6() {
        let u: NodeUrl = "grpc://node-a.lab:7000".parse().unwrap();
        assert_eq!(
            (u.transport, u.host.as_str(), u.port),
            (Transport::Grpc, "node-a.lab", 7000)
        );
        let u: NodeUrl = "quic://[::1]:9000/".parse().unwrap();
        assert_eq!(
            (u.transport, u.host.as_str(), u.port),
            (Transport::Quic, "::1", 9000)
        );
        assert_eq!(u.to_string(), "quic://[::1]:9000");
    }

    #[test]
    fn bad_addresses_say_what_is_wrong() {
        let err = |s: &str| s.parse::<NodeUrl>().unwrap_err().to_string();
        assert!(err("node-a:7000").contains("has no scheme"));
        assert!(err("http://a:1").contains("unknown scheme \"http\""));
        assert!(err("grpc://a").contains("has no port"));
        assert!(err("grpc://a:0").contains("port \"0\""));
        assert!(err("grpc://a:99999").contains("port \"99999\""));
        assert!(err("grpc://:7000").contains("has no host"));
        assert!(err("grpc://a:1/x").contains("found \"/x\""));
    }
}
