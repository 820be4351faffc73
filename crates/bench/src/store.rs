//! The store flags and pieces the benches share: `--log-writer-threads`,
//! size checks, the run's storage, and what `bench btree` and `bench trx`
//! share: a page store holding one sysbench-like table, loaded before the
//! run on several threads.

use crate::measure::validate_seconds;
use clap::Args;
use millrace_buf::{BufConfig, PageStore, StoreConfig};
use millrace_io::FsStorage;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::CpuBudget;
use millrace_sys::rng::SplitMix64;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// A size flag in MiB (`flag`, e.g. "--log-capacity-mb") must be at most
/// `max_bytes` in bytes.
pub(crate) fn check_mb(flag: &str, mb: u64, max_bytes: u64) -> Result<(), String> {
    match mb.checked_mul(1 << 20) {
        Some(bytes) if bytes <= max_bytes => Ok(()),
        _ => Err(format!("{flag} {mb} is too large")),
    }
}

/// flush_log_at_trx_commit `level` as the log's durability.
pub(crate) fn durability(level: u8) -> Durability {
    Durability::from_level(level).expect("clap and --set-level-at allow only 0, 1 and 2")
}

/// The run's files in `dir`.
pub(crate) fn open_storage(dir: &Path, direct_io: bool) -> Result<FsStorage, String> {
    FsStorage::new(dir, direct_io).map_err(|e| format!("opening storage in {}: {e}", dir.display()))
}

/// `--log-writer-threads auto|on|off`.
pub fn parse_writer_threads(s: &str) -> Result<WriterThreads, String> {
    s.parse()
}

/// How often a load reports its progress on stderr.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// Loading threads when --load-threads is not given: at most this many, and
/// no more than the CPUs.
pub(crate) const MAX_DEFAULT_LOAD_THREADS: u32 = 4;

/// The flags of the store's log and of the load, the same in `bench btree`
/// and `bench trx` (and next to each other in both).
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Size of the circular log file, MiB.
    #[arg(long, default_value_t = 256)]
    pub log_capacity_mb: u64,
    /// Dedicated writer and flusher threads (on), a group commit leader (off),
    /// or chosen by the CPU count (auto).
    #[arg(long, default_value = "auto", value_parser = parse_writer_threads)]
    pub log_writer_threads: WriterThreads,
    /// Threads loading the table, on disjoint id ranges; by default the CPU
    /// count, at most 4.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub load_threads: Option<u32>,
}

impl StoreArgs {
    /// `--load-threads`, or the CPU count, at most MAX_DEFAULT_LOAD_THREADS.
    pub(crate) fn load_threads(&self, cpu: &CpuBudget) -> u32 {
        self.load_threads.unwrap_or_else(|| {
            cpu.snapshot()
                .effective_cpus
                .clamp(1, MAX_DEFAULT_LOAD_THREADS)
        })
    }
}

/// Checks the run's length and the sizes of the buffer pool and the log.
pub(crate) fn validate_store(
    seconds: f64,
    buffer_pool_mb: u64,
    store: &StoreArgs,
) -> Result<(), String> {
    validate_seconds(seconds)?;
    // The pool is sized in usize.
    let max_pool_bytes = u64::try_from(usize::MAX).unwrap_or(u64::MAX);
    check_mb("--buffer-pool-mb", buffer_pool_mb, max_pool_bytes)?;
    check_mb("--log-capacity-mb", store.log_capacity_mb, u64::MAX)
}

/// A page store with the page cleaner, its log at `durability`.
pub(crate) fn store_config(
    page_size: usize,
    buffer_pool_mb: u64,
    store: &StoreArgs,
    durability: Durability,
) -> StoreConfig {
    StoreConfig {
        buf: BufConfig {
            page_size,
            pool_bytes: (buffer_pool_mb << 20) as usize,
            ..Default::default()
        },
        log: LogConfig {
            capacity_bytes: store.log_capacity_mb << 20,
            durability,
            writer_threads: store.log_writer_threads,
            ..Default::default()
        },
        cleaner: true,
    }
}

