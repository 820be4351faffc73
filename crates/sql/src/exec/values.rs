//! Rows made whole before the statement reads them: the one empty row of a
//! SELECT without FROM, and the rows of a virtual table.

use super::operator::{ExecContext, Operator, Row};
use crate::error::SqlError;
use crate::types::Value;

pub struct Values {
    rows: std::vec::IntoIter<Vec<Value>>,
}

impl Values {
    pub fn new(rows: Vec<Vec<Value>>) -> Values {
        Values {
            rows: rows.into_iter(),
        }
    }
}

impl Operator for Values {
    fn next(&mut self, _: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        Ok(self.rows.next().map(Row::made))
    }
}
