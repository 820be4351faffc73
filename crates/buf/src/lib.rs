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

mod config;
mod error;
pub mod files;
pub mod latch;
pub mod mtr;
pub mod ops;
mod order;
pub mod page;
pub mod pool;
pub mod space;
pub mod store;

pub use config::BufConfig;
pub use error::Error;
pub use mtr::{Mtr, PageRef, PageSlice};
pub use page::{page_type, PageId};
pub use pool::{BufferPool, LatchMode};
pub use store::{PageStore, StoreConfig};
