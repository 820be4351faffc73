//! Row locks, like InnoDB's record locks: shared and exclusive locks on
//! `(table, key)`, FIFO wait queues, lock wait timeouts, cancellation and
//! deadlock detection.
//!
//! # Compatibility and fairness
//! S is compatible with S; every other pair conflicts. A trx that already
//! holds a lock in the requested mode or a stronger one gets it at once
//! (re-entrant). A request waits while another trx holds a conflicting lock
//! or an earlier waiter wants a conflicting mode: a new S request queues
//! behind a waiting X request even when only S is held, so a stream of
//! readers cannot starve a writer. The exception is an upgrade (a trx
//! holding S asks for X): it goes before the other waiters (behind earlier
//! upgrades), since the waiters behind it would wait for its S anyway.
//!
//! # Waits
//! Each wait has its own `(Mutex, Condvar)` pair, so a release wakes only the
//! waiters it grants. A waiter sleeps until it is granted, cancelled
//! (`cancel`), chosen as a deadlock victim or its timeout expires
//! (`LockError::Timeout`, MySQL 1205; the caller rolls back the statement).
//! Whoever changes a queue (a release, a waiter leaving, an implicit lock
//! being converted) grants what can now be granted, so waiters never poll.
//!
//! # Deadlock detection
//! A global wait-for graph maps each waiting trx to the trxs it waits for:
//! the holders of conflicting locks and the earlier conflicting waiters of
//! its queue. Every change of a queue recomputes the edges of its waiters,
//! so the graph matches the queues. When a request is about to wait, its
//! edges are added and a depth-first search starts from it; if it reaches
//! the requester again, the requester is the victim and gets
//! `LockError::Deadlock` (MySQL 1213; the caller rolls back the
//! transaction). Changes that give waiters already queued new edges (an
//! upgrade jumping ahead of them, `grant_implicit`) search from those
//! waiters too, and a waiter that closes a cycle is woken as the victim. A
//! search longer than `DEADLOCK_SEARCH_MAX_STEPS` counts as a deadlock, like
//! InnoDB's limit on its search (the cost of the search is bounded; the
//! price is an occasional needless rollback).
//!
//! # Implicit locks
//! Inserts and modifications record the trx id in the row, and InnoDB does
//! not create a lock for them: the row is implicitly X-locked while that trx
//! is active, which saves a lock entry per modified row. A trx that wants a
//! conflicting lock on such a row first converts the implicit lock with
//! `grant_implicit(holder, ..)` and then calls `lock`, which waits for the
//! holder like for any explicit lock.
//!
//! # Not implemented
//! Gap and next-key locks: only existing rows are locked, so locking reads
//! and range updates get no phantom protection (what InnoDB's REPEATABLE
//! READ adds with next-key locks). Table (intention) locks are not here
//! either.
//!
//! # Lock order
//! From outermost to innermost; nothing is taken out of this order:
//! 1. one row shard (`rows[i]`), never two at a time;
//! 2. then either one trx shard (`trxs[i]`) and under it a wait signal's
//!    mutex, or the wait-for graph (`wait_for`), never both at once;
//! 3. a wait signal's mutex is a leaf: nothing is taken while it is held.
//!
//! A trx shard or the graph may also be taken without a row shard, but never
//! with a row shard taken after it.
//!
//! # Panics
//! Nothing run under these mutexes does I/O or calls a caller's code, and
//! each leaves its data whole at every step, so a poisoned one is used as
//! it is (`error::unpoisoned`): `release_all` runs from `Trx::drop`, also
//! while a panic unwinds, and must not panic again.
//!
//! # Key value locks
//! `lock_value` locks a value of a unique secondary index rather than a
//! row (its own lock space in the same table): the unique check's lock,
//! see `Trx::unique_key_taken`.

use crate::error::unpoisoned;
use millrace_metrics::{Counter, Registry};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub type TrxId = u64;

/// Row shards: enough that unrelated rows rarely share a mutex.
const ROW_SHARDS: usize = 64;
/// Trx bookkeeping shards.
const TRX_SHARDS: usize = 64;
/// A deadlock search that visits more nodes than this treats the request as
/// a deadlock (InnoDB bounds its search the same way).
pub const DEADLOCK_SEARCH_MAX_STEPS: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockMode {
    Shared,
    Exclusive,
}

