//! Transactions: `Engine::begin`, the read and write API of `Trx`, and
//! commit.
//!
//! A transaction's first write gives it an id, a slot in the active set and
//! an undo log in a rollback segment. Every change writes its undo record
//! first (the previous version), then changes the clustered record, whose
//! hidden fields then name the transaction and the undo record (the roll
//! pointer). A consistent read follows roll pointers back until it reaches a
//! version its read view sees. Commit: serialisation number and history
//! list append under the rollback segment mutex, out of the active set,
//! locks released, then the durable wait of the redo log with no latch or
//! mutex held.

use crate::config::{Isolation, UndoQuotaPolicy};
use crate::error::{unpoisoned, TrxError};
use crate::interrupt::TrxInterrupt;
use crate::kill::{KillFlag, KillReason};
use crate::lock::{LockError, LockMode};
use crate::secondary::{existing_entries, insert_entries, sec_entry};
use crate::shared::{Engine, TrxShared, TrxState};
use crate::tables::Table;
use crate::trx_sys::{pack_view, ReadView, TrxId};
use crate::undo;
use crate::undo_rec::{RollPtr, UndoKind, UndoRecord};
use millrace_btree::{Direction, Row};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A row as (primary key, value).
pub type KeyValue = (Vec<u8>, Vec<u8>);

const MAX_VERSION_CHAIN: usize = 1 << 20;

impl Engine {
    /// Starts a transaction.
    pub fn begin(self: &Arc<Self>, iso: Isolation) -> Trx {
        let view_no = Arc::new(AtomicU64::new(0));
        let view_opened_ms = Arc::new(AtomicU64::new(0));
        let shared = Arc::new(TrxShared {
            state: Mutex::new(TrxState {
                id: 0,
                slot: 0,
                view: None,
                undo: None,
                undo_no: 0,
                done: false,
                view_no: view_no.clone(),
                view_opened_ms: view_opened_ms.clone(),
            }),
            killed: KillFlag::new(),
            last_active_ms: AtomicU64::new(self.now_ms()),
            iso,
            view_no,
            view_opened_ms,
        });
        let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.open_trx.insert(handle, Arc::downgrade(&shared));
        Trx {
            e: self.clone(),
            shared,
            handle,
        }
    }

    /// The version of `row` that `view` sees, following roll pointers.
    pub(crate) fn visible(
        &self,
        row: Option<Row>,
        view: &ReadView,
    ) -> Result<Option<Vec<u8>>, TrxError> {
        let Some(mut r) = row else { return Ok(None) };
        for _ in 0..MAX_VERSION_CHAIN {
            if view.sees(r.trx_id) {
                return Ok(if r.deleted { None } else { Some(r.value) });
            }
            let Some(rp) = RollPtr::decode(r.roll_ptr) else {
                return Ok(None);
            };
            if rp.insert {
                return Ok(None);
            }
            let u = undo::read(&self.store, rp)?;
            if u.pk != r.key {
                // Never silently return another row's version.
                return Err(TrxError::Corrupt(format!(
                    "roll pointer {rp:?} names an undo record of another row"
                )));
            }
            r = Row {
                key: r.key,
                value: u.prev_value.unwrap_or_default(),
                deleted: u.prev_deleted,
                trx_id: u.prev_trx_id,
                roll_ptr: u.prev_roll_ptr,
            };
        }
        Err(TrxError::Corrupt("a version chain does not end".into()))
    }
}

/// A transaction. Each call is a statement: on a lock wait timeout the
/// statement's changes are rolled back and the transaction stays open; on a
/// deadlock (or when the engine rolled it back) the whole transaction is
/// over and every later call fails.
pub struct Trx {
    e: Arc<Engine>,
    shared: Arc<TrxShared>,
    handle: u64,
}

struct Call<'a> {
    e: &'a Engine,
    st: std::sync::MutexGuard<'a, TrxState>,
    iso: Isolation,
    killed: &'a KillFlag,
}

/// What a poisoned transaction state means: a call panicked while it
/// changed pages and undo, so nothing about them is known any more.
const PANICKED: &str = "a call panicked in the middle of a transaction";

