//! millrace-btree: B+tree indexes on pages.
//!
//! Owns: the index page format (the slotted page with its record heap and
//! slot directory, `node`), the record format, the B+tree operations on top
//! of it (search, insert with splits, update, delete-mark, delete with
//! merges, cursors; `tree`) and the integrity check of a whole tree (`check`).
//! Must not know about: what a transaction id or roll pointer means (they are
//! opaque system fields carried in leaf records), SQL or how keys are encoded
//! (keys are byte strings compared with memcmp; the layers above encode them
//! memcomparably), or how pages are cached, latched, flushed or logged. Every
//! change to a page goes through `node::PageMut` so that the caller can record
//! it as redo.
//! Depends on: millrace-buf (pages change only through its mini-transactions).

pub mod check;
pub mod node;
pub mod tree;

pub use check::{check_store, CheckReport, SpaceReport};
pub use tree::{Cursor, Direction, Error, Index, IndexDef, Row};
