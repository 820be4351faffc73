//! `millrace bench log`: committing threads against the redo log alone.
//!
//! Each committer appends a record and waits until it is as durable as
//! `--level` asks, over and over; a checkpointer thread stands in for the
//! page cleaner. Before that, a bare pwrite + fdatasync loop on the same
//! file system measures what one durable write costs without the log, so
//! the commit latency can be read against it.

use crate::fields::Fields;
use crate::measure::{
    check_registered, counters, measure_window, merge_latency, new_histogram, validate_seconds,
    Window,
};
use crate::output::{print_machine, print_metrics, RunOutput};
use crate::store::{check_mb, durability, open_storage, parse_writer_threads};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use millrace_io::{AlignedBuf, DIRECT_IO_ALIGN};
use millrace_metrics::Registry;
use millrace_redo::{Log, LogConfig, LogError, SpinConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuProbe, CpuSnapshot};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

/// Small enough to write quickly, large enough that the write offsets do
/// not stay in one block for a whole run.
const BASELINE_FILE_BYTES: u64 = 64 << 20;
/// One log block: what a lone commit writes.
const BASELINE_WRITE_BYTES: usize = 4096;
/// How long the checkpointer sleeps while the log has room.
const CHECKPOINTER_IDLE: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Committing threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Length of the run in seconds, the 0.5 s warm-up included.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Payload bytes per commit.
    #[arg(long, default_value_t = 100)]
    record_bytes: usize,
    /// flush_log_at_trx_commit: 0 waits for nothing, 1 for the flush, 2 for the write.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    level: u8,
    /// Dedicated writer and flusher threads (on), a group commit leader (off),
    /// or chosen by the CPU count (auto).
    #[arg(long, default_value = "auto", value_parser = parse_writer_threads)]
    log_writer_threads: WriterThreads,
    /// Count CPUs by the cgroup quota when deciding to spin (on), or by the
    /// affinity mask only, as MySQL 8.0 does (off).
    #[arg(long, value_enum, default_value_t = Switch::On)]
    cpu_quota_aware: Switch,
    /// Spin in a flush wait only when the fdatasync in flight covers the
    /// commit (on), or regardless, as MySQL 8.0 does (off).
    #[arg(long, value_enum, default_value_t = Switch::On)]
    spin_inflight_only: Switch,
    /// Slots of the recent_closed link buffer.
    #[arg(long, default_value_t = LogConfig::default().recent_closed_bytes)]
    recent_closed_bytes: usize,
    /// Slots of the recent_written link buffer.
    #[arg(long, default_value_t = LogConfig::default().recent_written_bytes)]
    recent_written_bytes: usize,
    /// Size of the circular log file, MiB.
    #[arg(long, default_value_t = 256)]
    log_capacity_mb: u64,
    /// Open the log file (and the baseline file) with O_DIRECT.
    #[arg(long)]
    direct_io: bool,
    /// Length of the bare pwrite + fdatasync baseline, seconds.
    #[arg(long, default_value_t = 2.0)]
    baseline_seconds: f64,
    /// Skip the baseline.
    #[arg(long)]
    no_baseline: bool,
    #[command(flatten)]
    out: RunOutput,
}

pub fn run(args: &LogArgs) -> Result<(), String> {
    validate(args)?;
    args.out.run(
        "log",
        |dir| run_in(args, dir),
        |r| r.all_fields(),
        print_table,
    )
}

fn validate(args: &LogArgs) -> Result<(), String> {
    validate_seconds(args.seconds)?;
    let baseline_seconds_ok = args.baseline_seconds.is_finite() && args.baseline_seconds > 0.0;
    if !args.no_baseline && !baseline_seconds_ok {
        return Err(format!(
            "--baseline-seconds must be positive, not {}",
            args.baseline_seconds
        ));
    }
    check_mb("--log-capacity-mb", args.log_capacity_mb, u64::MAX)
}

/// Everything the output is made of.
struct Report<'a> {
    args: &'a LogArgs,
    machine: CpuSnapshot,
    dedicated_writer_threads: bool,
    baseline: Option<Baseline>,
    measured: Measured,
}

