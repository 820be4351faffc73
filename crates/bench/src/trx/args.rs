//! The flags of `bench trx` and the engine's settings made from them.

use crate::output::RunOutput;
use crate::store::{check_mb, store_config, validate_store, StoreArgs};
use clap::{Args, ValueEnum};
use millrace_redo::Durability;
use millrace_trx::{TrxConfig, UndoQuotaPolicy};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Each transaction gives a random row a new k and c.
    #[value(name = "update_index")]
    UpdateIndex,
    /// Each transaction inserts a row with a new id.
    Insert,
}

impl Workload {
    pub(super) fn name(self) -> &'static str {
        match self {
            Workload::UpdateIndex => "update_index",
            Workload::Insert => "insert",
        }
    }
}

/// `--undo-quota-policy`, as the command line spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum QuotaPolicy {
    /// Roll back the transaction with the oldest read view.
    #[value(name = "rollback_oldest")]
    RollbackOldest,
    /// Make writers wait (up to the lock wait timeout) for purge.
    #[value(name = "wait_writers")]
    WaitWriters,
}

impl QuotaPolicy {
    pub(super) fn name(self) -> &'static str {
        match self {
            QuotaPolicy::RollbackOldest => "rollback_oldest",
            QuotaPolicy::WaitWriters => "wait_writers",
        }
    }

    pub(super) fn engine_policy(self) -> UndoQuotaPolicy {
        match self {
            QuotaPolicy::RollbackOldest => UndoQuotaPolicy::RollbackOldest,
            QuotaPolicy::WaitWriters => UndoQuotaPolicy::WaitWriters,
        }
    }
}

/// `--set-level-at SECONDS:LEVEL`: switch flush_log_at_trx_commit to LEVEL
/// SECONDS after the start of the run (the warm-up included).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelChange {
    pub(super) at_s: f64,
    pub(super) level: u8,
}

impl FromStr for LevelChange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (at, level) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not SECONDS:LEVEL"))?;
        let at_s: f64 = at
            .trim()
            .parse()
            .map_err(|e| format!("{s:?}: seconds: {e}"))?;
        if !at_s.is_finite() || at_s < 0.0 {
            return Err(format!("{s:?}: seconds must be 0 or more"));
        }
        let level: u8 = level
            .trim()
            .parse()
            .map_err(|e| format!("{s:?}: level: {e}"))?;
        if Durability::from_level(level).is_none() {
            return Err(format!("{s:?}: the level must be 0, 1 or 2"));
        }
        Ok(Self { at_s, level })
    }
}

impl fmt::Display for LevelChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.at_s, self.level)
    }
}

#[derive(Args, Debug)]
pub struct TrxArgs {
    /// What each transaction does.
    #[arg(long, value_enum, default_value_t = Workload::UpdateIndex)]
    pub(super) workload: Workload,
    /// Threads running transactions.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) threads: u32,
    /// Length of the run in seconds, the 0.5 s warm-up included (the baseline
    /// runs as long again).
    #[arg(long, default_value_t = 10.0)]
    pub(super) seconds: f64,
    /// Rows loaded before the run (ids 1..=rows, k random in 1..=rows).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) rows: u64,
    /// Size of the buffer pool, MiB.
    #[arg(long, default_value_t = 256)]
    pub(super) buffer_pool_mb: u64,
    /// Page size in bytes: 4096, 8192, 16384 or 32768.
    #[arg(long, default_value_t = 16384)]
    pub(super) page_size: usize,
    /// flush_log_at_trx_commit at the start of the run: 0 waits for nothing,
    /// 1 for the flush, 2 for the write. The load always runs at 0.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub(super) level: u8,
    /// Switch the level SECONDS after the start of the run (the warm-up
    /// included); repeatable, e.g. --set-level-at 10:2 --set-level-at 20:1.
    #[arg(long, value_name = "SECONDS:LEVEL", value_parser = parse_level_change)]
    pub(super) set_level_at: Vec<LevelChange>,
    #[command(flatten)]
    pub(super) store: StoreArgs,
    /// One more thread keeps a REPEATABLE READ transaction (and its read
    /// view) open for the whole run, reading a random row every second: it
    /// holds purge back.
    #[arg(long)]
    pub(super) long_reader: bool,
    /// History length above which writes are delayed (innodb_max_purge_lag);
    /// 0: never.
    #[arg(long, default_value_t = TrxConfig::default().max_purge_lag)]
    pub(super) max_purge_lag: u64,
    /// Longest such delay, microseconds (innodb_max_purge_lag_delay).
    #[arg(long, default_value_t = 10_000)]
    pub(super) max_purge_lag_delay_us: u64,
    /// Undo space in use above which --undo-quota-policy acts, MiB; 0: no quota.
    #[arg(long, default_value_t = 0)]
    pub(super) undo_quota_mb: u64,
    /// What the engine does when undo passes the quota.
    #[arg(long, value_enum, default_value_t = QuotaPolicy::RollbackOldest)]
    pub(super) undo_quota_policy: QuotaPolicy,
    /// Do not run purge: the history only grows.
    #[arg(long)]
    pub(super) no_purge: bool,
    /// Most purge worker threads.
    #[arg(long, default_value_t = TrxConfig::default().purge_threads as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) purge_threads: u64,
    /// How long a row lock wait (or a writer's wait under wait_writers)
    /// lasts before it fails with 1205, ms.
    #[arg(long, default_value_t = TrxConfig::default().lock_wait_timeout_ms)]
    pub(super) lock_wait_timeout_ms: u64,
    /// Write one CSV row a second to this file: t_s, commits_per_s,
    /// history_len, purge_delay_us, purge_delays, dirty_pages, undo_mb,
    /// p99_ms, lock_waits, deadlocks, log_fsyncs, level.
    #[arg(long, value_name = "FILE.csv")]
    pub(super) timeseries: Option<PathBuf>,
    /// Skip the bare B+tree baseline.
    #[arg(long)]
    pub(super) no_baseline: bool,
    #[command(flatten)]
    pub(super) out: RunOutput,
}

