//! The flags a child `loadgen-node run` gets from its parent (the
//! embedded default's and `submission`'s per-test processes): the
//! parent's own, less the ones the child gets its own value of, with file
//! names made absolute so a child may run in a folder of its own.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Flags of the whole program (`--log-level`, `--log-format`): they may
/// come before the subcommand, and a child takes them too.
const GLOBAL_FLAGS: &[&str] = &["--log-level", "--log-format"];

/// Flags of `run` that name files: made absolute for a child, which runs
/// in its own folder.
const PATH_FLAGS: &[&str] = &[
    "--user-conf",
    "--data-dir",
    "--tls-ca",
    "--tls-cert",
    "--tls-key",
    "--dev-tls",
    "--node-config",
    "--sut-node-bin",
];

/// `value` made absolute against this process's working directory.
fn absolute(value: &str) -> String {
    let path = Path::new(value);
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => cwd.join(path).display().to_string(),
        _ => value.to_string(),
    }
}

/// `args` (this program's flags after the subcommand) for a child `run`:
/// without the flags in `drop` (each with whether it takes a value), and
/// with file names made absolute.
pub(crate) fn run_flags(args: impl Iterator<Item = String>, drop: &[(&str, bool)]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip_value = false;
    let mut path_value = false;
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if std::mem::take(&mut path_value) {
            kept.push(absolute(&arg));
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (arg.as_str(), None),
        };
        if let Some((_, takes_value)) = drop.iter().find(|(f, _)| *f == flag) {
            // A flag whose value is optional (`--fresh [SCENARIO]`): there
            // are no positional arguments, so a word that follows it is
            // its value.
            let optional_value = args.peek().is_some_and(|next| !next.starts_with('-'));
            skip_value = inline.is_none() && (*takes_value || optional_value);
        } else if PATH_FLAGS.contains(&flag) {
            match inline {
                Some(v) => kept.push(format!("{flag}={}", absolute(v))),
                None => {
                    kept.push(arg.clone());
                    path_value = true;
                }
            }
        } else {
            kept.push(arg);
        }
    }
    kept
}

/// `argv` (without the program) as a child sees it: the global flags
/// given before `subcommand`, then everything after it.
pub(crate) fn subcommand_args(
    argv: impl IntoIterator<Item = String>,
    subcommand: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut argv = argv.into_iter();
    while let Some(arg) = argv.next() {
        if arg == subcommand {
            out.extend(argv);
            break;
        }
        let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
        if GLOBAL_FLAGS.contains(&flag) {
            let takes_next = !arg.contains('=');
            out.push(arg);
            if takes_next {
                out.extend(argv.next());
            }
        }
    }
    out
}

/// A child `loadgen-node run` with this process's flags (those of
/// `subcommand` and the global ones wherever they were given), less
/// `drop`, file names made absolute. The caller adds the child's own.
pub(crate) fn run_command(subcommand: &str, drop: &[(&str, bool)]) -> Result<Command> {
    let mut command = Command::new(std::env::current_exe().context("cannot find this program")?);
    command.arg("run").args(run_flags(
        subcommand_args(std::env::args().skip(1), subcommand).into_iter(),
        drop,
    ));
    Ok(command)
}

/// Runs `command` with its output in `log`; on failure the error names
/// the log and carries its last lines, where the child said why.
pub(crate) fn run_logged(mut command: Command, what: &str, log: &Path) -> Result<()> {
    let file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let status = command
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .context("cannot start a child run")?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let mut tail: Vec<&str> = text.lines().rev().take(8).collect();
        tail.reverse();
        bail!(
            "the {what} run failed ({status}); its output is in {}:\n{}",
            log.display(),
            tail.join("\n")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn global_flags_before_the_subcommand_reach_the_child() {
        let argv = strings(&[
            "--log-level",
            "debug",
            "--log-format=json",
            "submission",
            "--benchmark",
            "resnet50",
            "--log-level",
            "info",
        ]);
        assert_eq!(
            subcommand_args(argv, "submission"),
            strings(&[
                "--log-level",
                "debug",
                "--log-format=json",
                "--benchmark",
                "resnet50",
                "--log-level",
                "info"
            ])
        );
        assert_eq!(
            subcommand_args(strings(&["run", "--scenario", "Offline"]), "run"),
            strings(&["--scenario", "Offline"])
        );
    }
}
