//! `loadgen-node`: the LoadGen node's command line. The commands are in
//! `cli/`; the engine and the SUT adapters in the library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

use cli::args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => cli::run::command(&args),
        Command::Sysdesc(args) => cli::sysdesc::command(&args),
        Command::Accuracy(args) => cli::score::command(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen-node: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
