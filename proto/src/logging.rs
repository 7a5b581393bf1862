//! The one diagnostics setup every netdiv binary installs: `tracing` events
//! (and the `log` records of rustls, bridged) filtered by `RUST_LOG` or
//! `--log-level`, written as text, JSON lines or native journald entries.
//!
//! Library crates only emit events; choosing where they go is the
//! binary's job, so it lives here, shared by `sut-node` and `loadgen-node`.

use std::io::IsTerminal;
use std::os::unix::fs::MetadataExt;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How diagnostics are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// journald when stderr is the journal (a systemd service), else text.
    Auto,
    /// Human-readable lines on stderr.
    Text,
    /// One JSON object per line on stderr (fields, level, target, time).
    Json,
    /// Native journald entries: every field queryable with journalctl.
    Journald,
}

/// The logging flags both daemons take.
#[derive(Clone, Debug, clap::Args)]
pub struct LogArgs {
    /// Which diagnostics to write: a level (error, warn, info, debug,
    /// trace) or per-target directives such as "info,quinn=debug".
    /// RUST_LOG, when set, takes precedence.
    #[arg(long, value_name = "FILTER", default_value = "info", global = true)]
    pub log_level: String,
    /// Where and how diagnostics are written.
    #[arg(long, value_enum, default_value = "auto", global = true)]
    pub log_format: LogFormat,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The filter does not parse.
    #[error("{source_name} {filter:?} is not a log filter: {reason}")]
    Filter {
        /// `RUST_LOG` or `--log-level`.
        source_name: &'static str,
        /// The text given.
        filter: String,
        /// The parser's complaint.
        reason: String,
    },
    /// journald was asked for and cannot be reached.
    #[error("--log-format journald: cannot reach the journal: {0}")]
    Journald(std::io::Error),
    /// A subscriber was already installed in this process.
    #[error("logging was already set up: {0}")]
    AlreadySet(String),
}

/// True when systemd connected this process's stderr to the journal: its
/// `JOURNAL_STREAM` names stderr's device and inode.
fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    dev.parse() == Ok(meta.dev()) && ino.parse() == Ok(meta.ino())
}

fn filter(args: &LogArgs) -> Result<EnvFilter, LoggingError> {
    filter_from(args, std::env::var("RUST_LOG").ok())
}

/// The filter from `RUST_LOG`'s value (`rust_log`, when set and not
/// blank), else from `--log-level`.
fn filter_from(args: &LogArgs, rust_log: Option<String>) -> Result<EnvFilter, LoggingError> {
    let (source_name, text) = match rust_log {
        Some(env) if !env.trim().is_empty() => ("RUST_LOG", env),
        _ => ("--log-level", args.log_level.clone()),
    };
    EnvFilter::builder()
        .parse(&text)
        .map_err(|e| LoggingError::Filter {
            source_name,
            filter: text,
            reason: e.to_string(),
        })
}

/// Human-readable lines on stderr, coloured on a terminal.
fn text_layer<S>() -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    Box::new(
        tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr),
    )
}

/// Installs the process's subscriber. `identifier` names the program in
/// the journal (`SYSLOG_IDENTIFIER`), e.g. `sut-node-node-a`.
pub fn init(args: &LogArgs, identifier: &str) -> Result<(), LoggingError> {
    let journald =
        || tracing_journald::layer().map(|l| l.with_syslog_identifier(identifier.to_string()));
    let output: Box<dyn Layer<_> + Send + Sync> = match args.log_format {
        LogFormat::Journald => Box::new(journald().map_err(LoggingError::Journald)?),
        // Under systemd, native journal entries; if the journal cannot be
        // reached after all, stderr still gets text.
        LogFormat::Auto if stderr_is_journal() => match journald() {
            Ok(layer) => Box::new(layer),
            Err(_) => text_layer(),
        },
        LogFormat::Json => Box::new(
            tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_writer(std::io::stderr),
        ),
        LogFormat::Text | LogFormat::Auto => text_layer(),
    };
    tracing_subscriber::registry()
        .with(output.with_filter(filter(args)?))
        .try_init()
        .map_err(|e| LoggingError::AlreadySet(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_filter_names_where_it_came_from() {
        let args = LogArgs {
            log_level: "info,quinn=[".into(),
            log_format: LogFormat::Text,
        };
        let error = filter_from(&args, None).unwrap_err().to_string();
        assert!(error.starts_with("--log-level \"info,quinn=[\""), "{error}");
        // RUST_LOG, when set, is read instead of the flag, and named.
        let error = filter_from(&args, Some("debug,qdl=(".into()))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("RUST_LOG \"debug,qdl=(\""), "{error}");
        assert!(filter_from(&args, Some("debug".into())).is_ok());
        let args = LogArgs {
            log_level: "info,qdl=debug".into(),
            log_format: LogFormat::Text,
        };
        assert!(filter_from(&args, None).is_ok());
    }

    #[test]
    fn the_journal_is_recognised_by_stderr_s_device_and_inode() {
        let meta = std::fs::metadata("/proc/self/fd/2").unwrap();
        std::env::set_var("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
        assert!(stderr_is_journal());
        std::env::set_var(
            "JOURNAL_STREAM",
            format!("{}:{}", meta.dev(), meta.ino() + 1),
        );
        assert!(!stderr_is_journal());
        std::env::remove_var("JOURNAL_STREAM");
        assert!(!stderr_is_journal());
    }
}
