//! The official MLPerf LoadGen as the engine (feature `official`): a real
//! submission's numbers must come from it. The C++ side
//! (`official/shim.cc`, compiled with the unaltered official sources by
//! build.rs) derives a `QueryDispatchLibrary` whose calls land here: Name()
//! asks the QDL (a live round trip to every node on each call), IssueQuery
//! goes to the QDL, the QSL is our sample store, and completions go back
//! through `mlperf::QuerySamplesComplete`.

use std::ffi::{c_char, c_int, c_void, CString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};

use qdl::{CompletionSink, NetworkSut};

use crate::engine::settings::{Scenario, TestMode};
use crate::sut::network::StoreQsl;
use crate::sut::Counters;

#[repr(C)]
struct Callbacks {
    ctx: *mut c_void,
    name: extern "C" fn(*mut c_void, *mut *const c_char, *mut usize) -> c_int,
    issue: extern "C" fn(*mut c_void, *const u64, *const u64, usize),
    flush: extern "C" fn(*mut c_void),
    total_sample_count: usize,
    performance_sample_count: usize,
    load: extern "C" fn(*mut c_void, *const u64, usize),
    unload: extern "C" fn(*mut c_void, *const u64, usize),
    qsl_name: *const c_char,
}

#[repr(C)]
struct RunOptions {
    scenario: *const c_char,
    scenario_code: c_int,
    mode_code: c_int,
    model: *const c_char,
    mlperf_conf_text: *const c_char,
    user_conf: *const c_char,
    audit_conf: *const c_char,
    outdir: *const c_char,
    enable_trace: c_int,
}

type RunFn = unsafe extern "C" fn(*const Callbacks, *const RunOptions, *mut c_char, usize) -> c_int;
type CompleteFn =
    unsafe extern "C" fn(*const u64, *const *const u8, *const usize, *const i64, usize);
type FirstTokenFn = unsafe extern "C" fn(*const u64, *const *const u8, *const usize, usize);

/// One round's official LoadGen with the shim, as build.rs compiled it
/// into a shared library, loaded from the copy embedded in this program.
struct Library {
    round: &'static str,
    run: RunFn,
    complete: CompleteFn,
    first_token: FirstTokenFn,
    /// Keeps the code mapped (never unloaded).
    _library: libloading::Library,
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/official_libraries.rs"));
}

/// The library loaded in this process: one round per process.
static LOADED: std::sync::OnceLock<Library> = std::sync::OnceLock::new();

/// The rounds this build embeds an official LoadGen for.
pub fn embedded_rounds() -> Vec<&'static str> {
    embedded::EMBEDDED
        .iter()
        .map(|(round, _, _)| *round)
        .collect()
}

