//! `redquorum`: benchmark quorum latency against the raw-Redis floor, run a command under a
//! Redlock held across independent masters, and probe the masters for misconfiguration.
//!
//! # Layout
//! - `exit` — the documented exit codes and [`exit::Failure`], the one-line error every
//!   subcommand returns.
//! - `args` — options shared by the subcommands: the masters, durations, URL redaction.
//! - `cmd::bench` — the quorum-latency benchmark and its floor, profiles, report, JSON, plot.
//! - `cmd::run` — `flock(1)` across masters: a child process under a kept-alive lock.
//! - `cmd::probe` — the health of every master, as a table or JSON.
//! - `cmd::guard` — commission new masters, reset an epoch (the restart guard).
//! - `cmd::locks` — the locks held across the masters (`SCAN`, read-only), table or JSON.
//!
//! `main` only parses the command line, installs the `tracing` subscriber (`RUST_LOG`),
//! starts the runtime and maps the outcome to an exit code.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod cmd;
mod exit;

/// Redlock from the command line: a distributed lock held by a quorum of independent Redis
/// masters.
#[derive(Debug, Parser)]
#[command(name = "redquorum", version, after_long_help = exit::HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// The variants carry no doc comment: each subcommand's help is its arguments' doc.
#[derive(Debug, Subcommand)]
enum Command {
    Bench(cmd::bench::BenchArgs),
    Run(cmd::run::RunArgs),
    Probe(cmd::probe::ProbeArgs),
    Guard(cmd::guard::GuardArgs),
    Locks(cmd::locks::LocksArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return exit::usage_error(&err),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal; every span's close is logged with the fields recorded
        // when its operation ended (votes, outcome, elapsed) and its busy/idle time.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return exit::Failure::os(format!("could not start the async runtime: {e}.")).report();
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Bench(args) => cmd::bench::main(args).await,
            Command::Run(args) => cmd::run::main(args).await,
            Command::Probe(args) => cmd::probe::main(args).await,
            Command::Guard(args) => cmd::guard::main(args).await,
            Command::Locks(args) => cmd::locks::main(args).await,
        }
    });
    // Tasks still running (a release spawned by a dropped lock) get a moment to finish.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}
