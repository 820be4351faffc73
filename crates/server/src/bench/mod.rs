//! The benchmarks behind `millrace bench`: one subcommand per layer, each
//! printing a readable table or, with `--json`, one flat JSON object per run
//! for the scripts in bench/ to collect.

mod btree;
mod log;
mod trx;

use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use millrace_buf::{BufConfig, PageStore, StoreConfig};
use millrace_io::FsStorage;
use millrace_metrics::Registry;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::{process_cpu_time, CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread::{self, ScopedJoinHandle};
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Commits against the redo log alone: latency, group commit, CPU.
    Log(log::LogArgs),
    /// A sysbench-like mix on a table of two B+tree indexes: throughput,
    /// latency, page I/O, against a BTreeMap under a mutex.
    Btree(btree::BtreeArgs),
    /// sysbench-like transactions through the transactional engine:
    /// throughput, latency, history length and purge, against the bare
    /// B+tree.
    Trx(trx::TrxArgs),
}

/// Runs one benchmark; the error is a message for the user.
pub fn run(command: BenchCommand) -> Result<(), String> {
    match command {
        BenchCommand::Log(args) => log::run(&args),
        BenchCommand::Btree(args) => btree::run(&args),
        BenchCommand::Trx(args) => trx::run(&args),
    }
}

/// The start of every run that is not measured: threads still starting, the
/// CPU budget's first refresh, the first lap of the log buffer.
const WARMUP: Duration = Duration::from_millis(500);
/// The largest latency the histograms track exactly; longer ones count as
/// this. Fixed bounds, because a clamped record never resizes a histogram.
const HIGHEST_TRACKED_US: u64 = 600_000_000;
const MIB: f64 = (1u64 << 20) as f64;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_TRACKED_US, 3)
        .expect("the bounds and precision are valid")
}

/// p50_us, p95_us, p99_us and max_us: how every bench reports latency.
fn latency_summary(latency_us: &Histogram<u64>) -> [(&'static str, u64); 4] {
    [
        ("p50_us", latency_us.value_at_quantile(0.5)),
        ("p95_us", latency_us.value_at_quantile(0.95)),
        ("p99_us", latency_us.value_at_quantile(0.99)),
        ("max_us", latency_us.max()),
    ]
}

/// Adds one thread's latencies to the total.
fn merge_latency(total: &mut Histogram<u64>, part: &Histogram<u64>) -> Result<(), String> {
    total
        .add(part)
        .map_err(|e| format!("merging latency histograms: {e:?}"))
}

/// The warm-up end and the deadline, computed by every thread right after
/// the start barrier (they differ by microseconds).
struct Window {
    warmup_end: Instant,
    end: Instant,
}

impl Window {
    fn starting_now(seconds: f64) -> Self {
        let start = Instant::now();
        Self {
            warmup_end: start + WARMUP,
            end: start + Duration::from_secs_f64(seconds),
        }
    }

    fn sleep_through_warmup(&self) {
        thread::sleep(self.warmup_end.saturating_duration_since(Instant::now()));
    }
}

/// The clock, the process CPU time and a bench's counters at one moment.
struct Sample<C> {
    at: Instant,
    cpu_time: Duration,
    counters: C,
}

impl<C> Sample<C> {
    fn take(read_counters: impl FnOnce() -> C) -> Self {
        Self {
            at: Instant::now(),
            cpu_time: process_cpu_time(),
            counters: read_counters(),
        }
    }

    fn wall_s_since(&self, before: &Self) -> f64 {
        self.at.duration_since(before.at).as_secs_f64()
    }

    fn cpu_s_since(&self, before: &Self) -> f64 {
        self.cpu_time.saturating_sub(before.cpu_time).as_secs_f64()
    }
}

/// The main thread's side of a measured run: passes `start` with the
/// workers, sleeps through the warm-up, samples, waits for every worker,
/// samples again. The window ends when the last operation started before
/// the deadline is done, so every counted operation (and its commit's
/// flush) is in the change between the samples. Returns the workers'
/// results, in order, and the two samples.
fn measure_window<R, C>(
    start: &Barrier,
    seconds: f64,
    workers: Vec<ScopedJoinHandle<'_, R>>,
    read_counters: impl Fn() -> C,
) -> (Vec<thread::Result<R>>, Sample<C>, Sample<C>) {
    start.wait();
    Window::starting_now(seconds).sleep_through_warmup();
    let before = Sample::take(&read_counters);
    let results = workers.into_iter().map(|t| t.join()).collect();
    let after = Sample::take(&read_counters);
    (results, before, after)
}

/// The counters a bench reports: a struct of u64 fields, each the value of
/// one metric of the registry, with `NAMES` (every metric, for
/// `check_registered`), `read` (a metric not registered reads as 0) and
/// `since` (the change from an earlier reading).
macro_rules! counters {
    ($(#[$attr:meta])* struct $name:ident { $($field:ident: $metric:literal,)+ }) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Default)]
        struct $name {
            $($field: u64,)+
        }

        impl $name {
            const NAMES: &'static [&'static str] = &[$($metric),+];

            fn read(registry: &millrace_metrics::Registry) -> Self {
                Self {
                    $($field: registry.get($metric).unwrap_or(0),)+
                }
            }

            fn since(&self, before: &Self) -> Self {
                Self {
                    $($field: self.$field - before.$field,)+
                }
            }
        }
    };
}
use counters;

/// Fails before any thread starts if a metric the bench reads is gone;
/// `owner` ("the log", "the store", ...) names who should register it.
fn check_registered<'a>(
    registry: &Registry,
    names: impl IntoIterator<Item = &'a &'a str>,
    owner: &str,
) -> Result<(), String> {
    for name in names {
        if registry.get(name).is_none() {
            return Err(format!("{owner} does not register the metric {name}"));
        }
    }
    Ok(())
}

