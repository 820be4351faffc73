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

use super::btree::{bare_ops_per_s, BareRun};
use super::{
    check_mb, check_registered, counters, durability, finish_load, latency_summary, load_rows,
    measure_window, merge_latency, new_histogram, open_storage, print_machine, print_metrics,
    print_settings, random_digits, release_freed_memory, store_config, thread_rng, validate_store,
    Fields, Loaded, RunOutput, StoreArgs, Value, Window, MIB,
};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use millrace_metrics::Registry;
use millrace_redo::Durability;
use millrace_sys::cpu::{CpuBudget, CpuProbe, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Engine, Isolation, KeyPart, Trx, TrxConfig, TrxError, UndoQuotaPolicy};
use std::fmt;
use std::fs::File;
use std::io::{LineWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// sysbench's columns: k BIGINT (the secondary key), c CHAR(120), pad CHAR(60).
const K_BYTES: u16 = 8;
const C_BYTES: usize = 120;
const PAD_BYTES: usize = 60;
const VALUE_BYTES: usize = K_BYTES as usize + C_BYTES + PAD_BYTES;
/// Rows per load transaction.
const LOAD_BATCH_ROWS: u64 = 1000;
/// Seeds the row contents and the operations.
const SEED: u64 = 0x6d69_6c6c_7472_7821;
/// How often the sampler writes a row of the time series.
const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the sampler looks at the history length (for its maximum) and
/// at the clock (for `--set-level-at`).
const SAMPLER_TICK: Duration = Duration::from_millis(100);
/// How often the long reader reads a row, so that it is never idle.
const LONG_READER_INTERVAL: Duration = Duration::from_secs(1);
/// MySQL's error codes of the two errors retried.
const ER_LOCK_DEADLOCK: u16 = 1213;
const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Each transaction gives a random row a new k and c.
    #[value(name = "update_index")]
    UpdateIndex,
    /// Each transaction inserts a row with a new id.
    Insert,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::UpdateIndex => "update_index",
            Workload::Insert => "insert",
        }
    }
}

/// `--undo-quota-policy`, as the command line spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum QuotaPolicy {
    /// Roll back the transaction with the oldest read view.
    #[value(name = "rollback_oldest")]
    RollbackOldest,
    /// Make writers wait (up to the lock wait timeout) for purge.
    #[value(name = "wait_writers")]
    WaitWriters,
}

impl QuotaPolicy {
    fn name(self) -> &'static str {
        match self {
            QuotaPolicy::RollbackOldest => "rollback_oldest",
            QuotaPolicy::WaitWriters => "wait_writers",
        }
    }

    fn engine_policy(self) -> UndoQuotaPolicy {
        match self {
            QuotaPolicy::RollbackOldest => UndoQuotaPolicy::RollbackOldest,
            QuotaPolicy::WaitWriters => UndoQuotaPolicy::WaitWriters,
        }
    }
}

/// `--set-level-at SECONDS:LEVEL`: switch flush_log_at_trx_commit to LEVEL
/// SECONDS after the start of the run (the warm-up included).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelChange {
    at_s: f64,
    level: u8,
}

impl FromStr for LevelChange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (at, level) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not SECONDS:LEVEL"))?;
        let at_s: f64 = at
            .trim()
            .parse()
            .map_err(|e| format!("{s:?}: seconds: {e}"))?;
        if !at_s.is_finite() || at_s < 0.0 {
            return Err(format!("{s:?}: seconds must be 0 or more"));
        }
        let level: u8 = level
            .trim()
            .parse()
            .map_err(|e| format!("{s:?}: level: {e}"))?;
        if Durability::from_level(level).is_none() {
            return Err(format!("{s:?}: the level must be 0, 1 or 2"));
        }
        Ok(Self { at_s, level })
    }
}

impl fmt::Display for LevelChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.at_s, self.level)
    }
}

