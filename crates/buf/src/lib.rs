//! millrace-buf: pages and the buffer pool.
//!
//! Owns: the page format and checksums, tablespace files and page
//! allocation, the buffer pool (page hash, page latches, LRU with midpoint
//! insertion, free list, flush list), mini-transactions and their redo ops,
//! the doublewrite area, the page cleaner and fuzzy checkpoints, and redo
//! apply at recovery.
//! Must not know about: what is inside an index or undo page (B+tree
//! records, rows, transactions), or SQL. Layers above change pages only
//! through `Mtr`.
//! Depends on: millrace-redo (the log), millrace-io, millrace-sys, millrace-metrics.

pub mod files;
pub mod latch;
pub mod mtr;
pub mod ops;
mod order;
pub mod page;
pub mod pool;
pub mod space;
pub mod store;

pub use mtr::{Mtr, PageRef};
pub use page::{page_type, PageId};
pub use pool::{BufferPool, LatchMode};
pub use store::{PageStore, StoreConfig};

use millrace_redo::LogError;
use std::fmt;

/// Settings of the buffer pool.
#[derive(Debug, Clone)]
pub struct BufConfig {
    /// Page size, fixed when the store is created (4, 8, 16 or 32 KiB).
    pub page_size: usize,
    pub pool_bytes: usize,
    /// Share of the LRU list that is the old sublist (InnoDB: 37).
    pub lru_old_pct: usize,
    /// A page must stay this long in the old sublist before a second access
    /// makes it young: a scan touches each page in a burst.
    pub old_blocks_time_ms: u64,
    pub doublewrite_pages: usize,
    pub flush_batch_pages: usize,
    /// How long a fetch waits for a frame while every frame is pinned
    /// before it fails with `PoolExhausted`.
    pub frame_wait_timeout_ms: u64,
}

impl Default for BufConfig {
    fn default() -> Self {
        Self {
            page_size: 16384,
            pool_bytes: 128 << 20,
            lru_old_pct: 37,
            old_blocks_time_ms: 1000,
            doublewrite_pages: 64,
            flush_batch_pages: 64,
            frame_wait_timeout_ms: 10_000,
        }
    }
}

impl BufConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !page::valid_page_size(self.page_size) {
            return Err(format!(
                "page size {} must be 4096, 8192, 16384 or 32768",
                self.page_size
            ));
        }
        if self.pool_bytes / self.page_size < 16 {
            return Err("the buffer pool must hold at least 16 pages".into());
        }
        if self.doublewrite_pages == 0 || self.flush_batch_pages == 0 {
            return Err("doublewrite and flush batch sizes must be positive".into());
        }
        if !(5..=95).contains(&self.lru_old_pct) {
            return Err("lru_old_pct must be within 5..=95".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Io(String),
    /// A page or file failed its checks (MySQL's "data is corrupted").
    Corrupt(String),
    Log(LogError),
    /// No frame could be freed in time.
    PoolExhausted(String),
    Config(String),
    /// A space ran out of pages, ids or index slots.
    Full(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(m) => write!(f, "I/O error: {m}"),
            Self::Corrupt(m) => write!(f, "data corrupted: {m}"),
            Self::Log(e) => write!(f, "{e}"),
            Self::PoolExhausted(m) => write!(f, "buffer pool exhausted: {m}"),
            Self::Config(m) => write!(f, "setting: {m}"),
            Self::Full(m) => write!(f, "full: {m}"),
        }
    }
}

impl std::error::Error for Error {}
