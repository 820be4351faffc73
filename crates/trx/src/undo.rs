//! Undo logs on pages, in rollback segments, in undo tablespaces
//! (docs/design.md, "Undo").
//!
//! Rollback segment header page (type OTHER), after the common header:
//!   32..40 magic "MLRCRSEG"   40..48 history length   48..52 history first
//!   52..56 history last       56..58 slots            60..  slot array: u32
//!   first page of the undo log using the slot (0 = free)
//! Undo page (type UNDO):
//!   32..34 free offset   34..36 first record offset   36..40 next page
//!   40..44 previous page (0 = none); and in an undo log's first page:
//!   44..52 trx id   52..60 trx number (0 until commit)   60 state (1 active,
//!   2 committed, 3 rolled back: in the history only for readers, no work)
//!   61 has non-insert records   62..66 last page   66..70 history next
//!   70..74 history previous   74..76 slot   80.. first records
//! Records: [u16 length][record][u16 length]: readable both ways.
//! Every page change goes through a mini-transaction (redo-logged), so the
//! undo state after recovery is exactly what was committed to the log.

use crate::error::TrxError;
use crate::undo_rec::{RollPtr, UndoRecord};
use millrace_buf::page::{u16_at, u32_at, u64_at};
use millrace_buf::{page_type, space, LatchMode, Mtr, PageId, PageRef, PageStore};
use millrace_metrics::Counter;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

const RSEG_MAGIC: &[u8; 8] = b"MLRCRSEG";
const R_HIST_LEN: usize = 40;
const R_HIST_FIRST: usize = 48;
const R_HIST_LAST: usize = 52;
const R_N_SLOTS: usize = 56;
const R_SLOTS: usize = 60;
const MAX_SLOTS: usize = 1024;

const U_FREE: usize = 32;
const U_START: usize = 34;
const U_NEXT: usize = 36;
const U_PREV: usize = 40;
const U_TRX_ID: usize = 44;
const U_TRX_NO: usize = 52;
const U_STATE: usize = 60;
const U_HAS_UPDATES: usize = 61;
const U_LAST: usize = 62;
const U_HIST_NEXT: usize = 66;
const U_HIST_PREV: usize = 70;
const U_SLOT: usize = 74;
const FIRST_PAGE_RECORDS: usize = 80;
const OTHER_PAGE_RECORDS: usize = 44;

pub const STATE_ACTIVE: u8 = 1;
pub const STATE_COMMITTED: u8 = 2;
/// A rolled-back log kept in the history list until no read view can still
/// be following a roll pointer into it (see `finish`); purge frees it
/// without looking at its records, whose changes were all undone.
pub const STATE_ROLLED_BACK: u8 = 3;

/// One rollback segment: a header page and an in-memory mutex (InnoDB's
/// rseg->mutex), taken to assign slots and to change the history list.
pub struct Rseg {
    pub id: u16,
    pub space: u32,
    pub page: u32,
    mem: Mutex<RsegMem>,
}

pub(crate) struct RsegMem {
    free_slots: Vec<u16>,
    n_slots: usize,
}

impl RsegMem {
    /// No transaction has an undo log in this segment.
    pub(crate) fn idle(&self) -> bool {
        self.free_slots.len() == self.n_slots
    }
}

/// Contention on rollback segment mutexes (seed 003).
pub struct RsegMetrics {
    pub waits: Arc<Counter>,
    pub wait_ns: Arc<Counter>,
}

