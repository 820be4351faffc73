//! The `millrace bench` subcommands and their dispatch.

use crate::{btree, log, trx};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Commits against the redo log alone: latency, group commit, CPU.
    Log(log::LogArgs),
    /// A sysbench-like mix on a table of two B+tree indexes: throughput,
    /// latency, page I/O, against a BTreeMap under a mutex.
    Btree(btree::BtreeArgs),
    /// sysbench-like transactions through the transactional engine:
    /// throughput, latency, history length and purge, against the bare
    /// B+tree.
    Trx(trx::TrxArgs),
}

/// Runs one benchmark; the error is a message for the user.
pub fn run(command: BenchCommand) -> Result<(), String> {
    match command {
        BenchCommand::Log(args) => log::run(&args),
        BenchCommand::Btree(args) => btree::run(&args),
        BenchCommand::Trx(args) => trx::run(&args),
    }
}
