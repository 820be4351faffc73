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

use super::{
    check_registered, counters, durability, finish_load, load_rows, measure_window, merge_latency,
    new_histogram, open_storage, print_machine, print_metrics, print_settings, random_digits,
    release_freed_memory, store_config, thread_rng, validate_store, Fields, Loaded, RunOutput,
    StoreArgs, Window, MIB,
};
use clap::Args;
use hdrhistogram::Histogram;
use millrace_btree::{CheckReport, Error as TreeError, Index};
use millrace_buf::{space, PageStore};
use millrace_metrics::Registry;
use millrace_redo::Durability;
use millrace_sys::cpu::{CpuBudget, CpuProbe, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The tablespace of the table's two indexes.
const SPACE: u32 = 1;
/// sysbench's columns: k BIGINT, c CHAR(120), pad CHAR(60).
const C_BYTES: usize = 120;
const PAD_BYTES: usize = 60;
const ROW_BYTES: usize = 8 + C_BYTES + PAD_BYTES;
/// Seeds the row contents and the operations, so that the engine and the
/// baseline load the same rows and run the same sequence per thread.
const SEED: u64 = 0x6d69_6c6c_7261_6365;

#[derive(Args, Debug)]
pub struct BtreeArgs {
    /// Rows loaded before the run (ids 1..=rows, k random in 1..=rows).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    rows: u64,
    /// Threads running the operation mix.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Length of the run in seconds, the 0.5 s warm-up included (the baseline
    /// runs as long again).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Size of the buffer pool, MiB.
    #[arg(long, default_value_t = 64)]
    buffer_pool_mb: u64,
    /// Page size in bytes: 4096, 8192, 16384 or 32768.
    #[arg(long, default_value_t = 16384)]
    page_size: usize,
    /// flush_log_at_trx_commit for the run: 0 waits for nothing, 1 for the
    /// flush, 2 for the write. The load always runs at 0.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    level: u8,
    #[command(flatten)]
    store: StoreArgs,
    /// Relative weights of the operations; one not named has weight 0.
    #[arg(long, default_value = "update_index=1,insert=1,point_select=1", value_parser = parse_mix)]
    mix: Mix,
    /// Skip the BTreeMap baseline.
    #[arg(long)]
    no_baseline: bool,
    #[command(flatten)]
    out: RunOutput,
}

fn parse_mix(s: &str) -> Result<Mix, String> {
    s.parse()
}

pub fn run(args: &BtreeArgs) -> Result<(), String> {
    validate_store(args.seconds, args.buffer_pool_mb, &args.store)?;
    args.out.run(
        "btree",
        |dir| run_in(args, dir),
        |r| r.all_fields(),
        print_table,
    )
}

/// Everything the output is made of.
struct Report<'a> {
    args: &'a BtreeArgs,
    machine: CpuSnapshot,
    load_threads: u32,
    dedicated_writer_threads: bool,
    engine: Engine,
    baseline: Option<Baseline>,
}

fn run_in<'a>(args: &'a BtreeArgs, run_dir: &Path) -> Result<Report<'a>, String> {
    let registry = Registry::new();
    let cpu = CpuBudget::start(CpuProbe::system(), Duration::from_secs(1));
    let load_threads = args.store.load_threads(&cpu);
    let (engine, dedicated_writer_threads) =
        open_and_run_engine(args, run_dir, &cpu, &registry, load_threads)?;
    // The store (and its buffer pool's memory) is gone before the baseline.
    release_freed_memory();
    let baseline = if args.no_baseline {
        None
    } else {
        Some(run_baseline(args, load_threads)?)
    };
    Ok(Report {
        args,
        machine: cpu.snapshot(),
        load_threads,
        dedicated_writer_threads,
        engine,
        baseline,
    })
}