#[derive(Args, Debug)]
pub struct TrxArgs {
    /// What each transaction does.
    #[arg(long, value_enum, default_value_t = Workload::UpdateIndex)]
    workload: Workload,
    /// Threads running transactions.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Length of the run in seconds, the 0.5 s warm-up included (the baseline
    /// runs as long again).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Rows loaded before the run (ids 1..=rows, k random in 1..=rows).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    rows: u64,
    /// Size of the buffer pool, MiB.
    #[arg(long, default_value_t = 256)]
    buffer_pool_mb: u64,
    /// Page size in bytes: 4096, 8192, 16384 or 32768.
    #[arg(long, default_value_t = 16384)]
    page_size: usize,
    /// flush_log_at_trx_commit at the start of the run: 0 waits for nothing,
    /// 1 for the flush, 2 for the write. The load always runs at 0.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    level: u8,
    /// Switch the level SECONDS after the start of the run (the warm-up
    /// included); repeatable, e.g. --set-level-at 10:2 --set-level-at 20:1.
    #[arg(long, value_name = "SECONDS:LEVEL", value_parser = parse_level_change)]
    set_level_at: Vec<LevelChange>,
    #[command(flatten)]
    store: StoreArgs,
    /// One more thread keeps a REPEATABLE READ transaction (and its read
    /// view) open for the whole run, reading a random row every second: it
    /// holds purge back.
    #[arg(long)]
    long_reader: bool,
    /// History length above which writes are delayed (innodb_max_purge_lag);
    /// 0: never.
    #[arg(long, default_value_t = TrxConfig::default().max_purge_lag)]
    max_purge_lag: u64,
    /// Longest such delay, microseconds (innodb_max_purge_lag_delay).
    #[arg(long, default_value_t = 10_000)]
    max_purge_lag_delay_us: u64,
    /// Undo space in use above which --undo-quota-policy acts, MiB; 0: no quota.
    #[arg(long, default_value_t = 0)]
    undo_quota_mb: u64,
    /// What the engine does when undo passes the quota.
    #[arg(long, value_enum, default_value_t = QuotaPolicy::RollbackOldest)]
    undo_quota_policy: QuotaPolicy,
    /// Do not run purge: the history only grows.
    #[arg(long)]
    no_purge: bool,
    /// Most purge worker threads.
    #[arg(long, default_value_t = TrxConfig::default().purge_threads as u64, value_parser = clap::value_parser!(u64).range(1..))]
    purge_threads: u64,
    /// How long a row lock wait (or a writer's wait under wait_writers)
    /// lasts before it fails with 1205, ms.
    #[arg(long, default_value_t = TrxConfig::default().lock_wait_timeout_ms)]
    lock_wait_timeout_ms: u64,
    /// Write one CSV row a second to this file: t_s, commits_per_s,
    /// history_len, purge_delay_us, purge_delays, dirty_pages, undo_mb,
    /// p99_ms, lock_waits, deadlocks, log_fsyncs, level.
    #[arg(long, value_name = "FILE.csv")]
    timeseries: Option<PathBuf>,
    /// Skip the bare B+tree baseline.
    #[arg(long)]
    no_baseline: bool,
    #[command(flatten)]
    out: RunOutput,
}

fn parse_level_change(s: &str) -> Result<LevelChange, String> {
    s.parse()
}

pub fn run(args: &TrxArgs) -> Result<(), String> {
    validate(args)?;
    args.out.run(
        "trx",
        |dir| run_in(args, dir),
        |r| r.all_fields(),
        print_table,
    )
}

fn validate(args: &TrxArgs) -> Result<(), String> {
    validate_store(args.seconds, args.buffer_pool_mb, &args.store)?;
    check_mb("--undo-quota-mb", args.undo_quota_mb, u64::MAX)?;
    for change in &args.set_level_at {
        if change.at_s >= args.seconds {
            return Err(format!(
                "--set-level-at {change}: the run ends at {} s",
                args.seconds
            ));
        }
    }
    Ok(())
}

fn trx_config(args: &TrxArgs) -> TrxConfig {
    TrxConfig {
        // The load runs at level 0; the run's level is set after it.
        store: store_config(
            args.page_size,
            args.buffer_pool_mb,
            &args.store,
            Durability::Lazy,
        ),
        lock_wait_timeout_ms: args.lock_wait_timeout_ms,
        purge: !args.no_purge,
        purge_threads: args.purge_threads as usize,
        max_purge_lag: args.max_purge_lag,
        max_purge_lag_delay_us: args.max_purge_lag_delay_us,
        undo_quota_bytes: args.undo_quota_mb << 20,
        undo_quota_policy: args.undo_quota_policy.engine_policy(),
        ..Default::default()
    }
}

/// Everything the output is made of.
struct Report<'a> {
    args: &'a TrxArgs,
    machine: CpuSnapshot,
    load_threads: u32,
    dedicated_writer_threads: bool,
    engine: EngineRun,
    baseline: Option<Baseline>,
}

fn run_in<'a>(args: &'a TrxArgs, run_dir: &Path) -> Result<Report<'a>, String> {
    // A file that cannot be written fails the run before the load.
    let timeseries = args
        .timeseries
        .as_deref()
        .map(Timeseries::create)
        .transpose()?;
    let cpu = CpuBudget::start(CpuProbe::system(), Duration::from_secs(1));
    let load_threads = args.store.load_threads(&cpu);
    let storage = open_storage(&run_dir.join("engine"), false)?;
    let (engine_run, dedicated_writer_threads) = {
        let registry = Registry::new();
        let engine = Engine::open(Arc::new(storage), trx_config(args), cpu.clone(), registry)
            .map_err(|e| format!("opening the engine: {e}"))?;
        let metrics = Counters::NAMES.iter().chain(&GAUGE_NAMES);
        let engine_run = check_registered(engine.registry(), metrics, "the engine")
            .and_then(|()| run_engine(args, &engine, load_threads, timeseries));
        let shutdown = engine.shutdown();
        let engine_run = engine_run?;
        shutdown.map_err(|e| format!("shutting the engine down: {e}"))?;
        (engine_run, engine.store().log().dedicated_writer_threads())
    };
    // The engine (and its buffer pool's memory) is gone before the baseline.
    release_freed_memory();
    let baseline = if args.no_baseline {
        None
    } else {
        Some(run_baseline(
            args,
            &run_dir.join("baseline"),
            &cpu,
            load_threads,
        )?)
    };
    Ok(Report {
        args,
        machine: cpu.snapshot(),
        load_threads,
        dedicated_writer_threads,
        engine: engine_run,
        baseline,
    })
}

