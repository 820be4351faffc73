//! The operator interface: how rows flow through a statement's execution.
//!
//! Operators are pull iterators composed as a tree built from the plan
//! (`TableScan`/`PkLookup`/`Values` -> `Filter` -> `Aggregate` | `Sort` ->
//! `Project` -> `Distinct` -> `Limit`): the consumer calls `next` on the
//! root, each operator calls `next` on its input until it has a row to hand
//! up. Why rows are streamed one at a time rather than built whole as
//! `Vec<Vec<Value>>` at each step:
//! - memory is bounded by what an operator must hold (a scan's batch, a
//!   sort's input), not by the table: a filtered or limited scan reads the
//!   engine in bounded batches and stops when `Limit` has its rows;
//! - operators compose: a join, GROUP BY or a subquery is one more operator
//!   over the same interface, not another copy of the select loop;
//! - the consumer decides where rows go: SELECT hands them to a `RowSink`
//!   (today a `Vec` for `Output::Rows`, later the client connection), UPDATE
//!   and DELETE read the rows they change through the same scans.
//!
//! One row per call rather than a `next_batch` of many: the engine is
//! already read in batches inside the scans (the cost a batch would save),
//! and the per-row virtual call is small next to a row's decode and
//! evaluation, while single rows keep each operator simple.
//!
//! Operators take an explicit [`ExecContext`] (transaction, catalog,
//! parameters) and never the session, so the session dispatches downward.

use super::guard::StatementGuard;
use crate::catalog::system::VirtualTable;
use crate::catalog::Catalog;
use crate::codec::ExternalRefs;
use crate::error::SqlError;
use crate::types::Value;
use millrace_trx::Trx;

/// A row flowing between operators.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub values: Vec<Value>,
    /// The primary key of the stored row it was read from (empty for rows
    /// made by an operator): what UPDATE and DELETE change.
    pub key: Vec<u8>,
    /// Pointers to the stored row's values out of line (ascending columns;
    /// usually empty): UPDATE keeps the unchanged ones, DELETE deletes them.
    pub external: ExternalRefs,
}

impl Row {
    /// A row made by an operator (not read from a table).
    pub fn made(values: Vec<Value>) -> Row {
        Row {
            values,
            key: Vec::new(),
            external: Vec::new(),
        }
    }
}

/// What a statement executes against.
pub struct ExecContext<'a> {
    /// The statement's transaction.
    pub trx: &'a Trx,
    pub catalog: &'a Catalog,
    /// The statement's parameters (`?` of a prepared statement, or the
    /// literals of a cached text statement).
    pub params: &'a [Value],
    /// Bytes in an engine page (the toast limits derive from it).
    pub page_size: usize,
    /// Makes the rows of a virtual table (they belong to the MySQL surface,
    /// above the executor).
    pub virtual_rows: fn(VirtualTable, &Catalog) -> Vec<Vec<Value>>,
    /// The statement's kill state, deadline and memory bound: checked for
    /// every row read, charged for every row kept.
    pub guard: &'a StatementGuard,
}

/// A pull iterator of rows; see the module comment.
pub trait Operator {
    /// The next row; `None` once the operator is exhausted.
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError>;
}

/// Where the rows a statement returns go.
pub trait RowSink {
    fn push(&mut self, row: Vec<Value>) -> Result<(), SqlError>;
}

/// Collects the rows whole (the result set sent after the statement).
impl RowSink for Vec<Vec<Value>> {
    fn push(&mut self, row: Vec<Value>) -> Result<(), SqlError> {
        Vec::push(self, row);
        Ok(())
    }
}