/// `--seconds` must leave something after the warm-up.
fn validate_seconds(seconds: f64) -> Result<(), String> {
    if !seconds.is_finite() || seconds <= WARMUP.as_secs_f64() {
        return Err(format!(
            "--seconds must be more than the {} s warm-up, not {seconds}",
            WARMUP.as_secs_f64()
        ));
    }
    Ok(())
}

/// A size flag in MiB (`flag`, e.g. "--log-capacity-mb") must be at most
/// `max_bytes` in bytes.
fn check_mb(flag: &str, mb: u64, max_bytes: u64) -> Result<(), String> {
    match mb.checked_mul(1 << 20) {
        Some(bytes) if bytes <= max_bytes => Ok(()),
        _ => Err(format!("{flag} {mb} is too large")),
    }
}

/// flush_log_at_trx_commit `level` as the log's durability.
fn durability(level: u8) -> Durability {
    Durability::from_level(level).expect("clap and --set-level-at allow only 0, 1 and 2")
}

/// The run's files in `dir`.
fn open_storage(dir: &Path, direct_io: bool) -> Result<FsStorage, String> {
    FsStorage::new(dir, direct_io).map_err(|e| format!("opening storage in {}: {e}", dir.display()))
}

/// A fresh directory for this run (millrace-bench-<name>-<pid>) under `dir`
/// (or the current directory), so that a run never reuses another's files.
fn create_run_dir(dir: Option<&Path>, name: &str) -> Result<PathBuf, String> {
    let base = match dir {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(format!(
                    "--dir {}: not an existing directory",
                    dir.display()
                ));
            }
            dir.to_path_buf()
        }
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    let run_dir = base.join(format!("millrace-bench-{name}-{}", std::process::id()));
    fs::create_dir(&run_dir).map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;
    Ok(run_dir)
}

/// At the end of a run: keeps its directory with `--keep`, removes it
/// otherwise (a failure to remove is only logged).
fn finish_run_dir(run_dir: &Path, keep: bool) {
    if keep {
        eprintln!("kept {}", run_dir.display());
    } else if let Err(e) = fs::remove_dir_all(run_dir) {
        tracing::warn!(dir = %run_dir.display(), error = %e, "could not remove the run directory");
    }
}

/// A value of a result field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Uint(u64),
    /// Non-finite values (a ratio over zero) are written as null.
    Float(f64),
    Bool(bool),
    Str(String),
    Null,
}

impl Value {
    fn to_json(&self) -> String {
        match self {
            Value::Uint(v) => v.to_string(),
            Value::Float(v) => json_float(*v),
            Value::Bool(v) => v.to_string(),
            Value::Str(v) => json_string(v),
            Value::Null => "null".into(),
        }
    }

