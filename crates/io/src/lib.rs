//! File access for millrace: every byte the engine reads from or writes to disk goes through
//! the [`Storage`] / [`StorageFile`] traits defined in this crate.
//!
//! Owns:
//! - the traits themselves (positional reads and writes, `fdatasync`, length changes);
//! - [`FsStorage`], the real backend: `pread`/`pwrite`/`fdatasync` on `std::fs::File`, with
//!   optional `O_DIRECT` (and [`AlignedBuf`] for the aligned buffers that requires);
//! - [`SimStorage`], an in-memory backend for deterministic crash tests: it remembers which
//!   writes are durable, can be told to "crash" after a given number of writes, and produces
//!   the images a power loss could leave behind (unsynced writes dropped, kept, torn per
//!   512-byte sector, reordered), and can fail reads, writes and fsyncs with
//!   EIO or ENOSPC at chosen calls (the fault campaign);
//! - the data directory's exclusive lock (`Storage::lock_exclusive`, flock on the real
//!   backend) and the permissions of what the real backend creates (0700 / 0600).
//!
//! - [`bytes::ByteReader`], the bounds-checked reader every decoder of on-disk bytes uses.
//!
//! Must not know about: log records, pages, transactions or SQL. It moves bytes at offsets
//! in named files, and the meaning of those bytes belongs to the crates above it. Keeping it
//! that ignorant is what lets the simulated backend stand in for the real one everywhere.
//!
//! Depends on: millrace-sys (the simulated backend's seeded randomness).
//!
//! Files: `storage` (the traits, file names), `aligned` (O_DIRECT alignment,
//! `AlignedBuf`), `fs` and `sim` (the two backends), `bytes`.

mod aligned;
pub mod bytes;
mod fs;
mod sim;
mod storage;

pub use aligned::{AlignedBuf, DIRECT_IO_ALIGN};
pub use fs::FsStorage;
pub use sim::{FaultKind, FaultOp, SimStorage};
pub use storage::{Storage, StorageFile, StorageLock};
