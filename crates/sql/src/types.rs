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

use millrace_errcode::{self as errcode, ErrorCode};
use std::cmp::Ordering;
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

    fn is_temporal(&self) -> bool {
        matches!(self, ColumnType::DateTime | ColumnType::Timestamp)
    }
}

/// A SQL value. Values stored in a column of a given type are produced by
/// [`Value::coerce`]: signed integer columns hold `Int`, unsigned ones `UInt`,
/// DOUBLE `Double`, DECIMAL(p,s) `Decimal` with scale s, the string types
/// `Bytes` and DATETIME/TIMESTAMP `DateTime`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Double(f64),
    /// `unscaled / 10^scale`.
    Decimal {
        unscaled: i128,
        scale: u8,
    },
    /// CHAR/VARCHAR/TEXT (UTF-8) and BLOB (any bytes).
    Bytes(Vec<u8>),
    DateTime(DateTime),
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

// ---------------------------------------------------------------------------
// Dates

pub(crate) fn is_leap(year: u16) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub(crate) fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// A DATETIME or TIMESTAMP value. Stored values are calendar-valid (see
/// [`DateTime::is_valid`]) with `micro == 0` (fsp 0).
///
/// The fields are declared from the most significant to the least, so the
/// derived `Ord` (which compares fields in declaration order, like a tuple)
/// is the chronological order; for valid datetimes it is also the order of
/// the packed form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micro: u32,
}

