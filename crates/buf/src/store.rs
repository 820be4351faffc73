//! The page store: one data directory's tablespaces, buffer pool and redo
//! log, opened with crash recovery, kept within its log by the page cleaner.
//!
//! Open: take the data directory's exclusive lock (held for the store's
//! life), read the control file (page size), restore torn pages from the
//! doublewrite area, open the redo log applying every record after the
//! checkpoint to the pages it names (when the page is older than the
//! record), attach the log, start the cleaner.
//!
//! Creation is atomic: a `millrace.creating` marker is made durable first,
//! then the log, the system space and whatever the layer above initialises
//! (`open_with_init`), a checkpoint, and the control file last; then the
//! marker goes. An open that finds the marker without a control file
//! finds an interrupted first start, which holds no committed data: it
//! removes what was made and creates again. A directory with store files
//! but neither file is refused, never wiped.

use crate::config::BufConfig;
use crate::error::Error;
use crate::files::{Doublewrite, SpaceFiles};
use crate::mtr::Mtr;
use crate::ops::{self, Op, OpReader};
use crate::page::{self, PageId};
use crate::pool::{BufferPool, FlushReason, LatchMode};
use crate::space;
use millrace_io::{Storage, StorageFile, StorageLock};
use millrace_metrics::Registry;
use millrace_redo::{Log, LogConfig, Record, RecoveryReport};
use millrace_sys::cpu::CpuBudget;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const CONTROL_FILE: &str = "millrace.ctl";
/// Present while a first start is under way (see the module comment).
const CREATING_FILE: &str = "millrace.creating";
const CONTROL_MAGIC: &[u8; 8] = b"MLRCCTRL";
const CONTROL_VERSION: u32 = 1;

/// Everything a store needs at open.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub buf: BufConfig,
    pub log: LogConfig,
    /// Run the page cleaner thread (tests may drive flushing by hand).
    pub cleaner: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            buf: BufConfig::default(),
            log: LogConfig::default(),
            cleaner: true,
        }
    }
}