// ---------------------------------------------------------------------------
// Rows and transactions.

fn row_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// k (u64 big-endian: the secondary key, value bytes 0..8), then c and pad
/// as random digits.
fn new_value(k: u64, rng: &mut SplitMix64) -> Vec<u8> {
    let mut value = vec![0u8; VALUE_BYTES];
    value[..8].copy_from_slice(&k.to_be_bytes());
    random_digits(&mut value[8..], rng);
    value
}

/// How one operation's transaction ended, and the retries it took.
#[derive(Default)]
struct Outcome {
    /// False when the deadline passed while it was being retried.
    committed: bool,
    deadlocks: u64,
    lock_timeouts: u64,
}

/// Runs `body` in a REPEATABLE READ transaction and commits it; a
/// transaction that ends in a deadlock or a lock wait timeout is rolled
/// back (the engine did it for a deadlock, dropping it does it for a
/// timeout) and retried, unless `deadline` has passed. Any other error
/// fails the bench.
fn transact(
    engine: &Arc<Engine>,
    deadline: Option<Instant>,
    body: impl Fn(&Trx) -> Result<(), TrxError>,
) -> Result<Outcome, TrxError> {
    let mut outcome = Outcome::default();
    loop {
        let trx = engine.begin(Isolation::RepeatableRead);
        match body(&trx).and_then(|()| trx.commit()) {
            Ok(()) => {
                outcome.committed = true;
                return Ok(outcome);
            }
            Err(e) if e.mysql_code() == ER_LOCK_DEADLOCK => outcome.deadlocks += 1,
            Err(e) if e.mysql_code() == ER_LOCK_WAIT_TIMEOUT => outcome.lock_timeouts += 1,
            Err(e) => return Err(e),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(outcome);
        }
    }
}

/// What every worker shares.
struct Shared {
    workload: Workload,
    table: u32,
    rows: u64,
    seconds: f64,
    /// The id of the next inserted row.
    next_id: AtomicU64,
}

impl Shared {
    fn new(args: &TrxArgs, table: u32) -> Self {
        Self {
            workload: args.workload,
            table,
            rows: args.rows,
            seconds: args.seconds,
            next_id: AtomicU64::new(args.rows + 1),
        }
    }

    /// An id of the loaded range, or a k.
    fn random(&self, rng: &mut SplitMix64) -> u64 {
        1 + rng.below(self.rows)
    }
}

/// Gives a random loaded row a new k (and c): the clustered record changes,
/// its old secondary entry is delete-marked and a new one inserted.
fn update_index(
    engine: &Arc<Engine>,
    w: &Shared,
    rng: &mut SplitMix64,
    deadline: Instant,
) -> Result<Outcome, String> {
    let id = w.random(rng);
    let value = new_value(w.random(rng), rng);
    transact(engine, Some(deadline), |trx| {
        if trx.update(w.table, &row_key(id), &value)? {
            Ok(())
        } else {
            // Rows are never deleted: a loaded row that is gone is damage.
            Err(TrxError::Corrupt(format!("row {id} is missing")))
        }
    })
    .map_err(|e| format!("update_index of row {id}: {e}"))
}

fn insert(
    engine: &Arc<Engine>,
    w: &Shared,
    rng: &mut SplitMix64,
    deadline: Instant,
) -> Result<Outcome, String> {
    let id = w.next_id.fetch_add(1, Ordering::SeqCst);
    let value = new_value(w.random(rng), rng);
    transact(engine, Some(deadline), |trx| {
        trx.insert(w.table, &row_key(id), &value)
    })
    .map_err(|e| format!("insert of row {id}: {e}"))
}

// ---------------------------------------------------------------------------
// The load.

