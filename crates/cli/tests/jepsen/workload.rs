//! The workloads: the schema, the seeded choice of the next operation, and
//! running one operation against the server, which classifies its outcome
//! (see history.rs for what Ok, Fail and Info mean).

use crate::common::client::{Client, ClientError, Row};
use crate::history::{Op, Outcome, MARKER};
use std::time::Duration;

pub const ACCOUNTS: i64 = 8;
pub const INITIAL_BALANCE: i64 = 1000;
pub const TOTAL_BALANCE: i64 = ACCOUNTS * INITIAL_BALANCE;
pub const COUNTERS: i64 = 4;
/// Small, so that concurrent inserts of one value are common.
pub const UNIQUE_DOMAIN: i64 = 12;
/// Ids (ledger rows, unique rows) are `(round * MAX_PROCESSES + process)
/// << ID_SHIFT | seq`: unique across the run without coordination.
pub const MAX_PROCESSES: i64 = 64;
const ID_SHIFT: u32 = 20;

/// Error codes that are normal outcomes of a contended workload.
pub const EXPECTED_ERRORS: [u16; 3] = [
    1062, // ER_DUP_ENTRY: a unique value taken
    1205, // ER_LOCK_WAIT_TIMEOUT
    1213, // ER_LOCK_DEADLOCK
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// Transfers, counters, rollback markers, balance and ledger reads.
    Bank,
    /// Inserts and deletes of a small domain of values under a UNIQUE
    /// index, and range reads through it.
    Unique,
}

/// The seeded generator every random test of the project uses.
pub use millrace_sys::rng::SplitMix64 as Rng;

pub fn schema(mix: Mix) -> Vec<String> {
    let mut sql = vec!["CREATE DATABASE jep".to_string()];
    match mix {
        Mix::Bank => {
            sql.push("CREATE TABLE jep.accounts (id INT PRIMARY KEY, bal BIGINT NOT NULL)".into());
            let rows: Vec<String> = (0..ACCOUNTS)
                .map(|i| format!("({i}, {INITIAL_BALANCE})"))
                .collect();
            sql.push(format!(
                "INSERT INTO jep.accounts VALUES {}",
                rows.join(", ")
            ));
            sql.push("CREATE TABLE jep.counters (id INT PRIMARY KEY, n BIGINT NOT NULL)".into());
            let rows: Vec<String> = (0..COUNTERS).map(|i| format!("({i}, 0)")).collect();
            sql.push(format!(
                "INSERT INTO jep.counters VALUES {}",
                rows.join(", ")
            ));
            sql.push(
                "CREATE TABLE jep.ledger (id BIGINT PRIMARY KEY, src INT NOT NULL, \
                 dst INT NOT NULL, amt BIGINT NOT NULL)"
                    .into(),
            );
        }
        Mix::Unique => sql.push(
            "CREATE TABLE jep.uniq (id BIGINT PRIMARY KEY, v INT NOT NULL, UNIQUE KEY uv (v))"
                .into(),
        ),
    }
    sql
}

/// The first id of a process's block in a round.
pub fn id_base(round: usize, process: usize) -> i64 {
    (round as i64 * MAX_PROCESSES + process as i64) << ID_SHIFT
}

