//! One way to run a child process with a deadline: [`run_with_deadline`]
//! spawns a command, waits for it at most a given time, kills it if it is
//! still running then, and reports its exit status, wall time and peak
//! resident set size.
//!
//! Linux only (`waitid`, `wait4`, `ru_maxrss` in KiB).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How a process run by [`run_with_deadline`] ended.
#[derive(Clone, Copy, Debug)]
pub struct Exited {
    /// Its exit status (killed by `SIGKILL` when it timed out).
    pub status: ExitStatus,
    /// From just before the spawn to its exit (not to the end of our wait).
    pub wall: Duration,
    /// Its peak resident set size, in bytes (`ru_maxrss`).
    pub max_rss_bytes: u64,
    /// CPU time it used, user and system (`ru_utime` + `ru_stime`).
    pub cpu: Duration,
    /// Whether it was still running at the deadline and was killed.
    pub timed_out: bool,
}

/// The resident memory of running process `pid` now, in MB (`VmRSS` of
/// `/proc/PID/status`); `None` once it is gone.
pub fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Spawns `command`, waits at most `deadline` for it to exit and kills it
/// (`SIGKILL`) if it is still running then.
///
/// The caller sets up the command's stdio: files, or null. Nothing reads
/// a pipe while this waits, so a child writing to a piped stdout or
/// stderr could fill the pipe and block until the deadline.
///
/// The child is first waited for without being reaped (`waitid` with
/// `WNOWAIT`), then reaped with `wait4` (which gives its resource usage)
/// under the lock a watchdog thread takes before killing it, so the
/// watchdog can never signal a recycled pid.
pub fn run_with_deadline(command: &mut Command, deadline: Duration) -> Result<Exited> {
    let started = Instant::now();
    let child = command
        .spawn()
        .with_context(|| format!("cannot start {}", command.get_program().to_string_lossy()))?;
    let pid = child.id() as libc::pid_t;
    // (reaped, timed_out)
    let state = Arc::new((Mutex::new((false, false)), Condvar::new()));
    let watchdog = {
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let deadline = started + deadline;
            let (lock, wake) = &*state;
            let mut guard = lock.lock().unwrap();
            loop {
                if guard.0 {
                    return;
                }
                let now = Instant::now();
                if now >= deadline {
                    guard.1 = true;
                    // SAFETY: plain syscall; the pid is not reaped yet (guard.0
                    // is false and reaping happens under this lock).
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return;
                }
                guard = wake.wait_timeout(guard, deadline - now).unwrap().0;
            }
        })
    };

    // Wait until the child has exited, leaving it a zombie.
    loop {
        // SAFETY: siginfo_t is plain data; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err).with_context(|| format!("waitid on process {pid}"));
        }
    }
    let wall = started.elapsed();
    let (lock, wake) = &*state;
    let mut guard = lock.lock().unwrap();
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; wait4 fills it in.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut rusage) };
        if rc == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err).with_context(|| format!("wait4 on process {pid}"));
        }
    }
    guard.0 = true;
    let timed_out = guard.1;
    drop(guard);
    wake.notify_all();
    let _ = watchdog.join();
    drop(child); // already reaped; dropping a Child does not wait
    Ok(Exited {
        status: ExitStatus::from_raw(status),
        wall,
        max_rss_bytes: (rusage.ru_maxrss.max(0) as u64) * 1024,
        cpu: cpu_time(&rusage.ru_utime) + cpu_time(&rusage.ru_stime),
        timed_out,
    })
}

fn cpu_time(t: &libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

/// Whether `name` is a variable the test harness (cargo, nextest) sets for
/// a test process, not one a person's shell has.
fn set_by_the_harness(name: &str) -> bool {
    let cargo_kept = ["CARGO_HOME", "CARGO_TARGET_DIR"];
    name == "CARGO"
        || (name.starts_with("CARGO_") && !cargo_kept.contains(&name))
        || name.starts_with("NEXTEST")
}

/// `command` as a person runs it from a shell: without the variables the
/// test harness sets. A cargo build under them is not the build the
/// workspace had: ring's build script reruns when `CARGO_MANIFEST_DIR`
/// changes, and every crate above ring with it (three minutes of a CI run
/// for a build that has nothing to do).
pub fn as_from_a_shell(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_the_harness) {
            command.env_remove(&name);
        }
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    #[test]
    fn an_exit_is_reported_with_its_code_and_usage() {
        let exited = run_with_deadline(&mut sh("exit 3"), Duration::from_secs(30)).unwrap();
        assert_eq!(exited.status.code(), Some(3));
        assert!(!exited.timed_out);
        assert!(exited.max_rss_bytes > 0, "{exited:?}");
        assert!(exited.wall < Duration::from_secs(30), "{exited:?}");
    }

    #[test]
    fn a_process_past_its_deadline_is_killed() {
        let exited = run_with_deadline(&mut sh("sleep 30"), Duration::from_millis(200)).unwrap();
        assert!(exited.timed_out, "{exited:?}");
        assert_eq!(exited.status.signal(), Some(libc::SIGKILL));
        assert!(exited.wall < Duration::from_secs(20), "{exited:?}");
    }

    #[test]
    fn a_program_that_does_not_exist_is_an_error() {
        let err = run_with_deadline(
            &mut Command::new("/nonexistent/netdiv-program"),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot start /nonexistent/netdiv-program"),
            "{err}"
        );
    }
}
