//! What a submission checks before its first run, in seconds, so that
//! hours of runs are not spent on a tree that is not a result: the
//! scenario set the round's checker requires, every Network-division rule
//! netdiv can check ([`super::rules`], each finding with its evidence),
//! and user.conf settings that make a run unreachable or needlessly long.

use std::path::Path;

use anyhow::{bail, Result};
use loadgen_node::engine::settings::{EffectiveSettings, Scenario, TestSettings};
use loadgen_node::round::SuiteEntry;
use netdiv_proto::pb;
use qdl::NodeUrl;
use serde_json::{Map, Value};

use super::rules::{self, Finding, NodeFacts};
use crate::cli::data_path;
use crate::cli::run::plan::RunPlan;

/// What the checks found.
pub(crate) struct Preflight {
    /// Each node's address and Info, in order.
    pub(crate) nodes: Vec<(String, pb::NodeInfo)>,
    /// Rules the submission would break: refused unless a rehearsal.
    pub(crate) findings: Vec<Finding>,
    /// What no run can get past (a node serving another benchmark, a
    /// data set that does not load): refused, rehearsal or not.
    pub(crate) errors: Vec<String>,
    /// Settings worth a second look (not refusals).
    pub(crate) warnings: Vec<String>,
    /// What was checked and held, with what shows it, for the report.
    pub(crate) held: Vec<String>,
}

impl Preflight {
    /// One line per check: `ok`, `FAIL` (an error or a rule broken) or
    /// `warn`, every rule of [`rules::ALL`] named whether it held or not.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.held.iter().map(|h| format!("ok    {h}")).collect();
        lines.extend(self.errors.iter().map(|e| format!("FAIL  {e}")));
        for rule in rules::ALL {
            let broken: Vec<&Finding> = self.findings.iter().filter(|f| f.rule == rule).collect();
            if broken.is_empty() {
                lines.push(format!("ok    {rule}"));
            }
            lines.extend(broken.iter().map(|f| format!("FAIL  {f}")));
        }
        // A finding of a rule not in the list still fails, and says so.
        lines.extend(
            self.findings
                .iter()
                .filter(|f| !rules::ALL.contains(&f.rule))
                .map(|f| format!("FAIL  {f}")),
        );
        lines.extend(self.warnings.iter().map(|w| format!("warn  {w}")));
        lines
    }
}

/// The scenarios as the run plan names them (`Interactive` runs Server).
fn loadgen_scenario(name: &str) -> Scenario {
    match name {
        "Interactive" => Scenario::Server,
        other => other.parse().unwrap_or(Scenario::Offline),
    }
}

/// Refuses a scenario set the round's checker would reject for the
/// benchmark: every required scenario, and one of Server or Interactive
/// where the round wants one, among `scenarios` and those the tree
/// already holds (`done`).
pub(crate) fn check_scenario_set(
    entry: &SuiteEntry,
    round: &str,
    scenarios: &[String],
    done: &[String],
) -> Result<()> {
    let all: Vec<&str> = scenarios.iter().chain(done).map(String::as_str).collect();
    let missing = entry.missing(&all);
    if !missing.is_empty() {
        bail!(
            "round {round}'s checker would reject {} with {}: it requires {} too (run without \
             --scenario for every scenario the round requires: {})",
            entry.model,
            scenarios.join(" and "),
            missing.join(" and "),
            entry.submission_scenarios().join(", ")
        );
    }
    Ok(())
}

/// What the checks read besides the plan.
pub(crate) struct Inputs<'a> {
    pub(crate) entry: &'a SuiteEntry,
    pub(crate) scenarios: &'a [String],
    /// The system description's fields a person wrote.
    pub(crate) system: &'a Map<String, Value>,
    pub(crate) compression_approved: Option<&'a str>,
    /// `--attest-virtual-machines`.
    pub(crate) attested_virtual_machines: Option<&'a str>,
    /// `--attest-remote-engine`.
    pub(crate) attested_remote_engine: Option<&'a str>,
    pub(crate) diagram: Option<&'a Path>,
}

