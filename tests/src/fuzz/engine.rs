//! The fuzzing loop: start from a target's seeds (and a corpus folder),
//! mutate inputs picked from the corpus, run each under `catch_unwind`,
//! keep those that reach something new, stop at the first crash. Also
//! replaying saved inputs, which is how crashes become regression tests.
//!
//! A panic is a crash; the panic hook stays quiet while a target runs so
//! that expected output is not drowned, and the crash report carries the
//! message and a backtrace instead. An execution that takes longer than a
//! timeout is a hang: a watchdog thread saves the input and ends the
//! process (nothing can stop a running function from outside).

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::hash::{Hash, Hasher};
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::mutate::Mutator;
use super::{Target, Trace, MAX_INPUT_BYTES};

/// Inputs the in-memory corpus holds at most; past that, a new input
/// replaces a random one, so a long run's memory stays bounded.
const MAX_CORPUS: usize = 20_000;

/// How one run goes.
#[derive(Clone, Debug)]
pub struct Options {
    /// Stop after this many executions.
    pub execs: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The random seed: the same seed, corpus and build repeat a run.
    pub seed: u64,
    /// Inputs to start from besides the seeds; the corpus is saved back
    /// there at the end.
    pub corpus_dir: Option<PathBuf>,
    /// Where a crashing input is written (created when needed).
    pub crashes_dir: Option<PathBuf>,
    /// Largest input built or loaded.
    pub max_len: usize,
    /// How often to report progress; never when `None`.
    pub report_every: Option<Duration>,
    /// An execution longer than this is a hang: the process saves the
    /// input and exits with status 3. No watchdog when `None`.
    pub hang_timeout: Option<Duration>,
    /// Known crashes to go past: a panic whose message and backtrace
    /// contain one of these is counted, its first input saved, and the run
    /// goes on (a bug already reported must not stop a campaign of the
    /// rest of the target).
    pub ignore: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            execs: Some(100_000),
            duration: None,
            seed: 0,
            corpus_dir: None,
            crashes_dir: None,
            max_len: MAX_INPUT_BYTES,
            report_every: None,
            hang_timeout: None,
            ignore: Vec::new(),
        }
    }
}

/// A panicking input.
#[derive(Clone, Debug)]
pub struct Crash {
    /// The input.
    pub input: Vec<u8>,
    /// The panic's message, location and backtrace.
    pub message: String,
    /// Where the input was saved, if a crash folder was given.
    pub file: Option<PathBuf>,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The target's name.
    pub target: &'static str,
    /// Executions, seeds included.
    pub execs: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Built-in seeds run.
    pub seeds: usize,
    /// Inputs loaded from the corpus folder.
    pub loaded: usize,
    /// Inputs in the corpus at the end (seeds and loaded ones included).
    pub corpus: usize,
    /// Their total size in bytes.
    pub corpus_bytes: usize,
    /// Distinct features seen.
    pub features: usize,
    /// The first crash, which ends the run.
    pub crash: Option<Crash>,
    /// Crashes matching [`Options::ignore`], which did not end it.
    pub ignored: u64,
    /// The first of those.
    pub first_ignored: Option<Crash>,
}

impl Summary {
    /// Executions per second.
    pub fn rate(&self) -> f64 {
        self.execs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// One line: executions, rate, corpus.
    pub fn line(&self) -> String {
        format!(
            "{}: {} execs in {:.1} s ({:.0} execs/s), corpus {} inputs ({} bytes), {} features",
            self.target,
            self.execs,
            self.elapsed.as_secs_f64(),
            self.rate(),
            self.corpus,
            self.corpus_bytes,
            self.features
        )
    }
}

thread_local! {
    /// Set while a target runs on this thread: its panics are captured,
    /// not printed.
    static QUIET: Cell<bool> = const { Cell::new(false) };
    /// The last captured panic of this thread.
    static CAPTURED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs, once per process, a panic hook that captures the panics of
/// threads running a target and passes every other panic to the hook
/// that was there before (tests in the same process still report theirs).
fn install_panic_hook() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) {
                let backtrace = std::backtrace::Backtrace::force_capture();
                let message = format!("{info}\n{backtrace}");
                CAPTURED.with(|c| *c.borrow_mut() = Some(message));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `target` on `input` with its panics captured: `Err` carries the
/// panic's message.
fn execute(target: &Target, input: &[u8], trace: &mut Trace) -> Result<(), String> {
    trace.clear();
    QUIET.with(|q| q.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(|| (target.traced)(input, trace)));
    QUIET.with(|q| q.set(false));
    result.map_err(|payload| {
        CAPTURED
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| panic_text(payload.as_ref()))
    })
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".into()
    }
}

