//! millrace-sql: the SQL layer.
//!
//! Owns: the catalog (databases, tables, columns, indexes, AUTO_INCREMENT
//! counters, kept in an engine table and changed transactionally), parsing
//! (sqlparser, MySQL dialect), planning (access paths, plan caches per
//! prepared statement and per text statement shape) and execution of SQL
//! statements against the engine's transactions; the column types and
//! values (`types`), the memcomparable key encoding (`keycode`), the
//! stored row format (`row`) and long values stored out of line in a
//! table's toast table (`toast`).
//! Must not know about: file I/O, pages, the buffer pool or the B+tree
//! (it sees the engine's tables as keys and values in transactions), or
//! the MySQL wire protocol (sessions return values and MySQL error codes;
//! the server encodes them).
//! Depends on: millrace-trx (transactions), millrace-redo (the durability
//! setting), millrace-io (its bounded byte reader only), millrace-metrics,
//! sqlparser, crc32c (checksums of values stored out of line).
//!
//! Decoders treat their input as hostile: truncated or malformed bytes are a
//! [`CodecError`] or a [`SqlError`], never a panic.

pub mod catalog;
pub mod expr;
pub mod keycode;
pub mod plan;
pub mod row;
pub mod session;
pub mod shape;
mod toast;
pub mod types;
pub mod vtab;

use std::fmt;

pub use millrace_errcode::ErrorCode;

pub use keycode::{decode_key, decode_key_prefix, encode_key, try_encode_key};
pub use row::{
    decode_column, decode_row, decode_row_external, encode_row, encode_row_external, ExternalRef,
    ExternalRefs,
};
pub use session::{ConnInfo, Output, Server, Session, SERVER_VERSION, VERSION_COMMENT};
pub use types::{compare, ColumnType, DateTime, Value, ValueError};

/// A statement's error: a MySQL error code (the protocol side adds the
/// SQLSTATE MySQL uses for it) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    pub code: ErrorCode,
    pub message: String,
}

impl SqlError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> SqlError {
        SqlError {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERROR {}: {}", self.code, self.message)
    }
}

/// Errors of the key and row codecs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// The input ended inside an encoding; `offset` is where more bytes were needed.
    Truncated { offset: usize },
    /// The bytes at `offset` are not a valid (canonical) encoding.
    Malformed { offset: usize, what: &'static str },
    /// Bytes are left after the last column.
    TrailingBytes { offset: usize },
    /// An encoder got a value that is not a stored value of its column's type
    /// (it was not coerced with `Value::coerce`, or it is NaN).
    TypeMismatch { column: usize },
    /// The number of values (or the column count stored in a row) does not
    /// match the number of column types.
    ColumnCount { expected: usize, got: usize },
    /// `decode_column` was asked for a column the row does not have.
    NoSuchColumn { index: usize, columns: usize },
    /// The column's value is stored out of line (`decode_row` and
    /// `decode_column` do not fetch it; see `decode_row_external`).
    OutOfLine { column: usize },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Truncated { offset } => write!(f, "encoding truncated at byte {offset}"),
            CodecError::Malformed { offset, what } => {
                write!(f, "malformed encoding at byte {offset}: {what}")
            }
            CodecError::TrailingBytes { offset } => {
                write!(f, "trailing bytes after the last column at byte {offset}")
            }
            CodecError::TypeMismatch { column } => {
                write!(f, "value of column {column} does not fit its column type")
            }
            CodecError::ColumnCount { expected, got } => {
                write!(f, "expected {expected} columns, got {got}")
            }
            CodecError::NoSuchColumn { index, columns } => {
                write!(f, "no column {index} in a row of {columns} columns")
            }
            CodecError::OutOfLine { column } => {
                write!(f, "column {column} is stored out of line")
            }
        }
    }
}

impl std::error::Error for CodecError {}
