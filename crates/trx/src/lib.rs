//! millrace-trx: transactions.
//!
//! Owns: transaction ids and serialisation numbers, the active set and read
//! views (MVCC, READ COMMITTED and REPEATABLE READ), undo records in undo
//! logs in rollback segments in undo tablespaces, commit, statement and
//! transaction rollback, purge with its history bounds (purge lag delay,
//! undo quota, idle timeout), row locks (implicit and explicit, waits,
//! timeouts, deadlock detection), rollback of in-flight transactions after
//! a crash, and the embedded API (`Engine`, `Trx`).
//! Must not know about: the wire protocol or SQL; how pages are cached or
//! logged (it changes pages through millrace-buf mini-transactions and
//! B+trees through millrace-btree).
//! Depends on: millrace-buf (pages, the page store), millrace-btree
//! (indexes), millrace-redo (durability levels, the durable wait at
//! commit), millrace-io (storage, the byte reader of undo records),
//! millrace-sys (CPU budget), millrace-metrics, millrace-errcode.
//!
//! Files by role, each using only files listed before it (no circles):
//! `error`; `keys` (secondary key parts, the segment format); `kill` (why
//! the engine ended a transaction); `lock` (row locks); `trx_sys` (ids,
//! serialisation numbers, the active set, read views); `undo_rec` and
//! `undo` (undo records, undo logs, rollback segments); `tables` (the
//! table directory page, open tables); `sys_page` (the trx system page);
//! `config` (settings, isolation); `id_limits` (persisted id limits);
//! `shared` (the `Engine` struct and per-transaction state); `secondary`
//! (secondary entries); `rollback`; `bounds` (purge lag, undo quota, idle
//! timeout); `purge` (and undo truncation); `interrupt` (KILL: interrupting
//! a transaction and its lock wait); `trx` (`Trx`: begin, reads,
//! writes, commit); `engine` (open, tables, settings, metrics, shutdown);
//! `check` (the offline check of a data directory); `failure_tests` (unit
//! tests of panics inside engine calls).
//!
//! # Example
//!
//! ```
//! use millrace_io::SimStorage;
//! use millrace_metrics::Registry;
//! use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
//! use millrace_trx::{Engine, Isolation, KeyPart, TrxConfig, TrxError};
//! use std::ops::Bound;
//! use std::sync::Arc;
//!
//! // A real data directory would be `millrace_io::FsStorage::new("data", false)?`
//! // and `CpuBudget::start(CpuProbe::system(), Duration::from_secs(1))`.
//! let storage = Arc::new(SimStorage::new());
//! let mut cfg = TrxConfig::default();
//! cfg.store.buf.pool_bytes = 8 << 20;
//! cfg.store.log.capacity_bytes = 8 << 20;
//! let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
//! let engine = Engine::open(storage, cfg, cpu, Registry::new())?;
//!
//! // A table with one secondary index on bytes 0..4 of the value.
//! let users = engine.create_table(&[vec![KeyPart::Bytes { offset: 0, len: 4 }]])?;
//!
//! let tx = engine.begin(Isolation::RepeatableRead);
//! tx.insert(users, b"alice", b"oslo, admin")?;
//! tx.insert(users, b"bob", b"rome, user")?;
//! assert_eq!(tx.insert(users, b"bob", b"dup").unwrap_err().mysql_code(), 1062);
//! tx.commit()?; // durable (flush_log_at_trx_commit = 1) when it returns
//!
//! let reader = engine.begin(Isolation::RepeatableRead);
//! assert_eq!(reader.get(users, b"bob")?, Some(b"rome, user".to_vec()));
//!
//! let writer = engine.begin(Isolation::RepeatableRead);
//! writer.update(users, b"bob", b"oslo, user")?;
//! writer.delete(users, b"alice")?;
//! writer.commit()?;
//!
//! // The reader's snapshot is unchanged; a new transaction sees the commit.
//! assert_eq!(reader.get(users, b"alice")?, Some(b"oslo, admin".to_vec()));
//! reader.commit()?;
//! let now = engine.begin(Isolation::ReadCommitted);
//! let rows = now.scan(users, Bound::Unbounded, Bound::Unbounded, 100)?;
//! assert_eq!(rows, vec![(b"bob".to_vec(), b"oslo, user".to_vec())]);
//! assert_eq!(now.scan_secondary(users, 0, b"oslo", b"oslo", 10)?.len(), 1);
//! now.rollback()?;
//! engine.shutdown()?;
//! # Ok::<(), TrxError>(())
//! ```

mod bounds;
pub mod check;
mod config;
mod engine;
mod error;
#[cfg(test)]
mod failure_tests;
mod id_limits;
mod interrupt;
pub mod keys;
mod kill;
pub mod lock;
mod purge;
mod rollback;
mod secondary;
mod shared;
pub mod sys_page;
pub mod tables;
mod trx;
pub mod trx_sys;
pub mod undo;
pub mod undo_rec;

pub use config::{Isolation, RuntimeSettings, TrxConfig, UndoQuotaPolicy};
pub use error::TrxError;
pub use interrupt::TrxInterrupt;
pub use keys::{encode_segments, split_segments, KeyPart, SecondaryDef, SEGMENT};
pub use kill::KillReason;
pub use lock::LockMode;
/// The durability levels of a commit, from the redo log (the SQL layer and
/// the server set them without depending on the log).
pub use millrace_redo::Durability;
pub use shared::Engine;
pub use tables::TableDef;
pub use trx::Trx;
