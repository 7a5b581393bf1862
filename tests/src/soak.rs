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
    /// Server queries per second the run issued (one sample each).
    pub qps: u64,
}

/// How much memory may grow before the soak calls it a leak.
#[derive(Clone, Copy, Debug)]
pub struct MemoryBounds {
    /// Each sut-node's slope over its longest life, MB per minute.
    pub node_mb_per_min: f64,
    /// A node life shorter than this many seconds (after the warm-up) is
    /// too short for its slope to mean anything and is not judged; at
    /// least one life must be this long.
    pub min_life_s: usize,
    /// The LoadGen node's growth per sample issued over the measured
    /// stretch, in bytes (it keeps a record of every sample).
    pub loadgen_bytes_per_sample: f64,
}

impl MemoryBounds {
    /// The 600 s soak's bounds, several times what it measured
    /// (docs/benchmarks.md, "The nodes are flat": nodes +0.05 MB/min at
    /// most, the LoadGen node 74 B per sample).
    pub const LONG: MemoryBounds = MemoryBounds {
        node_mb_per_min: 0.5,
        min_life_s: 60,
        loadgen_bytes_per_sample: 200.0,
    };

    /// The 40 s soak's bounds (`lab_soak_short`), about four times the
    /// most four short runs measured (docs/benchmarks.md): nodes up to
    /// +0.54 MB/min over lives of 27 s or more (a 16 s life read up to
    /// +0.96, noise of a few pages, so it is not judged), the LoadGen node
    /// 86 to 95 B per sample.
    pub const SHORT: MemoryBounds = MemoryBounds {
        node_mb_per_min: 2.0,
        min_life_s: 20,
        loadgen_bytes_per_sample: 400.0,
    };

    /// The bounds for a soak of `seconds`: the long ones from 5 minutes on.
    pub fn for_seconds(seconds: u64) -> MemoryBounds {
        if seconds >= 300 {
            MemoryBounds::LONG
        } else {
            MemoryBounds::SHORT
        }
    }
}

/// The LoadGen node's growth per issued sample over its measured stretch,
/// in bytes: a Server run issues `qps` samples a second.
pub fn loadgen_bytes_per_sample(trend: &MemoryTrend, qps: u64) -> f64 {
    let samples = (trend.samples.saturating_sub(1) as f64) * qps as f64;
    if samples == 0.0 {
        return 0.0;
    }
    (trend.last_mb - trend.first_mb) * 1e6 / samples
}

/// Fails, naming the process, its figure and the bound, when any process
/// grew past `bounds`; the first trend is the LoadGen node's.
pub fn check_memory(trends: &[MemoryTrend], qps: u64, bounds: MemoryBounds) -> Result<()> {
    let judged_nodes = trends
        .iter()
        .skip(1)
        .filter(|t| t.samples >= bounds.min_life_s)
        .count();
    if trends.len() > 1 && judged_nodes == 0 {
        bail!(
            "no node lived {} s after its warm-up: the soak measured nothing to judge",
            bounds.min_life_s
        );
    }
    let mut leaks = Vec::new();
    for (i, t) in trends.iter().enumerate() {
        if i > 0 && t.samples < bounds.min_life_s {
            continue;
        }
        if i == 0 {
            let per_sample = loadgen_bytes_per_sample(t, qps);
            if per_sample > bounds.loadgen_bytes_per_sample {
                leaks.push(format!(
                    "{} grew {per_sample:.0} B per issued sample ({:.1} -> {:.1} MB over {} s at \
                     {qps} samples/s); the bound is {:.0} B",
                    t.process, t.first_mb, t.last_mb, t.samples, bounds.loadgen_bytes_per_sample
                ));
            }
        } else if t.slope_mb_per_min > bounds.node_mb_per_min {
            leaks.push(format!(
                "{} grew {:+.3} MB/min over its longest life ({} s, {:.1} -> {:.1} MB); the \
                 bound is {:+.3} MB/min",
                t.process,
                t.slope_mb_per_min,
                t.samples,
                t.first_mb,
                t.last_mb,
                bounds.node_mb_per_min
            ));
        }
    }
    if !leaks.is_empty() {
        bail!(
            "memory grew past the soak's bounds (a leak?):\n  {}",
            leaks.join("\n  ")
        );
    }
    Ok(())
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
        cpu: None,
        max_rss_bytes: None,
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
        qps: options.qps,
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

    fn trend(process: &str, seconds: usize, first_mb: f64, last_mb: f64) -> MemoryTrend {
        MemoryTrend {
            process: process.into(),
            samples: seconds,
            first_mb,
            last_mb,
            max_mb: last_mb.max(first_mb),
            slope_mb_per_min: (last_mb - first_mb) / seconds as f64 * 60.0,
        }
    }

    #[test]
    fn memory_past_a_bound_is_a_leak_named_with_its_figure() {
        let bounds = MemoryBounds::LONG;
        // 600 s at 300 samples/s, 74 B each: 13.3 MB; flat nodes.
        let flat = [
            trend("loadgen-node", 601, 40.0, 53.3),
            trend("lab-node-0", 600, 8.1, 8.1),
        ];
        check_memory(&flat, 300, bounds).unwrap();
        // 1 KB per sample in the LoadGen node.
        let loadgen_leak = [trend("loadgen-node", 601, 40.0, 220.0)];
        let err = check_memory(&loadgen_leak, 300, bounds)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("loadgen-node grew 1000 B per issued sample"),
            "{err}"
        );
        assert!(err.contains("the bound is 200 B"), "{err}");
        // A node growing 1 MB a minute.
        let node_leak = [
            trend("loadgen-node", 601, 40.0, 53.3),
            trend("lab-node-1", 120, 8.0, 10.0),
        ];
        let err = check_memory(&node_leak, 300, bounds)
            .unwrap_err()
            .to_string();
        assert!(err.contains("lab-node-1 grew +1.000 MB/min"), "{err}");
        // A life too short to judge is left out, but not every life.
        let short_lives = [
            trend("loadgen-node", 601, 40.0, 53.3),
            trend("lab-node-0", 600, 8.0, 8.0),
            trend("lab-node-1", 30, 8.0, 10.0),
        ];
        check_memory(&short_lives, 300, bounds).unwrap();
        let err = check_memory(
            &short_lives[..1]
                .iter()
                .chain(&short_lives[2..])
                .cloned()
                .collect::<Vec<_>>(),
            300,
            bounds,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("no node lived 60 s"), "{err}");
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