/// The file name an input is saved under: a hash of its bytes, so the
/// same input is one file however often it is saved.
pub fn input_name(input: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    input.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Reads every regular file of `dir` (not `README*` nor dot files),
/// sorted by name; a missing folder holds nothing.
pub fn read_inputs(dir: &Path) -> io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.starts_with("README") || !entry.file_type()?.is_file() {
            continue;
        }
        paths.push(entry.path());
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| fs::read(&p).map(|bytes| (p, bytes)))
        .collect()
}

/// Saves `input` in `dir` under [`input_name`], with `prefix`.
fn save(dir: &Path, prefix: &str, input: &[u8]) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let path = dir.join(format!("{prefix}{}", input_name(input)));
    fs::write(&path, input)?;
    Ok(path)
}

/// The watchdog of one run: the input running now and a count of
/// executions it checks for progress.
struct Watchdog {
    current: Arc<Mutex<Vec<u8>>>,
    execs: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(target: &'static str, timeout: Duration, crashes_dir: Option<PathBuf>) -> Watchdog {
        let dog = Watchdog {
            current: Arc::new(Mutex::new(Vec::new())),
            execs: Arc::new(AtomicU64::new(0)),
            done: Arc::new(AtomicBool::new(false)),
        };
        let (current, execs, done) = (dog.current.clone(), dog.execs.clone(), dog.done.clone());
        std::thread::spawn(move || {
            let mut seen = execs.load(Ordering::Acquire);
            let mut since = Instant::now();
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(200));
                let now = execs.load(Ordering::Acquire);
                if now != seen {
                    (seen, since) = (now, Instant::now());
                    continue;
                }
                if since.elapsed() < timeout {
                    continue;
                }
                // The fuzzing thread is stuck inside the target, so the
                // input it last stored is the one running.
                let input = current.lock().map(|i| i.clone()).unwrap_or_default();
                let saved = crashes_dir.as_deref().map(|dir| save(dir, "hang-", &input));
                eprintln!(
                    "{target}: HANG: one execution ran over {} s ({} bytes of input); {}",
                    timeout.as_secs_f64(),
                    input.len(),
                    match saved {
                        Some(Ok(path)) => format!("saved as {}", path.display()),
                        Some(Err(e)) => format!("could not save it: {e}"),
                        None => "not saved (no crash folder)".into(),
                    }
                );
                std::process::exit(3);
            }
        });
        dog
    }

    /// Records the input about to run.
    fn running(&self, input: &[u8]) {
        if let Ok(mut current) = self.current.lock() {
            current.clear();
            current.extend_from_slice(input);
        }
        self.execs.fetch_add(1, Ordering::Release);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
    }
}

/// Error texts of one site counted as new features at most: past that, a
/// site's texts are taken to quote the input rather than name new checks.
const MAX_TEXTS_PER_SITE: usize = 128;

/// The corpus of one run and the features it has shown.
struct Corpus {
    inputs: Vec<Vec<u8>>,
    features: HashSet<u64>,
    error_texts: HashMap<u64, HashSet<u64>>,
}

impl Corpus {
    /// Features seen, error texts included.
    fn feature_count(&self) -> usize {
        self.features.len() + self.error_texts.values().map(HashSet::len).sum::<usize>()
    }

    /// Keeps `input` if its trace shows a new feature (or `always`).
    fn offer(&mut self, input: &[u8], trace: &Trace, always: bool, mutator: &mut Mutator) -> bool {
        let mut new = always;
        for &f in trace.features() {
            new |= self.features.insert(f);
        }
        for &(site, text) in trace.errors() {
            let texts = self.error_texts.entry(site).or_default();
            if texts.len() < MAX_TEXTS_PER_SITE {
                new |= texts.insert(text);
            }
        }
        if !new {
            return false;
        }
        if self.inputs.len() < MAX_CORPUS {
            self.inputs.push(input.to_vec());
        } else {
            let victim = mutator.rng.below(self.inputs.len());
            self.inputs[victim] = input.to_vec();
        }
        true
    }
}

