//! millrace-trx: transactions.
//!
//! Owns: transaction ids and serialisation numbers, the active set and read
//! views (MVCC, READ COMMITTED and REPEATABLE READ), undo records in undo
//! logs in rollback segments in undo tablespaces, commit, statement and
//! transaction rollback, purge with its history bounds (purge lag delay,
//! undo quota, idle timeout), row locks (implicit and explicit, waits,
//! timeouts, deadlock detection), rollback of in-flight transactions after
//! a crash, and the embedded API (`Engine`, `Trx`).
//! Must not know about: the wire protocol or SQL; how pages are cached or
//! logged (it changes pages through millrace-buf mini-transactions and
//! B+trees through millrace-btree).
//!
//! # Example
//!
//! ```
//! use millrace_io::SimStorage;
//! use millrace_metrics::Registry;
//! use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
//! use millrace_trx::{Engine, Isolation, TrxConfig, TrxError};
//! use std::ops::Bound;
//! use std::sync::Arc;
//!
//! // A real data directory would be `millrace_io::FsStorage::new("data", false)?`
//! // and `CpuBudget::start(CpuProbe::system(), Duration::from_secs(1))`.
//! let storage = Arc::new(SimStorage::new());
//! let mut cfg = TrxConfig::default();
//! cfg.store.buf.pool_bytes = 8 << 20;
//! cfg.store.log.capacity_bytes = 8 << 20;
//! let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
//! let engine = Engine::open(storage, cfg, cpu, Registry::new())?;
//!
//! // A table with one secondary index on bytes 0..4 of the value.
//! let users = engine.create_table(&[vec![(0, 4)]])?;
//!
//! let tx = engine.begin(Isolation::RepeatableRead);
//! tx.insert(users, b"alice", b"oslo, admin")?;
//! tx.insert(users, b"bob", b"rome, user")?;
//! assert_eq!(tx.insert(users, b"bob", b"dup").unwrap_err().mysql_code(), 1062);
//! tx.commit()?; // durable (flush_log_at_trx_commit = 1) when it returns
//!
//! let reader = engine.begin(Isolation::RepeatableRead);
//! assert_eq!(reader.get(users, b"bob")?, Some(b"rome, user".to_vec()));
//!
//! let writer = engine.begin(Isolation::RepeatableRead);
//! writer.update(users, b"bob", b"oslo, user")?;
//! writer.delete(users, b"alice")?;
//! writer.commit()?;
//!
//! // The reader's snapshot is unchanged; a new transaction sees the commit.
//! assert_eq!(reader.get(users, b"alice")?, Some(b"oslo, admin".to_vec()));
//! reader.commit()?;
//! let now = engine.begin(Isolation::ReadCommitted);
//! let rows = now.scan(users, Bound::Unbounded, Bound::Unbounded, 100)?;
//! assert_eq!(rows, vec![(b"bob".to_vec(), b"oslo, user".to_vec())]);
//! assert_eq!(now.scan_secondary(users, 0, b"oslo", b"oslo", 10)?.len(), 1);
//! now.rollback()?;
//! engine.shutdown()?;
//! # Ok::<(), TrxError>(())
//! ```

pub mod catalog;
pub mod check;
mod engine;
pub mod lock;
mod purge;
pub mod sys;
pub mod undo;
pub mod undo_rec;

pub use catalog::{encode_segments, split_segments, SecondaryDef, TableDef, SEGMENT};
pub use engine::{Engine, KillReason, RuntimeSettings, Trx};
pub use lock::LockMode;
/// The durability levels of a commit, from the redo log (the SQL layer and
/// the server set them without depending on the log).
pub use millrace_redo::Durability;

use millrace_buf::StoreConfig;
use millrace_errcode::{self as errcode, ErrorCode};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Each statement sees what was committed when it started.
    ReadCommitted,
    /// The whole transaction sees what was committed at its first read.
    RepeatableRead,
}

/// What to do when undo passes its quota while a long-lived read view
/// stops purge from freeing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UndoQuotaPolicy {
    /// Roll back the transaction holding the oldest read view (it gets an
    /// error at its next statement), so purge can proceed.
    RollbackOldest,
    /// Make writers wait (up to the lock wait timeout) until purge has
    /// brought undo back under the quota.
    WaitWriters,
}

#[derive(Debug, Clone)]
pub struct TrxConfig {
    pub store: StoreConfig,
    /// Undo tablespaces; default: the effective CPU count, within 2..=8.
    pub undo_spaces: Option<u32>,
    /// Rollback segments; default: 16 per effective CPU, within 16..=128
    /// (seed 003: too few segments make commits queue on their mutexes).
    pub rsegs: Option<u32>,
    pub max_active_trx: usize,
    pub lock_wait_timeout_ms: u64,
    /// Run purge (tests of history growth may turn it off).
    pub purge: bool,
    /// Most purge worker threads; how many run follows the backlog.
    pub purge_threads: usize,
    /// History length above which DML statements are delayed; 0 = never.
    /// On by default (InnoDB's default is off): seed 002 shows a history
    /// left unbounded costing throughput for long after its cause is gone.
    pub max_purge_lag: u64,
    pub max_purge_lag_delay_us: u64,
    /// Undo bytes above which `undo_quota_policy` acts; 0 = no quota.
    pub undo_quota_bytes: u64,
    pub undo_quota_policy: UndoQuotaPolicy,
    /// A transaction idle this long is rolled back; 0 = never.
    pub idle_trx_timeout_ms: u64,
    /// An undo tablespace larger than this is truncated once purge has
    /// emptied it (new undo goes to the other spaces meanwhile); 0 = never.
    pub undo_truncate_bytes: u64,
}

