//! The scalar functions expressions call (CONCAT, LENGTH, ROUND, ...).

use crate::error::SqlError;
use crate::expr::Func;
use crate::types::{as_double, truth, Value};
use millrace_errcode::{ER_DATA_OUT_OF_RANGE, ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT};

fn text(v: &Value) -> Vec<u8> {
    v.to_text().unwrap_or_default()
}

pub(crate) fn call(f: Func, mut a: Vec<Value>) -> Result<Value, SqlError> {
    let arity = |n: usize, a: &Vec<Value>| {
        if a.len() == n {
            Ok(())
        } else {
            Err(SqlError::new(
                ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT,
                format!("Incorrect parameter count in the call to {f:?}"),
            ))
        }
    };
    Ok(match f {
        Func::Concat => {
            if a.iter().any(|v| v.is_null()) {
                return Ok(Value::Null);
            }
            Value::Bytes(a.iter().flat_map(text).collect())
        }
        Func::Length | Func::CharLength => {
            arity(1, &a)?;
            if a[0].is_null() {
                return Ok(Value::Null);
            }
            let t = text(&a[0]);
            let n = if f == Func::Length {
                t.len()
            } else {
                String::from_utf8_lossy(&t).chars().count()
            };
            Value::Int(n as i64)
        }
        Func::Upper | Func::Lower => {
            arity(1, &a)?;
            if a[0].is_null() {
                return Ok(Value::Null);
            }
            let s = String::from_utf8_lossy(&text(&a[0])).into_owned();
            Value::Bytes(
                if f == Func::Upper {
                    s.to_uppercase()
                } else {
                    s.to_lowercase()
                }
                .into_bytes(),
            )
        }
        Func::Abs => {
            arity(1, &a)?;
            match a.pop().expect("arity") {
                Value::Int(i) => Value::Int(i.checked_abs().ok_or_else(|| overflow("abs"))?),
                Value::Decimal { unscaled, scale } => Value::Decimal {
                    unscaled: unscaled.abs(),
                    scale,
                },
                Value::Null => Value::Null,
                v @ Value::UInt(_) => v,
                v => Value::Double(as_double(&v).abs()),
            }
        }
        Func::Coalesce => a.into_iter().find(|v| !v.is_null()).unwrap_or(Value::Null),
        Func::If => {
            arity(3, &a)?;
            let c = truth(&a[0]) == Some(true);
            a.swap_remove(if c { 1 } else { 2 })
        }
        Func::Round | Func::Floor | Func::Ceil => {
            if a.is_empty() || a[0].is_null() {
                return Ok(Value::Null);
            }
            if matches!(a[0], Value::Int(_) | Value::UInt(_)) {
                return Ok(a.swap_remove(0));
            }
            let x = as_double(&a[0]);
            let r = match f {
                Func::Round => {
                    let d = a.get(1).map(|v| as_double(v) as i32).unwrap_or(0);
                    let m = 10f64.powi(d);
                    (x * m).round() / m
                }
                Func::Floor => x.floor(),
                _ => x.ceil(),
            };
            if f != Func::Round && r.abs() < 9.2e18 {
                Value::Int(r as i64)
            } else {
                Value::Double(r)
            }
        }
    })
}

/// 1690 for an integer result out of the BIGINT range.
pub(crate) fn overflow(what: &str) -> SqlError {
    SqlError::new(
        ER_DATA_OUT_OF_RANGE,
        format!("BIGINT value is out of range in '{what}'"),
    )
}