fn run_in<'a>(args: &'a LogArgs, run_dir: &Path) -> Result<Report<'a>, String> {
    let baseline = if args.no_baseline {
        None
    } else {
        Some(measure_baseline(
            run_dir,
            args.baseline_seconds,
            args.direct_io,
        )?)
    };
    let registry = Registry::new();
    let cpu = CpuBudget::start(CpuProbe::system(), Duration::from_secs(1));
    let storage = open_storage(run_dir, args.direct_io)?;
    let log = Log::create(&storage, log_config(args), cpu.clone(), &registry)
        .map_err(|e| format!("creating the log: {e}"))?;
    let measured =
        check_workload(args, &log, &registry).and_then(|()| run_commits(args, &log, &registry));
    let shutdown = log.shutdown();
    let measured = measured?;
    shutdown.map_err(|e| format!("shutting the log down: {e}"))?;
    Ok(Report {
        args,
        machine: cpu.snapshot(),
        dedicated_writer_threads: log.dedicated_writer_threads(),
        baseline,
        measured,
    })
}

fn log_config(args: &LogArgs) -> LogConfig {
    LogConfig {
        capacity_bytes: args.log_capacity_mb << 20,
        durability: durability(args.level),
        writer_threads: args.log_writer_threads,
        recent_closed_bytes: args.recent_closed_bytes,
        recent_written_bytes: args.recent_written_bytes,
        spin: SpinConfig {
            cpu_quota_aware: args.cpu_quota_aware == Switch::On,
            spin_inflight_only: args.spin_inflight_only == Switch::On,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Fails before any thread starts, rather than with every committer at once.
fn check_workload(args: &LogArgs, log: &Log, registry: &Registry) -> Result<(), String> {
    let max = log.max_payload_bytes() as usize;
    if args.record_bytes > max {
        return Err(format!(
            "--record-bytes {} exceeds the largest record this log takes, {max}",
            args.record_bytes
        ));
    }
    check_registered(registry, LogCounters::NAMES, "the log")
}

// ---------------------------------------------------------------------------
// Step 1: the bare OS baseline.

struct Baseline {
    /// Median of one 4 KiB pwrite + fdatasync.
    fsync_us: u64,
    p99_us: u64,
    ops_per_s: f64,
}

/// pwrite 4 KiB at increasing offsets, each followed by fdatasync: the least
/// a durable commit can cost on this file system, with no log code at all.
fn measure_baseline(dir: &Path, seconds: f64, direct_io: bool) -> Result<Baseline, String> {
    let path = dir.join("baseline-fsync.dat");
    let io_error =
        |what: &str, e: std::io::Error| format!("baseline: {what} {}: {e}", path.display());
    let file = open_baseline_file(&path, direct_io).map_err(|e| io_error("opening", e))?;
    prefill(&file).map_err(|e| io_error("filling", e))?;

    let mut block = AlignedBuf::zeroed(BASELINE_WRITE_BYTES, DIRECT_IO_ALIGN);
    block.fill(0x5a);
    let mut latency_us = new_histogram();
    let mut offset = 0;
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    while Instant::now() < deadline {
        let t0 = Instant::now();
        file.write_all_at(&block, offset)
            .map_err(|e| io_error("writing", e))?;
        file.sync_data().map_err(|e| io_error("syncing", e))?;
        latency_us.saturating_record(t0.elapsed().as_micros() as u64);
        offset = (offset + BASELINE_WRITE_BYTES as u64) % BASELINE_FILE_BYTES;
    }
    let wall_s = start.elapsed().as_secs_f64();
    drop(file);
    fs::remove_file(&path).map_err(|e| io_error("removing", e))?;
    Ok(Baseline {
        fsync_us: latency_us.value_at_quantile(0.5),
        p99_us: latency_us.value_at_quantile(0.99),
        ops_per_s: latency_us.len() as f64 / wall_s,
    })
}

fn open_baseline_file(path: &Path, direct_io: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create_new(true);
    if direct_io {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

/// Writes the whole file once and syncs it, so the timed loop overwrites
/// allocated blocks: it measures the write and the flush, not the file
/// system allocating blocks and journaling that.
fn prefill(file: &File) -> std::io::Result<()> {
    let chunk = AlignedBuf::zeroed(1 << 20, DIRECT_IO_ALIGN);
    let mut offset = 0;
    while offset < BASELINE_FILE_BYTES {
        file.write_all_at(&chunk, offset)?;
        offset += chunk.len() as u64;
    }
    file.sync_data()
}

// ---------------------------------------------------------------------------
// Steps 3 to 5: the checkpointer, the committers, the measurements.

counters! {
    /// The log's counters this bench reports, at one moment.
    struct LogCounters {
        fsyncs: "log_fsyncs",
        writes: "log_writes",
        bytes_written: "log_bytes_written",
        spin_ns: "log_spin_ns",
        spin_hits: "log_spin_hits",
        spin_misses: "log_spin_misses",
        block_waits: "log_block_waits",
        recent_closed_full: "log_recent_closed_full",
        recent_written_full: "log_recent_written_full",
        buffer_full_waits: "log_buffer_full_waits",
        log_full_waits: "log_full_waits",
    }
}

/// What one committer saw after the warm-up.
struct Tally {
    commits: u64,
    latency_us: Histogram<u64>,
}

/// The measured window, all threads together.
struct Measured {
    commits: u64,
    wall_s: f64,
    cpu_s: f64,
    latency_us: Histogram<u64>,
    counters: LogCounters,
}

fn run_commits(args: &LogArgs, log: &Log, registry: &Registry) -> Result<Measured, String> {
    let stop_checkpointer = AtomicBool::new(false);
    let start = Barrier::new(args.threads as usize + 1);
    thread::scope(|s| {
        let checkpointer = s.spawn(|| checkpointer_loop(log, &stop_checkpointer));
        let committers: Vec<_> = (0..args.threads)
            .map(|_| s.spawn(|| committer_loop(log, &start, args.seconds, args.record_bytes)))
            .collect();
        let (tallies, before, after) = measure_window(&start, args.seconds, committers, || {
            LogCounters::read(registry)
        });
        stop_checkpointer.store(true, Ordering::Relaxed);
        let checkpointed = checkpointer.join();

        let mut measured = Measured {
            commits: 0,
            wall_s: after.wall_s_since(&before),
            cpu_s: after.cpu_s_since(&before),
            latency_us: new_histogram(),
            counters: after.counters.since(&before.counters),
        };
        for tally in tallies {
            let tally = tally
                .map_err(|_| "a committer thread panicked".to_string())?
                .map_err(|e| format!("commit failed: {e}"))?;
            measured.commits += tally.commits;
            merge_latency(&mut measured.latency_us, &tally.latency_us)?;
        }
        checkpointed
            .map_err(|_| "the checkpointer thread panicked".to_string())?
            .map_err(|e| format!("checkpoint failed: {e}"))?;
        Ok(measured)
    })
}

/// Stands in for the page cleaner: there are no pages at this layer, so
/// every closed record may be checkpointed at once. Checkpointing at half
/// the capacity keeps committers from waiting for log space, as a page
/// cleaner that keeps up would.
fn checkpointer_loop(log: &Log, stop: &AtomicBool) -> Result<(), LogError> {
    let threshold_bytes = log.capacity_bytes() / 2;
    while !stop.load(Ordering::Relaxed) {
        let checkpoint_lsn = log.checkpoint_lsn();
        let closed_lsn = log.closed_lsn();
        if log.current_lsn() - checkpoint_lsn > threshold_bytes && closed_lsn > checkpoint_lsn {
            log.checkpoint(closed_lsn)?;
        } else {
            thread::sleep(CHECKPOINTER_IDLE);
        }
    }
    Ok(())
}

fn committer_loop(
    log: &Log,
    start: &Barrier,
    seconds: f64,
    record_bytes: usize,
) -> Result<Tally, LogError> {
    let payload = vec![0x6d; record_bytes];
    let mut tally = Tally {
        commits: 0,
        latency_us: new_histogram(),
    };
    start.wait();
    let window = Window::starting_now(seconds);
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        log.commit(&payload)?;
        if t0 >= window.warmup_end {
            tally
                .latency_us
                .saturating_record(t0.elapsed().as_micros() as u64);
            tally.commits += 1;
        }
    }
}

// ---------------------------------------------------------------------------
// Step 6: output.

impl Report<'_> {
    fn settings(&self) -> Fields {
        let args = self.args;
        let mut f = Fields::new();
        f.uint("threads", args.threads.into());
        f.float("seconds", args.seconds);
        f.uint("record_bytes", args.record_bytes as u64);
        f.uint("level", args.level.into());
        f.string("log_writer_threads", &args.log_writer_threads.to_string());
        f.bool("dedicated_writer_threads", self.dedicated_writer_threads);
        f.bool("cpu_quota_aware", args.cpu_quota_aware == Switch::On);
        f.bool("spin_inflight_only", args.spin_inflight_only == Switch::On);
        f.uint("recent_closed_bytes", args.recent_closed_bytes as u64);
        f.uint("recent_written_bytes", args.recent_written_bytes as u64);
        f.bool("direct_io", args.direct_io);
        f.uint("effective_cpus", self.machine.effective_cpus.into());
        f.uint("affinity_cpus", self.machine.affinity_cpus.into());
        f.opt_float("quota_cpus", self.machine.quota_cpus);
        f
    }

    fn results(&self) -> Fields {
        let m = &self.measured;
        let c = &m.counters;
        let per_s = |n: u64| n as f64 / m.wall_s;
        let spin_s = c.spin_ns as f64 / 1e9;
        let mut f = Fields::new();
        f.float("measured_s", m.wall_s);
        f.uint("commits", m.commits);
        f.float("commits_per_s", per_s(m.commits));
        f.float("fsyncs_per_s", per_s(c.fsyncs));
        f.float("commits_per_fsync", m.commits as f64 / c.fsyncs as f64);
        f.latency(&m.latency_us);
        f.float("cpu_s", m.cpu_s);
        f.float("cpu_per_commit_us", m.cpu_s * 1e6 / m.commits as f64);
        f.float("spin_s", spin_s);
        f.float(
            "spin_cpu_share",
            if m.cpu_s > 0.0 { spin_s / m.cpu_s } else { 0.0 },
        );
        f.uint("spin_hits", c.spin_hits);
        f.uint("spin_misses", c.spin_misses);
        f.uint("block_waits", c.block_waits);
        f.uint("recent_closed_full", c.recent_closed_full);
        f.uint("recent_written_full", c.recent_written_full);
        f.uint("buffer_full_waits", c.buffer_full_waits);
        f.uint("log_full_waits", c.log_full_waits);
        f.float("writes_per_s", per_s(c.writes));
        f.float("bytes_written_per_s", per_s(c.bytes_written));
        let b = self.baseline.as_ref();
        f.opt_uint("baseline_fsync_us", b.map(|b| b.fsync_us));
        f.opt_uint("baseline_p99_us", b.map(|b| b.p99_us));
        f.opt_float("baseline_ops_per_s", b.map(|b| b.ops_per_s));
        f.opt_float("latency_vs_baseline", self.latency_vs_baseline());
        f
    }

    fn latency_vs_baseline(&self) -> Option<f64> {
        let p50_us = self.measured.latency_us.value_at_quantile(0.5);
        self.baseline
            .as_ref()
            .map(|b| p50_us as f64 / b.fsync_us as f64)
    }

    fn all_fields(&self) -> Fields {
        let mut f = self.settings();
        f.extend(self.results());
        f
    }
}

fn print_table(report: &Report) {
    let args = report.args;
    print_machine(&report.machine);
    println!(
        "settings: threads={} seconds={} record_bytes={} level={} log_writer_threads={} ({}) \
         cpu_quota_aware={} recent_closed_bytes={} recent_written_bytes={} direct_io={}",
        args.threads,
        args.seconds,
        args.record_bytes,
        args.level,
        args.log_writer_threads,
        if report.dedicated_writer_threads {
            "dedicated threads"
        } else {
            "group commit leader"
        },
        args.cpu_quota_aware == Switch::On,
        args.recent_closed_bytes,
        args.recent_written_bytes,
        args.direct_io,
    );
    print_metrics(&report.results());
    match (report.latency_vs_baseline(), &report.baseline) {
        (Some(ratio), Some(b)) => println!(
            "latency: p50 {} us is {ratio:.2}x the bare 4 KiB pwrite + fdatasync ({} us)",
            report.measured.latency_us.value_at_quantile(0.5),
            b.fsync_us
        ),
        _ => println!("latency: no baseline measured (--no-baseline)"),
    }
}