impl Rseg {
    /// Takes the segment mutex, counting a wait if it was held. A panic
    /// while it was held (in the middle of changing the segment's pages)
    /// leaves the segment unknown: `EngineFailed`, and the caller's engine
    /// stops.
    pub(crate) fn lock(&self, m: &RsegMetrics) -> Result<MutexGuard<'_, RsegMem>, TrxError> {
        if let Ok(g) = self.mem.try_lock() {
            return Ok(g);
        }
        let t0 = Instant::now();
        let g = self.mem.lock().map_err(|_| {
            TrxError::EngineFailed(format!(
                "a panic while rollback segment {} was being changed",
                self.id
            ))
        })?;
        m.waits.inc();
        m.wait_ns.add(t0.elapsed().as_nanos() as u64);
        Ok(g)
    }

    /// Creates the header page of a new segment in `undo_space`.
    pub fn create(mtr: &mut Mtr<'_>, id: u16, undo_space: u32) -> Result<Rseg, TrxError> {
        let h = space::allocate_page(mtr, undo_space, page_type::OTHER)?;
        let ps = mtr.page_size();
        let slots = ((ps - R_SLOTS) / 4).min(MAX_SLOTS) as u16;
        mtr.write(h, 32, RSEG_MAGIC);
        mtr.write(h, R_N_SLOTS, &slots.to_le_bytes());
        let page = mtr.id(h).page;
        Ok(Rseg {
            id,
            space: undo_space,
            page,
            mem: Mutex::new(RsegMem {
                free_slots: (0..slots).rev().collect(),
                n_slots: slots as usize,
            }),
        })
    }

    /// Opens an existing segment; returns it and the first pages of the undo
    /// logs in its slots (transactions that were active at the crash, or
    /// committed insert-only logs not yet freed).
    pub fn open(
        store: &PageStore,
        id: u16,
        space: u32,
        page: u32,
    ) -> Result<(Rseg, Vec<(u16, u32)>), TrxError> {
        let mut mtr = store.mtr()?;
        let h = mtr.get(PageId::new(space, page), LatchMode::Shared)?;
        let p = mtr.page(h);
        if &p[32..40] != RSEG_MAGIC {
            return Err(TrxError::Corrupt(format!(
                "rollback segment {id} at {space}:{page} is damaged"
            )));
        }
        let n = (u16_at(p, R_N_SLOTS) as usize)
            .min(MAX_SLOTS)
            .min((p.len() - R_SLOTS) / 4);
        let mut free = Vec::new();
        let mut used = Vec::new();
        for s in (0..n).rev() {
            let first = u32_at(p, R_SLOTS + s * 4);
            if first == 0 {
                free.push(s as u16);
            } else {
                used.push((s as u16, first));
            }
        }
        Ok((
            Rseg {
                id,
                space,
                page,
                mem: Mutex::new(RsegMem {
                    n_slots: free.len() + used.len(),
                    free_slots: free,
                }),
            },
            used,
        ))
    }

    fn header(&self, mtr: &mut Mtr<'_>) -> Result<PageRef, TrxError> {
        Ok(mtr.get(PageId::new(self.space, self.page), LatchMode::Exclusive)?)
    }

    pub fn history_len(&self, store: &PageStore) -> Result<u64, TrxError> {
        let mut mtr = store.mtr()?;
        let h = mtr.get(PageId::new(self.space, self.page), LatchMode::Shared)?;
        Ok(u64_at(mtr.page(h), R_HIST_LEN))
    }

    /// The oldest committed undo log of the history: (first page, trx no).
    pub fn history_head(&self, store: &PageStore) -> Result<Option<(u32, u64)>, TrxError> {
        let mut mtr = store.mtr()?;
        let h = mtr.get(PageId::new(self.space, self.page), LatchMode::Shared)?;
        let first = u32_at(mtr.page(h), R_HIST_FIRST);
        if first == 0 {
            return Ok(None);
        }
        let u = mtr.get(PageId::new(self.space, first), LatchMode::Shared)?;
        Ok(Some((first, u64_at(mtr.page(u), U_TRX_NO))))
    }
}

/// A transaction's undo log.
#[derive(Debug, Clone)]
pub struct UndoLog {
    pub rseg: u16,
    pub space: u32,
    pub first_page: u32,
    pub last_page: u32,
    pub slot: u16,
    pub has_updates: bool,
    pub records: u64,
    pub pages: u32,
}

fn check_undo_page(mtr: &Mtr<'_>, r: PageRef) -> Result<(), TrxError> {
    let p = mtr.page(r);
    let ps = p.len();
    let (free, start) = (u16_at(p, U_FREE) as usize, u16_at(p, U_START) as usize);
    if millrace_buf::page::page_type_of(p) != page_type::UNDO
        || start < OTHER_PAGE_RECORDS
        || free < start
        || free > ps
    {
        return Err(TrxError::Corrupt(format!(
            "undo page {} is damaged",
            mtr.id(r)
        )));
    }
    Ok(())
}

