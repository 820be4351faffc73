//! The redo log's error type.

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
