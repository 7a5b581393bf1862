//! The multi-chassis lab on one machine: the LoadGen node and every
//! sut-node each in a network namespace of its own, each joined by a veth
//! pair to one bridge (in a hub namespace), each link shaped with `tc tbf`,
//! so traffic crosses real interfaces at real rates. A management link
//! joins the bridge to the caller's namespace, so the caller can scrape
//! the nodes' metrics. Faults are injected on a schedule while a run goes
//! on: kill -9, SIGTERM, restart, SIGSTOP/SIGCONT, link down/up and a
//! rate cut. Needs root; everything is removed on drop.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::sut_client::NodeProcess;

/// The lab's sut-node: ResNet-50 with a synthetic device of about 1000
/// samples/s, so a run lasts long enough for its faults and three nodes
/// are not the machine's limit.
pub fn node_config() -> sut_node::config::FileConfig {
    sut_node::config::FileConfig {
        benchmark: Some("resnet50".into()),
        synthetic: sut_node::backend::synthetic::SyntheticConfig {
            batch_cost_us: 500,
            sample_cost_us: 1000,
            output_bytes: 8,
            ..Default::default()
        },
        batching: sut_node::batcher::BatchPolicy {
            max_batch_size: 32,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Runs `ip ARGS`.
fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// One fault the lab can inject into node `node` (its index).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// SIGKILL: the node dies without a word.
    Kill(usize),
    /// SIGTERM: the node declines new work, drains and exits.
    Term(usize),
    /// Starts the node again, on the address it had, after it exited.
    Restart(usize),
    /// Starts another node (its name with `-impostor`) on the address the
    /// node had, after it exited: the QDL must not take it for the node.
    Impostor(usize),
    /// SIGSTOP: the node stalls (its connections stay open).
    Stop(usize),
    /// SIGCONT: a stalled node goes on.
    Cont(usize),
    /// The node's link goes down (a partition).
    LinkDown(usize),
    /// The node's link comes back (the partition heals).
    LinkUp(usize),
    /// The node's link is shaped to this many Mbit/s (a slow link).
    Rate(usize, u64),
}

impl Fault {
    /// The node it acts on.
    pub fn node(self) -> usize {
        match self {
            Fault::Kill(n)
            | Fault::Term(n)
            | Fault::Restart(n)
            | Fault::Impostor(n)
            | Fault::Stop(n)
            | Fault::Cont(n)
            | Fault::LinkDown(n)
            | Fault::LinkUp(n)
            | Fault::Rate(n, _) => n,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Kill(n) => write!(f, "kill:{n}"),
            Fault::Term(n) => write!(f, "term:{n}"),
            Fault::Restart(n) => write!(f, "restart:{n}"),
            Fault::Impostor(n) => write!(f, "impostor:{n}"),
            Fault::Stop(n) => write!(f, "stop:{n}"),
            Fault::Cont(n) => write!(f, "cont:{n}"),
            Fault::LinkDown(n) => write!(f, "down:{n}"),
            Fault::LinkUp(n) => write!(f, "up:{n}"),
            Fault::Rate(n, mbit) => write!(f, "rate:{n}:{mbit}"),
        }
    }
}

/// A fault and when it comes, from the start of the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scheduled {
    pub at: Duration,
    pub fault: Fault,
}

impl FromStr for Scheduled {
    type Err = anyhow::Error;

    /// `SECONDS:ACTION:NODE[:MBIT]`, e.g. `2.5:kill:1`, `6:rate:0:100`.
    fn from_str(text: &str) -> Result<Scheduled> {
        let parts: Vec<&str> = text.split(':').collect();
        let usage = || {
            format!(
                "fault {text:?}: expected SECONDS:ACTION:NODE[:MBIT] with ACTION one of \
                 kill, term, restart, impostor, stop, cont, down, up, rate"
            )
        };
        if parts.len() < 3 {
            bail!("{}", usage());
        }
        let at: f64 = parts[0]
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s >= 0.0)
            .with_context(|| format!("{}: {:?} is not a time in seconds", usage(), parts[0]))?;
        let node: usize = parts[2]
            .parse()
            .with_context(|| format!("{}: {:?} is not a node index", usage(), parts[2]))?;
        let fault = match (parts[1], parts.len()) {
            ("kill", 3) => Fault::Kill(node),
            ("term", 3) => Fault::Term(node),
            ("restart", 3) => Fault::Restart(node),
            ("impostor", 3) => Fault::Impostor(node),
            ("stop", 3) => Fault::Stop(node),
            ("cont", 3) => Fault::Cont(node),
            ("down", 3) => Fault::LinkDown(node),
            ("up", 3) => Fault::LinkUp(node),
            ("rate", 4) => Fault::Rate(
                node,
                parts[3].parse().ok().filter(|m| *m > 0).with_context(|| {
                    format!("{}: {:?} is not a rate in Mbit/s", usage(), parts[3])
                })?,
            ),
            _ => bail!("{}", usage()),
        };
        Ok(Scheduled {
            at: Duration::from_secs_f64(at),
            fault,
        })
    }
}