/// Loads the official LoadGen of `round` (once per process).
fn load(round: &'static str) -> anyhow::Result<&'static Library> {
    if let Some(library) = LOADED.get() {
        if library.round != round {
            anyhow::bail!(
                "this process already runs the official LoadGen of round {}; one round per process",
                library.round
            );
        }
        return Ok(library);
    }
    let Some((_, version, bytes)) = embedded::EMBEDDED.iter().find(|(r, _, _)| *r == round) else {
        anyhow::bail!(
            "this loadgen-node has no official LoadGen for round {round} (built with: {}); \
             rebuild with NETDIV_OFFICIAL_ROUNDS unset (all rounds) or naming {round}",
            embedded_rounds().join(", ")
        );
    };
    let library = open_in_memory(round, bytes).map_err(|e| {
        anyhow::anyhow!("cannot load the official LoadGen {version} of round {round}: {e}")
    })?;
    Ok(LOADED.get_or_init(|| library))
}

/// dlopen()s `bytes` through an in-memory file: nothing is written to disk.
fn open_in_memory(round: &'static str, bytes: &[u8]) -> std::io::Result<Library> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let name = CString::new(format!("netdiv-official-{round}")).expect("no NUL");
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let to_io = |e: libloading::Error| std::io::Error::other(e.to_string());
    // SAFETY: the library is the official LoadGen and our shim, whose
    // initialisers only set up statics.
    let library = unsafe {
        libloading::os::unix::Library::open(
            Some(&path),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }
    .map_err(to_io)?;
    let library = libloading::Library::from(library);
    drop(file);
    // SAFETY: the shim defines these with exactly these signatures.
    unsafe {
        let run = *library
            .get::<RunFn>(b"netdiv_official_run\0")
            .map_err(to_io)?;
        let complete = *library
            .get::<CompleteFn>(b"netdiv_official_complete\0")
            .map_err(to_io)?;
        let first_token = *library
            .get::<FirstTokenFn>(b"netdiv_official_first_token\0")
            .map_err(to_io)?;
        Ok(Library {
            round,
            run,
            complete,
            first_token,
            _library: library,
        })
    }
}

/// The loaded library (completions arrive only during a run, after `load`).
fn loaded() -> &'static Library {
    LOADED
        .get()
        .expect("completions arrive only while a test runs")
}

/// What to run: the same inputs our engine takes.
pub struct OfficialRun<'a> {
    /// The round whose official LoadGen runs the test (`v6.1`).
    pub round: &'static str,
    /// The scenario to run.
    pub scenario: Scenario,
    /// What the run does.
    pub mode: TestMode,
    /// The model config lines are looked up for.
    pub model: &'a str,
    /// Replaces the library's built-in mlperf.conf.
    pub mlperf_conf: Option<&'a Path>,
    /// Per-system settings applied after mlperf.conf.
    pub user_conf: Option<&'a Path>,
    /// Compliance-test overrides, if the file exists.
    pub audit_conf: &'a Path,
    /// Where the four logs go.
    pub outdir: &'a Path,
    /// Write mlperf_log_trace.json.
    pub enable_trace: bool,
    /// Keep the issued QSL indices, in order.
    pub record_issued: bool,
    /// The test measures token latencies (first tokens go through one
    /// thread, see `TokenCalls`).
    pub token_latencies: bool,
    /// Submission mode: a failed Name() ends the run.
    pub submission_mode: bool,
    /// Called with the reason before the process exits on a failure the
    /// official LoadGen cannot be told about (the run's record is written
    /// from here).
    pub on_fatal: Option<&'a (dyn Fn(&str) + Sync)>,
}

impl std::fmt::Debug for OfficialRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfficialRun")
            .field("round", &self.round)
            .field("scenario", &self.scenario)
            .field("mode", &self.mode)
            .field("model", &self.model)
            .field("outdir", &self.outdir)
            .finish_non_exhaustive()
    }
}

/// Completions into the official LoadGen.
struct OfficialSink {
    counters: Arc<Counters>,
    /// Token models: the one thread that hands first tokens and
    /// completions over (see [`TokenCalls`]).
    token_calls: Option<mpsc::Sender<TokenCall>>,
}

/// First tokens or completions, owned, on their way to [`TokenCalls`].
enum TokenCall {
    FirstTokens(Vec<OwnedResponse>),
    Completions(Vec<OwnedResponse>),
}

struct OwnedResponse {
    id: u64,
    data: Vec<u8>,
    n_tokens: i64,
}

/// The official LoadGen records a first token and a completion on its
/// logging thread in the order each *calling* thread logged them, but not
/// across threads: a completion called from another thread than its
/// sample's first token can be recorded first, and its accuracy-log entry
/// then reads a first token that is not there yet (a crash, seen here with
/// the QDL's two I/O threads, between which a link's reader moves). So for
/// token models every call goes through this one thread, in the order the
/// QDL made them; the hop is inside the timed path.
struct TokenCalls;

impl TokenCalls {
    fn start() -> std::io::Result<mpsc::Sender<TokenCall>> {
        let (tx, rx) = mpsc::channel::<TokenCall>();
        std::thread::Builder::new()
            .name("official-tokens".into())
            .spawn(move || {
                while let Ok(call) = rx.recv() {
                    match call {
                        TokenCall::FirstTokens(list) => call_first_token(&borrowed(&list)),
                        TokenCall::Completions(list) => call_complete(&borrowed(&list)),
                    }
                }
            })
            .map(|_| tx)
    }
}

fn owned(responses: &[qdl::Response<'_>]) -> Vec<OwnedResponse> {
    responses
        .iter()
        .map(|r| OwnedResponse {
            id: r.response_id,
            data: r.data.to_vec(),
            n_tokens: r.n_tokens,
        })
        .collect()
}

fn borrowed(list: &[OwnedResponse]) -> Vec<qdl::Response<'_>> {
    list.iter()
        .map(|r| qdl::Response {
            response_id: r.id,
            data: &r.data,
            n_tokens: r.n_tokens,
        })
        .collect()
}