impl DateTime {
    /// A calendar-valid datetime: years 1..=9999, no zero dates.
    pub(crate) fn is_valid(&self) -> bool {
        (1..=9999).contains(&self.year)
            && (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= days_in_month(self.year, self.month)
            && self.hour < 24
            && self.minute < 60
            && self.second < 60
            && self.micro < 1_000_000
    }

    /// The packed form: year(14) month(4) day(5) hour(5) minute(6) second(6)
    /// micro(20) from the most significant bit down; 60 bits, so its order as
    /// an integer is the order of the datetimes.
    pub(crate) fn pack(&self) -> u64 {
        ((self.year as u64) << 46)
            | ((self.month as u64) << 42)
            | ((self.day as u64) << 37)
            | ((self.hour as u64) << 32)
            | ((self.minute as u64) << 26)
            | ((self.second as u64) << 20)
            | self.micro as u64
    }

    /// The inverse of [`DateTime::pack`]; `None` for bits outside the 60
    /// used. The result is not validated.
    pub(crate) fn unpack(p: u64) -> Option<DateTime> {
        if p >> 60 != 0 {
            return None;
        }
        Some(DateTime {
            year: (p >> 46) as u16,
            month: ((p >> 42) & 0xF) as u8,
            day: ((p >> 37) & 0x1F) as u8,
            hour: ((p >> 32) & 0x1F) as u8,
            minute: ((p >> 26) & 0x3F) as u8,
            second: ((p >> 20) & 0x3F) as u8,
            micro: (p & 0xF_FFFF) as u32,
        })
    }

    /// Parses 'YYYY-MM-DD[( |T)HH:MM:SS[.f+]]' (1 or 2 digit month, day and
    /// time fields); fractional digits beyond 6 are ignored. The result is
    /// not validated.
    fn parse(s: &[u8]) -> Option<DateTime> {
        let s = s.trim_ascii();
        let mut i = 0;
        let num = |min: usize, max: usize, i: &mut usize| -> Option<u32> {
            let start = *i;
            let mut v: u32 = 0;
            while *i < s.len() && s[*i].is_ascii_digit() && *i - start < max {
                v = v * 10 + (s[*i] - b'0') as u32;
                *i += 1;
            }
            (*i - start >= min).then_some(v)
        };
        let expect = |c: u8, i: &mut usize| -> Option<()> {
            if *i < s.len() && s[*i] == c {
                *i += 1;
                Some(())
            } else {
                None
            }
        };
        let year = num(4, 4, &mut i)?;
        expect(b'-', &mut i)?;
        let month = num(1, 2, &mut i)?;
        expect(b'-', &mut i)?;
        let day = num(1, 2, &mut i)?;
        let (mut hour, mut minute, mut second, mut micro) = (0, 0, 0, 0);
        if i < s.len() {
            if s[i] != b' ' && s[i] != b'T' {
                return None;
            }
            i += 1;
            hour = num(1, 2, &mut i)?;
            expect(b':', &mut i)?;
            minute = num(1, 2, &mut i)?;
            expect(b':', &mut i)?;
            second = num(1, 2, &mut i)?;
            if i < s.len() {
                expect(b'.', &mut i)?;
                let start = i;
                while i < s.len() && s[i].is_ascii_digit() {
                    if i - start < 6 {
                        micro = micro * 10 + (s[i] - b'0') as u32;
                    }
                    i += 1;
                }
                if i == start {
                    return None;
                }
                for _ in (i - start)..6 {
                    micro *= 10;
                }
            }
        }
        if i != s.len() || hour > 255 || minute > 255 || second > 255 || month > 255 || day > 255 {
            return None;
        }
        Some(DateTime {
            year: year as u16,
            month: month as u8,
            day: day as u8,
            hour: hour as u8,
            minute: minute as u8,
            second: second as u8,
            micro,
        })
    }

    /// Rounds a valid datetime to whole seconds (fsp 0), carrying into the
    /// date; `None` past 9999. Each carry can only follow the one before it,
    /// since every field of a valid datetime is within its range.
    fn round_to_second(mut self) -> Option<DateTime> {
        debug_assert!(self.is_valid());
        if self.micro >= 500_000 {
            self.second += 1;
            if self.second == 60 {
                self.second = 0;
                self.minute += 1;
            }
            if self.minute == 60 {
                self.minute = 0;
                self.hour += 1;
            }
            if self.hour == 24 {
                self.hour = 0;
                self.day += 1;
            }
            if self.day > days_in_month(self.year, self.month) {
                self.day = 1;
                self.month += 1;
            }
            if self.month == 13 {
                self.month = 1;
                self.year += 1;
            }
            if self.year > 9999 {
                return None;
            }
        }
        self.micro = 0;
        Some(self)
    }
}

/// The TIMESTAMP range: '1970-01-01 00:00:01'..='2038-01-19 03:14:07'.
const TIMESTAMP_MIN: DateTime = DateTime {
    year: 1970,
    month: 1,
    day: 1,
    hour: 0,
    minute: 0,
    second: 1,
    micro: 0,
};
const TIMESTAMP_MAX: DateTime = DateTime {
    year: 2038,
    month: 1,
    day: 19,
    hour: 3,
    minute: 14,
    second: 7,
    micro: 0,
};

/// 'YYYY-MM-DD HH:MM:SS', with '.ffffff' only when microseconds are not 0.
impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            micro,
        } = *self;
        write!(
            f,
            "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}"
        )?;
        if micro != 0 {
            write!(f, ".{micro:06}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Stored values: what the codecs accept

/// A value reduced to what the codecs write, after checking that it is a
/// stored value of its column type.
pub(crate) enum Scalar<'a> {
    I(i64),
    U(u64),
    F(f64),
    /// Unscaled, at the column's scale.
    D(i128),
    B(&'a [u8]),
    /// A packed datetime.
    T(u64),
}

fn chars_at_most(b: &[u8], n: u32) -> bool {
    match std::str::from_utf8(b) {
        Ok(s) => b.len() <= n as usize || s.chars().count() <= n as usize,
        Err(_) => false,
    }
}

/// `Some` when `v` (not NULL) is a value a column of type `ty` can store:
/// integers within the type's range (`Int` or `UInt` alike), a non-NaN
/// double, a decimal with the column's scale within its precision, bytes of
/// the allowed length (characters of valid UTF-8 for the text types) and a
/// calendar-valid datetime.
pub(crate) fn scalar<'a>(v: &'a Value, ty: &ColumnType) -> Option<Scalar<'a>> {
    match (ty, v) {
        (_, Value::Null) => None,
        (t, Value::Int(_) | Value::UInt(_)) if t.int_range().is_some() => {
            let x = match *v {
                Value::Int(i) => i as i128,
                Value::UInt(u) => u as i128,
                _ => unreachable!(),
            };
            let (lo, hi) = t.int_range()?;
            if x < lo || x > hi {
                return None;
            }
            Some(if t.is_unsigned() {
                Scalar::U(x as u64)
            } else {
                Scalar::I(x as i64)
            })
        }
        (ColumnType::Double, Value::Double(f)) if !f.is_nan() => Some(Scalar::F(*f)),
        (ColumnType::Decimal { precision, scale }, Value::Decimal { unscaled, scale: s }) => {
            if s != scale || *precision > MAX_DECIMAL_PRECISION {
                return None;
            }
            if unscaled.unsigned_abs() >= 10u128.pow(*precision as u32) {
                return None;
            }
            Some(Scalar::D(*unscaled))
        }
        (ColumnType::Char(n) | ColumnType::VarChar(n), Value::Bytes(b)) => {
            chars_at_most(b, *n).then_some(Scalar::B(b))
        }
        (ColumnType::Text, Value::Bytes(b)) => {
            (b.len() <= MAX_TEXT_BYTES && std::str::from_utf8(b).is_ok()).then_some(Scalar::B(b))
        }
        (ColumnType::Blob, Value::Bytes(b)) => (b.len() <= MAX_TEXT_BYTES).then_some(Scalar::B(b)),
        (ColumnType::DateTime | ColumnType::Timestamp, Value::DateTime(d)) => {
            d.is_valid().then(|| Scalar::T(d.pack()))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Exact decimal numbers for conversions

/// An exact number `(-1)^neg * digits * 10^exp10`, `digits` ASCII without
/// leading zeros (empty for zero).
struct NumLit {
    neg: bool,
    digits: Vec<u8>,
    exp10: i64,
}

impl NumLit {
    fn new(neg: bool, digits: &[u8], exp10: i64) -> NumLit {
        let first = digits
            .iter()
            .position(|&d| d != b'0')
            .unwrap_or(digits.len());
        NumLit {
            neg,
            digits: digits[first..].to_vec(),
            exp10,
        }
    }

    /// `ws* [+-]? (d+ [. d*] | . d+) ([eE] [+-]? d+)? ws*`.
    fn parse(s: &[u8]) -> Option<NumLit> {
        let s = s.trim_ascii();
        let mut i = 0;
        let mut neg = false;
        if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
            neg = s[i] == b'-';
            i += 1;
        }
        let mut digits = Vec::new();
        let mut int_digits = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            digits.push(s[i]);
            i += 1;
            int_digits += 1;
        }
        let mut frac_digits: i64 = 0;
        if i < s.len() && s[i] == b'.' {
            i += 1;
            while i < s.len() && s[i].is_ascii_digit() {
                digits.push(s[i]);
                i += 1;
                frac_digits += 1;
            }
        }
        if int_digits == 0 && frac_digits == 0 {
            return None;
        }
        let mut exp: i64 = 0;
        if i < s.len() && (s[i] == b'e' || s[i] == b'E') {
            i += 1;
            let mut eneg = false;
            if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
                eneg = s[i] == b'-';
                i += 1;
            }
            let start = i;
            while i < s.len() && s[i].is_ascii_digit() {
                // Saturate: anything this large is out of range or zero anyway.
                exp = (exp * 10 + (s[i] - b'0') as i64).min(1_000_000_000);
                i += 1;
            }
            if i == start {
                return None;
            }
            if eneg {
                exp = -exp;
            }
        }
        if i != s.len() {
            return None;
        }
        Some(NumLit::new(neg, &digits, exp - frac_digits))
    }

    fn from_i128(v: i128) -> NumLit {
        NumLit::new(v < 0, v.unsigned_abs().to_string().as_bytes(), 0)
    }

    fn from_decimal(unscaled: i128, scale: u8) -> NumLit {
        let mut n = NumLit::from_i128(unscaled);
        n.exp10 = -(scale as i64);
        n
    }

    /// A finite double, exactly as its shortest round-trip representation.
    fn from_f64(f: f64) -> NumLit {
        let mut n = NumLit::parse(format!("{:e}", f.abs()).as_bytes())
            .expect("Rust's exponent form of a finite double parses");
        n.neg = f < 0.0;
        n
    }

    /// A datetime as the number YYYYMMDDHHMMSS.ffffff, as MySQL converts it.
    fn from_datetime(d: &DateTime) -> NumLit {
        let DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            micro,
        } = *d;
        let s = format!("{year:04}{month:02}{day:02}{hour:02}{minute:02}{second:02}{micro:06}");
        NumLit::new(false, s.as_bytes(), -6)
    }

    /// `round(self * 10^scale)`, half away from zero; `None` on overflow.
    fn to_scaled(&self, scale: u32) -> Option<i128> {
        if self.digits.is_empty() {
            return Some(0);
        }
        let e = self.exp10.saturating_add(scale as i64);
        let len = self.digits.len() as i64;
        let (kept, zeros, round_up) = if e >= 0 {
            if len.saturating_add(e) > 39 {
                return None;
            }
            (&self.digits[..], e as u32, false)
        } else {
            let drop = -e;
            if drop > len {
                (&self.digits[..0], 0, false)
            } else {
                let k = (len - drop) as usize;
                (&self.digits[..k], 0, self.digits[k] >= b'5')
            }
        };
        if kept.len() > 39 {
            return None;
        }
        let mut m: u128 = 0;
        for &d in kept {
            m = m.checked_mul(10)?.checked_add((d - b'0') as u128)?;
        }
        m = m.checked_mul(10u128.checked_pow(zeros)?)?;
        if round_up {
            m = m.checked_add(1)?;
        }
        let m = i128::try_from(m).ok()?;
        Some(if self.neg { -m } else { m })
    }

    /// The nearest double (an infinity when too large).
    fn to_f64(&self) -> f64 {
        if self.digits.is_empty() {
            return 0.0;
        }
        let s = format!(
            "{}{}e{}",
            if self.neg { "-" } else { "" },
            std::str::from_utf8(&self.digits).unwrap_or("0"),
            self.exp10
        );
        s.parse::<f64>().unwrap_or(f64::NAN)
    }
}

