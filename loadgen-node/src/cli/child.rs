//! The flags a child `loadgen-node run` gets from its parent (the
//! embedded default's and `submission`'s per-test processes): the
//! parent's own, less the ones the child gets its own value of, with file
//! names made absolute so a child may run in a folder of its own.

use std::path::Path;

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
pub fn run_flags(args: impl Iterator<Item = String>, drop: &[(&str, bool)]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip_value = false;
    let mut path_value = false;
    for arg in args {
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
            skip_value = *takes_value && inline.is_none();
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