    /// How the readable table shows it: like JSON, strings unquoted.
    pub fn to_text(&self) -> String {
        match self {
            Value::Str(v) => v.clone(),
            Value::Null => "-".into(),
            v => v.to_json(),
        }
    }
}

/// Named results in order: one flat JSON object, written by hand (the
/// results are only numbers, booleans and short strings, which does not
/// justify a serialisation crate), or the rows of a table.
#[derive(Default)]
pub struct Fields {
    fields: Vec<(&'static str, Value)>,
}

impl Fields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, key: &'static str, value: Value) {
        self.fields.push((key, value));
    }

    pub fn uint(&mut self, key: &'static str, value: u64) {
        self.push(key, Value::Uint(value));
    }

    pub fn opt_uint(&mut self, key: &'static str, value: Option<u64>) {
        self.push(key, value.map_or(Value::Null, Value::Uint));
    }

    pub fn float(&mut self, key: &'static str, value: f64) {
        self.push(key, Value::Float(value));
    }

    pub fn opt_float(&mut self, key: &'static str, value: Option<f64>) {
        self.push(key, value.map_or(Value::Null, Value::Float));
    }

    pub fn bool(&mut self, key: &'static str, value: bool) {
        self.push(key, Value::Bool(value));
    }

    pub fn string(&mut self, key: &'static str, value: &str) {
        self.push(key, Value::Str(value.into()));
    }

    /// The `latency_summary` of `latency_us`.
    pub fn latency(&mut self, latency_us: &Histogram<u64>) {
        for (key, us) in latency_summary(latency_us) {
            self.uint(key, us);
        }
    }

    pub fn extend(&mut self, other: Fields) {
        self.fields.extend(other.fields);
    }

    pub fn iter(&self) -> impl Iterator<Item = &(&'static str, Value)> {
        self.fields.iter()
    }

    /// The fields as one JSON object on one line.
    pub fn to_json_line(&self) -> String {
        let body: Vec<String> = self
            .fields
            .iter()
            .map(|(key, value)| format!("{}:{}", json_string(key), value.to_json()))
            .collect();
        format!("{{{}}}", body.join(","))
    }
}

/// Rounded so the lines stay short: two decimals for large values, six for
/// small ones (shares and ratios), trailing zeros dropped.
fn json_float(value: f64) -> String {
    if !value.is_finite() {
        return "null".into();
    }
    let text = if value.abs() >= 100.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.6}")
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "" | "-" | "-0" => "0".into(),
        t => t.into(),
    }
}

fn json_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Flags every benchmark has: where it runs, whether its directory stays,
/// and how it reports.
#[derive(Args, Debug)]
pub struct RunOutput {
    /// Where to create the run's directory (millrace-bench-<name>-<pid>);
    /// the current directory by default.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the run's directory instead of removing it at the end.
    #[arg(long)]
    pub keep: bool,
    /// Print one JSON object on one line instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl RunOutput {
    /// Runs a benchmark body in a fresh run directory (removed afterwards
    /// unless --keep), then prints its report as one JSON line or a table.
    pub fn run<R>(
        &self,
        name: &str,
        body: impl FnOnce(&Path) -> Result<R, String>,
        fields: impl Fn(&R) -> Fields,
        table: impl Fn(&R),
    ) -> Result<(), String> {
        let run_dir = create_run_dir(self.dir.as_deref(), name)?;
        let result = body(&run_dir);
        finish_run_dir(&run_dir, self.keep);
        let report = result?;
        if self.json {
            println!("{}", fields(&report).to_json_line());
        } else {
            table(&report);
        }
        Ok(())
    }
}

/// The readable table's first line: the CPUs the run had.
fn print_machine(machine: &CpuSnapshot) {
    let quota = machine
        .quota_cpus
        .map_or("no quota".to_string(), |q| format!("quota {q} CPUs"));
    println!(
        "machine: {} effective CPUs ({} in the affinity mask, {quota})",
        machine.effective_cpus, machine.affinity_cpus
    );
}

