//! Planning: a bound statement becomes a plan: the access path of its table
//! (primary key point or range, secondary index range, full scan) chosen
//! from its filter. Plans are cached by statement shape (text statements)
//! and kept per prepared statement.
//!
//! Files: `logical` (the plan and the planner's entry; join order and the
//! shape of GROUP BY, subqueries and UNION will be decided here), `access`
//! (access paths), `cache` (plan caches).

mod access;
mod cache;
mod logical;

pub use access::{access_path, Access};
pub use cache::{PlanCache, Prepared};
pub use logical::{plan, DeletePlan, InsertPlan, Plan, PlanKind, SelectPlan, UpdatePlan};

// Result columns are bound with the select list; their types are re-exported
// here, where the server has always found them.
pub use crate::types::{OutColumn, ResultKind};
