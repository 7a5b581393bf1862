//! The Network-division rules netdiv can check before a submission's
//! first run, each finding with the evidence that shows it: the SUT on the
//! LoadGen node's own machine, a data path over virtual interfaces only, a
//! synthetic or test-only backend, synthetic samples, a fabric or medium
//! the rules do not permit, compression without the working group's
//! approval, an Offline query below the samples-per-query floor, and a
//! data path slower than the rules' bandwidth table requires. By default
//! any finding refuses the submission (all listed at once); `--rehearsal`
//! turns them into marks the tree carries instead.

use std::fmt;
use std::net::IpAddr;

use netdiv_proto::codec::Codec;
use netdiv_proto::pb;
use qdl::NodeUrl;
use sut_node::host::nic::{shared_identities, Link};

/// A rule a submission would break, and what shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Finding {
    /// The rule, short.
    pub(crate) rule: &'static str,
    /// What was measured or read that breaks it.
    pub(crate) evidence: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.evidence)
    }
}

pub(crate) fn finding(rule: &'static str, evidence: String) -> Finding {
    Finding { rule, evidence }
}

pub(crate) const SEPARATE: &str = "the SUT and the QDL run on physically separate systems";
pub(crate) const FABRIC: &str =
    "queries travel over a network fabric (wireless, copper or fiber), not \
                          a machine's virtual interfaces";
pub(crate) const REAL_SUT: &str =
    "the SUT runs the benchmark's model (Closed-division equivalence)";
pub(crate) const NO_RESPONSE_CACHE: &str = "the SUT caches no queries or responses";
pub(crate) const NO_PREFIX_CACHE: &str = "the SUT caches nothing derived from earlier queries";
pub(crate) const REAL_DATA: &str = "the QSL holds the benchmark's validation data set";
pub(crate) const FABRIC_TYPE: &str =
    "the fabric is Ethernet, IEEE 802.11, InfiniBand or 3GPP (others need the WG's clearance)";
pub(crate) const MEDIUM: &str = "the fabric's medium is wireless, copper or fiber";
pub(crate) const COMPRESSION: &str =
    "a compression scheme on the wire is approved by the working group \
                               (--compression-approved names the approval)";
pub(crate) const OFFLINE_FLOOR: &str =
    "an Offline query holds at least the benchmark's minimum samples";
pub(crate) const SCORER: &str =
    "accuracy.txt is the benchmark's official accuracy script's output \
                          (from the mlcommons/inference checkout, by its path; \
                          --attest-scorer says otherwise)";
pub(crate) const PHYSICAL: &str =
    "the LoadGen node and the SUT nodes are physical machines, not guests \
                            of one hypervisor (--attest-virtual-machines says otherwise)";
pub(crate) const ENGINE: &str = "each node's serving engine runs on that node's machine \
                          (--attest-remote-engine says where otherwise), never on the LoadGen \
                          node's";
pub(crate) const BANDWIDTH: &str =
    "the data path carries the rules' minimum ingress and egress bandwidth";
pub(crate) const DIAGRAM: &str =
    "the submission includes a system diagram of how the LoadGen node and \
                           the SUT nodes connect";

/// Every rule, in the order a preflight reports them.
pub(crate) const ALL: [&str; 15] = [
    SEPARATE,
    PHYSICAL,
    ENGINE,
    FABRIC,
    REAL_SUT,
    NO_RESPONSE_CACHE,
    NO_PREFIX_CACHE,
    REAL_DATA,
    FABRIC_TYPE,
    MEDIUM,
    COMPRESSION,
    OFFLINE_FLOOR,
    BANDWIDTH,
    DIAGRAM,
    SCORER,
];

/// One node as the checks see it.
pub(crate) struct NodeFacts<'a> {
    pub(crate) url: &'a NodeUrl,
    pub(crate) info: &'a pb::NodeInfo,
    /// The address it was reached at.
    pub(crate) address: Option<IpAddr>,
    /// This LoadGen node's interface towards it, resolved.
    pub(crate) loadgen_link: Option<(String, Link)>,
}

