//! Parsing: SQL text to sqlparser's AST (MySQL dialect), and statement
//! shapes, the key of the plan cache for text statements.
//!
//! Files: `depth` (how deep a statement's tree can be, from its tokens),
//! `parser` (one statement of a query; placeholders), `literal`
//! (literals to values), `shape` (literals lifted out of a statement's text).

pub mod depth;
mod literal;
mod parser;
pub mod shape;

pub use literal::{literal, number};
pub use parser::{count_placeholders, parse};