/// Creates an undo log for `trx_id` in `rseg`; None if every slot is taken.
pub fn create_log(
    store: &PageStore,
    rseg: &Rseg,
    m: &RsegMetrics,
    trx_id: u64,
) -> Result<Option<UndoLog>, TrxError> {
    let mut mtr = store.mtr()?;
    let mut mem = rseg.lock(m)?;
    let Some(slot) = mem.free_slots.pop() else {
        return Ok(None);
    };
    let result = (|| {
        let h = rseg.header(&mut mtr)?;
        let u = space::allocate_page(&mut mtr, rseg.space, page_type::UNDO)?;
        let page = mtr.id(u).page;
        mtr.write(u, U_FREE, &(FIRST_PAGE_RECORDS as u16).to_le_bytes());
        mtr.write(u, U_START, &(FIRST_PAGE_RECORDS as u16).to_le_bytes());
        mtr.write(u, U_TRX_ID, &trx_id.to_le_bytes());
        mtr.write(u, U_STATE, &[STATE_ACTIVE]);
        mtr.write(u, U_LAST, &page.to_le_bytes());
        mtr.write(u, U_SLOT, &slot.to_le_bytes());
        mtr.write(h, R_SLOTS + slot as usize * 4, &page.to_le_bytes());
        Ok::<_, TrxError>(page)
    })();
    match result {
        Ok(page) => {
            mtr.commit()?;
            Ok(Some(UndoLog {
                rseg: rseg.id,
                space: rseg.space,
                first_page: page,
                last_page: page,
                slot,
                has_updates: false,
                records: 0,
                pages: 1,
            }))
        }
        Err(e) => {
            mem.free_slots.push(slot);
            Err(e)
        }
    }
}

/// Appends a record to the log; returns its roll pointer.
pub fn append(store: &PageStore, log: &mut UndoLog, rec: &UndoRecord) -> Result<RollPtr, TrxError> {
    let bytes = rec.encode();
    let need = bytes.len() + 4;
    let mut mtr = store.mtr()?;
    let ps = mtr.page_size();
    if need > ps - FIRST_PAGE_RECORDS {
        return Err(TrxError::TooLarge(format!(
            "undo record of {} bytes",
            bytes.len()
        )));
    }
    let mut last = mtr.get(PageId::new(log.space, log.last_page), LatchMode::Exclusive)?;
    check_undo_page(&mtr, last)?;
    let mut free = u16_at(mtr.page(last), U_FREE) as usize;
    if free + need > ps {
        // A new page at the end of the log.
        let n = space::allocate_page(&mut mtr, log.space, page_type::UNDO)?;
        let n_no = mtr.id(n).page;
        mtr.write(n, U_FREE, &(OTHER_PAGE_RECORDS as u16).to_le_bytes());
        mtr.write(n, U_START, &(OTHER_PAGE_RECORDS as u16).to_le_bytes());
        mtr.write(n, U_PREV, &log.last_page.to_le_bytes());
        mtr.write(last, U_NEXT, &n_no.to_le_bytes());
        let first = mtr.get(PageId::new(log.space, log.first_page), LatchMode::Exclusive)?;
        mtr.write(first, U_LAST, &n_no.to_le_bytes());
        log.last_page = n_no;
        log.pages += 1;
        last = n;
        free = OTHER_PAGE_RECORDS;
    }
    let len = (bytes.len() as u16).to_le_bytes();
    let mut framed = Vec::with_capacity(need);
    framed.extend_from_slice(&len);
    framed.extend_from_slice(&bytes);
    framed.extend_from_slice(&len);
    mtr.write(last, free, &framed);
    mtr.write(last, U_FREE, &((free + need) as u16).to_le_bytes());
    if rec.kind != crate::undo_rec::UndoKind::Insert && !log.has_updates {
        let first = mtr.get(PageId::new(log.space, log.first_page), LatchMode::Exclusive)?;
        mtr.write(first, U_HAS_UPDATES, &[1]);
        log.has_updates = true;
    }
    mtr.commit()?;
    log.records += 1;
    Ok(RollPtr {
        insert: rec.kind == crate::undo_rec::UndoKind::Insert,
        space: log.space,
        page: log.last_page,
        offset: free as u16,
    })
}