/// Everything `submission` checks before its first run.
pub(crate) fn run(plan: &RunPlan, inputs: &Inputs<'_>) -> Result<Preflight> {
    let urls: Vec<NodeUrl> = match &plan.target {
        crate::cli::run::plan::Target::Network { nodes } => nodes.clone(),
        _ => bail!("submission needs the sut-nodes: --sut-node URL (repeat for each)"),
    };
    let config = plan.qdl.config(urls, &plan.benchmark)?;
    let urls = config.nodes.clone();
    let nodes = qdl::describe_nodes(&config)?;
    let mut held = vec![nodes_answer(&nodes)];
    let mut errors = serving(plan, &nodes);
    let addresses = data_path::node_addresses(&urls);
    let facts: Vec<NodeFacts<'_>> = urls
        .iter()
        .zip(&nodes)
        .zip(&addresses)
        .map(|((url, (_, info)), address)| NodeFacts {
            url,
            info,
            address: *address,
            loadgen_link: address.and_then(|a| {
                let name = data_path::route_interface(a)?;
                let link = sut_node::host::nic::resolve_link(Path::new("/sys/class/net"), &name);
                Some((name, link))
            }),
        })
        .collect();
    let own_host = sut_node::host::nic::host();
    let mut findings = rules::separate_machines(&own_host, &facts);
    findings.extend(rules::physical_machines(
        &own_host,
        &facts,
        inputs.attested_virtual_machines,
    ));
    let own_addresses: Vec<_> = sut_node::host::nic::interface_addresses()
        .into_iter()
        .map(|(_, ip)| ip)
        .filter(|ip| !ip.is_loopback())
        .collect();
    findings.extend(rules::engines_on_their_nodes(
        &facts,
        &own_addresses,
        inputs.attested_remote_engine,
    ));
    findings.extend(rules::real_data_path(&facts));
    findings.extend(rules::real_backends(&facts));
    findings.extend(rules::permitted_fabric(inputs.system));
    findings.extend(rules::approved_compression(
        plan.samples.codec,
        &facts,
        inputs.compression_approved,
    ));
    findings.extend(rules::diagram(inputs.diagram));
    let mut warnings = plan.conf_warnings()?;
    // A data set that does not load is one FAIL line among the others, so
    // one preflight says everything; the checks that need its samples wait.
    match plan.qsl() {
        Ok(qsl) => {
            let paths: Vec<_> = nodes
                .iter()
                .zip(&addresses)
                .map(|((_, info), a)| data_path::data_path(info, *a))
                .collect();
            let rate = data_path::loadgen_rate_bytes_per_s(&paths);
            match data_loads(qsl.store.source()) {
                Ok(loaded) => held.push(loaded),
                Err(e) => errors.push(e),
            }
            findings.extend(rules::real_data(qsl.store.source()));
            let (more, said) = scenario_checks(plan, inputs, &qsl, rate)?;
            findings.extend(more);
            warnings.extend(said);
        }
        Err(e) => errors.push(format!("the data set does not load: {e:#}")),
    }
    Ok(Preflight {
        nodes,
        findings,
        errors,
        warnings,
        held,
    })
}

/// Per scenario: the Offline floor, the rules' bandwidth at the target
/// throughput, and settings that make a run needlessly long.
fn scenario_checks(
    plan: &RunPlan,
    inputs: &Inputs<'_>,
    qsl: &loadgen_node::sut::network::StoreQsl,
    rate: Option<f64>,
) -> Result<(Vec<Finding>, Vec<String>)> {
    let (total, performance) = plan.counts(qsl.store.source().count())?;
    let mut findings = Vec::new();
    let mut warnings = Vec::new();
    for scenario in inputs.scenarios {
        let settings = plan.settings(loadgen_scenario(scenario), None)?;
        let effective = EffectiveSettings::new(&settings, performance as u64, total as u64);
        if scenario == "Offline" {
            let floor = inputs.entry.offline_min_samples_per_query();
            findings.extend(rules::offline_floor(
                inputs.entry.model,
                effective.samples_per_query,
                floor,
            ));
        }
        findings.extend(bandwidth(plan, scenario, &settings, qsl, rate));
        warnings.extend(long_or_unreachable(scenario, &settings));
    }
    Ok((findings, warnings))
}

/// Every node answered Info: their names, backends and software.
fn nodes_answer(nodes: &[(String, pb::NodeInfo)]) -> String {
    let each: Vec<String> = nodes
        .iter()
        .map(|(url, info)| {
            let engine = info
                .backend_detail
                .split_whitespace()
                .filter(|w| w.starts_with("engine=") || w.starts_with("version="))
                .collect::<Vec<_>>()
                .join(" ");
            format!(
                "{} at {url}: {} backend{}{}, netdiv {}",
                info.name,
                info.backend,
                if engine.is_empty() { "" } else { " " },
                engine,
                info.software_version
            )
        })
        .collect();
    format!("{} node(s) answer: {}", nodes.len(), each.join("; "))
}

/// Nodes that serve another benchmark or refuse the samples' codec.
fn serving(plan: &RunPlan, nodes: &[(String, pb::NodeInfo)]) -> Vec<String> {
    let codec = plan.samples.codec;
    nodes
        .iter()
        .filter_map(|(url, info)| {
            let same = netdiv_proto::Benchmark::parse(&info.benchmark)
                .is_ok_and(|b| b.same_benchmark(&plan.benchmark));
            if !same {
                return Some(format!(
                    "node {url} ({}) serves {:?}, not {}",
                    info.name, info.benchmark, plan.benchmark
                ));
            }
            (!info.codecs.contains(&(codec.to_proto() as i32))).then(|| {
                format!(
                    "node {url} ({}) does not accept samples in {}",
                    info.name,
                    codec.name()
                )
            })
        })
        .collect()
}