// ---------------------------------------------------------------------------
// Coercion

fn shown(v: &Value) -> String {
    match v.to_text() {
        Some(t) => String::from_utf8_lossy(&t).into_owned(),
        None => "NULL".to_string(),
    }
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Converts a value to what a column of type `ty` stores, as MySQL does
    /// in strict mode. NULL stays NULL (NOT NULL is the executor's business).
    ///
    /// - Integer types: integers, doubles and decimals are rounded half away
    ///   from zero; strings are parsed as numbers ('  12 ', '-3', '1.5',
    ///   '1e3'); a datetime becomes YYYYMMDDHHMMSS. Outside the type's range
    ///   is `OutOfRange` (1264); an unparsable string or NaN is `Invalid` (1366).
    /// - DOUBLE: the nearest double; an infinity (or a string beyond the
    ///   double range) is `OutOfRange`, NaN `Invalid`; `-0.0` becomes `0.0`.
    /// - DECIMAL(p,s): rounded to scale s; more than p digits is `OutOfRange`.
    /// - CHAR(n)/VARCHAR(n): numbers and datetimes become their text; bytes
    ///   must be UTF-8 (else `Invalid`); over n characters is `TooLong` (1406)
    ///   unless the excess is only spaces, which is cut off (as MySQL does).
    ///   CHAR also drops trailing spaces.
    /// - TEXT: UTF-8, at most 65535 bytes; BLOB: any bytes, at most 65535.
    /// - DATETIME/TIMESTAMP: 'YYYY-MM-DD[ HH:MM:SS[.ffffff]]' strings, datetime
    ///   values, and integers YYYYMMDD or YYYYMMDDHHMMSS; fractional seconds are
    ///   rounded away; invalid or out of range dates are `Invalid` (1292).
    pub fn coerce(self, ty: &ColumnType) -> Result<Value, ValueError> {
        ty.validate()?;
        if self.is_null() {
            return Ok(Value::Null);
        }
        let target = *ty;
        let invalid = |v: &Value| ValueError::Invalid {
            target,
            value: shown(v),
        };
        let out_of_range = |v: &Value| ValueError::OutOfRange {
            target,
            value: shown(v),
        };
        match target {
            ColumnType::TinyInt { .. }
            | ColumnType::SmallInt { .. }
            | ColumnType::Int { .. }
            | ColumnType::BigInt { .. } => {
                let (lo, hi) = target.int_range().expect("an integer type");
                let n = self.to_numlit(&target)?;
                let x = n.to_scaled(0).ok_or_else(|| out_of_range(&self))?;
                if x < lo || x > hi {
                    return Err(out_of_range(&self));
                }
                Ok(if target.is_unsigned() {
                    Value::UInt(x as u64)
                } else {
                    Value::Int(x as i64)
                })
            }
            ColumnType::Double => {
                let f = match self {
                    Value::Int(i) => i as f64,
                    Value::UInt(u) => u as f64,
                    Value::Double(f) => {
                        if f.is_nan() {
                            return Err(invalid(&self));
                        }
                        f
                    }
                    _ => self.to_numlit(&target)?.to_f64(),
                };
                if f.is_nan() {
                    return Err(invalid(&self));
                }
                if f.is_infinite() {
                    return Err(out_of_range(&self));
                }
                Ok(Value::Double(if f == 0.0 { 0.0 } else { f }))
            }
            ColumnType::Decimal { precision, scale } => {
                let n = self.to_numlit(&target)?;
                let x = n
                    .to_scaled(scale as u32)
                    .ok_or_else(|| out_of_range(&self))?;
                if x.unsigned_abs() >= 10u128.pow(precision as u32) {
                    return Err(out_of_range(&self));
                }
                Ok(Value::Decimal { unscaled: x, scale })
            }
            ColumnType::Char(n) | ColumnType::VarChar(n) => {
                let bytes = match self {
                    Value::Bytes(b) => b,
                    other => other.to_text().unwrap_or_default(),
                };
                let Ok(s) = std::str::from_utf8(&bytes) else {
                    return Err(invalid(&Value::Bytes(bytes)));
                };
                let mut end = s.len();
                if let Some((cut, _)) = s.char_indices().nth(n as usize) {
                    if s[cut..].bytes().any(|c| c != b' ') {
                        return Err(ValueError::TooLong {
                            target,
                            len: s.chars().count(),
                        });
                    }
                    end = cut;
                }
                let mut s = &s[..end];
                if matches!(target, ColumnType::Char(_)) {
                    s = s.trim_end_matches(' ');
                }
                Ok(Value::Bytes(s.as_bytes().to_vec()))
            }
            ColumnType::Text | ColumnType::Blob => {
                let bytes = match self {
                    Value::Bytes(b) => b,
                    other => other.to_text().unwrap_or_default(),
                };
                if target == ColumnType::Text && std::str::from_utf8(&bytes).is_err() {
                    return Err(invalid(&Value::Bytes(bytes)));
                }
                if bytes.len() > MAX_TEXT_BYTES {
                    return Err(ValueError::TooLong {
                        target,
                        len: bytes.len(),
                    });
                }
                Ok(Value::Bytes(bytes))
            }
            ColumnType::DateTime | ColumnType::Timestamp => {
                let d = match &self {
                    Value::Bytes(b) => DateTime::parse(b),
                    Value::DateTime(d) => Some(*d),
                    Value::Int(_) | Value::UInt(_) => {
                        let x = match self {
                            Value::Int(i) => i as i128,
                            Value::UInt(u) => u as i128,
                            _ => unreachable!(),
                        };
                        // YYYYMMDD or YYYYMMDDHHMMSS.
                        let mut s = x.to_string();
                        if s.len() == 8 {
                            s.push_str("000000");
                        }
                        let f = |r: std::ops::Range<usize>| -> u32 {
                            s[r].parse().expect("ascii digits")
                        };
                        (x >= 0 && s.len() == 14).then(|| DateTime {
                            year: f(0..4) as u16,
                            month: f(4..6) as u8,
                            day: f(6..8) as u8,
                            hour: f(8..10) as u8,
                            minute: f(10..12) as u8,
                            second: f(12..14) as u8,
                            micro: 0,
                        })
                    }
                    _ => None,
                };
                let d = d
                    .filter(DateTime::is_valid)
                    .and_then(DateTime::round_to_second)
                    .ok_or_else(|| invalid(&self))?;
                if target == ColumnType::Timestamp && !(TIMESTAMP_MIN..=TIMESTAMP_MAX).contains(&d)
                {
                    return Err(invalid(&self));
                }
                Ok(Value::DateTime(d))
            }
        }
    }

    /// The value as an exact number, for integer and decimal targets.
    fn to_numlit(&self, target: &ColumnType) -> Result<NumLit, ValueError> {
        let target = *target;
        match self {
            Value::Null => unreachable!("NULL is handled by coerce"),
            Value::Int(i) => Ok(NumLit::from_i128(*i as i128)),
            Value::UInt(u) => Ok(NumLit::from_i128(*u as i128)),
            Value::Double(f) if f.is_nan() => Err(ValueError::Invalid {
                target,
                value: shown(self),
            }),
            Value::Double(f) if f.is_infinite() => Err(ValueError::OutOfRange {
                target,
                value: shown(self),
            }),
            Value::Double(f) => Ok(NumLit::from_f64(*f)),
            Value::Decimal { unscaled, scale } => Ok(NumLit::from_decimal(*unscaled, *scale)),
            Value::Bytes(b) => NumLit::parse(b).ok_or_else(|| ValueError::Invalid {
                target,
                value: shown(self),
            }),
            Value::DateTime(d) => Ok(NumLit::from_datetime(d)),
        }
    }

    /// The value as MySQL's text protocol sends it; `None` for NULL.
    ///
    /// Doubles use Rust's shortest round-trip digits, in exponent form
    /// ("1e20", "1.5e-7") when the decimal exponent is below -4 or at least 15,
    /// as `%g` would; decimals print all digits of their scale; datetimes print
    /// 'YYYY-MM-DD HH:MM:SS', with '.ffffff' only when microseconds are not 0.
    pub fn to_text(&self) -> Option<Vec<u8>> {
        Some(match self {
            Value::Null => return None,
            Value::Int(i) => i.to_string().into_bytes(),
            Value::UInt(u) => u.to_string().into_bytes(),
            Value::Double(f) => double_text(*f).into_bytes(),
            Value::Decimal { unscaled, scale } => decimal_text(*unscaled, *scale).into_bytes(),
            Value::Bytes(b) => b.clone(),
            Value::DateTime(d) => d.to_string().into_bytes(),
        })
    }
}