/// Reads the record a roll pointer names (MVCC and purge).
pub fn read(store: &PageStore, rp: RollPtr) -> Result<UndoRecord, TrxError> {
    let mut mtr = store.mtr()?;
    let r = mtr.get(PageId::new(rp.space, rp.page), LatchMode::Shared)?;
    check_undo_page(&mtr, r)?;
    let p = mtr.page(r);
    let at = rp.offset as usize;
    let bad = || TrxError::Corrupt(format!("roll pointer {rp:?} names no undo record"));
    if at + 2 > p.len() {
        return Err(bad());
    }
    let len = u16_at(p, at) as usize;
    if at + 4 + len > u16_at(p, U_FREE) as usize {
        return Err(bad());
    }
    UndoRecord::decode(&p[at + 2..at + 2 + len])
        .map_err(|e| TrxError::Corrupt(format!("{rp:?}: {e}")))
}

/// Every record of a log, newest first (rollback order), with roll pointers.
pub fn records_newest_first(
    store: &PageStore,
    space: u32,
    first_page: u32,
) -> Result<Vec<(RollPtr, UndoRecord)>, TrxError> {
    let pages = log_pages(store, space, first_page)?;
    let mut out = Vec::new();
    for &page in pages.iter().rev() {
        let mut mtr = store.mtr()?;
        let r = mtr.get(PageId::new(space, page), LatchMode::Shared)?;
        check_undo_page(&mtr, r)?;
        let p = mtr.page(r);
        let start = u16_at(p, U_START) as usize;
        let mut pos = u16_at(p, U_FREE) as usize;
        let mut guard = 0;
        while pos > start {
            guard += 1;
            if pos < start + 4 || guard > p.len() {
                return Err(TrxError::Corrupt(format!(
                    "undo page {space}:{page}: bad record chain"
                )));
            }
            let len = u16_at(p, pos - 2) as usize;
            let Some(at) = pos.checked_sub(4 + len).filter(|&a| a >= start) else {
                return Err(TrxError::Corrupt(format!(
                    "undo page {space}:{page}: bad record length"
                )));
            };
            if u16_at(p, at) as usize != len {
                return Err(TrxError::Corrupt(format!(
                    "undo page {space}:{page}: record lengths differ"
                )));
            }
            let rec = UndoRecord::decode(&p[at + 2..at + 2 + len])
                .map_err(|e| TrxError::Corrupt(format!("undo page {space}:{page}: {e}")))?;
            let rp = RollPtr {
                insert: rec.kind == crate::undo_rec::UndoKind::Insert,
                space,
                page,
                offset: at as u16,
            };
            out.push((rp, rec));
            pos = at;
        }
    }
    Ok(out)
}

/// The pages of a log, first to last.
pub fn log_pages(store: &PageStore, space: u32, first_page: u32) -> Result<Vec<u32>, TrxError> {
    let mut pages = vec![first_page];
    let mut mtr = store.mtr()?;
    let mut r = mtr.get(PageId::new(space, first_page), LatchMode::Shared)?;
    loop {
        check_undo_page(&mtr, r)?;
        let next = u32_at(mtr.page(r), U_NEXT);
        if next == 0 {
            return Ok(pages);
        }
        if pages.len() > 1 << 20 || pages.contains(&next) {
            return Err(TrxError::Corrupt(format!(
                "undo log {space}:{first_page}: page chain loops"
            )));
        }
        pages.push(next);
        mtr.release(r);
        r = mtr.get(PageId::new(space, next), LatchMode::Shared)?;
    }
}

/// Header facts of an undo log (recovery and purge).
#[derive(Debug, Clone)]
pub struct LogHeader {
    pub trx_id: u64,
    pub trx_no: u64,
    pub state: u8,
    pub has_updates: bool,
    pub last_page: u32,
    pub history_next: u32,
    pub slot: u16,
}