/// Opens a store in `run_dir`, runs the engine part (load, operations,
/// check) and shuts the store down. Returns the result and whether the log
/// had dedicated writer threads.
fn open_and_run_engine(
    args: &BtreeArgs,
    run_dir: &Path,
    cpu: &Arc<CpuBudget>,
    registry: &Registry,
    load_threads: u32,
) -> Result<(Engine, bool), String> {
    let storage = open_storage(run_dir, false)?;
    let config = store_config(
        args.page_size,
        args.buffer_pool_mb,
        &args.store,
        durability(args.level),
    );
    let (store, _) = PageStore::open(Arc::new(storage), config, cpu.clone(), registry)
        .map_err(|e| format!("opening the page store: {e}"))?;
    let engine = check_registered(registry, Counters::NAMES, "the store")
        .and_then(|()| run_engine(args, &store, registry, load_threads));
    let shutdown = store.shutdown();
    let engine = engine?;
    shutdown.map_err(|e| format!("shutting the page store down: {e}"))?;
    Ok((engine, store.log().dedicated_writer_threads()))
}

/// One operation of the mix alone on the bare B+tree table, as this bench's
/// engine part runs it: `bench trx`'s baseline without transactions.
pub(super) struct BareRun {
    pub rows: u64,
    pub threads: u32,
    pub seconds: f64,
    pub buffer_pool_mb: u64,
    pub page_size: usize,
    pub level: u8,
    /// The caller's, with `load_threads` set to what its run used.
    pub store: StoreArgs,
    /// "update_index" or "insert".
    pub op: &'static str,
}

/// Runs `run` in a fresh store in `dir` (load at level 0, then `op` alone
/// on `threads` threads, each ending with a commit wait at `level`, then the
/// check of both indexes) and returns its operations per second.
pub(super) fn bare_ops_per_s(
    run: &BareRun,
    dir: &Path,
    cpu: &Arc<CpuBudget>,
) -> Result<f64, String> {
    let args = BtreeArgs {
        rows: run.rows,
        threads: run.threads,
        seconds: run.seconds,
        buffer_pool_mb: run.buffer_pool_mb,
        page_size: run.page_size,
        level: run.level,
        store: run.store.clone(),
        mix: format!("{}=1", run.op).parse()?,
        no_baseline: true,
        out: RunOutput {
            dir: None,
            keep: false,
            json: true,
        },
    };
    validate_store(args.seconds, args.buffer_pool_mb, &args.store)?;
    let registry = Registry::new();
    let load_threads = args.store.load_threads(cpu);
    let (engine, _) = open_and_run_engine(&args, dir, cpu, &registry, load_threads)?;
    let m = &engine.measured;
    Ok(m.total_ops() as f64 / m.wall_s)
}

// ---------------------------------------------------------------------------
// The operations.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    UpdateIndex = 0,
    Insert = 1,
    PointSelect = 2,
}

impl Op {
    const ALL: [Op; 3] = [Op::UpdateIndex, Op::Insert, Op::PointSelect];

    fn name(self) -> &'static str {
        match self {
            Op::UpdateIndex => "update_index",
            Op::Insert => "insert",
            Op::PointSelect => "point_select",
        }
    }
}

/// Relative weights of the operations, in the order of `Op::ALL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    weights: [u32; 3],
}

impl Mix {
    fn total(&self) -> u64 {
        self.weights.iter().map(|&w| u64::from(w)).sum()
    }

    fn pick(&self, rng: &mut SplitMix64) -> Op {
        let mut x = rng.below(self.total());
        for (op, &w) in Op::ALL.iter().zip(&self.weights) {
            if x < u64::from(w) {
                return *op;
            }
            x -= u64::from(w);
        }
        unreachable!("x is below the sum of the weights")
    }
}

