//! `fuzz`: runs netdiv's fuzz targets on stable Rust (see
//! `docs/fuzzing.md`).
//!
//! ```text
//! fuzz list
//! fuzz run TARGET [--execs N] [--seconds S] [--seed U64] [--corpus DIR] [--crashes DIR]
//! fuzz replay TARGET DIR|FILE...
//! ```
//!
//! Exit status: 0 when nothing crashed, 1 on a crash (the input is saved
//! in the crash folder and named), 2 on a usage or I/O error, 3 on a hang.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use netdiv_tests::fuzz::{self, Options, Target, MAX_INPUT_BYTES, TARGETS};
use netdiv_tests::workspace_root;

#[derive(Debug, Parser)]
#[command(
    name = "fuzz",
    about = "Fuzz netdiv's decoders and parsers on stable Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Lists the targets and what each covers.
    List,
    /// Fuzzes one target until --execs or --seconds (the first reached),
    /// or the first crash.
    Run {
        /// The target (see `fuzz list`).
        target: String,
        /// Executions to run, seeds included [default: 1000000 unless
        /// --seconds is given].
        #[arg(long, value_name = "N")]
        execs: Option<u64>,
        /// Seconds to run.
        #[arg(long, value_name = "S")]
        seconds: Option<f64>,
        /// Random seed: the same seed, corpus and build repeat a run.
        #[arg(long, value_name = "U64", default_value_t = 0)]
        seed: u64,
        /// Extra starting inputs, and where the corpus is saved at the end.
        #[arg(long, value_name = "DIR")]
        corpus: Option<PathBuf>,
        /// Where a crashing input is saved [default:
        /// target/fuzz-crashes/TARGET in the workspace].
        #[arg(long, value_name = "DIR")]
        crashes: Option<PathBuf>,
        /// Largest input, in bytes.
        #[arg(long, value_name = "BYTES", default_value_t = MAX_INPUT_BYTES)]
        max_len: usize,
        /// One execution longer than this many seconds is a hang.
        #[arg(long, value_name = "S", default_value_t = 10.0)]
        timeout: f64,
        /// Seconds between progress lines.
        #[arg(long, value_name = "S", default_value_t = 5.0)]
        report_every: f64,
        /// Go past crashes whose message or backtrace contains TEXT (a
        /// bug already reported): they are counted and the first is saved.
        #[arg(long, value_name = "TEXT")]
        ignore_crash: Vec<String>,
    },
    /// Runs a target on saved inputs: a file, or every file of a folder.
    Replay {
        /// The target (see `fuzz list`).
        target: String,
        /// Files or folders of inputs.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List => {
            for t in TARGETS {
                println!("{:<16} {}", t.name, t.about);
            }
            ExitCode::SUCCESS
        }
        Command::Run {
            target,
            execs,
            seconds,
            seed,
            corpus,
            crashes,
            max_len,
            timeout,
            report_every,
            ignore_crash,
        } => {
            let Some(t) = find(&target) else {
                return ExitCode::from(2);
            };
            let duration = seconds.map(seconds_arg);
            let (Some(timeout), Some(report_every)) =
                (seconds_arg(timeout), seconds_arg(report_every))
            else {
                eprintln!("fuzz: --timeout and --report-every take seconds above 0");
                return ExitCode::from(2);
            };
            if duration == Some(None) {
                eprintln!("fuzz: --seconds takes seconds above 0");
                return ExitCode::from(2);
            }
            let options =
                Options {
                    execs: execs.or(if seconds.is_some() {
                        None
                    } else {
                        Some(1_000_000)
                    }),
                    duration: duration.flatten(),
                    seed,
                    corpus_dir: corpus,
                    crashes_dir: Some(crashes.unwrap_or_else(|| {
                        workspace_root().join("target/fuzz-crashes").join(t.name)
                    })),
                    max_len,
                    report_every: Some(report_every),
                    hang_timeout: Some(timeout),
                    ignore: ignore_crash,
                };
            run(t, &options)
        }
        Command::Replay { target, paths } => {
            let Some(t) = find(&target) else {
                return ExitCode::from(2);
            };
            replay(t, &paths)
        }
    }
}

/// Seconds given on the command line, if a usable duration.
fn seconds_arg(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0 && s < 1e9).then(|| Duration::from_secs_f64(s))
}

fn find(name: &str) -> Option<&'static Target> {
    let t = fuzz::target(name);
    if t.is_none() {
        eprintln!(
            "fuzz: no target {name:?} (targets: {})",
            fuzz::target_names()
        );
    }
    t
}

fn run(t: &Target, options: &Options) -> ExitCode {
    eprintln!(
        "{}: fuzzing, seed {}, {}",
        t.name,
        options.seed,
        match (options.execs, options.duration) {
            (Some(n), Some(d)) => format!("{n} execs or {} s", d.as_secs_f64()),
            (Some(n), None) => format!("{n} execs"),
            (None, Some(d)) => format!("{} s", d.as_secs_f64()),
            (None, None) => "until a crash".into(),
        }
    );
    let summary = match fuzz::fuzz(t, options, &mut |line| eprintln!("{line}")) {
        Ok(summary) => summary,
        Err(e) => {
            eprintln!("fuzz: {}: {e}", t.name);
            return ExitCode::from(2);
        }
    };
    println!("{}", summary.line());
    if let Some(dir) = &options.corpus_dir {
        println!(
            "{}: corpus saved in {} ({} seeds, {} loaded)",
            t.name,
            dir.display(),
            summary.seeds,
            summary.loaded
        );
    }
    if let Some(known) = &summary.first_ignored {
        println!(
            "{}: {} known crashes gone past (--ignore-crash); the first saved as {}",
            t.name,
            summary.ignored,
            known
                .file
                .as_deref()
                .map_or("(not saved)".into(), |f| f.display().to_string())
        );
    }
    match &summary.crash {
        None => {
            println!("{}: 0 crashes", t.name);
            ExitCode::SUCCESS
        }
        Some(crash) => {
            eprintln!(
                "{}: CRASH after {} execs ({} bytes of input):\n{}",
                t.name,
                summary.execs,
                crash.input.len(),
                crash.message
            );
            match &crash.file {
                Some(file) => eprintln!("{}: input saved as {}", t.name, file.display()),
                None => eprintln!("{}: input not saved", t.name),
            }
            ExitCode::from(1)
        }
    }
}

fn replay(t: &Target, paths: &[PathBuf]) -> ExitCode {
    let (mut ran, mut crashed) = (0, 0);
    for path in paths {
        let outcomes = match fuzz::replay(t, path) {
            Ok(outcomes) => outcomes,
            Err(e) => {
                eprintln!("fuzz: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        for (file, outcome) in outcomes {
            ran += 1;
            if let Err(message) = outcome {
                crashed += 1;
                eprintln!("{}: CRASH: {}\n{message}", t.name, file.display());
            }
        }
    }
    println!("{}: replayed {ran} inputs, {crashed} crashed", t.name);
    if crashed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
