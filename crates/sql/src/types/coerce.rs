//! Coercion: a value converted to what a column of a type stores, as MySQL
//! does in strict mode, through exact decimal numbers; and the numeric value
//! MySQL gives any value in arithmetic and comparisons ([`as_double`]).

use super::column::{ColumnType, ValueError, MAX_TEXT_BYTES};
use super::datetime::{DateTime, TIMESTAMP_MAX, TIMESTAMP_MIN};
use super::value::Value;

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
}

pub fn truth(v: &Value) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(*i != 0),
        Value::UInt(u) => Some(*u != 0),
        Value::Double(f) => Some(*f != 0.0),
        Value::Decimal { unscaled, .. } => Some(*unscaled != 0),
        Value::Bytes(b) => Some(as_double(&Value::Bytes(b.clone())) != 0.0),
        Value::DateTime(_) => Some(true),
    }
}

/// A number's value as a double (strings are parsed as MySQL does: the
/// longest numeric prefix, 0 if none).
pub fn as_double(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Int(i) => *i as f64,
        Value::UInt(u) => *u as f64,
        Value::Double(f) => *f,
        Value::Decimal { unscaled, scale } => *unscaled as f64 / 10f64.powi(i32::from(*scale)),
        Value::Bytes(b) => {
            // The longest prefix that reads as a number: [+-]d*[.d*][e[+-]d+].
            let t = b.trim_ascii();
            let digits = |i: usize| t[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let mut i = usize::from(matches!(t.first(), Some(b'+' | b'-')));
            i += digits(i);
            if t.get(i) == Some(&b'.') {
                i += 1 + digits(i + 1);
            }
            if matches!(t.get(i), Some(b'e' | b'E')) {
                let mut j = i + 1;
                j += usize::from(matches!(t.get(j), Some(b'+' | b'-')));
                let d = digits(j);
                if d > 0 {
                    i = j + d;
                }
            }
            std::str::from_utf8(&t[..i])
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0)
        }
        Value::DateTime(_) => match v.clone().coerce(&ColumnType::BigInt { unsigned: true }) {
            Ok(Value::UInt(u)) => u as f64,
            _ => 0.0,
        },
    }
}

pub(crate) fn is_numeric(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