impl Trx {
    /// The transaction's state, or the engine stops if a panic left it
    /// poisoned (see `PANICKED`).
    fn state(&self) -> Result<std::sync::MutexGuard<'_, TrxState>, TrxError> {
        self.shared
            .state
            .lock()
            .map_err(|_| self.e.fail(PANICKED.into()))
    }

    fn call(&self) -> Result<Call<'_>, TrxError> {
        let st = self.state()?;
        self.e.check_alive()?;
        let reason = self.shared.killed.get();
        if reason != KillReason::None || st.done {
            return Err(TrxError::RolledBack(reason.message()));
        }
        self.shared
            .last_active_ms
            .store(self.e.now_ms(), Ordering::Relaxed);
        Ok(Call {
            e: &self.e,
            st,
            iso: self.shared.iso,
            killed: &self.shared.killed,
        })
    }

    /// Runs a statement; a lock wait timeout rolls back just the statement,
    /// a deadlock the whole transaction.
    fn statement<T>(
        &self,
        f: impl FnOnce(&mut Call<'_>) -> Result<T, TrxError>,
    ) -> Result<T, TrxError> {
        let mut c = self.call()?;
        let stmt_start = c.st.undo_no;
        #[cfg(test)]
        injected_panic();
        let r = f(&mut c);
        self.shared
            .last_active_ms
            .store(self.e.now_ms(), Ordering::Relaxed);
        match r {
            Err(TrxError::LockWaitTimeout) => {
                self.e.rollback_to(&mut c.st, stmt_start)?;
                Err(TrxError::LockWaitTimeout)
            }
            // Raised below the engine (a poisoned rollback segment): the
            // engine stops as a whole.
            Err(TrxError::EngineFailed(why)) => Err(self.e.fail(why)),
            Err(e @ (TrxError::Deadlock | TrxError::RolledBack(_))) => {
                let _ = self.e.rollback_state(&mut c.st);
                self.shared.killed.set(KillReason::Deadlock);
                Err(e)
            }
            r => r,
        }
    }

    pub fn get(&self, table: u32, pk: &[u8]) -> Result<Option<Vec<u8>>, TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            c.view()?;
            let row = t.clustered.get(c.e.store(), pk)?;
            c.e.visible(row, c.st.view.as_ref().expect("view opened"))
        })
    }

    /// A locking read (SELECT ... FOR UPDATE or LOCK IN SHARE MODE): locks
    /// the row, then reads its latest committed (or own) version.
    pub fn get_locked(
        &self,
        table: u32,
        pk: &[u8],
        mode: LockMode,
    ) -> Result<Option<Vec<u8>>, TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            c.ensure_rw()?;
            c.lock_row(&t, pk, mode)?;
            Ok(t.clustered
                .get(c.e.store(), pk)?
                .filter(|r| !r.deleted)
                .map(|r| r.value))
        })
    }

    /// Inserts a new row; `Duplicate` (MySQL 1062) if the key exists.
    pub fn insert(&self, table: u32, pk: &[u8], value: &[u8]) -> Result<(), TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            c.write_prologue()?;
            c.insert(&t, pk, value)
        })
    }

    /// Changes an existing row; false if there is none.
    pub fn update(&self, table: u32, pk: &[u8], value: &[u8]) -> Result<bool, TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            c.write_prologue()?;
            c.update(&t, pk, value)
        })
    }

    /// Insert or update.
    pub fn put(&self, table: u32, pk: &[u8], value: &[u8]) -> Result<(), TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            c.write_prologue()?;
            if !c.update(&t, pk, value)? {
                c.insert(&t, pk, value)?;
            }
            Ok(())
        })
    }

    /// Deletes a row (delete-mark; purge removes it later); false if absent.
    pub fn delete(&self, table: u32, pk: &[u8]) -> Result<bool, TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            c.write_prologue()?;
            c.delete(&t, pk)
        })
    }

    /// A consistent range scan of the primary key, in key order.
    pub fn scan(
        &self,
        table: u32,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<KeyValue>, TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            c.view()?;
            let store = c.e.store();
            let start = match from {
                Bound::Included(k) | Bound::Excluded(k) => Some(k),
                Bound::Unbounded => None,
            };
            let mut cur = t.clustered.cursor(start, Direction::Forward);
            let mut out = Vec::new();
            while out.len() < limit {
                let Some(row) = cur.next(store)? else { break };
                if matches!(from, Bound::Excluded(k) if row.key.as_slice() == k) {
                    continue;
                }
                let past = match to {
                    Bound::Included(k) => row.key.as_slice() > k,
                    Bound::Excluded(k) => row.key.as_slice() >= k,
                    Bound::Unbounded => false,
                };
                if past {
                    break;
                }
                let key = row.key.clone();
                if let Some(v) = c.e.visible(Some(row), c.st.view.as_ref().expect("view"))? {
                    out.push((key, v));
                }
            }
            Ok(out)
        })
    }

    /// A consistent scan of secondary index `index` for keys in
    /// [from, to]: rows (pk, value) whose visible version has such a key.
    pub fn scan_secondary(
        &self,
        table: u32,
        index: usize,
        from: &[u8],
        to: &[u8],
        limit: usize,
    ) -> Result<Vec<KeyValue>, TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            let (idx, sd) = t
                .secondaries
                .get(index)
                .ok_or(TrxError::NoSuchTable(table))?;
            c.view()?;
            let store = c.e.store();
            let mut cur = idx.cursor(Some(from), Direction::Forward);
            let mut out = Vec::new();
            while out.len() < limit {
                let Some(entry) = cur.next(store)? else { break };
                let pk = entry.value;
                let Some(skey) = entry
                    .key
                    .len()
                    .checked_sub(pk.len())
                    .map(|n| &entry.key[..n])
                else {
                    return Err(TrxError::Corrupt(
                        "secondary entry shorter than its primary key".into(),
                    ));
                };
                if skey > to {
                    break;
                }
                let row = t.clustered.get(store, &pk)?;
                if let Some(v) = c.e.visible(row, c.st.view.as_ref().expect("view"))? {
                    if sd.key_of(&v) == skey {
                        out.push((pk, v));
                    }
                }
            }
            Ok(out)
        })
    }

    /// The unique check of a row about to get key `skey` in secondary index
    /// `index` (an insert, or an update that changes the key): whether a
    /// row other than `pk` has that key, by a locking current read rather
    /// than through the snapshot, as InnoDB's insert into a unique index.
    /// It takes the key value's exclusive lock (held to the end of the
    /// transaction, so two transactions inserting one value take turns),
    /// then a shared lock on each other row that has or had the key
    /// (waiting for its writer to commit or roll back), and reads the
    /// row's latest version once locked. A transaction's own delete of the
    /// value counts as gone (delete, then insert the same value, works).
    /// The caller writes the row afterwards in the same transaction. Lock
    /// wait timeouts and deadlocks are those of any row lock.
    pub fn unique_key_taken(
        &self,
        table: u32,
        index: usize,
        skey: &[u8],
        pk: &[u8],
    ) -> Result<bool, TrxError> {
        self.statement(|c| {
            let t = c.e.table(table)?;
            let (idx, sd) = t
                .secondaries
                .get(index)
                .ok_or(TrxError::NoSuchTable(table))?;
            c.ensure_rw()?;
            let me = c.st.id;
            let index_no = u32::try_from(index).map_err(|_| TrxError::NoSuchTable(table))?;
            c.e.locks
                .lock_value(
                    me,
                    t.def.id,
                    index_no,
                    skey,
                    LockMode::Exclusive,
                    c.lock_timeout(),
                )
                .map_err(lock_error)?;
            // Every row whose latest version (or one a rollback could
            // restore) has the key has an entry (skey, pk), live or
            // delete-marked; purge removes only entries no such version
            // has. The value's lock keeps new ones from appearing.
            let store = c.e.store().clone();
            let mut cur = idx.cursor(Some(skey), Direction::Forward);
            let mut others = Vec::new();
            while let Some(entry) = cur.next(&store)? {
                if !entry.key.starts_with(skey) {
                    break;
                }
                let other = entry.value;
                if entry.key.len() == skey.len() + other.len() && other.as_slice() != pk {
                    others.push(other);
                }
            }
            for other in others {
                c.lock_row(&t, &other, LockMode::Shared)?;
                if let Some(r) = t.clustered.get(&store, &other)? {
                    if !r.deleted && sd.key_of(&r.value) == skey {
                        return Ok(true);
                    }
                }
            }
            Ok(false)
        })
    }

    /// Commits: durable at the redo log's level when it returns.
    pub fn commit(self) -> Result<(), TrxError> {
        let mut c = self.call()?;
        let e = c.e;
        let end = match c.st.undo.as_ref() {
            Some(log) => {
                let r = &e.rsegs[log.rseg as usize];
                let slot = c.st.slot;
                let f = undo::finish(
                    e.store(),
                    r,
                    &e.rseg_metrics,
                    log,
                    undo::Ending::Commit,
                    &|| e.sys.assign_no(slot),
                    &e.m.history_len,
                )
                // Committed or not, nobody knows: stop (with the log and
                // the locks kept) and let the next open decide from the
                // log's state.
                .map_err(|err| e.fail(format!("commit of trx {} failed: {err}", c.st.id)))?;
                c.st.undo = None;
                if f.to_history {
                    e.wake_purge();
                }
                f.end_lsn
            }
            None => None,
        };
        e.end(&mut c.st);
        e.m.commits.inc();
        drop(c);
        if let Some(end) = end {
            e.store().log().wait_durable(end)?;
        }
        Ok(())
    }

    /// Rolls the transaction back. If that cannot finish (an undo record
    /// that cannot be applied), the engine stops with the transaction
    /// still active and locked, for the next open to roll back: see
    /// docs/design.md, "Transactions under failure". Never panics, also
    /// when a panic left the transaction's state poisoned.
    pub fn rollback(self) -> Result<(), TrxError> {
        let mut st = self.state()?;
        if st.done {
            return Ok(());
        }
        self.e.rollback_state(&mut st)
    }

    /// A statement savepoint: where `rollback_to_savepoint` returns. The SQL
    /// layer takes one before each statement that makes several engine
    /// calls (a multi-row INSERT), so that a failing statement undoes only
    /// itself, as in MySQL.
    pub fn savepoint(&self) -> Result<u64, TrxError> {
        Ok(self.call()?.st.undo_no)
    }

    /// Undoes this transaction's changes made since `savepoint`; its locks
    /// stay held (as InnoDB's statement rollback does).
    pub fn rollback_to_savepoint(&self, savepoint: u64) -> Result<(), TrxError> {
        let mut c = self.call()?;
        self.e.rollback_to(&mut c.st, savepoint)
    }

    /// The handle another thread uses to interrupt this transaction (KILL).
    pub fn interrupt_handle(&self) -> TrxInterrupt {
        TrxInterrupt::new(self.e.clone(), self.shared.clone())
    }

    /// This transaction's id (0 until its first write).
    pub fn id(&self) -> TrxId {
        // Reading a number is safe whatever a panic left half-done.
        unpoisoned(self.shared.state.lock()).id
    }
}

