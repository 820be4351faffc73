// Long file, one job: every function reads or writes the same
// slotted-page layout, whose offsets and helpers stay private to it.
//! The index page ("node") format and the operations on one page.
//!
//! Layout (all integers little-endian):
//! ```text
//! 0..32   the buffer pool's common page header: never touched here
//! 32..34  level u16 (0 = leaf)
//! 34..36  n_recs u16 (number of slots)
//! 36..38  heap_top u16 (offset just past the last record in the heap)
//! 38..40  garbage u16 (bytes of records in the heap no slot points to)
//! 40..44  left sibling page no u32 (NONE = u32::MAX)
//! 44..48  right sibling page no u32 (NONE = u32::MAX)
//! 48..56  index id u64
//! 56..57  flags u8 (bit 0: this index's leaf records carry system fields)
//! 57..64  zero
//! 64..    record heap, growing up
//! end     slot directory, growing down: slot i is the u16 at page_size - 2*(i+1)
//!         and holds its record's offset; slot 0 holds the smallest key.
//! ```
//! Record: `flags u8 (bit 0: delete-marked), key_len u16, val_len u16`,
//! then in leaf records of an index with system fields `trx_id u64,
//! roll_ptr u64`, then the key bytes, then the value bytes.
//! Internal (level > 0) records hold a separator key and a 4-byte child page
//! number; the key of an internal node's slot 0 counts as minus infinity.
//!
//! Functions that read a page trust it: run [`validate`] on anything read
//! from disk first. On a page that passed `validate` (and on any page produced
//! by the functions here) no reader panics.

use std::cmp::Ordering;

/// Where the record heap starts: the common header plus the index header.
pub const HEAP_START: usize = 64;
/// "No sibling".
pub const NONE: u32 = u32::MAX;
/// The deepest level a tree may have; anything above is corruption.
pub const MAX_LEVEL: u16 = 64;
/// Page sizes the format supports. Offsets are u16, so 64 KiB is the limit
/// (heap_top never exceeds page_size - 2 once a record exists, so it fits).
pub const MIN_PAGE_SIZE: usize = 256;
pub const MAX_PAGE_SIZE: usize = 65536;
/// Bytes of a record's header (flags, key_len, val_len).
pub const REC_HEADER: usize = 5;
/// Bytes of the system fields (trx_id, roll_ptr) in leaf records that have them.
pub const SYS_FIELDS: usize = 16;

const LEVEL: usize = 32;
const N_RECS: usize = 34;
const HEAP_TOP: usize = 36;
const GARBAGE: usize = 38;
const LEFT: usize = 40;
const RIGHT: usize = 44;
const INDEX_ID: usize = 48;
const FLAGS: usize = 56;
const RESERVED: usize = 57;

const FLAG_SYS_FIELDS: u8 = 1;
const REC_DELETED: u8 = 1;

/// Access to one page's bytes. Reads are direct; every change goes through
/// `write`/`copy_within` so the caller can record it in the redo log.
pub trait PageMut {
    /// The whole page (page_size bytes).
    fn bytes(&self) -> &[u8];
    fn write(&mut self, offset: usize, data: &[u8]);
    /// memmove semantics: the ranges may overlap.
    fn copy_within(&mut self, src: usize, dst: usize, len: usize);
}

/// A plain buffer, for tests and scratch pages.
impl PageMut for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn write(&mut self, offset: usize, data: &[u8]) {
        self[offset..offset + data.len()].copy_from_slice(data);
    }
    fn copy_within(&mut self, src: usize, dst: usize, len: usize) {
        // The slice's inherent method, not this trait's (which would recurse).
        self.as_mut_slice().copy_within(src..src + len, dst);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHeader {
    pub level: u16,
    pub n_recs: u16,
    pub heap_top: u16,
    pub garbage: u16,
    pub left: u32,
    pub right: u32,
    pub index_id: u64,
    /// The index's leaf records carry trx_id and roll_ptr.
    pub sys_fields: bool,
}

impl NodeHeader {
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }
    /// Whether this page's records carry system fields (only leaves do).
    pub fn recs_have_sys_fields(&self) -> bool {
        self.level == 0 && self.sys_fields
    }
}

