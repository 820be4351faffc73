//! Expression evaluation: a bound expression's value for one row (and the
//! statement's parameters, and after aggregation the aggregates' values).

use super::functions::{call, overflow};
use super::guard::StatementGuard;
use crate::error::SqlError;
use crate::expr::{BinOp, Expr};
use crate::types::{as_double, compare_values, truth, Value};
use millrace_errcode::ER_DATA_OUT_OF_RANGE;
use std::cmp::Ordering;

pub(crate) fn boolean(b: bool) -> Value {
    Value::Int(i64::from(b))
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

/// One element of a LIKE pattern.
#[derive(Clone, Copy, PartialEq)]
enum Pat {
    /// `%`: any run of bytes.
    Any,
    /// `_`: one byte.
    One,
    /// A byte (`\x` is `x`; a trailing `\` is itself).
    Byte(u8),
}

/// MySQL LIKE with `%` and `_` and `\` escapes, case-sensitive (binary
/// collation, like every comparison here; `_` is one byte).
///
/// Without recursion and without exponential backtracking: the pattern is
/// matched left to right, and on a mismatch only the last `%` seen is
/// retried one byte further on (an earlier `%` never needs to be: what the
/// later one can skip covers it). At most O(pattern x text) steps, in
/// practice linear.
pub fn like(pattern: &[u8], text: &[u8]) -> bool {
    like_checked(pattern, text, &mut || Ok(())).unwrap_or(false)
}

/// Steps of a LIKE match between calls of its `check`.
const LIKE_STEPS_PER_CHECK: u64 = 1 << 16;

/// `like`, calling `check` every `LIKE_STEPS_PER_CHECK` steps (a match of
/// long values can take pattern x text steps): its error ends the match.
pub fn like_checked(
    pattern: &[u8],
    text: &[u8],
    check: &mut dyn FnMut() -> Result<(), SqlError>,
) -> Result<bool, SqlError> {
    let mut pat = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        pat.push(match pattern[i] {
            b'%' => Pat::Any,
            b'_' => Pat::One,
            b'\\' if i + 1 < pattern.len() => {
                i += 1;
                Pat::Byte(pattern[i])
            }
            c => Pat::Byte(c),
        });
        i += 1;
    }
    let (mut p, mut t) = (0, 0);
    // (pattern index after the last `%`, text index it was retried from).
    let mut retry: Option<(usize, usize)> = None;
    let mut steps = 0u64;
    while t < text.len() {
        steps += 1;
        if steps % LIKE_STEPS_PER_CHECK == 0 {
            check()?;
        }
        match pat.get(p) {
            Some(Pat::Any) => {
                p += 1;
                retry = Some((p, t));
            }
            Some(Pat::One) => {
                p += 1;
                t += 1;
            }
            Some(Pat::Byte(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match retry {
                Some((rp, rt)) => {
                    p = rp;
                    t = rt + 1;
                    retry = Some((rp, rt + 1));
                }
                None => return Ok(false),
            },
        }
    }
    Ok(pat[p..].iter().all(|x| *x == Pat::Any))
}

/// What an expression reads: the row, the parameters, the aggregates.
pub struct Ctx<'a> {
    pub row: &'a [Value],
    pub params: &'a [Value],
    pub aggregates: &'a [Value],
    /// The statement's guard, checked inside long evaluations (LIKE over
    /// long values); `None` for constants.
    pub guard: Option<&'a StatementGuard>,
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
                    (Some(v), Some(p)) => {
                        let m = match cx.guard {
                            Some(g) => like_checked(&p, &v, &mut || g.check())?,
                            None => like(&p, &v),
                        };
                        boolean(m != *negated)
                    }
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

    /// Evaluates a constant expression.
    pub fn eval_const(&self, params: &[Value]) -> Result<Value, SqlError> {
        self.eval(&Ctx {
            row: &[],
            params,
            aggregates: &[],
            guard: None,
        })
    }
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
            guard: None,
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

    /// The matcher LIKE had before (recursive, exponential): the reference.
    fn reference(p: &[u8], t: &[u8]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(b'%') => (0..=t.len()).any(|i| reference(&p[1..], &t[i..])),
            Some(b'_') => !t.is_empty() && reference(&p[1..], &t[1..]),
            Some(b'\\') if p.len() > 1 => t.first() == Some(&p[1]) && reference(&p[2..], &t[1..]),
            Some(c) => t.first() == Some(c) && reference(&p[1..], &t[1..]),
        }
    }

    #[test]
    fn like_agrees_with_the_reference_on_random_patterns() {
        // A seeded xorshift: the same cases every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet = b"ab%_\\";
        for _ in 0..20_000 {
            let pl = (next() % 8) as usize;
            let tl = (next() % 8) as usize;
            let p: Vec<u8> = (0..pl).map(|_| alphabet[(next() % 5) as usize]).collect();
            let t: Vec<u8> = (0..tl).map(|_| b"ab%_\\"[(next() % 5) as usize]).collect();
            assert_eq!(
                like(&p, &t),
                reference(&p, &t),
                "{:?} LIKE {:?}",
                String::from_utf8_lossy(&t),
                String::from_utf8_lossy(&p)
            );
        }
    }

    #[test]
    fn pathological_like_patterns_finish() {
        let start = std::time::Instant::now();
        let text = vec![b'a'; 100_000];
        let pattern = [b"%a".repeat(5_000), b"%b".to_vec()].concat();
        assert!(!like(&pattern, &text));
        let many = vec![b'%'; 100_000];
        assert!(like(&many, &text));
        assert!(like(&many, b""));
        let trailing = [b"%".repeat(50_000), b"b".to_vec()].concat();
        assert!(!like(&trailing, &text));
        // Generous: the old matcher never finished the first of these.
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }
}
