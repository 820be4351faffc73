//! Tablespace management through mini-transactions: page 0 of every space
//! is its header; pages are allocated from its free list or by growing the
//! space; space 0 (the system space) also holds the engine-wide counters.
//!
//! Space header (page 0), after the common page header:
//!   32..40 magic "MLRCSPCE"   40..44 page size   44..48 space id
//!   48..52 size in pages      52..56 free list head (0 = empty)
//!   56..60 free pages         60..68 next space id (space 0)
//!   68..76 next index id (space 0)
//!   76..78 number of indexes  80..   index directory: (index id u64,
//!   root page u32, flags u32) per index, up to MAX_INDEXES

use crate::error::Error;
use crate::mtr::{Mtr, PageRef};
use crate::page::{self, page_type, PageId, OFF_NEXT};
use crate::pool::LatchMode;

pub const SYSTEM_SPACE: u32 = 0;
const MAGIC: &[u8; 8] = b"MLRCSPCE";
const OFF_MAGIC: usize = 32;
const OFF_PAGE_SIZE: usize = 40;
const OFF_SPACE_ID: usize = 44;
const OFF_SIZE: usize = 48;
const OFF_FREE_HEAD: usize = 52;
const OFF_N_FREE: usize = 56;
const OFF_NEXT_SPACE: usize = 60;
const OFF_NEXT_INDEX: usize = 68;
const OFF_N_INDEXES: usize = 76;
const OFF_INDEXES: usize = 80;
const INDEX_ENTRY: usize = 16;
pub const MAX_INDEXES: usize = 64;

fn header_id(space: u32) -> PageId {
    PageId::new(space, 0)
}

/// Creates a space: its file and its header page.
pub fn create_space(mtr: &mut Mtr<'_>, space: u32) -> Result<(), Error> {
    mtr.create_space_file(space)?;
    let h = mtr.create_page(header_id(space), page_type::SPACE_HEADER)?;
    let ps = mtr.page_size() as u32;
    mtr.write(h, OFF_MAGIC, MAGIC);
    mtr.write(h, OFF_PAGE_SIZE, &ps.to_le_bytes());
    mtr.write(h, OFF_SPACE_ID, &space.to_le_bytes());
    mtr.write(h, OFF_SIZE, &1u32.to_le_bytes());
    if space == SYSTEM_SPACE {
        mtr.write(h, OFF_NEXT_SPACE, &1u64.to_le_bytes());
        mtr.write(h, OFF_NEXT_INDEX, &1u64.to_le_bytes());
    }
    Ok(())
}

fn header(mtr: &mut Mtr<'_>, space: u32) -> Result<PageRef, Error> {
    let h = mtr.get(header_id(space), LatchMode::Exclusive)?;
    let p = mtr.page(h);
    if page::page_type_of(p) != page_type::SPACE_HEADER || &p[OFF_MAGIC..OFF_MAGIC + 8] != MAGIC {
        return Err(Error::Corrupt(format!(
            "space {space}: page 0 is not a space header"
        )));
    }
    Ok(h)
}

/// Allocates a page (reusing a freed one first) and creates it with `ty`.
///
/// Every step that can fail (latching the header and the free page,
/// getting a frame for the new page) comes before the first change, so an
/// error leaves this mtr unchanged.
pub fn allocate_page(mtr: &mut Mtr<'_>, space: u32, ty: u16) -> Result<PageRef, Error> {
    let h = header(mtr, space)?;
    let free_head = page::u32_at(mtr.page(h), OFF_FREE_HEAD);
    if free_head != 0 {
        let f = mtr.get(PageId::new(space, free_head), LatchMode::Exclusive)?;
        let fp = mtr.page(f);
        if page::page_type_of(fp) != page_type::FREE {
            return Err(Error::Corrupt(format!(
                "space {space}: free list page {free_head} is in use"
            )));
        }
        let next = page::u32_at(fp, OFF_NEXT);
        let n_free = page::u32_at(mtr.page(h), OFF_N_FREE);
        let p = mtr.create_page(PageId::new(space, free_head), ty)?;
        mtr.write(h, OFF_FREE_HEAD, &next.to_le_bytes());
        mtr.write(h, OFF_N_FREE, &n_free.saturating_sub(1).to_le_bytes());
        Ok(p)
    } else {
        let size = page::u32_at(mtr.page(h), OFF_SIZE);
        if size == u32::MAX {
            return Err(Error::Full(format!(
                "space {space} has no page numbers left"
            )));
        }
        let p = mtr.create_page(PageId::new(space, size), ty)?;
        mtr.write(h, OFF_SIZE, &(size + 1).to_le_bytes());
        Ok(p)
    }
}

