//! The soak: a long Server run over the fault lab ([`crate::lab`]) with a
//! fault every so many seconds (kill and restart, SIGTERM and restart,
//! stall and continue, partition and heal, slow link and back, in turn, on
//! every node but the first), while the resident memory of the LoadGen
//! node and of every node is sampled each second. It reports each
//! process's memory slope (least squares, after a warm-up): a leak shows
//! as a slope that does not go to zero. Every issued sample must complete
//! exactly once and the run must be VALID.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use crate::configs::{node_toml, UserConf};
use crate::lab::{Fault, Lab, Scheduled};
use crate::network_run::{check_exactly_once, LoadgenRun};
use crate::process::rss_mb;

/// What to soak.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// "grpc" or "quic".
    pub transport: &'static str,
    /// sut-nodes in the lab (at least 2: the first takes no faults).
    pub nodes: usize,
    /// The run's minimum duration.
    pub seconds: u64,
    /// A fault every this many seconds.
    pub every: u64,
    /// Server queries per second.
    pub qps: u64,
    /// Each link's rate, Mbit/s.
    pub rate_mbit: u64,
    /// Faults to inject instead of the generated schedule.
    pub faults: Option<Vec<Scheduled>>,
}

/// One process's memory over the soak.
#[derive(Clone, Debug)]
pub struct MemoryTrend {
    /// "loadgen-node" or the node's name.
    pub process: String,
    /// Samples in the measured stretch (one per second).
    pub samples: usize,
    /// Resident MB at its start and end, and the most.
    pub first_mb: f64,
    pub last_mb: f64,
    pub max_mb: f64,
    /// Least-squares slope, MB per minute.
    pub slope_mb_per_min: f64,
}

/// What the soak found.
pub struct SoakReport {
    pub run: LoadgenRun,
    /// The faults, when they came.
    pub faults: Vec<(Duration, Fault)>,
    pub trends: Vec<MemoryTrend>,
}

/// The fault schedule: every `every` seconds a fault and, a third of the
/// way to the next, its repair; on nodes 1.. in turn.
pub fn schedule(options: &SoakOptions) -> Vec<Scheduled> {
    let mut schedule = Vec::new();
    let every = options.every as f64;
    let targets = options.nodes.saturating_sub(1).max(1);
    let mut k = 1usize;
    while (k as f64) * every + every / 3.0 < options.seconds as f64 {
        let node = 1 + (k - 1) % targets;
        let at = k as f64 * every;
        let (fault, repair) = match (k - 1) % 5 {
            0 => (Fault::Kill(node), Fault::Restart(node)),
            1 => (Fault::Term(node), Fault::Restart(node)),
            2 => (Fault::Stop(node), Fault::Cont(node)),
            3 => (Fault::LinkDown(node), Fault::LinkUp(node)),
            _ => (
                Fault::Rate(node, (options.rate_mbit / 50).max(1)),
                Fault::Rate(node, options.rate_mbit),
            ),
        };
        schedule.push(Scheduled {
            at: Duration::from_secs_f64(at),
            fault,
        });
        schedule.push(Scheduled {
            at: Duration::from_secs_f64(at + every / 3.0),
            fault: repair,
        });
        k += 1;
    }
    schedule
}

/// Each lab node's running process, if it runs.
fn current_pids(lab: &Lab) -> Vec<Option<u32>> {
    lab.nodes
        .iter()
        .map(|n| n.process.as_ref().map(|p| p.child.id()))
        .collect()
}

/// Least-squares slope of `(seconds, MB)` points, in MB per minute.
pub fn slope_per_minute(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_m = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_m)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    if var == 0.0 {
        0.0
    } else {
        cov / var * 60.0
    }
}

/// The trend of one process from its samples, after `warm_up` seconds.
fn trend(process: String, points: &[(f64, f64)], warm_up: f64) -> MemoryTrend {
    let measured: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.0 >= warm_up).collect();
    let measured = if measured.len() >= 2 {
        measured
    } else {
        points.to_vec()
    };
    MemoryTrend {
        process,
        samples: measured.len(),
        first_mb: measured.first().map_or(0.0, |p| p.1),
        last_mb: measured.last().map_or(0.0, |p| p.1),
        max_mb: measured.iter().map(|p| p.1).fold(0.0, f64::max),
        slope_mb_per_min: slope_per_minute(&measured),
    }
}

