//! What a statement returns to the session.

use crate::types::{OutColumn, Value};

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Ok {
        affected_rows: u64,
        last_insert_id: u64,
    },
    Rows {
        columns: Vec<OutColumn>,
        rows: Vec<Vec<Value>>,
    },
}

impl Output {
    pub fn ok() -> Output {
        Output::Ok {
            affected_rows: 0,
            last_insert_id: 0,
        }
    }

    pub fn affected(n: u64) -> Output {
        Output::Ok {
            affected_rows: n,
            last_insert_id: 0,
        }
    }
}
