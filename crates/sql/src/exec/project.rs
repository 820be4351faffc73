//! The select list: each input row becomes the values of the items.

use super::eval::Ctx;
use super::operator::{ExecContext, Operator, Row};
use crate::error::SqlError;
use crate::expr::Expr;

pub struct Project<'p> {
    input: Box<dyn Operator + 'p>,
    items: &'p [Expr],
    /// The input rows are aggregate values (`Expr::Aggregate(i)` reads
    /// value `i`), not source rows.
    over_aggregates: bool,
}

impl<'p> Project<'p> {
    pub fn new(
        input: Box<dyn Operator + 'p>,
        items: &'p [Expr],
        over_aggregates: bool,
    ) -> Project<'p> {
        Project {
            input,
            items,
            over_aggregates,
        }
    }
}

impl Operator for Project<'_> {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        let Some(row) = self.input.next(cx)? else {
            return Ok(None);
        };
        let (source, aggregates): (&[_], &[_]) = if self.over_aggregates {
            (&[], &row.values)
        } else {
            (&row.values, &[])
        };
        let ecx = Ctx {
            row: source,
            params: cx.params,
            aggregates,
            guard: Some(cx.guard),
        };
        let values = self
            .items
            .iter()
            .map(|e| e.eval(&ecx))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Row::made(values)))
    }
}
