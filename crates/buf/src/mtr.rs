//! Mini-transactions: the unit of atomic page change. An mtr latches pages,
//! changes them while recording each change as a redo op, and commits:
//! append the ops to the redo log as one record, stamp the pages with its
//! end LSN, put them on the flush list, publish the record in
//! recent_closed, release the latches. Recovery applies a record entirely
//! or not at all, so an mtr's changes (a page split, say) are atomic.
//!
//! An mtr cannot be rolled back: its changes are made in place in the
//! buffer pool. So one that ends without `commit` after changing a page
//! (an error returned half-way through a split, a panic) stops the engine:
//! the log is failed, nothing more is written or flushed, and the next open
//! recovers from the redo, which never saw the half-done change. Callers do
//! every step that can fail (fetching pages, allocating frames) before the
//! first change where they can (docs/design.md, "Faults: what the engine
//! does when storage fails").

use crate::error::Error;
use crate::ops;
use crate::page::{self, PageId, OFF_TYPE};
use crate::pool::{BufferPool, LatchMode};
use std::cell::{Cell, RefCell};

thread_local! {
    /// Mtrs this thread has started and not ended: one started while the
    /// thread holds another must not wait for admission (it would wait for
    /// itself).
    static MTRS_ON_THREAD: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread holds an mtr now.
pub(crate) fn thread_holds_mtr() -> bool {
    MTRS_ON_THREAD.with(|n| n.get() > 0)
}

/// A page held by this mtr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRef(usize);

/// One X-latched page of an mtr, for changing: every change is made to the
/// page and appended to the mtr's redo buffer. Made by `Mtr::pages_mut` /
/// `Mtr::page_mut`, which borrow the mtr mutably while it lives.
pub struct PageSlice<'a> {
    id: PageId,
    bytes: &'a mut [u8],
    modified: &'a Cell<bool>,
    log: &'a RefCell<Vec<u8>>,
}

impl PageSlice<'_> {
    pub fn id(&self) -> PageId {
        self.id
    }

    /// The whole page.
    pub fn bytes(&self) -> &[u8] {
        self.bytes
    }

    /// Changes bytes of the page (logged). The checksum, ids and LSN fields
    /// of the header belong to the pool and cannot be written.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        assert!(
            offset >= OFF_TYPE,
            "write into the page header's reserved fields"
        );
        self.modified.set(true);
        self.bytes[offset..offset + data.len()].copy_from_slice(data);
        ops::encode_write(&mut self.log.borrow_mut(), self.id, offset, data);
    }

    /// memmove within the page (logged as one op, not the bytes).
    pub fn copy_within(&mut self, src: usize, dst: usize, len: usize) {
        assert!(
            dst >= OFF_TYPE,
            "move into the page header's reserved fields"
        );
        self.modified.set(true);
        self.bytes.copy_within(src..src + len, dst);
        ops::encode_move(&mut self.log.borrow_mut(), self.id, src, dst, len);
    }
}

struct Held {
    frame: u32,
    id: PageId,
    mode: LatchMode,
    modified: Cell<bool>,
    released: bool,
}

/// Latching, releasing and changing a held page take `&mut self`, so no
/// page bytes read through `page` are alive while they change; writers of
/// two or three pages at once (a split) get disjoint views from `pages_mut`.
pub struct Mtr<'p> {
    pool: &'p BufferPool,
    held: Vec<Held>,
    log: RefCell<Vec<u8>>,
    /// Ended: committed or abandoned; the active count no longer has it.
    ended: bool,
}

impl<'p> Mtr<'p> {
    /// The caller has counted it in `pool.active_mtrs` already (so that its
    /// log space check sees it); `end` uncounts it.
    pub(crate) fn new(pool: &'p BufferPool) -> Self {
        MTRS_ON_THREAD.with(|n| n.set(n.get() + 1));
        Self {
            pool,
            held: Vec::new(),
            log: RefCell::new(Vec::new()),
            ended: false,
        }
    }

    fn find(&self, id: PageId) -> Option<usize> {
        self.held.iter().position(|h| h.id == id && !h.released)
    }

    /// Latches a page (reading it if needed). A page this mtr already holds
    /// is returned again; asking X of a page held S is a bug.
    pub fn get(&mut self, id: PageId, mode: LatchMode) -> Result<PageRef, Error> {
        if let Some(i) = self.find(id) {
            assert!(
                mode == LatchMode::Shared || self.held[i].mode == LatchMode::Exclusive,
                "mtr upgrades page {id} from S to X: latch it X the first time"
            );
            return Ok(PageRef(i));
        }
        let frame = self.pool.fetch(id, mode, false)?;
        self.held.push(Held {
            frame,
            id,
            mode,
            modified: Cell::new(false),
            released: false,
        });
        Ok(PageRef(self.held.len() - 1))
    }

