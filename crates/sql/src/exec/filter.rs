//! WHERE: the rows for which the predicate is true (not false, not NULL).

use super::eval::Ctx;
use super::operator::{ExecContext, Operator, Row};
use crate::error::SqlError;
use crate::expr::Expr;
use crate::types::{truth, Value};

pub struct Filter<'p> {
    input: Box<dyn Operator + 'p>,
    predicate: &'p Expr,
}

impl<'p> Filter<'p> {
    pub fn new(input: Box<dyn Operator + 'p>, predicate: &'p Expr) -> Filter<'p> {
        Filter { input, predicate }
    }
}

/// Whether `predicate` holds for `row`.
pub fn passes(predicate: &Expr, row: &[Value], params: &[Value]) -> Result<bool, SqlError> {
    let cx = Ctx {
        row,
        params,
        aggregates: &[],
        guard: None,
    };
    Ok(truth(&predicate.eval(&cx)?) == Some(true))
}

impl Operator for Filter<'_> {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        while let Some(row) = self.input.next(cx)? {
            let ecx = Ctx {
                row: &row.values,
                params: cx.params,
                aggregates: &[],
                guard: Some(cx.guard),
            };
            if truth(&self.predicate.eval(&ecx)?) == Some(true) {
                return Ok(Some(row));
            }
        }
        Ok(None)
    }
}