/// The columns of `responses` as the C++ side takes them: ids, data
/// pointers, sizes, token counts.
type Columns = (Vec<u64>, Vec<*const u8>, Vec<usize>, Vec<i64>);

fn columns(responses: &[qdl::Response<'_>]) -> Columns {
    (
        responses.iter().map(|r| r.response_id).collect(),
        responses.iter().map(|r| r.data.as_ptr()).collect(),
        responses.iter().map(|r| r.data.len()).collect(),
        responses.iter().map(|r| r.n_tokens).collect(),
    )
}

/// `mlperf::FirstTokenComplete` for these samples.
fn call_first_token(responses: &[qdl::Response<'_>]) {
    let (ids, data, sizes, _) = columns(responses);
    // SAFETY: as in `call_complete`.
    unsafe { (loaded().first_token)(ids.as_ptr(), data.as_ptr(), sizes.as_ptr(), ids.len()) };
}

/// `mlperf::QuerySamplesComplete` for these samples.
fn call_complete(responses: &[qdl::Response<'_>]) {
    let (ids, data, sizes, n_tokens) = columns(responses);
    // SAFETY: four arrays of `responses.len()` elements, and every data
    // pointer valid for its size until this call returns (the LoadGen
    // copies what it keeps).
    unsafe {
        (loaded().complete)(
            ids.as_ptr(),
            data.as_ptr(),
            sizes.as_ptr(),
            n_tokens.as_ptr(),
            ids.len(),
        )
    };
}

impl OfficialSink {
    /// Hands `call` to the token thread; false if there is none.
    fn through_token_thread(&self, call: impl FnOnce() -> TokenCall) -> bool {
        let Some(calls) = &self.token_calls else {
            return false;
        };
        calls.send(call()).is_ok()
    }
}

impl CompletionSink for OfficialSink {
    fn first_token(&self, responses: &[qdl::Response<'_>]) {
        if !self.through_token_thread(|| TokenCall::FirstTokens(owned(responses))) {
            call_first_token(responses);
        }
    }

    fn complete(&self, responses: &[qdl::Response<'_>]) {
        if !self.through_token_thread(|| TokenCall::Completions(owned(responses))) {
            call_complete(responses);
        }
        self.counters
            .completed
            .fetch_add(responses.len() as u64, Ordering::Relaxed);
    }

    /// The official LoadGen has no way to end a test with a reason, and
    /// would wait for the lost samples forever: say why and exit.
    fn fail(&self, reason: &str) {
        fatal(&format!("the run cannot go on: {reason}"));
    }
}

/// What the process does before it exits on a failure the official
/// LoadGen cannot be told about (a lost node, a failed Name(), samples
/// that cannot be loaded): `OfficialRun::on_fatal`, for the test's length.
static LAST_WORDS: Mutex<Option<LastWords>> = Mutex::new(None);

/// A pointer to `run`'s `on_fatal`, valid while `run` runs.
struct LastWords(*const (dyn Fn(&str) + Sync));

// SAFETY: the pointee is `Sync`, and only called while `run` keeps it
// alive (see `fatal`).
unsafe impl Send for LastWords {}

/// Clears the last words when `run` returns.
struct LastWordsGuard;

impl LastWordsGuard {
    /// Makes `words` the last words until the guard is dropped.
    fn set(words: Option<&(dyn Fn(&str) + Sync)>) -> LastWordsGuard {
        if let (Some(words), Ok(mut slot)) = (words, LAST_WORDS.lock()) {
            let words: *const (dyn Fn(&str) + Sync + '_) = words;
            // SAFETY: only the lifetime is erased; the guard clears the
            // pointer before what it borrows can go away (`run` holds the
            // guard while it borrows `words`).
            let words: *const (dyn Fn(&str) + Sync) = unsafe { std::mem::transmute(words) };
            *slot = Some(LastWords(words));
        }
        LastWordsGuard
    }
}

impl Drop for LastWordsGuard {
    fn drop(&mut self) {
        if let Ok(mut words) = LAST_WORDS.lock() {
            *words = None;
        }
    }
}

/// Ends the process on `reason`: logs it, says the run's last words (its
/// record), flushes and exits.
fn fatal(reason: &str) -> ! {
    tracing::error!("{reason}");
    let words = LAST_WORDS.lock().ok().and_then(|w| w.as_ref().map(|w| w.0));
    if let Some(words) = words {
        // SAFETY: set by `run` from a reference that lives until `run`
        // returns, and cleared (LastWordsGuard) before it does; the
        // callbacks that end here run inside `run`'s call into C++.
        unsafe { (*words)(reason) };
    }
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    std::process::exit(1);
}

struct Context<'a> {
    network: &'a NetworkSut,
    qsl: &'a StoreQsl,
    sink: Arc<dyn CompletionSink>,
    counters: Arc<Counters>,
    name: String,
    issued: Option<Mutex<Vec<usize>>>,
    submission_mode: bool,
}

/// # Safety
/// `ctx` is the `Context` that `run` passed to the C++ side, alive for the
/// whole test.
unsafe fn context<'a>(ctx: *mut c_void) -> &'a mut Context<'a> {
    &mut *(ctx as *mut Context<'a>)
}

/// A slice from a C array; empty for a null pointer.
///
/// # Safety
/// `ptr` points to `n` values, or is null.
unsafe fn slice<'a>(ptr: *const u64, n: usize) -> &'a [u64] {
    if ptr.is_null() || n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, n)
    }
}

/// Runs `f`, and exits with a message instead of unwinding into C++.
fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => fatal(&format!("panic in {what} under the official LoadGen")),
    }
}

extern "C" fn name_cb(ctx: *mut c_void, text: *mut *const c_char, len: *mut usize) -> c_int {
    guarded("Name()", || {
        // SAFETY: see `context`; text and len are valid out-pointers.
        let ctx = unsafe { context(ctx) };
        let rc = match ctx.network.name() {
            Ok(name) => {
                ctx.name = name;
                0
            }
            Err(e) if ctx.submission_mode => {
                // A submission's log cannot carry a name that is not
                // the SUT's: end here instead of running on.
                fatal(&format!("submission mode: the SUT's Name() failed: {e}"));
            }
            Err(e) => {
                ctx.name = e.to_string();
                1
            }
        };
        unsafe {
            *text = ctx.name.as_ptr() as *const c_char;
            *len = ctx.name.len();
        }
        rc
    })
}

extern "C" fn issue_cb(ctx: *mut c_void, ids: *const u64, indices: *const u64, n: usize) {
    guarded("IssueQuery()", || {
        // SAFETY: see `context` and `slice`: two arrays of n values.
        let ctx = unsafe { context(ctx) };
        let (ids, indices) = unsafe { (slice(ids, n), slice(indices, n)) };
        let pairs: Vec<(u64, usize)> = ids
            .iter()
            .zip(indices)
            .map(|(&id, &index)| (id, index as usize))
            .collect();
        if let Some(issued) = &ctx.issued {
            if let Ok(mut issued) = issued.lock() {
                issued.extend(pairs.iter().map(|&(_, index)| index));
            }
        }
        ctx.counters.issued.fetch_add(n as u64, Ordering::Relaxed);
        ctx.network.issue(&pairs, &ctx.sink);
    })
}

/// The QDL never holds queries back, so there is nothing to flush.
extern "C" fn flush_cb(_ctx: *mut c_void) {}

fn indices(ptr: *const u64, n: usize) -> Vec<usize> {
    // SAFETY: the C++ side passes an array of n values.
    unsafe { slice(ptr, n) }
        .iter()
        .map(|&i| i as usize)
        .collect()
}

extern "C" fn load_cb(ctx: *mut c_void, ptr: *const u64, n: usize) {
    guarded("LoadSamplesToRam()", || {
        // SAFETY: see `context`.
        let ctx = unsafe { context(ctx) };
        if let Err(e) = ctx.qsl.store.load(&indices(ptr, n)) {
            // The official QSL interface cannot report an error.
            fatal(&format!("loading samples failed: {e}"));
        }
    })
}

extern "C" fn unload_cb(ctx: *mut c_void, ptr: *const u64, n: usize) {
    guarded("UnloadSamplesFromRam()", || {
        // SAFETY: see `context`.
        let ctx = unsafe { context(ctx) };
        ctx.qsl.store.unload(&indices(ptr, n));
    })
}

fn c_string(text: &str, what: &str) -> anyhow::Result<CString> {
    CString::new(text).map_err(|_| anyhow::anyhow!("{what} {text:?} contains a NUL byte"))
}

fn c_path(path: &Path, what: &str) -> anyhow::Result<CString> {
    let text = path
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("{what} {} is not UTF-8", path.display()))?;
    c_string(text, what)
}

