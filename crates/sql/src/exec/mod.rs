//! Execution: operators over a streaming interface (see `operator` for the
//! interface and why), built into a tree from the plan, and the evaluation
//! of expressions. Joins, GROUP BY and subqueries will add operators here.
//!
//! Files: `operator` (the interface, the context, sinks), `output` (what a
//! statement returns), `select` (the tree of a SELECT; the rows of UPDATE
//! and DELETE), operators `scan` (table scans and primary key lookups),
//! `values`, `filter`, `aggregate`, `sort`, `project`, `distinct`, `limit`;
//! `stored` (decoding stored rows), `eval` and `functions` (expressions);
//! `guard` (a statement's kill state, deadline and memory bound).

mod aggregate;
mod distinct;
pub mod eval;
mod filter;
mod functions;
pub mod guard;
mod limit;
mod operator;
mod output;
mod project;
mod scan;
mod select;
mod sort;
pub(crate) mod stored;
mod values;

pub use eval::{like, Ctx};
pub use filter::passes;
pub use guard::{interrupted, row_bytes, Kill, StatementGuard};
pub use limit::limit_of;
pub use operator::{ExecContext, Operator, Row, RowSink};
pub use output::Output;
pub use select::{rows_to_change, run_select, select};
