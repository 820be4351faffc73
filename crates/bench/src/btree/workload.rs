//! The table's rows and the operations of the mix, written once against
//! `Table` (the engine's indexes or the baseline's maps), and the load.

use super::args::{BtreeArgs, Mix};
use crate::store::{load_rows, random_digits, thread_rng, Loaded};
use millrace_sys::rng::SplitMix64;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// sysbench's columns: k BIGINT, c CHAR(120), pad CHAR(60).
pub(super) const C_BYTES: usize = 120;
pub(super) const PAD_BYTES: usize = 60;
pub(super) const ROW_BYTES: usize = 8 + C_BYTES + PAD_BYTES;
/// Seeds the row contents and the operations, so that the engine and the
/// baseline load the same rows and run the same sequence per thread.
pub(super) const SEED: u64 = 0x6d69_6c6c_7261_6365;

/// The table's two indexes, in the engine or in memory: the load and the
/// operations are written once against this.
/// operations are written once against this.
pub(super) trait Table: Sync {
    /// The row's value, if the row exists.
    fn get(&self, id: u64) -> Result<Option<Vec<u8>>, String>;
    fn insert_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String>;
    fn update_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String>;
    /// Removes a secondary entry; false if there was none.
    fn delete_entry(&self, key: &[u8]) -> Result<bool, String>;
    /// Adds a secondary entry; false if it was there already.
    fn insert_entry(&self, key: &[u8]) -> Result<bool, String>;
    /// Waits until every change made so far is as durable as asked.
    fn commit(&self) -> Result<(), String>;
}

pub(super) fn row_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// k then id, both big-endian: entries sort by k, then by id.
pub(super) fn entry_key(k: u64, id: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&k.to_be_bytes());
    key[8..].copy_from_slice(&id.to_be_bytes());
    key
}

/// k (u64 little-endian), then c and pad as random digits.
pub(super) fn new_row(k: u64, rng: &mut SplitMix64) -> Vec<u8> {
    let mut row = vec![0u8; ROW_BYTES];
    row[..8].copy_from_slice(&k.to_le_bytes());
    random_digits(&mut row[8..], rng);
    row
}

pub(super) fn row_k(id: u64, row: &[u8]) -> Result<u64, String> {
    row.get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| format!("row {id} has {} bytes, fewer than k", row.len()))
}

/// What every worker shares.
pub(super) struct Workload {
    pub(super) rows: u64,
    pub(super) mix: Mix,
    pub(super) seconds: f64,
    /// The id of the next inserted row.
    pub(super) next_id: AtomicU64,
}

impl Workload {
    pub(super) fn new(args: &BtreeArgs) -> Self {
        Self {
            rows: args.rows,
            mix: args.mix,
            seconds: args.seconds,
            next_id: AtomicU64::new(args.rows + 1),
        }
    }

    /// An id of the loaded range, or a k.
    pub(super) fn random(&self, rng: &mut SplitMix64) -> u64 {
        1 + rng.below(self.rows)
    }

    /// Rows in the table: the loaded ones and every insert so far.
    pub(super) fn rows_now(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst) - 1
    }
}

/// Moves one row's secondary entry to a new k. Returns the races seen:
/// with no row locks, two threads updating one row may find its entry gone
/// or its new entry already there.
pub(super) fn update_index<T: Table>(
    table: &T,
    w: &Workload,
    rng: &mut SplitMix64,
    trx_id: u64,
    roll_ptr: u64,
) -> Result<u64, String> {
    let id = w.random(rng);
    let mut row = table
        .get(id)?
        .ok_or_else(|| format!("row {id} is missing"))?;
    let old_k = row_k(id, &row)?;
    let new_k = w.random(rng);
    let mut races = 0;
    if !table.delete_entry(&entry_key(old_k, id))? {
        races += 1;
    }
    if !table.insert_entry(&entry_key(new_k, id))? {
        races += 1;
    }
    row[..8].copy_from_slice(&new_k.to_le_bytes());
    table.update_row(id, &row, trx_id, roll_ptr)?;
    table.commit()?;
    Ok(races)
}

pub(super) fn insert<T: Table>(
    table: &T,
    w: &Workload,
    rng: &mut SplitMix64,
    trx_id: u64,
    roll_ptr: u64,
) -> Result<(), String> {
    let id = w.next_id.fetch_add(1, Ordering::SeqCst);
    let k = w.random(rng);
    table.insert_row(id, &new_row(k, rng), trx_id, roll_ptr)?;
    if !table.insert_entry(&entry_key(k, id))? {
        return Err(format!(
            "the secondary entry of the new row {id} exists already"
        ));
    }
    table.commit()
}

pub(super) fn point_select<T: Table>(
    table: &T,
    w: &Workload,
    rng: &mut SplitMix64,
) -> Result<(), String> {
    let id = w.random(rng);
    match table.get(id)? {
        Some(_) => Ok(()),
        None => Err(format!("row {id} is missing")),
    }
}

/// Inserts rows 1..=rows, ids ascending in each thread's range, printing
/// the progress every second.
pub(super) fn load<T: Table>(
    table: &T,
    rows: u64,
    threads: u32,
    label: &str,
) -> Result<Loaded, String> {
    load_rows(rows, threads, label, |ids, t, loaded, failed| {
        load_ids(table, ids, rows, t, loaded, failed)
    })
}

pub(super) fn load_ids<T: Table>(
    table: &T,
    ids: Range<u64>,
    rows: u64,
    thread: u32,
    loaded: &AtomicU64,
    failed: &AtomicBool,
) -> Result<(), String> {
    let mut rng = thread_rng(SEED, thread);
    for id in ids {
        if failed.load(Ordering::Relaxed) {
            // Another loader failed; its error is the one reported.
            return Ok(());
        }
        let k = 1 + rng.below(rows);
        table.insert_row(id, &new_row(k, &mut rng), 0, 0)?;
        if !table.insert_entry(&entry_key(k, id))? {
            return Err(format!("the secondary entry of row {id} exists already"));
        }
        loaded.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
