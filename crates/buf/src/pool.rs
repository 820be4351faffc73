// Long file, one job: the LRU lists are indexed by frame and set
// the frames' old flags under the pool's latch order, so they stay with
// the frames and the pool that owns them.
//! The buffer pool: frames holding pages, a sharded page hash, an LRU list
//! with midpoint insertion, a free list, a flush list ordered by oldest
//! modification, eviction and flushing through the doublewrite area.
//!
//! Latch order (docs/design.md, "Latch order"): page latches are taken before any pool
//! mutex and no pool mutex is held while waiting for a page latch. Among
//! the mutexes: LRU -> hash shard; flush list and free list stand alone;
//! the doublewrite mutex (one flush batch at a time) is taken before page
//! latches are tried (never waited for) by the flusher.

use crate::config::BufConfig;
use crate::error::Error;
use crate::files::{Doublewrite, SpaceFiles};
use crate::latch::{Latch, LatchWait};
use crate::order::{self, Level};
use crate::page::{self, PageId};
use millrace_io::AlignedBuf;
use millrace_metrics::{Counter, Registry};
use millrace_redo::Log;
use std::cell::UnsafeCell;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

const NO_PAGE: u64 = u64::MAX;
const NIL: u32 = u32::MAX;
const HASH_SHARDS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatchMode {
    Shared,
    Exclusive,
}

const STATE_FREE: u8 = 0;
const STATE_READY: u8 = 1;
const STATE_READ_FAILED: u8 = 2;

fn pack(id: PageId) -> u64 {
    ((id.space as u64) << 32) | id.page as u64
}
fn unpack(v: u64) -> PageId {
    PageId::new((v >> 32) as u32, v as u32)
}

pub(crate) struct Frame {
    latch: Latch,
    /// The page bytes: `page_size` bytes owned by `_buf`.
    ptr: *mut u8,
    _buf: UnsafeCell<AlignedBuf>,
    /// The page held; changes only while fix == 0, under its hash shard.
    id: AtomicU64,
    /// Pins: a fixed frame is never evicted or reassigned.
    fix: AtomicU32,
    state: AtomicU8,
    /// Start LSN of the first change since the page was last written; 0 =
    /// clean. Changed under the flush list mutex.
    oldest_mod: AtomicU64,
    /// End LSN of the last change (the write-ahead rule waits for it).
    newest_mod: AtomicU64,
    in_old: AtomicBool,
    loaded_ms: AtomicU64,
    /// The layer above has checked the content since it came from disk
    /// (`Mtr::get_checked`); pages built in memory need no check.
    validated: AtomicBool,
}

// SAFETY: the bytes behind `ptr` are read only under the frame's latch (S
// or X) and written only under X; the latch provides the synchronisation.
// `_buf` owns them and is never touched after construction.
unsafe impl Sync for Frame {}
unsafe impl Send for Frame {}

struct Lru {
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    /// First frame of the old sublist (towards the tail), NIL if none.
    old: u32,
    len: usize,
    old_len: usize,
    old_pct: usize,
}

impl Lru {
    fn new(n: usize, old_pct: usize) -> Self {
        Self {
            prev: vec![NIL; n],
            next: vec![NIL; n],
            head: NIL,
            tail: NIL,
            old: NIL,
            len: 0,
            old_len: 0,
            old_pct,
        }
    }

    fn unlink(&mut self, f: u32, frames: &[Frame]) {
        let (p, n) = (self.prev[f as usize], self.next[f as usize]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.head = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        } else {
            self.tail = p;
        }
        if self.old == f {
            self.old = n;
        }
        if frames[f as usize].in_old.swap(false, Ordering::Relaxed) {
            self.old_len -= 1;
        }
        self.prev[f as usize] = NIL;
        self.next[f as usize] = NIL;
        self.len -= 1;
    }

    /// Links `f` before `at` (NIL: at the tail end).
    fn link_before(&mut self, f: u32, at: u32) {
        let p = if at == NIL {
            self.tail
        } else {
            self.prev[at as usize]
        };
        self.prev[f as usize] = p;
        self.next[f as usize] = at;
        if p != NIL {
            self.next[p as usize] = f;
        } else {
            self.head = f;
        }
        if at != NIL {
            self.prev[at as usize] = f;
        } else {
            self.tail = f;
        }
        self.len += 1;
    }