/// Fuzzes `target` until `options` says stop or an input panics; `log`
/// gets the progress lines. The corpus folder, if any, is written back at
/// the end, crash or not.
pub fn fuzz(target: &Target, options: &Options, log: &mut dyn FnMut(&str)) -> io::Result<Summary> {
    install_panic_hook();
    let start = Instant::now();
    let max_len = options.max_len.clamp(1, MAX_INPUT_BYTES);
    let mut mutator = Mutator::new(options.seed, (target.dictionary)(), max_len);
    let watchdog = options
        .hang_timeout
        .map(|t| Watchdog::start(target.name, t, options.crashes_dir.clone()));
    let mut trace = Trace::recording();
    let mut corpus = Corpus {
        inputs: Vec::new(),
        features: HashSet::new(),
        error_texts: HashMap::new(),
    };
    let seeds = (target.seeds)();
    let loaded = match &options.corpus_dir {
        Some(dir) => read_inputs(dir)?,
        None => Vec::new(),
    };
    let mut summary = Summary {
        target: target.name,
        execs: 0,
        elapsed: Duration::ZERO,
        seeds: seeds.len(),
        loaded: loaded.len(),
        corpus: 0,
        corpus_bytes: 0,
        features: 0,
        crash: None,
        ignored: 0,
        first_ignored: None,
    };
    let crash = |input: &[u8], message: String| -> io::Result<Crash> {
        let file = match &options.crashes_dir {
            Some(dir) => Some(save(dir, "crash-", input)?),
            None => None,
        };
        Ok(Crash {
            input: input.to_vec(),
            message,
            file,
        })
    };
    // Every seed and loaded input runs first and stays in the corpus, so
    // a saved corpus only grows.
    let initial = seeds
        .into_iter()
        .chain(loaded.into_iter().map(|(_, bytes)| bytes))
        .map(|mut input| {
            input.truncate(max_len);
            input
        });
    for input in initial {
        if let Some(w) = &watchdog {
            w.running(&input);
        }
        summary.execs += 1;
        match execute(target, &input, &mut trace) {
            Ok(()) => {
                corpus.offer(&input, &trace, true, &mut mutator);
            }
            Err(message) if ignored(options, &message) => {
                summary.ignored += 1;
                if summary.first_ignored.is_none() {
                    summary.first_ignored = Some(crash(&input, message)?);
                }
            }
            Err(message) => {
                summary.crash = Some(crash(&input, message)?);
                break;
            }
        }
    }
    if corpus.inputs.is_empty() {
        corpus.inputs.push(Vec::new());
    }
    let deadline = options.duration.map(|d| start + d);
    let mut next_report = options.report_every.map(|every| start + every);
    let mut input = Vec::with_capacity(max_len.min(1 << 16));
    while summary.crash.is_none() {
        if options.execs.is_some_and(|n| summary.execs >= n) {
            break;
        }
        // The clock is read every 256 executions: cheap, and often enough.
        if summary.execs.is_multiple_of(256) {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            if let (Some(at), Some(every)) = (next_report, options.report_every) {
                if now >= at {
                    summary.elapsed = now - start;
                    summary.corpus = corpus.inputs.len();
                    summary.features = corpus.feature_count();
                    log(&progress(&summary));
                    next_report = Some(now + every);
                }
            }
        }
        let parent = mutator.rng.below(corpus.inputs.len());
        let other = mutator.rng.below(corpus.inputs.len());
        input.clear();
        input.extend_from_slice(&corpus.inputs[parent]);
        mutator.mutate(&mut input, &corpus.inputs[other]);
        if let Some(w) = &watchdog {
            w.running(&input);
        }
        summary.execs += 1;
        match execute(target, &input, &mut trace) {
            Ok(()) => {
                corpus.offer(&input, &trace, false, &mut mutator);
            }
            Err(message) if ignored(options, &message) => {
                summary.ignored += 1;
                if summary.first_ignored.is_none() {
                    summary.first_ignored = Some(crash(&input, message)?);
                }
            }
            Err(message) => summary.crash = Some(crash(&input, message)?),
        }
    }
    drop(watchdog);
    summary.elapsed = start.elapsed();
    summary.corpus = corpus.inputs.len();
    summary.corpus_bytes = corpus.inputs.iter().map(Vec::len).sum();
    summary.features = corpus.feature_count();
    if let Some(dir) = &options.corpus_dir {
        for input in &corpus.inputs {
            save(dir, "", input)?;
        }
    }
    Ok(summary)
}

/// Whether a crash is one the run goes past.
fn ignored(options: &Options, message: &str) -> bool {
    options
        .ignore
        .iter()
        .any(|known| message.contains(known.as_str()))
}

fn progress(s: &Summary) -> String {
    format!(
        "{}: {} execs, {:.0} execs/s, {} inputs kept, {} features, {:.0} s",
        s.target,
        s.execs,
        s.rate(),
        s.corpus,
        s.features,
        s.elapsed.as_secs_f64()
    )
}

/// Runs `target` on one input with panics captured: `Err` is the panic.
pub fn replay_one(target: &Target, input: &[u8]) -> Result<(), String> {
    install_panic_hook();
    execute(target, input, &mut Trace::off())
}

/// Runs `target` on a file, or on every file of a folder (see
/// [`read_inputs`]); returns each file with its outcome.
pub fn replay(target: &Target, path: &Path) -> io::Result<Vec<(PathBuf, Result<(), String>)>> {
    let inputs = if path.is_dir() {
        read_inputs(path)?
    } else {
        vec![(path.to_path_buf(), fs::read(path)?)]
    };
    Ok(inputs
        .into_iter()
        .map(|(path, bytes)| {
            let outcome = replay_one(target, &bytes);
            (path, outcome)
        })
        .collect())
}
