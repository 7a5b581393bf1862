//! Hosts on one machine: a network namespace per sut-node, joined to this
//! (the LoadGen node's) namespace by a veth pair with addresses of its
//! own, so traffic crosses real interfaces, not loopback, and the node's
//! network stack (its `host_id`) is not the LoadGen node's. Needs root
//! (`ip netns`); everything is removed on drop.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

use crate::sut_client::NodeProcess;

/// Whether this process may create network namespaces.
pub fn available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip")
        .args(["netns", "list"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run ip")?;
    if !out.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs `tc ARGS`, inside namespace `netns` when given.
fn tc(args: &[String], netns: Option<&str>) -> Result<()> {
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "tc"]);
            c
        }
        None => Command::new("tc"),
    };
    let out = command.args(args).output().context("cannot run tc")?;
    if !out.status.success() {
        bail!(
            "tc {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A network namespace with a veth link to this one.
pub struct Netns {
    /// The namespace's name.
    pub name: String,
    /// The address of the namespace's end of the link.
    pub address: String,
    /// The address of this namespace's end.
    host_addr: String,
    host_link: String,
    ns_link: String,
}

impl Netns {
    /// A new namespace, linked to this one by a /30 of its own.
    pub fn create() -> Result<Netns> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let name = format!("nd{pid}x{n}");
        let host_link = format!("vh{pid}x{n}");
        let ns_link = format!("vn{pid}x{n}");
        // 10.P.Q.R/30 from the pid and the count: distinct per test process.
        let block = (pid % (1 << 14)) * 64 + (n % 64);
        let (b, c, d) = (
            100 + (block >> 14) % 100,
            (block >> 6) & 0xff,
            (block & 63) * 4,
        );
        let host_addr = format!("10.{b}.{c}.{}", d + 1);
        let address = format!("10.{b}.{c}.{}", d + 2);
        ip(&["netns", "add", &name])?;
        let ns = Netns {
            name: name.clone(),
            address: address.clone(),
            host_addr: host_addr.clone(),
            host_link: host_link.clone(),
            ns_link: ns_link.clone(),
        };
        ip(&[
            "link", "add", &host_link, "type", "veth", "peer", "name", &ns_link,
        ])?;
        ip(&["link", "set", &ns_link, "netns", &name])?;
        ip(&["addr", "add", &format!("{host_addr}/30"), "dev", &host_link])?;
        ip(&["link", "set", &host_link, "up"])?;
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{address}/30"),
            "dev",
            &ns_link,
        ])?;
        ip(&["-n", &name, "link", "set", &ns_link, "up"])?;
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The address of the link's end in this (the caller's) namespace.
    pub fn host_address(&self) -> &str {
        &self.host_addr
    }

    /// Starts a sut-node inside the namespace, listening on its address.
    pub fn start_node(&self, name: &str, args: &[&str]) -> Result<NodeProcess> {
        self.start_node_tls(name, None, args)
    }

    /// [`Netns::start_node`] with `--dev-tls certs` when given (QUIC).
    pub fn start_node_tls(
        &self,
        name: &str,
        certs: Option<&Path>,
        args: &[&str],
    ) -> Result<NodeProcess> {
        let listen = format!("{}:0", self.address);
        let mut all = vec!["--listen", listen.as_str()];
        all.extend_from_slice(args);
        NodeProcess::start_with(name, certs, &all, Some(Path::new(&self.name)))
    }

    /// Sets the MTU of both ends of the link (9000: jumbo frames, as data
    /// centre fabrics run).
    pub fn set_mtu(&self, mtu: u32) -> Result<()> {
        let mtu = mtu.to_string();
        ip(&["link", "set", &self.host_link, "mtu", &mtu])?;
        ip(&["-n", &self.name, "link", "set", &self.ns_link, "mtu", &mtu])
    }

    /// Shapes both directions of the link to `mbit` Mbit/s with a token
    /// bucket (`tc qdisc ... tbf`): a burst of 1 ms at that rate (at least
    /// 64 KiB, so a GSO packet fits) and a queue of 20 ms, so a sender
    /// that outruns the rate waits instead of losing packets.
    pub fn shape(&self, mbit: u64) -> Result<()> {
        let burst = (mbit * 1_000_000 / 8 / 1000).max(64 << 10).to_string();
        let rate = format!("{mbit}mbit");
        let args = |dev: &str| {
            vec![
                "qdisc".to_string(),
                "replace".into(),
                "dev".into(),
                dev.into(),
                "root".into(),
                "tbf".into(),
                "rate".into(),
                rate.clone(),
                "burst".into(),
                burst.clone(),
                "latency".into(),
                "20ms".into(),
            ]
        };
        tc(&args(&self.host_link), None)?;
        tc(&args(&self.ns_link), Some(&self.name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
        // Deleting the namespace deletes its end; the host end goes too.
        let _ = ip(&["link", "del", &self.host_link]);
    }
}