impl Drop for Trx {
    /// Rolls back what is left; runs while a panic unwinds too, so nothing
    /// here may panic (a second panic aborts the process).
    fn drop(&mut self) {
        if let Ok(mut st) = self.state() {
            if !st.done {
                let _ = self.e.rollback_state(&mut st);
            }
        }
        self.e.open_trx.remove(self.handle);
    }
}

#[cfg(test)]
thread_local! {
    /// A test's panic, raised by this thread's next statement while it holds
    /// the transaction's state (as a bug in an engine call would).
    pub(crate) static PANIC_IN_NEXT_STATEMENT: std::cell::Cell<bool> =
        const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn injected_panic() {
    if PANIC_IN_NEXT_STATEMENT.with(|p| p.replace(false)) {
        panic!("a panic injected into an engine call");
    }
}

fn lock_error(e: LockError) -> TrxError {
    match e {
        LockError::Timeout => TrxError::LockWaitTimeout,
        LockError::Deadlock => TrxError::Deadlock,
        LockError::Cancelled => TrxError::RolledBack("cancelled"),
    }
}

impl Call<'_> {
    /// The read view for this statement (RR: the transaction's; RC: new).
    fn view(&mut self) -> Result<(), TrxError> {
        if self.iso == Isolation::ReadCommitted {
            if let Some(v) = self.st.view.take() {
                self.e.sys.close_view(&v);
            }
        }
        if self.st.view.is_none() {
            let v = self.e.sys.open_view(self.st.id)?;
            self.st
                .view_no
                .store(pack_view(v.slot, v.generation), Ordering::SeqCst);
            // +1: a view opened at engine time 0 still reads as open.
            self.st
                .view_opened_ms
                .store(self.e.now_ms() + 1, Ordering::SeqCst);
            self.st.view = Some(v);
        }
        Ok(())
    }

    fn ensure_rw(&mut self) -> Result<(), TrxError> {
        if self.st.id == 0 {
            let (id, slot) = self.e.sys.register()?;
            self.st.id = id;
            self.killed.note_id(id);
            // An interrupt that came before the id was known could not
            // cancel a lock wait by id (`TrxInterrupt::interrupt` reads the
            // id after setting the flag; this reads the flag after setting
            // the id): the next wait is cancelled here instead.
            if self.killed.get() == KillReason::Interrupted {
                self.e.locks.cancel(id);
            }
            self.st.slot = slot;
            self.e.limits.keep_ahead(self.e.store(), &self.e.sys)?;
            if let Some(v) = &mut self.st.view {
                // A view opened while read-only now also sees our changes.
                v.creator = id;
            }
        }
        Ok(())
    }

    fn write_prologue(&mut self) -> Result<(), TrxError> {
        self.ensure_rw()?;
        self.e.purge_lag_delay();
        if self.e.cfg.undo_quota_policy == UndoQuotaPolicy::WaitWriters {
            self.e.wait_for_quota()?;
        }
        Ok(())
    }

    fn append_undo(&mut self, rec: &mut UndoRecord) -> Result<u64, TrxError> {
        if self.st.undo.is_none() {
            let n = self.e.rsegs.len();
            let start = self.e.next_rseg.fetch_add(1, Ordering::Relaxed);
            let inactive = unpoisoned(self.e.inactive_spaces.lock()).clone();
            let mut log = None;
            // Active spaces first; an inactive one only if nothing else has
            // a free slot.
            let order = (0..n)
                .map(|i| (start + i) % n)
                .filter(|&i| !inactive.contains(&self.e.rsegs[i].space))
                .chain(
                    (0..n)
                        .map(|i| (start + i) % n)
                        .filter(|&i| inactive.contains(&self.e.rsegs[i].space)),
                );
            for i in order {
                let r = &self.e.rsegs[i];
                if let Some(l) =
                    undo::create_log(self.e.store(), r, &self.e.rseg_metrics, self.st.id)?
                {
                    log = Some(l);
                    break;
                }
            }
            self.st.undo = Some(log.ok_or(TrxError::TooManyTransactions(n))?);
        }
        rec.undo_no = self.st.undo_no;
        self.st.undo_no += 1;
        let log = self.st.undo.as_mut().expect("created above");
        Ok(undo::append(self.e.store(), log, rec)?.encode())
    }

    /// Writes the undo record of a change to row `pk`: the version it
    /// replaces (`prev`; None for a new row) and the secondary-entry bits.
    /// Returns the roll pointer the changed record will carry.
    fn log_change(
        &mut self,
        kind: UndoKind,
        t: &Table,
        pk: &[u8],
        prev: Option<&Row>,
        sec_existed: u64,
    ) -> Result<u64, TrxError> {
        debug_assert_eq!(kind == UndoKind::Insert, prev.is_none());
        let mut rec = UndoRecord {
            kind,
            undo_no: 0,
            table_id: t.def.id,
            pk: pk.to_vec(),
            prev_trx_id: prev.map_or(0, |r| r.trx_id),
            prev_roll_ptr: prev.map_or(0, |r| r.roll_ptr),
            prev_deleted: prev.is_some_and(|r| r.deleted),
            prev_value: prev.map(|r| r.value.clone()),
            sec_existed,
        };
        self.append_undo(&mut rec)
    }

    /// Locks a row, converting another active transaction's implicit lock
    /// (its id in the record) first.
    fn lock_row(&mut self, t: &Table, pk: &[u8], mode: LockMode) -> Result<(), TrxError> {
        let me = self.st.id;
        if let Some(r) = t.clustered.get(self.e.store(), pk)? {
            if r.trx_id != me && r.trx_id != 0 {
                self.e.sys.with_active(r.trx_id, || {
                    self.e.locks.grant_implicit(r.trx_id, t.def.id, pk)
                });
            }
        }
        self.e
            .locks
            .lock(me, t.def.id, pk, mode, self.lock_timeout())
            .map_err(lock_error)
    }

    fn lock_timeout(&self) -> Duration {
        Duration::from_millis(self.e.settings.lock_wait_timeout_ms.load(Ordering::Relaxed))
    }

    fn insert(&mut self, t: &Table, pk: &[u8], value: &[u8]) -> Result<(), TrxError> {
        let store = self.e.store().clone();
        let me = self.st.id;
        for _ in 0..1000 {
            match t.clustered.get(&store, pk)? {
                None => {
                    let sec = existing_entries(&store, t, value, pk, None)?;
                    let rp = self.log_change(UndoKind::Insert, t, pk, None, sec)?;
                    match t.clustered.insert(&store, pk, value, me, rp) {
                        Ok(()) => {
                            insert_entries(&store, t, value, pk, None)?;
                            return Ok(());
                        }
                        // Someone inserted it meanwhile; our undo record is
                        // harmless (rollback only touches our own versions).
                        Err(millrace_btree::Error::Duplicate) => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
                Some(r) if r.trx_id == me && !r.deleted => return Err(TrxError::Duplicate),
                Some(_) => {
                    self.lock_row(t, pk, LockMode::Exclusive)?;
                    let Some(r) = t.clustered.get(&store, pk)? else {
                        continue;
                    };
                    if !r.deleted {
                        return Err(TrxError::Duplicate);
                    }
                    // Insert over a delete-marked row: an update of it.
                    let sec = existing_entries(&store, t, value, pk, None)?;
                    let rp = self.log_change(UndoKind::Update, t, pk, Some(&r), sec)?;
                    if !t
                        .clustered
                        .update_full(&store, pk, value, Some(false), me, rp)?
                    {
                        // Purge removed the delete-marked record meanwhile:
                        // insert afresh (the undo record written is never
                        // applied: rollback skips versions not its own).
                        continue;
                    }
                    insert_entries(&store, t, value, pk, None)?;
                    return Ok(());
                }
            }
        }
        Err(TrxError::Corrupt("insert kept racing".into()))
    }

    fn update(&mut self, t: &Table, pk: &[u8], value: &[u8]) -> Result<bool, TrxError> {
        let store = self.e.store().clone();
        let me = self.st.id;
        self.lock_row(t, pk, LockMode::Exclusive)?;
        let Some(r) = t.clustered.get(&store, pk)? else {
            return Ok(false);
        };
        if r.deleted {
            return Ok(false);
        }
        let sec = existing_entries(&store, t, value, pk, Some(&r.value))?;
        let rp = self.log_change(UndoKind::Update, t, pk, Some(&r), sec)?;
        t.clustered.update(&store, pk, value, me, rp)?;
        for (idx, sd) in &t.secondaries {
            let (old_k, new_k) = (sd.key_of(&r.value), sd.key_of(value));
            if old_k != new_k {
                idx.set_deleted(&store, &sec_entry(&old_k, pk), true, 0, 0)?;
            }
        }
        insert_entries(&store, t, value, pk, Some(&r.value))?;
        Ok(true)
    }

    fn delete(&mut self, t: &Table, pk: &[u8]) -> Result<bool, TrxError> {
        let store = self.e.store().clone();
        let me = self.st.id;
        self.lock_row(t, pk, LockMode::Exclusive)?;
        let Some(r) = t.clustered.get(&store, pk)? else {
            return Ok(false);
        };
        if r.deleted {
            return Ok(false);
        }
        let rp = self.log_change(UndoKind::DeleteMark, t, pk, Some(&r), 0)?;
        t.clustered.set_deleted(&store, pk, true, me, rp)?;
        for (idx, sd) in &t.secondaries {
            idx.set_deleted(&store, &sec_entry(&sd.key_of(&r.value), pk), true, 0, 0)?;
        }
        Ok(true)
    }
}