/// control file: magic, version u32, page size u32, crc32c of the 16 bytes.
fn write_control(storage: &dyn Storage, page_size: usize) -> Result<(), Error> {
    let mut b = vec![0u8; 4096];
    b[0..8].copy_from_slice(CONTROL_MAGIC);
    b[8..12].copy_from_slice(&CONTROL_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(page_size as u32).to_le_bytes());
    let crc = crc32c::crc32c(&b[0..16]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    let io = |e: std::io::Error| Error::Io(format!("writing {CONTROL_FILE}: {e}"));
    let f = storage.open(CONTROL_FILE, true).map_err(io)?;
    f.write_all_at(&b, 0).map_err(io)?;
    f.sync_data().map_err(io)
}

fn read_control(storage: &dyn Storage) -> Result<usize, Error> {
    let io = |e: std::io::Error| Error::Io(format!("reading {CONTROL_FILE}: {e}"));
    let f = storage.open(CONTROL_FILE, false).map_err(io)?;
    let mut b = vec![0u8; 20];
    f.read_exact_at(&mut b, 0).map_err(io)?;
    if &b[0..8] != CONTROL_MAGIC || crc32c::crc32c(&b[0..16]) != page::u32_at(&b, 16) {
        return Err(Error::Corrupt(format!("{CONTROL_FILE} is damaged")));
    }
    let version = page::u32_at(&b, 8);
    if version != CONTROL_VERSION {
        return Err(Error::Corrupt(format!(
            "{CONTROL_FILE} version {version} is unknown"
        )));
    }
    let ps = page::u32_at(&b, 12) as usize;
    if !page::valid_page_size(ps) {
        return Err(Error::Corrupt(format!(
            "{CONTROL_FILE}: page size {ps} is invalid"
        )));
    }
    Ok(ps)
}

pub struct PageStore {
    pool: Arc<BufferPool>,
    log: Arc<Log>,
    cleaner: Mutex<Option<JoinHandle<()>>>,
    stop: AtomicBool,
    /// Redo a mini-transaction may write at most; `mtr()` waits until the
    /// log has this much room before any page is latched.
    mtr_margin_bytes: u64,
    /// The data directory's exclusive lock, released when the store drops.
    _dir_lock: StorageLock,
}

impl PageStore {
    /// Opens the store in `storage`, creating it if the directory holds none.
    /// Returns the recovery report when an existing store was opened.
    pub fn open(
        storage: Arc<dyn Storage>,
        cfg: StoreConfig,
        cpu: Arc<CpuBudget>,
        registry: &Registry,
    ) -> Result<(Arc<PageStore>, Option<RecoveryReport>), Error> {
        Self::open_with_init(storage, cfg, cpu, registry, |_| Ok(()))
    }

    /// Like `open`; when the store is created, `init` runs on it before the
    /// control file is written, so the layer above's first pages are part of
    /// the atomic creation (a crash before it finishes leaves a directory
    /// the next open creates again).
    pub fn open_with_init<E: From<Error>>(
        storage: Arc<dyn Storage>,
        mut cfg: StoreConfig,
        cpu: Arc<CpuBudget>,
        registry: &Registry,
        init: impl FnOnce(&Arc<PageStore>) -> Result<(), E>,
    ) -> Result<(Arc<PageStore>, Option<RecoveryReport>), E> {
        let dir_lock = storage
            .lock_exclusive()
            .map_err(|e| Error::Io(format!("locking the data directory: {e}")))?;
        if !storage.exists(CONTROL_FILE) {
            let leftovers = [cfg.log.file_name.as_str(), crate::files::DOUBLEWRITE_FILE]
                .into_iter()
                .map(String::from)
                .chain([crate::files::space_file_name(0)])
                .filter(|n| storage.exists(n))
                .collect::<Vec<_>>();
            if !leftovers.is_empty() && !storage.exists(CREATING_FILE) {
                return Err(Error::Corrupt(format!(
                    "the data directory holds {} but no {CONTROL_FILE}: not a complete \
                     millrace store (refusing to overwrite it)",
                    leftovers.join(", ")
                ))
                .into());
            }
            let store = Self::create(storage, cfg, cpu, registry, dir_lock, init)?;
            return Ok((store, None));
        }
        if storage.exists(CREATING_FILE) {
            if read_control(&*storage).is_err() {
                // The crash came while the control file was being written
                // (its name is durable before its bytes): still unfinished.
                let store = Self::create(storage, cfg, cpu, registry, dir_lock, init)?;
                return Ok((store, None));
            }
            // The control file is written last: creation finished and only
            // the marker's removal was cut short.
            storage
                .remove(CREATING_FILE)
                .map_err(|e| Error::Io(format!("removing {CREATING_FILE}: {e}")))?;
        }
        if !storage.exists(&cfg.log.file_name) {
            return Err(Error::Corrupt(format!(
                "{CONTROL_FILE} exists but the redo log {} is missing",
                cfg.log.file_name
            ))
            .into());
        }
        cfg.buf.page_size = read_control(&*storage)?;
        cfg.buf.validate().map_err(Error::Config)?;
        let files = SpaceFiles::new(storage.clone(), cfg.buf.page_size);
        let dblwr = Doublewrite::open(&*storage, cfg.buf.page_size, cfg.buf.doublewrite_pages)?;
        let restored = dblwr.restore(&files)?;
        if restored > 0 {
            tracing::warn!(restored, "torn pages restored from the doublewrite area");
        }
        let pool = BufferPool::new(cfg.buf.clone(), files, dblwr, registry);
        let mut apply_err: Option<Error> = None;
        let (log, report) = Log::open(
            &*storage,
            cfg.log.clone(),
            cpu,
            registry,
            &mut |rec: Record| {
                apply_record(&pool, &rec).map_err(|e| {
                    let msg = e.to_string();
                    apply_err = Some(e);
                    msg
                })
            },
        )
        .map_err(|e| apply_err.take().unwrap_or(Error::Log(e)))?;
        tracing::info!(
            records = report.records,
            end_lsn = report.end_lsn,
            dirty_pages = pool.dirty_pages(),
            "recovery applied the redo log"
        );
        let store = Self::assemble(pool, log, &cfg, dir_lock);
        Ok((store, Some(report)))
    }

    fn create<E: From<Error>>(
        storage: Arc<dyn Storage>,
        cfg: StoreConfig,
        cpu: Arc<CpuBudget>,
        registry: &Registry,
        dir_lock: StorageLock,
        init: impl FnOnce(&Arc<PageStore>) -> Result<(), E>,
    ) -> Result<Arc<PageStore>, E> {
        cfg.buf.validate().map_err(Error::Config)?;
        let io = |what: &str, e: std::io::Error| Error::Io(format!("{what}: {e}"));
        // The marker first, durably named (creating a file syncs its
        // directory): from here until the control file exists, everything
        // in the directory is an unfinished creation.
        storage
            .open(CREATING_FILE, true)
            .map_err(|e| io("creating the creation marker", e))?;
        remove_unfinished_creation(&*storage, &cfg.log.file_name)?;
        let files = SpaceFiles::new(storage.clone(), cfg.buf.page_size);
        let dblwr = Doublewrite::open(&*storage, cfg.buf.page_size, cfg.buf.doublewrite_pages)?;
        let pool = BufferPool::new(cfg.buf.clone(), files, dblwr, registry);
        let log = Log::create(&*storage, cfg.log.clone(), cpu, registry).map_err(Error::Log)?;
        let store = Self::assemble(pool, log, &cfg, dir_lock);
        {
            let mut mtr = store.mtr()?;
            space::create_space(&mut mtr, space::SYSTEM_SPACE)?;
            let end = mtr.commit()?.expect("creating a space logs");
            store.log.wait_flushed(end).map_err(Error::Log)?;
        }
        init(&store)?;
        store.checkpoint_now()?;
        // Written last: its presence (with the log) marks the store created.
        write_control(&*storage, cfg.buf.page_size)?;
        storage
            .remove(CREATING_FILE)
            .map_err(|e| io("removing the creation marker", e))?;
        Ok(store)
    }

    fn assemble(
        pool: Arc<BufferPool>,
        log: Log,
        cfg: &StoreConfig,
        dir_lock: StorageLock,
    ) -> Arc<PageStore> {
        let log = Arc::new(log);
        pool.attach_log(log.clone());
        let store = Arc::new(PageStore {
            pool,
            mtr_margin_bytes: log.capacity_bytes() / 8,
            log,
            cleaner: Mutex::new(None),
            stop: AtomicBool::new(false),
            _dir_lock: dir_lock,
        });
        if cfg.cleaner {
            let weak = Arc::downgrade(&store);
            let h = std::thread::Builder::new()
                .name("millrace-page-cleaner".into())
                .spawn(move || cleaner_thread(weak))
                .expect("spawning the page cleaner");
            *store.cleaner.lock().expect("poisoned") = Some(h);
        }
        store
    }

    /// Starts a mini-transaction. Waits first, holding no latch, until the
    /// redo log has room for it and for every other mtr already started
    /// (the cleaner may need their latches to make room, so none of them
    /// may have to wait for log space once it holds latches).
    ///
    /// A stopped engine (see `failure`) starts none: reads too get the
    /// error, as the pages may hold a half-done change.
    pub fn mtr(&self) -> Result<Mtr<'_>, Error> {
        let log = &self.log;
        if log.is_failed() {
            return Err(Error::Log(millrace_redo::LogError::Failed(
                log.failure().unwrap_or_default(),
            )));
        }
        // Read apart: a checkpoint may pass the current LSN read first.
        let age = log.current_lsn().saturating_sub(log.checkpoint_lsn());
        if age > log.capacity_bytes() / 4 {
            self.wake_cleaner();
        }
        self.admit()?;
        if let Err(e) = log.free_check(self.free_check_margin()) {
            self.pool
                .active_mtrs
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            return Err(Error::Log(e));
        }
        Ok(Mtr::new(&self.pool))
    }

    /// Counts a new mtr in `active_mtrs`, first waiting (holding no latch)
    /// while the log could not hold the redo of one more: the margin of
    /// `free_check` covers every running mtr only while
    /// `base + running x mtr_redo_bound_bytes` fits in half the log. On a
    /// log of normal size that is thousands of mtrs and nobody waits; on a
    /// tiny one mtrs take turns. An mtr started by a thread that holds one
    /// already is not made to wait (it would wait for itself), and no mtr
    /// waits longer than `ADMIT_WAIT`: a thread holding an mtr could be
    /// waiting for a mutex this thread holds, and a bounded wait can turn
    /// that into a delay, never into a deadlock of its own.
    fn admit(&self) -> Result<(), Error> {
        const ADMIT_WAIT: Duration = Duration::from_secs(1);
        use std::sync::atomic::Ordering::SeqCst;
        let active = &self.pool.active_mtrs;
        let per_mtr = mtr_redo_bound_bytes(self.pool.page_size());
        let room = (self.log.capacity_bytes() / 2).saturating_sub(self.mtr_margin_bytes);
        let max_active = (room / per_mtr).max(1) as usize;
        if crate::mtr::thread_holds_mtr() {
            active.fetch_add(1, SeqCst);
            return Ok(());
        }
        let deadline = std::time::Instant::now() + ADMIT_WAIT;
        loop {
            let now = active.load(SeqCst);
            if now < max_active || std::time::Instant::now() >= deadline {
                if active
                    .compare_exchange(now, now + 1, SeqCst, SeqCst)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            if self.log.is_failed() {
                return Err(Error::Log(millrace_redo::LogError::Failed(
                    self.log.failure().unwrap_or_default(),
                )));
            }
            // Only tiny logs get here; a short sleep keeps the common path
            // (ending an mtr) free of any wake-up work.
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The log space `mtr()` keeps free: the base margin plus the most
    /// redo one mtr writes for each mtr running (this one included); the
    /// admission in `admit` keeps it within half the log.
    fn free_check_margin(&self) -> u64 {
        let active = self
            .pool
            .active_mtrs
            .load(std::sync::atomic::Ordering::SeqCst) as u64;
        let per_mtr = mtr_redo_bound_bytes(self.pool.page_size());
        (self.mtr_margin_bytes + active.saturating_mul(per_mtr)).min(self.log.capacity_bytes() / 2)
    }

    /// Why the engine stopped, if it did: a page write or fsync failed, the
    /// log failed, or a mini-transaction was abandoned half-way. Every later
    /// operation fails; the next open recovers.
    pub fn failure(&self) -> Option<String> {
        self.log.failure()
    }

    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    fn wake_cleaner(&self) {
        self.pool.wake_cleaner();
    }

    /// Flushes every dirty page and checkpoints at the current end.
    pub fn checkpoint_now(&self) -> Result<(), Error> {
        self.pool.flush_all()?;
        if let Some(lsn) = self.pool.checkpoint_limit() {
            if lsn > self.log.checkpoint_lsn() {
                self.log.checkpoint(lsn).map_err(Error::Log)?;
            }
        }
        Ok(())
    }

    /// Stops the cleaner, flushes everything, checkpoints, stops the log.
    pub fn shutdown(&self) -> Result<(), Error> {
        self.stop.store(true, Ordering::SeqCst);
        self.wake_cleaner();
        if let Some(h) = self.cleaner.lock().expect("poisoned").take() {
            let _ = h.join();
        }
        if self.log.failure().is_some() {
            return Err(Error::Log(millrace_redo::LogError::Failed(
                self.log.failure().unwrap_or_default(),
            )));
        }
        self.checkpoint_now()?;
        self.log.shutdown().map_err(Error::Log)
    }

    /// Cuts a space's file to its size after `space::truncate_free_tail`
    /// was committed at `end_lsn`: waits for that to be durable, drops the
    /// cached pages past the end, sets the file length and syncs it.
    pub fn truncate_space_file(
        &self,
        space: u32,
        new_size: u32,
        end_lsn: u64,
    ) -> Result<(), Error> {
        self.log.wait_flushed(end_lsn).map_err(Error::Log)?;
        self.pool.discard_pages(space, new_size);
        let f = self.pool.files.file(space, false)?;
        let len = new_size as u64 * self.pool.page_size() as u64;
        f.set_len(len)
            .and_then(|_| f.sync_data())
            .map_err(|e| Error::Io(format!("truncating space {space}: {e}")))
    }

    /// A space's file length in bytes.
    pub fn space_file_bytes(&self, space: u32) -> Result<u64, Error> {
        self.pool
            .files
            .file(space, false)?
            .len()
            .map_err(|e| Error::Io(format!("space {space}: {e}")))
    }

    /// One round of the cleaner's work; returns whether it did anything.
    pub fn clean_once(&self) -> Result<bool, Error> {
        let cap = self.log.capacity_bytes();
        // Read apart: a checkpoint may pass the current LSN read first.
        let age = self
            .log
            .current_lsn()
            .saturating_sub(self.log.checkpoint_lsn());
        let batch = self.pool.cfg.flush_batch_pages;
        // Adaptive flushing: nothing below 10% of the log, then more as
        // the checkpoint age approaches the capacity.
        let rounds = match age * 100 / cap {
            0..=9 => 0,
            10..=49 => 1,
            50..=74 => 4,
            _ => 16,
        };
        let mut did = false;
        for _ in 0..rounds {
            let frames = self.pool.oldest_dirty(batch);
            if frames.is_empty() {
                break;
            }
            did |= self.pool.flush_frames(&frames, FlushReason::Adaptive)? > 0;
        }
        if let Some(lsn) = self.pool.checkpoint_limit() {
            let cp = self.log.checkpoint_lsn();
            if lsn > cp && (lsn - cp > cap / 32 || age > cap / 2) {
                self.log.checkpoint(lsn).map_err(Error::Log)?;
                did = true;
            }
        }
        // Keep free frames ready so that readers rarely flush or evict
        // themselves: clean tail pages go to the free list, dirty ones are
        // flushed first (they are evicted on a later round).
        let target = self.pool.free_target();
        let free = self.pool.free_frames();
        if free < target {
            did |= self.pool.evict_to_free(target - free) > 0;
            if self.pool.free_frames() < target {
                let dirty = self.pool.lru_tail_dirty(batch);
                if !dirty.is_empty() {
                    did |= self.pool.flush_frames(&dirty, FlushReason::Lru)? > 0;
                }
            }
        }
        Ok(did)
    }
}

impl Drop for PageStore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake_cleaner();
    }
}

fn cleaner_thread(store: std::sync::Weak<PageStore>) {
    loop {
        let Some(s) = store.upgrade() else { return };
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        // A panic would end this thread as silently as an error did:
        // either way the engine must stop, or writers wait for log space
        // for ever.
        let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.clean_once()))
            .unwrap_or_else(|_| Err(Error::Io("the page cleaner panicked".into())));
        let did = match round {
            Ok(d) => d,
            Err(e) => {
                // Checkpoints can no longer advance: without stopping the
                // engine, writers would wait for log space for ever. Every
                // waiter wakes to this error instead.
                tracing::error!(error = %e, "page cleaner failed; the engine stops");
                s.log.fail(&format!("the page cleaner failed: {e}"));
                return;
            }
        };
        if !did {
            // Idle: sleep until woken (log filling, frames short) or a
            // second passes. A background timer, not a commit-path poll.
            let (m, cv) = &s.pool.cleaner_wake;
            let g = m.lock().expect("poisoned");
            let (mut g, _) = cv
                .wait_timeout_while(g, Duration::from_secs(1), |woken| !*woken)
                .expect("poisoned");
            *g = false;
        }
    }
}

