//! `millrace`: the command line of the millrace storage engine. It runs
//! the MySQL-protocol server (`millrace serve`, settings from flags and
//! millrace.toml: see `millrace_server::config`), benchmarks of the
//! engine's layers (`millrace bench log|btree|trx`: see millrace-bench) and
//! the offline check of a data directory (`millrace check`).
//!
//! Owns: the command line (subcommands and their dispatch, tracing set-up,
//! the exit status) and the lines `millrace check` prints.
//! Must not know about: the protocol, SQL, pages or logs; each subcommand's
//! flags and work belong to its crate (`ServeArgs`, `BenchCommand`) or, for
//! `check`, to `millrace_trx::check`.
//! Depends on: millrace-server, millrace-bench, millrace-trx (the check),
//! millrace-io and millrace-sys (the check's storage and CPU budget), clap,
//! tracing-subscriber.

mod check;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(name = "millrace", version, about = "The millrace storage engine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure one layer of the engine.
    Bench {
        #[command(subcommand)]
        bench: millrace_bench::BenchCommand,
    },
    /// Check a data directory: every page's checksum, every index's structure.
    Check(check::CheckArgs),
    /// Run the MySQL-protocol server.
    Serve(millrace_server::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Bench { bench } => millrace_bench::run(bench),
        Command::Check(args) => check::run(args),
        Command::Serve(args) => millrace_server::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// Logs go to stderr so that stdout carries only the results (a JSON line
/// with `--json`), whatever RUST_LOG asks for.
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
