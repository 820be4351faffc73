//! Writing rows: INSERT, UPDATE and DELETE over the executor's reads, with
//! unique checks, AUTO_INCREMENT and the storing of rows (long values out of
//! line in the toast table).
//!
//! Files: `insert`, `update`, `delete` (the statements), `unique` (unique
//! checks, 1062), `autoinc` (AUTO_INCREMENT counters), `store` (a row as
//! the engine stores it, and its out-of-line values).

mod autoinc;
mod delete;
mod insert;
pub(crate) mod store;
pub(crate) mod unique;
mod update;

pub use delete::delete;
pub use insert::insert;
pub use update::update;