/// Applies one redo record to the pages it names, each only if its page
/// LSN is older than the record.
fn apply_record(pool: &BufferPool, rec: &Record<'_>) -> Result<(), Error> {
    struct Touched {
        id: PageId,
        frame: u32,
        apply: bool,
    }
    let mut touched: Vec<Touched> = Vec::new();
    let result = (|| {
        for op in OpReader::new(rec.payload) {
            let op = op.map_err(|e| {
                Error::Corrupt(format!("redo record at LSN {}: {e}", rec.start_lsn))
            })?;
            let id = match op {
                Op::CreateSpace { space } => {
                    pool.files.file(space, true)?;
                    continue;
                }
                Op::Write { id, .. } | Op::Move { id, .. } | Op::Init { id, .. } => id,
            };
            let i = match touched.iter().position(|t| t.id == id) {
                Some(i) => i,
                None => {
                    // A page (re)initialised by this record need not be
                    // read: its old content, torn or not, does not matter.
                    let init = matches!(op, Op::Init { .. });
                    let frame = pool.fetch(id, LatchMode::Exclusive, init)?;
                    let apply = init || page::page_lsn(pool.data(frame)) < rec.end_lsn;
                    touched.push(Touched { id, frame, apply });
                    touched.len() - 1
                }
            };
            if touched[i].apply {
                ops::apply(&op, pool.data_mut(touched[i].frame)).map_err(|e| {
                    Error::Corrupt(format!("redo record at LSN {}: {e}", rec.start_lsn))
                })?;
            }
        }
        let frames: Vec<u32> = touched
            .iter()
            .filter(|t| t.apply)
            .map(|t| t.frame)
            .collect();
        for &f in &frames {
            page::set_page_lsn(pool.data_mut(f), rec.end_lsn);
        }
        pool.mark_dirty(&frames, rec.start_lsn, rec.end_lsn);
        Ok(())
    })();
    for t in &touched {
        pool.unlatch(t.frame, LatchMode::Exclusive);
        pool.unfix(t.frame);
    }
    result
}