impl FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut weights = [None; 3];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("mix entry {part:?} is not name=weight"))?;
            let op = Op::ALL
                .iter()
                .find(|op| op.name() == name.trim())
                .ok_or_else(|| {
                    format!("mix: unknown operation {name:?} (update_index, insert, point_select)")
                })?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|e| format!("mix: weight of {name}: {e}"))?;
            if weights[*op as usize].replace(weight).is_some() {
                return Err(format!("mix: {name} is given twice"));
            }
        }
        let mix = Mix {
            weights: weights.map(|w| w.unwrap_or(0)),
        };
        if mix.total() == 0 {
            return Err("mix: at least one weight must be positive".into());
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = Op::ALL
            .iter()
            .zip(&self.weights)
            .map(|(op, w)| format!("{}={w}", op.name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// The table's two indexes, in the engine or in memory: the load and the
/// operations are written once against this.
trait Table: Sync {
    /// The row's value, if the row exists.
    fn get(&self, id: u64) -> Result<Option<Vec<u8>>, String>;
    fn insert_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String>;
    fn update_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String>;
    /// Removes a secondary entry; false if there was none.
    fn delete_entry(&self, key: &[u8]) -> Result<bool, String>;
    /// Adds a secondary entry; false if it was there already.
    fn insert_entry(&self, key: &[u8]) -> Result<bool, String>;
    /// Waits until every change made so far is as durable as asked.
    fn commit(&self) -> Result<(), String>;
}

fn row_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// k then id, both big-endian: entries sort by k, then by id.
fn entry_key(k: u64, id: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&k.to_be_bytes());
    key[8..].copy_from_slice(&id.to_be_bytes());
    key
}

/// k (u64 little-endian), then c and pad as random digits.
fn new_row(k: u64, rng: &mut SplitMix64) -> Vec<u8> {
    let mut row = vec![0u8; ROW_BYTES];
    row[..8].copy_from_slice(&k.to_le_bytes());
    random_digits(&mut row[8..], rng);
    row
}

fn row_k(id: u64, row: &[u8]) -> Result<u64, String> {
    row.get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| format!("row {id} has {} bytes, fewer than k", row.len()))
}

/// What every worker shares.
struct Workload {
    rows: u64,
    mix: Mix,
    seconds: f64,
    /// The id of the next inserted row.
    next_id: AtomicU64,
}

impl Workload {
    fn new(args: &BtreeArgs) -> Self {
        Self {
            rows: args.rows,
            mix: args.mix,
            seconds: args.seconds,
            next_id: AtomicU64::new(args.rows + 1),
        }
    }

    /// An id of the loaded range, or a k.
    fn random(&self, rng: &mut SplitMix64) -> u64 {
        1 + rng.below(self.rows)
    }

    /// Rows in the table: the loaded ones and every insert so far.
    fn rows_now(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst) - 1
    }
}

/// Moves one row's secondary entry to a new k. Returns the races seen:
/// with no row locks, two threads updating one row may find its entry gone
/// or its new entry already there.
fn update_index<T: Table>(
    table: &T,
    w: &Workload,
    rng: &mut SplitMix64,
    trx_id: u64,
    roll_ptr: u64,
) -> Result<u64, String> {
    let id = w.random(rng);
    let mut row = table
        .get(id)?
        .ok_or_else(|| format!("row {id} is missing"))?;
    let old_k = row_k(id, &row)?;
    let new_k = w.random(rng);
    let mut races = 0;
    if !table.delete_entry(&entry_key(old_k, id))? {
        races += 1;
    }
    if !table.insert_entry(&entry_key(new_k, id))? {
        races += 1;
    }
    row[..8].copy_from_slice(&new_k.to_le_bytes());
    table.update_row(id, &row, trx_id, roll_ptr)?;
    table.commit()?;
    Ok(races)
}

fn insert<T: Table>(
    table: &T,
    w: &Workload,
    rng: &mut SplitMix64,
    trx_id: u64,
    roll_ptr: u64,
) -> Result<(), String> {
    let id = w.next_id.fetch_add(1, Ordering::SeqCst);
    let k = w.random(rng);
    table.insert_row(id, &new_row(k, rng), trx_id, roll_ptr)?;
    if !table.insert_entry(&entry_key(k, id))? {
        return Err(format!(
            "the secondary entry of the new row {id} exists already"
        ));
    }
    table.commit()
}