impl LockMode {
    fn compatible(self, other: LockMode) -> bool {
        self == LockMode::Shared && other == LockMode::Shared
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// The wait exceeded the timeout (MySQL error 1205, ER_LOCK_WAIT_TIMEOUT). The caller rolls
    /// back the statement.
    Timeout,
    /// Waiting would close a cycle: this transaction is the victim (MySQL 1213, ER_LOCK_DEADLOCK).
    /// The caller rolls back the transaction.
    Deadlock,
    /// The wait was cancelled by `cancel` (the transaction is being rolled back by someone else,
    /// e.g. an undo-quota policy).
    Cancelled,
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Timeout => {
                f.write_str("Lock wait timeout exceeded; try restarting transaction")
            }
            LockError::Deadlock => {
                f.write_str("Deadlock found when trying to get lock; try restarting transaction")
            }
            LockError::Cancelled => f.write_str("Lock wait cancelled"),
        }
    }
}

impl std::error::Error for LockError {}

/// Where one wait stands. Leaves `Waiting` exactly once, under the signal's
/// mutex, so a grant and a timeout or cancel cannot both win.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitState {
    Waiting,
    Granted,
    Cancelled,
    Victim,
    TimedOut,
}

/// The wake-up of one wait.
struct Signal {
    /// Unique per wait (never reused, unlike an address), so that stale
    /// clean-up of an old wait never touches the trx's next wait.
    wait_id: u64,
    state: Mutex<WaitState>,
    wake: Condvar,
}

impl Signal {
    fn state(&self) -> MutexGuard<'_, WaitState> {
        unpoisoned(self.state.lock())
    }

    fn is_waiting(&self) -> bool {
        *self.state() == WaitState::Waiting
    }

    /// Ends the wait with `outcome` unless it has already ended.
    fn finish(&self, outcome: WaitState) {
        let mut state = self.state();
        if *state == WaitState::Waiting {
            *state = outcome;
            self.wake.notify_one();
        }
    }
}

struct Waiter {
    trx: TrxId,
    mode: LockMode,
    /// Asks for X while holding S: queues ahead of plain requests.
    upgrade: bool,
    signal: Arc<Signal>,
}

/// The locks of one row: its holders and its FIFO of waiters.
#[derive(Default)]
struct LockQueue {
    /// At most one entry per trx, with the strongest mode it holds.
    holders: Vec<(TrxId, LockMode)>,
    waiters: Vec<Waiter>,
}

impl LockQueue {
    fn held_by(&self, trx: TrxId) -> Option<LockMode> {
        self.holders.iter().find(|h| h.0 == trx).map(|h| h.1)
    }

    fn is_empty(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }

    /// The trxs that waiter `idx` waits for: other holders of conflicting
    /// locks and earlier conflicting waiters. Empty means grantable.
    fn blockers(&self, idx: usize) -> Vec<TrxId> {
        let w = &self.waiters[idx];
        let mut out = Vec::new();
        let holders = self.holders.iter().map(|&(t, m)| (t, m));
        let earlier = self.waiters[..idx].iter().map(|e| (e.trx, e.mode));
        for (t, m) in holders.chain(earlier) {
            if t != w.trx && !m.compatible(w.mode) && !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    /// Grants `mode` to `trx` in the holder list; true if it is a new entry.
    fn add_holder(&mut self, trx: TrxId, mode: LockMode) -> bool {
        match self.holders.iter_mut().find(|h| h.0 == trx) {
            Some(h) => {
                h.1 = h.1.max(mode);
                false
            }
            None => {
                self.holders.push((trx, mode));
                true
            }
        }
    }
}

/// (table, lock space, key): space 0 holds rows by primary key, space
/// `i + 1` the key values of unique secondary index `i` (`lock_value`).
type RowKey = (u32, u32, Vec<u8>);
type RowShard = Mutex<HashMap<RowKey, LockQueue>>;

/// What release_all and cancel need about one trx.
#[derive(Default)]
struct TrxLocks {
    held: Vec<RowKey>,
    wait: Option<Arc<Signal>>,
    /// `cancel` came while the trx was not waiting: its next wait ends at
    /// once (an interrupt must not be lost to a wait that had not begun).
    cancel_pending: bool,
}

/// Out-edges of one waiting trx in the wait-for graph.
struct WaitEdges {
    wait_id: u64,
    blockers: Vec<TrxId>,
}

struct Metrics {
    waits: Arc<Counter>,
    wait_ns: Arc<Counter>,
    deadlocks: Arc<Counter>,
    timeouts: Arc<Counter>,
}

/// The row lock table. `Send + Sync`; share it behind an `Arc`.
pub struct LockManager {
    rows: Box<[RowShard]>,
    trxs: Box<[Mutex<HashMap<TrxId, TrxLocks>>]>,
    wait_for: Mutex<HashMap<TrxId, WaitEdges>>,
    next_wait_id: AtomicU64,
    /// Set by `cancel_all`: requests that would wait fail at once.
    closed: AtomicBool,
    /// Holder entries over all rows; kept next to the queues so the gauge
    /// and `total_locks` need no scan.
    rows_locked: Arc<AtomicU64>,
    /// Waiter entries over all rows.
    waiting: Arc<AtomicU64>,
    metrics: Metrics,
}

impl LockManager {
    pub fn new(registry: &Registry) -> Self {
        let rows_locked = Arc::new(AtomicU64::new(0));
        let waiting = Arc::new(AtomicU64::new(0));
        let gauge_rows = rows_locked.clone();
        registry.gauge(
            "lock",
            "lock_rows_locked",
            "row lock entries held",
            move || gauge_rows.load(Ordering::Relaxed),
        );
        let gauge_waiting = waiting.clone();
        registry.gauge(
            "lock",
            "lock_waiting",
            "transactions waiting for a row lock",
            move || gauge_waiting.load(Ordering::Relaxed),
        );
        let metrics = Metrics {
            waits: registry.counter("lock", "lock_waits", "row lock requests that had to wait"),
            wait_ns: registry.counter(
                "lock",
                "lock_wait_ns",
                "total time spent waiting for row locks",
            ),
            deadlocks: registry.counter(
                "lock",
                "lock_deadlocks",
                "row lock requests failed as deadlock victims",
            ),
            timeouts: registry.counter("lock", "lock_timeouts", "row lock waits that timed out"),
        };
        Self {
            rows: (0..ROW_SHARDS).map(|_| Mutex::default()).collect(),
            trxs: (0..TRX_SHARDS).map(|_| Mutex::default()).collect(),
            wait_for: Mutex::default(),
            next_wait_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            rows_locked,
            waiting,
            metrics,
        }
    }

    fn row_shard(&self, row: &RowKey) -> MutexGuard<'_, HashMap<RowKey, LockQueue>> {
        let mut h = DefaultHasher::new();
        row.hash(&mut h);
        unpoisoned(self.rows[(h.finish() % ROW_SHARDS as u64) as usize].lock())
    }

    fn trx_shard(&self, trx: TrxId) -> MutexGuard<'_, HashMap<TrxId, TrxLocks>> {
        unpoisoned(self.trxs[(trx % TRX_SHARDS as u64) as usize].lock())
    }

