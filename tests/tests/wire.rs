//! Smoke runs of the wire-speed benchmarks, so they keep working between
//! the full runs recorded in docs/benchmarks.md.

use std::process::Command;

use anyhow::{ensure, Result};
use netdiv_tests::netns;
use netdiv_tests::prerequisites::skip_unless_ci;

/// `link-rate --quick`: a sut-node in its own namespace behind a veth
/// shaped to 1 Gbit/s; both transports must deliver at least 80 % of the
/// rate in sample bytes, and no more than the link can carry (the shaping
/// is real).
#[test]
fn link_rate_smoke_fills_a_shaped_gigabit_link() -> Result<()> {
    if !netns::available() {
        return skip_unless_ci("root, `ip netns` and `tc` (a shaped veth link)");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_link-rate"))
        .arg("--quick")
        .env("NETDIV_LOADGEN_NODE", netdiv_tests::loadgen_node_bin()?)
        .env("NETDIV_SUT_NODE", netdiv_tests::sut_node_bin()?)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "link-rate --quick failed:\n{stdout}\n{stderr}"
    );
    for transport in ["grpc", "quic"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| 1000 | {transport} | none |")))
            .ok_or_else(|| anyhow::anyhow!("no {transport} row in:\n{stdout}"))?;
        let goodput: f64 = row.split('|').nth(4).unwrap_or("").trim().parse()?;
        ensure!(
            (800.0..=1000.0 * 1.02).contains(&goodput),
            "{transport}: {goodput} Mbit/s of samples over a 1000 Mbit/s link:\n{stdout}"
        );
    }
    Ok(())
}
