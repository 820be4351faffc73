//! millrace-server: the MySQL-protocol server behind `millrace serve`.
//!
//! Owns: the server's settings (flags, `MILLRACE_ROOT_PASSWORD`,
//! millrace.toml, defaults from the machine: `config`), start-up and
//! shutdown (`start`), the TCP and Unix socket listeners with the
//! connection limit and one thread per connection (`listener`),
//! mysql_native_password (`auth`), the opensrv-mysql protocol adapter that
//! turns commands into SQL session calls and outcomes into packets
//! (`shim`, `writer`, `stmt_types`), and the Prometheus metrics endpoint
//! (`metrics_http`).
//! Must not know about: pages, the buffer pool, the redo log or B+trees (it
//! opens the engine and hands it to the SQL layer), SQL itself (sessions
//! parse and run statements and return values and MySQL error codes), or
//! the benchmarks.
//! Depends on: millrace-sql (sessions), millrace-trx (the engine, its
//! settings and durability levels), millrace-io (the data directory),
//! millrace-sys (memory and CPU budget), millrace-metrics, millrace-errcode
//! (error codes by name), opensrv-mysql, tokio, sha1, serde and toml (the
//! settings file), clap (the flags of `serve`).
//!
//! Layers, top down: `start` -> `listener` -> `shim` -> `auth`,
//! `stmt_types`; `writer` under `listener`; `metrics_http` under `start`;
//! `config` at the bottom.

mod auth;
pub mod config;
mod listener;
mod metrics_http;
mod shim;
mod start;
mod stmt_types;
mod writer;

pub use start::{run, ServeArgs};
