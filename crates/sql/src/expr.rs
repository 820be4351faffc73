//! Scalar expressions of a plan: resolved column positions, literals and
//! statement parameters, evaluated against one row. Booleans are integers
//! 1/0, unknown is NULL (three-valued logic, as in MySQL).

use crate::types::{ColumnType, Value};
use crate::SqlError;
use millrace_errcode::{ER_DATA_OUT_OF_RANGE, ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT};
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Eq,
    NotEq,
    NullSafeEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
    Xor,
    Plus,
    Minus,
    Mul,
    Div,
    IntDiv,
    Mod,
}

/// Functions a plan can call on values (aggregates are not expressions:
/// the select plan computes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Concat,
    Length,
    CharLength,
    Upper,
    Lower,
    Abs,
    Coalesce,
    If,
    Round,
    Floor,
    Ceil,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Column(usize),
    Literal(Value),
    /// Statement parameter `i` (a `?` of a prepared statement, or a literal
    /// of a cached text statement).
    Param(usize),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    IsNull(Box<Expr>, bool),
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
    },
    Call(Func, Vec<Expr>),
    /// Result of aggregate `i` of the select (only after aggregation).
    Aggregate(usize),
    /// `DEFAULT` in a VALUES row: the column's default (the executor
    /// replaces it; evaluated elsewhere it is NULL).
    Default,
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

fn boolean(b: bool) -> Value {
    Value::Int(i64::from(b))
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

fn is_numeric(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal { .. }
    )
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
                Ok(d) => crate::compare(&d, b),
                Err(_) => crate::compare(a, b),
            }
        }
        (Value::DateTime(_), Value::Bytes(s)) => {
            match Value::Bytes(s.clone()).coerce(&ColumnType::DateTime) {
                Ok(d) => crate::compare(a, &d),
                Err(_) => crate::compare(a, b),
            }
        }
        _ => crate::compare(a, b),
    }
}

fn overflow(what: &str) -> SqlError {
    SqlError::new(
        ER_DATA_OUT_OF_RANGE,
        format!("BIGINT value is out of range in '{what}'"),
    )
}

fn arith(op: BinOp, a: &Value, b: &Value) -> Result<Value, SqlError> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let int = |v: &Value| match v {
        Value::Int(i) => Some(i128::from(*i)),
        Value::UInt(u) => Some(i128::from(*u)),
        _ => None,
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        let r = match op {
            BinOp::Plus => Some(x + y),
            BinOp::Minus => Some(x - y),
            BinOp::Mul => x.checked_mul(y),
            BinOp::IntDiv => {
                if y == 0 {
                    return Ok(Value::Null);
                }
                Some(x / y)
            }
            BinOp::Mod => {
                if y == 0 {
                    return Ok(Value::Null);
                }
                Some(x % y)
            }
            _ => None,
        };
        if let Some(r) = r {
            return if let Ok(i) = i64::try_from(r) {
                Ok(Value::Int(i))
            } else if let Ok(u) = u64::try_from(r) {
                Ok(Value::UInt(u))
            } else {
                Err(overflow("arithmetic"))
            };
        }
    }
    let (x, y) = (as_double(a), as_double(b));
    let r = match op {
        BinOp::Plus => x + y,
        BinOp::Minus => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x / y
        }
        BinOp::IntDiv => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            return Ok(Value::Int((x / y).trunc() as i64));
        }
        BinOp::Mod => {
            if y == 0.0 {
                return Ok(Value::Null);
            }
            x % y
        }
        _ => unreachable!("not arithmetic"),
    };
    if r.is_finite() {
        Ok(Value::Double(r))
    } else {
        Err(SqlError::new(
            ER_DATA_OUT_OF_RANGE,
            "DOUBLE value is out of range",
        ))
    }
}

/// MySQL LIKE with `%` and `_` and `\` escapes, case-sensitive (binary
/// collation, like every comparison here).
pub fn like(pattern: &[u8], text: &[u8]) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(b'%') => (0..=t.len()).any(|i| go(&p[1..], &t[i..])),
            Some(b'_') => !t.is_empty() && go(&p[1..], &t[1..]),
            Some(b'\\') if p.len() > 1 => t.first() == Some(&p[1]) && go(&p[2..], &t[1..]),
            Some(c) => t.first() == Some(c) && go(&p[1..], &t[1..]),
        }
    }
    go(pattern, text)
}

pub struct Ctx<'a> {
    pub row: &'a [Value],
    pub params: &'a [Value],
    pub aggregates: &'a [Value],
}

