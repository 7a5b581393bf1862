//! A live progress line for long runs: samples issued and completed, the
//! current completion rate, and time against the run's minimum duration.
//! Drawn on stderr only when it is a terminal (or when forced), so logs
//! and CI output stay clean.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_node::sut::Counters;

/// When to draw the progress line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// When stderr is a terminal and CI is not set.
    Auto,
    /// Always, even into a file.
    Always,
    /// Never.
    Never,
}

impl ProgressMode {
    fn enabled(self) -> bool {
        match self {
            ProgressMode::Always => true,
            ProgressMode::Never => false,
            ProgressMode::Auto => {
                std::io::stderr().is_terminal() && std::env::var_os("CI").is_none()
            }
        }
    }
}

/// The drawing thread; stops and clears its line when dropped.
pub struct ProgressLine {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const WIDTH: usize = 24;

/// One line of progress text.
pub fn render(
    label: &str,
    elapsed: Duration,
    min_duration: Duration,
    issued: u64,
    completed: u64,
    rate: f64,
) -> String {
    let fraction = if min_duration.is_zero() {
        1.0
    } else {
        (elapsed.as_secs_f64() / min_duration.as_secs_f64()).min(1.0)
    };
    let filled = (fraction * WIDTH as f64) as usize;
    format!(
        "{label} [{}{}] {:>5.1}s  issued {issued}  completed {completed}  {rate:.0} samples/s",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        elapsed.as_secs_f64(),
    )
}

impl ProgressLine {
    /// Starts drawing after a short delay (short runs draw nothing).
    pub fn start(
        mode: ProgressMode,
        label: String,
        min_duration: Duration,
        counters: Arc<Counters>,
    ) -> ProgressLine {
        let stop = Arc::new(AtomicBool::new(false));
        if !mode.enabled() {
            return ProgressLine { stop, thread: None };
        }
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                let start = Instant::now();
                let (mut last_at, mut last_done) = (start, 0u64);
                let mut drawn = false;
                while !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    let now = Instant::now();
                    if now - start < Duration::from_secs(1) {
                        continue;
                    }
                    let done = counters.completed.load(Ordering::Relaxed);
                    let rate = (done - last_done.min(done)) as f64
                        / (now - last_at).as_secs_f64().max(1e-9);
                    (last_at, last_done) = (now, done);
                    let line = render(
                        &label,
                        now - start,
                        min_duration,
                        counters.issued.load(Ordering::Relaxed),
                        done,
                        rate,
                    );
                    eprint!("\r{line}\x1b[K");
                    let _ = std::io::stderr().flush();
                    drawn = true;
                }
                if drawn {
                    eprint!("\r\x1b[K");
                }
            })
            .ok();
        ProgressLine { stop, thread }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_counts_rate_and_time_against_the_minimum() {
        let line = render(
            "Server",
            Duration::from_secs(30),
            Duration::from_secs(60),
            1200,
            1100,
            40.4,
        );
        assert_eq!(
            line,
            "Server [############............]  30.0s  issued 1200  completed 1100  40 samples/s"
        );
        let full = render(
            "x",
            Duration::from_secs(90),
            Duration::from_secs(60),
            1,
            1,
            0.0,
        );
        assert!(full.contains(&"#".repeat(WIDTH)));
    }
}