/// Returns a page to its space's free list.
pub fn free_page(mtr: &mut Mtr<'_>, id: PageId) -> Result<(), Error> {
    assert_ne!(id.page, 0, "the space header is never freed");
    let h = header(mtr, id.space)?;
    let head = page::u32_at(mtr.page(h), OFF_FREE_HEAD);
    let n_free = page::u32_at(mtr.page(h), OFF_N_FREE);
    let p = mtr.create_page(id, page_type::FREE)?;
    mtr.write(p, OFF_NEXT, &head.to_le_bytes());
    mtr.write(h, OFF_FREE_HEAD, &id.page.to_le_bytes());
    mtr.write(h, OFF_N_FREE, &(n_free + 1).to_le_bytes());
    Ok(())
}

/// (size in pages, free pages) of a space.
pub fn space_size(mtr: &mut Mtr<'_>, space: u32) -> Result<(u32, u32), Error> {
    let h = header(mtr, space)?;
    let p = mtr.page(h);
    Ok((page::u32_at(p, OFF_SIZE), page::u32_at(p, OFF_N_FREE)))
}

fn bump(mtr: &mut Mtr<'_>, off: usize) -> Result<u64, Error> {
    let h = header(mtr, SYSTEM_SPACE)?;
    let v = page::u64_at(mtr.page(h), off);
    mtr.write(h, off, &(v + 1).to_le_bytes());
    Ok(v)
}

/// A new space id (from the system space's counter).
pub fn next_space_id(mtr: &mut Mtr<'_>) -> Result<u32, Error> {
    let v = bump(mtr, OFF_NEXT_SPACE)?;
    u32::try_from(v).map_err(|_| Error::Full("space ids exhausted".into()))
}

/// A new index id.
pub fn next_index_id(mtr: &mut Mtr<'_>) -> Result<u64, Error> {
    bump(mtr, OFF_NEXT_INDEX)
}

/// Records an index (its id and fixed root page) in its space's header, so
/// the integrity check can find every index of a data directory.
pub fn register_index(
    mtr: &mut Mtr<'_>,
    space: u32,
    index_id: u64,
    root: u32,
) -> Result<(), Error> {
    let h = header(mtr, space)?;
    let n = page::u16_at(mtr.page(h), OFF_N_INDEXES) as usize;
    if n >= MAX_INDEXES {
        return Err(Error::Full(format!(
            "space {space} already has {MAX_INDEXES} indexes"
        )));
    }
    let mut e = [0u8; INDEX_ENTRY];
    e[0..8].copy_from_slice(&index_id.to_le_bytes());
    e[8..12].copy_from_slice(&root.to_le_bytes());
    mtr.write(h, OFF_INDEXES + n * INDEX_ENTRY, &e);
    mtr.write(h, OFF_N_INDEXES, &((n + 1) as u16).to_le_bytes());
    Ok(())
}

/// (index id, root page) of every index registered in a space.
pub fn indexes(mtr: &mut Mtr<'_>, space: u32) -> Result<Vec<(u64, u32)>, Error> {
    let h = header(mtr, space)?;
    let p = mtr.page(h);
    let n = (page::u16_at(p, OFF_N_INDEXES) as usize).min(MAX_INDEXES);
    Ok((0..n)
        .map(|i| {
            let at = OFF_INDEXES + i * INDEX_ENTRY;
            (page::u64_at(p, at), page::u32_at(p, at + 8))
        })
        .collect())
}

/// Space ids handed out so far are `0..space_id_limit()`.
pub fn space_id_limit(mtr: &mut Mtr<'_>) -> Result<u32, Error> {
    let h = header(mtr, SYSTEM_SPACE)?;
    Ok(page::u64_at(mtr.page(h), OFF_NEXT_SPACE).min(u32::MAX as u64) as u32)
}

/// Ids of the spaces whose files exist, ascending: what a walk over all
/// spaces should visit, rather than every id below `space_id_limit` (a
/// damaged counter could name billions).
pub fn existing_spaces(mtr: &Mtr<'_>) -> Result<Vec<u32>, Error> {
    mtr.space_file_ids()
}

/// Whether the space's file exists.
pub fn space_exists(mtr: &Mtr<'_>, space: u32) -> bool {
    mtr.space_file_exists(space)
}

/// Shrinks a space to `new_size` pages. Only for a space whose pages from
/// `new_size` on are all free (an undo space after purge freed every log):
/// the free list is dropped with them. The file is cut separately
/// (`PageStore::truncate_space_file`) once this change is durable.
pub fn truncate_free_tail(mtr: &mut Mtr<'_>, space: u32, new_size: u32) -> Result<(), Error> {
    let h = header(mtr, space)?;
    let p = mtr.page(h);
    let (size, n_free) = (page::u32_at(p, OFF_SIZE), page::u32_at(p, OFF_N_FREE));
    assert!(
        new_size >= 1 && new_size <= size,
        "truncation must shrink the space"
    );
    if size - new_size != n_free {
        return Err(Error::Corrupt(format!(
            "space {space}: {n_free} free pages, but {} pages past the new end",
            size - new_size
        )));
    }
    mtr.write(h, OFF_SIZE, &new_size.to_le_bytes());
    mtr.write(h, OFF_FREE_HEAD, &0u32.to_le_bytes());
    mtr.write(h, OFF_N_FREE, &0u32.to_le_bytes());
    Ok(())
}
