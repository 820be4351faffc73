//! The engine's error type and its conversions from the lower layers'
//! errors, each mapped to the MySQL error code a server reports.

use millrace_errcode::{self as errcode, ErrorCode};
use std::fmt;
use std::sync::{LockResult, PoisonError};

/// The guard of a mutex even if a holder panicked. Only for data that no
/// code run under the mutex can leave half-changed (no I/O and no caller's
/// code runs under it; each change is one container operation), so a
/// poisoned one is still consistent: see docs/design.md, "Transactions
/// under failure". The other mutexes (a transaction's state, a rollback
/// segment's) stop the engine when poisoned instead.
pub(crate) fn unpoisoned<G>(r: LockResult<G>) -> G {
    r.unwrap_or_else(PoisonError::into_inner)
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
    /// The engine stopped: a rollback could not finish, or a panic left
    /// its state unknown. Every later call fails with this; the next open
    /// recovers (rolls the unfinished transactions back from undo).
    /// MySQL 1030 ER_GET_ERRNO.
    EngineFailed(String),
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
            Self::Storage(_) | Self::EngineFailed(_) => errcode::ER_GET_ERRNO,
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
            Self::EngineFailed(m) => write!(
                f,
                "the storage engine stopped ({m}); restart the server to recover"
            ),
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