impl Default for TrxConfig {
    fn default() -> Self {
        Self {
            store: StoreConfig::default(),
            undo_spaces: None,
            rsegs: None,
            max_active_trx: 1024,
            lock_wait_timeout_ms: 50_000,
            purge: true,
            purge_threads: 4,
            max_purge_lag: 10_000,
            max_purge_lag_delay_us: 10_000,
            undo_quota_bytes: 0,
            undo_quota_policy: UndoQuotaPolicy::RollbackOldest,
            idle_trx_timeout_ms: 0,
            undo_truncate_bytes: 256 << 20,
        }
    }
}

impl TrxConfig {
    /// (undo tablespaces, rollback segments), from the settings or the
    /// documented rule.
    pub fn undo_layout(&self, effective_cpus: u32, page_size: usize) -> (u32, u32) {
        let spaces = self
            .undo_spaces
            .unwrap_or(effective_cpus.clamp(2, 8))
            .max(1);
        let rsegs = self
            .rsegs
            .unwrap_or((16 * effective_cpus).clamp(16, 128))
            .clamp(1, catalog::max_rsegs(page_size) as u32);
        (spaces, rsegs)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrxError {
    /// MySQL 1062 ER_DUP_ENTRY.
    Duplicate,
    /// MySQL 1205 ER_LOCK_WAIT_TIMEOUT: the statement was rolled back.
    LockWaitTimeout,
    /// MySQL 1213 ER_LOCK_DEADLOCK: the transaction was rolled back.
    Deadlock,
    /// The engine rolled the transaction back (undo quota, idle timeout);
    /// MySQL 1317 ER_QUERY_INTERRUPTED with the reason.
    RolledBack(&'static str),
    NoSuchTable(u32),
    TooManyTransactions(usize),
    TooLarge(String),
    Full(String),
    Corrupt(String),
    Storage(String),
}

impl TrxError {
    /// The MySQL error code a server reports for this error.
    pub fn mysql_code(&self) -> ErrorCode {
        match self {
            Self::Duplicate => errcode::ER_DUP_ENTRY,
            Self::LockWaitTimeout => errcode::ER_LOCK_WAIT_TIMEOUT,
            Self::Deadlock => errcode::ER_LOCK_DEADLOCK,
            Self::RolledBack(_) => errcode::ER_QUERY_INTERRUPTED,
            Self::NoSuchTable(_) => errcode::ER_NO_SUCH_TABLE,
            Self::TooManyTransactions(_) => errcode::ER_TOO_MANY_CONCURRENT_TRXS,
            Self::TooLarge(_) => errcode::ER_TOO_BIG_ROWSIZE,
            Self::Full(_) => errcode::ER_RECORD_FILE_FULL,
            Self::Corrupt(_) => errcode::ER_TABLE_CORRUPT,
            Self::Storage(_) => errcode::ER_GET_ERRNO,
        }
    }
}

impl fmt::Display for TrxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Duplicate => write!(f, "duplicate entry for the primary key"),
            Self::LockWaitTimeout => {
                write!(f, "lock wait timeout exceeded; try restarting transaction")
            }
            Self::Deadlock => write!(
                f,
                "deadlock found when trying to get lock; try restarting transaction"
            ),
            Self::RolledBack(why) => write!(f, "transaction rolled back: {why}"),
            Self::NoSuchTable(t) => write!(f, "table {t} does not exist"),
            Self::TooManyTransactions(n) => write!(f, "too many active transactions (limit {n})"),
            Self::TooLarge(m) => write!(f, "row too large: {m}"),
            Self::Full(m) => write!(f, "full: {m}"),
            Self::Corrupt(m) => write!(f, "data corrupted: {m}"),
            Self::Storage(m) => write!(f, "storage error: {m}"),
        }
    }
}

impl std::error::Error for TrxError {}

impl From<millrace_buf::Error> for TrxError {
    fn from(e: millrace_buf::Error) -> Self {
        match e {
            millrace_buf::Error::Corrupt(m) => Self::Corrupt(m),
            millrace_buf::Error::Full(m) => Self::Full(m),
            e => Self::Storage(e.to_string()),
        }
    }
}

impl From<millrace_btree::Error> for TrxError {
    fn from(e: millrace_btree::Error) -> Self {
        match e {
            millrace_btree::Error::Duplicate => Self::Duplicate,
            millrace_btree::Error::TooLarge { len, max } => {
                Self::TooLarge(format!("{len} bytes, at most {max}"))
            }
            millrace_btree::Error::Corrupt(m) => Self::Corrupt(m),
            millrace_btree::Error::Buf(b) => b.into(),
        }
    }
}

impl From<millrace_redo::LogError> for TrxError {
    fn from(e: millrace_redo::LogError) -> Self {
        Self::Storage(e.to_string())
    }
}
