//! `loadgen-node`: the LoadGen node's command line. The commands are in
//! `cli/`; the engine and the SUT adapters in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

use cli::args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = netdiv_proto::logging::init(&cli.log, "loadgen-node") {
        eprintln!("loadgen-node: error: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Run(args) => cli::run::command(&args),
        Command::Sysdesc(args) => cli::sysdesc::command(&args),
        Command::Accuracy(args) => cli::accuracy::command(&args),
        Command::Submission(args) => cli::submission::command(&args),
        Command::Preflight(args) => cli::submission::preflight_command(&args),
        Command::Check(args) => cli::submission::checker::command(&args),
        Command::Pack(args) => cli::submission::pack::command(&args),
        Command::Audit(args) => cli::audit::command(&args),
        Command::Report(args) => cli::report::command(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen-node: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, each cause once: typed errors
/// that already say their cause in their own message are not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn causes_already_said_are_not_repeated() {
        let inner = std::io::Error::other("connection refused");
        let e = anyhow::Error::new(inner)
            .context("transport error: connection refused")
            .context("node grpc://a:1");
        assert_eq!(
            super::one_line(&e),
            "node grpc://a:1: transport error: connection refused"
        );
    }
}
