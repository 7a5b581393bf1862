//! The audit's steps: each measures one thing and says whether it shows
//! what it should.

use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use loadgen_node::mlperf_logs::{Summary, SUMMARY};
use loadgen_node::run_record::RunRecord;
use qdl::{NodeUrl, Transport};

use super::relay::{self, Relay};
use super::{child_run, run_dir, Outcome, Step, USER_CONF};
use crate::cli::args::AuditArgs;
use crate::cli::run::plan::RunPlan;

/// Name() round trips per node in the first step.
const NAME_ROUNDS: usize = 5;
/// How long a healed node may take to answer again.
const HEAL_WAIT: Duration = Duration::from_secs(30);

/// What every step needs.
pub(crate) struct Context<'a> {
    args: &'a AuditArgs,
    /// The run flags the audit was given, resolved.
    plan: RunPlan,
    audit_dir: PathBuf,
    user_conf: PathBuf,
    nodes: Vec<NodeUrl>,
    runtime: tokio::runtime::Runtime,
}

impl<'a> Context<'a> {
    /// Writes the audit's user.conf and starts the relays' runtime.
    pub(crate) fn new(args: &'a AuditArgs, audit_dir: &Path) -> Result<Context<'a>> {
        let user_conf = audit_dir.join("audit-user.conf");
        std::fs::write(&user_conf, USER_CONF)
            .with_context(|| format!("cannot write {}", user_conf.display()))?;
        Ok(Context {
            args,
            plan: RunPlan::from_args(&args.run)?,
            audit_dir: audit_dir.to_path_buf(),
            user_conf,
            nodes: args.run.network.sut_node.clone(),
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("the relays' runtime")?,
        })
    }

    fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(ToString::to_string).collect()
    }

    /// The QDL connected to every node, as a run would connect it.
    fn connect(&self) -> Result<qdl::NetworkSut> {
        let qsl = self.plan.qsl()?;
        let config = self
            .plan
            .qdl
            .config(self.nodes.clone(), qsl.store.benchmark())?;
        Ok(qdl::NetworkSut::connect(config, qsl.store.clone())?)
    }

    /// One relay per node (all must be gRPC), holding chunks `delay`.
    fn relays(&self, delay: Duration) -> Result<Vec<Relay>, String> {
        self.nodes
            .iter()
            .map(|url| {
                if url.transport != Transport::Grpc {
                    return Err(format!(
                        "{url} is QUIC: the audit's relay carries TCP (gRPC) only"
                    ));
                }
                let addr = (url.host.as_str(), url.port)
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or(format!("cannot resolve {url}"))?;
                self.runtime
                    .block_on(relay::start(addr, delay))
                    .map_err(|e| format!("relay to {url}: {e}"))
            })
            .collect()
    }

    fn run(&self, name: &str, scenario: &str, nodes: &[String], extra: &[&str]) -> Result<PathBuf> {
        let out = run_dir(&self.audit_dir, name);
        child_run(&self.user_conf, scenario, nodes, &out, extra)?;
        Ok(out)
    }
}

fn relayed(relays: &[Relay]) -> Vec<String> {
    relays
        .iter()
        .map(|r| format!("grpc://{}", r.listen))
        .collect()
}

fn fail(step: &mut Step, e: impl std::fmt::Display) {
    step.outcome = Outcome::Fail(e.to_string());
}

/// Step 1: every node's Name() round trip.
pub(crate) fn name(ctx: &Context) -> Step {
    let mut step = Step::new(
        "name",
        "the SUT's Name() is a live round trip to every node, aggregated into one \"Network SUT\" name of unique node names",
        "Network division: Name() includes a network round trip, returns the nodes' aggregated unique names and contains \"Network SUT\"",
    );
    if let Err(e) = name_rounds(ctx, &mut step) {
        fail(&mut step, format!("{e:#}"));
    }
    step
}

