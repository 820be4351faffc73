// Long file, one job: the cursor (the last part) descends with
// `Index`'s private descent (`descend`, `Target`), which a split would have
// to make crate-visible.
//! B+tree indexes: lookups, inserts, updates, delete-marks and deletes,
//! with splits and merges as mini-transactions.
//!
//! Latching (docs/design.md, "B+tree latching"):
//! - Readers and optimistic writers hold the index latch S while they
//!   descend, coupling page latches top-down (child latched, then parent
//!   released), and end holding one leaf (S to read, X to write).
//! - An operation that must split or merge (the leaf change does not fit,
//!   or leaves the page under a quarter full) gives up its latches and
//!   starts again holding the index latch X, X-latching the whole path.
//!   Only one such operation runs per index at a time.
//! - Cursors hold no latch between calls, and never hold two leaves at
//!   once: they release a page before latching its sibling.
//!
//! So the only thread that ever waits for a page latch while holding
//! another leaf is the single structure-modifying one: no cycle can form.

use crate::node::{self, PageMut};
use millrace_buf::latch::Latch;
use millrace_buf::{page_type, space, LatchMode, Mtr, PageId, PageRef, PageSlice, PageStore};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Buf(millrace_buf::Error),
    /// The key already exists (the existing record may be delete-marked).
    Duplicate,
    /// A record larger than a page may hold (an eighth of a page).
    TooLarge {
        len: usize,
        max: usize,
    },
    Corrupt(String),
}

impl From<millrace_buf::Error> for Error {
    fn from(e: millrace_buf::Error) -> Self {
        match e {
            millrace_buf::Error::Corrupt(m) => Error::Corrupt(m),
            e => Error::Buf(e),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Buf(e) => write!(f, "{e}"),
            Self::Duplicate => write!(f, "duplicate key"),
            Self::TooLarge { len, max } => write!(f, "record of {len} bytes exceeds {max}"),
            Self::Corrupt(m) => write!(f, "index corrupted: {m}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// A page of the current mtr seen through the node module's interface
/// (`Mtr::page_mut`, or `Mtr::pages_mut` for two or three pages at once:
/// every change is logged to the mtr's redo buffer).
impl PageMut for PageSlice<'_> {
    fn bytes(&self) -> &[u8] {
        PageSlice::bytes(self)
    }
    fn write(&mut self, offset: usize, data: &[u8]) {
        PageSlice::write(self, offset, data)
    }
    fn copy_within(&mut self, src: usize, dst: usize, len: usize) {
        PageSlice::copy_within(self, src, dst, len)
    }
}

/// A record, copied out of its page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub deleted: bool,
    pub trx_id: u64,
    pub roll_ptr: u64,
}

impl Row {
    fn from_rec(r: node::Rec<'_>) -> Self {
        Self {
            key: r.key.to_vec(),
            value: r.value.to_vec(),
            deleted: r.deleted,
            trx_id: r.trx_id,
            roll_ptr: r.roll_ptr,
        }
    }
}

/// Where an index lives; what the catalog stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexDef {
    pub space: u32,
    /// The root page never moves: a root split moves its records down.
    pub root: u32,
    pub id: u64,
    /// Leaf records carry a transaction id and roll pointer (clustered).
    pub sys_fields: bool,
}

pub struct Index {
    def: IndexDef,
    /// The index latch: S for descents and leaf changes, X for splits/merges.
    lock: Latch,
}

struct LockGuard<'a>(&'a Latch, LatchMode);
impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        match self.1 {
            LatchMode::Shared => self.0.unlock_s(),
            LatchMode::Exclusive => self.0.unlock_x(),
        }
    }
}

#[derive(Clone, Copy)]
enum Target<'k> {
    Key(&'k [u8]),
    First,
    Last,
}

/// One step of a path from the root: the page, and the slot followed in it.
#[derive(Clone, Copy)]
struct Step {
    page: PageRef,
    slot: usize,
}