fn point_select<T: Table>(table: &T, w: &Workload, rng: &mut SplitMix64) -> Result<(), String> {
    let id = w.random(rng);
    match table.get(id)? {
        Some(_) => Ok(()),
        None => Err(format!("row {id} is missing")),
    }
}

// ---------------------------------------------------------------------------
// The engine's table and the baseline's.

struct EngineTable<'s> {
    store: &'s PageStore,
    clustered: Index,
    secondary: Index,
}

impl<'s> EngineTable<'s> {
    fn create(store: &'s PageStore) -> Result<Self, String> {
        let mut mtr = store
            .mtr()
            .map_err(|e| format!("creating space {SPACE}: {e}"))?;
        // Draw the id from the system space's counter, so the store-wide
        // check (`millrace check`) knows the space exists.
        let id =
            space::next_space_id(&mut mtr).map_err(|e| format!("creating space {SPACE}: {e}"))?;
        if id != SPACE {
            return Err(format!(
                "a fresh store handed out space id {id}, expected {SPACE}"
            ));
        }
        space::create_space(&mut mtr, SPACE).map_err(|e| format!("creating space {SPACE}: {e}"))?;
        mtr.commit()
            .map_err(|e| format!("creating space {SPACE}: {e}"))?;
        let clustered = Index::create(store, SPACE, true)
            .map_err(|e| format!("creating the clustered index: {e}"))?;
        let secondary = Index::create(store, SPACE, false)
            .map_err(|e| format!("creating the secondary index: {e}"))?;
        let max = clustered.max_record_bytes(store);
        if row_key(0).len() + ROW_BYTES > max {
            return Err(format!(
                "a row of {} bytes exceeds the largest record of a {} byte page, {max}",
                row_key(0).len() + ROW_BYTES,
                store.pool().page_size()
            ));
        }
        Ok(Self {
            store,
            clustered,
            secondary,
        })
    }

    /// Checks both indexes (no thread may be running operations) and that
    /// the clustered index holds every row.
    fn check(&self, rows: u64, races: u64) -> Result<(), String> {
        let mut reports: Vec<CheckReport> = Vec::new();
        for (name, index) in [
            ("clustered", &self.clustered),
            ("secondary", &self.secondary),
        ] {
            let r = index
                .check(self.store)
                .map_err(|e| format!("the check of the {name} index failed: {e}"))?;
            eprintln!(
                "check {name}: {} records ({} delete-marked), {} pages ({} leaves), {} levels, \
                 fill_pct {}",
                r.records, r.deleted_records, r.pages, r.leaf_pages, r.levels, r.fill_pct
            );
            reports.push(r);
        }
        let (clustered, secondary) = (&reports[0], &reports[1]);
        if clustered.records != rows {
            return Err(format!(
                "the clustered index holds {} records, but {rows} rows were loaded or inserted",
                clustered.records
            ));
        }
        if secondary.records != rows {
            eprintln!(
                "note: {} secondary entries for {rows} rows: concurrent updates of one row \
                 (no row locks yet; {races} races seen) leave stale or missing entries",
                secondary.records
            );
        }
        Ok(())
    }

    /// (pages, free pages) of the system space and the table's space.
    fn space_pages(&self) -> Result<(u64, u64), String> {
        let err = |e: millrace_buf::Error| format!("reading the space sizes: {e}");
        let mut mtr = self.store.mtr().map_err(err)?;
        let (mut pages, mut free) = (0, 0);
        for s in [space::SYSTEM_SPACE, SPACE] {
            let (size, n_free) = space::space_size(&mut mtr, s).map_err(err)?;
            pages += u64::from(size);
            free += u64::from(n_free);
        }
        mtr.commit().map_err(err)?;
        Ok((pages, free))
    }
}