impl Expr {
    pub fn eval(&self, cx: &Ctx<'_>) -> Result<Value, SqlError> {
        Ok(match self {
            Expr::Column(i) => cx.row.get(*i).cloned().unwrap_or(Value::Null),
            Expr::Literal(v) => v.clone(),
            Expr::Param(i) => cx.params.get(*i).cloned().unwrap_or(Value::Null),
            Expr::Aggregate(i) => cx.aggregates.get(*i).cloned().unwrap_or(Value::Null),
            Expr::Default => Value::Null,
            Expr::Binary(op, l, r) => {
                let a = l.eval(cx)?;
                match op {
                    BinOp::And => {
                        if truth(&a) == Some(false) {
                            return Ok(boolean(false));
                        }
                        let b = r.eval(cx)?;
                        match (truth(&a), truth(&b)) {
                            (_, Some(false)) => boolean(false),
                            (Some(true), Some(true)) => boolean(true),
                            _ => Value::Null,
                        }
                    }
                    BinOp::Or => {
                        if truth(&a) == Some(true) {
                            return Ok(boolean(true));
                        }
                        let b = r.eval(cx)?;
                        match (truth(&a), truth(&b)) {
                            (_, Some(true)) => boolean(true),
                            (Some(false), Some(false)) => boolean(false),
                            _ => Value::Null,
                        }
                    }
                    BinOp::Xor => {
                        let b = r.eval(cx)?;
                        match (truth(&a), truth(&b)) {
                            (Some(x), Some(y)) => boolean(x != y),
                            _ => Value::Null,
                        }
                    }
                    BinOp::NullSafeEq => {
                        let b = r.eval(cx)?;
                        match (a.is_null(), b.is_null()) {
                            (true, true) => boolean(true),
                            (false, false) => boolean(compare_values(&a, &b) == Ordering::Equal),
                            _ => boolean(false),
                        }
                    }
                    BinOp::Eq
                    | BinOp::NotEq
                    | BinOp::Lt
                    | BinOp::LtEq
                    | BinOp::Gt
                    | BinOp::GtEq => {
                        let b = r.eval(cx)?;
                        if a.is_null() || b.is_null() {
                            return Ok(Value::Null);
                        }
                        let o = compare_values(&a, &b);
                        boolean(match op {
                            BinOp::Eq => o == Ordering::Equal,
                            BinOp::NotEq => o != Ordering::Equal,
                            BinOp::Lt => o == Ordering::Less,
                            BinOp::LtEq => o != Ordering::Greater,
                            BinOp::Gt => o == Ordering::Greater,
                            _ => o != Ordering::Less,
                        })
                    }
                    _ => arith(*op, &a, &r.eval(cx)?)?,
                }
            }
            Expr::Not(e) => match truth(&e.eval(cx)?) {
                None => Value::Null,
                Some(b) => boolean(!b),
            },
            Expr::Neg(e) => match e.eval(cx)? {
                Value::Null => Value::Null,
                Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(|| overflow("-"))?),
                Value::UInt(u) => {
                    let n = -i128::from(u);
                    Value::Int(i64::try_from(n).map_err(|_| overflow("-"))?)
                }
                Value::Decimal { unscaled, scale } => Value::Decimal {
                    unscaled: -unscaled,
                    scale,
                },
                v => Value::Double(-as_double(&v)),
            },
            Expr::IsNull(e, negated) => boolean(e.eval(cx)?.is_null() != *negated),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let v = expr.eval(cx)?;
                let (lo, hi) = (low.eval(cx)?, high.eval(cx)?);
                if v.is_null() || lo.is_null() || hi.is_null() {
                    return Ok(Value::Null);
                }
                let inside = compare_values(&v, &lo) != Ordering::Less
                    && compare_values(&v, &hi) != Ordering::Greater;
                boolean(inside != *negated)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let v = expr.eval(cx)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                let mut saw_null = false;
                for e in list {
                    let x = e.eval(cx)?;
                    if x.is_null() {
                        saw_null = true;
                    } else if compare_values(&v, &x) == Ordering::Equal {
                        return Ok(boolean(!*negated));
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    boolean(*negated)
                }
            }
            Expr::Like {
                expr,
                pattern,
                negated,
            } => {
                let (v, p) = (expr.eval(cx)?, pattern.eval(cx)?);
                match (v.to_text(), p.to_text()) {
                    (Some(v), Some(p)) => boolean(like(&p, &v) != *negated),
                    _ => Value::Null,
                }
            }
            Expr::Call(f, args) => {
                let vals = args
                    .iter()
                    .map(|a| a.eval(cx))
                    .collect::<Result<Vec<_>, _>>()?;
                call(*f, vals)?
            }
        })
    }

    /// Whether the expression reads no column (so it is a constant of the
    /// statement, given its parameters).
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Column(_) | Expr::Aggregate(_) => false,
            Expr::Literal(_) | Expr::Param(_) | Expr::Default => true,
            Expr::Binary(_, l, r) => l.is_constant() && r.is_constant(),
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) => e.is_constant(),
            Expr::Between {
                expr, low, high, ..
            } => expr.is_constant() && low.is_constant() && high.is_constant(),
            Expr::InList { expr, list, .. } => {
                expr.is_constant() && list.iter().all(|e| e.is_constant())
            }
            Expr::Like { expr, pattern, .. } => expr.is_constant() && pattern.is_constant(),
            Expr::Call(_, args) => args.iter().all(|a| a.is_constant()),
        }
    }

    /// Sets `used[i]` for every column `i` the expression reads (so a
    /// statement fetches only the out-of-line values it needs).
    pub fn mark_columns(&self, used: &mut [bool]) {
        match self {
            Expr::Column(i) => {
                if let Some(u) = used.get_mut(*i) {
                    *u = true;
                }
            }
            Expr::Aggregate(_) | Expr::Literal(_) | Expr::Param(_) | Expr::Default => {}
            Expr::Binary(_, l, r) => {
                l.mark_columns(used);
                r.mark_columns(used);
            }
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) => e.mark_columns(used),
            Expr::Between {
                expr, low, high, ..
            } => {
                for e in [expr, low, high] {
                    e.mark_columns(used);
                }
            }
            Expr::InList { expr, list, .. } => {
                expr.mark_columns(used);
                list.iter().for_each(|e| e.mark_columns(used));
            }
            Expr::Like { expr, pattern, .. } => {
                expr.mark_columns(used);
                pattern.mark_columns(used);
            }
            Expr::Call(_, args) => args.iter().for_each(|e| e.mark_columns(used)),
        }
    }

    /// Whether a parameter occurs in the expression.
    pub fn has_param(&self) -> bool {
        match self {
            Expr::Param(_) => true,
            Expr::Column(_) | Expr::Aggregate(_) | Expr::Literal(_) | Expr::Default => false,
            Expr::Binary(_, l, r) => l.has_param() || r.has_param(),
            Expr::Not(e) | Expr::Neg(e) | Expr::IsNull(e, _) => e.has_param(),
            Expr::Between {
                expr, low, high, ..
            } => expr.has_param() || low.has_param() || high.has_param(),
            Expr::InList { expr, list, .. } => {
                expr.has_param() || list.iter().any(|e| e.has_param())
            }
            Expr::Like { expr, pattern, .. } => expr.has_param() || pattern.has_param(),
            Expr::Call(_, args) => args.iter().any(|a| a.has_param()),
        }
    }

    /// Evaluates a constant expression.
    pub fn eval_const(&self, params: &[Value]) -> Result<Value, SqlError> {
        self.eval(&Ctx {
            row: &[],
            params,
            aggregates: &[],
        })
    }
}