    /// Like `get`, and the first time the page is used after being read
    /// from disk, `validate` checks its content (a checksum proves the bytes
    /// are what was written, not that they make sense): a failure is
    /// `Corrupt`, so the layer above never decodes impossible bytes.
    pub fn get_checked(
        &mut self,
        id: PageId,
        mode: LatchMode,
        validate: fn(&[u8]) -> Result<(), String>,
    ) -> Result<PageRef, Error> {
        let r = self.get(id, mode)?;
        self.ensure_validated(r, validate)?;
        Ok(r)
    }

    /// Validates a held page's content if it was not validated since it
    /// came from disk (see `get_checked`). For callers that must first see
    /// whether the page is still theirs (a page freed and reused since).
    pub fn ensure_validated(
        &self,
        r: PageRef,
        validate: fn(&[u8]) -> Result<(), String>,
    ) -> Result<(), Error> {
        let h = &self.held[r.0];
        if !self.pool.is_validated(h.frame) {
            if let Err(e) = validate(self.pool.data(h.frame)) {
                return Err(Error::Corrupt(format!("page {}: {e}", h.id)));
            }
            self.pool.set_validated(h.frame);
        }
        Ok(())
    }

    /// A new page: X-latched, zeroed, with its header, logged as INIT.
    pub fn create_page(&mut self, id: PageId, page_type: u16) -> Result<PageRef, Error> {
        let i = match self.find(id) {
            Some(i) => {
                assert_eq!(
                    self.held[i].mode,
                    LatchMode::Exclusive,
                    "create_page on an S-latched page"
                );
                i
            }
            None => {
                let frame = self.pool.fetch(id, LatchMode::Exclusive, true)?;
                self.held.push(Held {
                    frame,
                    id,
                    mode: LatchMode::Exclusive,
                    modified: Cell::new(false),
                    released: false,
                });
                self.held.len() - 1
            }
        };
        self.held[i].modified.set(true);
        page::init_header(self.pool.data_mut(self.held[i].frame), id, page_type);
        ops::encode_init(&mut self.log.borrow_mut(), id, page_type);
        Ok(PageRef(i))
    }

    /// The page's bytes, for reading. The borrow of the mtr keeps every
    /// change (`write`, `copy_within`, `pages_mut`: all take `&mut self`)
    /// out while the bytes are in use:
    ///
    /// ```compile_fail
    /// # fn f(mtr: &mut millrace_buf::mtr::Mtr<'_>, r: millrace_buf::mtr::PageRef) {
    /// let bytes = mtr.page(r);
    /// mtr.write(r, 40, &[1]); // error: `mtr` is borrowed by `bytes`
    /// assert_eq!(bytes[40], 1);
    /// # }
    /// ```
    pub fn page(&self, r: PageRef) -> &[u8] {
        let h = &self.held[r.0];
        debug_assert!(!h.released, "page {} used after release", h.id);
        self.pool.data(h.frame)
    }

    pub fn id(&self, r: PageRef) -> PageId {
        self.held[r.0].id
    }

    pub fn page_size(&self) -> usize {
        self.pool.page_size()
    }

    /// Changes bytes of a page (logged). The checksum, ids and LSN fields of
    /// the header belong to the pool and cannot be written.
    pub fn write(&mut self, r: PageRef, offset: usize, data: &[u8]) {
        self.page_mut(r).write(offset, data);
    }

    /// memmove within a page (logged as one op, not the bytes).
    pub fn copy_within(&mut self, r: PageRef, src: usize, dst: usize, len: usize) {
        self.page_mut(r).copy_within(src, dst, len);
    }