/// A comma-separated fault schedule, sorted by time.
pub fn parse_schedule(text: &str) -> Result<Vec<Scheduled>> {
    let mut schedule = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse())
        .collect::<Result<Vec<Scheduled>>>()?;
    schedule.sort_by_key(|s| s.at);
    Ok(schedule)
}

/// One sut-node of the lab: its namespace, its link and its process.
pub struct LabNode {
    pub name: String,
    /// Its namespace.
    pub netns: String,
    /// Its address on the lab network.
    pub address: String,
    /// Its end of the link on the bridge (in the hub namespace).
    hub_port: String,
    /// The running process; `None` while it is down.
    pub process: Option<NodeProcess>,
    /// Where it listens (kept across restarts).
    pub listen: Option<SocketAddr>,
    /// Its metrics endpoint, reachable over the management link.
    pub metrics: Option<SocketAddr>,
    args: Vec<String>,
    certs: Option<PathBuf>,
    transport: &'static str,
}

impl LabNode {
    /// Its address as `--sut-node` takes it.
    pub fn url(&self) -> String {
        let at = self.listen.expect("started");
        format!("{}://{at}", self.transport)
    }

    fn signal(&self, signal: libc::c_int) -> Result<()> {
        let Some(process) = &self.process else {
            bail!("node {} is not running", self.name);
        };
        // SAFETY: kill(2) on a child we started and have not reaped.
        if unsafe { libc::kill(process.child.id() as libc::pid_t, signal) } != 0 {
            bail!(
                "cannot signal node {}: {}",
                self.name,
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }

    fn start(&mut self) -> Result<()> {
        let listen = match self.listen {
            Some(at) => at.to_string(),
            None => format!("{}:0", self.address),
        };
        let metrics = match self.metrics {
            Some(at) => at.to_string(),
            None => format!("{}:0", self.address),
        };
        let mut args: Vec<&str> = vec![
            "--listen",
            &listen,
            "--transport",
            self.transport,
            "--metrics-listen",
            &metrics,
        ];
        args.extend(self.args.iter().map(String::as_str));
        let netns = PathBuf::from(&self.netns);
        let process =
            NodeProcess::start_with(&self.name, self.certs.as_deref(), &args, Some(&netns))?;
        self.listen = match self.transport {
            "quic" => process.quic,
            _ => process.grpc,
        };
        self.metrics = process.metrics;
        self.process = Some(process);
        Ok(())
    }

    /// Waits up to `within` for the process to exit, then kills it.
    fn reap(&mut self, within: Duration) {
        if let Some(mut process) = self.process.take() {
            let deadline = Instant::now() + within;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = process.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Dropping kills and reaps it.
            drop(process);
        }
    }

    /// Samples this node's current process completed, from its metrics.
    pub fn completed(&self) -> Result<f64> {
        let at = self.metrics.context("node has no metrics endpoint")?;
        Ok(crate::prometheus::scrape(at)?.sum("netdiv_node_samples_completed_total"))
    }
}

/// The lab: a hub namespace with the bridge, the LoadGen node's namespace
/// and one namespace per sut-node.
pub struct Lab {
    hub: String,
    /// The LoadGen node's namespace.
    pub loadgen_netns: String,
    pub nodes: Vec<LabNode>,
    /// The caller's end of the management link.
    management: String,
    /// Every link's rate, in Mbit/s.
    rate_mbit: u64,
}

/// Whether the lab can run here (root, `ip netns`, `tc`).
pub fn available() -> bool {
    crate::netns::available()
        && Command::new("tc")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

impl Lab {
    /// Creates the namespaces, the bridge and the links (each shaped to
    /// `rate_mbit`) for `nodes` sut-nodes. Nothing runs yet.
    pub fn create(nodes: usize, rate_mbit: u64) -> Result<Lab> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let id = format!("ndl{pid}x{n}");
        // A /24 of its own from the pid and the count: labs of several
        // test processes never share addresses on the caller's side.
        let block = (pid % 1000) * 16 + (n % 16);
        let subnet = format!("10.{}.{}", 192 + block / 256, block % 256);
        let hub = format!("{id}hub");
        let loadgen_netns = format!("{id}lg");
        let management = format!("m{pid}x{n}");
        let mut lab = Lab {
            hub: hub.clone(),
            loadgen_netns: loadgen_netns.clone(),
            nodes: Vec::new(),
            management: management.clone(),
            rate_mbit,
        };
        ip(&["netns", "add", &hub])?;
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        ip(&["-n", &hub, "link", "set", "lo", "up"])?;
        // Management: the caller's namespace on the bridge, unshaped.
        ip(&[
            "link",
            "add",
            &management,
            "type",
            "veth",
            "peer",
            "name",
            "mgmt",
            "netns",
            &hub,
        ])?;
        ip(&["-n", &hub, "link", "set", "mgmt", "master", "br0", "up"])?;
        ip(&[
            "addr",
            "add",
            &format!("{subnet}.254/24"),
            "dev",
            &management,
        ])?;
        ip(&["link", "set", &management, "up"])?;
        lab.attach(&loadgen_netns, "lg", &format!("{subnet}.1"))?;
        for i in 0..nodes {
            let netns = format!("{id}n{i}");
            let address = format!("{subnet}.{}", 10 + i);
            let port = format!("n{i}");
            lab.attach(&netns, &port, &address)?;
            lab.nodes.push(LabNode {
                name: format!("lab-node-{i}"),
                netns,
                address,
                hub_port: port,
                process: None,
                listen: None,
                metrics: None,
                args: Vec::new(),
                certs: None,
                transport: "grpc",
            });
        }
        Ok(lab)
    }

    /// A namespace `netns` on the bridge through hub port `port`, with
    /// `address`, its link shaped both ways.
    fn attach(&mut self, netns: &str, port: &str, address: &str) -> Result<()> {
        ip(&["netns", "add", netns])?;
        ip(&[
            "-n", &self.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
            netns,
        ])?;
        ip(&["-n", &self.hub, "link", "set", port, "master", "br0", "up"])?;
        ip(&[
            "-n",
            netns,
            "addr",
            "add",
            &format!("{address}/24"),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", netns, "link", "set", "eth0", "up"])?;
        ip(&["-n", netns, "link", "set", "lo", "up"])?;
        self.shape(netns, port, self.rate_mbit)
    }

    /// Shapes both directions of a link to `mbit` with a token bucket.
    fn shape(&self, netns: &str, port: &str, mbit: u64) -> Result<()> {
        let burst = (mbit * 1_000_000 / 8 / 1000).max(64 << 10).to_string();
        let rate = format!("{mbit}mbit");
        for (ns, dev) in [(netns, "eth0"), (self.hub.as_str(), port)] {
            run(
                "tc",
                &[
                    "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", &rate,
                    "burst", &burst, "latency", "50ms",
                ],
            )?;
        }
        Ok(())
    }

    /// Starts every node: `transport`, `--dev-tls certs` when given, and
    /// `args` (its config).
    pub fn start_nodes(
        &mut self,
        transport: &'static str,
        certs: Option<&Path>,
        args: &[&str],
    ) -> Result<()> {
        for node in &mut self.nodes {
            node.transport = transport;
            node.certs = certs.map(Path::to_path_buf);
            node.args = args.iter().map(|s| s.to_string()).collect();
            node.start()?;
        }
        Ok(())
    }

    /// Starts every node like [`Lab::start_nodes`], all on the port the
    /// first one was given (each has an address of its own), as replicas
    /// behind one DNS name listen.
    pub fn start_nodes_on_one_port(
        &mut self,
        transport: &'static str,
        certs: Option<&Path>,
        args: &[&str],
    ) -> Result<u16> {
        let mut port = None;
        for node in &mut self.nodes {
            node.transport = transport;
            node.certs = certs.map(Path::to_path_buf);
            node.args = args.iter().map(|s| s.to_string()).collect();
            if let Some(port) = port {
                node.listen = Some(SocketAddr::new(node.address.parse()?, port));
            }
            node.start()?;
            port = node.listen.map(|a| a.port());
        }
        port.context("the lab has no nodes")
    }

    /// Makes `name` resolve to every node's address inside the LoadGen
    /// node's namespace (`ip netns exec` reads `/etc/netns/NS/hosts` as
    /// its `/etc/hosts`), as a headless Service's name does.
    pub fn publish_name(&self, name: &str) -> Result<()> {
        let dir = PathBuf::from("/etc/netns").join(&self.loadgen_netns);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let mut hosts = String::from("127.0.0.1 localhost\n");
        for node in &self.nodes {
            hosts.push_str(&format!("{} {name}\n", node.address));
        }
        std::fs::write(dir.join("hosts"), hosts)
            .with_context(|| format!("cannot write {}", dir.join("hosts").display()))
    }

    /// `--sut-node URL` for every node.
    pub fn sut_node_flags(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| ["--sut-node".to_string(), n.url()])
            .collect()
    }

    /// Injects one fault.
    pub fn apply(&mut self, fault: Fault) -> Result<()> {
        let index = fault.node();
        let hub = self.hub.clone();
        let Some(node) = self.nodes.get_mut(index) else {
            bail!("fault {fault}: the lab has no node {index}");
        };
        match fault {
            Fault::Kill(_) => {
                node.signal(libc::SIGKILL)?;
                node.reap(Duration::from_secs(5));
            }
            Fault::Term(_) => node.signal(libc::SIGTERM)?,
            Fault::Restart(_) => {
                // A node told to stop drains first; one that will not is
                // killed.
                node.reap(Duration::from_secs(10));
                node.start()?;
            }
            Fault::Impostor(_) => {
                node.reap(Duration::from_secs(10));
                let impostor = format!("{}-impostor", node.name);
                let name = std::mem::replace(&mut node.name, impostor);
                let started = node.start();
                node.name = name;
                started?;
            }
            Fault::Stop(_) => node.signal(libc::SIGSTOP)?,
            Fault::Cont(_) => node.signal(libc::SIGCONT)?,
            Fault::LinkDown(_) => ip(&["-n", &hub, "link", "set", &node.hub_port, "down"])?,
            Fault::LinkUp(_) => ip(&["-n", &hub, "link", "set", &node.hub_port, "up"])?,
            Fault::Rate(_, mbit) => {
                let (netns, port) = (node.netns.clone(), node.hub_port.clone());
                self.shape(&netns, &port, mbit)?;
            }
        }
        Ok(())
    }

    /// Applies `schedule` from `start` on, each fault at its time, and
    /// calls `after` with the lab and each fault once it is applied;
    /// returns what was applied and when, or the first error.
    pub fn run_schedule(
        &mut self,
        start: Instant,
        schedule: &[Scheduled],
        mut after: impl FnMut(&Lab, Fault) -> Result<()>,
    ) -> Result<Vec<(Duration, Fault)>> {
        let mut applied = Vec::new();
        for s in schedule {
            if let Some(wait) = s.at.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
            self.apply(s.fault)
                .with_context(|| format!("fault {} at {:?}", s.fault, s.at))?;
            applied.push((start.elapsed(), s.fault));
            after(self, s.fault)?;
        }
        Ok(applied)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            // A stopped process cannot die of SIGKILL until continued.
            let _ = node.signal(libc::SIGCONT);
            node.process.take();
            let _ = ip(&["netns", "del", &node.netns]);
        }
        let _ = ip(&["netns", "del", &self.loadgen_netns]);
        let _ = std::fs::remove_dir_all(PathBuf::from("/etc/netns").join(&self.loadgen_netns));
        let _ = ip(&["netns", "del", &self.hub]);
        let _ = ip(&["link", "del", &self.management]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_parses_sorted_and_bad_entries_name_themselves() {
        let s = parse_schedule("4:restart:1, 2.5:kill:1,6:rate:0:100").unwrap();
        assert_eq!(s[0].fault, Fault::Kill(1));
        assert_eq!(s[0].at, Duration::from_millis(2500));
        assert_eq!(s[2].fault, Fault::Rate(0, 100));
        for bad in [
            "2:explode:1",
            "x:kill:1",
            "2:kill",
            "2:rate:1",
            "2:kill:one",
        ] {
            let e = parse_schedule(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}
