//! millrace-server: the MySQL-protocol server behind `millrace serve`.
//!
//! Owns: the server's settings (flags, `MILLRACE_ROOT_PASSWORD`,
//! millrace.toml, defaults from the machine: `config`), start-up and
//! shutdown (`start`), the TCP and Unix socket listeners with the
//! connection limit and one thread per connection (`listener`),
//! mysql_native_password and the back-off after failed logins (`auth`),
//! the MySQL client/server protocol written here from MySQL's
//! documentation (`protocol`: framing, handshake, commands, result sets,
//! prepared statements' parameters), the connection loop that turns
//! commands into SQL session calls and outcomes into packets (`conn`), and
//! the Prometheus metrics endpoint (`metrics_http`).
//! Must not know about: pages, the buffer pool, the redo log or B+trees (it
//! opens the engine and hands it to the SQL layer), SQL itself (sessions
//! parse and run statements and return values and MySQL error codes), or
//! the benchmarks.
//! Depends on: millrace-sql (sessions), millrace-trx (the engine, its
//! settings and durability levels), millrace-io (the data directory),
//! millrace-sys (memory and CPU budget), millrace-metrics, millrace-errcode
//! (error codes and their SQLSTATEs), tokio (accept loops, signals, the
//! metrics endpoint; connections run on blocking sockets), sha1, serde and
//! toml (the settings file), clap (the flags of `serve`).
//!
//! Layers, top down: `start` -> `listener` -> `conn` -> `shared`,
//! `protocol`, `auth`; `metrics_http` under `start`; `config` at the
//! bottom. The
//! decoders of `protocol` are public for the fuzz harness.

mod auth;
pub mod config;
mod conn;
mod listener;
mod metrics_http;
pub mod protocol;
mod shared;
mod start;

pub use start::{run, ServeArgs};
