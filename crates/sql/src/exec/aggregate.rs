//! Aggregates without GROUP BY: COUNT, SUM, AVG, MIN and MAX (each with
//! DISTINCT) over the whole input, handed up as one row of the aggregates'
//! values. Each aggregate keeps a running state, not its input rows (a
//! DISTINCT one keeps the distinct values it saw). GROUP BY will keep one
//! such state per group.

use super::eval::Ctx;
use super::operator::{ExecContext, Operator, Row};
use crate::error::SqlError;
use crate::expr::{AggKind, Aggregate as AggCall};
use crate::types::{as_double, compare_values, Value};
use millrace_errcode::ER_DATA_OUT_OF_RANGE;
use std::cmp::Ordering;
use std::collections::HashSet;

pub struct Aggregate<'p> {
    input: Box<dyn Operator + 'p>,
    calls: &'p [AggCall],
    done: bool,
}

impl<'p> Aggregate<'p> {
    pub fn new(input: Box<dyn Operator + 'p>, calls: &'p [AggCall]) -> Aggregate<'p> {
        Aggregate {
            input,
            calls,
            done: false,
        }
    }
}

impl Operator for Aggregate<'_> {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        if self.done {
            return Ok(None);
        }
        self.done = true;
        let mut states: Vec<State> = self.calls.iter().map(|_| State::default()).collect();
        while let Some(row) = self.input.next(cx)? {
            let ecx = Ctx {
                row: &row.values,
                params: cx.params,
                aggregates: &[],
                guard: Some(cx.guard),
            };
            for (a, st) in self.calls.iter().zip(&mut states) {
                match &a.arg {
                    None => st.count += 1,
                    Some(e) => {
                        let v = e.eval(&ecx)?;
                        if !v.is_null() {
                            if let Some(bytes) = st.add(a, v) {
                                // A DISTINCT aggregate's set of values.
                                cx.guard.charge(bytes)?;
                            }
                        }
                    }
                }
            }
        }
        let values = self
            .calls
            .iter()
            .zip(states)
            .map(|(a, st)| st.finish(a))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Row::made(values)))
    }
}

/// The running state of one aggregate.
#[derive(Default)]
struct State {
    /// Rows (COUNT(*)) or non-NULL values counted.
    count: u64,
    /// DISTINCT: the text forms of the values seen.
    seen: HashSet<Option<Vec<u8>>>,
    /// MIN / MAX so far (the first of equal values).
    best: Option<Value>,
    /// SUM / AVG as a double: the sum of the values in input order.
    double: Option<f64>,
    /// SUM exact while every value is an integer or a decimal.
    exact: Option<ExactSum>,
    inexact: bool,
}

impl State {
    /// Adds a value; for a DISTINCT aggregate, the bytes a new distinct
    /// value holds.
    fn add(&mut self, a: &AggCall, v: Value) -> Option<usize> {
        let mut kept = None;
        if a.distinct {
            let t = v.to_text();
            let bytes = t.as_ref().map_or(0, Vec::len) + 32;
            if !self.seen.insert(t) {
                return None;
            }
            kept = Some(bytes);
        }
        self.count += 1;
        match a.kind {
            AggKind::Count => {}
            AggKind::Min | AggKind::Max => {
                let better = match &self.best {
                    None => true,
                    Some(b) => {
                        let o = compare_values(&v, b);
                        if a.kind == AggKind::Min {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        }
                    }
                };
                if better {
                    self.best = Some(v);
                }
            }
            AggKind::Sum | AggKind::Avg => {
                let d = as_double(&v);
                self.double = Some(self.double.map_or(d, |s| s + d));
                let term = match v {
                    Value::Int(i) => Some((i128::from(i), 0)),
                    Value::UInt(u) => Some((i128::from(u), 0)),
                    Value::Decimal { unscaled, scale } => Some((unscaled, scale)),
                    _ => None,
                };
                match term {
                    Some((u, s)) if !self.inexact => {
                        self.exact.get_or_insert_with(ExactSum::default).add(u, s)
                    }
                    _ => self.inexact = true,
                }
            }
        }
        kept
    }

    /// SUM is exact over integers and decimals (as MySQL's DECIMAL result),
    /// a double when any input is one; AVG is a double.
    fn finish(self, a: &AggCall) -> Result<Value, SqlError> {
        Ok(match a.kind {
            AggKind::Count => Value::Int(self.count as i64),
            AggKind::Min | AggKind::Max => self.best.unwrap_or(Value::Null),
            AggKind::Sum | AggKind::Avg => {
                let Some(sum) = self.double else {
                    return Ok(Value::Null);
                };
                match (a.kind, self.exact) {
                    (AggKind::Sum, Some(e)) if !self.inexact => e.value()?,
                    (AggKind::Avg, _) => Value::Double(sum / self.count as f64),
                    _ => Value::Double(sum),
                }
            }
        })
    }
}

/// An exact sum of integers and decimals at the largest scale seen. The
/// result's scale is only known at the end, and a term or partial sum that
/// does not fit an i128 at that scale is an error; so the largest and
/// smallest terms and partial sums are kept (rescaled with the sum), and an
/// overflow is reported when the sum is read, not when it happens (a later
/// double makes the sum inexact, and inexact sums do not overflow).
#[derive(Default)]
struct ExactSum {
    sum: i128,
    scale: u8,
    high: i128,
    low: i128,
    overflow: bool,
}

impl ExactSum {
    fn add(&mut self, u: i128, s: u8) {
        if self.overflow {
            return;
        }
        let r = (|| {
            if s > self.scale {
                let m = 10i128.checked_pow(u32::from(s - self.scale))?;
                self.sum = self.sum.checked_mul(m)?;
                self.high = self.high.checked_mul(m)?;
                self.low = self.low.checked_mul(m)?;
                self.scale = s;
            }
            let term = 10i128
                .checked_pow(u32::from(self.scale - s))
                .and_then(|m| u.checked_mul(m))?;
            self.sum = self.sum.checked_add(term)?;
            self.high = self.high.max(term).max(self.sum);
            self.low = self.low.min(term).min(self.sum);
            Some(())
        })();
        self.overflow = r.is_none();
    }

    fn value(self) -> Result<Value, SqlError> {
        if self.overflow {
            return Err(SqlError::new(
                ER_DATA_OUT_OF_RANGE,
                "DECIMAL value is out of range in 'sum'",
            ));
        }
        Ok(Value::Decimal {
            unscaled: self.sum,
            scale: self.scale,
        })
    }
}
