//! What is sampled during a run: the engine's counters and gauges, once a
//! second a row of the `--timeseries` CSV file, the maxima of the history
//! length and of undo, and the `--set-level-at` changes when they are due.

use super::args::LevelChange;
use crate::measure::{counters, merge_latency, new_histogram, MIB};
use crate::store::durability;
use hdrhistogram::Histogram;
use millrace_trx::Engine;
use std::fs::File;
use std::io::{LineWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How often the sampler writes a row of the time series.
pub(super) const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the sampler looks at the history length (for its maximum) and
/// at the clock (for `--set-level-at`).
pub(super) const SAMPLER_TICK: Duration = Duration::from_millis(100);

counters! {
    /// The engine's counters this bench reports, at one moment.
    pub(super) struct Counters {
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
pub(super) const GAUGE_NAMES: [&str; 3] =
    ["trx_history_len", "trx_undo_bytes", "buffer_pages_dirty"];

/// What one worker saw after the warm-up.
/// What the sampler kept over the whole run.
pub(super) struct Sampled {
    pub(super) history_len_max: u64,
    pub(super) undo_bytes_max: u64,
}

/// One row of the time series.
pub(super) struct SeriesRow {
    pub(super) t_s: f64,
    pub(super) commits_per_s: f64,
    pub(super) history_len: u64,
    pub(super) purge_delay_us: u64,
    pub(super) purge_delays: u64,
    pub(super) dirty_pages: u64,
    pub(super) undo_bytes: u64,
    /// None when no transaction finished in the second.
    pub(super) p99_us: Option<u64>,
    pub(super) lock_waits: u64,
    pub(super) deadlocks: u64,
    pub(super) log_fsyncs: u64,
    pub(super) level: u8,
}

/// The `--timeseries` CSV file.
pub(super) struct Timeseries {
    pub(super) path: PathBuf,
    pub(super) out: LineWriter<File>,
}

impl Timeseries {
    pub(super) const HEADER: &'static str =
        "t_s,commits_per_s,history_len,purge_delay_us,purge_delays,\
                                  dirty_pages,undo_mb,p99_ms,lock_waits,deadlocks,log_fsyncs,level";

    pub(super) fn create(path: &Path) -> Result<Self, String> {
        let file = File::create(path)
            .map_err(|e| format!("--timeseries {}: cannot create: {e}", path.display()))?;
        let mut series = Self {
            path: path.to_path_buf(),
            out: LineWriter::new(file),
        };
        series.write_line(Self::HEADER)?;
        Ok(series)
    }

    pub(super) fn write_line(&mut self, line: &str) -> Result<(), String> {
        writeln!(self.out, "{line}")
            .map_err(|e| format!("--timeseries {}: {e}", self.path.display()))
    }

    /// Counters as the change over the row's interval (commits per second),
    /// gauges as they are; an empty p99_ms when no transaction finished.
    pub(super) fn format(row: &SeriesRow) -> String {
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
pub(super) fn sampler_loop(
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

pub(super) fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