/// A record as stored; borrowed from the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rec<'a> {
    pub deleted: bool,
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// 0 in records without system fields.
    pub trx_id: u64,
    pub roll_ptr: u64,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Where slot `slot`'s u16 lives.
fn slot_pos(page_size: usize, slot: usize) -> usize {
    page_size - 2 * (slot + 1)
}
fn slot_offset(page: &[u8], slot: usize) -> usize {
    u16_at(page, slot_pos(page.len(), slot)) as usize
}
fn has_sys(page: &[u8]) -> bool {
    u16_at(page, LEVEL) == 0 && page[FLAGS] & FLAG_SYS_FIELDS != 0
}
fn sys_len(sys: bool) -> usize {
    if sys {
        SYS_FIELDS
    } else {
        0
    }
}

/// Writes n_recs, heap_top and garbage with one call (they are adjacent), so
/// every operation costs one small header record in the log.
fn write_counts(p: &mut impl PageMut, n_recs: usize, heap_top: usize, garbage: usize) {
    debug_assert!(n_recs <= u16::MAX as usize && heap_top <= u16::MAX as usize);
    debug_assert!(garbage <= u16::MAX as usize);
    let mut b = [0u8; 6];
    b[0..2].copy_from_slice(&(n_recs as u16).to_le_bytes());
    b[2..4].copy_from_slice(&(heap_top as u16).to_le_bytes());
    b[4..6].copy_from_slice(&(garbage as u16).to_le_bytes());
    p.write(N_RECS, &b);
}

/// Writes only the part of `new` that differs from the page at `at`, so a
/// rewrite that leaves a prefix or suffix unchanged logs only the middle.
fn write_diff(p: &mut impl PageMut, at: usize, new: &[u8]) {
    let old = &p.bytes()[at..at + new.len()];
    let Some(first) = old.iter().zip(new).position(|(a, b)| a != b) else {
        return;
    };
    // A difference exists, so rposition finds one at or after `first`.
    let last = old
        .iter()
        .zip(new)
        .rposition(|(a, b)| a != b)
        .unwrap_or(first);
    p.write(at + first, &new[first..=last]);
}

/// Sets up an empty node, siblings NONE. Touches only the index header.
pub fn init(p: &mut impl PageMut, level: u16, index_id: u64, sys_fields: bool) {
    let size = p.bytes().len();
    assert!(
        (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size),
        "page size {size} outside {MIN_PAGE_SIZE}..={MAX_PAGE_SIZE}"
    );
    assert!(level <= MAX_LEVEL, "level {level} above {MAX_LEVEL}");
    let mut h = [0u8; HEAP_START - LEVEL];
    let mut put = |at: usize, b: &[u8]| h[at - LEVEL..at - LEVEL + b.len()].copy_from_slice(b);
    put(LEVEL, &level.to_le_bytes());
    put(N_RECS, &0u16.to_le_bytes());
    put(HEAP_TOP, &(HEAP_START as u16).to_le_bytes());
    put(GARBAGE, &0u16.to_le_bytes());
    put(LEFT, &NONE.to_le_bytes());
    put(RIGHT, &NONE.to_le_bytes());
    put(INDEX_ID, &index_id.to_le_bytes());
    put(FLAGS, &[if sys_fields { FLAG_SYS_FIELDS } else { 0 }]);
    p.write(LEVEL, &h);
}

/// The index header. Needs at least HEAP_START bytes.
pub fn header(page: &[u8]) -> NodeHeader {
    NodeHeader {
        level: u16_at(page, LEVEL),
        n_recs: u16_at(page, N_RECS),
        heap_top: u16_at(page, HEAP_TOP),
        garbage: u16_at(page, GARBAGE),
        left: u32_at(page, LEFT),
        right: u32_at(page, RIGHT),
        index_id: u64_at(page, INDEX_ID),
        sys_fields: page[FLAGS] & FLAG_SYS_FIELDS != 0,
    }
}

