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
pub mod format;
pub mod link_buf;
mod log;
pub mod recovery;
pub mod spin;
mod sync;

pub use config::{Durability, LogConfig, SpinConfig, WriterThreads};
pub use log::{Log, LsnRange};
pub use recovery::{Record, RecoveryReport};

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogError {
    /// An I/O error; the log has stopped (see `Log::failure`).
    Io(String),
    /// An earlier I/O error stopped the log.
    Failed(String),
    /// The file is not a valid redo log.
    Corrupt(String),
    /// A setting is invalid.
    Config(String),
    /// The applier refused a record during recovery.
    Apply(String),
    /// A record is larger than one append may be.
    TooLarge { len: usize, max: usize },
    /// The log is shutting down.
    ShutDown,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(m) => write!(f, "redo log I/O error: {m}"),
            Self::Failed(m) => write!(f, "redo log stopped after an earlier error: {m}"),
            Self::Corrupt(m) => write!(f, "redo log corrupt: {m}"),
            Self::Config(m) => write!(f, "redo log setting: {m}"),
            Self::Apply(m) => write!(f, "redo recovery: applying a record failed: {m}"),
            Self::TooLarge { len, max } => {
                write!(f, "redo record of {len} bytes exceeds the limit of {max}")
            }
            Self::ShutDown => write!(f, "redo log is shut down"),
        }
    }
}

impl std::error::Error for LogError {}
