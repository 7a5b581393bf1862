//! `loadgen-node`: the LoadGen node's command line.

mod cli;

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;

use cli::{Cli, Command, RunArgs, SutKind};
use loadgen_node::logs::LogSettings;
use loadgen_node::null_sut::{NullSut, SyntheticQsl};
use loadgen_node::run::{start_test, EngineOptions};
use loadgen_node::settings::{
    apply_config, ConfKind, ConfigFile, TestSettings, EMBEDDED_MLPERF_CONF,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen-node: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// mlperf.conf (embedded or replaced), then user.conf, then the flags.
fn settings_from(args: &RunArgs) -> Result<TestSettings> {
    let mut settings = TestSettings {
        scenario: args.scenario,
        ..TestSettings::default()
    };
    let mlperf = match &args.mlperf_conf {
        Some(path) => ConfigFile::load(path)?,
        None => ConfigFile::parse(EMBEDDED_MLPERF_CONF, "embedded mlperf.conf")?,
    };
    let user = args
        .user_conf
        .as_deref()
        .map(ConfigFile::load)
        .transpose()?;
    for (cfg, kind) in [
        (Some(&mlperf), ConfKind::Mlperf),
        (user.as_ref(), ConfKind::User),
    ] {
        let Some(cfg) = cfg else { continue };
        for (line, key) in &cfg.unknown_keys {
            eprintln!(
                "loadgen-node: warning: {}:{line}: {key:?} names no setting; ignored",
                cfg.origin()
            );
        }
        apply_config(&mut settings, cfg, &args.model, args.scenario, kind)?;
    }
    if let Some(mode) = args.mode {
        settings.mode = mode;
    }
    Ok(settings)
}

fn run(args: RunArgs) -> Result<()> {
    if args.performance_sample_count == 0 || args.total_sample_count == 0 {
        bail!("--total-sample-count and --performance-sample-count must be at least 1");
    }
    if args.total_sample_count > u32::MAX as usize {
        bail!(
            "--total-sample-count {} is larger than 2^32-1",
            args.total_sample_count
        );
    }
    let settings = settings_from(&args)?;
    let qsl = SyntheticQsl::new(args.total_sample_count, args.performance_sample_count);
    let sut = match args.sut {
        SutKind::Null => NullSut::new(args.sut_name.clone()),
    };
    let logs = LogSettings {
        outdir: args.output.clone(),
        enable_trace: !args.no_trace,
        ..LogSettings::default()
    };
    let options = EngineOptions {
        uniform_int: args.uniform_int,
        audit_config: args.audit_conf.clone(),
        record_issued: args.record_issued.is_some(),
    };
    let outcome = start_test(&sut, &qsl, &settings, &logs, options)?;
    if let Some(path) = &args.record_issued {
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        );
        for index in &outcome.issued {
            writeln!(out, "{index}")?;
        }
        out.flush()?;
    }
    print!("{}", outcome.summary_text);
    println!("Logs written to {}", args.output.display());
    Ok(())
}