pub fn n_recs(page: &[u8]) -> usize {
    u16_at(page, N_RECS) as usize
}

pub fn level(page: &[u8]) -> u16 {
    u16_at(page, LEVEL)
}

pub fn set_left(p: &mut impl PageMut, page_no: u32) {
    p.write(LEFT, &page_no.to_le_bytes());
}

pub fn set_right(p: &mut impl PageMut, page_no: u32) {
    p.write(RIGHT, &page_no.to_le_bytes());
}

/// A record's size in the heap: header + fields, without its 2-byte slot.
pub fn rec_size(key_len: usize, val_len: usize, leaf_with_sys: bool) -> usize {
    REC_HEADER + sys_len(leaf_with_sys) + key_len + val_len
}

fn rec_at(page: &[u8], off: usize, sys: bool) -> Rec<'_> {
    let key_len = u16_at(page, off + 1) as usize;
    let val_len = u16_at(page, off + 3) as usize;
    let (trx_id, roll_ptr) = if sys {
        (
            u64_at(page, off + REC_HEADER),
            u64_at(page, off + REC_HEADER + 8),
        )
    } else {
        (0, 0)
    };
    let key_at = off + REC_HEADER + sys_len(sys);
    Rec {
        deleted: page[off] & REC_DELETED != 0,
        key: &page[key_at..key_at + key_len],
        value: &page[key_at + key_len..key_at + key_len + val_len],
        trx_id,
        roll_ptr,
    }
}

fn rec_len_at(page: &[u8], off: usize, sys: bool) -> usize {
    rec_size(
        u16_at(page, off + 1) as usize,
        u16_at(page, off + 3) as usize,
        sys,
    )
}

/// The record in `slot` (< n_recs).
pub fn rec(page: &[u8], slot: usize) -> Rec<'_> {
    debug_assert!(slot < n_recs(page), "slot {slot} out of range");
    rec_at(page, slot_offset(page, slot), has_sys(page))
}

/// Just the key: what searches need, without decoding the rest.
fn key_at(page: &[u8], slot: usize, sys: bool) -> &[u8] {
    let off = slot_offset(page, slot);
    let key_len = u16_at(page, off + 1) as usize;
    let at = off + REC_HEADER + sys_len(sys);
    &page[at..at + key_len]
}

/// Contiguous free bytes between the heap and the slot directory.
pub fn free_space(page: &[u8]) -> usize {
    (page.len() - 2 * n_recs(page)).saturating_sub(u16_at(page, HEAP_TOP) as usize)
}

/// Bytes the live records take: the sum of rec_size + 2 over the slots.
/// (The heap minus garbage, plus the directory: O(1) on a consistent page.)
pub fn used_bytes(page: &[u8]) -> usize {
    let h = header(page);
    (h.heap_top as usize).saturating_sub(HEAP_START + h.garbage as usize) + 2 * h.n_recs as usize
}

