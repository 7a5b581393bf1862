//! The Network-division fields of the system description JSON, filled
//! from what this node can read: its own NICs (/sys), each sut-node's Info
//! RPC and the transport in use. What only a person can know (the fabric's
//! media and topology) is marked for them to fill in. `--template` adds
//! the general fields the checker requires ([`template`]); `--diagram`
//! draws the measured system ([`diagram`]).

mod diagram;
mod template;

use netdiv_proto::pb;
use serde_json::{Map, Value};

/// The marker for fields a person must complete.
pub(crate) const FILL_IN: &str = "TODO: fill in";

/// What the description is built from.
pub(crate) struct Inputs<'a> {
    /// This LoadGen node's interfaces (loopback excluded).
    pub(crate) local_nics: &'a [pb::Nic],
    /// Each node's Info, in node order.
    pub(crate) nodes: &'a [pb::NodeInfo],
    /// "grpc", "grpcs" or "quic", per node.
    pub(crate) transports: &'a [&'a str],
    /// The address each node was reached at, per node.
    pub(crate) node_addresses: &'a [Option<std::net::IpAddr>],
    /// This program's version and the OS it runs on.
    pub(crate) software: &'a str,
}

/// An interface as "name (speed, MTU)".
fn nic_text(nic: &pb::Nic) -> String {
    let speed = match nic.speed_mbps {
        0 => "speed unknown".to_string(),
        s if s % 1000 == 0 => format!("{} Gb/s", s / 1000),
        s => format!("{s} Mb/s"),
    };
    format!("{} ({speed}, MTU {})", nic.name, nic.mtu)
}

/// Interfaces that are up (or whose state is unknown).
fn up(nics: &[pb::Nic]) -> Vec<&pb::Nic> {
    nics.iter()
        .filter(|n| n.state == "up" || n.state == "unknown")
        .collect()
}

/// The layers of a transport (`grpc`, `grpcs` for gRPC over TLS, `quic`).
fn protocol(transport: &str) -> &'static str {
    match transport {
        "quic" => "netdiv.v1 over QUIC (RFC 9000, TLS 1.3) over UDP over IP",
        "grpcs" => "netdiv.v1 over gRPC over HTTP/2 over TLS 1.3 over TCP over IP",
        _ => "netdiv.v1 over gRPC over HTTP/2 over TCP over IP",
    }
}

/// The names of this host's interfaces that the connections to nodes at
/// `addresses` leave from (each once).
pub(crate) fn data_path_interfaces(addresses: &[Option<std::net::IpAddr>]) -> Vec<String> {
    let mut names = Vec::new();
    for name in addresses
        .iter()
        .flatten()
        .filter_map(|ip| super::data_path::route_interface(*ip))
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The address each node was reached at, if it resolves.
pub(crate) fn node_addresses(urls: &[qdl::NodeUrl]) -> Vec<Option<std::net::IpAddr>> {
    super::data_path::node_addresses(urls)
}

/// A node's interfaces on the data path: the one holding the address it
/// was reached at, when its Info says which; else all that are up.
fn node_data_path(nics: &[pb::Nic], reached_at: Option<std::net::IpAddr>) -> Vec<&pb::Nic> {
    let up = up(nics);
    let on_path: Vec<&pb::Nic> = up
        .iter()
        .copied()
        .filter(|n| reached_at.is_some_and(|ip| n.addresses.contains(&ip.to_string())))
        .collect();
    if on_path.is_empty() {
        up
    } else {
        on_path
    }
}

/// The fields (a JSON object) and the
/// names of those a person must fill in.
pub(crate) fn describe(inputs: &Inputs<'_>) -> (Value, Vec<&'static str>) {
    let local = up(inputs.local_nics);
    let rate = local
        .iter()
        .map(|n| n.speed_mbps)
        .max()
        .filter(|&s| s > 0)
        .map(|s| format!("{} Gb/s", s as f64 / 1000.0));
    let mut protocols: Vec<&str> = inputs.transports.iter().map(|t| protocol(t)).collect();
    protocols.dedup();
    let sut_nics: Vec<String> = inputs
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| {
            let reached_at = inputs.node_addresses.get(i).copied().flatten();
            node_data_path(&n.nics, reached_at)
                .into_iter()
                .map(move |nic| format!("{}: {}", n.name, nic_text(nic)))
        })
        .collect();
    let sut_stacks: Vec<String> = inputs
        .nodes
        .iter()
        .map(|n| {
            format!(
                "{}: netdiv sut-node {} on {}",
                n.name, n.software_version, n.os
            )
        })
        .collect();
    let mut fields = Map::new();
    let mut todo = Vec::new();
    let mut put = |key: &'static str, value: Option<Value>| {
        if value.is_none() {
            todo.push(key);
        }
        fields.insert(key.into(), value.unwrap_or_else(|| FILL_IN.into()));
    };
    // Strings, as in accepted submissions: the official submission checker
    // calls .lower() on is_network, so a JSON boolean fails its check.
    put("is_network", Some("True".into()));
    // Layers 1-2: /sys names the links, not the fabric's technology.
    put("network_type", None);
    put("network_media", None);
    put("network_rate", rate.map(Value::from));
    put(
        "nic_loadgen",
        Some(
            local
                .iter()
                .map(|n| nic_text(n))
                .collect::<Vec<_>>()
                .join("; ")
                .into(),
        ),
    );
    put("number_nic_loadgen", Some(local.len().to_string().into()));
    put("net_software_stack_loadgen", Some(inputs.software.into()));
    put("network_protocol", Some(protocols.join("; ").into()));
    // One connection per node.
    put(
        "number_connections",
        Some(inputs.nodes.len().to_string().into()),
    );
    put("nic_sut", Some(sut_nics.join("; ").into()));
    put("number_nic_sut", Some(sut_nics.len().to_string().into()));
    put("net_software_stack_sut", Some(sut_stacks.join("; ").into()));
    put("network_topology", None);
    (Value::Object(fields), todo)
}

