//! ORDER BY: reads its whole input, then hands it up sorted (stable: rows
//! with equal keys keep their input order). NULL sorts first; values compare
//! as in expressions (`compare_values`). The rows it holds are charged to
//! the statement's memory bound (1038 past it).

use super::eval::Ctx;
use super::guard::row_bytes;
use super::operator::{ExecContext, Operator, Row};
use crate::error::SqlError;
use crate::expr::Expr;
use crate::types::{compare_values, Value};
use std::cmp::Ordering;

pub struct Sort<'p> {
    input: Box<dyn Operator + 'p>,
    /// (key, ascending), evaluated on the input rows.
    keys: &'p [(Expr, bool)],
    sorted: Option<std::vec::IntoIter<Row>>,
}

impl<'p> Sort<'p> {
    pub fn new(input: Box<dyn Operator + 'p>, keys: &'p [(Expr, bool)]) -> Sort<'p> {
        Sort {
            input,
            keys,
            sorted: None,
        }
    }

    fn sort(&mut self, cx: &mut ExecContext<'_>) -> Result<Vec<Row>, SqlError> {
        let mut keyed: Vec<(Vec<Value>, Row)> = Vec::new();
        while let Some(row) = self.input.next(cx)? {
            let ecx = Ctx {
                row: &row.values,
                params: cx.params,
                aggregates: &[],
                guard: Some(cx.guard),
            };
            let keys = self
                .keys
                .iter()
                .map(|(e, _)| e.eval(&ecx))
                .collect::<Result<Vec<_>, _>>()?;
            cx.guard
                .charge(row_bytes(&keys) + row_bytes(&row.values) + row.key.len())?;
            keyed.push((keys, row));
        }
        let order = self.keys;
        keyed.sort_by(|a, b| {
            for (i, (_, asc)) in order.iter().enumerate() {
                let (x, y) = (&a.0[i], &b.0[i]);
                let o = match (x.is_null(), y.is_null()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    _ => compare_values(x, y),
                };
                let o = if *asc { o } else { o.reverse() };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
        Ok(keyed.into_iter().map(|(_, r)| r).collect())
    }
}

impl Operator for Sort<'_> {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        if self.sorted.is_none() {
            let rows = self.sort(cx)?;
            self.sorted = Some(rows.into_iter());
        }
        Ok(self.sorted.as_mut().and_then(|s| s.next()))
    }
}
