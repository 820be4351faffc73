//! Settings of the buffer pool.

use crate::page;

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