impl Table for EngineTable<'_> {
    fn get(&self, id: u64) -> Result<Option<Vec<u8>>, String> {
        self.clustered
            .get(self.store, &row_key(id))
            .map(|row| row.map(|r| r.value))
            .map_err(|e| format!("reading row {id}: {e}"))
    }

    fn insert_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String> {
        self.clustered
            .insert(self.store, &row_key(id), row, trx_id, roll_ptr)
            .map_err(|e| format!("inserting row {id}: {e}"))
    }

    fn update_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String> {
        match self
            .clustered
            .update(self.store, &row_key(id), row, trx_id, roll_ptr)
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("updating row {id}: it is missing")),
            Err(e) => Err(format!("updating row {id}: {e}")),
        }
    }

    fn delete_entry(&self, key: &[u8]) -> Result<bool, String> {
        self.secondary
            .delete(self.store, key)
            .map_err(|e| format!("deleting a secondary entry: {e}"))
    }

    fn insert_entry(&self, key: &[u8]) -> Result<bool, String> {
        match self.secondary.insert(self.store, key, &[], 0, 0) {
            Ok(()) => Ok(true),
            Err(TreeError::Duplicate) => Ok(false),
            Err(e) => Err(format!("inserting a secondary entry: {e}")),
        }
    }

    fn commit(&self) -> Result<(), String> {
        let log = self.store.log();
        log.wait_durable(log.current_lsn())
            .map_err(|e| format!("commit: {e}"))
    }
}

/// The baseline: the same two indexes as ordered maps in memory, each under
/// one mutex, with no durability.
#[derive(Default)]
struct MapTable {
    clustered: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    secondary: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Table for MapTable {
    fn get(&self, id: u64) -> Result<Option<Vec<u8>>, String> {
        let map = self.clustered.lock().expect("poisoned");
        Ok(map.get(row_key(id).as_slice()).cloned())
    }

    fn insert_row(&self, id: u64, row: &[u8], _: u64, _: u64) -> Result<(), String> {
        let mut map = self.clustered.lock().expect("poisoned");
        match map.insert(row_key(id).to_vec(), row.to_vec()) {
            None => Ok(()),
            Some(_) => Err(format!("inserting row {id}: it exists already")),
        }
    }

    fn update_row(&self, id: u64, row: &[u8], _: u64, _: u64) -> Result<(), String> {
        let mut map = self.clustered.lock().expect("poisoned");
        match map.get_mut(row_key(id).as_slice()) {
            Some(value) => {
                value.clear();
                value.extend_from_slice(row);
                Ok(())
            }
            None => Err(format!("updating row {id}: it is missing")),
        }
    }

    fn delete_entry(&self, key: &[u8]) -> Result<bool, String> {
        let mut map = self.secondary.lock().expect("poisoned");
        Ok(map.remove(key).is_some())
    }

    fn insert_entry(&self, key: &[u8]) -> Result<bool, String> {
        let mut map = self.secondary.lock().expect("poisoned");
        if map.contains_key(key) {
            return Ok(false);
        }
        map.insert(key.to_vec(), Vec::new());
        Ok(true)
    }

    fn commit(&self) -> Result<(), String> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The load.

/// Inserts rows 1..=rows, ids ascending in each thread's range, printing
/// the progress every second.
fn load<T: Table>(table: &T, rows: u64, threads: u32, label: &str) -> Result<Loaded, String> {
    load_rows(rows, threads, label, |ids, t, loaded, failed| {
        load_ids(table, ids, rows, t, loaded, failed)
    })
}

fn load_ids<T: Table>(
    table: &T,
    ids: Range<u64>,
    rows: u64,
    thread: u32,
    loaded: &AtomicU64,
    failed: &AtomicBool,
) -> Result<(), String> {
    let mut rng = thread_rng(SEED, thread);
    for id in ids {
        if failed.load(Ordering::Relaxed) {
            // Another loader failed; its error is the one reported.
            return Ok(());
        }
        let k = 1 + rng.below(rows);
        table.insert_row(id, &new_row(k, &mut rng), 0, 0)?;
        if !table.insert_entry(&entry_key(k, id))? {
            return Err(format!("the secondary entry of row {id} exists already"));
        }
        loaded.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The run and its measurements.

counters! {
    /// The store's counters this bench reports, at one moment.
    struct Counters {
        page_reads: "buffer_page_reads",
        page_writes: "buffer_page_writes",
        lru_evictions: "buffer_lru_evictions",
        flush_adaptive: "buffer_flush_adaptive",
        flush_lru: "buffer_flush_lru",
        doublewrite_bytes: "buffer_doublewrite_bytes",
        page_latch_waits: "buffer_page_latch_waits",
        log_fsyncs: "log_fsyncs",
    }
}

/// The counters, none for the baseline.
fn read_counters(registry: Option<&Registry>) -> Counters {
    registry.map_or_else(Counters::default, Counters::read)
}

/// What one worker saw.
struct Tally {
    /// Operations after the warm-up, by `Op`.
    ops: [u64; 3],
    races: u64,
    /// Races during the whole run, the warm-up included.
    all_races: u64,
    latency_us: Histogram<u64>,
}

/// The measured window, all threads together.
struct Measured {
    ops: [u64; 3],
    races: u64,
    all_races: u64,
    wall_s: f64,
    cpu_s: f64,
    latency_us: Histogram<u64>,
    counters: Counters,
}

impl Measured {
    fn total_ops(&self) -> u64 {
        self.ops.iter().sum()
    }
}

fn run_ops<T: Table>(
    table: &T,
    w: &Workload,
    threads: u32,
    registry: Option<&Registry>,
) -> Result<Measured, String> {
    let start = Barrier::new(threads as usize + 1);
    thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                s.spawn(move || worker_loop(table, w, t, start))
            })
            .collect();
        let (tallies, before, after) =
            measure_window(&start, w.seconds, workers, || read_counters(registry));

        let mut measured = Measured {
            ops: [0; 3],
            races: 0,
            all_races: 0,
            wall_s: after.wall_s_since(&before),
            cpu_s: after.cpu_s_since(&before),
            latency_us: new_histogram(),
            counters: after.counters.since(&before.counters),
        };
        for tally in tallies {
            let tally = tally.map_err(|_| "a worker thread panicked".to_string())??;
            for (sum, n) in measured.ops.iter_mut().zip(tally.ops) {
                *sum += n;
            }
            measured.races += tally.races;
            measured.all_races += tally.all_races;
            merge_latency(&mut measured.latency_us, &tally.latency_us)?;
        }
        Ok(measured)
    })
}

