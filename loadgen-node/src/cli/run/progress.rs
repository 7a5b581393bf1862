//! Live progress of a run: on a terminal an indicatif bar (time against
//! the run's minimum duration, issued and completed samples, the current
//! rate, samples in flight per node, elapsed and estimated time); when
//! stderr is not a terminal, a plain line every `--progress-interval`
//! through the log (an `event="progress"` record), so journals and CI
//! logs get a readable trace instead of control characters.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loadgen_node::sut::Counters;
use qdl::NetworkObserver;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProgressMode {
    /// A bar when stderr is a terminal (and CI is not set), else lines.
    Auto,
    /// A bar (lines when stderr is not a terminal).
    Bar,
    /// A line every --progress-interval, even on a terminal.
    #[value(alias = "always")]
    Lines,
    /// Nothing.
    Never,
}

/// What is drawn, once the terminal has been looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shown {
    Bar,
    Lines,
}

impl ProgressMode {
    fn shown(self) -> Option<Shown> {
        let terminal = std::io::stderr().is_terminal();
        match self {
            ProgressMode::Never => None,
            ProgressMode::Lines => Some(Shown::Lines),
            ProgressMode::Bar if terminal => Some(Shown::Bar),
            ProgressMode::Auto if terminal && std::env::var_os("CI").is_none() => Some(Shown::Bar),
            _ => Some(Shown::Lines),
        }
    }
}

/// The nodes of a network run, for samples in flight per node.
pub(crate) struct NodeView {
    /// Reads the QDL's counters.
    pub(crate) observer: NetworkObserver,
    /// Each node's name, in node order.
    pub(crate) names: Vec<String>,
}

impl NodeView {
    /// "name 12, name 9": samples in flight per node (failed ones marked).
    fn in_flight(&self) -> String {
        self.observer
            .node_counts()
            .iter()
            .zip(&self.names)
            .map(|(c, name)| {
                let state = if c.failed {
                    format!("{name} down")
                } else {
                    format!("{name} {}", c.outstanding)
                };
                match c.rejoins {
                    0 => state,
                    n => format!("{state} (rejoined {n}x)"),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Shows progress from its own thread; stops (and clears a bar) when
/// dropped.
pub(crate) struct ProgressLine {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Everything one progress update says.
struct Snapshot {
    elapsed: Duration,
    issued: u64,
    completed: u64,
    rate: f64,
    in_flight: Option<String>,
}

/// The counts of one update, as text.
fn counts(s: &Snapshot) -> String {
    let mut text = format!(
        "issued {}  completed {}  {:.0} samples/s",
        s.issued, s.completed, s.rate
    );
    if let Some(nodes) = &s.in_flight {
        text.push_str(&format!("  in flight: {nodes}"));
    }
    text
}

/// One plain progress line.
fn render(label: &str, s: &Snapshot, min_duration: Duration) -> String {
    format!(
        "{label} {:.1}s of at least {:.1}s  {}",
        s.elapsed.as_secs_f64(),
        min_duration.as_secs_f64(),
        counts(s)
    )
}

fn bar(label: &str, min_duration: Duration) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(min_duration.as_millis().max(1) as u64),
        ProgressDrawTarget::stderr_with_hz(4),
    );
    let style = ProgressStyle::with_template(
        "{prefix} [{bar:24}] {elapsed_precise} (min duration {len_s}, ~{eta} left)  {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .with_key(
        "len_s",
        |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0}s", state.len().unwrap_or(0) as f64 / 1000.0);
        },
    )
    .progress_chars("#>.");
    bar.set_style(style);
    bar.set_prefix(label.to_string());
    bar
}

impl ProgressLine {
    /// Starts showing progress (a bar after a short delay, so short runs
    /// draw nothing; lines every `interval`).
    pub(crate) fn start(
        mode: ProgressMode,
        interval: Duration,
        label: String,
        min_duration: Duration,
        counters: Arc<Counters>,
        nodes: Option<NodeView>,
    ) -> ProgressLine {
        let stop = Arc::new(AtomicBool::new(false));
        let Some(shown) = mode.shown() else {
            return ProgressLine { stop, thread: None };
        };
        let stopping = stop.clone();
        let every = match shown {
            Shown::Bar => Duration::from_millis(250),
            Shown::Lines => interval.max(Duration::from_millis(100)),
        };
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                let start = Instant::now();
                let (mut last_at, mut last_done) = (start, 0u64);
                let mut drawn: Option<ProgressBar> = None;
                let mut next = start + every;
                while !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    let now = Instant::now();
                    if now < next || (shown == Shown::Bar && now - start < Duration::from_secs(1)) {
                        continue;
                    }
                    next = now + every;
                    let completed = counters.completed.load(Ordering::Relaxed);
                    let snapshot = Snapshot {
                        elapsed: now - start,
                        issued: counters.issued.load(Ordering::Relaxed),
                        completed,
                        rate: (completed - last_done.min(completed)) as f64
                            / (now - last_at).as_secs_f64().max(1e-9),
                        in_flight: nodes.as_ref().map(NodeView::in_flight),
                    };
                    (last_at, last_done) = (now, completed);
                    match shown {
                        Shown::Bar => {
                            let bar = drawn.get_or_insert_with(|| bar(&label, min_duration));
                            bar.set_position(
                                (snapshot.elapsed.as_millis() as u64)
                                    .min(bar.length().unwrap_or(0)),
                            );
                            bar.set_message(counts(&snapshot));
                        }
                        Shown::Lines => tracing::info!(
                            event = "progress",
                            elapsed_s = snapshot.elapsed.as_secs_f64(),
                            issued = snapshot.issued,
                            completed = snapshot.completed,
                            rate = snapshot.rate,
                            "{}",
                            render(&label, &snapshot, min_duration)
                        ),
                    }
                }
                if let Some(bar) = drawn {
                    bar.finish_and_clear();
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
    fn line_shows_counts_rate_nodes_and_time_against_the_minimum() {
        let snapshot = Snapshot {
            elapsed: Duration::from_secs(30),
            issued: 1200,
            completed: 1100,
            rate: 40.4,
            in_flight: Some("a 60, b failed".into()),
        };
        assert_eq!(
            render("Server", &snapshot, Duration::from_secs(60)),
            "Server 30.0s of at least 60.0s  issued 1200  completed 1100  40 samples/s  \
             in flight: a 60, b failed"
        );
    }

    #[test]
    fn lines_when_asked_or_when_stderr_is_no_terminal() {
        assert_eq!(ProgressMode::Never.shown(), None);
        assert_eq!(ProgressMode::Lines.shown(), Some(Shown::Lines));
        // Tests run with stderr captured: not a terminal.
        if !std::io::stderr().is_terminal() {
            assert_eq!(ProgressMode::Bar.shown(), Some(Shown::Lines));
            assert_eq!(ProgressMode::Auto.shown(), Some(Shown::Lines));
        }
    }
}