fn double_text(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let e = format!("{f:e}");
    let exp: i32 = e
        .rsplit_once('e')
        .and_then(|(_, x)| x.parse().ok())
        .unwrap_or(0);
    if !(-4..15).contains(&exp) {
        e
    } else {
        format!("{f}")
    }
}

fn decimal_text(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = if digits.len() <= scale {
        format!("{}{}", "0".repeat(scale + 1 - digits.len()), digits)
    } else {
        digits
    };
    let (i, f) = padded.split_at(padded.len() - scale);
    format!("{sign}{i}.{f}")
}

// ---------------------------------------------------------------------------
// Ordering

enum Num {
    I(i128),
    F(f64),
    D(i128, u8),
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal { .. } => 1,
        Value::Bytes(_) => 2,
        Value::DateTime(_) => 3,
    }
}

fn num(v: &Value) -> Num {
    match *v {
        Value::Int(i) => Num::I(i as i128),
        Value::UInt(u) => Num::I(u as i128),
        Value::Double(f) => Num::F(f),
        Value::Decimal { unscaled, scale } => Num::D(unscaled, scale),
        _ => unreachable!("not a number"),
    }
}

/// The order of values for ORDER BY, MIN and MAX (and of index keys).
///
/// NULL sorts first. Numbers (`Int`, `UInt`, `Double`, `Decimal`) compare
/// exactly by their numeric value whatever their kinds (`-0.0 == 0.0`; NaN,
/// which no column stores, sorts after every number). Bytes compare bytewise
/// (binary collation: 'B' < 'a', 'a' < 'a ' < 'ab'). Datetimes compare
/// chronologically. Values of different kinds, which one column never holds,
/// order as NULL < numbers < bytes < datetimes.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        (Value::DateTime(x), Value::DateTime(y)) => x.cmp(y),
        _ => cmp_num(num(a), num(b)),
    }
}

fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::I(x), Num::I(y)) => x.cmp(&y),
        (Num::I(x), Num::D(u, s)) => cmp_scaled(x, s as u32, u),
        (Num::D(u, s), Num::I(x)) => cmp_scaled(x, s as u32, u).reverse(),
        (Num::D(u1, s1), Num::D(u2, s2)) => {
            if s1 <= s2 {
                cmp_scaled(u1, (s2 - s1) as u32, u2)
            } else {
                cmp_scaled(u2, (s1 - s2) as u32, u1).reverse()
            }
        }
        (Num::F(f), Num::F(g)) => match f.partial_cmp(&g) {
            Some(o) => o,
            None => f.is_nan().cmp(&g.is_nan()),
        },
        (Num::F(f), Num::I(x)) => cmp_f64_dec(f, x, 0),
        (Num::I(x), Num::F(f)) => cmp_f64_dec(f, x, 0).reverse(),
        (Num::F(f), Num::D(u, s)) => cmp_f64_dec(f, u, s),
        (Num::D(u, s), Num::F(f)) => cmp_f64_dec(f, u, s).reverse(),
    }
}

/// Compares `a * 10^x` with `b` exactly.
fn cmp_scaled(a: i128, x: u32, b: i128) -> Ordering {
    if a == 0 {
        return 0.cmp(&b);
    }
    match 10i128.checked_pow(x).and_then(|p| a.checked_mul(p)) {
        Some(p) => p.cmp(&b),
        // |a * 10^x| exceeds every i128.
        None if a > 0 => Ordering::Greater,
        None => Ordering::Less,
    }
}