fn worker_loop<T: Table>(
    table: &T,
    w: &Workload,
    thread: u32,
    start: &Barrier,
) -> Result<Tally, String> {
    let mut rng = thread_rng(!SEED, thread);
    let trx_id = u64::from(thread) + 1;
    let mut tally = Tally {
        ops: [0; 3],
        races: 0,
        all_races: 0,
        latency_us: new_histogram(),
    };
    let mut op_no = 0u64;
    start.wait();
    let window = Window::starting_now(w.seconds);
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let op = w.mix.pick(&mut rng);
        op_no += 1;
        let races = match op {
            Op::UpdateIndex => update_index(table, w, &mut rng, trx_id, op_no)?,
            Op::Insert => insert(table, w, &mut rng, trx_id, op_no).map(|()| 0)?,
            Op::PointSelect => point_select(table, w, &mut rng).map(|()| 0)?,
        };
        tally.all_races += races;
        if t0 >= window.warmup_end {
            tally
                .latency_us
                .saturating_record(t0.elapsed().as_micros() as u64);
            tally.ops[op as usize] += 1;
            tally.races += races;
        }
    }
}

/// The engine's part of the output.
struct Engine {
    load: Loaded,
    /// Pages of the system space and the table's space after the load.
    data_bytes: u64,
    measured: Measured,
}