/// No node on the LoadGen node's machine.
pub(crate) fn separate_machines(own: &pb::HostIdentity, nodes: &[NodeFacts<'_>]) -> Vec<Finding> {
    let mut found = Vec::new();
    for n in nodes {
        let Some(host) = n.info.host.as_ref() else {
            found.push(finding(
                SEPARATE,
                format!(
                    "node {} ({}) does not report its machine's identities (a sut-node older \
                     than this LoadGen node)",
                    n.url, n.info.name
                ),
            ));
            continue;
        };
        let shared = shared_identities(own, host);
        if !shared.is_empty() {
            found.push(finding(
                SEPARATE,
                format!(
                    "node {} ({}) is on the LoadGen node's own machine: the same {}",
                    n.url,
                    n.info.name,
                    shared.join(", ")
                ),
            ));
        }
        // Several nodes on one SUT machine are allowed: the rules' SUT
        // may be one system of several nodes.
    }
    found
}

/// No end under a hypervisor, unless the submitter attests to the
/// machines (the attestation goes into the tree).
pub(crate) fn physical_machines(
    own: &pb::HostIdentity,
    nodes: &[NodeFacts<'_>],
    attested: Option<&str>,
) -> Vec<Finding> {
    if attested.is_some() {
        return Vec::new();
    }
    let mut found = Vec::new();
    if !own.virtualization.is_empty() {
        found.push(finding(
            PHYSICAL,
            format!(
                "this LoadGen node runs under a hypervisor: {}",
                own.virtualization
            ),
        ));
    }
    for n in nodes {
        let virtualization = n.info.host.as_ref().map_or("", |h| &h.virtualization);
        if !virtualization.is_empty() {
            found.push(finding(
                PHYSICAL,
                format!(
                    "node {} ({}) runs under a hypervisor: {virtualization}",
                    n.url, n.info.name
                ),
            ));
        }
    }
    found
}

/// Each node's engine on its own machine (or attested), and never on
/// this LoadGen node's, whose addresses are `own`.
pub(crate) fn engines_on_their_nodes(
    nodes: &[NodeFacts<'_>],
    own: &[IpAddr],
    attested: Option<&str>,
) -> Vec<Finding> {
    let mut found = Vec::new();
    for n in nodes {
        let Some(engine) = &n.info.engine else {
            continue;
        };
        if engine.on_this_host {
            continue;
        }
        let addresses: Vec<IpAddr> = engine
            .addresses
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        if let Some(a) = addresses.iter().find(|a| own.contains(a)) {
            found.push(finding(
                ENGINE,
                format!(
                    "node {} ({}) forwards to a serving engine on the LoadGen node's own \
                     machine ({} at {a})",
                    n.url, n.info.name, engine.url
                ),
            ));
        } else if attested.is_none() {
            found.push(finding(
                ENGINE,
                format!(
                    "node {} ({}) forwards to a serving engine that is not on its machine: {} \
                     ({})",
                    n.url,
                    n.info.name,
                    engine.url,
                    if engine.addresses.is_empty() {
                        "unresolved".to_string()
                    } else {
                        engine.addresses.join(", ")
                    }
                ),
            ));
        }
    }
    found
}

/// Both ends of each node's data path backed by a device.
pub(crate) fn real_data_path(nodes: &[NodeFacts<'_>]) -> Vec<Finding> {
    let mut found = Vec::new();
    for n in nodes {
        match &n.loadgen_link {
            Some((name, link)) if !link.backed => found.push(finding(
                FABRIC,
                format!(
                    "the LoadGen node reaches node {} through {name} ({}{}), with no device \
                     behind it",
                    n.url,
                    link.kind,
                    lower_text(&link.lower)
                ),
            )),
            Some(_) => {}
            None => found.push(finding(
                FABRIC,
                format!("no interface of this LoadGen node routes to node {}", n.url),
            )),
        }
        let reached = n.address.map(|a| a.to_string());
        let nic = n
            .info
            .nics
            .iter()
            .find(|nic| reached.as_ref().is_some_and(|a| nic.addresses.contains(a)));
        match nic {
            Some(nic) if nic.kind.is_empty() => found.push(finding(
                FABRIC,
                format!(
                    "node {} does not say what backs its interface {} (a sut-node older than \
                     this LoadGen node)",
                    n.url, nic.name
                ),
            )),
            Some(nic) if !nic.backed => found.push(finding(
                FABRIC,
                format!(
                    "node {} is reached at {} on its interface {} ({}{}), with no device \
                     behind it",
                    n.url,
                    reached.as_deref().unwrap_or("?"),
                    nic.name,
                    nic.kind,
                    lower_text(&nic.lower)
                ),
            )),
            Some(_) => {}
            // Behind NAT or a proxy the node holds another address: its
            // side cannot be told.
            None => found.push(finding(
                FABRIC,
                format!(
                    "node {} holds no interface with the address it was reached at ({}): \
                     its side of the data path cannot be checked",
                    n.url,
                    reached.as_deref().unwrap_or("unresolved")
                ),
            )),
        }
    }
    found
}

fn lower_text(lower: &[String]) -> String {
    if lower.is_empty() {
        String::new()
    } else {
        format!(" over {}", lower.join(", "))
    }
}

/// No node on a synthetic, test-only or caching backend.
pub(crate) fn real_backends(nodes: &[NodeFacts<'_>]) -> Vec<Finding> {
    let mut found = Vec::new();
    for n in nodes {
        let backend = &n.info.backend;
        let detail = &n.info.backend_detail;
        if backend.starts_with("synthetic") {
            found.push(finding(
                REAL_SUT,
                format!(
                    "node {} ({}) runs the {backend} backend, a cost model with no model",
                    n.url, n.info.name
                ),
            ));
        }
        if detail.contains("TEST-ONLY") {
            found.push(finding(
                NO_RESPONSE_CACHE,
                format!(
                    "node {} ({}) runs a test-only backend: {detail}",
                    n.url, n.info.name
                ),
            ));
        }
        if detail.contains("prefix cache: ON") {
            found.push(finding(
                NO_PREFIX_CACHE,
                format!(
                    "node {} ({}): its serving engine reuses cached prompts across queries: \
                     {detail}",
                    n.url, n.info.name
                ),
            ));
        }
    }
    found
}

/// The samples are the benchmark's data set, not synthetic.
pub(crate) fn real_data(source: &loadgen_node::qsl::SampleSource) -> Option<Finding> {
    use loadgen_node::qsl::SampleSource;
    match source {
        SampleSource::Dataset(_) | SampleSource::NpyDir { .. } => None,
        other => Some(finding(
            REAL_DATA,
            format!(
                "the samples are {} (give the data set with --data-dir)",
                other.describe()
            ),
        )),
    }
}

/// The fabric types and media the rules permit.
pub(crate) const PERMITTED_FABRICS: [&str; 5] = [
    "Ethernet",
    "IEEE 802.11",
    "IEEE802.11",
    "InfiniBand",
    "3GPP",
];
pub(crate) const PERMITTED_MEDIA: [&str; 3] = ["wireless", "copper", "fiber"];

/// `network_type` and `network_media` of the system description name what
/// the rules permit.
pub(crate) fn permitted_fabric(
    system: &serde_json::Map<String, serde_json::Value>,
) -> Vec<Finding> {
    let mut found = Vec::new();
    let text = |k: &str| system.get(k).and_then(|v| v.as_str()).unwrap_or("").trim();
    let fabric = text("network_type");
    if !PERMITTED_FABRICS
        .iter()
        .any(|p| fabric.eq_ignore_ascii_case(p))
    {
        found.push(finding(FABRIC_TYPE, format!("network_type is {fabric:?}")));
    }
    let media = text("network_media");
    if !PERMITTED_MEDIA
        .iter()
        .any(|p| media.eq_ignore_ascii_case(p))
    {
        found.push(finding(MEDIUM, format!("network_media is {media:?}")));
    }
    found
}

/// A codec on the wire needs the working group's approval, named.
pub(crate) fn approved_compression(
    sample_codec: Codec,
    nodes: &[NodeFacts<'_>],
    approval: Option<&str>,
) -> Vec<Finding> {
    if approval.is_some_and(|a| !a.trim().is_empty()) {
        return Vec::new();
    }
    let rule = COMPRESSION;
    let mut found = Vec::new();
    if sample_codec != Codec::None {
        found.push(finding(
            rule,
            format!("samples travel in {}", sample_codec.name()),
        ));
    }
    for n in nodes {
        if n.info.response_codec != pb::Codec::None as i32 {
            found.push(finding(
                rule,
                format!("node {} answers in a compressed codec", n.url),
            ));
        }
    }
    found
}

/// An Offline query holds at least the samples the checker requires of a
/// Closed submission (`OFFLINE_MIN_SPQ_SINCE_V4`; the Network division
/// inherits the Closed rules, though the checker skips it there).
pub(crate) fn offline_floor(model: &str, samples_per_query: u64, floor: u64) -> Option<Finding> {
    (samples_per_query < floor).then(|| {
        finding(
            OFFLINE_FLOOR,
            format!(
                "the Offline query of {model} holds {samples_per_query} samples; the floor is \
                 {floor} (raise Offline min_query_count or target_qps in user.conf)"
            ),
        )
    })
}

/// The data path's rate covers the rules' bandwidth at `throughput`.
pub(crate) fn bandwidth(
    what: &str,
    required_ingress: f64,
    required_egress: f64,
    path_rate_bytes_per_s: Option<f64>,
) -> Option<Finding> {
    let rule = BANDWIDTH;
    match path_rate_bytes_per_s {
        None => Some(finding(
            rule,
            format!(
                "{what} needs {:.1} MB/s in and {:.1} MB/s out, and the data path's \
                 interfaces report no speed",
                required_ingress / 1e6,
                required_egress / 1e6
            ),
        )),
        Some(rate) if rate < required_ingress.max(required_egress) => Some(finding(
            rule,
            format!(
                "{what} needs {:.1} MB/s in and {:.1} MB/s out; the data path carries \
                 {:.1} MB/s",
                required_ingress / 1e6,
                required_egress / 1e6,
                rate / 1e6
            ),
        )),
        Some(_) => None,
    }
}

/// The system diagram the rules require, given as a file.
pub(crate) fn diagram(path: Option<&std::path::Path>) -> Option<Finding> {
    path.is_none()
        .then(|| finding(DIAGRAM, "no --diagram FILE was given".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(boot: &str) -> pb::HostIdentity {
        pb::HostIdentity {
            machine_id: "m".into(),
            boot_id: boot.into(),
            product_uuid: String::new(),
            netns: "net:[1]".into(),
            virtualization: String::new(),
        }
    }

    fn info(name: &str, boot: &str) -> pb::NodeInfo {
        pb::NodeInfo {
            name: name.into(),
            host: Some(host(boot)),
            backend: "onnx".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_node_on_this_machine_is_found_with_the_identity_shared() {
        let urls: Vec<NodeUrl> = [
            "grpc://10.0.0.2:1",
            "grpc://10.0.0.3:1",
            "grpc://10.0.0.4:1",
        ]
        .iter()
        .map(|u| u.parse().unwrap())
        .collect();
        let infos = [info("a", "b-own"), info("b", "b2"), info("c", "b2")];
        let nodes: Vec<NodeFacts<'_>> = urls
            .iter()
            .zip(&infos)
            .map(|(url, info)| NodeFacts {
                url,
                info,
                address: None,
                loadgen_link: None,
            })
            .collect();
        // Nodes b and c share a machine: a SUT of several nodes on one
        // system is allowed; only the LoadGen node's own machine is not.
        let found = separate_machines(&host("b-own"), &nodes);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].evidence.contains(
            "grpc://10.0.0.2:1 (a) is on the LoadGen node's own machine: the same boot id b-own"
        ));
    }

    fn facts<'a>(urls: &'a [NodeUrl], infos: &'a [pb::NodeInfo]) -> Vec<NodeFacts<'a>> {
        urls.iter()
            .zip(infos)
            .map(|(url, info)| NodeFacts {
                url,
                info,
                address: None,
                loadgen_link: None,
            })
            .collect()
    }

    #[test]
    fn a_virtual_machine_at_either_end_is_found_unless_attested() {
        let urls: Vec<NodeUrl> = vec!["grpc://10.0.0.2:1".parse().unwrap()];
        let mut guest = info("a", "b2");
        guest.host.as_mut().unwrap().virtualization = "DMI sys_vendor is \"QEMU\"".into();
        let mut own = host("b-own");
        own.virtualization = "the CPU reports the hypervisor flag".into();
        let nodes = facts(&urls, std::slice::from_ref(&guest));
        let found = physical_machines(&own, &nodes, None);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.rule == PHYSICAL));
        assert!(found[0]
            .evidence
            .contains("this LoadGen node runs under a hypervisor"));
        assert!(found[1]
            .evidence
            .contains("(a) runs under a hypervisor: DMI sys_vendor"));
        assert!(physical_machines(&own, &nodes, Some("serials A1, B2")).is_empty());
        let metal = [info("a", "b2")];
        assert!(physical_machines(&host("b-own"), &facts(&urls, &metal), None).is_empty());
    }

    #[test]
    fn an_engine_off_its_node_is_found_and_on_the_loadgen_machine_always() {
        let urls: Vec<NodeUrl> = vec!["grpc://10.0.0.2:1".parse().unwrap()];
        let with_engine = |addresses: &[&str], on_this_host: bool| {
            let mut i = info("a", "b2");
            i.engine = Some(pb::EngineLocation {
                url: "http://engine:8000".into(),
                addresses: addresses.iter().map(|a| a.to_string()).collect(),
                on_this_host,
            });
            i
        };
        let own: Vec<IpAddr> = vec!["10.0.0.1".parse().unwrap()];
        let local = [with_engine(&["127.0.0.1"], true)];
        assert!(engines_on_their_nodes(&facts(&urls, &local), &own, None).is_empty());
        let elsewhere = [with_engine(&["10.0.0.9"], false)];
        let found = engines_on_their_nodes(&facts(&urls, &elsewhere), &own, None);
        assert_eq!(found.len(), 1);
        assert!(found[0]
            .evidence
            .contains("not on its machine: http://engine:8000 (10.0.0.9)"));
        assert!(engines_on_their_nodes(&facts(&urls, &elsewhere), &own, Some("host X")).is_empty());
        let on_loadgen = [with_engine(&["10.0.0.1"], false)];
        let found = engines_on_their_nodes(&facts(&urls, &on_loadgen), &own, Some("host X"));
        assert_eq!(found.len(), 1, "an attestation does not allow it");
        assert!(found[0]
            .evidence
            .contains("on the LoadGen node's own machine"));
        let none = [info("a", "b2")];
        assert!(engines_on_their_nodes(&facts(&urls, &none), &own, None).is_empty());
    }

    #[test]
    fn each_kind_of_backend_a_result_may_not_run_on_is_found_by_itself() {
        let urls: Vec<NodeUrl> = vec!["grpc://10.0.0.2:1".parse().unwrap()];
        let with = |backend: &str, detail: &str| {
            let mut i = info("a", "b2");
            i.backend = backend.into();
            i.backend_detail = detail.into();
            i
        };
        let rules_of = |i: pb::NodeInfo| -> Vec<&'static str> {
            real_backends(&facts(&urls, std::slice::from_ref(&i)))
                .iter()
                .map(|f| f.rule)
                .collect()
        };
        assert!(rules_of(with("onnx", "model=resnet50.onnx")).is_empty());
        // A test-only backend that is not synthetic: refused for itself.
        assert_eq!(
            rules_of(with("onnx", "response cache: TEST-ONLY")),
            [NO_RESPONSE_CACHE]
        );
        assert_eq!(rules_of(with("synthetic", "batch_cost_us=10")), [REAL_SUT]);
        assert_eq!(
            rules_of(with(
                "openai",
                "engine=vllm 0.32.0, prefix cache: ON (metrics)"
            )),
            [NO_PREFIX_CACHE]
        );
    }

    #[test]
    fn the_fabric_and_medium_must_be_the_rules_own_words() {
        let system = |t: &str, m: &str| {
            serde_json::json!({"network_type": t, "network_media": m})
                .as_object()
                .unwrap()
                .clone()
        };
        assert!(permitted_fabric(&system("Ethernet", "fiber")).is_empty());
        assert!(permitted_fabric(&system("infiniband", "Copper")).is_empty());
        assert!(permitted_fabric(&system("IEEE802.11", "wireless")).is_empty());
        let found = permitted_fabric(&system("Ethernet (veth pairs)", "virtual"));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[1].evidence.contains("\"virtual\""));
    }

    #[test]
    fn floors_bandwidth_and_codecs_are_judged_with_their_numbers() {
        assert!(offline_floor("resnet", 24576, 24576).is_none());
        let f = offline_floor("resnet", 1600, 24576).unwrap();
        assert!(
            f.evidence
                .contains("holds 1600 samples; the floor is 24576"),
            "{f}"
        );
        assert!(bandwidth("x", 1e9, 0.0, Some(12.5e9)).is_none());
        let f = bandwidth("Offline at 100 samples/s", 2e9, 0.0, Some(1.25e9)).unwrap();
        assert!(
            f.evidence.contains("2000.0 MB/s in") && f.evidence.contains("1250.0 MB/s"),
            "{f}"
        );
        assert!(bandwidth("x", 1.0, 0.0, None)
            .unwrap()
            .evidence
            .contains("report no speed"));
        // Egress binding: SDXL's images out outweigh its tokens in, and a
        // path that carries the ingress but not the egress is refused.
        let sdxl = netdiv_proto::Benchmark::parse("stable-diffusion-xl").unwrap();
        let rule = netdiv_proto::bandwidth::rule(&sdxl).unwrap();
        let (need_in, need_out) = netdiv_proto::bandwidth::required(&rule, 100.0, 4);
        assert!(need_out > 1000.0 * need_in, "{need_in} in, {need_out} out");
        let f = bandwidth(
            "Server at 100 samples/s",
            need_in,
            need_out,
            Some(need_in * 10.0),
        )
        .expect("the egress is not carried");
        assert!(f.evidence.contains("1258.3 MB/s out"), "{f}");
        assert!(bandwidth("x", need_in, need_out, Some(need_out)).is_none());
        assert_eq!(approved_compression(Codec::Lz4, &[], None).len(), 1);
        assert!(approved_compression(Codec::Lz4, &[], Some("WG 2026-11-02 minutes")).is_empty());
        assert!(approved_compression(Codec::None, &[], None).is_empty());
    }
}