pub fn log_header(store: &PageStore, space: u32, first_page: u32) -> Result<LogHeader, TrxError> {
    let mut mtr = store.mtr()?;
    let r = mtr.get(PageId::new(space, first_page), LatchMode::Shared)?;
    check_undo_page(&mtr, r)?;
    let p = mtr.page(r);
    Ok(LogHeader {
        trx_id: u64_at(p, U_TRX_ID),
        trx_no: u64_at(p, U_TRX_NO),
        state: p[U_STATE],
        has_updates: p[U_HAS_UPDATES] != 0,
        last_page: u32_at(p, U_LAST),
        history_next: u32_at(p, U_HIST_NEXT),
        slot: u16_at(p, U_SLOT),
    })
}

/// Frees every page of a log (after rollback, or an insert-only commit, or
/// purge). Pages go back to the undo space's free list.
/// Pages freed per mini-transaction when a log is freed: a log of any
/// length is freed without latching more pages at once than this.
const FREE_CHUNK: usize = 32;

/// Frees all but the first page of a log, from the tail, FREE_CHUNK pages
/// per mini-transaction; after each, the log is a valid shorter log.
fn trim_to_first_page(store: &PageStore, space_id: u32, first_page: u32) -> Result<(), TrxError> {
    loop {
        let pages = log_pages(store, space_id, first_page)?;
        if pages.len() <= 1 {
            return Ok(());
        }
        let cut = pages.len().saturating_sub(FREE_CHUNK).max(1);
        let mut mtr = store.mtr()?;
        let new_last = mtr.get(PageId::new(space_id, pages[cut - 1]), LatchMode::Exclusive)?;
        mtr.write(new_last, U_NEXT, &0u32.to_le_bytes());
        let first = mtr.get(PageId::new(space_id, first_page), LatchMode::Exclusive)?;
        mtr.write(first, U_LAST, &pages[cut - 1].to_le_bytes());
        for &p in &pages[cut..] {
            space::free_page(&mut mtr, PageId::new(space_id, p))?;
        }
        mtr.commit()?;
    }
}

/// Walks the chain inside the caller's mini-transaction (which may already
/// hold the first page X: a second mini-transaction would wait for it).
fn free_pages(mtr: &mut Mtr<'_>, space_id: u32, first_page: u32) -> Result<(), TrxError> {
    let mut pages = vec![first_page];
    let mut page = first_page;
    loop {
        let r = mtr.get(PageId::new(space_id, page), LatchMode::Exclusive)?;
        check_undo_page(mtr, r)?;
        let next = u32_at(mtr.page(r), U_NEXT);
        if next == 0 {
            break;
        }
        if pages.len() > 1 << 16 || pages.contains(&next) {
            return Err(TrxError::Corrupt(format!(
                "undo log {space_id}:{first_page}: page chain loops"
            )));
        }
        pages.push(next);
        page = next;
    }
    for page in pages {
        space::free_page(mtr, PageId::new(space_id, page))?;
    }
    Ok(())
}

/// How a transaction's log ends (`finish`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Commit,
    /// A rollback while the engine serves readers.
    Rollback,
    /// A rollback during crash recovery, before any reader exists.
    RecoveryRollback,
}

