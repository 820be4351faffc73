//! DISTINCT: the first of each set of equal rows (equal by the values' text
//! forms, as the client would see them).

use super::operator::{ExecContext, Operator, Row};
use crate::error::SqlError;
use std::collections::HashSet;

pub struct Distinct<'p> {
    input: Box<dyn Operator + 'p>,
    seen: HashSet<Vec<Option<Vec<u8>>>>,
}

impl<'p> Distinct<'p> {
    pub fn new(input: Box<dyn Operator + 'p>) -> Distinct<'p> {
        Distinct {
            input,
            seen: HashSet::new(),
        }
    }
}

impl Operator for Distinct<'_> {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        while let Some(row) = self.input.next(cx)? {
            let key: Vec<Option<Vec<u8>>> = row.values.iter().map(|v| v.to_text()).collect();
            let bytes = key.iter().flatten().map(|b| b.len() + 24).sum::<usize>() + 24;
            if self.seen.insert(key) {
                // The set of rows seen is charged to the statement's bound.
                cx.guard.charge(bytes)?;
                return Ok(Some(row));
            }
        }
        Ok(None)
    }
}