fn run_engine(
    args: &BtreeArgs,
    store: &PageStore,
    registry: &Registry,
    load_threads: u32,
) -> Result<Engine, String> {
    let table = EngineTable::create(store)?;
    let log = store.log();
    log.set_durability(Durability::Lazy);
    let load = load(&table, args.rows, load_threads, "load")?;
    // The run starts with the load durable and its pages written, so its
    // page writes are the run's own.
    let t0 = Instant::now();
    finish_load(store, durability(args.level))?;
    let (pages, free) = table.space_pages()?;
    let data_bytes = pages * store.pool().page_size() as u64;
    eprintln!(
        "loaded {} rows in {:.2} s ({:.0} rows/s, {load_threads} threads), flushed and \
         checkpointed in {:.2} s; data {:.1} MiB ({pages} pages, {free} free), buffer pool {} MiB",
        load.rows,
        load.seconds,
        load.rows_per_s(),
        t0.elapsed().as_secs_f64(),
        data_bytes as f64 / MIB,
        args.buffer_pool_mb,
    );
    let workload = Workload::new(args);
    let measured = run_ops(&table, &workload, args.threads, Some(registry))?;
    let (pages, free) = table.space_pages()?;
    eprintln!(
        "after the run: data {:.1} MiB ({pages} pages, {free} free)",
        (pages * store.pool().page_size() as u64) as f64 / MIB
    );
    table.check(workload.rows_now(), measured.all_races)?;
    Ok(Engine {
        load,
        data_bytes,
        measured,
    })
}

/// The BTreeMap baseline's result.
struct Baseline {
    ops_per_s: f64,
}

fn run_baseline(args: &BtreeArgs, load_threads: u32) -> Result<Baseline, String> {
    let table = MapTable::default();
    load(&table, args.rows, load_threads, "baseline load")?;
    let workload = Workload::new(args);
    let m = run_ops(&table, &workload, args.threads, None)?;
    let ops_per_s = m.total_ops() as f64 / m.wall_s;
    eprintln!(
        "baseline (BTreeMaps under a mutex): {} ops in {:.2} s, {ops_per_s:.0} ops/s, {} races",
        m.total_ops(),
        m.wall_s,
        m.races
    );
    Ok(Baseline { ops_per_s })
}

// ---------------------------------------------------------------------------
// Output.

impl Report<'_> {
    fn settings(&self) -> Fields {
        let args = self.args;
        let mut f = Fields::new();
        f.uint("threads", args.threads.into());
        f.float("seconds", args.seconds);
        f.uint("rows", args.rows);
        f.uint("buffer_pool_mb", args.buffer_pool_mb);
        f.uint("page_size", args.page_size as u64);
        f.uint("level", args.level.into());
        f
    }

    fn results(&self) -> Fields {
        let e = &self.engine;
        let m = &e.measured;
        let c = &m.counters;
        let ops = m.total_ops();
        let mut f = Fields::new();
        f.float("data_mb", e.data_bytes as f64 / MIB);
        f.uint("ops", ops);
        f.float("ops_per_s", self.ops_per_s());
        f.latency(&m.latency_us);
        f.uint("update_index_ops", m.ops[Op::UpdateIndex as usize]);
        f.uint("insert_ops", m.ops[Op::Insert as usize]);
        f.uint("point_select_ops", m.ops[Op::PointSelect as usize]);
        f.uint("races", m.races);
        f.uint("page_reads", c.page_reads);
        f.uint("page_writes", c.page_writes);
        f.uint("lru_evictions", c.lru_evictions);
        f.uint("flush_adaptive", c.flush_adaptive);
        f.uint("flush_lru", c.flush_lru);
        f.float("doublewrite_mb", c.doublewrite_bytes as f64 / MIB);
        f.uint("page_latch_waits", c.page_latch_waits);
        f.uint("log_fsyncs", c.log_fsyncs);
        f.float("cpu_s", m.cpu_s);
        f.float("cpu_per_op_us", m.cpu_s * 1e6 / ops as f64);
        f.float("load_s", e.load.seconds);
        f.float("load_rows_per_s", e.load.rows_per_s());
        f.opt_float(
            "baseline_ops_per_s",
            self.baseline.as_ref().map(|b| b.ops_per_s),
        );
        f.opt_float("ops_vs_baseline", self.ops_vs_baseline());
        f
    }

    /// Settings and facts that explain a run, after the results.
    fn more_settings(&self) -> Fields {
        let args = self.args;
        let mut f = Fields::new();
        f.float("measured_s", self.engine.measured.wall_s);
        f.string("mix", &args.mix.to_string());
        f.uint("load_threads", self.load_threads.into());
        f.uint("log_capacity_mb", args.store.log_capacity_mb);
        f.string(
            "log_writer_threads",
            &args.store.log_writer_threads.to_string(),
        );
        f.bool("dedicated_writer_threads", self.dedicated_writer_threads);
        f.uint("effective_cpus", self.machine.effective_cpus.into());
        f
    }

    fn ops_per_s(&self) -> f64 {
        let m = &self.engine.measured;
        m.total_ops() as f64 / m.wall_s
    }

    fn ops_vs_baseline(&self) -> Option<f64> {
        self.baseline
            .as_ref()
            .map(|b| self.ops_per_s() / b.ops_per_s)
    }

    fn all_fields(&self) -> Fields {
        let mut f = self.settings();
        f.extend(self.results());
        f.extend(self.more_settings());
        f
    }
}