/// What `sysdesc` measured.
pub(crate) struct Measured {
    /// The Network-division fields.
    pub(crate) fields: Value,
    /// The fields a person must fill in.
    pub(crate) todo: Vec<&'static str>,
    /// Each node's Info, in node order.
    pub(crate) infos: Vec<pb::NodeInfo>,
    /// Each node's data-path interfaces, as "name (speed, MTU)".
    pub(crate) node_nics: Vec<Vec<String>>,
    /// This node's data-path interfaces, the same way.
    pub(crate) local_nics: Vec<String>,
    /// The protocol stack on the wire.
    pub(crate) protocol: String,
}

/// Connects to every node of `network` and describes the network.
pub(crate) fn measure(network: &super::args::NetworkArgs) -> anyhow::Result<Measured> {
    use anyhow::bail;
    let nodes = network.sut_node.clone();
    if nodes.is_empty() {
        bail!("sysdesc needs the nodes: --sut-node URL (repeat for each)");
    }
    let tls = network.tls_ca.is_some() || network.dev_tls.is_some();
    let transports: Vec<&str> = nodes
        .iter()
        .map(|u| match u.transport {
            qdl::Transport::Grpc if tls => "grpcs",
            qdl::Transport::Grpc => "grpc",
            qdl::Transport::Quic => "quic",
        })
        .collect();
    let addresses = node_addresses(&nodes);
    let data_path = data_path_interfaces(&addresses);
    // Only Name and Info travel: any benchmark's limits do.
    let any = netdiv_proto::Benchmark::parse("null").expect("in the table");
    let config = super::run::plan::QdlPlan::from_args(network)?.config(nodes.clone(), &any)?;
    let infos: Vec<pb::NodeInfo> = qdl::describe_nodes(&config)?
        .into_iter()
        .map(|(_, info)| info)
        .collect();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let software = format!(
        "netdiv loadgen-node {} (QDL: tonic gRPC, quinn QUIC), Linux {}",
        env!("CARGO_PKG_VERSION"),
        kernel.trim()
    );
    // Only the interfaces the connections use (all, if none is known).
    let mut local = sut_node::host::nic::interfaces();
    if local.iter().any(|n| data_path.contains(&n.name)) {
        local.retain(|n| data_path.contains(&n.name));
    }
    let (fields, todo) = describe(&Inputs {
        local_nics: &local,
        nodes: &infos,
        transports: &transports,
        node_addresses: &addresses,
        software: &software,
    });
    let node_nics = infos
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let reached_at = addresses.get(i).copied().flatten();
            node_data_path(&n.nics, reached_at)
                .into_iter()
                .map(nic_text)
                .collect()
        })
        .collect();
    let protocol = fields["network_protocol"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Ok(Measured {
        fields,
        todo,
        infos,
        node_nics,
        local_nics: up(&local).into_iter().map(nic_text).collect(),
        protocol,
    })
}

