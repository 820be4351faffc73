//! The engine's run (load, workers, the long reader and the sampler over
//! the measured window) and the bare B+tree baseline.

use super::args::{TrxArgs, Workload};
use super::series::{sampler_loop, Counters, Sampled, Timeseries};
use super::workload::{
    insert, load_ids, row_key, update_index, Shared, K_BYTES, LOAD_BATCH_ROWS, SEED,
};
use crate::btree::{bare_ops_per_s, BareRun};
use crate::measure::{measure_window, merge_latency, new_histogram, Window, MIB};
use crate::store::{durability, finish_load, load_rows, thread_rng, Loaded, StoreArgs};
use hdrhistogram::Histogram;
use millrace_sys::cpu::CpuBudget;
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Engine, Isolation, KeyPart, TrxError};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How often the long reader reads a row, so that it is never idle.
pub(super) const LONG_READER_INTERVAL: Duration = Duration::from_secs(1);

/// What one worker saw after the warm-up.
pub(super) struct Tally {
    pub(super) commits: u64,
    pub(super) deadlocks: u64,
    pub(super) lock_timeouts: u64,
    pub(super) latency_us: Histogram<u64>,
}

/// What the long reader saw.
pub(super) struct LongReader {
    pub(super) reads: u64,
    /// Seconds after the start of the run at which it found that the
    /// engine had rolled it back (the undo quota), if it did: at its next
    /// read, up to LONG_READER_INTERVAL after the fact.
    pub(super) rolled_back_at_s: Option<f64>,
}

/// The measured window, all threads together, and the whole run's maxima.
pub(super) struct Measured {
    pub(super) commits: u64,
    pub(super) deadlocks: u64,
    pub(super) lock_timeouts: u64,
    pub(super) wall_s: f64,
    pub(super) cpu_s: f64,
    pub(super) latency_us: Histogram<u64>,
    pub(super) counters: Counters,
    pub(super) history_len_end: u64,
    pub(super) sampled: Sampled,
    pub(super) long_reader: Option<LongReader>,
}

pub(super) fn run_ops(
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

pub(super) fn worker_loop(
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
pub(super) fn long_reader_loop(
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

/// The engine's part of the output.
pub(super) struct EngineRun {
    pub(super) load: Loaded,
    pub(super) measured: Measured,
}

pub(super) fn run_engine(
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
pub(super) struct Baseline {
    pub(super) ops_per_s: f64,
}

pub(super) fn run_baseline(
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
