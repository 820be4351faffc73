//! The embedded transactional engine: open a data directory (recovering it),
//! create and drop tables, settings, metrics and shutdown. Transactions
//! are in trx.rs, rollback in rollback.rs, purge in purge.rs.

use crate::config::{RuntimeSettings, TrxConfig};
use crate::error::{unpoisoned, TrxError};
use crate::id_limits::{IdLimits, ID_BLOCK};
use crate::keys::{KeyPart, SecondaryDef, SEGMENT};
use crate::lock::LockManager;
use crate::shared::{Engine, OpenTrx, TrxMetrics};
use crate::tables::{self, Table, TableDef};
use crate::trx_sys::TrxSys;
use crate::undo::{Rseg, RsegMetrics};
use crate::{purge, sys_page};
use millrace_btree::{Direction, Index, IndexDef};
use millrace_buf::{space, PageStore};
use millrace_io::Storage;
use millrace_metrics::Registry;
use millrace_redo::Durability;
use millrace_sys::cpu::CpuBudget;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

/// Creates the transaction layer's pages in a fresh store: the trx system
/// and table directory pages, the undo tablespaces and rollback segments,
/// the first id limits.
fn init_trx_pages(
    store: &Arc<PageStore>,
    cfg: &TrxConfig,
    effective_cpus: u32,
) -> Result<(), TrxError> {
    sys_page::init(store)?;
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
    sys_page::write_rsegs(store, &rsegs, n_spaces as u16)?;
    let end = sys_page::write_limits(store, ID_BLOCK, ID_BLOCK)?;
    if let Some(end) = end {
        store.log().wait_flushed(end)?;
    }
    Ok(())
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
        // A new data directory gets the transaction layer's pages inside the
        // store's atomic creation: a crash before they are all made leaves a
        // directory the next open creates again (docs/design.md, "Faults:
        // what the engine does when storage fails").
        let (store, _report) =
            PageStore::open_with_init(storage, cfg.store.clone(), cpu, &registry, |store| {
                init_trx_pages(store, &cfg, effective_cpus)
            })?;
        if !sys_page::initialised(&store)? {
            // A store created without them (by the page store alone).
            init_trx_pages(&store, &cfg, effective_cpus)?;
        }
        let page = sys_page::read_trx_sys(&store)?;
        let mut rsegs = Vec::new();
        let mut in_flight = Vec::new();
        for (i, &(space_id, page)) in page.rsegs.iter().enumerate() {
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
        let tables: HashMap<u32, Arc<Table>> = tables::read_tables(&store)?
            .into_iter()
            .map(|d| (d.id, Arc::new(Table::open(d))))
            .collect();
        let engine = Arc::new(Engine {
            settings: RuntimeSettings::from_config(&cfg),
            sys: TrxSys::new(page.id_limit, page.no_limit, cfg.max_active_trx),
            locks: LockManager::new(&registry),
            rseg_metrics,
            tables: RwLock::new(tables),
            next_rseg: AtomicUsize::new(0),
            limits: IdLimits::new(page.id_limit, page.no_limit),
            m,
            open_trx: OpenTrx::new(),
            next_handle: AtomicU64::new(1),
            started: Instant::now(),
            shutting_down: AtomicBool::new(false),
            writers_blocked: (Mutex::new(false), Condvar::new()),
            purge_wake: (Mutex::new(false), Condvar::new()),
            inactive_spaces: Mutex::new(HashSet::new()),
            purge_blocked_by_view: AtomicBool::new(false),
            purge_thread: Mutex::new(None),
            registry: registry.clone(),
            failed: std::sync::OnceLock::new(),
            rsegs,
            store,
            cfg,
        });
        // Counting resumes above everything used before the restart.
        engine.limits.persist(
            &engine.store,
            page.id_limit + ID_BLOCK,
            page.no_limit + ID_BLOCK,
        )?;
        engine.recover_in_flight(in_flight)?;
        let mut hl = 0;
        for r in &engine.rsegs {
            hl += r.history_len(&engine.store)?;
        }
        history_len.store(hl, Ordering::SeqCst);
        engine.register_gauges();
        if engine.cfg.purge {
            *engine.purge_thread.lock().expect("poisoned") = Some(purge::start(&engine));
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

    /// Creates a table: a tablespace, a clustered index and one secondary
    /// index per key spec (parts of the row value). Returns its id.
    pub fn create_table(&self, secondary_keys: &[Vec<KeyPart>]) -> Result<u32, TrxError> {
        self.check_alive()?;
        // The table directory stores a part as (offset, length) with
        // offset SEGMENT marking a segment, so a byte range may not start
        // there (no value is that long anyway).
        if let Some(&KeyPart::Bytes { offset, .. }) = secondary_keys.iter().flatten().find(|p| {
            matches!(
                p,
                KeyPart::Bytes {
                    offset: SEGMENT,
                    ..
                }
            )
        }) {
            return Err(TrxError::TooLarge(format!(
                "a key part at value offset {offset}, at most {}",
                SEGMENT - 1
            )));
        }
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
        tables::add_table(&mut mtr, &def)?;
        if let Some(end) = mtr.commit()? {
            self.store.log().wait_flushed(end)?;
        }
        unpoisoned(self.tables.write()).insert(def.id, Arc::new(Table::open(def.clone())));
        Ok(def.id)
    }

    /// Drops table `id`: it leaves the table directory (durably, at the
    /// log's flush) and the engine's map. The caller (the SQL layer's
    /// metadata lock) makes sure no transaction still uses it; undo records
    /// that name it are skipped by rollback and purge from then on.
    /// The tablespace's pages are not reclaimed (its file stays, unused).
    pub fn drop_table(&self, id: u32) -> Result<bool, TrxError> {
        self.check_alive()?;
        let mut mtr = self.store.mtr()?;
        if !tables::remove_table(&mut mtr, id)? {
            return Ok(false);
        }
        if let Some(end) = mtr.commit()? {
            self.store.log().wait_flushed(end)?;
        }
        unpoisoned(self.tables.write()).remove(&id);
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
        let mut v: Vec<u32> = unpoisoned(self.tables.read()).keys().copied().collect();
        v.sort_unstable();
        v
    }

    pub fn index_defs(&self, table: u32) -> Result<(IndexDef, Vec<IndexDef>), TrxError> {
        let t = self.table(table)?;
        Ok((
            t.def.clustered,
            t.def.secondaries.iter().map(|s| s.index).collect(),
        ))
    }

    /// Stops purge and shuts the store down cleanly.
    pub fn shutdown(&self) -> Result<(), TrxError> {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.wake_purge();
        if let Some(h) = unpoisoned(self.purge_thread.lock()).take() {
            let _ = h.join();
        }
        self.store.shutdown()?;
        Ok(())
    }
}
