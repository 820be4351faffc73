//! The embedded transactional engine: open a data directory (recovering it),
//! create tables, run transactions.
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

use crate::catalog::{self, SecondaryDef, TableDef};
use crate::lock::{LockError, LockManager, LockMode};
use crate::sys::{ReadView, TrxId, TrxSys};
use crate::undo::{self, Rseg, RsegMetrics, UndoLog};
use crate::undo_rec::{RollPtr, UndoKind, UndoRecord};
use crate::{Durability, Isolation, TrxConfig, TrxError, UndoQuotaPolicy};
use millrace_btree::{Direction, Index, IndexDef, Row};
use millrace_buf::{space, PageStore};
use millrace_io::Storage;
use millrace_metrics::{Counter, Registry};
use millrace_sys::cpu::CpuBudget;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

/// A row as (primary key, value).
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// Ids and serial numbers are persisted in blocks of this size.
const ID_BLOCK: u64 = 1 << 16;
const MAX_VERSION_CHAIN: usize = 1 << 20;

pub struct Table {
    pub def: TableDef,
    pub(crate) clustered: Index,
    pub(crate) secondaries: Vec<(Index, SecondaryDef)>,
}

impl Table {
    fn open(def: TableDef) -> Table {
        Table {
            clustered: Index::open(def.clustered),
            secondaries: def
                .secondaries
                .iter()
                .map(|s| (Index::open(s.index), s.clone()))
                .collect(),
            def,
        }
    }
}

