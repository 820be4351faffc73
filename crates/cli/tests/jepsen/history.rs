//! The history model, as Jepsen keeps it: every operation a client invoked,
//! with when it was invoked and completed and how it ended.
//!
//! - `Ok`: the server acknowledged it (for a write, its COMMIT or its
//!   autocommit statement answered OK): it happened, and must survive.
//! - `Fail`: it certainly did not happen: the server answered an error
//!   (1213 deadlock, 1205 lock wait timeout, 1062 duplicate) and the
//!   transaction was rolled back, or the connection died before COMMIT was
//!   sent (recovery rolls back every transaction that did not commit).
//! - `Info`: in doubt: the connection died after the commit (or the
//!   autocommit statement) was sent and before the answer came. It may or
//!   may not have happened; checkers must accept both.
//!
//! Reads record what they saw, so checkers can judge them afterwards.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The server's error code, or 0 when the connection died before the
    /// commit was sent.
    Fail(u16),
    /// Why the outcome is unknown.
    Info(String),
}

/// One operation: what was asked and, for reads, what came back.
#[derive(Clone, Debug)]
pub enum Op {
    /// BEGIN; move `amount` from one account to another; insert ledger row
    /// `ledger_id` recording it; COMMIT.
    Transfer {
        from: i64,
        to: i64,
        amount: i64,
        ledger_id: i64,
    },
    /// BEGIN; SELECT n ... FOR UPDATE; UPDATE n = read + 1; COMMIT. `read`
    /// is the value the locking read returned.
    Increment { counter: i64, read: Option<i64> },
    /// Autocommit UPDATE counters SET n = n + 1.
    Add { counter: i64 },
    /// BEGIN; add `MARKER` to an account and insert a negative ledger id;
    /// ROLLBACK. Nobody may ever see either.
    Marker { account: i64 },
    /// BEGIN; read every account twice (ORDER BY id); COMMIT.
    ReadBalances {
        first: Vec<(i64, i64)>,
        second: Vec<(i64, i64)>,
    },
    /// BEGIN; read the ledger ids in [lo, hi] twice; COMMIT.
    ReadLedger {
        lo: i64,
        hi: i64,
        first: Vec<i64>,
        second: Vec<i64>,
    },
    /// INSERT a row with a unique-indexed value `v` (row id `id`), in
    /// autocommit or in a transaction held open a moment before COMMIT.
    InsertUnique { id: i64, v: i64, held: bool },
    /// Autocommit DELETE of the rows with value `v`.
    DeleteUnique { v: i64 },
    /// The unique-indexed values in [lo, hi] (read through that index),
    /// one snapshot.
    ReadUnique { lo: i64, hi: i64, values: Vec<i64> },
}

/// What is added to an account by a `Marker` transaction that then rolls
/// back: far above any balance transfers can reach.
pub const MARKER: i64 = 1_000_000_000;

#[derive(Clone, Debug)]
pub struct Event {
    pub process: usize,
    pub round: usize,
    /// Since the start of the run.
    pub invoked: Duration,
    pub completed: Duration,
    pub op: Op,
    pub outcome: Outcome,
}

/// Counts of outcomes, for the report.
#[derive(Default, Debug, Clone, Copy)]
pub struct Tally {
    pub ok: usize,
    pub fail: usize,
    pub info: usize,
}

pub fn tally<'a>(events: impl IntoIterator<Item = &'a Event>) -> Tally {
    let mut t = Tally::default();
    for e in events {
        match e.outcome {
            Outcome::Ok => t.ok += 1,
            Outcome::Fail(_) => t.fail += 1,
            Outcome::Info(_) => t.info += 1,
        }
    }
    t
}