/// The first and last samples of the data set load: what they are.
fn data_loads(source: &loadgen_node::qsl::SampleSource) -> Result<String, String> {
    let Some(count) = source.count() else {
        return Ok(format!("the samples are {}", source.describe()));
    };
    for index in [0, count.saturating_sub(1)] {
        source
            .read(index)
            .map_err(|e| format!("the data set does not load: sample {index}: {e}"))?;
    }
    Ok(format!(
        "the data set loads: {} ({} samples, {})",
        source.describe(),
        count,
        source
            .element_type()
            .map_or("element type unknown", |d| d.name())
    ))
}

/// The rules' bandwidth at the scenario's target throughput, with the
/// samples' element size as sent, against the data path's rate.
fn bandwidth(
    plan: &RunPlan,
    scenario: &str,
    settings: &TestSettings,
    qsl: &loadgen_node::sut::network::StoreQsl,
    rate: Option<f64>,
) -> Option<Finding> {
    let rule = netdiv_proto::bandwidth::rule(&plan.benchmark)?;
    let throughput = match settings.scenario {
        Scenario::Server => settings.server_target_qps,
        _ => settings.offline_expected_qps,
    };
    let size = qsl
        .store
        .source()
        .element_size()
        .unwrap_or(plan.benchmark.spec().dtype.size());
    let (need_in, need_out) = netdiv_proto::bandwidth::required(&rule, throughput, size);
    rules::bandwidth(
        &format!("{scenario} at its target of {throughput} samples/s"),
        need_in,
        need_out,
        rate,
    )
}

/// A user.conf that makes a run needlessly long by an order of magnitude
/// or its minimum duration unreachable, with the numbers.
fn long_or_unreachable(scenario: &str, s: &TestSettings) -> Option<String> {
    let min_s = s.min_duration_ms as f64 / 1000.0;
    if s.scenario == Scenario::Server && s.server_target_qps > 0.0 {
        let query_s = s.min_query_count as f64 / s.server_target_qps;
        if query_s >= 10.0 * min_s.max(1.0) {
            return Some(format!(
                "{scenario}: min_query_count {} at target_qps {} takes {query_s:.0} s, ten \
                 times the {min_s:.0} s minimum duration; the run lasts that long",
                s.min_query_count, s.server_target_qps
            ));
        }
    }
    if s.max_duration_ms > 0 && s.max_duration_ms < s.min_duration_ms {
        return Some(format!(
            "{scenario}: max_duration {} ms is below min_duration {} ms: the minimum \
             duration cannot be reached",
            s.max_duration_ms, s.min_duration_ms
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_node::round::Round;
    use netdiv_proto::Benchmark;

    #[test]
    fn every_finding_is_a_fail_line_and_every_rule_is_named() {
        let pre = Preflight {
            nodes: Vec::new(),
            findings: vec![
                rules::finding(rules::PHYSICAL, "node x runs under a hypervisor".into()),
                rules::finding("a rule no list names", "evidence".into()),
            ],
            errors: Vec::new(),
            warnings: Vec::new(),
            held: Vec::new(),
        };
        let lines = pre.lines();
        let fails: Vec<&String> = lines.iter().filter(|l| l.starts_with("FAIL")).collect();
        assert_eq!(fails.len(), 2, "{lines:#?}");
        assert!(
            fails[1].ends_with("a rule no list names: evidence"),
            "{lines:#?}"
        );
        for rule in rules::ALL.iter().filter(|r| **r != rules::PHYSICAL) {
            assert!(
                lines.contains(&format!("ok    {rule}")),
                "{rule} is not named"
            );
        }
    }

    #[test]
    fn a_scenario_set_missing_what_the_round_requires_is_refused() {
        let entry = Round::V6_1
            .suite_entry(&Benchmark::parse("llama3.1-8b").unwrap())
            .unwrap();
        let err = check_scenario_set(entry, "v6.1", &["Offline".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("requires one of Server or Interactive too"),
            "{err}"
        );
        // One already in the tree counts.
        check_scenario_set(entry, "v6.1", &["Offline".into()], &["Server".into()]).unwrap();
        check_scenario_set(entry, "v6.1", &["Offline".into(), "Server".into()], &[]).unwrap();
    }

    #[test]
    fn a_server_query_count_ten_times_the_duration_is_said() {
        let s = TestSettings {
            scenario: Scenario::Server,
            server_target_qps: 10.0,
            min_query_count: 270_336,
            min_duration_ms: 600_000,
            ..TestSettings::default()
        };
        let w = long_or_unreachable("Server", &s).unwrap();
        assert!(
            w.contains("takes 27034 s, ten times the 600 s minimum"),
            "{w}"
        );
        let fine = TestSettings {
            server_target_qps: 500.0,
            ..s
        };
        assert!(long_or_unreachable("Server", &fine).is_none());
    }
}
