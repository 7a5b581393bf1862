//! The `--ready-file`: once a node listens it writes one JSON object (its
//! name, addresses, TLS mode, backend, pid) there, atomically; whoever
//! started it (a script, the embedded default, the tests) waits for it.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Why a node's readiness was not seen.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The file could not be written.
    #[error("cannot write --ready-file {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The file holds no JSON object.
    #[error("ready file {path} holds {text:?}")]
    Garbled {
        /// The file.
        path: String,
        /// What it holds.
        text: String,
    },
    /// The node exited before it was ready.
    #[error("it exited ({0}) before it was ready")]
    Exited(std::process::ExitStatus),
    /// The node was not ready in time.
    #[error("not ready after {0:?}")]
    Timeout(Duration),
    /// Its state could not be read.
    #[error("cannot check the node process: {0}")]
    Process(std::io::Error),
}

/// Writes `ready` to `path` through a temporary file in the same folder,
/// so a reader sees nothing or all of it.
pub fn write(path: &Path, ready: &serde_json::Value) -> Result<(), ReadyError> {
    let failed = |source| ReadyError::Write {
        path: path.display().to_string(),
        source,
    };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    std::fs::write(&temporary, ready.to_string() + "\n").map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

/// Waits up to `timeout` for the ready file of the node `child`, which
/// must go on running meanwhile; returns what the node wrote.
pub fn wait(
    child: &mut Child,
    path: &Path,
    timeout: Duration,
) -> Result<serde_json::Value, ReadyError> {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .filter(serde_json::Value::is_object)
                .ok_or(ReadyError::Garbled {
                    path: path.display().to_string(),
                    text,
                });
        }
        if let Some(status) = child.try_wait().map_err(ReadyError::Process)? {
            return Err(ReadyError::Exited(status));
        }
        if started.elapsed() > timeout {
            return Err(ReadyError::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
