//! Data definition: CREATE/DROP DATABASE, CREATE/DROP TABLE, CREATE INDEX
//! (a table rebuild). DDL changes the catalog in its own transactions, under
//! the catalog's DDL mutex and the tables' exclusive metadata locks; the
//! session commits its open transaction first. ALTER and SHOW CREATE TABLE
//! will go here.
//!
//! Files: `context` (what DDL runs with), `database`, `table` (and column
//! types), `index` (and index checks), `rebuild` (CREATE INDEX's copy);
//! `tests` (DDL under errors and panics).

mod context;
mod database;
mod index;
mod rebuild;
mod table;
#[cfg(test)]
mod tests;

pub use context::DdlContext;
pub use database::{create_database, drop_database};
pub use index::create_index;
pub use table::{create_table, drop_tables};
