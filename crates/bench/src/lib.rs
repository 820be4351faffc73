//! millrace-bench: the benchmarks behind `millrace bench`, one per layer,
//! each printing a readable table or, with `--json`, one flat JSON object
//! per run for the scripts in bench/ to collect.
//!
//! Owns: the benchmark workloads (`log`: commits against the redo log
//! alone; `btree`: a sysbench-like table on two B+tree indexes against
//! BTreeMaps under a mutex; `trx`: the same table through transactions
//! against the bare B+tree), their flags, loads, measured windows and
//! reports (`measure`, `store`, `fields`, `output`).
//! Must not know about: SQL or the MySQL protocol (it measures single
//! layers below them) or the command line around it (the `millrace`
//! binary parses `BenchCommand` and calls `run`).
//! Depends on: millrace-redo, millrace-buf, millrace-btree and millrace-trx
//! (the layers it drives directly), millrace-io (files), millrace-sys (CPU
//! budget, process CPU time, seeded randomness), millrace-metrics (the
//! counters it reports), millrace-errcode (the errors a transaction
//! retries), clap, hdrhistogram, libc (malloc_trim).
//!
//! Layers, bottom up: `measure` (histograms, the measured window,
//! counters), `fields` (result fields and their JSON), `output` (run
//! directories, tables), `store` (the page store and threaded load of
//! `btree` and `trx`), then `log`, `btree` and `trx`, then `command`.

mod btree;
mod command;
mod fields;
mod log;
mod measure;
mod output;
mod store;
mod trx;

pub use command::{run, BenchCommand};