    /// One X-latched page for changing, as a view that logs each change.
    pub fn page_mut(&mut self, r: PageRef) -> PageSlice<'_> {
        let [p] = self.pages_mut([r]);
        p
    }

    /// Several X-latched pages at once (a split writes two or three): views
    /// of distinct frames, so no two alias, each logging its changes to this
    /// mtr's redo buffer in the order they are made. The mtr is borrowed
    /// mutably while they live, so no `page` read overlaps them. The same
    /// page twice, a page held S, or a released page is a bug (panic).
    ///
    /// ```compile_fail
    /// # fn f(mtr: &mut millrace_buf::mtr::Mtr<'_>, r: millrace_buf::mtr::PageRef) {
    /// let [mut view] = mtr.pages_mut([r]);
    /// let bytes = mtr.page(r); // error: `mtr` is borrowed by `view`
    /// view.write(40, &[1]);
    /// assert_eq!(bytes[40], 1);
    /// # }
    /// ```
    pub fn pages_mut<const N: usize>(&mut self, refs: [PageRef; N]) -> [PageSlice<'_>; N] {
        for (k, r) in refs.iter().enumerate() {
            let h = &self.held[r.0];
            assert!(
                h.mode == LatchMode::Exclusive && !h.released,
                "page {} changed without an X latch",
                h.id
            );
            for other in &refs[..k] {
                assert!(
                    self.held[other.0].frame != h.frame,
                    "page {} asked for twice in one pages_mut",
                    h.id
                );
            }
        }
        // Shared borrows of the fields only: the views get disjoint frames
        // (checked above) and share the log through its RefCell.
        let held = &self.held;
        let log = &self.log;
        let pool = self.pool;
        refs.map(|r| {
            let h = &held[r.0];
            PageSlice {
                id: h.id,
                // X latch held (asserted) and the frame is in no other view.
                bytes: pool.data_mut(h.frame),
                modified: &h.modified,
                log,
            }
        })
    }

    /// Logs that a tablespace file exists (recovery creates it if missing).
    pub fn log_create_space(&mut self, space: u32) {
        ops::encode_create_space(&mut self.log.borrow_mut(), space);
    }

    /// Releases an unmodified page early (latch coupling during descent).
    pub fn release(&mut self, r: PageRef) {
        let h = &mut self.held[r.0];
        assert!(
            !h.modified.get(),
            "release of modified page {} before commit",
            h.id
        );
        if !h.released {
            h.released = true;
            self.pool.unlatch(h.frame, h.mode);
            self.pool.unfix(h.frame);
        }
    }

    /// Bytes of redo this mtr has so far.
    pub fn log_len(&self) -> usize {
        self.log.borrow().len()
    }

    /// Whether this mtr changed the page.
    pub fn is_modified(&self, r: PageRef) -> bool {
        self.held[r.0].modified.get()
    }

    /// Commits. Returns the end LSN of the record, or None when nothing was
    /// changed (no record). The caller waits for durability separately.
    ///
    /// If the record cannot be appended (the log failed, or it is too
    /// large), the changed pages hold changes no redo describes: the engine
    /// is stopped (see the module comment) and the error returned.
    pub fn commit(mut self) -> Result<Option<u64>, Error> {
        let result = self.commit_inner();
        if let Err(e) = &result {
            self.fail_engine(&format!("committing a mini-transaction failed: {e}"));
        }
        self.end();
        result
    }

    /// Ends the mtr without committing. Harmless for one that changed
    /// nothing (a read, or a change given up before its first write); for
    /// one that changed a page it stops the engine, as dropping it does.
    pub fn abort(mut self) {
        self.abandon();
    }

    fn abandon(&mut self) {
        if !self.log.borrow().is_empty() {
            let held: Vec<String> = self
                .held
                .iter()
                .filter(|h| h.modified.get() && !h.released)
                .map(|h| h.id.to_string())
                .collect();
            self.fail_engine(&format!(
                "a mini-transaction ended without commit after changing pages [{}]; \
                 the engine stops so that the half-done change is never written, and the \
                 next open recovers from the redo log",
                held.join(", ")
            ));
        }
        self.end();
    }

    /// Stops the engine: the log refuses every later append and commit wait,
    /// and the pool refuses to flush (the changed pages must never reach
    /// the disk).
    fn fail_engine(&self, cause: &str) {
        if let Some(log) = self.pool.log() {
            if !log.is_failed() {
                tracing::error!(cause, "stopping the engine");
            }
            log.fail(cause);
        }
    }

    fn end(&mut self) {
        self.release_all();
        if !self.ended {
            self.ended = true;
            MTRS_ON_THREAD.with(|n| n.set(n.get().saturating_sub(1)));
            self.pool
                .active_mtrs
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn commit_inner(&mut self) -> Result<Option<u64>, Error> {
        let log_bytes = self.log.borrow();
        if log_bytes.is_empty() {
            return Ok(None);
        }
        let log = self
            .pool
            .log()
            .expect("mini-transactions run only after recovery attached the log");
        let range = log.append(&log_bytes).map_err(Error::Log)?;
        drop(log_bytes);
        let mut frames = Vec::new();
        for h in &self.held {
            if h.modified.get() && !h.released {
                page::set_page_lsn(self.pool.data_mut(h.frame), range.end);
                frames.push(h.frame);
            }
        }
        self.pool.mark_dirty(&frames, range.start, range.end);
        log.close(range);
        Ok(Some(range.end))
    }

    fn release_all(&mut self) {
        for h in &mut self.held {
            if !h.released {
                h.released = true;
                self.pool.unlatch(h.frame, h.mode);
                self.pool.unfix(h.frame);
            }
        }
    }
}

impl Drop for Mtr<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // An error (or a panic) left it half-way: its changes are in the
            // pages but may not be whole, so they must not be committed.
            self.abandon();
        }
    }
}

impl Mtr<'_> {
    /// Creates a tablespace's file (durably named) and logs it, so recovery
    /// recreates the file if the crash came before anything was flushed.
    pub fn create_space_file(&mut self, space: u32) -> Result<(), Error> {
        self.pool.files.file(space, true)?;
        self.log_create_space(space);
        Ok(())
    }
}

impl Mtr<'_> {
    pub(crate) fn space_file_exists(&self, space: u32) -> bool {
        self.pool.files.exists(space)
    }

    pub(crate) fn space_file_ids(&self) -> Result<Vec<u32>, Error> {
        self.pool.files.space_ids()
    }
}
