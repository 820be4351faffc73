//! A client session: its database, settings, transaction and prepared
//! statements, and the dispatch of each statement to the stage that runs it
//! (parse -> bind -> plan -> exec/write; ddl; mysql). Nothing below the
//! session knows of it: the stages get explicit contexts.
//!
//! Transactions: with autocommit on, each statement runs in its own engine
//! transaction, committed at its end (or rolled back on an error); BEGIN /
//! START TRANSACTION opens an explicit one (committing an open one first, as
//! MySQL does). A failed statement inside a transaction is undone alone
//! (statement savepoint); a deadlock rolls the whole transaction back.
//! Tables used by a transaction hold a shared metadata lock until it ends.
//!
//! Files: `server` (state shared by sessions), `control` (KILL, the
//! process list, per-connection control), `state` (a session's state),
//! `transaction` (its transaction and metadata locks), `dispatch` (entry
//! points, statements that are not planned), `run` (running a plan).

mod control;
mod dispatch;
mod instance;
mod run;
mod state;
mod transaction;

pub use crate::exec::Output;
pub use crate::mysql::{SERVER_VERSION, VERSION_COMMENT};
pub use control::DisconnectHook;
pub use instance::{default_statement_memory_bytes, Instance};
pub use state::{ConnInfo, Session};

#[cfg(test)]
mod tests;
