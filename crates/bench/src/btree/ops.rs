//! The measured runs: the engine's (a fresh page store: load, the mix,
//! the check of both indexes) and the baseline's (the same on BTreeMaps),
//! and one operation alone on the bare B+tree for `bench trx`'s baseline.

use super::args::{BtreeArgs, Op};
use super::tables::{EngineTable, MapTable};
use super::workload::{insert, load, point_select, update_index, Table, Workload, SEED};
use crate::measure::{
    check_registered, counters, measure_window, merge_latency, new_histogram, Window, MIB,
};
use crate::output::RunOutput;
use crate::store::{
    durability, finish_load, open_storage, store_config, thread_rng, validate_store, Loaded,
    StoreArgs,
};
use hdrhistogram::Histogram;
use millrace_buf::PageStore;
use millrace_metrics::Registry;
use millrace_redo::Durability;
use millrace_sys::cpu::CpuBudget;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

pub(super) fn open_and_run_engine(
    args: &BtreeArgs,
    run_dir: &Path,
    cpu: &Arc<CpuBudget>,
    registry: &Registry,
    load_threads: u32,
) -> Result<(TreeRun, bool), String> {
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
pub(crate) struct BareRun {
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
pub(crate) fn bare_ops_per_s(
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
counters! {
    /// The store's counters this bench reports, at one moment.
    pub(super) struct Counters {
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
pub(super) fn read_counters(registry: Option<&Registry>) -> Counters {
    registry.map_or_else(Counters::default, Counters::read)
}

/// What one worker saw.
pub(super) struct Tally {
    /// Operations after the warm-up, by `Op`.
    pub(super) ops: [u64; 3],
    pub(super) races: u64,
    /// Races during the whole run, the warm-up included.
    pub(super) all_races: u64,
    pub(super) latency_us: Histogram<u64>,
}

/// The measured window, all threads together.
pub(super) struct Measured {
    pub(super) ops: [u64; 3],
    pub(super) races: u64,
    pub(super) all_races: u64,
    pub(super) wall_s: f64,
    pub(super) cpu_s: f64,
    pub(super) latency_us: Histogram<u64>,
    pub(super) counters: Counters,
}

impl Measured {
    pub(super) fn total_ops(&self) -> u64 {
        self.ops.iter().sum()
    }
}

pub(super) fn run_ops<T: Table>(
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

pub(super) fn worker_loop<T: Table>(
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
pub(super) struct TreeRun {
    pub(super) load: Loaded,
    /// Pages of the system space and the table's space after the load.
    pub(super) data_bytes: u64,
    pub(super) measured: Measured,
}

pub(super) fn run_engine(
    args: &BtreeArgs,
    store: &PageStore,
    registry: &Registry,
    load_threads: u32,
) -> Result<TreeRun, String> {
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
    Ok(TreeRun {
        load,
        data_bytes,
        measured,
    })
}

/// The BTreeMap baseline's result.
pub(super) struct Baseline {
    pub(super) ops_per_s: f64,
}

pub(super) fn run_baseline(args: &BtreeArgs, load_threads: u32) -> Result<Baseline, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::RunOutput;
    use crate::store::StoreArgs;
    use millrace_redo::WriterThreads;

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
