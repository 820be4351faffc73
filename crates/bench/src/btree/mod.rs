//! `millrace bench btree`: a sysbench-like table driven through the B+tree
//! alone (there is no transaction layer yet).
//!
//! The table is a clustered index (id -> k, c, pad) and a secondary index on
//! k. Loading threads fill it at durability level 0; then N threads run a
//! mix of update_index (move a row's secondary entry to a new k), insert and
//! point_select, each write ending with a commit: a wait until the log is as
//! durable as `--level` asks up to its current end. Afterwards both indexes
//! are checked, and the same mix runs on two BTreeMaps under a mutex each,
//! in memory and with no durability, as the baseline.
//!
//! Layers, bottom up: `args` (flags, the operation mix), `workload` (rows,
//! the operations and the load against any `Table`), `tables` (the engine's
//! table and the baseline's), `ops` (the measured runs), `report` (the
//! entry point and the output).

mod args;
mod ops;
mod report;
mod tables;
mod workload;

pub use args::BtreeArgs;
pub(crate) use ops::{bare_ops_per_s, BareRun};
pub use report::run;