    fn graph(&self) -> MutexGuard<'_, HashMap<TrxId, WaitEdges>> {
        unpoisoned(self.wait_for.lock())
    }

    /// Locks row `key` of table `table` for `trx`. Returns at once if trx already holds it in this
    /// mode or stronger; upgrades S to X (waiting for other S holders). Blocks while another
    /// transaction holds a conflicting lock (S-S compatible, everything else conflicts) or an
    /// earlier waiter wants a conflicting mode (FIFO fairness: a new S request queues behind a
    /// waiting X request, except that a trx already holding S that asks for X goes before other
    /// waiters); before blocking, runs deadlock detection.
    ///
    /// A trx must not call `lock` from two threads at once: it waits for one
    /// row at a time, as a transaction does.
    pub fn lock(
        &self,
        trx: TrxId,
        table: u32,
        key: &[u8],
        mode: LockMode,
        timeout: Duration,
    ) -> Result<(), LockError> {
        self.lock_key(trx, (table, 0, key.to_vec()), mode, timeout)
    }

    /// Locks key value `key` of unique secondary index `index` of `table`
    /// (not a row: a value, present or not), like `lock` otherwise, in the
    /// same queues, wait-for graph and release. The unique check takes it
    /// exclusively before looking for the value, so two transactions that
    /// insert one value take turns (what InnoDB gets from its insert into
    /// the unique index and the locks on duplicates).
    pub fn lock_value(
        &self,
        trx: TrxId,
        table: u32,
        index: u32,
        key: &[u8],
        mode: LockMode,
        timeout: Duration,
    ) -> Result<(), LockError> {
        let space = index.checked_add(1).expect("fewer than u32::MAX indexes");
        self.lock_key(trx, (table, space, key.to_vec()), mode, timeout)
    }

    fn lock_key(
        &self,
        trx: TrxId,
        row: RowKey,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<(), LockError> {
        let signal = {
            let mut shard = self.row_shard(&row);
            let queue = shard.entry(row.clone()).or_default();
            let held = queue.held_by(trx);
            if held.is_some_and(|h| h >= mode) {
                return Ok(());
            }
            let upgrade = held.is_some();
            let holder_conflict = queue
                .holders
                .iter()
                .any(|&(t, m)| t != trx && !m.compatible(mode));
            // An upgrade goes ahead of the waiters, so only holders matter;
            // a new request also queues behind conflicting waiters.
            let waiter_conflict =
                !upgrade && queue.waiters.iter().any(|w| !w.mode.compatible(mode));
            if !holder_conflict && !waiter_conflict {
                if queue.add_holder(trx, mode) {
                    self.rows_locked.fetch_add(1, Ordering::Relaxed);
                    self.trx_shard(trx).entry(trx).or_default().held.push(row);
                }
                return Ok(());
            }

            if self.closed.load(Ordering::SeqCst) {
                if queue.is_empty() {
                    shard.remove(&row);
                }
                return Err(LockError::Cancelled);
            }
            let signal = Arc::new(Signal {
                wait_id: self.next_wait_id.fetch_add(1, Ordering::Relaxed),
                state: Mutex::new(WaitState::Waiting),
                wake: Condvar::new(),
            });
            let at = if upgrade {
                queue.waiters.iter().take_while(|w| w.upgrade).count()
            } else {
                queue.waiters.len()
            };
            queue.waiters.insert(
                at,
                Waiter {
                    trx,
                    mode,
                    upgrade,
                    signal: signal.clone(),
                },
            );
            // Registered before the waiting count moves, so that a caller who
            // sees the count can cancel the wait.
            let mut trxs = self.trx_shard(trx);
            let locks = trxs.entry(trx).or_default();
            locks.wait = Some(signal.clone());
            if std::mem::take(&mut locks.cancel_pending) {
                signal.finish(WaitState::Cancelled);
            }
            drop(trxs);
            self.waiting.fetch_add(1, Ordering::Relaxed);
            self.settle(&row, queue, Some(trx));
            signal
        };

        // The shard is released: sleep on this wait's own condvar.
        let mut wait_start = None;
        let outcome = {
            let mut state = signal.state();
            let deadline = Instant::now().checked_add(timeout);
            while *state == WaitState::Waiting {
                wait_start.get_or_insert_with(Instant::now);
                match deadline {
                    // A timeout too large for an Instant: wait until woken.
                    None => state = unpoisoned(signal.wake.wait(state)),
                    Some(deadline) => {
                        let now = Instant::now();
                        if now >= deadline {
                            *state = WaitState::TimedOut;
                            break;
                        }
                        state = unpoisoned(signal.wake.wait_timeout(state, deadline - now)).0;
                    }
                }
            }
            *state
        };
        if let Some(start) = wait_start {
            self.metrics.waits.inc();
            let wait_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.metrics.wait_ns.add(wait_ns);
        }
        self.clear_wait(trx, signal.wait_id);
        if outcome == WaitState::Granted {
            return Ok(());
        }
        self.withdraw(&row, trx, signal.wait_id);
        match outcome {
            WaitState::Victim => {
                self.metrics.deadlocks.inc();
                Err(LockError::Deadlock)
            }
            WaitState::TimedOut => {
                self.metrics.timeouts.inc();
                Err(LockError::Timeout)
            }
            _ => Err(LockError::Cancelled),
        }
    }

    /// Implicit-to-explicit conversion: records that `holder` holds an X lock on the row (granted
    /// at once, regardless of waiters: the holder already owns the row through the record's
    /// transaction id). No-op if it already holds X.
    ///
    /// The caller must make sure `holder` is still active (has not run
    /// `release_all`), or the lock would outlive it; InnoDB checks this under
    /// the trx system latch.
    pub fn grant_implicit(&self, holder: TrxId, table: u32, key: &[u8]) {
        let row: RowKey = (table, 0, key.to_vec());
        let mut shard = self.row_shard(&row);
        let queue = shard.entry(row.clone()).or_default();
        if queue.held_by(holder) == Some(LockMode::Exclusive) {
            return;
        }
        if queue.add_holder(holder, LockMode::Exclusive) {
            self.rows_locked.fetch_add(1, Ordering::Relaxed);
            self.trx_shard(holder)
                .entry(holder)
                .or_default()
                .held
                .push(row.clone());
        }
        // The waiters now also wait for the holder: new edges to check.
        if !queue.waiters.is_empty() {
            self.settle(&row, queue, None);
        }
    }

    /// Releases every lock of trx (commit or rollback) and wakes the waiters that can now be
    /// granted.
    pub fn release_all(&self, trx: TrxId) {
        let held = {
            let mut trxs = self.trx_shard(trx);
            let Some(locks) = trxs.get_mut(&trx) else {
                return;
            };
            let held = std::mem::take(&mut locks.held);
            if locks.wait.is_none() {
                trxs.remove(&trx);
            }
            held
        };
        for row in held {
            let mut shard = self.row_shard(&row);
            let Some(queue) = shard.get_mut(&row) else {
                continue;
            };
            if let Some(p) = queue.holders.iter().position(|h| h.0 == trx) {
                queue.holders.swap_remove(p);
                self.rows_locked.fetch_sub(1, Ordering::Relaxed);
            }
            if !queue.waiters.is_empty() {
                self.settle(&row, queue, None);
            }
            if queue.is_empty() {
                shard.remove(&row);
            }
        }
    }

    /// Cancels trx's current wait (its `lock` call returns Err(Cancelled)),
    /// or, when it is not waiting, its next one: both sides decide under the
    /// trx's shard lock, so a cancel is never lost to a wait that was about
    /// to begin. `release_all` forgets a cancel not used.
    pub fn cancel(&self, trx: TrxId) {
        let mut trxs = self.trx_shard(trx);
        let locks = trxs.entry(trx).or_default();
        match &locks.wait {
            Some(signal) => signal.finish(WaitState::Cancelled),
            None => locks.cancel_pending = true,
        }
    }

    /// Cancels every wait and makes every later request that would wait
    /// fail at once with `Cancelled` (the engine stopped: `Engine::fail`;
    /// nobody will release the locks of its unfinished transactions).
    /// Requests that need no wait are still granted.
    pub fn cancel_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for shard in self.trxs.iter() {
            for locks in unpoisoned(shard.lock()).values() {
                if let Some(signal) = &locks.wait {
                    signal.finish(WaitState::Cancelled);
                }
            }
        }
    }

    pub fn held_mode(&self, trx: TrxId, table: u32, key: &[u8]) -> Option<LockMode> {
        let row: RowKey = (table, 0, key.to_vec());
        self.row_shard(&row).get(&row).and_then(|q| q.held_by(trx))
    }

    /// Number of row locks held by trx.
    pub fn lock_count(&self, trx: TrxId) -> usize {
        self.trx_shard(trx).get(&trx).map_or(0, |l| l.held.len())
    }

    /// Total lock entries (held) and waiting transactions, for tests and metrics.
    pub fn total_locks(&self) -> usize {
        self.rows_locked.load(Ordering::Relaxed) as usize
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed) as usize
    }

    /// Forgets trx's wait registration (for `cancel`) if it is still this wait.
    fn clear_wait(&self, trx: TrxId, wait_id: u64) {
        let mut trxs = self.trx_shard(trx);
        if let Some(locks) = trxs.get_mut(&trx) {
            if locks.wait.as_ref().is_some_and(|s| s.wait_id == wait_id) {
                locks.wait = None;
            }
            if locks.wait.is_none() && locks.held.is_empty() {
                trxs.remove(&trx);
            }
        }
    }

    /// Takes a wait that ended without a grant out of its queue and the
    /// graph, and lets the waiters behind it move up.
    fn withdraw(&self, row: &RowKey, trx: TrxId, wait_id: u64) {
        let mut shard = self.row_shard(row);
        if let Some(queue) = shard.get_mut(row) {
            if let Some(p) = queue
                .waiters
                .iter()
                .position(|w| w.signal.wait_id == wait_id)
            {
                queue.waiters.remove(p);
                self.waiting.fetch_sub(1, Ordering::Relaxed);
            }
            remove_edges(&mut self.graph(), trx, wait_id);
            self.settle(row, queue, None);
            if queue.is_empty() {
                shard.remove(row);
            }
        } else {
            remove_edges(&mut self.graph(), trx, wait_id);
        }
    }

    /// Brings a queue and its part of the wait-for graph up to date after a
    /// change: drops waits that ended, grants what is grantable in FIFO
    /// order, recomputes the waiters' edges, and picks a deadlock victim
    /// among waiters that gained edges (`requester` first: the newcomer that
    /// closes a cycle is the victim), repeating until no victim is found.
    /// Called with the row's shard held.
    fn settle(&self, row: &RowKey, queue: &mut LockQueue, requester: Option<TrxId>) {
        loop {
            // Waits that left the queue here: (trx, wait_id).
            let mut gone: Vec<(TrxId, u64)> = Vec::new();
            let mut i = 0;
            while i < queue.waiters.len() {
                let w = &queue.waiters[i];
                let live = w.signal.is_waiting();
                let covered = queue.held_by(w.trx).is_some_and(|h| h >= w.mode);
                if live && !covered && !queue.blockers(i).is_empty() {
                    i += 1;
                    continue;
                }
                let w = queue.waiters.remove(i);
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                gone.push((w.trx, w.signal.wait_id));
                // A wait that ended (timeout, cancel) just leaves; its
                // thread finds itself gone when it cleans up.
                let new_entry = queue.held_by(w.trx).is_none();
                if live && self.grant_waiter(&w, row, new_entry) {
                    queue.add_holder(w.trx, w.mode);
                    if new_entry {
                        self.rows_locked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if gone.is_empty() && queue.waiters.is_empty() {
                return;
            }

            let victim = {
                let mut graph = self.graph();
                for &(trx, wait_id) in &gone {
                    remove_edges(&mut graph, trx, wait_id);
                }
                let mut suspects = Vec::new();
                for (idx, w) in queue.waiters.iter().enumerate() {
                    let blockers = queue.blockers(idx);
                    let gained = match graph.get(&w.trx) {
                        Some(old) if old.wait_id == w.signal.wait_id => {
                            blockers.iter().any(|b| !old.blockers.contains(b))
                        }
                        _ => true,
                    };
                    if gained {
                        suspects.push(w.trx);
                    }
                    graph.insert(
                        w.trx,
                        WaitEdges {
                            wait_id: w.signal.wait_id,
                            blockers,
                        },
                    );
                }
                if let Some(p) = requester.and_then(|r| suspects.iter().position(|&t| t == r)) {
                    suspects.swap(0, p);
                }
                let victim = suspects.into_iter().find(|&t| closes_cycle(&graph, t));
                if let Some(v) = victim {
                    graph.remove(&v);
                }
                victim
            };
            let Some(victim) = victim else {
                return;
            };
            if let Some(p) = queue.waiters.iter().position(|w| w.trx == victim) {
                let w = queue.waiters.remove(p);
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                w.signal.finish(WaitState::Victim);
            }
            // The victim's departure may let the waiters behind it through.
        }
    }

    /// Grants waiter `w` if its wait has not ended meanwhile. The row goes
    /// into the trx's list before the waiter can see the grant, so its
    /// `release_all` right after waking finds it.
    fn grant_waiter(&self, w: &Waiter, row: &RowKey, new_entry: bool) -> bool {
        let mut trxs = self.trx_shard(w.trx);
        let mut state = w.signal.state();
        if *state != WaitState::Waiting {
            return false;
        }
        if new_entry {
            trxs.entry(w.trx).or_default().held.push(row.clone());
        }
        *state = WaitState::Granted;
        w.signal.wake.notify_one();
        true
    }
}

/// Removes trx's edges if they still belong to wait `wait_id`: by then the
/// trx may be waiting elsewhere, and those edges must stay.
fn remove_edges(graph: &mut HashMap<TrxId, WaitEdges>, trx: TrxId, wait_id: u64) {
    if graph.get(&trx).is_some_and(|e| e.wait_id == wait_id) {
        graph.remove(&trx);
    }
}

/// Whether a path of wait-for edges leads from `start` back to itself; a
/// search longer than `DEADLOCK_SEARCH_MAX_STEPS` answers yes.
fn closes_cycle(graph: &HashMap<TrxId, WaitEdges>, start: TrxId) -> bool {
    let mut stack: Vec<TrxId> = match graph.get(&start) {
        Some(e) => e.blockers.clone(),
        None => return false,
    };
    let mut visited = HashSet::new();
    let mut steps = 0usize;
    while let Some(t) = stack.pop() {
        if t == start {
            return true;
        }
        if !visited.insert(t) {
            continue;
        }
        steps += 1;
        if steps > DEADLOCK_SEARCH_MAX_STEPS {
            return true;
        }
        if let Some(e) = graph.get(&t) {
            stack.extend(e.blockers.iter().copied());
        }
    }
    false
}
