//! The entry point of `bench btree` and its output: the report's fields
//! (settings, results, more settings) and the readable table.

use super::args::{BtreeArgs, Op};
use super::ops::{open_and_run_engine, run_baseline, Baseline, TreeRun};
use crate::fields::Fields;
use crate::measure::MIB;
use crate::output::{print_machine, print_metrics, print_settings};
use crate::store::{release_freed_memory, validate_store};
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuProbe, CpuSnapshot};
use std::path::Path;
use std::time::Duration;

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
    engine: TreeRun,
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