    /// A page just read goes to the head of the old sublist, so a scan that
    /// touches pages once cannot push out the hot set.
    fn insert_mid(&mut self, f: u32, frames: &[Frame]) {
        self.link_before(f, self.old);
        self.old = f;
        frames[f as usize].in_old.store(true, Ordering::Relaxed);
        self.old_len += 1;
        self.rebalance(frames);
    }

    fn make_young(&mut self, f: u32, frames: &[Frame]) {
        self.unlink(f, frames);
        self.link_before(f, self.head);
        self.rebalance(frames);
    }

    fn rebalance(&mut self, frames: &[Frame]) {
        let target = self.len * self.old_pct / 100;
        while self.old_len < target {
            let cand = if self.old == NIL {
                self.tail
            } else {
                self.prev[self.old as usize]
            };
            if cand == NIL {
                break;
            }
            self.old = cand;
            frames[cand as usize].in_old.store(true, Ordering::Relaxed);
            self.old_len += 1;
        }
        while self.old_len > target && self.old != NIL {
            frames[self.old as usize]
                .in_old
                .store(false, Ordering::Relaxed);
            self.old = self.next[self.old as usize];
            self.old_len -= 1;
        }
    }
}

pub(crate) struct PoolMetrics {
    pub reads: Arc<Counter>,
    pub writes: Arc<Counter>,
    pub evictions: Arc<Counter>,
    pub flush_adaptive: Arc<Counter>,
    pub flush_lru: Arc<Counter>,
    pub flush_other: Arc<Counter>,
    pub doublewrite_bytes: Arc<Counter>,
    pub latch_waits: Arc<Counter>,
    pub latch_wait_ns: Arc<Counter>,
    pub free_waits: Arc<Counter>,
}

/// Why a page is being flushed (for the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushReason {
    /// The cleaner, to keep the checkpoint age down.
    Adaptive,
    /// To free frames at the cold end of the LRU.
    Lru,
    /// Shutdown, or an explicit flush.
    Other,
}

pub struct BufferPool {
    pub(crate) cfg: BufConfig,
    page_size: usize,
    frames: Box<[Frame]>,
    shards: Box<[Mutex<HashMap<PageId, u32>>]>,
    lru: Mutex<Lru>,
    free: Mutex<Vec<u32>>,
    /// Waiters for a frame to become free or unpinned.
    frame_cv: Condvar,
    frame_waiters: AtomicU32,
    flush_list: Mutex<BTreeSet<(u64, u32)>>,
    pub(crate) files: SpaceFiles,
    dblwr: Mutex<(Doublewrite, AlignedBuf)>,
    log: OnceLock<Arc<Log>>,
    /// Wakes the page cleaner (frames short, log filling).
    pub(crate) cleaner_wake: (Mutex<bool>, Condvar),
    /// Mini-transactions started and not yet ended (the log space margin
    /// grows with them).
    pub(crate) active_mtrs: AtomicUsize,
    started: Instant,
    pub(crate) m: PoolMetrics,
}

