//! The engine's shared state: the `Engine` struct that every part of the
//! engine works on (the embedded API, rollback, purge and its policies),
//! and each transaction's state, shared between its owner and the
//! background policies. Its own file so that those parts depend on it and
//! not on one another (engine.rs starts purge; purge does not import
//! engine.rs).

use crate::config::{Isolation, RuntimeSettings, TrxConfig};
use crate::error::{unpoisoned, TrxError};
use crate::id_limits::IdLimits;
use crate::kill::KillFlag;
use crate::lock::LockManager;
use crate::tables::Table;
use crate::trx_sys::{ReadView, TrxId, TrxSys};
use crate::undo::{Rseg, RsegMetrics, UndoLog};
use millrace_buf::PageStore;
use millrace_metrics::{Counter, Registry};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

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

pub(crate) struct TrxState {
    pub(crate) id: TrxId,
    pub(crate) slot: usize,
    pub(crate) view: Option<ReadView>,
    pub(crate) undo: Option<UndoLog>,
    pub(crate) undo_no: u64,
    pub(crate) done: bool,
    pub(crate) view_no: Arc<AtomicU64>,
    pub(crate) view_opened_ms: Arc<AtomicU64>,
}

/// Shared between a transaction's owner and the engine's background
/// policies (which may roll it back while it is idle).
pub(crate) struct TrxShared {
    pub(crate) state: Mutex<TrxState>,
    pub(crate) killed: KillFlag,
    pub(crate) last_active_ms: AtomicU64,
    pub(crate) iso: Isolation,
    /// The open read view's ticket (`trx_sys::pack_view`; 0: none),
    /// readable without the state mutex (the undo quota policy looks for
    /// the oldest view through it and may close it).
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

    pub(crate) fn new() -> Self {
        Self {
            shards: (0..Self::SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
        }
    }
    fn shard(&self, handle: u64) -> &Mutex<OpenShard> {
        &self.shards[handle as usize % Self::SHARDS]
    }
    pub(crate) fn insert(&self, handle: u64, t: Weak<TrxShared>) {
        unpoisoned(self.shard(handle).lock()).insert(handle, t);
    }
    /// Called from `Trx::drop`, also while a panic unwinds: never panics.
    pub(crate) fn remove(&self, handle: u64) {
        unpoisoned(self.shard(handle).lock()).remove(&handle);
    }
    /// The transactions open now (one shard at a time).
    pub(crate) fn all(&self) -> Vec<Arc<TrxShared>> {
        self.shards
            .iter()
            .flat_map(|s| {
                unpoisoned(s.lock())
                    .values()
                    .filter_map(|w| w.upgrade())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// The embedded engine: open it with `Engine::open`, create tables, begin
/// transactions with `Engine::begin`.
pub struct Engine {
    /// The settings that may change while the engine runs (SET GLOBAL).
    pub(crate) settings: RuntimeSettings,
    pub(crate) store: Arc<PageStore>,
    pub(crate) sys: TrxSys,
    pub(crate) locks: LockManager,
    pub(crate) rsegs: Vec<Rseg>,
    pub(crate) rseg_metrics: RsegMetrics,
    pub(crate) tables: RwLock<HashMap<u32, Arc<Table>>>,
    pub(crate) next_rseg: AtomicUsize,
    pub(crate) cfg: TrxConfig,
    pub(crate) limits: IdLimits,
    pub(crate) m: TrxMetrics,
    /// Every open transaction (read-only ones with a view too), by handle.
    pub(crate) open_trx: OpenTrx,
    pub(crate) next_handle: AtomicU64,
    pub(crate) started: Instant,
    pub(crate) shutting_down: AtomicBool,
    /// wait_writers policy: writers wait while set.
    pub(crate) writers_blocked: (Mutex<bool>, Condvar),
    pub(crate) purge_wake: (Mutex<bool>, Condvar),
    /// Purge's last round found history it may not purge yet (a read view
    /// holds it back): DML delay would not help purge then.
    pub(crate) purge_blocked_by_view: AtomicBool,
    /// Undo spaces waiting to be truncated: no new undo logs go there.
    pub(crate) inactive_spaces: Mutex<HashSet<u32>>,
    pub(crate) purge_thread: Mutex<Option<JoinHandle<()>>>,
    pub(crate) registry: Arc<Registry>,
    /// Why the engine stopped, once it has (`fail`): set once, never
    /// cleared; the next open recovers.
    pub(crate) failed: OnceLock<String>,
}

impl Engine {
    /// The run-time settings: stores take effect at the next use.
    pub fn settings(&self) -> &RuntimeSettings {
        &self.settings
    }

    /// The page store under the engine, for tests and benchmarks only: the
    /// SQL layer and the server use the engine's own accessors
    /// (`page_size`, `durability`, `set_durability`), so that they do not
    /// depend on how pages are cached or logged.
    pub fn store(&self) -> &Arc<PageStore> {
        &self.store
    }

    pub fn history_len(&self) -> u64 {
        self.m.history_len.load(Ordering::SeqCst)
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(crate) fn table(&self, id: u32) -> Result<Arc<Table>, TrxError> {
        unpoisoned(self.tables.read())
            .get(&id)
            .cloned()
            .ok_or(TrxError::NoSuchTable(id))
    }

    pub(crate) fn wake_purge(&self) {
        let (m, cv) = &self.purge_wake;
        *unpoisoned(m.lock()) = true;
        cv.notify_one();
    }

    /// Stops the engine: its state is unknown (a rollback that could not
    /// finish, a panic while a transaction's state or a rollback segment
    /// was held). Transactions that did not end keep their locks, their
    /// place in the active set and their undo logs, so no reader takes
    /// their changes for committed; every later call fails; the next open
    /// rolls them back from undo. Waiting lock requests are cancelled.
    /// Returns the error to give the caller (the first reason wins).
    pub(crate) fn fail(&self, why: String) -> TrxError {
        if self.failed.set(why.clone()).is_ok() {
            tracing::error!(reason = %why, "the transaction engine stopped; restart to recover");
            // One stopped state for the whole engine: the log refuses
            // appends and the buffer pool refuses to flush from here on, so
            // nothing written after the failure reaches the files; the next
            // open recovers from the redo log.
            self.store.log().fail(&why);
            self.locks.cancel_all();
            self.wake_purge();
            // Writers waiting for purge to bring undo under its quota.
            let (m, cv) = &self.writers_blocked;
            drop(unpoisoned(m.lock()));
            cv.notify_all();
        }
        TrxError::EngineFailed(self.failed.get().cloned().unwrap_or(why))
    }

    /// `Err(EngineFailed)` once the engine has stopped.
    pub(crate) fn check_alive(&self) -> Result<(), TrxError> {
        match self.failed.get() {
            Some(why) => Err(TrxError::EngineFailed(why.clone())),
            // The store stopped on its own (a page write or fsync failed, a
            // mini-transaction was abandoned): the engine stops with it.
            None if self.store.log().is_failed() => {
                let why = self
                    .store
                    .failure()
                    .unwrap_or_else(|| "the log failed".into());
                Err(self.fail(why))
            }
            None => Ok(()),
        }
    }

    /// Why the engine stopped, if it has: every call fails then, and the
    /// data directory must be opened again (which recovers it).
    pub fn failure(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Ends a transaction, committed or rolled back: it leaves the active
    /// set, releases its locks and closes its view.
    pub(crate) fn end(&self, st: &mut TrxState) {
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
}