/// The readable table's `settings: key=value ...` line.
fn print_settings<'a>(settings: impl IntoIterator<Item = &'a (&'static str, Value)>) {
    let settings: Vec<String> = settings
        .into_iter()
        .map(|(k, v)| format!("{k}={}", v.to_text()))
        .collect();
    println!("settings: {}", settings.join(" "));
}

/// The readable table's `metric | value` rows.
fn print_metrics(results: &Fields) {
    let width = results.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!("{:<width$} | value", "metric");
    println!("{}-|------", "-".repeat(width));
    for (key, value) in results.iter() {
        println!("{key:<width$} | {}", value.to_text());
    }
}

/// `--log-writer-threads auto|on|off`.
pub fn parse_writer_threads(s: &str) -> Result<WriterThreads, String> {
    s.parse()
}

// ---------------------------------------------------------------------------
// What `bench btree` and `bench trx` share: a page store holding one
// sysbench-like table, loaded before the run.

/// How often a load reports its progress on stderr.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// Loading threads when --load-threads is not given: at most this many, and
/// no more than the CPUs.
const MAX_DEFAULT_LOAD_THREADS: u32 = 4;

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
    fn load_threads(&self, cpu: &CpuBudget) -> u32 {
        self.load_threads.unwrap_or_else(|| {
            cpu.snapshot()
                .effective_cpus
                .clamp(1, MAX_DEFAULT_LOAD_THREADS)
        })
    }
}

/// Checks the run's length and the sizes of the buffer pool and the log.
fn validate_store(seconds: f64, buffer_pool_mb: u64, store: &StoreArgs) -> Result<(), String> {
    validate_seconds(seconds)?;
    // The pool is sized in usize.
    let max_pool_bytes = u64::try_from(usize::MAX).unwrap_or(u64::MAX);
    check_mb("--buffer-pool-mb", buffer_pool_mb, max_pool_bytes)?;
    check_mb("--log-capacity-mb", store.log_capacity_mb, u64::MAX)
}

/// A page store with the page cleaner, its log at `durability`.
fn store_config(
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
fn thread_rng(seed: u64, thread: u32) -> SplitMix64 {
    SplitMix64::new(seed ^ u64::from(thread).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Fills `out` with random digits, as sysbench fills c and pad.
fn random_digits(out: &mut [u8], rng: &mut SplitMix64) {
    for chunk in out.chunks_mut(16) {
        let mut x = rng.next_u64();
        for b in chunk {
            *b = b'0' + (x % 10) as u8;
            x /= 10;
        }
    }
}

struct Loaded {
    rows: u64,
    seconds: f64,
}

impl Loaded {
    fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.seconds
    }
}

/// The ids thread `t` of `threads` loads: consecutive ranges covering 1..=rows.
fn load_range(rows: u64, threads: u32, t: u32) -> Range<u64> {
    let at = |i: u32| 1 + (u128::from(rows) * u128::from(i) / u128::from(threads)) as u64;
    at(t)..at(t + 1)
}

/// Loads rows 1..=rows on `threads` threads, printing the progress every
/// second: `load_ids(ids, thread, loaded, failed)` inserts one thread's
/// `load_range`, adds each row it inserted to `loaded`, and returns early
/// (with Ok) once `failed` is set: another thread failed, and its error is
/// the one reported. `label` names the load in the messages.
fn load_rows<F>(rows: u64, threads: u32, label: &str, load_ids: F) -> Result<Loaded, String>
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
fn finish_load(store: &PageStore, durability: Durability) -> Result<(), String> {
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
fn release_freed_memory() {
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
    fn writes_one_flat_object() {
        let mut j = Fields::new();
        j.uint("commits", 12);
        j.float("ratio", 1.25);
        j.float("rate", 12345.678);
        j.float("nan", f64::NAN);
        j.opt_float("none", None);
        j.bool("on", true);
        j.string("name", "a\"b");
        assert_eq!(
            j.to_json_line(),
            r#"{"commits":12,"ratio":1.25,"rate":12345.68,"nan":null,"none":null,"on":true,"name":"a\"b"}"#
        );
    }

    #[test]
    fn floats_are_trimmed() {
        assert_eq!(json_float(0.0), "0");
        assert_eq!(json_float(3.0), "3");
        assert_eq!(json_float(0.000123), "0.000123");
        assert_eq!(json_float(-0.0000001), "0");
    }

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
