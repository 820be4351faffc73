//! SQL values, their text form (as the text protocol sends them) and the
//! check that a value is a stored value of its column type (what the codecs
//! accept).

use super::column::{ColumnType, MAX_DECIMAL_PRECISION, MAX_TEXT_BYTES};
use super::datetime::DateTime;

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

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
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

pub(crate) fn double_text(f: f64) -> String {
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

pub(crate) fn decimal_text(unscaled: i128, scale: u8) -> String {
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
}