/// A thread's own sequence of random numbers, drawn from a bench's seed.
pub(crate) fn thread_rng(seed: u64, thread: u32) -> SplitMix64 {
    SplitMix64::new(seed ^ u64::from(thread).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Fills `out` with random digits, as sysbench fills c and pad.
pub(crate) fn random_digits(out: &mut [u8], rng: &mut SplitMix64) {
    for chunk in out.chunks_mut(16) {
        let mut x = rng.next_u64();
        for b in chunk {
            *b = b'0' + (x % 10) as u8;
            x /= 10;
        }
    }
}

pub(crate) struct Loaded {
    pub(crate) rows: u64,
    pub(crate) seconds: f64,
}

impl Loaded {
    pub(crate) fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.seconds
    }
}

/// The ids thread `t` of `threads` loads: consecutive ranges covering 1..=rows.
pub(crate) fn load_range(rows: u64, threads: u32, t: u32) -> Range<u64> {
    let at = |i: u32| 1 + (u128::from(rows) * u128::from(i) / u128::from(threads)) as u64;
    at(t)..at(t + 1)
}

/// Loads rows 1..=rows on `threads` threads, printing the progress every
/// second: `load_ids(ids, thread, loaded, failed)` inserts one thread's
/// `load_range`, adds each row it inserted to `loaded`, and returns early
/// (with Ok) once `failed` is set: another thread failed, and its error is
/// the one reported. `label` names the load in the messages.
pub(crate) fn load_rows<F>(
    rows: u64,
    threads: u32,
    label: &str,
    load_ids: F,
) -> Result<Loaded, String>
where
    F: Fn(Range<u64>, u32, &AtomicU64, &AtomicBool) -> Result<(), String> + Sync,
{
    let loaded = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let start = Instant::now();
    thread::scope(|s| {
        let loaders: Vec<_> = (0..threads)
            .map(|t| {
                let (loaded, failed, load_ids) = (&loaded, &failed, &load_ids);
                s.spawn(move || {
                    let result = load_ids(load_range(rows, threads, t), t, loaded, failed);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        let (mut last_at, mut last_rows) = (start, 0);
        while !loaders.iter().all(|l| l.is_finished()) {
            thread::sleep(Duration::from_millis(20));
            if last_at.elapsed() >= PROGRESS_INTERVAL {
                let (now, n) = (Instant::now(), loaded.load(Ordering::Relaxed));
                let rate = (n - last_rows) as f64 / now.duration_since(last_at).as_secs_f64();
                eprintln!("{label}: {n} of {rows} rows, {rate:.0} rows/s");
                (last_at, last_rows) = (now, n);
            }
        }
        for loader in loaders {
            loader
                .join()
                .map_err(|_| format!("a {label} thread panicked"))?
                .map_err(|e| format!("{label}: {e}"))?;
        }
        Ok::<(), String>(())
    })?;
    Ok(Loaded {
        rows,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// After a load at level 0: waits until it is durable, sets the run's
/// durability and checkpoints, so that the run starts with the load's pages
/// written and its page writes are its own.
pub(crate) fn finish_load(store: &PageStore, durability: Durability) -> Result<(), String> {
    let log = store.log();
    log.wait_flushed(log.current_lsn())
        .map_err(|e| format!("flushing the log after the load: {e}"))?;
    log.set_durability(durability);
    store
        .checkpoint_now()
        .map_err(|e| format!("checkpointing after the load: {e}"))
}

/// Hands the memory the engine run freed back to the system. Without it, on
/// glibc, the baseline after a busy engine run (100k rows, 16 threads, 2
/// CPUs, pool 512 MiB) came out at 320-390k ops/s in 8 of 8 runs, and at
/// 410-550k with it, as after an engine run that allocated little.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's
    // arenas to the system; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_ranges_cover_every_id_once() {
        for (rows, threads) in [(10, 3), (1, 4), (100_000, 4)] {
            let ranges: Vec<_> = (0..threads).map(|t| load_range(rows, threads, t)).collect();
            assert_eq!(ranges[0].start, 1);
            assert_eq!(ranges.last().unwrap().end, rows + 1);
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
            }
        }
    }
}
