//! Purge: removes what no read view can see any more, oldest commits first.
//!
//! The coordinator takes, from every rollback segment, the oldest committed
//! undo log whose serialisation number is below the purge limit (the
//! oldest open read view's), splits their records among workers (rows by
//! hash, so one row's records stay in order on one worker; the number of
//! workers follows the backlog), then frees the logs. For a delete-mark it
//! removes the clustered record and its secondary entries if the record is
//! still delete-marked by that transaction; for an update it removes the
//! delete-marked secondary entries of keys the row no longer has. Each
//! removal re-checks its condition under the leaf latch (`delete_if`).
//! The same thread applies the history bounds (bounds.rs: the undo quota
//! policy and the idle transaction timeout) and truncates the undo
//! tablespaces that grew past their limit once purge has emptied them.

use crate::bounds;
use crate::error::unpoisoned;
use crate::error::TrxError;
use crate::secondary::sec_entry;
use crate::shared::Engine;
use crate::undo::{self, Rseg};
use crate::undo_rec::{RollPtr, UndoKind, UndoRecord};
use millrace_buf::space;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Purge rounds are this far apart at most when idle (for the policies).
const IDLE_ROUND: Duration = Duration::from_millis(100);

/// Starts the purge coordinator; the engine joins it at shutdown.
pub(crate) fn start(e: &Arc<Engine>) -> JoinHandle<()> {
    let weak = Arc::downgrade(e);
    std::thread::Builder::new()
        .name("millrace-purge".into())
        .spawn(move || coordinator(weak))
        .expect("spawning the purge coordinator")
}

fn coordinator(w: Weak<Engine>) {
    loop {
        let Some(e) = w.upgrade() else { return };
        if e.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        // A stopped engine is not changed any more: purge idles until
        // shutdown (an error, by contrast, is retried next round).
        let did = e.check_alive().is_ok() && {
            // A panic in a round leaves pages half-purged: the engine
            // stops rather than this thread dying unnoticed (history would
            // then grow until the undo quota stalls every writer).
            match catch_unwind(AssertUnwindSafe(|| round(&e))) {
                Ok(did) => did,
                Err(_) => {
                    e.fail("the purge thread panicked".into());
                    false
                }
            }
        };
        if !did {
            let (m, cv) = &e.purge_wake;
            let g = unpoisoned(m.lock());
            let (mut g, _) = unpoisoned(cv.wait_timeout_while(g, IDLE_ROUND, |woken| !*woken));
            *g = false;
        }
    }
}

/// One round of purge, the history bounds and undo truncation; whether it
/// purged anything. Errors are logged and retried at the next round.
fn round(e: &Engine) -> bool {
    let did = match purge_round(e) {
        Ok(n) => n > 0,
        Err(err) => {
            tracing::error!(error = %err, "purge round failed");
            false
        }
    };
    if let Err(err) = bounds::policies(e) {
        tracing::error!(error = %err, "history bound policies failed");
    }
    if let Err(err) = e.truncate_undo_spaces() {
        tracing::error!(error = %err, "undo tablespace truncation failed");
    }
    did
}

