//! Binding: a parsed statement (sqlparser's AST) resolved against the
//! catalog and the session: databases, tables and columns by name, `?` and
//! lifted literals as parameters, session values (`@@vars`, `DATABASE()`),
//! and the types of the result columns. The result is a bound statement of
//! bound expressions (`crate::expr`), with no access path yet (the
//! planner's) and no values of one execution.
//!
//! Files: `binder` (the binder and what it notes), `names` (databases,
//! tables, columns in scope), `expr` (expressions), `types` (result types of
//! expressions), `select` (SELECT; joins, GROUP BY/HAVING and subqueries will
//! be bound here), `dml` (INSERT, UPDATE, DELETE), `statement` (the entry).

mod binder;
mod dml;
mod expr;
mod names;
mod select;
mod statement;
mod types;

pub use binder::{Binder, SessionInfo};
pub use dml::{BoundDelete, BoundInsert, BoundUpdate};
pub use expr::MAX_EXPR_DEPTH;
pub use names::{no_table, object_name};
pub use select::{BoundSelect, Source};
pub use statement::Bound;
