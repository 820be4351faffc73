//! The order of values: [`compare`], the total order of ORDER BY, MIN, MAX
//! and index keys within one column type.

use super::coerce::{as_double, is_numeric};
use super::column::ColumnType;
use super::value::Value;
use std::cmp::Ordering;

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

/// Compares two non-NULL values as MySQL does: numbers numerically, strings
/// bytewise, a string against a number as numbers, a string against a
/// datetime as datetimes.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Bytes(_), x) | (x, Value::Bytes(_)) if is_numeric(x) => {
            let (fa, fb) = (as_double(a), as_double(b));
            fa.partial_cmp(&fb).unwrap_or(Ordering::Equal)
        }
        (Value::Bytes(s), Value::DateTime(_)) => {
            match Value::Bytes(s.clone()).coerce(&ColumnType::DateTime) {
                Ok(d) => compare(&d, b),
                Err(_) => compare(a, b),
            }
        }
        (Value::DateTime(_), Value::Bytes(s)) => {
            match Value::Bytes(s.clone()).coerce(&ColumnType::DateTime) {
                Ok(d) => compare(a, &d),
                Err(_) => compare(a, b),
            }
        }
        _ => compare(a, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