/// Compares the double `f` with `u / 10^s` exactly.
fn cmp_f64_dec(f: f64, u: i128, s: u8) -> Ordering {
    if f.is_nan() {
        return Ordering::Greater;
    }
    // 2^127: beyond it every decimal (|u| < 2^127) is smaller in magnitude.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f >= LIMIT {
        return Ordering::Greater;
    }
    if f < -LIMIT {
        return Ordering::Less;
    }
    let ft = f.trunc();
    let ti = ft as i128;
    let (td, rem) = match 10i128.checked_pow(s as u32) {
        Some(p) => (u / p, u % p),
        None => (0, u),
    };
    if ti != td {
        return ti.cmp(&td);
    }
    let ff = f - ft; // exact, |ff| < 1
    let sf = if ff > 0.0 {
        1
    } else if ff < 0.0 {
        -1
    } else {
        0
    };
    let sd = rem.signum() as i32;
    if sf != sd || sf == 0 {
        return sf.cmp(&sd);
    }
    // Same sign: compare magnitudes |ff| and |rem| / 10^s.
    let mag = match 10u128.checked_pow(s as u32) {
        Some(p10) => cmp_frac(ff.abs(), rem.unsigned_abs(), p10),
        // Scales over 38 are not stored values; compare approximately.
        None => ff
            .abs()
            .partial_cmp(&((rem.unsigned_abs() as f64) / 10f64.powi(s as i32)))
            .unwrap_or(Ordering::Equal),
    };
    if sf > 0 {
        mag
    } else {
        mag.reverse()
    }
}