pub(super) fn parse_level_change(s: &str) -> Result<LevelChange, String> {
    s.parse()
}

pub(super) fn validate(args: &TrxArgs) -> Result<(), String> {
    validate_store(args.seconds, args.buffer_pool_mb, &args.store)?;
    check_mb("--undo-quota-mb", args.undo_quota_mb, u64::MAX)?;
    for change in &args.set_level_at {
        if change.at_s >= args.seconds {
            return Err(format!(
                "--set-level-at {change}: the run ends at {} s",
                args.seconds
            ));
        }
    }
    Ok(())
}

pub(super) fn trx_config(args: &TrxArgs) -> TrxConfig {
    TrxConfig {
        // The load runs at level 0; the run's level is set after it.
        store: store_config(
            args.page_size,
            args.buffer_pool_mb,
            &args.store,
            Durability::Lazy,
        ),
        lock_wait_timeout_ms: args.lock_wait_timeout_ms,
        purge: !args.no_purge,
        purge_threads: args.purge_threads as usize,
        max_purge_lag: args.max_purge_lag,
        max_purge_lag_delay_us: args.max_purge_lag_delay_us,
        undo_quota_bytes: args.undo_quota_mb << 20,
        undo_quota_policy: args.undo_quota_policy.engine_policy(),
        ..Default::default()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TrxArgs,
    }

    /// `millrace bench trx` flags as the command line parses them (also
    /// for report.rs's tests).
    pub(in crate::trx) fn parse(argv: &[&str]) -> Result<TrxArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("trx").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn level_changes_parse() {
        let c: LevelChange = "10:2".parse().unwrap();
        assert_eq!(
            c,
            LevelChange {
                at_s: 10.0,
                level: 2
            }
        );
        assert_eq!(c.to_string(), "10:2");
        assert_eq!("2.5:0".parse::<LevelChange>().unwrap().at_s, 2.5);
        assert!("10".parse::<LevelChange>().is_err());
        assert!("10:3".parse::<LevelChange>().is_err());
        assert!("-1:1".parse::<LevelChange>().is_err());
        assert!("x:1".parse::<LevelChange>().is_err());
    }

    #[test]
    fn flags_parse_with_their_defaults() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.workload, Workload::UpdateIndex);
        assert_eq!((a.threads, a.rows, a.level), (16, 100_000, 1));
        assert_eq!(a.undo_quota_policy, QuotaPolicy::RollbackOldest);
        assert!(!a.long_reader && a.set_level_at.is_empty());
        let a = parse(&[
            "--workload",
            "insert",
            "--undo-quota-policy",
            "wait_writers",
            "--set-level-at",
            "10:2",
            "--set-level-at",
            "20:1",
            "--seconds",
            "30",
            "--long-reader",
        ])
        .unwrap();
        assert_eq!(a.workload, Workload::Insert);
        assert_eq!(a.undo_quota_policy, QuotaPolicy::WaitWriters);
        assert_eq!(a.set_level_at.len(), 2);
        assert!(a.long_reader);
        validate(&a).unwrap();
        let late = parse(&["--seconds", "5", "--set-level-at", "5:2"]).unwrap();
        assert!(validate(&late).is_err());
        assert!(parse(&["--workload", "update-index"]).is_err());
    }
}
