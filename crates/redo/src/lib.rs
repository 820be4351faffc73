//! millrace-redo: the redo log and the commit pipeline.
//!
//! Owns: LSNs, the log buffer, the recent_written and recent_closed link
//! buffers, the log writer and flusher (dedicated threads or a group commit
//! leader), commit waits that spin only with real CPU headroom, durability
//! levels, the circular log file with its checkpoint headers, and the
//! recovery scan.
//! Must not know about: pages, B+trees, transactions or SQL. A record's
//! payload is opaque bytes; the layer above gives it meaning and applies it.
//! Depends on: millrace-io (files), millrace-sys (CPU budget), millrace-metrics.

mod buffer;
pub mod config;
mod error;
pub mod format;
pub mod link_buf;
mod log;
pub mod recovery;
pub mod spin;
mod sync;

pub use config::{Durability, LogConfig, SpinConfig, WriterThreads};
pub use error::LogError;
pub use log::{Log, LsnRange};
pub use recovery::{Record, RecoveryReport};