/// Runs one test under the official LoadGen; returns the issued QSL
/// indices when asked to record them.
pub fn run(
    network: &NetworkSut,
    qsl: &StoreQsl,
    counters: Arc<Counters>,
    options: &OfficialRun<'_>,
) -> anyhow::Result<Vec<usize>> {
    // FromConfig loads mlperf.conf only in a process's first test; a
    // second test would silently run without it (seeds of 0).
    static RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if RAN.swap(true, Ordering::SeqCst) {
        anyhow::bail!(
            "the official LoadGen runs one test per process (it reads mlperf.conf only once)"
        );
    }
    let library = load(options.round)?;
    std::fs::create_dir_all(options.outdir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", options.outdir.display()))?;
    let mlperf_conf_text = options
        .mlperf_conf
        .map(|p| {
            std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))
                .and_then(|t| c_string(&t, "mlperf.conf"))
        })
        .transpose()?;
    let user_conf = options
        .user_conf
        .map(|p| {
            if !p.is_file() {
                anyhow::bail!("cannot read config file {}", p.display());
            }
            c_path(p, "--user-conf")
        })
        .transpose()?;
    let scenario = c_string(options.scenario.name(), "scenario")?;
    let model = c_string(options.model, "--model")?;
    let audit = c_path(options.audit_conf, "--audit-conf")?;
    let outdir = c_path(options.outdir, "--output")?;
    let qsl_name = c_string(&crate::sut::QuerySampleLibrary::name(qsl), "the QSL's name")?;
    let mut ctx = Context {
        network,
        qsl,
        sink: Arc::new(OfficialSink {
            counters: counters.clone(),
            token_calls: if options.token_latencies {
                Some(TokenCalls::start()?)
            } else {
                None
            },
        }),
        counters,
        name: String::new(),
        issued: options.record_issued.then(|| Mutex::new(Vec::new())),
        submission_mode: options.submission_mode,
    };
    let callbacks = Callbacks {
        ctx: &mut ctx as *mut Context<'_> as *mut c_void,
        name: name_cb,
        issue: issue_cb,
        flush: flush_cb,
        total_sample_count: qsl.store.total(),
        performance_sample_count: qsl.performance_sample_count,
        load: load_cb,
        unload: unload_cb,
        qsl_name: qsl_name.as_ptr(),
    };
    let run_options = RunOptions {
        scenario: scenario.as_ptr(),
        scenario_code: options.scenario as c_int,
        mode_code: options.mode as c_int,
        model: model.as_ptr(),
        mlperf_conf_text: mlperf_conf_text
            .as_ref()
            .map_or(std::ptr::null(), |c| c.as_ptr()),
        user_conf: user_conf.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        audit_conf: audit.as_ptr(),
        outdir: outdir.as_ptr(),
        enable_trace: c_int::from(options.enable_trace),
    };
    let _last_words = LastWordsGuard::set(options.on_fatal);
    let mut err = vec![0 as c_char; 1024];
    // SAFETY: every pointer lives until the call returns; `ctx` is used only
    // through the callbacks during the call.
    let rc = unsafe { (library.run)(&callbacks, &run_options, err.as_mut_ptr(), err.len()) };
    if rc != 0 {
        // SAFETY: the C++ side NUL-terminates what it writes.
        let reason = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) };
        anyhow::bail!("{}", reason.to_string_lossy());
    }
    let issued = ctx
        .issued
        .take()
        .map(|m| m.into_inner().unwrap_or_default())
        .unwrap_or_default();
    Ok(issued)
}

/// Where the official LoadGen looks for an audit config by default.
pub fn default_audit_conf() -> PathBuf {
    PathBuf::from("audit.config")
}
