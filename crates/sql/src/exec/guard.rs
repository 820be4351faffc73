//! A statement's bounds while it runs: whether it was killed (KILL QUERY /
//! KILL CONNECTION from another session), its deadline (max_execution_time)
//! and the memory it may hold in materialized rows (sort input, DISTINCT
//! sets, the result). Operators call `check` for every row they read and
//! `charge` for every row they keep, so that a statement stops within a
//! row's work of being killed or running out of time or memory. See
//! docs/design.md, "Bounds and interruption in the SQL layer".

use crate::error::SqlError;
use crate::types::Value;
use millrace_errcode::{ER_OUT_OF_SORTMEMORY, ER_QUERY_INTERRUPTED, ER_QUERY_TIMEOUT};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::Instant;

/// What KILL asked of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kill {
    None = 0,
    Query = 1,
    Connection = 2,
}

/// Checks between clock readings: reading the clock costs more than the
/// rest of a check, and a statement reads many rows per millisecond.
const CHECKS_PER_CLOCK: u32 = 64;

/// One session's statement bounds, shared with the sessions that may kill it.
pub struct StatementGuard {
    kill: AtomicU8,
    epoch: Instant,
    /// Milliseconds after `epoch` when the statement must stop (0: never).
    deadline_ms: AtomicU64,
    ticks: AtomicU32,
    /// Bytes of rows the statement holds, and the most it may.
    held_bytes: AtomicU64,
    limit_bytes: AtomicU64,
}

impl StatementGuard {
    pub fn new(limit_bytes: u64) -> StatementGuard {
        StatementGuard {
            kill: AtomicU8::new(Kill::None as u8),
            epoch: Instant::now(),
            deadline_ms: AtomicU64::new(0),
            ticks: AtomicU32::new(0),
            held_bytes: AtomicU64::new(0),
            limit_bytes: AtomicU64::new(limit_bytes),
        }
    }

    pub fn kill_state(&self) -> Kill {
        match self.kill.load(Ordering::SeqCst) {
            0 => Kill::None,
            1 => Kill::Query,
            _ => Kill::Connection,
        }
    }

    /// Raises the kill state (a connection kill is never lowered to a query
    /// kill).
    pub fn kill(&self, k: Kill) {
        self.kill.fetch_max(k as u8, Ordering::SeqCst);
    }

    /// A new statement: a KILL QUERY aimed at the one before is forgotten;
    /// no deadline (set by `set_timeout` for the statements it applies
    /// to); no memory held.
    pub fn begin(&self, limit_bytes: u64) {
        let _ = self.kill.compare_exchange(
            Kill::Query as u8,
            Kill::None as u8,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.deadline_ms.store(0, Ordering::Relaxed);
        self.held_bytes.store(0, Ordering::Relaxed);
        self.limit_bytes.store(limit_bytes, Ordering::Relaxed);
    }

    /// The statement must stop `ms` after `started` (0: no limit).
    pub fn set_timeout(&self, started: Instant, ms: u64) {
        let at = if ms == 0 {
            0
        } else {
            let since = started.saturating_duration_since(self.epoch).as_millis() as u64;
            since.saturating_add(ms).max(1)
        };
        self.deadline_ms.store(at, Ordering::Relaxed);
    }

    /// Whether the statement may go on: 1317 once killed, 3024 past its
    /// deadline.
    pub fn check(&self) -> Result<(), SqlError> {
        if self.kill.load(Ordering::Relaxed) != Kill::None as u8 {
            return Err(interrupted());
        }
        let d = self.deadline_ms.load(Ordering::Relaxed);
        if d != 0
            && self.ticks.fetch_add(1, Ordering::Relaxed) % CHECKS_PER_CLOCK == 0
            && self.epoch.elapsed().as_millis() as u64 >= d
        {
            return Err(SqlError::new(
                ER_QUERY_TIMEOUT,
                "Query execution was interrupted, maximum statement execution time exceeded",
            ));
        }
        Ok(())
    }

    /// Counts `bytes` more held by the statement; 1038 past its limit.
    pub fn charge(&self, bytes: usize) -> Result<(), SqlError> {
        let held = self.held_bytes.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        let limit = self.limit_bytes.load(Ordering::Relaxed);
        if held > limit {
            return Err(SqlError::new(
                ER_OUT_OF_SORTMEMORY,
                format!(
                    "Out of sort memory: the statement holds more than {limit} bytes of rows \
                     (statement memory limit); add a LIMIT or a narrower WHERE"
                ),
            ));
        }
        Ok(())
    }
}

/// 1317.
pub fn interrupted() -> SqlError {
    SqlError::new(ER_QUERY_INTERRUPTED, "Query execution was interrupted")
}

/// About how many bytes a row of `values` holds in memory.
pub fn row_bytes(values: &[Value]) -> usize {
    values
        .iter()
        .map(|v| {
            std::mem::size_of::<Value>()
                + match v {
                    Value::Bytes(b) => b.len(),
                    _ => 0,
                }
        })
        .sum::<usize>()
        + std::mem::size_of::<Vec<Value>>()
}
