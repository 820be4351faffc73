//! The entry point of `bench trx` and its output: the report's fields
//! (settings, results, more) and the readable table.

use super::args::{trx_config, validate, TrxArgs};
use super::ops::{run_baseline, run_engine, Baseline, EngineRun};
use super::series::{Counters, Timeseries, GAUGE_NAMES};
use crate::fields::{Fields, Value};
use crate::measure::{check_registered, latency_summary, MIB};
use crate::output::{print_machine, print_metrics, print_settings};
use crate::store::{open_storage, release_freed_memory};
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuProbe, CpuSnapshot};
use millrace_trx::Engine;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub fn run(args: &TrxArgs) -> Result<(), String> {
    validate(args)?;
    args.out.run(
        "trx",
        |dir| run_in(args, dir),
        |r| r.all_fields(),
        print_table,
    )
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
    use super::super::args::tests::parse;
    use super::*;

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
