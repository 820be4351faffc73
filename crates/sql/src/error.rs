//! The errors of the SQL layer: a statement's [`SqlError`] (a MySQL error
//! code by name, from `millrace_errcode`, and its message) and the codecs'
//! [`CodecError`]; and the constructors of errors every stage reports.

use millrace_errcode::{ErrorCode, ER_NOT_SUPPORTED_YET, ER_PARSE_ERROR, ER_TABLE_CORRUPT};
use millrace_trx::TrxError;
use std::fmt;

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

/// An engine error as the statement reports it (the engine knows its MySQL code).
pub(crate) fn engine_err(e: TrxError) -> SqlError {
    SqlError::new(e.mysql_code(), e.to_string())
}

/// A stored row (or its key segments) that does not decode: 1877.
pub(crate) fn corrupt(e: impl fmt::Display) -> SqlError {
    SqlError::new(ER_TABLE_CORRUPT, format!("row data damaged: {e}"))
}

pub fn err_parse(msg: impl fmt::Display) -> SqlError {
    SqlError::new(
        ER_PARSE_ERROR,
        format!("You have an error in your SQL syntax: {msg}"),
    )
}

pub fn unsupported(what: impl fmt::Display) -> SqlError {
    if on_deep_stack() {
        // Quoting a syntax tree recurses over it, with large frames: a deep
        // statement's error names no part of it.
        return SqlError::new(
            ER_NOT_SUPPORTED_YET,
            "This version of millrace doesn't yet support a construct of this (deeply nested) statement",
        );
    }
    SqlError::new(
        ER_NOT_SUPPORTED_YET,
        format!("This version of millrace doesn't yet support '{what}'"),
    )
}

thread_local! {
    /// This thread runs a statement whose tree may be deep (see
    /// `parse::depth`): errors do not quote parts of it.
    static DEEP_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as running deep statements (for its whole life).
pub(crate) fn set_deep_stack() {
    DEEP_STACK.with(|d| d.set(true));
}

pub(crate) fn on_deep_stack() -> bool {
    DEEP_STACK.with(|d| d.get())
}