/// Binary search in a leaf: Ok(slot) if found, Err(slot) the insert position.
pub fn search_leaf(page: &[u8], key: &[u8]) -> Result<usize, usize> {
    let sys = has_sys(page);
    let (mut lo, mut hi) = (0, n_recs(page));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key_at(page, mid, sys).cmp(key) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// In an internal node: the slot of the child whose subtree may contain
/// `key`, i.e. the last slot whose key is <= key, slot 0 counting as minus
/// infinity (so the answer is 0 when every other separator is greater).
pub fn search_internal(page: &[u8], key: &[u8]) -> usize {
    debug_assert!(level(page) > 0, "search_internal on a leaf");
    // Count the slots in 1..n whose key <= key; slot 0 always qualifies.
    let (mut lo, mut hi) = (1, n_recs(page).max(1));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if key_at(page, mid, false) <= key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo - 1
}

/// The child page number an internal node's slot points to.
pub fn child(page: &[u8], slot: usize) -> u32 {
    let v = rec(page, slot).value;
    u32::from_le_bytes([v[0], v[1], v[2], v[3]])
}

fn encode_rec(flags: u8, key: &[u8], value: &[u8], sys: Option<(u64, u64)>) -> Vec<u8> {
    let mut b = Vec::with_capacity(rec_size(key.len(), value.len(), sys.is_some()));
    b.push(flags);
    b.extend_from_slice(&(key.len() as u16).to_le_bytes());
    b.extend_from_slice(&(value.len() as u16).to_le_bytes());
    if let Some((trx_id, roll_ptr)) = sys {
        b.extend_from_slice(&trx_id.to_le_bytes());
        b.extend_from_slice(&roll_ptr.to_le_bytes());
    }
    b.extend_from_slice(key);
    b.extend_from_slice(value);
    b
}

/// Inserts a new record at `slot` (the caller found it by search); trx_id and
/// roll_ptr are ignored where records carry no system fields. Returns false,
/// changing nothing, if the record does not fit even after compaction;
/// compacts first if that makes it fit.
pub fn insert(
    p: &mut impl PageMut,
    slot: usize,
    key: &[u8],
    value: &[u8],
    trx_id: u64,
    roll_ptr: u64,
) -> bool {
    insert_rec(p, slot, 0, key, value, (trx_id, roll_ptr))
}

fn insert_rec(
    p: &mut impl PageMut,
    slot: usize,
    flags: u8,
    key: &[u8],
    value: &[u8],
    sys_fields: (u64, u64),
) -> bool {
    let page = p.bytes();
    let size = page.len();
    let h = header(page);
    let n = h.n_recs as usize;
    assert!(slot <= n, "insert at slot {slot} of {n}");
    debug_assert!(
        h.level == 0 || value.len() == 4,
        "node pointer value is a page no"
    );
    let sys = h.recs_have_sys_fields();
    let len = rec_size(key.len(), value.len(), sys);
    // Callers cap records so that at least 4 fit on a page.
    debug_assert!(
        len + 2 <= (size - HEAP_START) / 4,
        "record of {len} bytes too large"
    );
    let needed = len + 2;
    let free = free_space(page);
    if free < needed {
        if free + (h.garbage as usize) < needed {
            return false;
        }
        compact(p);
    }
    let heap_top = u16_at(p.bytes(), HEAP_TOP) as usize;
    let garbage = u16_at(p.bytes(), GARBAGE) as usize;
    p.write(
        heap_top,
        &encode_rec(flags, key, value, sys.then_some(sys_fields)),
    );
    // Slots slot..n move one position down in memory to open slot `slot`.
    let dir_low = size - 2 * n;
    if slot < n {
        p.copy_within(dir_low, dir_low - 2, 2 * (n - slot));
    }
    p.write(slot_pos(size, slot), &(heap_top as u16).to_le_bytes());
    write_counts(p, n + 1, heap_top + len, garbage);
    true
}

/// Removes the slot; its record's bytes become garbage (or, when it was the
/// last record in the heap, simply free space again).
pub fn delete(p: &mut impl PageMut, slot: usize) {
    let page = p.bytes();
    let size = page.len();
    let h = header(page);
    let n = h.n_recs as usize;
    assert!(slot < n, "delete of slot {slot} of {n}");
    let off = slot_offset(page, slot);
    let len = rec_len_at(page, off, h.recs_have_sys_fields());
    let (heap_top, garbage) = release(h.heap_top as usize, h.garbage as usize, off, len);
    // Slots slot+1..n move one position up in memory over the removed one.
    let dir_low = size - 2 * n;
    if slot + 1 < n {
        p.copy_within(dir_low, dir_low + 2, 2 * (n - slot - 1));
    }
    write_counts(p, n - 1, heap_top, garbage);
}

/// Heap accounting for `len` bytes at `off` no longer belonging to a record:
/// at the top of the heap they are simply given back, elsewhere they are garbage.
fn release(heap_top: usize, garbage: usize, off: usize, len: usize) -> (usize, usize) {
    if off + len == heap_top {
        (off, garbage)
    } else {
        (heap_top, garbage + len)
    }
}

pub fn set_deleted(p: &mut impl PageMut, slot: usize, deleted: bool) {
    let page = p.bytes();
    debug_assert!(level(page) == 0, "only leaf records are delete-marked");
    assert!(slot < n_recs(page), "slot {slot} out of range");
    let off = slot_offset(page, slot);
    let flags = page[off];
    let new = if deleted {
        flags | REC_DELETED
    } else {
        flags & !REC_DELETED
    };
    if new != flags {
        p.write(off, &[new]);
    }
}

pub fn set_sys_fields(p: &mut impl PageMut, slot: usize, trx_id: u64, roll_ptr: u64) {
    let page = p.bytes();
    // Writing them into a record without them would overwrite its key.
    assert!(has_sys(page), "records of this page carry no system fields");
    assert!(slot < n_recs(page), "slot {slot} out of range");
    let off = slot_offset(page, slot);
    let mut b = [0u8; SYS_FIELDS];
    b[..8].copy_from_slice(&trx_id.to_le_bytes());
    b[8..].copy_from_slice(&roll_ptr.to_le_bytes());
    p.write(off + REC_HEADER, &b);
}

/// Replaces the value of the record in `slot`, keeping its key, delete mark
/// and system fields. Equal size: overwritten in place. Smaller: shrunk in
/// place, the freed tail becomes garbage. Larger: a new copy is appended to
/// the heap and the slot repointed, compacting first if only that makes room.
/// Returns false, changing nothing, if the new record does not fit.
pub fn update_value(p: &mut impl PageMut, slot: usize, value: &[u8]) -> bool {
    let page = p.bytes();
    let size = page.len();
    let h = header(page);
    let n = h.n_recs as usize;
    assert!(slot < n, "update of slot {slot} of {n}");
    debug_assert!(
        h.level == 0 || value.len() == 4,
        "node pointer value is a page no"
    );
    let sys = h.recs_have_sys_fields();
    let off = slot_offset(page, slot);
    let old = rec_at(page, off, sys);
    let key_len = old.key.len();
    let val_at = off + REC_HEADER + sys_len(sys) + key_len;
    let old_len = rec_size(key_len, old.value.len(), sys);
    let new_len = rec_size(key_len, value.len(), sys);
    debug_assert!(
        new_len + 2 <= (size - HEAP_START) / 4,
        "record of {new_len} bytes too large"
    );

    if value.len() == old.value.len() {
        if !value.is_empty() {
            p.write(val_at, value);
        }
        return true;
    }
    if value.len() < old.value.len() {
        let (heap_top, garbage) = release(
            h.heap_top as usize,
            h.garbage as usize,
            off + new_len,
            old_len - new_len,
        );
        p.write(off + 3, &(value.len() as u16).to_le_bytes());
        if !value.is_empty() {
            p.write(val_at, value);
        }
        write_counts(p, n, heap_top, garbage);
        return true;
    }

    // Growing: the slot is reused, so only the record's bytes need room.
    let free = free_space(page);
    if free + h.garbage as usize + old_len < new_len {
        return false;
    }
    let flags = page[off];
    let key = old.key.to_vec();
    let sys_fields = (old.trx_id, old.roll_ptr);
    if free >= new_len {
        let heap_top = h.heap_top as usize;
        p.write(
            heap_top,
            &encode_rec(flags, &key, value, sys.then_some(sys_fields)),
        );
        p.write(slot_pos(size, slot), &(heap_top as u16).to_le_bytes());
        write_counts(p, n, heap_top + new_len, h.garbage as usize + old_len);
        return true;
    }
    // Only compaction without the old version makes room: drop it, then
    // reinsert (insert_rec compacts). Rare, so the extra slot shifts are fine.
    delete(p, slot);
    let fitted = insert_rec(p, slot, flags, &key, value, sys_fields);
    debug_assert!(fitted, "the fit check above guarantees room");
    fitted
}

/// Rewrites the heap without garbage, keeping the records in their heap order
/// (so a prefix without holes stays put and is not logged) and the slot order.
/// Issues at most one write for the heap, one for the slot directory and one
/// for the header.
pub fn compact(p: &mut impl PageMut) {
    let page = p.bytes();
    let size = page.len();
    let h = header(page);
    if h.garbage == 0 {
        return;
    }
    let n = h.n_recs as usize;
    let sys = h.recs_have_sys_fields();
    let mut by_off: Vec<(usize, usize)> = (0..n).map(|s| (slot_offset(page, s), s)).collect();
    by_off.sort_unstable();
    let mut heap = Vec::with_capacity((h.heap_top as usize).saturating_sub(HEAP_START));
    let dir_low = size - 2 * n;
    let mut dir = page[dir_low..].to_vec();
    for (off, slot) in by_off {
        let len = rec_len_at(page, off, sys);
        let new_off = HEAP_START + heap.len();
        heap.extend_from_slice(&page[off..off + len]);
        let at = slot_pos(size, slot) - dir_low;
        dir[at..at + 2].copy_from_slice(&(new_off as u16).to_le_bytes());
    }
    let heap_top = HEAP_START + heap.len();
    write_diff(p, HEAP_START, &heap);
    write_diff(p, dir_low, &dir);
    write_counts(p, n, heap_top, 0);
}

/// Split support: moves slots [from, n_recs) of `src` to the empty node `dst`
/// (already init'ed with the same level, index and flags), in key order.
/// For internal nodes the record landing in dst's slot 0 keeps its key: the
/// caller pushes that key up as the separator, and in dst it now counts as
/// minus infinity. `from` may be 0 (moving everything, as a root raise does).
pub fn move_tail(src: &mut impl PageMut, from: usize, dst: &mut impl PageMut) {
    let s = src.bytes();
    let size = s.len();
    let hs = header(s);
    let n = hs.n_recs as usize;
    assert!(from <= n, "move_tail from slot {from} of {n}");
    let hd = header(dst.bytes());
    assert_eq!(dst.bytes().len(), size, "pages of different sizes");
    assert_eq!(hd.n_recs, 0, "move_tail into a non-empty node");
    assert_eq!(
        (hd.level, hd.index_id, hd.sys_fields),
        (hs.level, hs.index_id, hs.sys_fields),
        "move_tail into a node of another level or index"
    );
    let sys = hs.recs_have_sys_fields();
    let m = n - from;
    // dst is empty, so its whole heap is reusable from HEAP_START.
    let mut heap = Vec::new();
    let mut dir = vec![0u8; 2 * m];
    for j in 0..m {
        let off = slot_offset(s, from + j);
        let len = rec_len_at(s, off, sys);
        let new_off = HEAP_START + heap.len();
        heap.extend_from_slice(&s[off..off + len]);
        let at = 2 * (m - 1 - j);
        dir[at..at + 2].copy_from_slice(&(new_off as u16).to_le_bytes());
    }
    // What stays behind: recompute the heap's top and garbage exactly, so
    // that a tail that was also the top of the heap (ascending inserts) is
    // given back as free space rather than left as garbage to compact.
    let mut top = HEAP_START;
    let mut kept = 0;
    for slot in 0..from {
        let off = slot_offset(s, slot);
        let len = rec_len_at(s, off, sys);
        top = top.max(off + len);
        kept += len;
    }
    let src_garbage = top - HEAP_START - kept;

    if m > 0 {
        dst.write(HEAP_START, &heap);
        dst.write(size - 2 * m, &dir);
    }
    write_counts(dst, m, HEAP_START + heap.len(), 0);
    write_counts(src, from, top, src_garbage);
}

/// Merge support: appends all of src's records after dst's (dst's keys all
/// smaller); false, changing nothing, if they do not fit even after
/// compacting dst. For leaves. Internal nodes use
/// [`append_all_with_separator`], because src's slot-0 key is meaningless.
pub fn append_all(dst: &mut impl PageMut, src: &[u8]) -> bool {
    append(dst, src, None)
}

/// Like [`append_all`] for internal nodes: src's slot-0 record gets
/// `separator` (the parent's key for src) as its key, since in dst it is no
/// longer the minus-infinity slot.
pub fn append_all_with_separator(dst: &mut impl PageMut, src: &[u8], separator: &[u8]) -> bool {
    append(dst, src, Some(separator))
}

fn append(dst: &mut impl PageMut, src: &[u8], first_key: Option<&[u8]>) -> bool {
    let size = src.len();
    let hs = header(src);
    let hd = header(dst.bytes());
    assert_eq!(dst.bytes().len(), size, "pages of different sizes");
    assert_eq!(
        (hd.level, hd.index_id, hd.sys_fields),
        (hs.level, hs.index_id, hs.sys_fields),
        "merge of nodes of another level or index"
    );
    let m = hs.n_recs as usize;
    if m == 0 {
        return true;
    }
    let sys = hs.recs_have_sys_fields();
    let mut heap = Vec::new();
    for slot in 0..m {
        let off = slot_offset(src, slot);
        match first_key {
            Some(key) if slot == 0 => {
                let r = rec_at(src, off, sys);
                let flags = src[off];
                heap.extend(encode_rec(
                    flags,
                    key,
                    r.value,
                    sys.then_some((r.trx_id, r.roll_ptr)),
                ));
            }
            _ => heap.extend_from_slice(&src[off..off + rec_len_at(src, off, sys)]),
        }
    }
    let needed = heap.len() + 2 * m;
    let free = free_space(dst.bytes());
    if free < needed {
        if free + (hd.garbage as usize) < needed {
            return false;
        }
        compact(dst);
    }
    let d = dst.bytes();
    let n = n_recs(d);
    debug_assert!(
        n == 0
            || (hd.level > 0 && n == 1)
            || key_at(d, n - 1, sys) < first_key.unwrap_or_else(|| key_at(src, 0, sys)),
        "append_all of records not all greater than dst's"
    );
    let heap_top = u16_at(d, HEAP_TOP) as usize;
    let garbage = u16_at(d, GARBAGE) as usize;
    // New slots n..n+m, slot n+j at size - 2(n+j+1): one contiguous write.
    let mut dir = vec![0u8; 2 * m];
    let mut at_heap = heap_top;
    for j in 0..m {
        let len = rec_len_at(&heap, at_heap - heap_top, sys);
        let at = 2 * (m - 1 - j);
        dir[at..at + 2].copy_from_slice(&(at_heap as u16).to_le_bytes());
        at_heap += len;
    }
    dst.write(heap_top, &heap);
    dst.write(size - 2 * (n + m), &dir);
    write_counts(dst, n + m, heap_top + heap.len(), garbage);
    true
}

/// The slot at which to split so that both halves hold about half the bytes
/// (records + slots); in 1..n_recs-1, so neither half is empty. Needs n_recs >= 2.
pub fn split_point(page: &[u8]) -> usize {
    let n = n_recs(page);
    assert!(n >= 2, "cannot split a node of {n} records");
    let sys = has_sys(page);
    let sizes: Vec<usize> = (0..n)
        .map(|s| rec_len_at(page, slot_offset(page, s), sys) + 2)
        .collect();
    let total: usize = sizes.iter().sum();
    // The first prefix reaching half, or the one before it if that is closer.
    let mut prefix = 0;
    let mut split = n - 1;
    for (i, &sz) in sizes.iter().enumerate() {
        if 2 * (prefix + sz) >= total {
            let over = 2 * (prefix + sz) - total;
            let under = total - 2 * prefix;
            split = if over <= under { i + 1 } else { i };
            break;
        }
        prefix += sz;
    }
    split.clamp(1, n - 1)
}

/// Hostile-input check for a page read from disk: header fields in range,
/// every slot's record inside the heap, no two records overlapping, keys
/// strictly increasing by slot (ignoring an internal node's slot 0), and
/// garbage equal to the heap bytes no record covers. Returns a message for
/// the first problem. Never panics, whatever the bytes.
pub fn validate(page: &[u8]) -> Result<(), String> {
    let size = page.len();
    if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size) {
        return Err(format!(
            "page size {size} outside {MIN_PAGE_SIZE}..={MAX_PAGE_SIZE}"
        ));
    }
    // From here the header (size >= MIN_PAGE_SIZE > HEAP_START) is in bounds.
    let h = header(page);
    if h.level > MAX_LEVEL {
        return Err(format!("level {} above {MAX_LEVEL}", h.level));
    }
    if page[FLAGS] & !FLAG_SYS_FIELDS != 0 {
        return Err(format!("unknown page flags {:#04x}", page[FLAGS]));
    }
    if page[RESERVED..HEAP_START].iter().any(|&b| b != 0) {
        return Err("reserved header bytes 57..64 not zero".to_string());
    }
    let n = h.n_recs as usize;
    if 2 * n > size - HEAP_START {
        return Err(format!("{n} slots do not fit in a {size}-byte page"));
    }
    let dir_low = size - 2 * n;
    let heap_top = h.heap_top as usize;
    if heap_top < HEAP_START || heap_top > dir_low {
        return Err(format!(
            "heap_top {heap_top} outside {HEAP_START}..={dir_low}"
        ));
    }
    let garbage = h.garbage as usize;
    if garbage > heap_top - HEAP_START {
        return Err(format!("garbage {garbage} larger than the heap"));
    }

    let sys = h.recs_have_sys_fields();
    // Per slot: (offset, length, key range).
    let mut recs: Vec<(usize, usize, usize, usize)> = Vec::with_capacity(n);
    for slot in 0..n {
        // slot_pos(size, slot) >= dir_low >= HEAP_START: in bounds.
        let off = slot_offset(page, slot);
        if off < HEAP_START || off + REC_HEADER > heap_top {
            return Err(format!(
                "slot {slot}: record offset {off} outside the heap {HEAP_START}..{heap_top}"
            ));
        }
        let flags = page[off];
        if flags & !REC_DELETED != 0 {
            return Err(format!("slot {slot}: unknown record flags {flags:#04x}"));
        }
        if h.level > 0 && flags != 0 {
            return Err(format!("slot {slot}: delete-marked node pointer"));
        }
        let key_len = u16_at(page, off + 1) as usize;
        let val_len = u16_at(page, off + 3) as usize;
        if h.level > 0 && val_len != 4 {
            return Err(format!(
                "slot {slot}: node pointer value of {val_len} bytes, not 4"
            ));
        }
        let len = rec_size(key_len, val_len, sys);
        if off + len > heap_top {
            return Err(format!(
                "slot {slot}: record {off}..{} runs past heap_top {heap_top}",
                off + len
            ));
        }
        let key_at = off + REC_HEADER + sys_len(sys);
        recs.push((off, len, key_at, key_at + key_len));
    }

    let mut extents: Vec<(usize, usize, usize)> = recs
        .iter()
        .enumerate()
        .map(|(slot, &(off, len, _, _))| (off, len, slot))
        .collect();
    extents.sort_unstable();
    for w in extents.windows(2) {
        let ((a_off, a_len, a_slot), (b_off, _, b_slot)) = (w[0], w[1]);
        if a_off + a_len > b_off {
            return Err(format!(
                "records of slots {a_slot} (at {a_off}) and {b_slot} (at {b_off}) overlap"
            ));
        }
    }

    let first_compared = if h.level > 0 { 2 } else { 1 };
    for slot in first_compared..n {
        let (_, _, a0, a1) = recs[slot - 1];
        let (_, _, b0, b1) = recs[slot];
        let (Some(a), Some(b)) = (page.get(a0..a1), page.get(b0..b1)) else {
            return Err(format!("slot {slot}: key out of bounds"));
        };
        if a >= b {
            return Err(format!(
                "slot {slot}: key not greater than slot {}'s",
                slot - 1
            ));
        }
    }

    // Records are disjoint and inside the heap, so this cannot underflow.
    let covered: usize = recs.iter().map(|r| r.1).sum();
    let uncovered = heap_top - HEAP_START - covered;
    if uncovered != garbage {
        return Err(format!(
            "garbage {garbage} but {uncovered} heap bytes belong to no record"
        ));
    }
    Ok(())
}