/// Makes a secondary entry present and not delete-marked. Insert, or unmark
/// an existing one; purge may remove a delete-marked entry between the two,
/// so retry until one of them took effect.
pub(crate) fn ensure_entry(
    idx: &Index,
    store: &PageStore,
    entry: &[u8],
    pk: &[u8],
) -> Result<(), TrxError> {
    for _ in 0..1000 {
        match idx.insert(store, entry, pk, 0, 0) {
            Ok(()) => return Ok(()),
            Err(millrace_btree::Error::Duplicate) => {
                if idx.set_deleted(store, entry, false, 0, 0)? {
                    return Ok(());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(TrxError::Corrupt("a secondary entry kept vanishing".into()))
}

/// Secondary entry key: the secondary key, then the primary key (unique).
fn sec_entry(skey: &[u8], pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(skey.len() + pk.len());
    k.extend_from_slice(skey);
    k.extend_from_slice(pk);
    k
}

pub(crate) struct TrxMetrics {
    pub commits: Arc<Counter>,
    pub rollbacks: Arc<Counter>,
    pub history_len: Arc<AtomicU64>,
    pub purge_delay_count: Arc<Counter>,
    pub purge_delay_us: Arc<Counter>,
    pub purge_records: Arc<Counter>,
    pub purge_logs: Arc<Counter>,
    pub quota_actions: Arc<Counter>,
    pub idle_timeouts: Arc<Counter>,
    pub undo_truncations: Arc<Counter>,
    pub writer_quota_waits: Arc<Counter>,
}

/// Why a transaction was rolled back by the engine rather than its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum KillReason {
    None = 0,
    /// Its read view was the oldest when the undo quota was exceeded.
    UndoQuota = 1,
    /// Idle in a transaction longer than the timeout.
    IdleTimeout = 2,
    /// Chosen as a deadlock victim.
    Deadlock = 3,
}

pub(crate) struct TrxState {
    id: TrxId,
    slot: usize,
    view: Option<ReadView>,
    undo: Option<UndoLog>,
    undo_no: u64,
    done: bool,
    view_no: Arc<AtomicU64>,
    view_opened_ms: Arc<AtomicU64>,
}

/// Shared between a transaction's owner and the engine's background
/// policies (which may roll it back while it is idle).
pub(crate) struct TrxShared {
    pub(crate) state: Mutex<TrxState>,
    pub(crate) killed: AtomicU8,
    pub(crate) last_active_ms: AtomicU64,
    pub(crate) iso: Isolation,
    /// The open read view's serialisation limit (0: none), readable without
    /// the state mutex (the undo quota policy looks for the oldest).
    pub(crate) view_no: Arc<AtomicU64>,
    /// When the open read view was made (engine clock, ms; 0: none).
    pub(crate) view_opened_ms: Arc<AtomicU64>,
}

/// Every open transaction, for the background policies (idle timeout,
/// undo quota, oldest view age). Sharded: beginning and ending a
/// transaction, read-only ones included, takes no global lock.
pub(crate) struct OpenTrx {
    shards: Box<[Mutex<OpenShard>]>,
}

type OpenShard = HashMap<u64, Weak<TrxShared>>;

impl OpenTrx {
    const SHARDS: usize = 64;

    fn new() -> Self {
        Self {
            shards: (0..Self::SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
        }
    }
    fn shard(&self, handle: u64) -> &Mutex<OpenShard> {
        &self.shards[handle as usize % Self::SHARDS]
    }
    fn insert(&self, handle: u64, t: Weak<TrxShared>) {
        self.shard(handle)
            .lock()
            .expect("poisoned")
            .insert(handle, t);
    }
    fn remove(&self, handle: u64) {
        self.shard(handle).lock().expect("poisoned").remove(&handle);
    }
    /// The transactions open now (one shard at a time).
    pub(crate) fn all(&self) -> Vec<Arc<TrxShared>> {
        self.shards
            .iter()
            .flat_map(|s| {
                s.lock()
                    .expect("poisoned")
                    .values()
                    .filter_map(|w| w.upgrade())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

pub struct Engine {
    /// The settings that may change while the engine runs (SET GLOBAL).
    settings: RuntimeSettings,
    store: Arc<PageStore>,
    pub(crate) sys: TrxSys,
    pub(crate) locks: LockManager,
    pub(crate) rsegs: Vec<Rseg>,
    pub(crate) rseg_metrics: RsegMetrics,
    tables: RwLock<HashMap<u32, Arc<Table>>>,
    next_rseg: AtomicUsize,
    pub(crate) cfg: TrxConfig,
    /// Persisted limits for ids and serial numbers: read on every
    /// transaction's first write (atomics), moved under `limits_update`.
    id_limit: AtomicU64,
    no_limit: AtomicU64,
    limits_update: Mutex<()>,
    pub(crate) m: TrxMetrics,
    /// Every open transaction (read-only ones with a view too), by handle.
    pub(crate) open_trx: OpenTrx,
    next_handle: AtomicU64,
    started: Instant,
    pub(crate) shutting_down: AtomicBool,
    /// wait_writers policy: writers wait while set.
    pub(crate) writers_blocked: (Mutex<bool>, Condvar),
    pub(crate) purge_wake: (Mutex<bool>, Condvar),
    /// Purge's last round found history it may not purge yet (a read view
    /// holds it back): DML delay would not help purge then.
    pub(crate) purge_blocked_by_view: AtomicBool,
    /// Undo spaces waiting to be truncated: no new undo logs go there.
    pub(crate) inactive_spaces: Mutex<std::collections::HashSet<u32>>,
    purge_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    registry: Arc<Registry>,
}

impl Engine {
    /// Opens (or creates) the engine in `storage`: page store recovery, then
    /// the transaction layer's pages, then every transaction that was active
    /// at the crash is rolled back from its undo log, then purge starts.
    pub fn open(
        storage: Arc<dyn Storage>,
        cfg: TrxConfig,
        cpu: Arc<CpuBudget>,
        registry: Arc<Registry>,
    ) -> Result<Arc<Engine>, TrxError> {
        let effective_cpus = cpu.snapshot().effective_cpus;
        let (store, _report) = PageStore::open(storage, cfg.store.clone(), cpu, &registry)?;
        let fresh = !catalog::initialised(&store)?;
        if fresh {
            catalog::init(&store)?;
            let (n_spaces, n_rsegs) = cfg.undo_layout(effective_cpus, store.pool().page_size());
            let mut rsegs = Vec::new();
            let mut spaces = Vec::new();
            for _ in 0..n_spaces {
                let mut mtr = store.mtr()?;
                let id = space::next_space_id(&mut mtr)?;
                space::create_space(&mut mtr, id)?;
                mtr.commit()?;
                spaces.push(id);
            }
            for i in 0..n_rsegs {
                let mut mtr = store.mtr()?;
                let r = Rseg::create(&mut mtr, i as u16, spaces[i as usize % spaces.len()])?;
                mtr.commit()?;
                rsegs.push((r.space, r.page));
            }
            catalog::write_rsegs(&store, &rsegs, n_spaces as u16)?;
            let end = catalog::write_limits(&store, ID_BLOCK, ID_BLOCK)?;
            if let Some(end) = end {
                store.log().wait_flushed(end)?;
            }
        }
        let sys_page = catalog::read_trx_sys(&store)?;
        let mut rsegs = Vec::new();
        let mut in_flight = Vec::new();
        for (i, &(space_id, page)) in sys_page.rsegs.iter().enumerate() {
            let (r, used) = Rseg::open(&store, i as u16, space_id, page)?;
            for (slot, first) in used {
                in_flight.push((i as u16, slot, first));
            }
            rsegs.push(r);
        }
        if rsegs.is_empty() {
            return Err(TrxError::Corrupt("no rollback segments".into()));
        }
        let c = |name, help| registry.counter("trx", name, help);
        let history_len = Arc::new(AtomicU64::new(0));
        let m = TrxMetrics {
            commits: c("trx_commits", "transactions committed"),
            rollbacks: c("trx_rollbacks", "transactions rolled back"),
            history_len: history_len.clone(),
            purge_delay_count: c(
                "trx_purge_lag_delays",
                "DML statements delayed for purge lag",
            ),
            purge_delay_us: c(
                "trx_purge_lag_delay_us",
                "total DML delay for purge lag, us",
            ),
            purge_records: c("trx_purge_records", "undo records purged"),
            purge_logs: c("trx_purge_logs", "undo logs purged and freed"),
            quota_actions: c("trx_undo_quota_actions", "undo quota policy actions taken"),
            idle_timeouts: c("trx_idle_timeouts", "transactions rolled back for idling"),
            undo_truncations: c("trx_undo_truncations", "undo tablespaces truncated"),
            writer_quota_waits: c(
                "trx_undo_quota_writer_waits",
                "writers made to wait by the undo quota",
            ),
        };
        let rseg_metrics = RsegMetrics {
            waits: c(
                "trx_rseg_latch_waits",
                "rollback segment mutex acquisitions that waited",
            ),
            wait_ns: c(
                "trx_rseg_latch_wait_ns",
                "time waiting for rollback segment mutexes, ns",
            ),
        };
        let tables: HashMap<u32, Arc<Table>> = catalog::read_tables(&store)?
            .into_iter()
            .map(|d| (d.id, Arc::new(Table::open(d))))
            .collect();
        let engine = Arc::new(Engine {
            settings: RuntimeSettings::from_config(&cfg),
            sys: TrxSys::new(sys_page.id_limit, sys_page.no_limit, cfg.max_active_trx),
            locks: LockManager::new(&registry),
            rseg_metrics,
            tables: RwLock::new(tables),
            next_rseg: AtomicUsize::new(0),
            id_limit: AtomicU64::new(sys_page.id_limit),
            no_limit: AtomicU64::new(sys_page.no_limit),
            limits_update: Mutex::new(()),
            m,
            open_trx: OpenTrx::new(),
            next_handle: AtomicU64::new(1),
            started: Instant::now(),
            shutting_down: AtomicBool::new(false),
            writers_blocked: (Mutex::new(false), Condvar::new()),
            purge_wake: (Mutex::new(false), Condvar::new()),
            inactive_spaces: Mutex::new(std::collections::HashSet::new()),
            purge_blocked_by_view: AtomicBool::new(false),
            purge_thread: Mutex::new(None),
            registry: registry.clone(),
            rsegs,
            store,
            cfg,
        });
        // Counting resumes above everything used before the restart.
        engine.persist_limits(sys_page.id_limit + ID_BLOCK, sys_page.no_limit + ID_BLOCK)?;
        engine.recover_in_flight(in_flight)?;
        let mut hl = 0;
        for r in &engine.rsegs {
            hl += r.history_len(&engine.store)?;
        }
        history_len.store(hl, Ordering::SeqCst);
        engine.register_gauges();
        if engine.cfg.purge {
            crate::purge::start(&engine);
        }
        Ok(engine)
    }

    fn register_gauges(self: &Arc<Self>) {
        let r = &self.registry;
        let hl = self.m.history_len.clone();
        r.gauge(
            "trx",
            "trx_history_len",
            "committed undo logs not yet purged",
            move || hl.load(Ordering::Relaxed),
        );
        let w = Arc::downgrade(self);
        r.gauge(
            "trx",
            "trx_active",
            "active read-write transactions",
            move || w.upgrade().map_or(0, |e| e.sys.active_count() as u64),
        );
        let w = Arc::downgrade(self);
        r.gauge(
            "trx",
            "trx_oldest_view_age_ms",
            "age of the oldest open transaction with a read view, ms",
            move || w.upgrade().map_or(0, |e| e.oldest_view_age_ms()),
        );
        let w = Arc::downgrade(self);
        r.gauge(
            "trx",
            "trx_undo_bytes",
            "bytes of undo tablespaces in use",
            move || w.upgrade().and_then(|e| e.undo_bytes().ok()).unwrap_or(0),
        );
    }

    /// The run-time settings: stores take effect at the next use.
    pub fn settings(&self) -> &RuntimeSettings {
        &self.settings
    }

    pub fn store(&self) -> &Arc<PageStore> {
        &self.store
    }

    /// Bytes in a page of this store (fixed when the store was created).
    pub fn page_size(&self) -> usize {
        self.store.pool().page_size()
    }

    /// When a commit counts as done (innodb_flush_log_at_trx_commit).
    pub fn durability(&self) -> Durability {
        self.store.log().durability()
    }

    /// Changes the durability of commits from the next one on.
    pub fn set_durability(&self, level: Durability) {
        self.store.log().set_durability(level)
    }
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
    /// Row locks held by all transactions (tests, metrics).
    pub fn locks_held(&self) -> usize {
        self.locks.total_locks()
    }

    pub fn history_len(&self) -> u64 {
        self.m.history_len.load(Ordering::SeqCst)
    }
    pub(crate) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn persist_limits(&self, id_limit: u64, no_limit: u64) -> Result<(), TrxError> {
        let _g = self.limits_update.lock().expect("poisoned");
        if let Some(end) = catalog::write_limits(&self.store, id_limit, no_limit)? {
            self.store.log().wait_flushed(end)?;
        }
        self.id_limit.store(id_limit, Ordering::SeqCst);
        self.no_limit.store(no_limit, Ordering::SeqCst);
        Ok(())
    }

    fn limits_near(&self, id: u64, no: u64) -> bool {
        id + ID_BLOCK / 2 >= self.id_limit.load(Ordering::SeqCst)
            || no + ID_BLOCK / 2 >= self.no_limit.load(Ordering::SeqCst)
    }

    /// Keeps the persisted limits ahead of the counters. A transaction whose
    /// id or number would reach the limit waits for the new limit to be
    /// logged, so no record ever carries a value the limit does not cover.
    fn keep_limits_ahead(&self) -> Result<(), TrxError> {
        let (id, no) = (self.sys.next_id(), self.sys.next_no());
        // The common case takes no lock: two atomic loads.
        if self.limits_near(id, no) {
            let _g = self.limits_update.lock().expect("poisoned");
            if self.limits_near(id, no) {
                let (ni, nn) = (id + ID_BLOCK, no + ID_BLOCK);
                catalog::write_limits(&self.store, ni, nn)?;
                self.id_limit.store(ni, Ordering::SeqCst);
                self.no_limit.store(nn, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// Creates a table: a tablespace, a clustered index and one secondary
    /// index per key spec (byte ranges of the row value). Returns its id.
    pub fn create_table(&self, secondary_keys: &[Vec<(u16, u16)>]) -> Result<u32, TrxError> {
        let space_id = {
            let mut mtr = self.store.mtr()?;
            let id = space::next_space_id(&mut mtr)?;
            space::create_space(&mut mtr, id)?;
            mtr.commit()?;
            id
        };
        let clustered = Index::create(&self.store, space_id, true)?;
        let mut secondaries = Vec::new();
        for key in secondary_keys {
            let idx = Index::create(&self.store, space_id, false)?;
            secondaries.push(SecondaryDef {
                index: idx.def(),
                key: key.clone(),
            });
        }
        let def = TableDef {
            id: space_id,
            space: space_id,
            clustered: clustered.def(),
            secondaries,
        };
        let mut mtr = self.store.mtr()?;
        catalog::add_table(&mut mtr, &def)?;
        if let Some(end) = mtr.commit()? {
            self.store.log().wait_flushed(end)?;
        }
        self.tables
            .write()
            .expect("poisoned")
            .insert(def.id, Arc::new(Table::open(def.clone())));
        Ok(def.id)
    }

    /// Drops table `id`: it leaves the table directory (durably, at the
    /// log's flush) and the engine's map. The caller (the SQL layer's
    /// metadata lock) makes sure no transaction still uses it; undo records
    /// that name it are skipped by rollback and purge from then on.
    /// The tablespace's pages are not reclaimed (its file stays, unused).
    pub fn drop_table(&self, id: u32) -> Result<bool, TrxError> {
        let mut mtr = self.store.mtr()?;
        if !catalog::remove_table(&mut mtr, id)? {
            return Ok(false);
        }
        if let Some(end) = mtr.commit()? {
            self.store.log().wait_flushed(end)?;
        }
        self.tables.write().expect("poisoned").remove(&id);
        Ok(true)
    }

    /// The largest primary key of table `id` in any version (committed or
    /// not, delete-marked or not): where an AUTO_INCREMENT counter resumes.
    pub fn last_key(&self, id: u32) -> Result<Option<Vec<u8>>, TrxError> {
        let t = self.table(id)?;
        let mut cur = t.clustered.cursor(None, Direction::Backward);
        Ok(cur.next(&self.store)?.map(|r| r.key))
    }

    pub fn table_ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .tables
            .read()
            .expect("poisoned")
            .keys()
            .copied()
            .collect();
        v.sort_unstable();
        v
    }

    pub(crate) fn table(&self, id: u32) -> Result<Arc<Table>, TrxError> {
        self.tables
            .read()
            .expect("poisoned")
            .get(&id)
            .cloned()
            .ok_or(TrxError::NoSuchTable(id))
    }

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
            killed: AtomicU8::new(KillReason::None as u8),
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
    fn recover_in_flight(&self, in_flight: Vec<(u16, u16, u32)>) -> Result<(), TrxError> {
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

    /// Bytes of undo tablespaces in use (allocated minus free pages).
    pub fn undo_bytes(&self) -> Result<u64, TrxError> {
        let ps = self.store.pool().page_size() as u64;
        let mut spaces: Vec<u32> = self.rsegs.iter().map(|r| r.space).collect();
        spaces.sort_unstable();
        spaces.dedup();
        let mut total = 0;
        for s in spaces {
            let mut mtr = self.store.mtr()?;
            let (size, free) = space::space_size(&mut mtr, s)?;
            total += (size - free) as u64 * ps;
        }
        Ok(total)
    }

    fn oldest_view_age_ms(&self) -> u64 {
        let now = self.now_ms();
        self.open_trx
            .all()
            .into_iter()
            .filter_map(|t| {
                let opened = t.view_opened_ms.load(Ordering::Relaxed);
                (opened != 0).then(|| (now + 1).saturating_sub(opened))
            })
            .max()
            .unwrap_or(0)
    }

    /// Rolls back a transaction on behalf of a policy, if it is idle (not in
    /// a call). Returns whether it was done now (else its owner is told at
    /// its next call).
    /// Rolls back a transaction that is not in a call (idle); false if it
    /// is busy or already over.
    pub(crate) fn kill_if_idle(&self, t: &TrxShared, reason: KillReason) -> bool {
        let Ok(mut st) = t.state.try_lock() else {
            return false;
        };
        if st.done {
            return false;
        }
        t.killed.store(reason as u8, Ordering::SeqCst);
        let _ = self.rollback_state(&mut st);
        true
    }

    /// The undo quota's victim must let purge proceed now: its read view is
    /// closed at once (its next statement fails; a statement running now
    /// may fail reading undo purge freed, with an error, not a panic), and
    /// it is rolled back now if idle, else by its owner at the next call.
    pub(crate) fn kill_for_quota(&self, t: &TrxShared) {
        t.killed
            .store(KillReason::UndoQuota as u8, Ordering::SeqCst);
        if self.kill_if_idle(t, KillReason::UndoQuota) {
            return;
        }
        // Busy: close the view now through the registry of view slots.
        let packed = t.view_no.swap(0, Ordering::SeqCst);
        if packed != 0 {
            self.sys.force_close_view(packed);
        }
    }

    /// Ends a transaction: rollback everything it did, free its undo log,
    /// leave the active set, release locks, close its view.
    pub(crate) fn rollback_state(&self, st: &mut TrxState) -> Result<(), TrxError> {
        let result = self.rollback_to(st, 0);
        if let Some(log) = st.undo.take() {
            let r = &self.rsegs[log.rseg as usize];
            let slot = st.slot;
            let f = undo::finish(
                &self.store,
                r,
                &self.rseg_metrics,
                &log,
                undo::Ending::Rollback,
                &|| self.sys.assign_no(slot),
                &self.m.history_len,
            )?;
            if f.to_history {
                self.wake_purge();
            }
        }
        self.end(st);
        self.m.rollbacks.inc();
        result
    }

    fn rollback_to(&self, st: &mut TrxState, undo_no: u64) -> Result<(), TrxError> {
        let Some(log) = &st.undo else { return Ok(()) };
        let recs = undo::records_newest_first(&self.store, log.space, log.first_page)?;
        for (_, rec) in recs.iter().filter(|(_, r)| r.undo_no >= undo_no) {
            self.undo_one(rec, st.id)?;
        }
        Ok(())
    }

    fn end(&self, st: &mut TrxState) {
        if st.id != 0 {
            self.sys.deregister(st.id, st.slot);
            self.locks.release_all(st.id);
        }
        if let Some(v) = st.view.take() {
            self.sys.close_view(&v);
        }
        st.view_no.store(0, Ordering::SeqCst);
        st.view_opened_ms.store(0, Ordering::SeqCst);
        st.done = true;
    }

    /// The wait_writers policy: block while undo is over quota.
    fn wait_for_quota(&self) -> Result<(), TrxError> {
        let (m, cv) = &self.writers_blocked;
        let mut blocked = m.lock().expect("poisoned");
        if !*blocked {
            return Ok(());
        }
        self.m.writer_quota_waits.inc();
        let deadline = Instant::now()
            + Duration::from_millis(self.settings.lock_wait_timeout_ms.load(Ordering::Relaxed));
        while *blocked {
            let now = Instant::now();
            if now >= deadline {
                return Err(TrxError::LockWaitTimeout);
            }
            blocked = cv
                .wait_timeout(blocked, deadline - now)
                .expect("poisoned")
                .0;
        }
        Ok(())
    }

    /// DML delay when the history is longer than max_purge_lag (InnoDB's
    /// innodb_max_purge_lag): grows with the excess, capped.
    fn purge_lag_delay(&self) {
        let lag = self.settings.max_purge_lag.load(Ordering::Relaxed);
        let hl = self.history_len();
        // Only when purge is behind for lack of time: when a read view holds
        // it back, slowing writers frees nothing (the undo quota's case).
        if lag == 0 || hl <= lag || self.purge_blocked_by_view.load(Ordering::Relaxed) {
            return;
        }
        let delay_us = ((hl - lag).saturating_mul(5_000) / lag)
            .min(self.settings.max_purge_lag_delay_us.load(Ordering::Relaxed));
        if delay_us > 0 {
            self.m.purge_delay_count.inc();
            self.m.purge_delay_us.add(delay_us);
            std::thread::sleep(Duration::from_micros(delay_us));
        }
    }

    pub(crate) fn wake_purge(&self) {
        let (m, cv) = &self.purge_wake;
        *m.lock().expect("poisoned") = true;
        cv.notify_one();
    }

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
            let mut inactive = self.inactive_spaces.lock().expect("poisoned");
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
            let guards: Vec<_> = rsegs.iter().map(|r| r.lock(&self.rseg_metrics)).collect();
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
            self.inactive_spaces.lock().expect("poisoned").remove(&sp);
            self.m.undo_truncations.inc();
            tracing::info!(space = sp, pages = new_size, "undo tablespace truncated");
        }
        Ok(())
    }

    /// Stops purge and shuts the store down cleanly.
    pub fn shutdown(&self) -> Result<(), TrxError> {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.wake_purge();
        if let Some(h) = self.purge_thread.lock().expect("poisoned").take() {
            let _ = h.join();
        }
        self.store.shutdown()?;
        Ok(())
    }

    pub(crate) fn set_purge_thread(&self, h: std::thread::JoinHandle<()>) {
        *self.purge_thread.lock().expect("poisoned") = Some(h);
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
}

impl Trx {
    fn call(&self) -> Result<Call<'_>, TrxError> {
        let st = self.shared.state.lock().expect("poisoned");
        let reason = self.shared.killed.load(Ordering::SeqCst);
        if reason != KillReason::None as u8 || st.done {
            return Err(TrxError::RolledBack(match reason {
                1 => "undo quota exceeded while this transaction's read view was the oldest",
                2 => "idle in transaction longer than idle_trx_timeout",
                3 => "chosen as a deadlock victim",
                _ => "the transaction has ended",
            }));
        }
        self.shared
            .last_active_ms
            .store(self.e.now_ms(), Ordering::Relaxed);
        Ok(Call {
            e: &self.e,
            st,
            iso: self.shared.iso,
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
        let r = f(&mut c);
        self.shared
            .last_active_ms
            .store(self.e.now_ms(), Ordering::Relaxed);
        match r {
            Err(TrxError::LockWaitTimeout) => {
                self.e.rollback_to(&mut c.st, stmt_start)?;
                Err(TrxError::LockWaitTimeout)
            }
            Err(e @ (TrxError::Deadlock | TrxError::RolledBack(_))) => {
                let _ = self.e.rollback_state(&mut c.st);
                self.shared
                    .killed
                    .store(KillReason::Deadlock as u8, Ordering::SeqCst);
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

    /// Commits: durable at the redo log's level when it returns.
    pub fn commit(self) -> Result<(), TrxError> {
        let mut c = self.call()?;
        let e = c.e;
        let end = match c.st.undo.take() {
            Some(log) => {
                let r = &e.rsegs[log.rseg as usize];
                let slot = c.st.slot;
                let f = undo::finish(
                    e.store(),
                    r,
                    &e.rseg_metrics,
                    &log,
                    undo::Ending::Commit,
                    &|| e.sys.assign_no(slot),
                    &e.m.history_len,
                )?;
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

    pub fn rollback(self) -> Result<(), TrxError> {
        let mut st = self.shared.state.lock().expect("poisoned");
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

    /// This transaction's id (0 until its first write).
    pub fn id(&self) -> TrxId {
        self.shared.state.lock().expect("poisoned").id
    }
}

impl Drop for Trx {
    fn drop(&mut self) {
        if let Ok(mut st) = self.shared.state.lock() {
            if !st.done {
                let _ = self.e.rollback_state(&mut st);
            }
        }
        self.e.open_trx.remove(self.handle);
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
            self.st.view_no.store(
                crate::sys::pack_view(v.slot, v.low_limit_no),
                Ordering::SeqCst,
            );
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
            self.st.slot = slot;
            self.e.keep_limits_ahead()?;
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
            let inactive = self.e.inactive_spaces.lock().expect("poisoned").clone();
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
        let timeout =
            Duration::from_millis(self.e.settings.lock_wait_timeout_ms.load(Ordering::Relaxed));
        self.e
            .locks
            .lock(me, t.def.id, pk, mode, timeout)
            .map_err(|e| match e {
                LockError::Timeout => TrxError::LockWaitTimeout,
                LockError::Deadlock => TrxError::Deadlock,
                LockError::Cancelled => TrxError::RolledBack("cancelled"),
            })
    }

    fn sec_existed(
        &self,
        t: &Table,
        value: &[u8],
        pk: &[u8],
        only_changed_from: Option<&[u8]>,
    ) -> Result<u64, TrxError> {
        let mut bits = 0;
        for (i, (idx, sd)) in t.secondaries.iter().enumerate() {
            let k = sd.key_of(value);
            if only_changed_from.is_some_and(|old| sd.key_of(old) == k) {
                continue;
            }
            if idx.get(self.e.store(), &sec_entry(&k, pk))?.is_some() {
                bits |= 1 << i;
            }
        }
        Ok(bits)
    }

    fn insert_sec(
        &self,
        t: &Table,
        value: &[u8],
        pk: &[u8],
        only_changed_from: Option<&[u8]>,
    ) -> Result<(), TrxError> {
        let store = self.e.store();
        for (idx, sd) in &t.secondaries {
            let k = sd.key_of(value);
            if only_changed_from.is_some_and(|old| sd.key_of(old) == k) {
                continue;
            }
            ensure_entry(idx, store, &sec_entry(&k, pk), pk)?;
        }
        Ok(())
    }

    fn insert(&mut self, t: &Table, pk: &[u8], value: &[u8]) -> Result<(), TrxError> {
        let store = self.e.store().clone();
        let me = self.st.id;
        for _ in 0..1000 {
            match t.clustered.get(&store, pk)? {
                None => {
                    let sec = self.sec_existed(t, value, pk, None)?;
                    let rp = self.log_change(UndoKind::Insert, t, pk, None, sec)?;
                    match t.clustered.insert(&store, pk, value, me, rp) {
                        Ok(()) => {
                            self.insert_sec(t, value, pk, None)?;
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
                    let sec = self.sec_existed(t, value, pk, None)?;
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
                    self.insert_sec(t, value, pk, None)?;
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
        let sec = self.sec_existed(t, value, pk, Some(&r.value))?;
        let rp = self.log_change(UndoKind::Update, t, pk, Some(&r), sec)?;
        t.clustered.update(&store, pk, value, me, rp)?;
        for (idx, sd) in &t.secondaries {
            let (old_k, new_k) = (sd.key_of(&r.value), sd.key_of(value));
            if old_k != new_k {
                idx.set_deleted(&store, &sec_entry(&old_k, pk), true, 0, 0)?;
            }
        }
        self.insert_sec(t, value, pk, Some(&r.value))?;
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

/// Used by purge and tests: a table's indexes.
impl Engine {
    pub(crate) fn table_indexes(&self, id: u32) -> Result<Arc<Table>, TrxError> {
        self.table(id)
    }
    pub fn index_defs(&self, table: u32) -> Result<(IndexDef, Vec<IndexDef>), TrxError> {
        let t = self.table(table)?;
        Ok((
            t.def.clustered,
            t.def.secondaries.iter().map(|s| s.index).collect(),
        ))
    }
}

/// Engine settings that `SET GLOBAL` may change while the engine runs; each
/// read takes the current value (no restart, no lock). The other
/// `TrxConfig` fields fix the on-disk layout or thread counts at open.
#[derive(Debug)]
pub struct RuntimeSettings {
    pub max_purge_lag: AtomicU64,
    pub max_purge_lag_delay_us: AtomicU64,
    pub lock_wait_timeout_ms: AtomicU64,
    pub idle_trx_timeout_ms: AtomicU64,
    pub undo_quota_bytes: AtomicU64,
}

impl RuntimeSettings {
    fn from_config(cfg: &TrxConfig) -> Self {
        Self {
            max_purge_lag: AtomicU64::new(cfg.max_purge_lag),
            max_purge_lag_delay_us: AtomicU64::new(cfg.max_purge_lag_delay_us),
            lock_wait_timeout_ms: AtomicU64::new(cfg.lock_wait_timeout_ms),
            idle_trx_timeout_ms: AtomicU64::new(cfg.idle_trx_timeout_ms),
            undo_quota_bytes: AtomicU64::new(cfg.undo_quota_bytes),
        }
    }
}