/// Commit or the end of a rollback: the log leaves its slot. A log with
/// non-insert records joins the segment's history list with a serialisation
/// number `assign_no` gives (as in InnoDB, a rollback ends like a commit);
/// any other log is freed at once.
///
/// Why rolled-back logs go through the history too: a reader may have
/// read a row while this transaction's version was in it and be about to
/// follow its roll pointer into this log when the rollback restores the row
/// and ends. Freeing the pages then would hand that reader a freed (or
/// reused) page. In the history the log lives until purge passes its
/// number, that is until every read view opened before the rollback ended
/// is closed; and a reader follows roll pointers only under a read view.
/// Insert-only logs are freed at once: no reader follows an insert's roll
/// pointer (the row did not exist before it).
///
/// Returns the end LSN of the mini-transaction; the segment mutex is held
/// only for the page changes, never for the log wait.
pub fn finish(
    store: &PageStore,
    rseg: &Rseg,
    m: &RsegMetrics,
    log: &UndoLog,
    ending: Ending,
    assign_no: &dyn Fn() -> u64,
    history_len: &std::sync::atomic::AtomicU64,
) -> Result<Finished, TrxError> {
    // Logs go to the history if readers or purge may need them, or if they
    // are too long to free in one mini-transaction (purge frees them in
    // chunks). A log freed here after a rollback is trimmed first (its page
    // count is not known after recovery).
    let to_history =
        ending != Ending::RecoveryRollback && (log.has_updates || log.pages as usize > FREE_CHUNK);
    if !to_history && ending != Ending::Commit {
        trim_to_first_page(store, log.space, log.first_page)?;
    }
    let state = if ending == Ending::Commit {
        STATE_COMMITTED
    } else {
        STATE_ROLLED_BACK
    };
    let mut mtr = store.mtr()?;
    let mut mem = rseg.lock(m)?;
    // The serialisation number is taken under the segment mutex, so each
    // segment's history list is in serialisation order.
    let trx_no = to_history.then(assign_no);
    let h = rseg.header(&mut mtr)?;
    let first = mtr.get(PageId::new(log.space, log.first_page), LatchMode::Exclusive)?;
    check_undo_page(&mtr, first)?;
    mtr.write(h, R_SLOTS + log.slot as usize * 4, &0u32.to_le_bytes());
    match trx_no {
        Some(no) => {
            mtr.write(first, U_TRX_NO, &no.to_le_bytes());
            mtr.write(first, U_STATE, &[state]);
            let hp = mtr.page(h);
            let (len, last) = (u64_at(hp, R_HIST_LEN), u32_at(hp, R_HIST_LAST));
            if last == 0 {
                mtr.write(h, R_HIST_FIRST, &log.first_page.to_le_bytes());
            } else {
                let l = mtr.get(PageId::new(log.space, last), LatchMode::Exclusive)?;
                mtr.write(l, U_HIST_NEXT, &log.first_page.to_le_bytes());
                mtr.write(first, U_HIST_PREV, &last.to_le_bytes());
            }
            mtr.write(h, R_HIST_LAST, &log.first_page.to_le_bytes());
            mtr.write(h, R_HIST_LEN, &(len + 1).to_le_bytes());
            // Counted before purge can see it (at commit, when the header
            // latch is released), so purge never counts below zero.
            history_len.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        None => {
            free_pages(&mut mtr, log.space, log.first_page)?;
        }
    }
    let end = mtr.commit()?;
    mem.free_slots.push(log.slot);
    Ok(Finished {
        end_lsn: end,
        to_history,
    })
}

/// What `finish` did.
pub struct Finished {
    /// End LSN of the mini-transaction that made it so (the commit point).
    pub end_lsn: Option<u64>,
    /// The log joined its segment's history list.
    pub to_history: bool,
}

/// Removes the oldest log of the history (purge is done with it) and frees
/// its pages.
pub fn purge_head(
    store: &PageStore,
    rseg: &Rseg,
    m: &RsegMetrics,
    first_page: u32,
) -> Result<(), TrxError> {
    trim_to_first_page(store, rseg.space, first_page)?;
    let mut mtr = store.mtr()?;
    let _g = rseg.lock(m)?;
    let h = rseg.header(&mut mtr)?;
    let hp = mtr.page(h);
    if u32_at(hp, R_HIST_FIRST) != first_page {
        return Err(TrxError::Corrupt(format!(
            "rollback segment {}: history head moved",
            rseg.id
        )));
    }
    let len = u64_at(hp, R_HIST_LEN);
    let u = mtr.get(PageId::new(rseg.space, first_page), LatchMode::Exclusive)?;
    check_undo_page(&mtr, u)?;
    let next = u32_at(mtr.page(u), U_HIST_NEXT);
    mtr.write(h, R_HIST_FIRST, &next.to_le_bytes());
    if next == 0 {
        mtr.write(h, R_HIST_LAST, &0u32.to_le_bytes());
    } else {
        let n = mtr.get(PageId::new(rseg.space, next), LatchMode::Exclusive)?;
        mtr.write(n, U_HIST_PREV, &0u32.to_le_bytes());
    }
    mtr.write(h, R_HIST_LEN, &len.saturating_sub(1).to_le_bytes());
    free_pages(&mut mtr, rseg.space, first_page)?;
    mtr.commit()?;
    Ok(())
}
