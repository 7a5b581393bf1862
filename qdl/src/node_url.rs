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
        })
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
