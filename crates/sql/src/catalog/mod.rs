//! The catalog: databases, tables, columns, indexes and AUTO_INCREMENT
//! counters. It lives in the engine, in one engine table (the first table of
//! a data directory), and changes inside engine transactions, so DDL that
//! returned survives a crash and DDL cut short leaves either the old or the
//! new definition, never a mix.
//!
//! Catalog rows (key → value):
//! - `M` → `millrace-catalog` ++ version (u8): the marker that says this
//!   engine table is the catalog.
//! - `D\0<db>` → version (u8): a database.
//! - `T\0<db>\0<table>` → a [`TableSchema`], encoded by `TableSchema::encode`.
//!
//! A table's engine table (and its toast table, which holds the values
//! stored out of line, see `toast.rs`) is created (durably) before its
//! catalog row is committed; a crash between the two leaves engine tables no
//! catalog row names, which `Catalog::open` drops. DROP TABLE commits the
//! deletion of the catalog row first and drops the engine tables after.
//!
//! Files: `schema` (table schemas and their binary form), `store` (the
//! catalog and its engine table), `mdl` (metadata locks), `system` (the
//! definitions of the information_schema and performance_schema tables).

mod mdl;
mod schema;
mod store;
pub mod system;

pub use mdl::{Mdl, MdlExclusive};
pub use schema::{ColumnSchema, IndexSchema, TableSchema};
pub use store::{Catalog, TableEntry};