/// Runs the soak in `dir`.
pub fn soak(options: &SoakOptions, dir: &Path) -> Result<SoakReport> {
    ensure!(options.nodes >= 2, "the soak needs at least 2 nodes");
    let config = crate::write_file(
        dir,
        "sut-node.toml",
        &node_toml(&crate::lab::node_config())?,
    )?;
    let certs = (options.transport == "quic").then(|| dir.join("certs"));
    if let Some(certs) = &certs {
        sut_node::tls::dev_certificates(certs, false)?;
    }
    let mut lab = Lab::create(options.nodes, options.rate_mbit)?;
    lab.start_nodes(
        options.transport,
        certs.as_deref(),
        &["--config", config.to_str().context("utf-8 path")?],
    )?;
    let conf = UserConf::new()
        .set("*.*.min_duration", options.seconds * 1000)
        .set("*.Server.target_qps", options.qps)
        .set("*.Server.target_latency", 6000)
        .set("*.Server.min_query_count", 100)
        .set("*.*.accuracy_log_rng_seed", 1)
        .set("*.*.accuracy_log_sampling_target", 1_000_000_000u64);
    let conf = crate::write_file(dir, "user.conf", &conf.to_string())?;
    let logs = dir.join("logs");
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &lab.loadgen_netns])
        .arg(crate::loadgen_node_bin()?)
        .args(["run", "--log-format", "json", "--scenario", "Server"])
        .args(["--benchmark", "resnet50", "--sample-shape", "3,32,32"])
        .args([
            "--total-sample-count",
            "1024",
            "--performance-sample-count",
            "512",
        ])
        .arg("--user-conf")
        .arg(&conf)
        .args(["--record-issued", "issued.txt", "--node-timeout", "1"])
        .args(["--rejoin-max-backoff", "1", "--no-report"])
        .args(lab.sut_node_flags())
        .arg("--output")
        .arg(&logs)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("loadgen.stdout"))?)
        .stderr(std::fs::File::create(dir.join("loadgen.stderr"))?);
    if let Some(certs) = &certs {
        command
            .arg("--dev-tls")
            .arg(certs)
            .args(["--tls-server-name", "localhost"]);
    }
    let schedule = options.faults.clone().unwrap_or_else(|| schedule(options));
    let start = Instant::now();
    let mut child = command.spawn().context("cannot start loadgen-node")?;
    let loadgen_pid = child.id();
    // Each node's current process, updated as faults restart them.
    let node_pids: Arc<Mutex<Vec<Option<u32>>>> = Arc::new(Mutex::new(current_pids(&lab)));
    let names: Vec<String> = lab.nodes.iter().map(|n| n.name.clone()).collect();
    let stop = AtomicBool::new(false);
    // Per process: (seconds, MB, pid) samples.
    type Samples = Vec<Vec<(f64, f64, u32)>>;
    let (samples, faults, status) = std::thread::scope(|scope| -> Result<_> {
        let sampler = scope.spawn(|| {
            let mut samples: Samples = vec![Vec::new(); names.len() + 1];
            while !stop.load(Ordering::Relaxed) {
                let t = start.elapsed().as_secs_f64();
                if let Some(mb) = rss_mb(loadgen_pid) {
                    samples[0].push((t, mb, loadgen_pid));
                }
                let pids = node_pids.lock().unwrap_or_else(|e| e.into_inner()).clone();
                for (i, pid) in pids.iter().enumerate() {
                    if let Some(mb) = pid.and_then(rss_mb) {
                        samples[i + 1].push((t, mb, pid.unwrap_or(0)));
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            samples
        });
        // A fault that cannot be applied ends the schedule; the run is
        // still waited for, then the error is returned.
        let faults = lab.run_schedule(start, &schedule, |lab, _| {
            *node_pids.lock().unwrap_or_else(|e| e.into_inner()) = current_pids(lab);
            Ok(())
        });
        let deadline = Duration::from_secs(options.seconds * 2 + 120);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if start.elapsed() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("loadgen-node still running after {deadline:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.join().expect("sampler thread");
        Ok((samples, faults?, status))
    })?;
    let run = LoadgenRun {
        logs,
        status,
        stdout: std::fs::read_to_string(dir.join("loadgen.stdout"))?,
        stderr: std::fs::read_to_string(dir.join("loadgen.stderr"))?,
        wall: start.elapsed(),
    };
    run.expect_valid()?;
    check_exactly_once(&run, &dir.join("issued.txt"))?;
    let warm_up = (options.seconds as f64 / 10.0).max(5.0);
    let mut trends = Vec::new();
    for (i, points) in samples.iter().enumerate() {
        let name = if i == 0 {
            "loadgen-node".to_string()
        } else {
            names[i - 1].clone()
        };
        // A restarted node is a new process: its longest life is measured.
        let mut lives: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut last_pid = None;
        for &(t, mb, pid) in points {
            if last_pid != Some(pid) {
                lives.push(Vec::new());
                last_pid = Some(pid);
            }
            if let Some(life) = lives.last_mut() {
                life.push((t, mb));
            }
        }
        let longest = lives.into_iter().max_by_key(Vec::len).unwrap_or_default();
        let warm = longest.first().map_or(0.0, |p| p.0) + warm_up;
        trends.push(trend(name, &longest, warm));
    }
    Ok(SoakReport {
        run,
        faults,
        trends,
    })
}

/// The memory table, as docs/benchmarks.md records it.
pub fn table(trends: &[MemoryTrend]) -> String {
    let mut out = String::from(
        "| process | seconds measured | first MB | last MB | max MB | slope MB/min |\n\
         |---|---|---|---|---|---|\n",
    );
    for t in trends {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:+.3} |",
            t.process, t.samples, t.first_mb, t.last_mb, t.max_mb, t.slope_mb_per_min
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_line_has_no_slope_and_a_rising_one_does() {
        let flat: Vec<(f64, f64)> = (0..60).map(|t| (t as f64, 40.0)).collect();
        assert_eq!(slope_per_minute(&flat), 0.0);
        let rising: Vec<(f64, f64)> = (0..60)
            .map(|t| (t as f64, 40.0 + t as f64 / 60.0))
            .collect();
        assert!((slope_per_minute(&rising) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_schedule_repairs_every_fault_and_spares_the_first_node() {
        let options = SoakOptions {
            transport: "grpc",
            nodes: 3,
            seconds: 600,
            every: 60,
            qps: 300,
            rate_mbit: 1000,
            faults: None,
        };
        let s = schedule(&options);
        assert_eq!(s.len(), 18, "faults at 60..540 s, each with its repair");
        assert!(s.iter().all(|f| f.fault.node() != 0));
        assert_eq!(s[0].fault, Fault::Kill(1));
        assert_eq!(s[1].fault, Fault::Restart(1));
        assert_eq!(s[1].at, Duration::from_secs(80));
    }
}
