//! `millrace`: the command line of the millrace storage engine. Today it runs
//! benchmarks of the engine's layers (`millrace bench log` drives the redo
//! log on its own, `millrace bench btree` a sysbench-like table on B+tree
//! indexes, `millrace bench trx` the same table through transactions),
//! checks a data directory (`millrace check`), and runs the MySQL-protocol
//! server (`millrace serve`, settings from flags and millrace.toml: see
//! `config`).

mod bench;
mod check;
mod config;
mod metrics_http;
mod serve;
mod stmt_types;

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
        bench: bench::BenchCommand,
    },
    /// Check a data directory: every page's checksum, every index's structure.
    Check(check::CheckArgs),
    /// Run the MySQL-protocol server.
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Bench { bench } => bench::run(bench),
        Command::Check(args) => check::run(args),
        Command::Serve(args) => serve::run(args),
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
