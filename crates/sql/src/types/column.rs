//! Column types: their parameters and ranges, and why a value does not fit
//! one ([`ValueError`], with its MySQL error code).

use millrace_errcode::{self as errcode, ErrorCode};
use std::fmt;

/// The largest DECIMAL precision (digits in all) supported.
pub const MAX_DECIMAL_PRECISION: u8 = 38;
/// The largest DECIMAL scale (digits after the point), as in MySQL.
pub const MAX_DECIMAL_SCALE: u8 = 30;
/// The largest TEXT or BLOB value in bytes, as in MySQL.
pub const MAX_TEXT_BYTES: usize = 65_535;

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    TinyInt {
        unsigned: bool,
    },
    SmallInt {
        unsigned: bool,
    },
    Int {
        unsigned: bool,
    },
    BigInt {
        unsigned: bool,
    },
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// CHAR(n): at most n characters; trailing spaces are removed (as MySQL
    /// returns CHAR values without PAD_CHAR_TO_FULL_LENGTH).
    Char(u32),
    /// VARCHAR(n): at most n characters.
    VarChar(u32),
    /// TEXT: valid UTF-8, at most 65535 bytes.
    Text,
    /// BLOB: any bytes, at most 65535.
    Blob,
    DateTime,
    Timestamp,
}

impl ColumnType {
    /// Checks the type's parameters (DECIMAL precision and scale).
    pub fn validate(&self) -> Result<(), ValueError> {
        if let ColumnType::Decimal { precision, scale } = *self {
            if scale > MAX_DECIMAL_SCALE
                || precision == 0
                || precision > MAX_DECIMAL_PRECISION
                || scale > precision
            {
                return Err(ValueError::BadColumnType { target: *self });
            }
        }
        Ok(())
    }

    /// The inclusive value range of an integer type.
    pub fn int_range(&self) -> Option<(i128, i128)> {
        let (bits, unsigned) = match *self {
            ColumnType::TinyInt { unsigned } => (8, unsigned),
            ColumnType::SmallInt { unsigned } => (16, unsigned),
            ColumnType::Int { unsigned } => (32, unsigned),
            ColumnType::BigInt { unsigned } => (64, unsigned),
            _ => return None,
        };
        Some(if unsigned {
            (0, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        })
    }

    pub fn is_unsigned(&self) -> bool {
        matches!(
            self,
            ColumnType::TinyInt { unsigned: true }
                | ColumnType::SmallInt { unsigned: true }
                | ColumnType::Int { unsigned: true }
                | ColumnType::BigInt { unsigned: true }
        )
    }

    /// CHAR, VARCHAR, TEXT or BLOB: values are `Value::Bytes`.
    pub fn is_bytes(&self) -> bool {
        matches!(
            self,
            ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::Text | ColumnType::Blob
        )
    }

    pub(crate) fn is_temporal(&self) -> bool {
        matches!(self, ColumnType::DateTime | ColumnType::Timestamp)
    }
}

/// Why a value cannot be coerced to a column type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueError {
    /// MySQL 1264 (ER_WARN_DATA_OUT_OF_RANGE).
    OutOfRange { target: ColumnType, value: String },
    /// MySQL 1406 (ER_DATA_TOO_LONG); `len` is in characters for CHAR and
    /// VARCHAR, in bytes for TEXT and BLOB.
    TooLong { target: ColumnType, len: usize },
    /// MySQL 1292 (ER_TRUNCATED_WRONG_VALUE) for DATETIME and TIMESTAMP,
    /// 1366 (ER_TRUNCATED_WRONG_VALUE_FOR_FIELD) for the other types.
    Invalid { target: ColumnType, value: String },
    /// The column type itself is not supported: DECIMAL with a scale over 30
    /// (1425), a precision of 0 or over 38 (1426) or a scale over the
    /// precision (1427).
    BadColumnType { target: ColumnType },
}

impl ValueError {
    pub fn mysql_code(&self) -> ErrorCode {
        match self {
            ValueError::OutOfRange { .. } => errcode::ER_WARN_DATA_OUT_OF_RANGE,
            ValueError::TooLong { .. } => errcode::ER_DATA_TOO_LONG,
            ValueError::Invalid { target, .. } => {
                if target.is_temporal() {
                    errcode::ER_TRUNCATED_WRONG_VALUE
                } else {
                    errcode::ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
                }
            }
            ValueError::BadColumnType { target } => match *target {
                ColumnType::Decimal { scale, .. } if scale > MAX_DECIMAL_SCALE => {
                    errcode::ER_TOO_BIG_SCALE
                }
                ColumnType::Decimal {
                    precision, scale, ..
                } if scale > precision && precision != 0 && precision <= MAX_DECIMAL_PRECISION => {
                    errcode::ER_M_BIGGER_THAN_D
                }
                _ => errcode::ER_TOO_BIG_PRECISION,
            },
        }
    }
}

fn type_word(t: &ColumnType) -> &'static str {
    match t {
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => "integer",
        ColumnType::Double => "double",
        ColumnType::Decimal { .. } => "decimal",
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::Text | ColumnType::Blob => {
            "string"
        }
        ColumnType::DateTime | ColumnType::Timestamp => "datetime",
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::OutOfRange { value, .. } => {
                write!(f, "Out of range value '{value}' for column")
            }
            ValueError::TooLong { .. } => write!(f, "Data too long for column"),
            ValueError::Invalid { target, value } => {
                write!(f, "Incorrect {} value: '{value}'", type_word(target))
            }
            ValueError::BadColumnType { target } => write!(f, "Unsupported column type {target:?}"),
        }
    }
}

impl std::error::Error for ValueError {}
