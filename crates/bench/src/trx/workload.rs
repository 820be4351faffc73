//! The table's rows, transactions with their retries (a deadlock or a lock
//! wait timeout is retried), the two operations and the load.

use super::args::{TrxArgs, Workload};
use crate::store::{random_digits, thread_rng};
use millrace_errcode as errcode;
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Engine, Isolation, Trx, TrxError};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// sysbench's columns: k BIGINT (the secondary key), c CHAR(120), pad CHAR(60).
pub(super) const K_BYTES: u16 = 8;
pub(super) const C_BYTES: usize = 120;
pub(super) const PAD_BYTES: usize = 60;
pub(super) const VALUE_BYTES: usize = K_BYTES as usize + C_BYTES + PAD_BYTES;
/// Rows per load transaction.
pub(super) const LOAD_BATCH_ROWS: u64 = 1000;
/// Seeds the row contents and the operations.
pub(super) const SEED: u64 = 0x6d69_6c6c_7472_7821;

pub(super) fn row_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// k (u64 big-endian: the secondary key, value bytes 0..8), then c and pad
/// as random digits.
pub(super) fn new_value(k: u64, rng: &mut SplitMix64) -> Vec<u8> {
    let mut value = vec![0u8; VALUE_BYTES];
    value[..8].copy_from_slice(&k.to_be_bytes());
    random_digits(&mut value[8..], rng);
    value
}

/// How one operation's transaction ended, and the retries it took.
#[derive(Default)]
pub(super) struct Outcome {
    /// False when the deadline passed while it was being retried.
    pub(super) committed: bool,
    pub(super) deadlocks: u64,
    pub(super) lock_timeouts: u64,
}

/// Runs `body` in a REPEATABLE READ transaction and commits it; a
/// transaction that ends in a deadlock or a lock wait timeout is rolled
/// back (the engine did it for a deadlock, dropping it does it for a
/// timeout) and retried, unless `deadline` has passed. Any other error
/// fails the bench.
pub(super) fn transact(
    engine: &Arc<Engine>,
    deadline: Option<Instant>,
    body: impl Fn(&Trx) -> Result<(), TrxError>,
) -> Result<Outcome, TrxError> {
    let mut outcome = Outcome::default();
    loop {
        let trx = engine.begin(Isolation::RepeatableRead);
        match body(&trx).and_then(|()| trx.commit()) {
            Ok(()) => {
                outcome.committed = true;
                return Ok(outcome);
            }
            Err(e) if e.mysql_code() == errcode::ER_LOCK_DEADLOCK => outcome.deadlocks += 1,
            Err(e) if e.mysql_code() == errcode::ER_LOCK_WAIT_TIMEOUT => outcome.lock_timeouts += 1,
            Err(e) => return Err(e),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(outcome);
        }
    }
}

/// What every worker shares.
pub(super) struct Shared {
    pub(super) workload: Workload,
    pub(super) table: u32,
    pub(super) rows: u64,
    pub(super) seconds: f64,
    /// The id of the next inserted row.
    pub(super) next_id: AtomicU64,
}

impl Shared {
    pub(super) fn new(args: &TrxArgs, table: u32) -> Self {
        Self {
            workload: args.workload,
            table,
            rows: args.rows,
            seconds: args.seconds,
            next_id: AtomicU64::new(args.rows + 1),
        }
    }

    /// An id of the loaded range, or a k.
    pub(super) fn random(&self, rng: &mut SplitMix64) -> u64 {
        1 + rng.below(self.rows)
    }
}

/// Gives a random loaded row a new k (and c): the clustered record changes,
/// its old secondary entry is delete-marked and a new one inserted.
pub(super) fn update_index(
    engine: &Arc<Engine>,
    w: &Shared,
    rng: &mut SplitMix64,
    deadline: Instant,
) -> Result<Outcome, String> {
    let id = w.random(rng);
    let value = new_value(w.random(rng), rng);
    transact(engine, Some(deadline), |trx| {
        if trx.update(w.table, &row_key(id), &value)? {
            Ok(())
        } else {
            // Rows are never deleted: a loaded row that is gone is damage.
            Err(TrxError::Corrupt(format!("row {id} is missing")))
        }
    })
    .map_err(|e| format!("update_index of row {id}: {e}"))
}

pub(super) fn insert(
    engine: &Arc<Engine>,
    w: &Shared,
    rng: &mut SplitMix64,
    deadline: Instant,
) -> Result<Outcome, String> {
    let id = w.next_id.fetch_add(1, Ordering::SeqCst);
    let value = new_value(w.random(rng), rng);
    transact(engine, Some(deadline), |trx| {
        trx.insert(w.table, &row_key(id), &value)
    })
    .map_err(|e| format!("insert of row {id}: {e}"))
}

/// Inserts one loader's ids in transactions of LOAD_BATCH_ROWS rows, ids
/// ascending.
pub(super) fn load_ids(
    engine: &Arc<Engine>,
    table: u32,
    ids: Range<u64>,
    rows: u64,
    thread: u32,
    loaded: &AtomicU64,
    failed: &AtomicBool,
) -> Result<(), String> {
    let mut rng = thread_rng(SEED, thread);
    let mut first = ids.start;
    while first < ids.end {
        if failed.load(Ordering::Relaxed) {
            // Another loader failed; its error is the one reported.
            return Ok(());
        }
        let last = ids.end.min(first + LOAD_BATCH_ROWS);
        let batch: Vec<(u64, Vec<u8>)> = (first..last)
            .map(|id| (id, new_value(1 + rng.below(rows), &mut rng)))
            .collect();
        transact(engine, None, |trx| {
            for (id, value) in &batch {
                trx.insert(table, &row_key(*id), value)?;
            }
            Ok(())
        })
        .map_err(|e| format!("inserting rows {first}..{last}: {e}"))?;
        loaded.fetch_add(last - first, Ordering::Relaxed);
        first = last;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_carry_k_big_endian() {
        let mut rng = SplitMix64::new(1);
        let v = new_value(0x0102_0304_0506_0708, &mut rng);
        assert_eq!(v.len(), 188);
        assert_eq!(&v[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(v[8..].iter().all(u8::is_ascii_digit));
    }
}
