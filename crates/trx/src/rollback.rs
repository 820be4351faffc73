//! Rollback: undoing a transaction's changes from its undo log, newest
//! first, to a savepoint (a statement) or entirely (the transaction, which
//! then ends), and at open the rollback of every transaction that was
//! active at the crash.

use crate::error::TrxError;
use crate::secondary::{ensure_entry, sec_entry};
use crate::shared::{Engine, TrxState};
use crate::trx_sys::TrxId;
use crate::undo::{self, UndoLog};
use crate::undo_rec::{UndoKind, UndoRecord};

impl Engine {
    /// Undoes one change of transaction `trx_id` (rollback and recovery).
    /// Idempotent: a record no longer carrying `trx_id` is left alone.
    pub(crate) fn undo_one(&self, rec: &UndoRecord, trx_id: TrxId) -> Result<(), TrxError> {
        let t = match self.table(rec.table_id) {
            Ok(t) => t,
            // Dropped since: nothing left to undo.
            Err(TrxError::NoSuchTable(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let store = &*self.store;
        let Some(cur) = t.clustered.get(store, &rec.pk)? else {
            return Ok(());
        };
        if cur.trx_id != trx_id {
            return Ok(());
        }
        match rec.kind {
            UndoKind::Insert => {
                for (i, (idx, sd)) in t.secondaries.iter().enumerate() {
                    let e = sec_entry(&sd.key_of(&cur.value), &rec.pk);
                    if rec.sec_existed & (1 << i) != 0 {
                        idx.set_deleted(store, &e, true, 0, 0)?;
                    } else {
                        idx.delete(store, &e)?;
                    }
                }
                t.clustered
                    .delete_if(store, &rec.pk, |r| r.trx_id == trx_id)?;
            }
            UndoKind::Update | UndoKind::DeleteMark => {
                let prev = rec.prev_value.as_deref().unwrap_or_default();
                for (i, (idx, sd)) in t.secondaries.iter().enumerate() {
                    let (new_k, old_k) = (sd.key_of(&cur.value), sd.key_of(prev));
                    if new_k != old_k {
                        let e = sec_entry(&new_k, &rec.pk);
                        if rec.sec_existed & (1 << i) != 0 {
                            idx.set_deleted(store, &e, true, 0, 0)?;
                        } else {
                            idx.delete(store, &e)?;
                        }
                    }
                    let old_e = sec_entry(&old_k, &rec.pk);
                    if rec.prev_deleted {
                        idx.set_deleted(store, &old_e, true, 0, 0)?;
                    } else {
                        // The restored version needs its entry live.
                        ensure_entry(idx, store, &old_e, &rec.pk)?;
                    }
                }
                t.clustered.update_full(
                    store,
                    &rec.pk,
                    prev,
                    Some(rec.prev_deleted),
                    rec.prev_trx_id,
                    rec.prev_roll_ptr,
                )?;
            }
        }
        Ok(())
    }

    /// Rolls back every transaction that was active at the crash.
    pub(crate) fn recover_in_flight(
        &self,
        in_flight: Vec<(u16, u16, u32)>,
    ) -> Result<(), TrxError> {
        for (rseg, slot, first) in in_flight {
            let r = &self.rsegs[rseg as usize];
            let h = undo::log_header(&self.store, r.space, first)?;
            let recs = undo::records_newest_first(&self.store, r.space, first)?;
            tracing::info!(
                trx_id = h.trx_id,
                records = recs.len(),
                "rolling back a transaction active at the crash"
            );
            for (_, rec) in &recs {
                self.undo_one(rec, h.trx_id)?;
            }
            let log = UndoLog {
                rseg,
                space: r.space,
                first_page: first,
                last_page: h.last_page,
                slot,
                has_updates: h.has_updates,
                records: recs.len() as u64,
                pages: 0,
            };
            undo::finish(
                &self.store,
                r,
                &self.rseg_metrics,
                &log,
                undo::Ending::RecoveryRollback,
                &|| unreachable!("a recovery rollback frees its log"),
                &self.m.history_len,
            )?;
            self.m.rollbacks.inc();
        }
        Ok(())
    }

    /// Ends a transaction: rollback everything it did, free its undo log,
    /// leave the active set, release locks, close its view. Only once all
    /// of its changes are undone: a rollback that fails half-way stops the
    /// engine (`fail`) and leaves the transaction as it is (active, locks
    /// held, its undo log in its slot), since ending it would make the
    /// changes not undone look committed; the next open rolls it back.
    pub(crate) fn rollback_state(&self, st: &mut TrxState) -> Result<(), TrxError> {
        self.check_alive()?;
        self.rollback_to(st, 0)?;
        if let Some(log) = st.undo.as_ref() {
            let r = &self.rsegs[log.rseg as usize];
            let slot = st.slot;
            let f = undo::finish(
                &self.store,
                r,
                &self.rseg_metrics,
                log,
                undo::Ending::Rollback,
                &|| self.sys.assign_no(slot),
                &self.m.history_len,
            )
            .map_err(|e| self.fail(format!("ending the rollback of trx {}: {e}", st.id)))?;
            st.undo = None;
            if f.to_history {
                self.wake_purge();
            }
        }
        self.end(st);
        self.m.rollbacks.inc();
        Ok(())
    }

    /// Undoes the changes from `undo_no` on (a statement, a savepoint, or
    /// everything). Any error stops the engine: some changes may be undone
    /// and others not, and only recovery from the undo log can finish.
    pub(crate) fn rollback_to(&self, st: &mut TrxState, undo_no: u64) -> Result<(), TrxError> {
        self.check_alive()?;
        let Some(log) = &st.undo else { return Ok(()) };
        let undone =
            undo::records_newest_first(&self.store, log.space, log.first_page).and_then(|recs| {
                recs.iter()
                    .filter(|(_, r)| r.undo_no >= undo_no)
                    .try_for_each(|(_, rec)| self.undo_one(rec, st.id))
            });
        undone.map_err(|e| self.fail(format!("rollback of trx {} failed: {e}", st.id)))
    }
}
