//! `millrace bench trx`: sysbench-like transactions through the
//! transactional engine (millrace-trx).
//!
//! One table (id -> k, c, pad) with a secondary index on k is loaded in
//! transactions of 1000 rows at durability level 0. Then N threads run one
//! workload, each operation one REPEATABLE READ transaction as sysbench runs
//! them: update_index gives a random row a new k (and c), insert adds a row
//! with a new id. A transaction that ends in a deadlock (1213) or a lock
//! wait timeout (1205) is counted and retried. `--long-reader` adds a thread
//! that keeps one read view open for the whole run, reading a row a second,
//! so purge cannot advance (seed 002); `--set-level-at` switches
//! flush_log_at_trx_commit during the run. A sampler thread writes one row a
//! second to `--timeseries` (history length, purge delays, dirty pages, undo
//! size, the second's p99, ...) and keeps the maxima. Afterwards, unless
//! `--no-baseline`, the same operation runs as long on a bare B+tree table in
//! a fresh store (the engine part of `bench btree`: no undo, no locks, no
//! read views), and `commits_vs_baseline` is the ratio.
//!
//! Layers, bottom up: `args` (flags and the engine's settings from them),
//! `workload` (rows, transactions with retries, the load), `series` (the
//! sampler and the `--timeseries` file), `ops` (workers, the long reader,
//! the engine run and the baseline), `report` (the entry point and the
//! output).

mod args;
mod ops;
mod report;
mod series;
mod workload;

pub use args::TrxArgs;
pub use report::run;