/// Inserts one loader's ids in transactions of LOAD_BATCH_ROWS rows, ids
/// ascending.
fn load_ids(
    engine: &Arc<Engine>,
    table: u32,
    ids: Range<u64>,
    rows: u64,
    thread: u32,
    loaded: &AtomicU64,
    failed: &AtomicBool,
) -> Result<(), String> {
    let mut rng = thread_rng(SEED, thread);
    let mut first = ids.start;
    while first < ids.end {
        if failed.load(Ordering::Relaxed) {
            // Another loader failed; its error is the one reported.
            return Ok(());
        }
        let last = ids.end.min(first + LOAD_BATCH_ROWS);
        let batch: Vec<(u64, Vec<u8>)> = (first..last)
            .map(|id| (id, new_value(1 + rng.below(rows), &mut rng)))
            .collect();
        transact(engine, None, |trx| {
            for (id, value) in &batch {
                trx.insert(table, &row_key(*id), value)?;
            }
            Ok(())
        })
        .map_err(|e| format!("inserting rows {first}..{last}: {e}"))?;
        loaded.fetch_add(last - first, Ordering::Relaxed);
        first = last;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The run and its measurements.

counters! {
    /// The engine's counters this bench reports, at one moment.
    struct Counters {
        commits: "trx_commits",
        rollbacks: "trx_rollbacks",
        purge_delays: "trx_purge_lag_delays",
        purge_delay_us: "trx_purge_lag_delay_us",
        purge_records: "trx_purge_records",
        purge_logs: "trx_purge_logs",
        rseg_latch_waits: "trx_rseg_latch_waits",
        rseg_latch_wait_ns: "trx_rseg_latch_wait_ns",
        lock_waits: "lock_waits",
        lock_deadlocks: "lock_deadlocks",
        lock_timeouts: "lock_timeouts",
        page_reads: "buffer_page_reads",
        page_writes: "buffer_page_writes",
        log_fsyncs: "log_fsyncs",
    }
}

/// The gauges the sampler reads (the history length it reads from the
/// engine directly).
const GAUGE_NAMES: [&str; 3] = ["trx_history_len", "trx_undo_bytes", "buffer_pages_dirty"];

/// What one worker saw after the warm-up.
struct Tally {
    commits: u64,
    deadlocks: u64,
    lock_timeouts: u64,
    latency_us: Histogram<u64>,
}

/// What the long reader saw.
struct LongReader {
    reads: u64,
    /// Seconds after the start of the run at which it found that the
    /// engine had rolled it back (the undo quota), if it did: at its next
    /// read, up to LONG_READER_INTERVAL after the fact.
    rolled_back_at_s: Option<f64>,
}

/// What the sampler kept over the whole run.
struct Sampled {
    history_len_max: u64,
    undo_bytes_max: u64,
}

/// The measured window, all threads together, and the whole run's maxima.
struct Measured {
    commits: u64,
    deadlocks: u64,
    lock_timeouts: u64,
    wall_s: f64,
    cpu_s: f64,
    latency_us: Histogram<u64>,
    counters: Counters,
    history_len_end: u64,
    sampled: Sampled,
    long_reader: Option<LongReader>,
}

fn run_ops(
    args: &TrxArgs,
    engine: &Arc<Engine>,
    w: &Shared,
    timeseries: Option<Timeseries>,
) -> Result<Measured, String> {
    let registry = engine.registry();
    // Each worker's latencies of the current second; the sampler merges
    // and resets them once a second (a lock each worker rarely shares).
    let seconds: Vec<Mutex<Histogram<u64>>> = (0..args.threads)
        .map(|_| Mutex::new(new_histogram()))
        .collect();
    let stop_sampler = AtomicBool::new(false);
    let start = Barrier::new(args.threads as usize + 2 + usize::from(args.long_reader));
    thread::scope(|s| {
        let sampler = s.spawn(|| {
            sampler_loop(
                engine,
                &args.set_level_at,
                &start,
                &seconds,
                &stop_sampler,
                timeseries,
            )
        });
        let long_reader = args
            .long_reader
            .then(|| s.spawn(|| long_reader_loop(engine, w, &start)));
        let workers: Vec<_> = seconds
            .iter()
            .enumerate()
            .map(|(t, second)| {
                let start = &start;
                s.spawn(move || worker_loop(engine, w, t as u32, start, second))
            })
            .collect();
        let (tallies, before, after) =
            measure_window(&start, w.seconds, workers, || Counters::read(registry));
        let history_len_end = engine.history_len();
        // The long reader stops at the deadline by itself.
        let long_reader = long_reader.map(|r| r.join());
        stop_sampler.store(true, Ordering::Relaxed);
        let sampled = sampler.join();

        let mut sampled = sampled.map_err(|_| "the sampler thread panicked".to_string())??;
        // The sampler looks every SAMPLER_TICK; the end may be the maximum.
        sampled.history_len_max = sampled.history_len_max.max(history_len_end);
        let mut measured = Measured {
            commits: 0,
            deadlocks: 0,
            lock_timeouts: 0,
            wall_s: after.wall_s_since(&before),
            cpu_s: after.cpu_s_since(&before),
            latency_us: new_histogram(),
            counters: after.counters.since(&before.counters),
            history_len_end,
            sampled,
            long_reader: long_reader
                .transpose()
                .map_err(|_| "the long reader thread panicked".to_string())?
                .transpose()?,
        };
        for tally in tallies {
            let tally = tally.map_err(|_| "a worker thread panicked".to_string())??;
            measured.commits += tally.commits;
            measured.deadlocks += tally.deadlocks;
            measured.lock_timeouts += tally.lock_timeouts;
            merge_latency(&mut measured.latency_us, &tally.latency_us)?;
        }
        Ok(measured)
    })
}

fn worker_loop(
    engine: &Arc<Engine>,
    w: &Shared,
    thread: u32,
    start: &Barrier,
    second: &Mutex<Histogram<u64>>,
) -> Result<Tally, String> {
    let mut rng = thread_rng(!SEED, thread);
    let mut tally = Tally {
        commits: 0,
        deadlocks: 0,
        lock_timeouts: 0,
        latency_us: new_histogram(),
    };
    start.wait();
    let window = Window::starting_now(w.seconds);
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let outcome = match w.workload {
            Workload::UpdateIndex => update_index(engine, w, &mut rng, window.end)?,
            Workload::Insert => insert(engine, w, &mut rng, window.end)?,
        };
        // Retries included, as sysbench counts an event's latency.
        let latency_us = t0.elapsed().as_micros() as u64;
        if outcome.committed {
            second
                .lock()
                .expect("poisoned")
                .saturating_record(latency_us);
        }
        if t0 >= window.warmup_end {
            tally.deadlocks += outcome.deadlocks;
            tally.lock_timeouts += outcome.lock_timeouts;
            if outcome.committed {
                tally.commits += 1;
                tally.latency_us.saturating_record(latency_us);
            }
        }
    }
}

/// Opens a read view at the start and keeps it until the deadline, reading
/// one random row a second so that the transaction is never idle. The
/// engine may roll it back (the undo quota's rollback_oldest policy): that
/// ends it early, with the time noted.
fn long_reader_loop(
    engine: &Arc<Engine>,
    w: &Shared,
    start: &Barrier,
) -> Result<LongReader, String> {
    let mut rng = SplitMix64::new(SEED.rotate_left(29));
    start.wait();
    let window = Window::starting_now(w.seconds);
    let run_start = Instant::now();
    let trx = engine.begin(Isolation::RepeatableRead);
    let mut reads = 0;
    let mut next_read = run_start;
    let result = loop {
        let now = Instant::now();
        if now >= window.end {
            break trx.commit();
        }
        if now >= next_read {
            let id = w.random(&mut rng);
            match trx.get(w.table, &row_key(id)) {
                Ok(Some(_)) => reads += 1,
                Ok(None) => return Err(format!("the long reader found row {id} missing")),
                Err(e @ TrxError::RolledBack(_)) => break Err(e),
                // A read running while the undo quota closes the view may
                // fail on undo that purge freed; the next call then says
                // the transaction was rolled back.
                Err(e) => {
                    break match trx.get(w.table, &row_key(id)) {
                        Err(again @ TrxError::RolledBack(_)) => {
                            eprintln!("long reader: a read failed ({e}) as it was rolled back");
                            Err(again)
                        }
                        _ => Err(e),
                    }
                }
            }
            next_read += LONG_READER_INTERVAL;
        }
        thread::sleep(
            next_read
                .min(window.end)
                .saturating_duration_since(Instant::now()),
        );
    };
    match result {
        Ok(()) => Ok(LongReader {
            reads,
            rolled_back_at_s: None,
        }),
        Err(TrxError::RolledBack(why)) => {
            let at_s = run_start.elapsed().as_secs_f64();
            eprintln!(
                "long reader: found rolled back by the engine {at_s:.2} s into the run: {why}"
            );
            Ok(LongReader {
                reads,
                rolled_back_at_s: Some(at_s),
            })
        }
        Err(e) => Err(format!("the long reader failed: {e}")),
    }
}

/// One row of the time series.
struct SeriesRow {
    t_s: f64,
    commits_per_s: f64,
    history_len: u64,
    purge_delay_us: u64,
    purge_delays: u64,
    dirty_pages: u64,
    undo_bytes: u64,
    /// None when no transaction finished in the second.
    p99_us: Option<u64>,
    lock_waits: u64,
    deadlocks: u64,
    log_fsyncs: u64,
    level: u8,
}

/// The `--timeseries` CSV file.
struct Timeseries {
    path: PathBuf,
    out: LineWriter<File>,
}

impl Timeseries {
    const HEADER: &'static str = "t_s,commits_per_s,history_len,purge_delay_us,purge_delays,\
                                  dirty_pages,undo_mb,p99_ms,lock_waits,deadlocks,log_fsyncs,level";

    fn create(path: &Path) -> Result<Self, String> {
        let file = File::create(path)
            .map_err(|e| format!("--timeseries {}: cannot create: {e}", path.display()))?;
        let mut series = Self {
            path: path.to_path_buf(),
            out: LineWriter::new(file),
        };
        series.write_line(Self::HEADER)?;
        Ok(series)
    }

    fn write_line(&mut self, line: &str) -> Result<(), String> {
        writeln!(self.out, "{line}")
            .map_err(|e| format!("--timeseries {}: {e}", self.path.display()))
    }

    /// Counters as the change over the row's interval (commits per second),
    /// gauges as they are; an empty p99_ms when no transaction finished.
    fn format(row: &SeriesRow) -> String {
        let p99_ms = row
            .p99_us
            .map_or(String::new(), |us| format!("{:.3}", us as f64 / 1000.0));
        format!(
            "{:.3},{:.1},{},{},{},{},{:.2},{p99_ms},{},{},{},{}",
            row.t_s,
            row.commits_per_s,
            row.history_len,
            row.purge_delay_us,
            row.purge_delays,
            row.dirty_pages,
            row.undo_bytes as f64 / MIB,
            row.lock_waits,
            row.deadlocks,
            row.log_fsyncs,
            row.level,
        )
    }
}

/// Every SAMPLER_TICK: the history length's maximum and the level changes
/// due; every SAMPLE_INTERVAL: one row of the time series (written if there
/// is a file), from the counters' change, the gauges and the workers'
/// latencies of that interval. Runs until `stop`.
fn sampler_loop(
    engine: &Engine,
    changes: &[LevelChange],
    start: &Barrier,
    seconds: &[Mutex<Histogram<u64>>],
    stop: &AtomicBool,
    mut timeseries: Option<Timeseries>,
) -> Result<Sampled, String> {
    let registry = engine.registry();
    let log = engine.store().log();
    let mut changes = changes.to_vec();
    changes.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let mut changes = changes.into_iter().peekable();
    let mut sampled = Sampled {
        history_len_max: 0,
        undo_bytes_max: 0,
    };
    let mut merged = new_histogram();
    let mut write_error = None;
    start.wait();
    let run_start = Instant::now();
    let (mut last_at, mut last) = (run_start, Counters::read(registry));
    let mut next_row = run_start + SAMPLE_INTERVAL;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        sampled.history_len_max = sampled.history_len_max.max(engine.history_len());
        // The row first: a change due at the same instant belongs to the
        // next row's interval.
        if now >= next_row {
            let counters = Counters::read(registry);
            for second in seconds {
                let mut h = second.lock().expect("poisoned");
                merge_latency(&mut merged, &h)?;
                h.reset();
            }
            let d = counters.since(&last);
            let row = SeriesRow {
                t_s: now.duration_since(run_start).as_secs_f64(),
                commits_per_s: d.commits as f64 / now.duration_since(last_at).as_secs_f64(),
                history_len: engine.history_len(),
                purge_delay_us: d.purge_delay_us,
                purge_delays: d.purge_delays,
                dirty_pages: registry.get("buffer_pages_dirty").unwrap_or(0),
                undo_bytes: registry.get("trx_undo_bytes").unwrap_or(0),
                p99_us: (!merged.is_empty()).then(|| merged.value_at_quantile(0.99)),
                lock_waits: d.lock_waits,
                deadlocks: d.lock_deadlocks,
                log_fsyncs: d.log_fsyncs,
                level: log.durability().level(),
            };
            merged.reset();
            sampled.history_len_max = sampled.history_len_max.max(row.history_len);
            sampled.undo_bytes_max = sampled.undo_bytes_max.max(row.undo_bytes);
            if let (Some(series), None) = (&mut timeseries, &write_error) {
                write_error = series.write_line(&Timeseries::format(&row)).err();
            }
            (last_at, last) = (now, counters);
            // A sampler that fell behind skips rows rather than bunching them.
            while next_row <= now {
                next_row += SAMPLE_INTERVAL;
            }
        }
        while let Some(change) = changes.next_if(|c| now >= run_start + secs(c.at_s)) {
            log.set_durability(durability(change.level));
            eprintln!(
                "level {} from {:.2} s into the run (--set-level-at {change})",
                change.level,
                now.duration_since(run_start).as_secs_f64()
            );
        }
        let next_change = changes.peek().map(|c| run_start + secs(c.at_s));
        let wake = next_change
            .into_iter()
            .fold(next_row.min(now + SAMPLER_TICK), Instant::min);
        thread::sleep(wake.saturating_duration_since(Instant::now()));
    }
    sampled.history_len_max = sampled.history_len_max.max(engine.history_len());
    match write_error {
        Some(e) => Err(e),
        None => Ok(sampled),
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// The engine's part of the output.
struct EngineRun {
    load: Loaded,
    measured: Measured,
}

fn run_engine(
    args: &TrxArgs,
    engine: &Arc<Engine>,
    load_threads: u32,
    timeseries: Option<Timeseries>,
) -> Result<EngineRun, String> {
    let table = engine
        .create_table(&[vec![KeyPart::Bytes {
            offset: 0,
            len: K_BYTES,
        }]])
        .map_err(|e| format!("creating the table: {e}"))?;
    let load = load_rows(args.rows, load_threads, "load", |ids, t, loaded, failed| {
        load_ids(engine, table, ids, args.rows, t, loaded, failed)
    })?;
    // The run starts with the load durable and its pages written, so its
    // page writes are the run's own.
    let t0 = Instant::now();
    finish_load(engine.store(), durability(args.level))?;
    eprintln!(
        "loaded {} rows in {:.2} s ({:.0} rows/s, {load_threads} threads, transactions of \
         {LOAD_BATCH_ROWS} rows), flushed and checkpointed in {:.2} s; history_len {}, buffer \
         pool {} MiB",
        load.rows,
        load.seconds,
        load.rows_per_s(),
        t0.elapsed().as_secs_f64(),
        engine.history_len(),
        args.buffer_pool_mb,
    );
    let shared = Shared::new(args, table);
    let measured = run_ops(args, engine, &shared, timeseries)?;
    eprintln!(
        "after the run: history_len {} (at most {}), undo at most {:.1} MiB",
        engine.history_len(),
        measured.sampled.history_len_max,
        measured.sampled.undo_bytes_max as f64 / MIB,
    );
    Ok(EngineRun { load, measured })
}

/// The bare B+tree baseline's result.
struct Baseline {
    ops_per_s: f64,
}

fn run_baseline(
    args: &TrxArgs,
    dir: &Path,
    cpu: &Arc<CpuBudget>,
    load_threads: u32,
) -> Result<Baseline, String> {
    eprintln!(
        "baseline: {} alone on a bare B+tree table (no undo, locks or read views) in {}",
        args.workload.name(),
        dir.display()
    );
    let run = BareRun {
        rows: args.rows,
        threads: args.threads,
        seconds: args.seconds,
        buffer_pool_mb: args.buffer_pool_mb,
        page_size: args.page_size,
        level: args.level,
        store: StoreArgs {
            load_threads: Some(load_threads),
            ..args.store.clone()
        },
        op: args.workload.name(),
    };
    let ops_per_s = bare_ops_per_s(&run, dir, cpu).map_err(|e| format!("baseline: {e}"))?;
    eprintln!("baseline: {ops_per_s:.0} ops/s");
    Ok(Baseline { ops_per_s })
}

// ---------------------------------------------------------------------------
// Output.

impl Report<'_> {
    fn settings(&self) -> Fields {
        let args = self.args;
        let mut f = Fields::new();
        f.string("workload", args.workload.name());
        f.uint("threads", args.threads.into());
        f.float("seconds", args.seconds);
        f.uint("rows", args.rows);
        f.uint("level", args.level.into());
        f.bool("long_reader", args.long_reader);
        f
    }

    fn results(&self) -> Fields {
        let m = &self.engine.measured;
        let c = &m.counters;
        let mut f = Fields::new();
        f.uint("commits", m.commits);
        f.float("commits_per_s", self.commits_per_s());
        // No commit (every writer waiting, wait_writers): no latency at all.
        for (key, us) in latency_summary(&m.latency_us) {
            f.opt_uint(key, (!m.latency_us.is_empty()).then_some(us));
        }
        f.uint("history_len_max", m.sampled.history_len_max);
        f.uint("history_len_end", m.history_len_end);
        f.uint("purge_delay_us_total", c.purge_delay_us);
        f.uint("purge_delays", c.purge_delays);
        f.uint("purge_records", c.purge_records);
        f.uint("deadlocks", m.deadlocks);
        f.uint("lock_timeouts", m.lock_timeouts);
        f.uint("rseg_latch_waits", c.rseg_latch_waits);
        f.float("undo_mb_max", m.sampled.undo_bytes_max as f64 / MIB);
        let rolled_back_at_s = m.long_reader.as_ref().and_then(|r| r.rolled_back_at_s);
        f.bool("long_reader_rolled_back", rolled_back_at_s.is_some());
        f.float("cpu_s", m.cpu_s);
        f.float("cpu_per_commit_us", m.cpu_s * 1e6 / m.commits as f64);
        f.opt_float(
            "baseline_ops_per_s",
            self.baseline.as_ref().map(|b| b.ops_per_s),
        );
        f.opt_float("commits_vs_baseline", self.commits_vs_baseline());
        f
    }

    /// More results and the settings that explain a run, after the results.
    fn more(&self) -> Fields {
        let args = self.args;
        let e = &self.engine;
        let m = &e.measured;
        let c = &m.counters;
        let mut f = Fields::new();
        f.opt_float(
            "long_reader_rolled_back_at_s",
            m.long_reader.as_ref().and_then(|r| r.rolled_back_at_s),
        );
        f.opt_uint("long_reader_reads", m.long_reader.as_ref().map(|r| r.reads));
        f.uint("rollbacks", c.rollbacks);
        f.uint("lock_waits", c.lock_waits);
        f.uint("purge_logs", c.purge_logs);
        f.float("rseg_latch_wait_ms", c.rseg_latch_wait_ns as f64 / 1e6);
        f.uint("page_reads", c.page_reads);
        f.uint("page_writes", c.page_writes);
        f.uint("log_fsyncs", c.log_fsyncs);
        f.float("load_s", e.load.seconds);
        f.float("load_rows_per_s", e.load.rows_per_s());
        f.float("measured_s", m.wall_s);
        let changes: Vec<String> = args.set_level_at.iter().map(|c| c.to_string()).collect();
        f.string("level_changes", &changes.join(","));
        f.uint("buffer_pool_mb", args.buffer_pool_mb);
        f.uint("page_size", args.page_size as u64);
        f.uint("max_purge_lag", args.max_purge_lag);
        f.uint("max_purge_lag_delay_us", args.max_purge_lag_delay_us);
        f.uint("undo_quota_mb", args.undo_quota_mb);
        f.string("undo_quota_policy", args.undo_quota_policy.name());
        f.bool("purge", !args.no_purge);
        f.uint("purge_threads", args.purge_threads);
        f.uint("lock_wait_timeout_ms", args.lock_wait_timeout_ms);
        f.uint("load_threads", self.load_threads.into());
        f.uint("log_capacity_mb", args.store.log_capacity_mb);
        f.string(
            "log_writer_threads",
            &args.store.log_writer_threads.to_string(),
        );
        f.bool("dedicated_writer_threads", self.dedicated_writer_threads);
        f.uint("effective_cpus", self.machine.effective_cpus.into());
        f.push(
            "timeseries",
            args.timeseries
                .as_ref()
                .map_or(Value::Null, |p| Value::Str(p.display().to_string())),
        );
        f
    }

    fn commits_per_s(&self) -> f64 {
        let m = &self.engine.measured;
        m.commits as f64 / m.wall_s
    }

    fn commits_vs_baseline(&self) -> Option<f64> {
        self.baseline
            .as_ref()
            .map(|b| self.commits_per_s() / b.ops_per_s)
    }

    fn all_fields(&self) -> Fields {
        let mut f = self.settings();
        f.extend(self.results());
        f.extend(self.more());
        f
    }
}

fn print_table(report: &Report) {
    print_machine(&report.machine);
    print_settings(report.settings().iter());
    let mut results = report.results();
    results.extend(report.more());
    print_metrics(&results);
    match (report.commits_vs_baseline(), &report.baseline) {
        (Some(ratio), Some(b)) => println!(
            "throughput: {:.0} commits/s is {ratio:.3}x the bare B+tree's {} ({:.0} ops/s)",
            report.commits_per_s(),
            report.args.workload.name(),
            b.ops_per_s
        ),
        _ => println!("throughput: no baseline measured (--no-baseline)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TrxArgs,
    }

    fn parse(argv: &[&str]) -> Result<TrxArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("trx").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn level_changes_parse() {
        let c: LevelChange = "10:2".parse().unwrap();
        assert_eq!(
            c,
            LevelChange {
                at_s: 10.0,
                level: 2
            }
        );
        assert_eq!(c.to_string(), "10:2");
        assert_eq!("2.5:0".parse::<LevelChange>().unwrap().at_s, 2.5);
        assert!("10".parse::<LevelChange>().is_err());
        assert!("10:3".parse::<LevelChange>().is_err());
        assert!("-1:1".parse::<LevelChange>().is_err());
        assert!("x:1".parse::<LevelChange>().is_err());
    }

    #[test]
    fn flags_parse_with_their_defaults() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.workload, Workload::UpdateIndex);
        assert_eq!((a.threads, a.rows, a.level), (16, 100_000, 1));
        assert_eq!(a.undo_quota_policy, QuotaPolicy::RollbackOldest);
        assert!(!a.long_reader && a.set_level_at.is_empty());
        let a = parse(&[
            "--workload",
            "insert",
            "--undo-quota-policy",
            "wait_writers",
            "--set-level-at",
            "10:2",
            "--set-level-at",
            "20:1",
            "--seconds",
            "30",
            "--long-reader",
        ])
        .unwrap();
        assert_eq!(a.workload, Workload::Insert);
        assert_eq!(a.undo_quota_policy, QuotaPolicy::WaitWriters);
        assert_eq!(a.set_level_at.len(), 2);
        assert!(a.long_reader);
        validate(&a).unwrap();
        let late = parse(&["--seconds", "5", "--set-level-at", "5:2"]).unwrap();
        assert!(validate(&late).is_err());
        assert!(parse(&["--workload", "update-index"]).is_err());
    }

    #[test]
    fn a_timeseries_row_has_every_column() {
        let row = SeriesRow {
            t_s: 1.0004,
            commits_per_s: 1234.56,
            history_len: 7,
            purge_delay_us: 0,
            purge_delays: 0,
            dirty_pages: 12,
            undo_bytes: 3 << 20,
            p99_us: Some(2500),
            lock_waits: 1,
            deadlocks: 0,
            log_fsyncs: 99,
            level: 2,
        };
        let line = Timeseries::format(&row);
        assert_eq!(line, "1.000,1234.6,7,0,0,12,3.00,2.500,1,0,99,2");
        let columns = Timeseries::HEADER.split(',').count();
        assert_eq!(columns, 12);
        assert_eq!(line.split(',').count(), columns);
        let idle = Timeseries::format(&SeriesRow {
            p99_us: None,
            ..row
        });
        assert_eq!(idle.split(',').nth(7), Some(""));
    }

    #[test]
    fn values_carry_k_big_endian() {
        let mut rng = SplitMix64::new(1);
        let v = new_value(0x0102_0304_0506_0708, &mut rng);
        assert_eq!(v.len(), 188);
        assert_eq!(&v[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(v[8..].iter().all(u8::is_ascii_digit));
    }

    /// The whole run on a small table, on the disk: load, workers, long
    /// reader, sampler, level changes, shutdown (no baseline).
    #[test]
    fn a_short_run_with_a_long_reader() {
        let dir = std::env::temp_dir().join(format!("millrace-trx-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("series.csv");
        let csv_arg = csv.to_str().unwrap();
        let args = parse(&[
            "--rows",
            "2000",
            "--threads",
            "3",
            "--seconds",
            "2.2",
            "--buffer-pool-mb",
            "16",
            "--page-size",
            "4096",
            "--log-capacity-mb",
            "16",
            "--long-reader",
            "--set-level-at",
            "1.5:2",
            "--timeseries",
            csv_arg,
            "--no-baseline",
        ])
        .unwrap();
        validate(&args).unwrap();
        let run_dir = dir.join("run");
        std::fs::create_dir_all(&run_dir).unwrap();
        let report = run_in(&args, &run_dir);
        let series = std::fs::read_to_string(&csv).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        let report = report.unwrap();
        let m = &report.engine.measured;
        assert!(m.commits > 0);
        assert!(m.long_reader.as_ref().is_some_and(|r| r.reads >= 2));
        assert!(m.sampled.history_len_max > 0, "the long reader holds purge");
        let lines: Vec<&str> = series.lines().collect();
        assert_eq!(lines[0], Timeseries::HEADER);
        assert!(lines.len() >= 3, "{series}");
        assert!(lines[1].ends_with(",1") && lines.last().unwrap().ends_with(",2"));
        let json = report.all_fields().to_json_line();
        assert!(json.contains("\"commits_vs_baseline\":null"));
    }
}