/// The next operation of a process: `seq` numbers its operations in the
/// round and makes its ids unique; `rounds` is the run's round count
/// (range reads span every id the run can use).
pub fn pick(mix: Mix, rng: &mut Rng, round: usize, process: usize, seq: i64, rounds: usize) -> Op {
    let id = id_base(round, process) + seq;
    let roll = rng.below(100);
    match mix {
        Mix::Bank => match roll {
            0..=34 => {
                let from = rng.below(ACCOUNTS as u64) as i64;
                let to = (from + 1 + rng.below(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
                Op::Transfer {
                    from,
                    to,
                    amount: 1 + rng.below(50) as i64,
                    ledger_id: id,
                }
            }
            35..=49 => Op::Increment {
                counter: rng.below(COUNTERS as u64) as i64,
                read: None,
            },
            50..=59 => Op::Add {
                counter: rng.below(COUNTERS as u64) as i64,
            },
            60..=67 => Op::Marker {
                account: rng.below(ACCOUNTS as u64) as i64,
            },
            68..=84 => Op::ReadBalances {
                first: Vec::new(),
                second: Vec::new(),
            },
            _ => {
                // Every id the run can use is in -end..end (markers are
                // negative); a range is a random quarter of that.
                let end = id_base(rounds, 0);
                let span = end / 2;
                let lo = rng.below((2 * end - span) as u64) as i64 - end;
                Op::ReadLedger {
                    lo,
                    hi: lo + span,
                    first: Vec::new(),
                    second: Vec::new(),
                }
            }
        },
        Mix::Unique => match roll {
            0..=49 => Op::InsertUnique {
                id,
                v: rng.below(UNIQUE_DOMAIN as u64) as i64,
                held: roll % 2 == 0,
            },
            50..=79 => Op::DeleteUnique {
                v: rng.below(UNIQUE_DOMAIN as u64) as i64,
            },
            _ => {
                let lo = rng.below(UNIQUE_DOMAIN as u64) as i64 - 2;
                Op::ReadUnique {
                    lo,
                    hi: lo + 2 + rng.below(UNIQUE_DOMAIN as u64) as i64,
                    values: Vec::new(),
                }
            }
        },
    }
}

/// Runs `op`; `hold` is how long a transaction pauses at its interesting
/// point (between a write and its COMMIT or ROLLBACK, between two reads),
/// to widen the windows in which other clients interleave.
pub fn invoke(c: &mut Client, op: Op, hold: Duration) -> (Op, Outcome) {
    match op {
        Op::Transfer {
            from,
            to,
            amount,
            ledger_id,
        } => {
            let outcome = in_transaction(c, |c| {
                c.exec(&format!(
                    "UPDATE jep.accounts SET bal = bal - {amount} WHERE id = {from}"
                ))?;
                c.exec(&format!(
                    "UPDATE jep.accounts SET bal = bal + {amount} WHERE id = {to}"
                ))?;
                c.exec(&format!(
                    "INSERT INTO jep.ledger (id, src, dst, amt) \
                     VALUES ({ledger_id}, {from}, {to}, {amount})"
                ))
            });
            (op, outcome)
        }
        Op::Increment { counter, .. } => {
            let mut read = None;
            let outcome = in_transaction(c, |c| {
                let rows = c.rows(&format!(
                    "SELECT n FROM jep.counters WHERE id = {counter} FOR UPDATE"
                ))?;
                let n = single_int(&rows)?;
                read = Some(n);
                std::thread::sleep(hold);
                c.exec(&format!(
                    "UPDATE jep.counters SET n = {} WHERE id = {counter}",
                    n + 1
                ))
            });
            (Op::Increment { counter, read }, outcome)
        }
        Op::Add { counter } => {
            let outcome = autocommit(
                c,
                &format!("UPDATE jep.counters SET n = n + 1 WHERE id = {counter}"),
            );
            (op, outcome)
        }
        Op::Marker { account } => {
            let outcome = rolled_back(c, |c| {
                c.exec(&format!(
                    "UPDATE jep.accounts SET bal = bal + {MARKER} WHERE id = {account}"
                ))?;
                c.exec(&format!(
                    "INSERT INTO jep.ledger (id, src, dst, amt) \
                     VALUES ({}, {account}, {account}, {MARKER})",
                    -1 - account
                ))?;
                std::thread::sleep(hold);
                Ok(())
            });
            (op, outcome)
        }
        Op::ReadBalances { .. } => {
            let sql = "SELECT id, bal FROM jep.accounts ORDER BY id";
            let (mut first, mut second) = (Vec::new(), Vec::new());
            let outcome = in_transaction(c, |c| {
                first = pairs(&c.rows(sql)?)?;
                std::thread::sleep(hold);
                second = pairs(&c.rows(sql)?)?;
                Ok(())
            });
            (Op::ReadBalances { first, second }, outcome)
        }
        Op::ReadLedger { lo, hi, .. } => {
            let sql =
                format!("SELECT id FROM jep.ledger WHERE id BETWEEN {lo} AND {hi} ORDER BY id");
            let (mut first, mut second) = (Vec::new(), Vec::new());
            let outcome = in_transaction(c, |c| {
                first = ints(&c.rows(&sql)?)?;
                std::thread::sleep(hold);
                second = ints(&c.rows(&sql)?)?;
                Ok(())
            });
            (
                Op::ReadLedger {
                    lo,
                    hi,
                    first,
                    second,
                },
                outcome,
            )
        }
        Op::InsertUnique { id, v, held } => {
            let sql = format!("INSERT INTO jep.uniq (id, v) VALUES ({id}, {v})");
            let outcome = if held {
                in_transaction(c, |c| {
                    c.exec(&sql)?;
                    std::thread::sleep(hold);
                    Ok(())
                })
            } else {
                autocommit(c, &sql)
            };
            (op, outcome)
        }
        Op::DeleteUnique { v } => {
            let outcome = autocommit(c, &format!("DELETE FROM jep.uniq WHERE v = {v}"));
            (op, outcome)
        }
        Op::ReadUnique { lo, hi, .. } => {
            let mut values = Vec::new();
            let outcome = in_transaction(c, |c| {
                values = ints(&c.rows(&format!(
                    "SELECT v FROM jep.uniq WHERE v BETWEEN {lo} AND {hi}"
                ))?)?;
                Ok(())
            });
            (Op::ReadUnique { lo, hi, values }, outcome)
        }
    }
}

/// BEGIN; body; COMMIT, classified: an error before COMMIT rolls back and
/// is a Fail (a lost connection too: nothing uncommitted survives it); a
/// lost connection at COMMIT is Info; an error answer to COMMIT is Info
/// as well (the checker then accepts either), and is reported as
/// unexpected by the runner.
fn in_transaction(
    c: &mut Client,
    body: impl FnOnce(&mut Client) -> Result<(), ClientError>,
) -> Outcome {
    if let Err(e) = c.exec("BEGIN").and_then(|()| body(c)) {
        return failed_before_commit(c, e);
    }
    match c.exec("COMMIT") {
        Ok(()) => Outcome::Ok,
        Err(e) => Outcome::Info(format!("COMMIT: {e}")),
    }
}

/// BEGIN; body; ROLLBACK: Ok when the rollback was acknowledged.
fn rolled_back(
    c: &mut Client,
    body: impl FnOnce(&mut Client) -> Result<(), ClientError>,
) -> Outcome {
    if let Err(e) = c.exec("BEGIN").and_then(|()| body(c)) {
        return failed_before_commit(c, e);
    }
    match c.exec("ROLLBACK") {
        Ok(()) => Outcome::Ok,
        Err(e) => failed_before_commit(c, e),
    }
}

/// Fail(code) for an error answer, Fail(0) for a lost connection or a
/// malformed result (the runner reports the latter as unexpected).
fn failed_before_commit(c: &mut Client, e: ClientError) -> Outcome {
    // 1213 already rolled the transaction back; 1205 and others undo only
    // the statement, so end the transaction here.
    if !c.is_broken() {
        let _ = c.exec("ROLLBACK");
    }
    Outcome::Fail(e.code().unwrap_or(0))
}

/// One autocommit statement: an error answer is a Fail, a lost connection
/// Info.
fn autocommit(c: &mut Client, sql: &str) -> Outcome {
    match c.exec(sql) {
        Ok(()) => Outcome::Ok,
        Err(e) => match e.code() {
            Some(code) => Outcome::Fail(code),
            None => Outcome::Info(format!("{e}")),
        },
    }
}

fn bad(what: &str) -> ClientError {
    ClientError::Protocol(what.to_string())
}

fn int(v: &Option<String>) -> Result<i64, ClientError> {
    v.as_deref()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("a value that is not an integer"))
}

pub fn ints(rows: &[Row]) -> Result<Vec<i64>, ClientError> {
    rows.iter()
        .map(|r| int(r.first().unwrap_or(&None)))
        .collect()
}

pub fn pairs(rows: &[Row]) -> Result<Vec<(i64, i64)>, ClientError> {
    rows.iter()
        .map(|r| match r.as_slice() {
            [a, b] => Ok((int(a)?, int(b)?)),
            _ => Err(bad("a row that is not two columns")),
        })
        .collect()
}

fn single_int(rows: &[Row]) -> Result<i64, ClientError> {
    match rows {
        [row] => int(row.first().unwrap_or(&None)),
        _ => Err(bad("not exactly one row")),
    }
}
