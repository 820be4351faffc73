//! LIMIT and OFFSET: skips `offset` rows, then hands up at most `limit`
//! and stops pulling its input (so a scan below reads no further).

use super::operator::{ExecContext, Operator, Row};
use crate::error::SqlError;
use crate::expr::Expr;
use crate::types::Value;
use millrace_errcode::ER_WRONG_ARGUMENTS;

pub struct Limit<'p> {
    input: Box<dyn Operator + 'p>,
    offset: usize,
    left: usize,
}

impl<'p> Limit<'p> {
    pub fn new(input: Box<dyn Operator + 'p>, offset: usize, limit: Option<usize>) -> Limit<'p> {
        Limit {
            input,
            offset,
            left: limit.unwrap_or(usize::MAX),
        }
    }
}

/// The value of a LIMIT or OFFSET expression (`None`: no clause).
pub fn limit_of(e: &Option<Expr>, params: &[Value]) -> Result<Option<usize>, SqlError> {
    match e {
        None => Ok(None),
        Some(e) => match e.eval_const(params)? {
            Value::Int(i) if i >= 0 => Ok(Some(i as usize)),
            Value::UInt(u) => Ok(Some(usize::try_from(u).unwrap_or(usize::MAX))),
            _ => Err(SqlError::new(
                ER_WRONG_ARGUMENTS,
                "Incorrect arguments to LIMIT",
            )),
        },
    }
}

impl Operator for Limit<'_> {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        if self.left == 0 {
            return Ok(None);
        }
        while self.offset > 0 {
            if self.input.next(cx)?.is_none() {
                return Ok(None);
            }
            self.offset -= 1;
        }
        let row = self.input.next(cx)?;
        if row.is_some() {
            self.left -= 1;
        }
        Ok(row)
    }
}