fn text(v: &Value) -> Vec<u8> {
    v.to_text().unwrap_or_default()
}

fn call(f: Func, mut a: Vec<Value>) -> Result<Value, SqlError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: Value) -> Box<Expr> {
        Box::new(Expr::Literal(v))
    }

    #[test]
    fn three_valued_logic() {
        let cx = Ctx {
            row: &[],
            params: &[],
            aggregates: &[],
        };
        let and = Expr::Binary(BinOp::And, lit(Value::Null), lit(Value::Int(0)));
        assert_eq!(and.eval(&cx).unwrap(), Value::Int(0));
        let or = Expr::Binary(BinOp::Or, lit(Value::Null), lit(Value::Int(0)));
        assert_eq!(or.eval(&cx).unwrap(), Value::Null);
        let eq = Expr::Binary(
            BinOp::Eq,
            lit(Value::Bytes(b"10".to_vec())),
            lit(Value::Int(10)),
        );
        assert_eq!(eq.eval(&cx).unwrap(), Value::Int(1));
        let add = Expr::Binary(
            BinOp::Plus,
            lit(Value::Int(i64::MAX)),
            lit(Value::Int(i64::MAX)),
        );
        assert_eq!(add.eval(&cx).unwrap(), Value::UInt(u64::MAX - 1));
        let mul = Expr::Binary(BinOp::Mul, lit(Value::Int(i64::MAX)), lit(Value::Int(4)));
        assert_eq!(mul.eval(&cx).unwrap_err().code, 1690);
    }

    #[test]
    fn like_patterns() {
        assert!(like(b"a%c", b"abbbc"));
        assert!(like(b"a_c", b"abc"));
        assert!(!like(b"a_c", b"abbc"));
        assert!(like(b"100\\%", b"100%"));
        assert!(like(b"%", b""));
    }
}
