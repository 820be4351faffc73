//! millrace-sys: what millrace knows about the machine it runs on.
//!
//! Owns: the memory available (physical, or a cgroup limit) and the CPU
//! budget (affinity mask, cgroup v1/v2 quota up the hierarchy,
//! throttling, the process's own CPU usage rate) and deterministic randomness
//! for seeded tests, and the seeded fuzzer every crate's tests use.
//! Must not know about: files of the database, logs, pages, transactions, SQL.
//! Everything above may depend on this crate; it depends on nothing of millrace.
//!
//! Files: `cgroup` (where this process's cgroup is, for one controller;
//! shared by `cpu` and `mem`, which do not use each other), `cpu` (the CPU
//! probe and budget), `mem` (memory available), `rng`, `fuzz` (the
//! in-tree fuzzer, over `rng`).

mod cgroup;
pub mod cpu;
pub mod fuzz;
pub mod mem;
pub mod rng;