fn name_rounds(ctx: &Context, step: &mut Step) -> Result<()> {
    let network = ctx.connect()?;
    let mut name = String::new();
    for _ in 0..NAME_ROUNDS {
        name = network.name()?;
    }
    step.lines.push(format!("Name() = {name:?}"));
    let (traffic, _) = network.traffic();
    for (url, (t, _)) in network.node_urls().iter().zip(&traffic) {
        let mut rtts = t.name_round_trips_us.clone();
        rtts.sort_unstable();
        if rtts.len() != NAME_ROUNDS {
            bail!(
                "{url} answered {} of {NAME_ROUNDS} Name() calls",
                rtts.len()
            );
        }
        step.lines.push(format!(
            "{url}: {NAME_ROUNDS} round trips, min {} µs, median {} µs, max {} µs",
            rtts[0],
            rtts[rtts.len() / 2],
            rtts[rtts.len() - 1]
        ));
    }
    if !name.contains("Network SUT") {
        bail!("the name lacks \"Network SUT\"");
    }
    Ok(())
}

/// Runs an operator's shell command with the node in its environment.
fn shell(command: &str, node: &NodeUrl) -> Result<()> {
    let out = Command::new("sh")
        .args(["-c", command])
        .env("NODE_URL", node.to_string())
        .env("NODE_HOST", &node.host)
        .env("NODE_PORT", node.port.to_string())
        .output()
        .with_context(|| format!("cannot run {command:?}"))?;
    if !out.status.success() {
        bail!(
            "{command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Step 2: Name() fails while a node is cut off, and works once healed.
pub(crate) fn partition(ctx: &Context) -> Step {
    let mut step = Step::new(
        "partition",
        "Name() cannot answer from anywhere but the nodes: with one node cut off the fabric it fails, healed it answers again",
        "Network division: Name() must not return before its round trip over the network completes; queries and responses cross the network",
    );
    let (Some(cut), Some(heal)) = (&ctx.args.partition_cmd, &ctx.args.heal_cmd) else {
        step.outcome = Outcome::NotRun(
            "give --partition-cmd and --heal-cmd (e.g. iptables -I/-D OUTPUT -d \"$NODE_HOST\" -j DROP)".into(),
        );
        return step;
    };
    let node = &ctx.nodes[0];
    let result = (|| -> Result<()> {
        let network = ctx.connect()?;
        network.name().context("before the partition")?;
        shell(cut, node)?;
        step.lines.push(format!("{node} cut off: {cut}"));
        let started = Instant::now();
        let answer = network.name();
        let waited = started.elapsed();
        shell(heal, node)?;
        step.lines.push(format!("{node} healed: {heal}"));
        match answer {
            Ok(name) => bail!("Name() answered {name:?} while {node} was cut off"),
            Err(e) => step.lines.push(format!(
                "Name() failed after {:.1} s: {e}",
                waited.as_secs_f64()
            )),
        }
        drop(network);
        let healed = Instant::now();
        loop {
            match ctx.connect().and_then(|n| Ok(n.name()?)) {
                Ok(name) => {
                    step.lines.push(format!(
                        "after healing, Name() = {name:?} ({:.1} s)",
                        healed.elapsed().as_secs_f64()
                    ));
                    return Ok(());
                }
                Err(e) if healed.elapsed() > HEAL_WAIT => {
                    bail!("Name() still fails {HEAL_WAIT:?} after healing: {e:#}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    })();
    if let Err(e) = result {
        fail(&mut step, format!("{e:#}"));
    }
    step
}

fn record(run: &Path) -> Result<RunRecord> {
    Ok(RunRecord::read(&run.join(loadgen_node::run_record::FILE))?)
}

/// Length of a protobuf varint.
fn varint(x: u64) -> u64 {
    (u64::from(64 - x.max(1).leading_zeros()).div_ceil(7)).max(1)
}

/// docs/session-layer.md §6: gRPC bytes of a one-sample query of `n`
/// bytes with a 7-byte response id and a 4-byte query id field, above
/// the payload (the doc's worst case per sample).
pub(crate) fn documented_grpc_overhead(n: u64) -> u64 {
    let sample = 1 + 7 + 1 + varint(n) + n;
    let query = 4 + 1 + varint(sample) + sample;
    let grpc = 5 + query;
    let frame = u64::from(netdiv_proto::transport::HTTP2_MAX_FRAME_SIZE);
    // A large sample's data is a piece of its own, the parts before it
    // another; a small sample's query is one piece.
    let frames = if n >= netdiv_proto::segments::SHARED_FIELD_BYTES as u64 {
        1 + n.div_ceil(frame)
    } else {
        grpc.div_ceil(frame)
    };
    grpc + 9 * frames - n
}

/// Step 3: bytes per sample on the wire.
pub(crate) fn wire(ctx: &Context) -> Step {
    let mut step = Step::new(
        "wire",
        "every sample's bytes cross the fabric whole, with no more overhead than docs/session-layer.md documents",
        "Network division: all queries and responses are transferred over the network carrying the inference data; the session-layer API is documented",
    );
    let relays = match ctx.relays(Duration::ZERO) {
        Ok(r) => r,
        Err(why) => {
            step.outcome = Outcome::NotRun(why);
            return step;
        }
    };
    let result = (|| -> Result<()> {
        let run = ctx.run("wire-offline", "Offline", &relayed(&relays), &[])?;
        let record = record(&run)?;
        let samples: u64 = record.nodes.iter().map(|n| n.traffic.samples_sent).sum();
        if samples == 0 {
            bail!("no sample was sent");
        }
        let sent: u64 = record.nodes.iter().map(|n| n.traffic.bytes_sent).sum();
        let payload = sent as f64 / samples as f64;
        let on_wire: u64 = relays
            .iter()
            .map(|r| r.crossed.to_node.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        let back: u64 = relays
            .iter()
            .map(|r| {
                r.crossed
                    .from_node
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum();
        let per_sample = on_wire as f64 / samples as f64;
        let overhead = per_sample - payload;
        let bound = documented_grpc_overhead(payload.round() as u64) as f64;
        step.lines.push(format!(
            "{samples} samples of {payload:.0} B: {per_sample:.1} B per sample into the fabric, {overhead:.1} B above the payload"
        ));
        step.lines.push(format!(
            "docs/session-layer.md §6 at this size: at most {bound:.0} B per sample (7-byte ids, one sample per query)"
        ));
        step.lines.push(format!(
            "answers: {:.1} B per sample back (outputs, completions, HTTP/2 flow control)",
            back as f64 / samples as f64
        ));
        if overhead < 0.0 {
            bail!("fewer bytes crossed than the samples hold");
        }
        if overhead > bound {
            bail!("{overhead:.1} B of overhead per sample, above the documented {bound:.0} B");
        }
        Ok(())
    })();
    if let Err(e) = result {
        fail(&mut step, format!("{e:#}"));
    }
    step
}

/// The median latency a run's summary reports, in milliseconds.
fn median_latency_ms(run: &Path) -> Result<f64> {
    Summary::read(run)?
        .number("50.00 percentile latency (ns)")
        .map(|ns| ns / 1e6)
        .with_context(|| format!("no median latency in {}", run.join(SUMMARY).display()))
}

/// Step 4: a delay on the fabric shows in the measured latency.
pub(crate) fn delay(ctx: &Context) -> Step {
    let mut step = Step::new(
        "delay",
        "the network is inside the timed path: a delay added on the fabric raises the measured latency by that delay",
        "Network division: everything outside the LoadGen node, the fabric included, is part of the SUT and counts for latency",
    );
    let delay = Duration::from_secs_f64(ctx.args.delay_ms / 1000.0);
    // The same path twice (through a relay), once with the delay.
    let relays = match ctx
        .relays(Duration::ZERO)
        .and_then(|plain| ctx.relays(delay).map(|slowed| (plain, slowed)))
    {
        Ok(r) => r,
        Err(why) => {
            step.outcome = Outcome::NotRun(why);
            return step;
        }
    };
    let result = (|| -> Result<()> {
        let plain = &relayed(&relays.0);
        let direct = median_latency_ms(&ctx.run("delay-none", "SingleStream", plain, &[])?)?;
        let slowed = median_latency_ms(&ctx.run(
            "delay-added",
            "SingleStream",
            &relayed(&relays.1),
            &[],
        )?)?;
        let added = 2.0 * ctx.args.delay_ms;
        let measured = slowed - direct;
        step.lines.push(format!(
            "SingleStream median latency: {direct:.2} ms as it is, {slowed:.2} ms with {:.1} ms added each way",
            ctx.args.delay_ms
        ));
        step.lines.push(format!(
            "measured increase {measured:.2} ms for {added:.1} ms added per round trip"
        ));
        // A delay the LoadGen did not time would show as no increase.
        if measured < 0.9 * added || measured > 1.1 * added + 2.0 {
            bail!("the latency rose by {measured:.2} ms, not by the {added:.1} ms added");
        }
        Ok(())
    })();
    if let Err(e) = result {
        fail(&mut step, format!("{e:#}"));
    }
    step
}

/// Step 5: TEST04 with its official verification.
pub(crate) fn test04(ctx: &Context) -> Step {
    let mut step = Step::new(
        "test04",
        "the SUT caches no query or response: a run that repeats one sample is no faster than a normal run",
        "General rules: caching of queries, inference data or responses is prohibited (compliance TEST04)",
    );
    let Some(inference) = &ctx.args.inference else {
        step.outcome = Outcome::NotRun(
            "give --inference DIR (or NETDIV_INFERENCE_REPO): a mlcommons/inference checkout with compliance/TEST04".into(),
        );
        return step;
    };
    let result = (|| -> Result<()> {
        let test_dir = inference.join("compliance/TEST04");
        let reference = ctx.audit_dir.join("test04-reference");
        let reference_run = reference.join("performance/run_1");
        let _ = std::fs::remove_dir_all(&reference);
        child_run(&ctx.user_conf, "Offline", &ctx.urls(), &reference_run, &[])?;
        let audit_conf = test_dir.join("audit.config");
        let audit_conf = audit_conf.to_str().context("non-UTF-8 path")?;
        let compliance = ctx.run(
            "test04-run",
            "Offline",
            &ctx.urls(),
            &["--audit-conf", audit_conf],
        )?;
        let verified = ctx.audit_dir.join("test04-verified");
        let out = Command::new(&ctx.args.python)
            .arg(test_dir.join("run_verification.py"))
            .arg("-r")
            .arg(&reference)
            .arg("-c")
            .arg(&compliance)
            .arg("-o")
            .arg(&verified)
            .current_dir(&compliance)
            .output()
            .context("cannot run the official TEST04 verification")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        std::fs::write(compliance.join("verification.log"), &text)?;
        for line in text.lines().filter(|l| {
            l.contains("TEST")
                || l.contains("score")
                || l.contains("ratio")
                || l.contains("check pass")
        }) {
            step.lines
                .push(format!("official verification: {}", line.trim()));
        }
        if !text.contains("Performance check pass: True") {
            bail!(
                "the official TEST04 verification did not pass (full output: {})",
                compliance.join("verification.log").display()
            );
        }
        Ok(())
    })();
    if let Err(e) = result {
        fail(&mut step, format!("{e:#}"));
    }
    step
}

/// Step 6: where the runs' logs and reports are.
pub(crate) fn report(ctx: &Context) -> Step {
    let mut step = Step::new(
        "report",
        "what was measured can be looked at: the report (verdict, latency, nodes, Network-division checks) of every run above, beside its MLPerf logs and run record",
        "Submission: logs and the system's network (NICs, fabric, codecs) are reported",
    );
    let mut found = 0;
    let mut missing = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&ctx.audit_dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for dir in entries {
        let run = if dir.join("performance/run_1").is_dir() {
            dir.join("performance/run_1")
        } else {
            dir
        };
        if run.join(SUMMARY).is_file() {
            found += 1;
            let report = run.join(crate::cli::report::FILE);
            if report.is_file() {
                step.lines.push(report.display().to_string());
            } else {
                step.lines
                    .push(format!("{} (logs; no report)", run.display()));
                missing.push(run.display().to_string());
            }
        }
    }
    if found == 0 {
        step.outcome = Outcome::NotRun("no run was made".into());
    } else if !missing.is_empty() {
        fail(
            &mut step,
            format!("runs without a report: {}", missing.join(", ")),
        );
    }
    step
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_documented_overheads_match_the_session_layer_table() {
        // docs/session-layer.md §6: one 150528-byte sample costs 43 B
        // more on gRPC, one 4-byte sample 30 B.
        assert_eq!(super::documented_grpc_overhead(150_528), 43);
        assert_eq!(super::documented_grpc_overhead(4), 30);
    }
}
