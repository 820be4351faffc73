//! millrace-sql: the SQL layer.
//!
//! Will own: the catalog, parsing, planning and execution of SQL statements.
//! Owns for now: the column types and values (`types`: MySQL-like coercion,
//! the text form of values, the ORDER BY comparison), the memcomparable key
//! encoding of index keys (`keycode`: the byte order of an encoding is the
//! order of the values it encodes) and the stored row format of a table, the
//! value of its clustered index (`row`).
//! Must not know about: file I/O, pages, the buffer pool or the B+tree
//! internals (keys and rows leave this crate as byte strings), or the MySQL
//! wire protocol (it gets values as text from `Value::to_text`).
//! Depends on: nothing but std.
//!
//! Decoders treat their input as hostile: truncated or malformed bytes are a
//! [`CodecError`], never a panic.

pub mod keycode;
pub mod row;
pub mod types;

use std::fmt;

pub use keycode::{decode_key, decode_key_prefix, encode_key, try_encode_key};
pub use row::{decode_column, decode_row, encode_row};
pub use types::{compare, ColumnType, Value, ValueError};

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
        }
    }
}

impl std::error::Error for CodecError {}
