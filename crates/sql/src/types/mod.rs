//! Column types and values: MySQL-like coercion of a value to a column type,
//! the text form of values (as the text protocol sends them) and the order
//! of values for ORDER BY, MIN and MAX.
//!
//! Decisions worth knowing:
//! - Strings compare bytewise (binary collation); no other collation exists yet.
//! - DECIMAL is an `i128` unscaled value with a scale, so precision is limited
//!   to 38 digits (MySQL allows 65); the scale is at most 30, as in MySQL.
//! - NaN and the infinities are not SQL values: `coerce` rejects NaN as
//!   invalid (1366) and an infinity as out of range (1264).
//! - `-0.0` is coerced to `0.0` for DOUBLE columns, and `compare` treats them
//!   as equal; the key encoding writes `-0.0` as `0.0`.
//! - DATETIME and TIMESTAMP have no fractional seconds (fsp 0): `coerce`
//!   rounds microseconds half up into the seconds, carrying into the date.
//!   TIMESTAMP is stored as given (no time zone conversion; the session time
//!   zone is UTC) and must lie in '1970-01-01 00:00:01'..='2038-01-19 03:14:07'.
//! - Zero dates ('0000-00-00') and invalid dates ('2023-02-29') are rejected
//!   (1292), as in MySQL's default strict mode.
//! - Rounding to an integer or a decimal scale is half away from zero.
//!
//! Files: `column` (column types, [`ValueError`]), `value` (values, their text
//! form), `datetime`, `coerce` (conversion to a column type, numbers in
//! expressions), `compare` (the order of values and MySQL's comparison of
//! mixed values), `result` (result column types).

mod coerce;
mod column;
mod compare;
mod datetime;
mod result;
mod value;

pub use coerce::{as_double, truth};
pub use column::{
    ColumnType, ValueError, MAX_DECIMAL_PRECISION, MAX_DECIMAL_SCALE, MAX_TEXT_BYTES,
};
pub use compare::{compare, compare_values};
pub use datetime::DateTime;
pub use result::{OutColumn, ResultKind};
pub use value::Value;
pub(crate) use value::{scalar, Scalar};
