//! The MySQL surface: what a MySQL server shows of itself beyond tables and
//! rows. System variables (the global table and a session's), SET, SHOW
//! statements and DESCRIBE, session functions (USER(), NOW(), ...), and the
//! rows of the information_schema and performance_schema virtual tables.
//! information_schema tables and SHOW CREATE TABLE will go here.
//!
//! Files: `variables`, `set`, `show`, `functions`, `vtab`.

pub mod functions;
pub mod set;
pub mod show;
pub mod variables;
pub mod vtab;

pub use variables::{SessionVars, SERVER_VERSION, VERSION_COMMENT};