impl BufferPool {
    pub(crate) fn new(
        cfg: BufConfig,
        files: SpaceFiles,
        dblwr: Doublewrite,
        registry: &Registry,
    ) -> Arc<Self> {
        let page_size = cfg.page_size;
        let n = (cfg.pool_bytes / page_size).max(16);
        let align = page_size.min(4096);
        let frames: Box<[Frame]> = (0..n)
            .map(|_| {
                let mut buf = AlignedBuf::zeroed(page_size, align);
                let ptr = buf.as_mut_ptr();
                (buf, ptr)
            })
            .map(|(buf, ptr)| Frame {
                latch: Latch::new(),
                ptr,
                _buf: UnsafeCell::new(buf),
                id: AtomicU64::new(NO_PAGE),
                fix: AtomicU32::new(0),
                state: AtomicU8::new(STATE_FREE),
                oldest_mod: AtomicU64::new(0),
                newest_mod: AtomicU64::new(0),
                in_old: AtomicBool::new(false),
                loaded_ms: AtomicU64::new(0),
                validated: AtomicBool::new(false),
            })
            .collect();
        let batch = dblwr.slots();
        let c = |name, help| registry.counter("buffer", name, help);
        let m = PoolMetrics {
            reads: c("buffer_page_reads", "pages read from disk"),
            writes: c("buffer_page_writes", "pages written in place"),
            evictions: c(
                "buffer_lru_evictions",
                "clean pages evicted from the LRU tail",
            ),
            flush_adaptive: c(
                "buffer_flush_adaptive",
                "pages flushed by the cleaner for the checkpoint age",
            ),
            flush_lru: c(
                "buffer_flush_lru",
                "dirty pages flushed from the LRU tail to free frames",
            ),
            flush_other: c(
                "buffer_flush_other",
                "pages flushed at shutdown or on request",
            ),
            doublewrite_bytes: c(
                "buffer_doublewrite_bytes",
                "bytes written to the doublewrite area",
            ),
            latch_waits: c(
                "buffer_page_latch_waits",
                "page latch acquisitions that had to wait",
            ),
            latch_wait_ns: c(
                "buffer_page_latch_wait_ns",
                "time spent waiting for page latches, ns",
            ),
            free_waits: c(
                "buffer_free_frame_waits",
                "fetches that waited for a free frame",
            ),
        };
        let pool = Arc::new(Self {
            page_size,
            shards: (0..HASH_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            lru: Mutex::new(Lru::new(n, cfg.lru_old_pct)),
            free: Mutex::new((0..n as u32).rev().collect()),
            frame_cv: Condvar::new(),
            frame_waiters: AtomicU32::new(0),
            flush_list: Mutex::new(BTreeSet::new()),
            files,
            dblwr: Mutex::new((dblwr, AlignedBuf::zeroed(batch * page_size, align))),
            log: OnceLock::new(),
            cleaner_wake: (Mutex::new(false), Condvar::new()),
            active_mtrs: AtomicUsize::new(0),
            started: Instant::now(),
            frames,
            m,
            cfg,
        });
        type Read = fn(&BufferPool) -> u64;
        let gauges: [(&'static str, &'static str, Read); 3] = [
            ("buffer_pages_total", "frames in the pool", |p| {
                p.frames.len() as u64
            }),
            ("buffer_pages_free", "frames on the free list", |p| {
                p.free.lock().expect("poisoned").len() as u64
            }),
            ("buffer_pages_dirty", "pages on the flush list", |p| {
                p.dirty_pages() as u64
            }),
        ];
        for (name, help, read) in gauges {
            let weak = Arc::downgrade(&pool);
            registry.gauge("buffer", name, help, move || {
                weak.upgrade().map_or(0, |p| read(&p))
            });
        }
        pool
    }

    pub(crate) fn attach_log(&self, log: Arc<Log>) {
        let _ = self.log.set(log);
    }

    pub(crate) fn log(&self) -> Option<&Arc<Log>> {
        self.log.get()
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }
    pub fn frames(&self) -> usize {
        self.frames.len()
    }
    pub fn dirty_pages(&self) -> usize {
        order::lock(&self.flush_list, Level::Flush).len()
    }
    pub fn free_frames(&self) -> usize {
        order::lock(&self.free, Level::Free).len()
    }
    /// The smallest oldest-modification LSN of any dirty page.
    pub fn oldest_dirty_lsn(&self) -> Option<u64> {
        order::lock(&self.flush_list, Level::Flush)
            .first()
            .map(|&(lsn, _)| lsn)
    }

    fn shard(&self, id: PageId) -> &Mutex<HashMap<PageId, u32>> {
        let h = (id.space as usize).wrapping_mul(0x9E37_79B9)
            ^ (id.page as usize).wrapping_mul(0x85EB_CA6B);
        &self.shards[h % HASH_SHARDS]
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// # Safety contract
    /// The caller holds the frame's latch (any mode) and the frame is fixed.
    pub(crate) fn data(&self, f: u32) -> &[u8] {
        // SAFETY: see the contract; X holders are the only writers.
        unsafe { std::slice::from_raw_parts(self.frames[f as usize].ptr, self.page_size) }
    }

    /// The caller holds the frame's X latch.
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn data_mut(&self, f: u32) -> &mut [u8] {
        debug_assert!(self.frames[f as usize].latch.is_x_locked());
        // SAFETY: X latch: no other reader or writer.
        unsafe { std::slice::from_raw_parts_mut(self.frames[f as usize].ptr, self.page_size) }
    }

    fn latch(&self, f: u32, mode: LatchMode) {
        order::assert_no_pool_mutex();
        let l = &self.frames[f as usize].latch;
        let w: LatchWait = match mode {
            LatchMode::Shared => l.lock_s(),
            LatchMode::Exclusive => l.lock_x(),
        };
        if w.waited {
            self.m.latch_waits.inc();
            self.m.latch_wait_ns.add(w.wait_ns);
        }
    }

    pub(crate) fn unlatch(&self, f: u32, mode: LatchMode) {
        let l = &self.frames[f as usize].latch;
        match mode {
            LatchMode::Shared => l.unlock_s(),
            LatchMode::Exclusive => l.unlock_x(),
        }
    }

    pub(crate) fn unfix(&self, f: u32) {
        let prev = self.frames[f as usize].fix.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(prev > 0, "unfix of an unfixed frame");
        if prev == 1 && self.frame_waiters.load(Ordering::SeqCst) > 0 {
            let _g = order::lock(&self.free, Level::Free);
            self.frame_cv.notify_all();
        }
    }

    /// Fixes and latches the page, reading it if needed. With `create`, the
    /// page is not read: it is zero-filled and X-latched for the caller to
    /// format (a newly allocated page).
    pub(crate) fn fetch(&self, id: PageId, mode: LatchMode, create: bool) -> Result<u32, Error> {
        // Frames found in the failed state (another reader's read failed).
        let mut failed_seen = 0;
        loop {
            let hit = {
                let map = order::lock(self.shard(id), Level::Shard);
                map.get(&id).map(|&f| {
                    self.frames[f as usize].fix.fetch_add(1, Ordering::SeqCst);
                    f
                })
            };
            if let Some(f) = hit {
                let mode = if create { LatchMode::Exclusive } else { mode };
                self.latch(f, mode);
                let fr = &self.frames[f as usize];
                if fr.state.load(Ordering::Acquire) == STATE_READ_FAILED {
                    self.unlatch(f, mode);
                    self.unfix(f);
                    failed_seen += 1;
                    if create || failed_seen <= 3 {
                        // A new page's old content does not matter; for an
                        // existing page the failure may have been passing
                        // (an EIO): drop the failed frame and read again,
                        // rather than make the page unreadable until the
                        // frame happens to be evicted.
                        self.discard_failed(id, f);
                        continue;
                    }
                    return Err(Error::Corrupt(format!("page {id} could not be read")));
                }
                if create {
                    self.data_mut(f).fill(0);
                    fr.validated.store(true, Ordering::Release);
                }
                self.touch(f);
                return Ok(f);
            }
            let f = self.get_free_frame()?;
            let fr = &self.frames[f as usize];
            {
                let mut map = order::lock(self.shard(id), Level::Shard);
                if map.contains_key(&id) {
                    drop(map);
                    order::lock(&self.free, Level::Free).push(f);
                    continue;
                }
                fr.fix.store(1, Ordering::SeqCst);
                fr.id.store(pack(id), Ordering::SeqCst);
                fr.oldest_mod.store(0, Ordering::Relaxed);
                fr.newest_mod.store(0, Ordering::Relaxed);
                // Latched X before it is visible: others wait for the read.
                assert!(fr.latch.try_x(), "a free frame is unlatched");
                fr.state.store(STATE_READY, Ordering::Release);
                map.insert(id, f);
            }
            fr.loaded_ms.store(self.now_ms(), Ordering::Relaxed);
            order::lock(&self.lru, Level::Lru).insert_mid(f, &self.frames);
            let buf = self.data_mut(f);
            fr.validated.store(create, Ordering::Release);
            if create {
                buf.fill(0);
            } else {
                let read = self
                    .files
                    .read_page(id, buf)
                    .and_then(|_| page::verify(buf, id).map_err(Error::Corrupt));
                self.m.reads.inc();
                if let Err(e) = read {
                    fr.state.store(STATE_READ_FAILED, Ordering::Release);
                    fr.latch.unlock_x();
                    self.unfix(f);
                    tracing::error!(page = %id, error = %e, "page read failed");
                    return Err(e);
                }
            }
            if mode == LatchMode::Shared && !create {
                fr.latch.downgrade();
            }
            return Ok(f);
        }
    }

    fn discard_failed(&self, id: PageId, f: u32) {
        let mut lru = order::lock(&self.lru, Level::Lru);
        let mut map = order::lock(self.shard(id), Level::Shard);
        let fr = &self.frames[f as usize];
        if map.get(&id) == Some(&f) && fr.fix.load(Ordering::SeqCst) == 0 {
            map.remove(&id);
            lru.unlink(f, &self.frames);
            fr.id.store(NO_PAGE, Ordering::SeqCst);
            fr.state.store(STATE_FREE, Ordering::Release);
            drop(map);
            drop(lru);
            order::lock(&self.free, Level::Free).push(f);
        }
    }

    /// A page found in the old sublist moves to the head once it has been
    /// in the pool longer than old_blocks_time (a second access, not a scan).
    fn touch(&self, f: u32) {
        let fr = &self.frames[f as usize];
        if fr.in_old.load(Ordering::Relaxed)
            && self
                .now_ms()
                .saturating_sub(fr.loaded_ms.load(Ordering::Relaxed))
                >= self.cfg.old_blocks_time_ms
        {
            let mut lru = order::lock(&self.lru, Level::Lru);
            if fr.in_old.load(Ordering::Relaxed) {
                lru.make_young(f, &self.frames);
            }
        }
    }

    /// A free frame: from the free list, else by evicting a clean page from
    /// the LRU tail, else by flushing dirty tail pages first. Waits (never
    /// forever) while every frame is pinned.
    fn get_free_frame(&self) -> Result<u32, Error> {
        let deadline = Instant::now() + Duration::from_millis(self.cfg.frame_wait_timeout_ms);
        loop {
            let (f, left) = {
                let mut free = order::lock(&self.free, Level::Free);
                (free.pop(), free.len())
            };
            if left < self.free_target() {
                // Let the cleaner refill the free list before we have to
                // flush and evict ourselves.
                self.wake_cleaner();
            }
            if let Some(f) = f {
                return Ok(f);
            }
            let (victim, dirty) = self.evict_clean();
            if let Some(f) = victim {
                return Ok(f);
            }
            if !dirty.is_empty() && self.flush_frames(&dirty, FlushReason::Lru)? > 0 {
                continue;
            }
            // Everything is pinned (or latched by a flush): wait for an unfix.
            self.m.free_waits.inc();
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::PoolExhausted(format!(
                    "no page can be evicted from the buffer pool ({} frames, all pinned) within {} ms; \
                     the pool is too small for this many concurrent operations",
                    self.frames.len(),
                    self.cfg.frame_wait_timeout_ms
                )));
            }
            self.frame_waiters.fetch_add(1, Ordering::SeqCst);
            // The std guard: a condvar wait needs it. Nothing else is held.
            order::assert_no_pool_mutex();
            let g = self.free.lock().expect("poisoned");
            if g.is_empty() {
                let _ = self
                    .frame_cv
                    .wait_timeout(g, (deadline - now).min(Duration::from_millis(100)))
                    .expect("poisoned");
            }
            self.frame_waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Scans the cold end of the LRU: evicts the first clean unpinned page,
    /// and collects unpinned dirty pages seen on the way.
    fn evict_clean(&self) -> (Option<u32>, Vec<u32>) {
        let mut lru = order::lock(&self.lru, Level::Lru);
        let mut dirty = Vec::new();
        let mut f = lru.tail;
        let mut scanned = 0;
        let limit = (self.frames.len() / 4).max(64);
        while f != NIL && scanned < limit {
            let fr = &self.frames[f as usize];
            let prev = lru.prev[f as usize];
            if fr.fix.load(Ordering::SeqCst) == 0 {
                if fr.oldest_mod.load(Ordering::SeqCst) != 0 {
                    if dirty.len() < self.cfg.flush_batch_pages {
                        dirty.push(f);
                    }
                } else {
                    let id = unpack(fr.id.load(Ordering::SeqCst));
                    let mut map = order::lock(self.shard(id), Level::Shard);
                    // Recheck under the shard: fixing happens only there.
                    if fr.fix.load(Ordering::SeqCst) == 0
                        && fr.oldest_mod.load(Ordering::SeqCst) == 0
                        && map.get(&id) == Some(&f)
                    {
                        map.remove(&id);
                        drop(map);
                        lru.unlink(f, &self.frames);
                        fr.id.store(NO_PAGE, Ordering::SeqCst);
                        fr.state.store(STATE_FREE, Ordering::Release);
                        self.m.evictions.inc();
                        return (Some(f), dirty);
                    }
                }
            }
            f = prev;
            scanned += 1;
        }
        (None, dirty)
    }

    pub(crate) fn is_validated(&self, f: u32) -> bool {
        self.frames[f as usize].validated.load(Ordering::Acquire)
    }
    pub(crate) fn set_validated(&self, f: u32) {
        self.frames[f as usize]
            .validated
            .store(true, Ordering::Release);
    }

    /// Drops every cached page of `space` numbered `from_page` or more,
    /// without writing it (they are free pages of a space being truncated).
    /// Waits for pages a flush batch holds.
    pub(crate) fn discard_pages(&self, space: u32, from_page: u32) {
        loop {
            let mut busy = false;
            {
                let mut lru = order::lock(&self.lru, Level::Lru);
                for f in 0..self.frames.len() as u32 {
                    let fr = &self.frames[f as usize];
                    let id = unpack(fr.id.load(Ordering::SeqCst));
                    if id.space != space
                        || id.page < from_page
                        || fr.id.load(Ordering::SeqCst) == NO_PAGE
                    {
                        continue;
                    }
                    let mut map = order::lock(self.shard(id), Level::Shard);
                    if fr.fix.load(Ordering::SeqCst) != 0 || map.get(&id) != Some(&f) {
                        busy |= map.get(&id) == Some(&f);
                        continue;
                    }
                    map.remove(&id);
                    drop(map);
                    lru.unlink(f, &self.frames);
                    fr.id.store(NO_PAGE, Ordering::SeqCst);
                    fr.state.store(STATE_FREE, Ordering::Release);
                    let oldest = fr.oldest_mod.swap(0, Ordering::SeqCst);
                    if oldest != 0 {
                        order::lock(&self.flush_list, Level::Flush).remove(&(oldest, f));
                    }
                    drop(lru);
                    order::lock(&self.free, Level::Free).push(f);
                    lru = order::lock(&self.lru, Level::Lru);
                }
            }
            if !busy {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Frames the cleaner keeps on the free list.
    pub(crate) fn free_target(&self) -> usize {
        (self.frames.len() / 16).max(8)
    }

    pub(crate) fn wake_cleaner(&self) {
        let (m, cv) = &self.cleaner_wake;
        *m.lock().expect("poisoned") = true;
        cv.notify_one();
    }

    /// Evicts clean pages from the LRU tail onto the free list, up to `n`.
    pub(crate) fn evict_to_free(&self, n: usize) -> usize {
        let mut moved = 0;
        while moved < n {
            let (Some(f), _) = self.evict_clean() else {
                break;
            };
            order::lock(&self.free, Level::Free).push(f);
            moved += 1;
        }
        moved
    }

    /// Dirty frames at the LRU tail, for the cleaner to flush ahead of need.
    pub(crate) fn lru_tail_dirty(&self, max: usize) -> Vec<u32> {
        let lru = order::lock(&self.lru, Level::Lru);
        let mut out = Vec::new();
        let mut f = lru.tail;
        let mut scanned = 0;
        while f != NIL && scanned < max * 4 && out.len() < max {
            let fr = &self.frames[f as usize];
            if fr.fix.load(Ordering::SeqCst) == 0 && fr.oldest_mod.load(Ordering::SeqCst) != 0 {
                out.push(f);
            }
            f = lru.prev[f as usize];
            scanned += 1;
        }
        out
    }

    /// Up to `max` dirty frames with the oldest modifications.
    pub(crate) fn oldest_dirty(&self, max: usize) -> Vec<u32> {
        order::lock(&self.flush_list, Level::Flush)
            .iter()
            .take(max)
            .map(|&(_, f)| f)
            .collect()
    }

    /// Marks frames changed by a mini-transaction [start, end) as dirty.
    pub(crate) fn mark_dirty(&self, frames: &[u32], start: u64, end: u64) {
        let mut fl = order::lock(&self.flush_list, Level::Flush);
        for &f in frames {
            let fr = &self.frames[f as usize];
            debug_assert!(fr.latch.is_x_locked());
            fr.newest_mod.store(end, Ordering::SeqCst);
            if fr.oldest_mod.load(Ordering::SeqCst) == 0 {
                fr.oldest_mod.store(start, Ordering::SeqCst);
                fl.insert((start, f));
            }
        }
    }

    /// Writes the given frames through the doublewrite area. Frames that are
    /// no longer dirty, reassigned, or latched by someone else are skipped.
    /// Returns how many were written.
    ///
    /// A stopped engine flushes nothing (a page may hold a change no redo
    /// describes), and a failed write or fsync stops the engine: after a
    /// failed fsync the kernel may have dropped the dirty data, so neither a
    /// retry nor a checkpoint past these pages could be trusted.
    pub(crate) fn flush_frames(&self, frames: &[u32], reason: FlushReason) -> Result<usize, Error> {
        if let Some(log) = self.log() {
            if log.is_failed() {
                return Err(Error::Log(millrace_redo::LogError::Failed(
                    log.failure().unwrap_or_default(),
                )));
            }
        }
        let mut dw = order::lock(&self.dblwr, Level::Dblwr);
        let (dblwr, images) = &mut *dw;
        let ps = self.page_size;
        let mut batch: Vec<(u32, PageId)> = Vec::new();
        let mut max_lsn = 0;
        for &f in frames {
            if batch.len() == dblwr.slots() {
                break;
            }
            let fr = &self.frames[f as usize];
            let id = unpack(fr.id.load(Ordering::SeqCst));
            if id.space == u32::MAX && id.page == u32::MAX {
                continue;
            }
            {
                let map = order::lock(self.shard(id), Level::Shard);
                if map.get(&id) != Some(&f) {
                    continue;
                }
                fr.fix.fetch_add(1, Ordering::SeqCst);
            }
            // Never wait for a page latch while holding the doublewrite
            // mutex: its holder may be waiting for a frame from us.
            if !fr.latch.try_s() {
                self.unfix(f);
                continue;
            }
            if fr.oldest_mod.load(Ordering::SeqCst) == 0 {
                fr.latch.unlock_s();
                self.unfix(f);
                continue;
            }
            let slot = batch.len();
            let img = &mut images[slot * ps..(slot + 1) * ps];
            img.copy_from_slice(self.data(f));
            page::seal(img);
            max_lsn = max_lsn.max(fr.newest_mod.load(Ordering::SeqCst));
            batch.push((f, id));
        }
        if batch.is_empty() {
            return Ok(0);
        }
        let result = (|| {
            // The write-ahead rule: a page goes to disk only after the redo
            // of its changes.
            if let Some(log) = self.log() {
                log.wait_flushed(max_lsn).map_err(Error::Log)?;
            }
            let bytes = &images[..batch.len() * ps];
            dblwr.write(bytes)?;
            self.m.doublewrite_bytes.add(bytes.len() as u64);
            let mut spaces: Vec<u32> = Vec::new();
            for (slot, &(_, id)) in batch.iter().enumerate() {
                self.files
                    .write_page(id, &images[slot * ps..(slot + 1) * ps])?;
                if !spaces.contains(&id.space) {
                    spaces.push(id.space);
                }
            }
            for s in spaces {
                self.files.sync(s)?;
            }
            Ok(())
        })();
        if result.is_ok() {
            let mut fl = order::lock(&self.flush_list, Level::Flush);
            for &(f, _) in &batch {
                let fr = &self.frames[f as usize];
                let oldest = fr.oldest_mod.swap(0, Ordering::SeqCst);
                fl.remove(&(oldest, f));
            }
        }
        for &(f, _) in &batch {
            self.frames[f as usize].latch.unlock_s();
            self.unfix(f);
        }
        if let (Err(e), Some(log)) = (&result, self.log()) {
            if !matches!(e, Error::Log(_)) {
                log.fail(&format!("flushing pages failed: {e}"));
            }
        }
        result?;
        let n = batch.len();
        self.m.writes.add(n as u64);
        match reason {
            FlushReason::Adaptive => self.m.flush_adaptive.add(n as u64),
            FlushReason::Lru => self.m.flush_lru.add(n as u64),
            FlushReason::Other => self.m.flush_other.add(n as u64),
        }
        Ok(n)
    }

    /// Flushes until no page is dirty (latched pages are retried).
    pub fn flush_all(&self) -> Result<(), Error> {
        loop {
            let frames = self.oldest_dirty(self.cfg.flush_batch_pages);
            if frames.is_empty() {
                return Ok(());
            }
            if self.flush_frames(&frames, FlushReason::Other)? == 0 {
                std::thread::yield_now();
            }
        }
    }

    /// The LSN a checkpoint may take now: no dirty page has a change before
    /// it. The recent_closed tail is read first: a mini-transaction closed
    /// by then has its pages on the flush list.
    pub fn checkpoint_limit(&self) -> Option<u64> {
        let log = self.log()?;
        let closed = log.closed_lsn();
        Some(match self.oldest_dirty_lsn() {
            Some(oldest) => oldest.min(closed),
            None => closed,
        })
    }
}
