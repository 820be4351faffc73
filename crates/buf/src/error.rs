//! The error type of pages, files and the buffer pool.

use millrace_redo::LogError;
use std::fmt;

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
