//! millrace-sql: the SQL layer.
//!
//! Owns: the catalog (databases, tables, columns, indexes, AUTO_INCREMENT
//! counters, kept in an engine table and changed transactionally), parsing
//! (sqlparser, MySQL dialect), binding, planning (access paths, plan caches
//! per prepared statement and per text statement shape) and execution of
//! SQL statements against the engine's transactions; the MySQL surface
//! (system variables, SHOW, information_schema); the column types and
//! values, the memcomparable key encoding, the stored row format and long
//! values stored out of line in a table's toast table.
//! Must not know about: file I/O, pages, the buffer pool or the B+tree
//! (it sees the engine's tables as keys and values in transactions), the
//! redo log (it sets the durability through the engine), or the MySQL wire
//! protocol (sessions return values and MySQL error codes; the server
//! encodes them).
//! Depends on: millrace-trx (transactions, the durability setting),
//! millrace-errcode (MySQL error codes by name), millrace-io (its bounded
//! byte reader only), millrace-sys (the memory available, for the
//! statement memory bound), millrace-metrics (the registry the virtual tables
//! show), sqlparser, crc32c (checksums of values stored out of line),
//! tracing.
//!
//! Decoders treat their input as hostile: truncated or malformed bytes are a
//! [`CodecError`] or a [`SqlError`], never a panic.
//!
//! The stages, top to bottom (a module uses only those below it):
//! - `session`: session state, dispatch of statements to the stages below;
//! - `ddl` (CREATE/DROP, CREATE INDEX), `write` (INSERT, UPDATE, DELETE),
//!   `mysql` (variables, SET, SHOW, virtual tables);
//! - `exec`: operators over a streaming interface, expression evaluation;
//! - `plan`: plans, access paths, plan caches;
//! - `bind`: names, expressions and their types;
//! - `parse`: the parser, statement shapes;
//! - at the bottom: `catalog`, `expr` (bound expression trees), `codec`
//!   (keys, rows, toast), `types` (values, column types), `error`.

pub mod bind;
pub mod catalog;
pub mod codec;
pub mod ddl;
pub mod error;
pub mod exec;
pub mod expr;
pub mod mysql;
pub mod parse;
pub mod plan;
pub mod session;
pub mod types;
pub mod write;

pub use millrace_errcode::ErrorCode;

pub use codec::{
    decode_column, decode_key, decode_key_prefix, decode_row, decode_row_external, encode_key,
    encode_row, encode_row_external, try_encode_key, ExternalRef, ExternalRefs,
};
pub use codec::{keycode, row};
pub use error::{CodecError, SqlError};
pub use parse::shape;
pub use session::{ConnInfo, Instance, Output, Session, SERVER_VERSION, VERSION_COMMENT};
pub use types::{compare, ColumnType, DateTime, Value, ValueError};