/// Compares the double `0 < x < 1` with `r / p10` (`0 < r < p10 <= 10^38`)
/// exactly: `m * 2^-k` against `r / p10` is `m * p10` against `r * 2^k`.
fn cmp_frac(x: f64, r: u128, p10: u128) -> Ordering {
    let bits = x.to_bits();
    let exp_bits = ((bits >> 52) & 0x7FF) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp_bits == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp_bits - 1075)
    };
    let k = (-e) as u32; // x < 1, so e < 0
                         // m * p10 < 2^53 * 2^127 = 2^180.
    let lhs = mul_u64_u128(m, p10);
    let rbits = 128 - r.leading_zeros();
    if rbits + k > 200 {
        return Ordering::Less;
    }
    let rhs = if k == 0 {
        (0, r)
    } else if k < 128 {
        (r >> (128 - k), r << k)
    } else {
        (r << (k - 128), 0)
    };
    lhs.cmp(&rhs)
}

/// `a * b` as (high, low) 128-bit halves.
fn mul_u64_u128(a: u64, b: u128) -> (u128, u128) {
    let a = a as u128;
    let p0 = (b & u64::MAX as u128) * a;
    let p1 = (b >> 64) * a;
    let (lo, carry) = p0.overflowing_add(p1 << 64);
    ((p1 >> 64) + carry as u128, lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_double_text() {
        assert_eq!(decimal_text(12345, 2), "123.45");
        assert_eq!(decimal_text(-5, 2), "-0.05");
        assert_eq!(decimal_text(0, 3), "0.000");
        assert_eq!(decimal_text(-7, 0), "-7");
        assert_eq!(double_text(1.0), "1");
        assert_eq!(double_text(0.1), "0.1");
        assert_eq!(double_text(-2.5), "-2.5");
        assert_eq!(double_text(1e20), "1e20");
        assert_eq!(double_text(1.5e-7), "1.5e-7");
        assert_eq!(double_text(123456.0), "123456");
    }

    #[test]
    fn numlit_rounds_half_away_from_zero() {
        let p = |s: &str, scale| NumLit::parse(s.as_bytes()).unwrap().to_scaled(scale);
        assert_eq!(p("2.5", 0), Some(3));
        assert_eq!(p("-2.5", 0), Some(-3));
        assert_eq!(p("2.4999", 0), Some(2));
        assert_eq!(p("0.005", 2), Some(1));
        assert_eq!(p("1e3", 0), Some(1000));
        assert_eq!(p(".5", 0), Some(1));
        assert_eq!(p("1e-400", 0), Some(0));
        assert_eq!(p("1e400", 0), None);
        assert!(NumLit::parse(b"1e").is_none());
        assert!(NumLit::parse(b".").is_none());
        assert!(NumLit::parse(b"12abc").is_none());
        assert!(NumLit::parse(b"inf").is_none());
    }

    #[test]
    fn datetime_pack_order_and_text() {
        let d = DateTime {
            year: 2024,
            month: 2,
            day: 29,
            hour: 12,
            minute: 34,
            second: 56,
            micro: 789,
        };
        // The packed form is what rows and keys store: it must not change.
        assert_eq!(d.pack(), 0x01FA_0BAC_8B80_0315);
        assert_eq!(DateTime::unpack(d.pack()), Some(d));
        assert_eq!(DateTime::unpack(1 << 60), None);
        let later = DateTime {
            second: 57,
            micro: 0,
            ..d
        };
        assert!(d < later && d.pack() < later.pack());
        assert_eq!(d.to_string(), "2024-02-29 12:34:56.000789");
        assert_eq!(later.to_string(), "2024-02-29 12:34:57");
    }

    #[test]
    fn cmp_frac_is_exact() {
        // 0.1 as a double is slightly above 1/10.
        assert_eq!(cmp_frac(0.1, 1, 10), Ordering::Greater);
        assert_eq!(cmp_frac(0.5, 5, 10), Ordering::Equal);
        assert_eq!(cmp_frac(0.25, 25, 100), Ordering::Equal);
        assert_eq!(
            cmp_frac(0.25, 2500000000000000000000000000000000001, 10u128.pow(37)),
            Ordering::Less
        );
        assert_eq!(cmp_frac(5e-324, 1, 10u128.pow(38)), Ordering::Less);
    }
}