impl Index {
    /// Creates an empty index in `space` (a root leaf), registered in the
    /// space header.
    pub fn create(store: &PageStore, space_id: u32, sys_fields: bool) -> Result<Index> {
        let mut mtr = store.mtr()?;
        let id = space::next_index_id(&mut mtr)?;
        let root = space::allocate_page(&mut mtr, space_id, page_type::INDEX)?;
        node::init(&mut mtr.page_mut(root), 0, id, sys_fields);
        let root_no = mtr.id(root).page;
        space::register_index(&mut mtr, space_id, id, root_no)?;
        mtr.commit()?;
        Ok(Index::open(IndexDef {
            space: space_id,
            root: root_no,
            id,
            sys_fields,
        }))
    }

    pub fn open(def: IndexDef) -> Index {
        Index {
            def,
            lock: Latch::new(),
        }
    }

    pub fn def(&self) -> IndexDef {
        self.def
    }

    pub(crate) fn lock_for_check(&self) {
        self.lock.lock_x();
    }
    pub(crate) fn unlock_for_check(&self) {
        self.lock.unlock_x();
    }

    fn lock(&self, mode: LatchMode) -> LockGuard<'_> {
        match mode {
            LatchMode::Shared => self.lock.lock_s(),
            LatchMode::Exclusive => self.lock.lock_x(),
        };
        LockGuard(&self.lock, mode)
    }

    fn page_id(&self, no: u32) -> PageId {
        PageId::new(self.def.space, no)
    }

    /// The largest key + value one record may have.
    pub fn max_record_bytes(&self, store: &PageStore) -> usize {
        store.pool().page_size() / 8 - node::rec_size(0, 0, self.def.sys_fields)
    }

    fn check_size(&self, store: &PageStore, key: &[u8], value: &[u8]) -> Result<()> {
        let max = self.max_record_bytes(store);
        if key.len() + value.len() > max {
            return Err(Error::TooLarge {
                len: key.len() + value.len(),
                max,
            });
        }
        Ok(())
    }

    /// Whether a latched page is (still) an index page of this index; reads
    /// only fixed header fields, safe on any page.
    fn is_own_page(&self, mtr: &Mtr<'_>, r: PageRef) -> bool {
        let p = mtr.page(r);
        millrace_buf::page::page_type_of(p) == page_type::INDEX
            && node::header(p).index_id == self.def.id
    }

    /// Checks that a latched page belongs to this index.
    fn check_page(&self, mtr: &Mtr<'_>, r: PageRef) -> Result<()> {
        let p = mtr.page(r);
        let ok = millrace_buf::page::page_type_of(p) == page_type::INDEX
            && node::header(p).index_id == self.def.id;
        if ok {
            Ok(())
        } else {
            Err(Error::Corrupt(format!(
                "page {} is not a page of index {}",
                mtr.id(r),
                self.def.id
            )))
        }
    }

    /// Descends to the leaf for `target`, latching it `leaf_mode`. The
    /// caller holds the index latch (S); internal pages are S-coupled.
    fn descend(
        &self,
        mtr: &mut Mtr<'_>,
        target: Target<'_>,
        leaf_mode: LatchMode,
    ) -> Result<PageRef> {
        let root = self.page_id(self.def.root);
        let mut r = mtr.get_checked(root, LatchMode::Shared, node::validate)?;
        self.check_page(mtr, r)?;
        if node::level(mtr.page(r)) == 0 && leaf_mode == LatchMode::Exclusive {
            // The root is the leaf; it cannot stop being one while we hold
            // the index latch S, so relatch it X.
            mtr.release(r);
            r = mtr.get_checked(root, LatchMode::Exclusive, node::validate)?;
            self.check_page(mtr, r)?;
        }
        let mut depth = 0;
        loop {
            let page = mtr.page(r);
            let level = node::level(page);
            if level == 0 {
                return Ok(r);
            }
            depth += 1;
            if depth > node::MAX_LEVEL as usize {
                return Err(Error::Corrupt(format!(
                    "index {} is deeper than possible",
                    self.def.id
                )));
            }
            let n = node::n_recs(page);
            if n == 0 {
                return Err(Error::Corrupt(format!(
                    "internal page {} is empty",
                    mtr.id(r)
                )));
            }
            let slot = match target {
                Target::Key(k) => node::search_internal(page, k),
                Target::First => 0,
                Target::Last => n - 1,
            };
            let child = self.page_id(node::child(page, slot));
            let mode = if level == 1 {
                leaf_mode
            } else {
                LatchMode::Shared
            };
            let c = mtr.get_checked(child, mode, node::validate)?;
            self.check_page(mtr, c)?;
            if node::level(mtr.page(c)) + 1 != level {
                return Err(Error::Corrupt(format!("page {child} has the wrong level")));
            }
            mtr.release(r);
            r = c;
        }
    }

    /// Descends holding X on every page of the path (index latch X held).
    fn descend_path(&self, mtr: &mut Mtr<'_>, key: &[u8]) -> Result<Vec<Step>> {
        let mut path = Vec::new();
        let mut r = mtr.get_checked(
            self.page_id(self.def.root),
            LatchMode::Exclusive,
            node::validate,
        )?;
        loop {
            self.check_page(mtr, r)?;
            let page = mtr.page(r);
            if node::level(page) == 0 {
                let slot = match node::search_leaf(page, key) {
                    Ok(s) | Err(s) => s,
                };
                path.push(Step { page: r, slot });
                return Ok(path);
            }
            if path.len() > node::MAX_LEVEL as usize || node::n_recs(page) == 0 {
                return Err(Error::Corrupt(format!("bad internal page {}", mtr.id(r))));
            }
            let slot = node::search_internal(page, key);
            let child = self.page_id(node::child(page, slot));
            path.push(Step { page: r, slot });
            r = mtr.get_checked(child, LatchMode::Exclusive, node::validate)?;
        }
    }

    /// The record with exactly this key (delete-marked ones included).
    pub fn get(&self, store: &PageStore, key: &[u8]) -> Result<Option<Row>> {
        let mut mtr = store.mtr()?;
        let _g = self.lock(LatchMode::Shared);
        let leaf = self.descend(&mut mtr, Target::Key(key), LatchMode::Shared)?;
        let page = mtr.page(leaf);
        Ok(match node::search_leaf(page, key) {
            Ok(slot) => Some(Row::from_rec(node::rec(page, slot))),
            Err(_) => None,
        })
    }

    /// Inserts a new record; `Duplicate` if the key exists.
    pub fn insert(
        &self,
        store: &PageStore,
        key: &[u8],
        value: &[u8],
        trx_id: u64,
        roll_ptr: u64,
    ) -> Result<()> {
        self.check_size(store, key, value)?;
        {
            let mut mtr = store.mtr()?;
            let _g = self.lock(LatchMode::Shared);
            let leaf = self.descend(&mut mtr, Target::Key(key), LatchMode::Exclusive)?;
            let slot = match node::search_leaf(mtr.page(leaf), key) {
                Ok(_) => return Err(Error::Duplicate),
                Err(s) => s,
            };
            if node::insert(&mut mtr.page_mut(leaf), slot, key, value, trx_id, roll_ptr) {
                mtr.commit()?;
                return Ok(());
            }
        }
        let mut mtr = store.mtr()?;
        let _g = self.lock(LatchMode::Exclusive);
        let mut path = self.descend_path(&mut mtr, key)?;
        let leaf = path.last().expect("a path ends at a leaf").page;
        if node::search_leaf(mtr.page(leaf), key).is_ok() {
            return Err(Error::Duplicate);
        }
        self.insert_at(&mut mtr, &mut path, key, value, trx_id, roll_ptr)?;
        mtr.commit()?;
        Ok(())
    }

    /// Inserts into the page at the end of `path` (a leaf, or an internal
    /// page when called for a separator), splitting up the path as needed.
    fn insert_at(
        &self,
        mtr: &mut Mtr<'_>,
        path: &mut Vec<Step>,
        key: &[u8],
        value: &[u8],
        trx_id: u64,
        roll_ptr: u64,
    ) -> Result<()> {
        let depth = path.len() - 1;
        let r = path[depth].page;
        let page = mtr.page(r);
        let slot = if node::level(page) == 0 {
            match node::search_leaf(page, key) {
                Ok(s) | Err(s) => s,
            }
        } else {
            node::search_internal(page, key) + 1
        };
        if node::insert(&mut mtr.page_mut(r), slot, key, value, trx_id, roll_ptr) {
            return Ok(());
        }
        if depth == 0 {
            // The root splits by moving its records into two new children;
            // then the insert goes into the child that covers the key.
            let (left, right, sep) = self.split_root(mtr, r)?;
            let child = if key >= sep.as_slice() { right } else { left };
            path.push(Step {
                page: child,
                slot: 0,
            });
            return self.insert_at(mtr, path, key, value, trx_id, roll_ptr);
        }
        let (new, sep) = self.split(mtr, r, slot)?;
        // The separator goes into the parent (which may split in turn).
        let mut parent_path: Vec<Step> = path[..depth].to_vec();
        let new_no = mtr.id(new).page;
        self.insert_at(mtr, &mut parent_path, &sep, &new_no.to_le_bytes(), 0, 0)?;
        let target = if key >= sep.as_slice() { new } else { r };
        let page = mtr.page(target);
        let slot = if node::level(page) == 0 {
            match node::search_leaf(page, key) {
                Ok(s) | Err(s) => s,
            }
        } else {
            node::search_internal(page, key) + 1
        };
        if !node::insert(
            &mut mtr.page_mut(target),
            slot,
            key,
            value,
            trx_id,
            roll_ptr,
        ) {
            return Err(Error::Corrupt(format!(
                "record does not fit in a half-empty page {}",
                mtr.id(target)
            )));
        }
        Ok(())
    }

    /// Splits a non-root page: its upper records move to a new right
    /// sibling. Returns the new page and the separator for the parent.
    fn split(
        &self,
        mtr: &mut Mtr<'_>,
        r: PageRef,
        insert_slot: usize,
    ) -> Result<(PageRef, Vec<u8>)> {
        let page = mtr.page(r);
        let h = node::header(page);
        let n = h.n_recs as usize;
        // Appending at the end (ascending keys): keep the left page full.
        let mid = if insert_slot >= n && n > 1 {
            n - 1
        } else {
            node::split_point(page)
        };
        let right_no = h.right;
        // Latch the right sibling before the first change: an error after
        // it (a read error, no free frame) would leave a half-done split,
        // which stops the engine (docs/design.md, "Faults: what the engine
        // does when storage fails").
        let right = if right_no != node::NONE {
            let rr =
                mtr.get_checked(self.page_id(right_no), LatchMode::Exclusive, node::validate)?;
            self.check_page(mtr, rr)?;
            Some(rr)
        } else {
            None
        };
        let new = space::allocate_page(mtr, self.def.space, page_type::INDEX)?;
        let new_no = mtr.id(new).page;
        {
            let r_no = mtr.id(r).page;
            let [mut src, mut dst] = mtr.pages_mut([r, new]);
            node::init(&mut dst, h.level, self.def.id, self.def.sys_fields);
            node::move_tail(&mut src, mid, &mut dst);
            node::set_left(&mut dst, r_no);
            node::set_right(&mut dst, right_no);
            node::set_right(&mut src, new_no);
        }
        if let Some(rr) = right {
            node::set_left(&mut mtr.page_mut(rr), new_no);
        }
        let sep = node::rec(mtr.page(new), 0).key.to_vec();
        Ok((new, sep))
    }

    /// Moves the root's records into two new children; the root becomes
    /// their parent one level up. Returns (left, right, separator).
    fn split_root(&self, mtr: &mut Mtr<'_>, root: PageRef) -> Result<(PageRef, PageRef, Vec<u8>)> {
        let level = node::level(mtr.page(root));
        if level + 1 >= node::MAX_LEVEL {
            return Err(Error::Corrupt("index too deep".into()));
        }
        let left = space::allocate_page(mtr, self.def.space, page_type::INDEX)?;
        let right = space::allocate_page(mtr, self.def.space, page_type::INDEX)?;
        let (left_no, right_no) = (mtr.id(left).page, mtr.id(right).page);
        let mid = node::split_point(mtr.page(root));
        {
            let [mut rt, mut l, mut rr] = mtr.pages_mut([root, left, right]);
            node::init(&mut l, level, self.def.id, self.def.sys_fields);
            node::init(&mut rr, level, self.def.id, self.def.sys_fields);
            node::move_tail(&mut rt, mid, &mut rr);
            node::move_tail(&mut rt, 0, &mut l);
            node::set_right(&mut l, right_no);
            node::set_left(&mut rr, left_no);
        }
        let sep = node::rec(mtr.page(right), 0).key.to_vec();
        let mut rt = mtr.page_mut(root);
        node::init(&mut rt, level + 1, self.def.id, self.def.sys_fields);
        let ok = node::insert(&mut rt, 0, b"", &left_no.to_le_bytes(), 0, 0)
            && node::insert(&mut rt, 1, &sep, &right_no.to_le_bytes(), 0, 0);
        if !ok {
            return Err(Error::Corrupt("a new root cannot hold two entries".into()));
        }
        Ok((left, right, sep))
    }

    /// Changes the value (and system fields) of an existing record; false
    /// if there is none. The size may change.
    pub fn update(
        &self,
        store: &PageStore,
        key: &[u8],
        value: &[u8],
        trx_id: u64,
        roll_ptr: u64,
    ) -> Result<bool> {
        self.update_full(store, key, value, None, trx_id, roll_ptr)
    }

    /// Like `update`, and also sets the delete mark when `deleted` is given,
    /// all in one mini-transaction: a reader never sees the new system
    /// fields with the old mark (rollback restores whole versions).
    pub fn update_full(
        &self,
        store: &PageStore,
        key: &[u8],
        value: &[u8],
        deleted: Option<bool>,
        trx_id: u64,
        roll_ptr: u64,
    ) -> Result<bool> {
        self.check_size(store, key, value)?;
        {
            let mut mtr = store.mtr()?;
            let _g = self.lock(LatchMode::Shared);
            let leaf = self.descend(&mut mtr, Target::Key(key), LatchMode::Exclusive)?;
            let Ok(slot) = node::search_leaf(mtr.page(leaf), key) else {
                return Ok(false);
            };
            let mut w = mtr.page_mut(leaf);
            if node::update_value(&mut w, slot, value) {
                if let Some(d) = deleted {
                    node::set_deleted(&mut w, slot, d);
                }
                if self.def.sys_fields {
                    node::set_sys_fields(&mut w, slot, trx_id, roll_ptr);
                }
                mtr.commit()?;
                return Ok(true);
            }
        }
        // It grew past what the page can hold: delete and reinsert with a
        // split, in one mini-transaction.
        let mut mtr = store.mtr()?;
        let _g = self.lock(LatchMode::Exclusive);
        let mut path = self.descend_path(&mut mtr, key)?;
        let leaf = path.last().expect("a path ends at a leaf").page;
        let Ok(slot) = node::search_leaf(mtr.page(leaf), key) else {
            return Ok(false);
        };
        let deleted = deleted.unwrap_or(node::rec(mtr.page(leaf), slot).deleted);
        node::delete(&mut mtr.page_mut(leaf), slot);
        self.insert_at(&mut mtr, &mut path, key, value, trx_id, roll_ptr)?;
        if deleted {
            // Keep the delete mark through the move.
            let leaf2 = self.descend_path(&mut mtr, key)?;
            let l = leaf2.last().expect("leaf").page;
            if let Ok(s) = node::search_leaf(mtr.page(l), key) {
                node::set_deleted(&mut mtr.page_mut(l), s, true);
            }
        }
        mtr.commit()?;
        Ok(true)
    }

    /// Sets or clears the delete mark (and the system fields); false if the
    /// key is absent.
    pub fn set_deleted(
        &self,
        store: &PageStore,
        key: &[u8],
        deleted: bool,
        trx_id: u64,
        roll_ptr: u64,
    ) -> Result<bool> {
        let mut mtr = store.mtr()?;
        let _g = self.lock(LatchMode::Shared);
        let leaf = self.descend(&mut mtr, Target::Key(key), LatchMode::Exclusive)?;
        let Ok(slot) = node::search_leaf(mtr.page(leaf), key) else {
            return Ok(false);
        };
        let mut w = mtr.page_mut(leaf);
        node::set_deleted(&mut w, slot, deleted);
        if self.def.sys_fields {
            node::set_sys_fields(&mut w, slot, trx_id, roll_ptr);
        }
        mtr.commit()?;
        Ok(true)
    }

    /// Removes the record physically; false if absent. Pages left under a
    /// quarter full merge with a sibling under the same parent.
    pub fn delete(&self, store: &PageStore, key: &[u8]) -> Result<bool> {
        self.delete_if(store, key, |_| true)
    }

    /// Removes the record only if `keep_going` holds for it, checked under
    /// the leaf's X latch (purge: "still delete-marked by the purged
    /// transaction"). False if absent or refused.
    pub fn delete_if(
        &self,
        store: &PageStore,
        key: &[u8],
        keep_going: impl Fn(&Row) -> bool,
    ) -> Result<bool> {
        let ps = store.pool().page_size();
        {
            let mut mtr = store.mtr()?;
            let _g = self.lock(LatchMode::Shared);
            let leaf = self.descend(&mut mtr, Target::Key(key), LatchMode::Exclusive)?;
            let page = mtr.page(leaf);
            let Ok(slot) = node::search_leaf(page, key) else {
                return Ok(false);
            };
            let r = node::rec(page, slot);
            if !keep_going(&Row::from_rec(r)) {
                return Ok(false);
            }
            let after = node::used_bytes(page)
                - node::rec_size(
                    r.key.len(),
                    r.value.len(),
                    node::header(page).recs_have_sys_fields(),
                )
                - 2;
            let is_root = mtr.id(leaf).page == self.def.root;
            if is_root || after >= ps / 4 {
                node::delete(&mut mtr.page_mut(leaf), slot);
                mtr.commit()?;
                return Ok(true);
            }
        }
        let mut mtr = store.mtr()?;
        let _g = self.lock(LatchMode::Exclusive);
        let mut path = self.descend_path(&mut mtr, key)?;
        let leaf = path.last().expect("leaf").page;
        let Ok(slot) = node::search_leaf(mtr.page(leaf), key) else {
            return Ok(false);
        };
        if !keep_going(&Row::from_rec(node::rec(mtr.page(leaf), slot))) {
            return Ok(false);
        }
        node::delete(&mut mtr.page_mut(leaf), slot);
        self.rebalance(&mut mtr, &mut path)?;
        mtr.commit()?;
        Ok(true)
    }

    /// After a delete from the page at the end of `path`: removes an empty
    /// page, merges an underfull one with a sibling under the same parent,
    /// collapses a root with a single child; repeats up the path.
    fn rebalance(&self, mtr: &mut Mtr<'_>, path: &mut Vec<Step>) -> Result<()> {
        let ps = mtr.page_size();
        let depth = path.len() - 1;
        let r = path[depth].page;
        if depth == 0 {
            let page = mtr.page(r);
            let h = node::header(page);
            if h.level > 0 && h.n_recs == 1 {
                // A root with one child: pull the child's records up.
                let child = self.page_id(node::child(page, 0));
                let c = mtr.get_checked(child, LatchMode::Exclusive, node::validate)?;
                self.check_page(mtr, c)?;
                let child_level = node::level(mtr.page(c));
                {
                    let [mut rt, mut cw] = mtr.pages_mut([r, c]);
                    node::init(&mut rt, child_level, self.def.id, self.def.sys_fields);
                    node::move_tail(&mut cw, 0, &mut rt);
                }
                space::free_page(mtr, child)?;
            }
            return Ok(());
        }
        let page = mtr.page(r);
        let n = node::n_recs(page);
        if n > 0 && node::used_bytes(page) >= ps / 4 {
            return Ok(());
        }
        let parent = path[depth - 1].page;
        let pslot = path[depth - 1].slot;
        let pn = node::n_recs(mtr.page(parent));
        if n == 0 {
            self.unlink(mtr, r)?;
            node::delete(&mut mtr.page_mut(parent), pslot);
            let id = mtr.id(r);
            space::free_page(mtr, id)?;
            path.pop();
            return self.rebalance(mtr, path);
        }
        // Merge the right one of a sibling pair into the left one, if the
        // records fit in one page with a little room to spare.
        let (left, right, right_slot) = if pslot + 1 < pn {
            let rno = node::child(mtr.page(parent), pslot + 1);
            let rr = mtr.get_checked(self.page_id(rno), LatchMode::Exclusive, node::validate)?;
            (r, rr, pslot + 1)
        } else if pslot > 0 {
            let lno = node::child(mtr.page(parent), pslot - 1);
            let ll = mtr.get_checked(self.page_id(lno), LatchMode::Exclusive, node::validate)?;
            (ll, r, pslot)
        } else {
            return Ok(()); // an only child: nothing to merge with
        };
        self.check_page(mtr, left)?;
        self.check_page(mtr, right)?;
        let fits =
            node::used_bytes(mtr.page(left)) + node::used_bytes(mtr.page(right)) + node::HEAP_START
                <= ps * 7 / 8;
        if !fits {
            return Ok(());
        }
        let sep = node::rec(mtr.page(parent), right_slot).key.to_vec();
        let merged = {
            let [mut lw, rw] = mtr.pages_mut([left, right]);
            let src = rw.bytes();
            if node::level(src) == 0 {
                node::append_all(&mut lw, src)
            } else {
                node::append_all_with_separator(&mut lw, src, &sep)
            }
        };
        if !merged {
            return Ok(());
        }
        self.unlink(mtr, right)?;
        node::delete(&mut mtr.page_mut(parent), right_slot);
        let id = mtr.id(right);
        space::free_page(mtr, id)?;
        path.pop();
        self.rebalance(mtr, path)
    }

    /// Takes a page out of its level's sibling chain.
    fn unlink(&self, mtr: &mut Mtr<'_>, r: PageRef) -> Result<()> {
        let h = node::header(mtr.page(r));
        if h.left != node::NONE {
            let l = mtr.get_checked(self.page_id(h.left), LatchMode::Exclusive, node::validate)?;
            node::set_right(&mut mtr.page_mut(l), h.right);
        }
        if h.right != node::NONE {
            let rr =
                mtr.get_checked(self.page_id(h.right), LatchMode::Exclusive, node::validate)?;
            node::set_left(&mut mtr.page_mut(rr), h.left);
        }
        Ok(())
    }

    /// A cursor positioned before the first record >= `from` (forward) or
    /// after the last record <= `from` (backward); None = from the start
    /// or the end.
    pub fn cursor(&self, from: Option<&[u8]>, direction: Direction) -> Cursor<'_> {
        Cursor {
            index: self,
            direction,
            pos: None,
            start: from.map(|k| k.to_vec()),
            done: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Backward,
}