/// The most redo one mini-transaction is expected to write: a split
/// rewrites about three pages (the two halves and the parent entry) plus
/// headers, and an undo page change one more.
pub fn mtr_redo_bound_bytes(page_size: usize) -> u64 {
    4 * page_size as u64
}

/// Removes what an interrupted first start made: the redo log, the
/// doublewrite file and the tablespaces. Spaces are created with ids
/// 0, 1, 2... in order, so they are found by counting up to the first
/// missing one, and removed from the highest down, so that a crash during
/// the removal again leaves ids 0..k for the next try.
fn remove_unfinished_creation(storage: &dyn Storage, log_file: &str) -> Result<(), Error> {
    let remove = |name: &str| -> Result<(), Error> {
        if storage.exists(name) {
            tracing::warn!(file = name, "removing a file of an unfinished first start");
            storage
                .remove(name)
                .map_err(|e| Error::Io(format!("removing a half-created {name}: {e}")))?;
        }
        Ok(())
    };
    let mut spaces = 0u32;
    while storage.exists(&crate::files::space_file_name(spaces)) {
        spaces += 1;
    }
    for id in (0..spaces).rev() {
        remove(&crate::files::space_file_name(id))?;
    }
    remove(crate::files::DOUBLEWRITE_FILE)?;
    remove(log_file)?;
    remove(CONTROL_FILE)
}

/// The data directory's storage holds a store.
pub fn store_exists(storage: &dyn Storage, log: &LogConfig) -> bool {
    storage.exists(&log.file_name) && storage.exists(CONTROL_FILE)
}

#[allow(dead_code)]
fn _assert_file_is_object_safe(_: &dyn StorageFile) {}