fn print_table(report: &Report) {
    print_machine(&report.machine);
    let mut settings = report.settings();
    settings.extend(report.more_settings());
    print_settings(settings.iter().filter(|(k, _)| *k != "measured_s"));
    print_metrics(&report.results());
    let data_mb = report.engine.data_bytes as f64 / MIB;
    println!(
        "data: {data_mb:.1} MiB after the load, buffer pool {} MiB ({:.2}x the data)",
        report.args.buffer_pool_mb,
        report.args.buffer_pool_mb as f64 / data_mb
    );
    match (report.ops_vs_baseline(), &report.baseline) {
        (Some(ratio), Some(b)) => println!(
            "throughput: {:.0} ops/s is {ratio:.3}x the BTreeMaps under a mutex ({:.0} ops/s)",
            report.ops_per_s(),
            b.ops_per_s
        ),
        _ => println!("throughput: no baseline measured (--no-baseline)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_redo::WriterThreads;

    #[test]
    fn mix_parses_and_prints() {
        let mix: Mix = "update_index=2, point_select=1".parse().unwrap();
        assert_eq!(mix.weights, [2, 0, 1]);
        assert_eq!(mix.to_string(), "update_index=2,insert=0,point_select=1");
        assert!("insert=0".parse::<Mix>().is_err());
        assert!("insert=1,insert=2".parse::<Mix>().is_err());
        assert!("delete=1".parse::<Mix>().is_err());
        assert!("insert".parse::<Mix>().is_err());
    }

    #[test]
    fn mix_picks_only_weighted_operations() {
        let mix: Mix = "insert=1,point_select=3".parse().unwrap();
        let mut rng = SplitMix64::new(1);
        let mut seen = [0u64; 3];
        for _ in 0..4000 {
            seen[mix.pick(&mut rng) as usize] += 1;
        }
        assert_eq!(seen[Op::UpdateIndex as usize], 0);
        assert!(seen[Op::PointSelect as usize] > 2 * seen[Op::Insert as usize]);
    }

    #[test]
    fn the_workload_runs_on_the_baseline() {
        let args = BtreeArgs {
            rows: 500,
            threads: 3,
            seconds: 0.6,
            buffer_pool_mb: 64,
            page_size: 16384,
            level: 1,
            store: StoreArgs {
                log_capacity_mb: 256,
                log_writer_threads: WriterThreads::Auto,
                load_threads: None,
            },
            mix: "update_index=1,insert=1,point_select=1".parse().unwrap(),
            no_baseline: false,
            out: RunOutput {
                dir: None,
                keep: false,
                json: true,
            },
        };
        let table = MapTable::default();
        load(&table, args.rows, 2, "test load").unwrap();
        let w = Workload::new(&args);
        let m = run_ops(&table, &w, args.threads, None).unwrap();
        assert!(m.total_ops() > 0);
        let rows = table.clustered.lock().unwrap().len() as u64;
        assert_eq!(rows, w.rows_now());
    }
}