/// Where a cursor was: the record's key, and its page as it was then (the
/// page LSN changes with every change of the page).
struct Position {
    key: Vec<u8>,
    page: u32,
    page_lsn: u64,
    slot: usize,
}

/// A range cursor that holds no latch between calls. It resumes from its
/// page if the page is unchanged, and by searching for its last key if not.
pub struct Cursor<'i> {
    index: &'i Index,
    direction: Direction,
    pos: Option<Position>,
    start: Option<Vec<u8>>,
    done: bool,
}

/// What one attempt of `Cursor::next` ended with.
enum CursorStep {
    Done(Option<Row>),
    /// A sibling link did not link back: search again from the last key.
    Reseek,
}

/// Searches again `Cursor::next` makes before calling the links damaged.
/// A link that disagrees because a split or merge moved records is right
/// after one search; one that disagrees every time is corruption, and
/// retrying it for ever (it was recursion once) overflowed the stack.
const MAX_RESEEKS: usize = 64;

impl Cursor<'_> {
    /// The next record in the cursor's direction, or None at the end.
    pub fn next(&mut self, store: &PageStore) -> Result<Option<Row>> {
        for _ in 0..MAX_RESEEKS {
            match self.step(store)? {
                CursorStep::Done(row) => return Ok(row),
                CursorStep::Reseek => {
                    if let Some(p) = &mut self.pos {
                        // Force a search from the last key.
                        p.page_lsn = u64::MAX;
                    }
                }
            }
        }
        Err(Error::Corrupt(format!(
            "cursor: sibling links still disagree after {MAX_RESEEKS} searches"
        )))
    }

    fn step(&mut self, store: &PageStore) -> Result<CursorStep> {
        if self.done {
            return Ok(CursorStep::Done(None));
        }
        let idx = self.index;
        let mut mtr = store.mtr()?;
        // Try to resume on the remembered page. It may have been freed and
        // reused since: trust it only if it is still this index's page with
        // the same LSN (then its bytes are what we saw).
        let mut at: Option<(PageRef, usize)> = None;
        if let Some(p) = &self.pos {
            let r = mtr.get(idx.page_id(p.page), LatchMode::Shared)?;
            if idx.is_own_page(&mtr, r) && millrace_buf::page::page_lsn(mtr.page(r)) == p.page_lsn {
                at = Some((r, p.slot));
            } else {
                mtr.release(r);
            }
        }
        let (mut r, mut slot_after) = match at {
            Some((r, s)) => (r, Some(s)),
            None => {
                let _g = idx.lock(LatchMode::Shared);
                let (key, inclusive) = match (&self.pos, &self.start) {
                    (Some(p), _) => (Some(p.key.clone()), false),
                    (None, Some(k)) => (Some(k.clone()), true),
                    (None, None) => (None, true),
                };
                let target = match (&key, self.direction) {
                    (Some(k), _) => Target::Key(k),
                    (None, Direction::Forward) => Target::First,
                    (None, Direction::Backward) => Target::Last,
                };
                let r = idx.descend(&mut mtr, target, LatchMode::Shared)?;
                let page = mtr.page(r);
                let n = node::n_recs(page);
                // The slot "before" the next one to return, as if we had
                // just returned it: None means before slot 0 (forward).
                let s = match (&key, self.direction) {
                    (None, Direction::Forward) => None,
                    (None, Direction::Backward) => Some(n),
                    (Some(k), Direction::Forward) => match node::search_leaf(page, k) {
                        Ok(s) if inclusive => s.checked_sub(1).map(Some).unwrap_or(None),
                        Ok(s) => Some(s),
                        Err(s) => s.checked_sub(1).map(Some).unwrap_or(None),
                    },
                    (Some(k), Direction::Backward) => match node::search_leaf(page, k) {
                        Ok(s) if inclusive => Some(s + 1),
                        Ok(s) | Err(s) => Some(s),
                    },
                };
                (r, s)
            }
        };
        // Step to the next slot, crossing to siblings as needed.
        for _ in 0..1_000_000 {
            let page = mtr.page(r);
            let h = node::header(page);
            let n = h.n_recs as usize;
            let next = match self.direction {
                Direction::Forward => {
                    let s = slot_after.map_or(0, |s| s + 1);
                    (s < n).then_some(s)
                }
                Direction::Backward => slot_after.and_then(|s| s.min(n).checked_sub(1)),
            };
            if let Some(s) = next {
                let row = Row::from_rec(node::rec(page, s));
                self.pos = Some(Position {
                    key: row.key.clone(),
                    page: mtr.id(r).page,
                    page_lsn: millrace_buf::page::page_lsn(page),
                    slot: s,
                });
                return Ok(CursorStep::Done(Some(row)));
            }
            let sibling = match self.direction {
                Direction::Forward => h.right,
                Direction::Backward => h.left,
            };
            if sibling == node::NONE {
                self.done = true;
                return Ok(CursorStep::Done(None));
            }
            // Never hold two leaves: release, then latch the sibling and
            // check it still links back; if not, search again by key.
            let here = mtr.id(r).page;
            mtr.release(r);
            let sr = mtr.get(idx.page_id(sibling), LatchMode::Shared)?;
            if !idx.is_own_page(&mtr, sr) {
                // Freed and reused since we read the link: search again.
                mtr.release(sr);
                drop(mtr);
                return Ok(CursorStep::Reseek);
            }
            mtr.ensure_validated(sr, node::validate)?;
            let sh = node::header(mtr.page(sr));
            let back = match self.direction {
                Direction::Forward => sh.left,
                Direction::Backward => sh.right,
            };
            if back != here || sh.level != 0 {
                mtr.release(sr);
                drop(mtr);
                return Ok(CursorStep::Reseek);
            }
            r = sr;
            slot_after = match self.direction {
                Direction::Forward => None,
                Direction::Backward => Some(sh.n_recs as usize),
            };
        }
        Err(Error::Corrupt("cursor walked a million empty pages".into()))
    }
}