/// One round; returns how many undo logs were purged.
pub(crate) fn purge_round(e: &Engine) -> Result<usize, TrxError> {
    let limit = e.sys.purge_limit_no();
    let store = e.store();
    let mut batch = Vec::new();
    let mut held_back = false;
    for (i, r) in e.rsegs.iter().enumerate() {
        if let Some((first, no)) = r.history_head(store)? {
            if no < limit {
                batch.push((no, i, first));
            } else {
                held_back = true;
            }
        }
    }
    e.purge_blocked_by_view
        .store(batch.is_empty() && held_back, Ordering::Relaxed);
    if batch.is_empty() {
        return Ok(0);
    }
    batch.sort_unstable();
    let mut items: Vec<(u64, UndoRecord)> = Vec::new();
    for &(_, i, first) in &batch {
        let r = &e.rsegs[i];
        let h = undo::log_header(store, r.space, first)?;
        if h.state == undo::STATE_ROLLED_BACK {
            // Its changes were undone; it waited only for readers.
            continue;
        }
        let mut recs = undo::records_newest_first(store, r.space, first)?;
        recs.reverse();
        items.extend(
            recs.into_iter()
                .filter(|(_, rec)| rec.kind != UndoKind::Insert)
                .map(|(_, rec)| (h.trx_id, rec)),
        );
    }
    let workers = ((e.history_len() / 64) as usize).clamp(1, e.cfg.purge_threads.max(1));
    let n_items = items.len() as u64;
    if workers == 1 {
        for (trx_id, rec) in &items {
            purge_record(e, *trx_id, rec)?;
        }
    } else {
        let mut parts: Vec<Vec<&(u64, UndoRecord)>> = vec![Vec::new(); workers];
        for it in &items {
            let h = it.1.pk.iter().fold(it.1.table_id as u64, |h, &b| {
                h.wrapping_mul(31).wrapping_add(b as u64)
            });
            parts[(h % workers as u64) as usize].push(it);
        }
        let results: Vec<Result<(), TrxError>> = std::thread::scope(|s| {
            let hs: Vec<_> = parts
                .iter()
                .map(|p| {
                    s.spawn(move || {
                        for (trx_id, rec) in p.iter().map(|x| (&x.0, &x.1)) {
                            purge_record(e, *trx_id, rec)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(e.fail("a purge worker panicked".into())))
                })
                .collect()
        });
        for r in results {
            r?;
        }
    }
    for &(_, i, first) in &batch {
        undo::purge_head(store, &e.rsegs[i], &e.rseg_metrics, first)?;
        let before = e.m.history_len.fetch_sub(1, Ordering::SeqCst);
        // Commit counts a log before purge can see it.
        debug_assert!(before > 0, "history length went below zero");
        e.m.purge_logs.inc();
    }
    e.m.purge_records.add(n_items);
    Ok(batch.len())
}

fn purge_record(e: &Engine, trx_id: u64, rec: &UndoRecord) -> Result<(), TrxError> {
    let t = match e.table(rec.table_id) {
        Ok(t) => t,
        Err(TrxError::NoSuchTable(_)) => return Ok(()),
        Err(err) => return Err(err),
    };
    let store = e.store();
    match rec.kind {
        UndoKind::Insert => {}
        UndoKind::DeleteMark => {
            let Some(c) = t.clustered.get(store, &rec.pk)? else {
                return Ok(());
            };
            if c.deleted && c.trx_id == trx_id {
                for (idx, sd) in &t.secondaries {
                    idx.delete_if(store, &sec_entry(&sd.key_of(&c.value), &rec.pk), |r| {
                        r.deleted
                    })?;
                }
                t.clustered
                    .delete_if(store, &rec.pk, |r| r.deleted && r.trx_id == trx_id)?;
            }
        }
        UndoKind::Update => {
            let prev = rec.prev_value.as_deref().unwrap_or_default();
            let live = versions_in_use(e, &t.clustered, &rec.pk)?;
            for (idx, sd) in &t.secondaries {
                let old_k = sd.key_of(prev);
                // A key a version still in use has (the newest, or one an
                // uncommitted transaction could roll back to) keeps its
                // entry; it is purged with that version's own change.
                if !live.iter().any(|v| sd.key_of(v) == old_k) {
                    idx.delete_if(store, &sec_entry(&old_k, &rec.pk), |r| r.deleted)?;
                }
            }
        }
    }
    Ok(())
}

/// The row values a secondary entry may still be needed for: the newest
/// version, and while that version's transaction is uncommitted, the
/// versions before it that a rollback would restore.
fn versions_in_use(
    e: &Engine,
    clustered: &millrace_btree::Index,
    pk: &[u8],
) -> Result<Vec<Vec<u8>>, TrxError> {
    let Some(mut r) = clustered.get(e.store(), pk)? else {
        return Ok(Vec::new());
    };
    let mut out = vec![r.value.clone()];
    for _ in 0..1000 {
        if r.trx_id == 0 || !e.sys.is_active(r.trx_id) {
            break;
        }
        let Some(rp) = RollPtr::decode(r.roll_ptr) else {
            break;
        };
        if rp.insert {
            break;
        }
        let u = undo::read(e.store(), rp)?;
        let Some(v) = u.prev_value else { break };
        out.push(v.clone());
        r = millrace_btree::Row {
            key: r.key,
            value: v,
            deleted: u.prev_deleted,
            trx_id: u.prev_trx_id,
            roll_ptr: u.prev_roll_ptr,
        };
    }
    Ok(out)
}

impl Engine {
    /// Truncation of undo tablespaces past `undo_truncate_bytes` (called by
    /// the purge thread): an oversized space is marked inactive; once none
    /// of its segments has an undo log in a slot or in its history, it is
    /// shrunk to its header and segment pages and its file is cut.
    pub(crate) fn truncate_undo_spaces(&self) -> Result<(), TrxError> {
        let limit = self.cfg.undo_truncate_bytes;
        if limit == 0 {
            return Ok(());
        }
        let ps = self.store.pool().page_size() as u64;
        let mut spaces: Vec<u32> = self.rsegs.iter().map(|r| r.space).collect();
        spaces.sort_unstable();
        spaces.dedup();
        for &sp in &spaces {
            let size = {
                let mut mtr = self.store.mtr()?;
                space::space_size(&mut mtr, sp)?.0
            };
            let mut inactive = unpoisoned(self.inactive_spaces.lock());
            if !inactive.contains(&sp) {
                // Keep at least one space taking new undo.
                if size as u64 * ps > limit && inactive.len() + 1 < spaces.len() {
                    tracing::info!(
                        space = sp,
                        size_mib = (size as u64 * ps) >> 20,
                        "undo tablespace past its size limit: truncating once purged"
                    );
                    inactive.insert(sp);
                }
                continue;
            }
            drop(inactive);
            let rsegs: Vec<&Rseg> = self.rsegs.iter().filter(|r| r.space == sp).collect();
            let guards = rsegs
                .iter()
                .map(|r| r.lock(&self.rseg_metrics))
                .collect::<Result<Vec<_>, _>>()?;
            if !guards.iter().all(|g| g.idle()) {
                continue;
            }
            let mut empty = true;
            for r in &rsegs {
                empty &= r.history_len(&self.store)? == 0;
            }
            if !empty {
                continue;
            }
            let new_size = rsegs.iter().map(|r| r.page).max().unwrap_or(0) + 1;
            let mut mtr = self.store.mtr()?;
            space::truncate_free_tail(&mut mtr, sp, new_size)?;
            let end = mtr.commit()?;
            drop(guards);
            if let Some(end) = end {
                self.store.truncate_space_file(sp, new_size, end)?;
            }
            unpoisoned(self.inactive_spaces.lock()).remove(&sp);
            self.m.undo_truncations.inc();
            tracing::info!(space = sp, pages = new_size, "undo tablespace truncated");
        }
        Ok(())
    }
}
