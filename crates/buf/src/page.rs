//! The common page format: every page of every tablespace starts with this
//! 32-byte header (docs/design.md, "Pages").
//!
//!   0..4   crc32c of bytes 4..page_size (written at flush, checked at read)
//!   4..8   space id
//!   8..12  page number
//!   12..20 page LSN: end LSN of the last mini-transaction that changed it
//!   20..22 page type
//!   22..24 format version
//!   24..28 next page (free list link; other uses by type)
//!   28..32 zero
//!
//! An all-zero page is a valid fresh page (LSN 0): a file extended but never
//! written reads as zeros.

use std::fmt;

pub const PAGE_HEADER: usize = 32;
pub const PAGE_FORMAT: u16 = 1;
pub const MIN_PAGE_SIZE: usize = 4096;
pub const MAX_PAGE_SIZE: usize = 32768;

pub const OFF_CHECKSUM: usize = 0;
pub const OFF_SPACE: usize = 4;
pub const OFF_PAGE_NO: usize = 8;
pub const OFF_LSN: usize = 12;
pub const OFF_TYPE: usize = 20;
pub const OFF_FORMAT: usize = 22;
pub const OFF_NEXT: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId {
    pub space: u32,
    pub page: u32,
}

impl PageId {
    pub const fn new(space: u32, page: u32) -> Self {
        Self { space, page }
    }
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.space, self.page)
    }
}

/// Page types.
pub mod page_type {
    pub const FRESH: u16 = 0;
    pub const SPACE_HEADER: u16 = 1;
    pub const FREE: u16 = 2;
    pub const INDEX: u16 = 3;
    pub const UNDO: u16 = 4;
    /// A page the layer above owns and formats itself.
    pub const OTHER: u16 = 5;
}

pub fn u16_at(p: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([p[at], p[at + 1]])
}
pub fn u32_at(p: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(p[at..at + 4].try_into().expect("4 bytes"))
}
pub fn u64_at(p: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(p[at..at + 8].try_into().expect("8 bytes"))
}

pub fn page_lsn(p: &[u8]) -> u64 {
    u64_at(p, OFF_LSN)
}
pub fn page_type_of(p: &[u8]) -> u16 {
    u16_at(p, OFF_TYPE)
}

pub fn checksum(p: &[u8]) -> u32 {
    crc32c::crc32c(&p[4..])
}

/// Stamps the checksum into a copy about to be written.
pub fn seal(p: &mut [u8]) {
    let c = checksum(p);
    p[OFF_CHECKSUM..OFF_CHECKSUM + 4].copy_from_slice(&c.to_le_bytes());
}

/// Checks a page read from disk: checksum, and that it is the page asked
/// for. All-zero pages are fresh and valid.
pub fn verify(p: &[u8], id: PageId) -> Result<(), String> {
    if p.iter().all(|&b| b == 0) {
        return Ok(());
    }
    if checksum(p) != u32_at(p, OFF_CHECKSUM) {
        return Err(format!("page {id}: checksum mismatch (torn or corrupt)"));
    }
    let (space, page) = (u32_at(p, OFF_SPACE), u32_at(p, OFF_PAGE_NO));
    if (space, page) != (id.space, id.page) {
        return Err(format!("page {id}: holds page {space}:{page}"));
    }
    let format = u16_at(p, OFF_FORMAT);
    if format != PAGE_FORMAT {
        return Err(format!(
            "page {id}: format {format}, this build reads {PAGE_FORMAT}"
        ));
    }
    Ok(())
}

pub fn valid_page_size(size: usize) -> bool {
    size.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size)
}

/// Zeroes a page and writes its header (redo op INIT and new pages).
pub fn init_header(p: &mut [u8], id: PageId, page_type: u16) {
    p.fill(0);
    p[OFF_SPACE..OFF_SPACE + 4].copy_from_slice(&id.space.to_le_bytes());
    p[OFF_PAGE_NO..OFF_PAGE_NO + 4].copy_from_slice(&id.page.to_le_bytes());
    p[OFF_TYPE..OFF_TYPE + 2].copy_from_slice(&page_type.to_le_bytes());
    p[OFF_FORMAT..OFF_FORMAT + 2].copy_from_slice(&PAGE_FORMAT.to_le_bytes());
}

pub fn set_page_lsn(p: &mut [u8], lsn: u64) {
    p[OFF_LSN..OFF_LSN + 8].copy_from_slice(&lsn.to_le_bytes());
}