/// `loadgen-node sysdesc`: connects to every node and writes the
/// Network-division fields of the system description.
pub(crate) fn command(args: &super::args::SysdescArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let measured = measure(&args.network)?;
    let hosts = template::hosts(&measured.infos, &measured.node_nics);
    let mut fields = measured.fields.clone();
    let mut todo = measured.todo.clone();
    if args.template {
        let (general, general_todo) = template::general_fields(&hosts);
        let network = std::mem::take(fields.as_object_mut().expect("an object"));
        let mut all = general;
        all.extend(network);
        fields = Value::Object(all);
        todo.splice(0..0, general_todo);
    }
    if let Some(path) = &args.diagram {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let svg = diagram::svg(
            &diagram::LoadgenSide {
                hostname: hostname.trim(),
                nics: &measured.local_nics,
                protocol: &measured.protocol,
            },
            &hosts,
        );
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
        tracing::info!(
            "system diagram drawn: {} (complete the fabric, then give it to submission --diagram)",
            path.display()
        );
    }
    let text = serde_json::to_string_pretty(&fields)? + "\n";
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    if !todo.is_empty() {
        tracing::warn!("fill in by hand: {}", todo.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str, speed: u64, state: &str) -> pb::Nic {
        pb::Nic {
            name: name.into(),
            speed_mbps: speed,
            mtu: 9000,
            mac: String::new(),
            state: state.into(),
            addresses: Vec::new(),
            ..Default::default()
        }
    }

    #[test]
    fn fills_what_it_can_read_and_marks_the_rest() {
        let local = [nic("eth0", 100_000, "up"), nic("eth1", 1000, "down")];
        let node = pb::NodeInfo {
            name: "node-a".into(),
            software_version: "0.1.0".into(),
            os: "Linux 6.1".into(),
            nics: vec![nic("ens1", 200_000, "up")],
            ..Default::default()
        };
        let (v, todo) = describe(&Inputs {
            local_nics: &local,
            nodes: &[node],
            transports: &["quic"],
            node_addresses: &[],
            software: "netdiv loadgen-node 0.1.0",
        });
        assert_eq!(v["is_network"], "True");
        assert_eq!(v["network_rate"], "100 Gb/s");
        assert_eq!(v["nic_loadgen"], "eth0 (100 Gb/s, MTU 9000)");
        assert_eq!(v["number_nic_loadgen"], "1");
        assert_eq!(v["nic_sut"], "node-a: ens1 (200 Gb/s, MTU 9000)");
        assert_eq!(v["number_connections"], "1");
        assert!(v["network_protocol"].as_str().unwrap().contains("QUIC"));
        assert_eq!(v["network_topology"], FILL_IN);
        assert_eq!(todo, ["network_type", "network_media", "network_topology"]);
        // Exactly the fields the official checker requires of a network
        // system (SYSTEM_DESC_REQUIRED_FIELDS_NETWORK_MODE), all strings.
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "is_network",
                "net_software_stack_loadgen",
                "net_software_stack_sut",
                "network_media",
                "network_protocol",
                "network_rate",
                "network_topology",
                "network_type",
                "nic_loadgen",
                "nic_sut",
                "number_connections",
                "number_nic_loadgen",
                "number_nic_sut",
            ]
        );
        assert!(v.as_object().unwrap().values().all(Value::is_string));
    }

    #[test]
    fn the_data_path_is_the_interface_a_node_is_reached_through() {
        let url: qdl::NodeUrl = "grpc://127.0.0.1:7000".parse().unwrap();
        assert_eq!(data_path_interfaces(&node_addresses(&[url])), ["lo"]);
    }

    #[test]
    fn tls_is_named_in_the_protocol() {
        assert!(protocol("grpcs").contains("TLS 1.3"));
        assert!(!protocol("grpc").contains("TLS"));
        assert!(protocol("quic").contains("TLS 1.3"));
    }

    #[test]
    fn a_nodes_data_path_is_the_interface_holding_the_address_it_was_reached_at() {
        let mut a = nic("eth0", 10_000, "up");
        a.addresses = vec!["10.0.0.2".into()];
        let mut b = nic("eth1", 100_000, "up");
        b.addresses = vec!["192.168.1.2".into()];
        let nics = [a, b];
        let on_path = node_data_path(&nics, Some("10.0.0.2".parse().unwrap()));
        assert_eq!(
            on_path.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["eth0"]
        );
        // Unknown: every interface that is up.
        assert_eq!(
            node_data_path(&nics, Some("10.9.9.9".parse().unwrap())).len(),
            2
        );
        assert_eq!(node_data_path(&nics, None).len(), 2);
    }
}
