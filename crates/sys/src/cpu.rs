// Long file, one job: the probe and the budget it publishes are
// under 600; the rest are their tests, which share one fake /proc tree.
//! The CPU budget: how much CPU this process may really use, container included.
//!
//! Why this exists: MySQL 8.0 sized its spin loops and thread pools by the CPUs
//! in the affinity mask alone. Inside a container with a CFS quota of, say, half
//! a CPU on a 64-core host it saw 64 CPUs, spun as if it had them, burnt its
//! quota in a few milliseconds and was then throttled for the rest of every
//! period, which made latency far worse than not spinning at all. millrace
//! therefore asks three questions before it decides to spin or to park:
//!
//! * how many CPUs may this thread run on (the `sched_getaffinity` mask),
//! * how much CPU time may the process use (the tightest cgroup quota found
//!   walking from the process's own cgroup up to the root of the mount; a
//!   parent's limit binds its children, so the leaf alone is not enough),
//! * is the quota biting right now (`nr_throttled` grew since the last look)
//!   and how busy are we (`usage_cpus`, our own CPU time over wall time).
//!
//! Both cgroup v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`) and v2
//! (`cpu.max`) are understood. Nothing here ever fails or panics on bad input:
//! a file that is missing, unreadable or malformed means "no limit at that
//! level", so the worst case is the old affinity-only answer.
//!
//! [`CpuProbe`] does the reading; [`CpuBudget`] publishes the latest reading so
//! that hot paths can look at it without a lock, and refreshes it from a
//! background thread.

use crate::cgroup::{locate_cgroup, read_small, walk_up, CgroupLocation};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Which hierarchy the quota came from (defined with the cgroup discovery
/// that `mem` shares).
pub use crate::cgroup::CgroupVersion;

/// Name of the background refresh thread (the kernel shows the first 15 bytes).
pub const REFRESH_THREAD_NAME: &str = "millrace-cpu-budget";

/// A refresh interval shorter than this would turn the refresher into a spinner
/// itself, which is exactly what this module exists to prevent.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_millis(1);

/// One reading of the CPU budget.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSnapshot {
    /// CPUs in the `sched_getaffinity` mask (>= 1).
    pub affinity_cpus: u32,
    /// Tightest quota/period found walking from the process's cgroup up to the
    /// mount root; `None` = no limit.
    pub quota_cpus: Option<f64>,
    /// `max(1, min(affinity_cpus, ceil(quota_cpus)))`.
    pub effective_cpus: u32,
    pub cgroup_version: CgroupVersion,
    /// Cumulative `nr_throttled` from `cpu.stat` of the process's own cgroup
    /// (0 if unreadable).
    pub nr_throttled: u64,
    /// `nr_throttled` increased between the previous refresh and this one.
    pub throttled_recently: bool,
    /// The process's CPU usage rate (user+system) over the last refresh
    /// interval, in CPUs: 1.0 = one full CPU busy.
    pub usage_cpus: f64,
}

impl CpuSnapshot {
    /// A snapshot with `cpus` CPUs and no quota, no throttling, no usage: the
    /// usual starting point for [`CpuBudget::fixed`] in tests.
    pub fn unconstrained(cpus: u32) -> Self {
        let affinity_cpus = cpus.max(1);
        CpuSnapshot {
            affinity_cpus,
            quota_cpus: None,
            effective_cpus: affinity_cpus,
            cgroup_version: CgroupVersion::None,
            nr_throttled: 0,
            throttled_recently: false,
            usage_cpus: 0.0,
        }
    }
}

/// `max(1, min(affinity, ceil(quota)))`. A quota of 0.5 CPU still lets one
/// thread run, so the floor is 1, never 0.
pub fn effective_cpus(affinity_cpus: u32, quota_cpus: Option<f64>) -> u32 {
    let affinity_cpus = affinity_cpus.max(1);
    let limited = match quota_cpus {
        // `as u32` saturates, so an absurd quota cannot wrap around.
        Some(q) if q.is_finite() && q > 0.0 => affinity_cpus.min(q.ceil() as u32),
        _ => affinity_cpus,
    };
    limited.max(1)
}

/// A [`CpuSnapshot`] together with what is needed to compute rates against
/// the next reading.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSample {
    pub snapshot: CpuSnapshot,
    /// Wall-clock instant of the reading.
    pub taken_at: Instant,
    /// Process CPU time (from the probe's CPU-time source) at `taken_at`.
    pub cpu_time: Duration,
}

type CpuTimeSource = Box<dyn Fn() -> Duration + Send + Sync>;

enum AffinitySource {
    System,
    Fixed(u32),
}

/// Where the probe reads from. [`CpuProbe::system`] reads the real machine;
/// tests build fake trees with [`CpuProbe::with_proc_self`].
pub struct CpuProbe {
    proc_self_dir: PathBuf,
    affinity: AffinitySource,
    cpu_time: CpuTimeSource,
}

impl fmt::Debug for CpuProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let affinity = match self.affinity {
            AffinitySource::System => "sched_getaffinity".to_string(),
            AffinitySource::Fixed(n) => format!("fixed({n})"),
        };
        f.debug_struct("CpuProbe")
            .field("proc_self_dir", &self.proc_self_dir)
            .field("affinity", &affinity)
            .finish_non_exhaustive()
    }
}

impl CpuProbe {
    /// Reads the real machine: `/proc/self`, `sched_getaffinity`, `getrusage`.
    pub fn system() -> Self {
        CpuProbe {
            proc_self_dir: PathBuf::from("/proc/self"),
            affinity: AffinitySource::System,
            cpu_time: Box::new(process_cpu_time),
        }
    }

    /// Fake tree for tests: reads `<proc_self_dir>/cgroup` and
    /// `<proc_self_dir>/mountinfo`; the mount points named in that mountinfo
    /// are absolute paths (into the test's temp dir). The affinity mask is
    /// replaced by `affinity_cpus`; CPU time still comes from `getrusage`
    /// unless replaced with [`CpuProbe::with_cpu_time_source`].
    pub fn with_proc_self(proc_self_dir: PathBuf, affinity_cpus: u32) -> Self {
        CpuProbe {
            proc_self_dir,
            affinity: AffinitySource::Fixed(affinity_cpus.max(1)),
            cpu_time: Box::new(process_cpu_time),
        }
    }

    /// Replaces where the process CPU time comes from, so tests can assert
    /// `usage_cpus` exactly.
    pub fn with_cpu_time_source<F>(mut self, source: F) -> Self
    where
        F: Fn() -> Duration + Send + Sync + 'static,
    {
        self.cpu_time = Box::new(source);
        self
    }

    /// Reads everything once. `prev` is used for `throttled_recently` and
    /// `usage_cpus`; with `None` those are `false` / `0.0`.
    pub fn read(&self, prev: Option<&CpuSample>) -> CpuSnapshot {
        self.sample(prev).snapshot
    }

    /// Like [`CpuProbe::read`], but also returns the instant and CPU time of
    /// the reading, to be passed as `prev` next time.
    pub fn sample(&self, prev: Option<&CpuSample>) -> CpuSample {
        // CPU time and wall time are taken back to back so that the rate is
        // not skewed by the (comparatively slow) file reads below.
        let cpu_time = (self.cpu_time)();
        let taken_at = Instant::now();

        let affinity_cpus = match self.affinity {
            AffinitySource::System => affinity_cpu_count(),
            AffinitySource::Fixed(n) => n.max(1),
        };

        let (cgroup_version, quota_cpus, nr_throttled) =
            match locate_cgroup(&self.proc_self_dir, "cpu") {
                Some(loc) => {
                    let quota = tightest_quota(&loc);
                    let throttled = read_small(&loc.dir.join("cpu.stat"))
                        .and_then(|text| parse_nr_throttled(&text))
                        .unwrap_or(0);
                    (loc.version, quota, throttled)
                }
                None => (CgroupVersion::None, None, 0),
            };

        let (throttled_recently, usage_cpus) = match prev {
            Some(prev) => {
                let throttled = nr_throttled > prev.snapshot.nr_throttled;
                let wall_s = taken_at
                    .saturating_duration_since(prev.taken_at)
                    .as_secs_f64();
                let cpu_s = cpu_time.saturating_sub(prev.cpu_time).as_secs_f64();
                let usage = if wall_s > 0.0 { cpu_s / wall_s } else { 0.0 };
                (throttled, usage)
            }
            None => (false, 0.0),
        };

        CpuSample {
            snapshot: CpuSnapshot {
                affinity_cpus,
                quota_cpus,
                effective_cpus: effective_cpus(affinity_cpus, quota_cpus),
                cgroup_version,
                nr_throttled,
                throttled_recently,
                usage_cpus,
            },
            taken_at,
            cpu_time,
        }
    }
}

/// Process CPU time (user+system) via `getrusage(RUSAGE_SELF)`.
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    timeval_to_duration(usage.ru_utime) + timeval_to_duration(usage.ru_stime)
}

/// Thread CPU time via `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 || ts.tv_nsec < 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, 0) + Duration::from_nanos(ts.tv_nsec as u64)
}

fn timeval_to_duration(tv: libc::timeval) -> Duration {
    if tv.tv_sec < 0 || tv.tv_usec < 0 {
        return Duration::ZERO;
    }
    Duration::new(tv.tv_sec as u64, 0) + Duration::from_micros(tv.tv_usec as u64)
}

/// CPUs in this thread's affinity mask, at least 1.
#[cfg(target_os = "linux")]
pub fn affinity_cpu_count() -> u32 {
    // Start with glibc's cpu_set_t size (CPU_SETSIZE = 1024 bits) and grow on
    // EINVAL: the kernel refuses a mask smaller than its own nr_cpu_ids.
    let mut words = std::mem::size_of::<libc::cpu_set_t>() / std::mem::size_of::<u64>();
    const MAX_WORDS: usize = (1 << 18) / 64;
    while words <= MAX_WORDS {
        let mut mask = vec![0u64; words];
        let size_bytes = words * std::mem::size_of::<u64>();
        // SAFETY: the buffer is `size_bytes` long and the kernel writes at
        // most that many bytes; cpu_set_t is a plain bit array.
        let rc = unsafe {
            libc::sched_getaffinity(0, size_bytes, mask.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            let count: u32 = mask.iter().map(|w| w.count_ones()).sum();
            return count.max(1);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            break;
        }
        words *= 2;
    }
    fallback_cpu_count()
}

/// CPUs available to this process, at least 1 (no affinity API here).
#[cfg(not(target_os = "linux"))]
pub fn affinity_cpu_count() -> u32 {
    fallback_cpu_count()
}

fn fallback_cpu_count() -> u32 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n >= 1 {
        u32::try_from(n).unwrap_or(u32::MAX)
    } else {
        1
    }
}

/// The smallest quota (in CPUs) over all levels of the hierarchy.
fn tightest_quota(loc: &CgroupLocation) -> Option<f64> {
    walk_up(loc)
        .filter_map(|dir| match loc.version {
            CgroupVersion::V2 => read_small(&dir.join("cpu.max")).and_then(|t| parse_cpu_max(&t)),
            CgroupVersion::V1 => {
                let quota = read_small(&dir.join("cpu.cfs_quota_us"))?;
                let period = read_small(&dir.join("cpu.cfs_period_us"))?;
                parse_cfs_quota(&quota, &period)
            }
            CgroupVersion::None => None,
        })
        .fold(None, |best: Option<f64>, q| {
            Some(best.map_or(q, |b| b.min(q)))
        })
}

/// v2 `cpu.max`: `max 100000` (no limit) or `50000 100000`.
fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut fields = text.split_whitespace();
    let quota_us = fields.next()?;
    let period_us = fields.next()?.parse::<u64>().ok()?;
    if quota_us == "max" {
        return None;
    }
    quota_ratio(quota_us.parse::<i64>().ok()?, period_us)
}

/// v1 `cpu.cfs_quota_us` (-1 = no limit) and `cpu.cfs_period_us`.
fn parse_cfs_quota(quota_text: &str, period_text: &str) -> Option<f64> {
    let quota_us = quota_text.trim().parse::<i64>().ok()?;
    let period_us = period_text.trim().parse::<u64>().ok()?;
    quota_ratio(quota_us, period_us)
}

fn quota_ratio(quota_us: i64, period_us: u64) -> Option<f64> {
    if quota_us <= 0 || period_us == 0 {
        return None;
    }
    Some(quota_us as f64 / period_us as f64)
}

/// `nr_throttled N` from `cpu.stat` (same key in v1 and v2).
fn parse_nr_throttled(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        if fields.next()? != "nr_throttled" {
            return None;
        }
        fields.next()?.parse().ok()
    })
}

// ---------------------------------------------------------------------------
// The shared budget

/// The published snapshot, guarded by a sequence lock so that readers take no
/// lock and never see a mix of two readings. Every field is an atomic, so a
/// torn read is merely retried, never undefined.
struct Published {
    /// Odd while a writer is in the middle of an update.
    seq: AtomicU64,
    affinity_cpus: AtomicU32,
    /// `f64::to_bits` of the quota, or `NO_QUOTA_BITS`.
    quota_bits: AtomicU64,
    effective_cpus: AtomicU32,
    cgroup_version: AtomicU8,
    nr_throttled: AtomicU64,
    throttled_recently: AtomicBool,
    usage_bits: AtomicU64,
}

/// A NaN pattern that no real quota produces.
const NO_QUOTA_BITS: u64 = u64::MAX;

impl Published {
    fn new(s: &CpuSnapshot) -> Self {
        let p = Published {
            seq: AtomicU64::new(0),
            affinity_cpus: AtomicU32::new(0),
            quota_bits: AtomicU64::new(NO_QUOTA_BITS),
            effective_cpus: AtomicU32::new(0),
            cgroup_version: AtomicU8::new(0),
            nr_throttled: AtomicU64::new(0),
            throttled_recently: AtomicBool::new(false),
            usage_bits: AtomicU64::new(0),
        };
        p.store_fields(s);
        p
    }

    fn store_fields(&self, s: &CpuSnapshot) {
        self.affinity_cpus.store(s.affinity_cpus, Ordering::Relaxed);
        self.quota_bits.store(
            s.quota_cpus.map_or(NO_QUOTA_BITS, f64::to_bits),
            Ordering::Relaxed,
        );
        self.effective_cpus
            .store(s.effective_cpus, Ordering::Relaxed);
        self.cgroup_version
            .store(s.cgroup_version.to_u8(), Ordering::Relaxed);
        self.nr_throttled.store(s.nr_throttled, Ordering::Relaxed);
        self.throttled_recently
            .store(s.throttled_recently, Ordering::Relaxed);
        self.usage_bits
            .store(s.usage_cpus.to_bits(), Ordering::Relaxed);
    }

    /// Callers must serialize writers (CpuBudget holds its writer mutex).
    fn publish(&self, s: &CpuSnapshot) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Readers that see any new field value must also see the odd seq.
        fence(Ordering::Release);
        self.store_fields(s);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    fn load(&self) -> CpuSnapshot {
        let mut spins = 0u32;
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 0 {
                let quota_bits = self.quota_bits.load(Ordering::Relaxed);
                let snapshot = CpuSnapshot {
                    affinity_cpus: self.affinity_cpus.load(Ordering::Relaxed),
                    quota_cpus: (quota_bits != NO_QUOTA_BITS).then(|| f64::from_bits(quota_bits)),
                    effective_cpus: self.effective_cpus.load(Ordering::Relaxed),
                    cgroup_version: CgroupVersion::from_u8(
                        self.cgroup_version.load(Ordering::Relaxed),
                    ),
                    nr_throttled: self.nr_throttled.load(Ordering::Relaxed),
                    throttled_recently: self.throttled_recently.load(Ordering::Relaxed),
                    usage_cpus: f64::from_bits(self.usage_bits.load(Ordering::Relaxed)),
                };
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == before {
                    return snapshot;
                }
            }
            // A writer is mid-update (a handful of stores). If it was
            // preempted, spinning would only steal its CPU: yield instead.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                thread::yield_now();
            }
        }
    }
}

struct WriterState {
    /// `None` for fixed budgets: refresh_now then does nothing.
    probe: Option<CpuProbe>,
    prev: Option<CpuSample>,
}

/// The CPU budget shared by the whole process: lock-free to read, refreshed
/// about once a second by a background thread (or by hand).
pub struct CpuBudget {
    published: Published,
    /// Serializes writers and holds what they need; readers never touch it.
    writer: Mutex<WriterState>,
    /// The refresh thread, woken on drop so it exits without waiting out its
    /// sleep.
    refresher: OnceLock<thread::Thread>,
}

impl fmt::Debug for CpuBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuBudget")
            .field("snapshot", &self.snapshot())
            .field("refreshing", &self.refresher.get().is_some())
            .finish()
    }
}

impl CpuBudget {
    /// Reads once, then starts a thread named "millrace-cpu-budget" that
    /// refreshes every `interval` (at least 1 ms). The thread holds only a
    /// `Weak` reference and exits when the last `Arc` is dropped. If the
    /// thread cannot be spawned the budget keeps its first reading.
    pub fn start(probe: CpuProbe, interval: Duration) -> Arc<CpuBudget> {
        Self::start_with_handle(probe, interval).0
    }

    /// [`CpuBudget::start`], also returning the refresh thread's handle
    /// (`None` if it could not be spawned) so tests can watch it exit.
    pub fn start_with_handle(
        probe: CpuProbe,
        interval: Duration,
    ) -> (Arc<CpuBudget>, Option<JoinHandle<()>>) {
        let budget = Self::manual(probe);
        let interval = interval.max(MIN_REFRESH_INTERVAL);
        let weak = Arc::downgrade(&budget);
        let handle = thread::Builder::new()
            .name(REFRESH_THREAD_NAME.to_string())
            .spawn(move || refresh_loop(weak, interval))
            .ok();
        if let Some(handle) = &handle {
            // Cannot fail: the cell is fresh and we are its only writer.
            let _ = budget.refresher.set(handle.thread().clone());
        }
        (budget, handle)
    }

    /// No thread; refreshed only by [`CpuBudget::refresh_now`].
    pub fn manual(probe: CpuProbe) -> Arc<CpuBudget> {
        let first = probe.sample(None);
        Arc::new(CpuBudget {
            published: Published::new(&first.snapshot),
            writer: Mutex::new(WriterState {
                probe: Some(probe),
                prev: Some(first),
            }),
            refresher: OnceLock::new(),
        })
    }

    /// A fixed budget with no probe at all: returns `snapshot` forever, until
    /// [`CpuBudget::set_fixed`] is called again.
    pub fn fixed(snapshot: CpuSnapshot) -> Arc<CpuBudget> {
        Arc::new(CpuBudget {
            published: Published::new(&snapshot),
            writer: Mutex::new(WriterState {
                probe: None,
                prev: None,
            }),
            refresher: OnceLock::new(),
        })
    }

    /// Publishes `snapshot` as is. On a probing budget it stands only until
    /// the next refresh.
    pub fn set_fixed(&self, snapshot: CpuSnapshot) {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.published.publish(&snapshot);
    }

    /// Reads the probe now and publishes the result (no-op for fixed budgets).
    pub fn refresh_now(&self) {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let WriterState { probe, prev } = &mut *writer;
        if let Some(probe) = probe {
            let sample = probe.sample(prev.as_ref());
            self.published.publish(&sample.snapshot);
            *prev = Some(sample);
        }
    }

    /// The latest reading. Cheap: a few atomic loads, no lock.
    pub fn snapshot(&self) -> CpuSnapshot {
        self.published.load()
    }
}

impl Drop for CpuBudget {
    fn drop(&mut self) {
        if let Some(t) = self.refresher.get() {
            t.unpark();
        }
    }
}

fn refresh_loop(weak: Weak<CpuBudget>, interval: Duration) {
    loop {
        let deadline = Instant::now() + interval;
        loop {
            if weak.strong_count() == 0 {
                return;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Drop unparks us, so a dropped budget is noticed at once; a
            // spurious wakeup just goes round the loop.
            thread::park_timeout(deadline - now);
        }
        // The strong reference lives only for the refresh itself.
        match weak.upgrade() {
            Some(budget) => budget.refresh_now(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::atomic::AtomicUsize;

    /// A temp dir removed on drop (also when the test panics).
    struct TempTree {
        root: PathBuf,
    }

    impl TempTree {
        fn new(name: &str) -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let root = std::env::temp_dir().join(format!(
                "millrace-sys-cpu-{}-{}-{}",
                std::process::id(),
                n,
                name
            ));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(root.join("proc/self")).expect("create temp tree");
            TempTree { root }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.root.join(rel.trim_start_matches('/'))
        }

        fn write(&self, rel: &str, content: &str) {
            let path = self.path(rel);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).expect("create parent dir");
            }
            fs::write(path, content).expect("write file");
        }

        fn mkdir(&self, rel: &str) {
            fs::create_dir_all(self.path(rel)).expect("create dir");
        }

        fn proc_self(&self) -> PathBuf {
            self.path("proc/self")
        }

        /// Writes /proc/self/cgroup and a mountinfo with the given mounts:
        /// (root, mount point relative to the tree, fstype, super options).
        fn proc(&self, cgroup: &str, mounts: &[(&str, &str, &str, &str)]) {
            self.write("proc/self/cgroup", cgroup);
            let mut mountinfo =
                String::from("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n");
            for (i, (root, mount_rel, fstype, opts)) in mounts.iter().enumerate() {
                let mount_point = self.path(mount_rel);
                self.mkdir(mount_rel);
                mountinfo.push_str(&format!(
                    "{} 22 0:{} {} {} rw,nosuid,nodev,noexec,relatime shared:{} - {} {} {}\n",
                    30 + i,
                    40 + i,
                    root,
                    mount_point.display(),
                    7 + i,
                    fstype,
                    fstype,
                    opts
                ));
            }
            self.write("proc/self/mountinfo", &mountinfo);
        }

        fn probe(&self, affinity_cpus: u32) -> CpuProbe {
            CpuProbe::with_proc_self(self.proc_self(), affinity_cpus)
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    const V1_CPU: (&str, &str, &str, &str) = ("/", "cg/cpu", "cgroup", "rw,cpu,cpuacct");
    const V2: (&str, &str, &str, &str) = ("/", "cg/unified", "cgroup2", "rw,nsdelegate");

    fn v1_level(t: &TempTree, dir: &str, quota_us: &str, period_us: &str) {
        t.write(&format!("{dir}/cpu.cfs_quota_us"), quota_us);
        t.write(&format!("{dir}/cpu.cfs_period_us"), period_us);
    }

    #[test]
    fn v1_leaf_quota_half_cpu() {
        let t = TempTree::new("v1-leaf");
        t.proc("4:cpu,cpuacct:/docker/abc\n0::/\n", &[V1_CPU]);
        v1_level(&t, "cg/cpu", "-1\n", "100000\n");
        v1_level(&t, "cg/cpu/docker", "-1\n", "100000\n");
        v1_level(&t, "cg/cpu/docker/abc", "50000\n", "100000\n");
        let s = t.probe(4).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V1);
        assert_eq!(s.quota_cpus, Some(0.5));
        assert_eq!(s.affinity_cpus, 4);
        assert_eq!(s.effective_cpus, 1);
        assert!(!s.throttled_recently);
        assert_eq!(s.usage_cpus, 0.0);
    }

    #[test]
    fn v1_nested_tightest_wins() {
        let t = TempTree::new("v1-nested");
        t.proc("5:cpu:/parent/child\n", &[V1_CPU]);
        v1_level(&t, "cg/cpu", "-1", "100000");
        v1_level(&t, "cg/cpu/parent", "150000", "100000");
        v1_level(&t, "cg/cpu/parent/child", "300000", "100000");
        let s = t.probe(8).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V1);
        assert_eq!(s.quota_cpus, Some(1.5));
        assert_eq!(s.effective_cpus, 2);
        let s = t.probe(1).read(None);
        assert_eq!(s.quota_cpus, Some(1.5));
        assert_eq!(s.effective_cpus, 1);
    }

    #[test]
    fn v2_max_everywhere_is_unlimited() {
        let t = TempTree::new("v2-max");
        t.proc("0::/system.slice/db.service\n", &[V2]);
        t.write("cg/unified/cpu.max", "max 100000\n");
        t.write("cg/unified/system.slice/cpu.max", "max 100000\n");
        t.write("cg/unified/system.slice/db.service/cpu.max", "max 100000\n");
        let s = t.probe(6).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V2);
        assert_eq!(s.quota_cpus, None);
        assert_eq!(s.effective_cpus, 6);
    }

    #[test]
    fn v2_parent_limit_binds_unlimited_leaf() {
        let t = TempTree::new("v2-nested");
        t.proc("0::/kubepods/pod1/ctr\n", &[V2]);
        t.write("cg/unified/kubepods/pod1/cpu.max", "200000 100000\n");
        t.write("cg/unified/kubepods/pod1/ctr/cpu.max", "max 100000\n");
        let s = t.probe(16).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V2);
        assert_eq!(s.quota_cpus, Some(2.0));
        assert_eq!(s.effective_cpus, 2);
    }

    #[test]
    fn v2_controllers_without_cpu_max_is_v2_unlimited() {
        // The root of a v2 hierarchy has no cpu.max; cgroup.controllers says
        // the cpu controller is there all the same.
        let t = TempTree::new("v2-root");
        t.proc("0::/\n4:cpu:/\n", &[V2, V1_CPU]);
        t.write(
            "cg/unified/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        );
        v1_level(&t, "cg/cpu", "50000", "100000");
        let s = t.probe(3).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V2);
        assert_eq!(s.quota_cpus, None);
        assert_eq!(s.effective_cpus, 3);
    }

    #[test]
    fn hybrid_empty_v2_falls_back_to_v1() {
        // This mirrors a hybrid host: an empty cgroup2 at .../unified (no
        // cpu.max, no cpu controller) next to the v1 cpu controller.
        let t = TempTree::new("hybrid");
        t.proc(
            "9:name=systemd:/\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/q\n0::/\n",
            &[
                ("/", "cg/cpuacct", "cgroup", "rw,cpuacct"),
                ("/", "cg/cpuset", "cgroup", "rw,cpuset"),
                ("/", "cg/cpu", "cgroup", "rw,cpu"),
                ("/", "cg/systemd", "cgroup", "rw,name=systemd"),
                V2,
            ],
        );
        t.write("cg/unified/cgroup.controllers", "\n");
        t.write("cg/unified/cpu.stat", "usage_usec 1\nnr_throttled 77\n");
        v1_level(&t, "cg/cpu/q", "250000", "100000");
        t.write(
            "cg/cpu/q/cpu.stat",
            "nr_periods 10\nnr_throttled 3\nthrottled_time 9\n",
        );
        let s = t.probe(8).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V1);
        assert_eq!(s.quota_cpus, Some(2.5));
        assert_eq!(s.effective_cpus, 3);
        assert_eq!(s.nr_throttled, 3);
    }

    #[test]
    fn no_cgroup_at_all() {
        let t = TempTree::new("none");
        t.proc("", &[V1_CPU, V2]);
        t.write("cg/unified/cpu.max", "50000 100000");
        v1_level(&t, "cg/cpu", "50000", "100000");
        let s = t.probe(5).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::None);
        assert_eq!(s.quota_cpus, None);
        assert_eq!(s.effective_cpus, 5);
        assert_eq!(s.nr_throttled, 0);

        // No /proc files at all.
        let missing = CpuProbe::with_proc_self(t.path("does/not/exist"), 2).read(None);
        assert_eq!(missing.cgroup_version, CgroupVersion::None);
        assert_eq!(missing.effective_cpus, 2);

        // A cgroup line but no matching mount.
        t.proc("4:cpu:/x\n0::/x\n", &[]);
        let s = t.probe(5).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::None);
        assert_eq!(s.effective_cpus, 5);
    }

    #[test]
    fn malformed_files_mean_no_limit_at_that_level() {
        // v2: garbage at the leaf, a directory in place of cpu.max at the
        // root, "max" in between.
        let t = TempTree::new("bad-v2");
        t.proc("0::/a/b\n", &[V2]);
        t.write("cg/unified/a/b/cpu.max", "garbage here\n");
        t.write("cg/unified/a/cpu.max", "max 100000\n");
        t.mkdir("cg/unified/cpu.max");
        t.mkdir("cg/unified/a/b/cpu.stat");
        let s = t.probe(4).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V2);
        assert_eq!(s.quota_cpus, None);
        assert_eq!(s.effective_cpus, 4);
        assert_eq!(s.nr_throttled, 0);

        // v1: quota without a period at the leaf, a directory for the quota
        // above, garbage at the root.
        let t = TempTree::new("bad-v1");
        t.proc("garbage line\n4:cpu,cpuacct:/a/b\n::\n", &[V1_CPU]);
        t.write("cg/cpu/a/b/cpu.cfs_quota_us", "50000\n");
        t.mkdir("cg/cpu/a/cpu.cfs_quota_us");
        t.write("cg/cpu/a/cpu.cfs_period_us", "100000\n");
        v1_level(&t, "cg/cpu", "abc", "\u{0}\u{1}");
        t.write("cg/cpu/a/b/cpu.stat", "nr_throttled lots\n");
        let s = t.probe(4).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V1);
        assert_eq!(s.quota_cpus, None);
        assert_eq!(s.effective_cpus, 4);
        assert_eq!(s.nr_throttled, 0);

        // A bad level does not hide a good one further up.
        v1_level(&t, "cg/cpu", "100000", "100000");
        let s = t.probe(4).read(None);
        assert_eq!(s.quota_cpus, Some(1.0));
        assert_eq!(s.effective_cpus, 1);

        // Zero and negative values are no limit, not a division by zero.
        v1_level(&t, "cg/cpu", "100000", "0");
        assert_eq!(t.probe(4).read(None).quota_cpus, None);
        v1_level(&t, "cg/cpu", "-5", "100000");
        assert_eq!(t.probe(4).read(None).quota_cpus, None);

        // Non-UTF-8 and garbage in mountinfo: skipped, no panic.
        fs::write(t.path("proc/self/mountinfo"), b"\xff\xfe - - -\n1 2 3\n")
            .expect("write mountinfo");
        let s = t.probe(4).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::None);
        assert_eq!(s.effective_cpus, 4);
    }

    #[test]
    fn throttling_detected_between_reads() {
        let t = TempTree::new("throttle");
        t.proc("0::/db\n", &[V2]);
        t.write("cg/unified/db/cpu.max", "100000 100000\n");
        t.write(
            "cg/unified/db/cpu.stat",
            "usage_usec 5\nnr_periods 20\nnr_throttled 5\n",
        );
        let probe = t.probe(2);
        let first = probe.sample(None);
        assert_eq!(first.snapshot.nr_throttled, 5);
        assert!(!first.snapshot.throttled_recently);

        t.write(
            "cg/unified/db/cpu.stat",
            "usage_usec 6\nnr_periods 30\nnr_throttled 9\n",
        );
        let second = probe.sample(Some(&first));
        assert_eq!(second.snapshot.nr_throttled, 9);
        assert!(second.snapshot.throttled_recently);

        let third = probe.sample(Some(&second));
        assert_eq!(third.snapshot.nr_throttled, 9);
        assert!(!third.snapshot.throttled_recently);

        // The same through a manual budget.
        t.write("cg/unified/db/cpu.stat", "nr_throttled 5\n");
        let budget = CpuBudget::manual(t.probe(2));
        assert!(!budget.snapshot().throttled_recently);
        t.write("cg/unified/db/cpu.stat", "nr_throttled 9\n");
        budget.refresh_now();
        assert!(budget.snapshot().throttled_recently);
        assert_eq!(budget.snapshot().nr_throttled, 9);
        budget.refresh_now();
        assert!(!budget.snapshot().throttled_recently);
    }

    #[test]
    fn usage_rate_from_injected_cpu_time() {
        let t = TempTree::new("usage");
        t.proc("", &[]);
        let cpu_time_ns = Arc::new(AtomicU64::new(0));
        let source = Arc::clone(&cpu_time_ns);
        let probe = t
            .probe(4)
            .with_cpu_time_source(move || Duration::from_nanos(source.load(Ordering::SeqCst)));

        let first = probe.sample(None);
        assert_eq!(first.snapshot.usage_cpus, 0.0);
        thread::sleep(Duration::from_millis(50));
        cpu_time_ns.store(500_000_000, Ordering::SeqCst);
        let second = probe.sample(Some(&first));

        let wall_s = second.taken_at.duration_since(first.taken_at).as_secs_f64();
        assert!(wall_s >= 0.05, "slept 50 ms, measured {wall_s} s");
        let expected = 0.5 / wall_s;
        let usage = second.snapshot.usage_cpus;
        assert!(
            (usage - expected).abs() < 1e-9 * expected,
            "usage {usage}, expected {expected}"
        );
        assert!(usage <= 10.0 + 1e-9 && usage > 0.5, "usage {usage}");

        // No CPU spent since: rate 0. A source that goes backwards: 0, not negative.
        let third = probe.sample(Some(&second));
        assert_eq!(third.snapshot.usage_cpus, 0.0);
        cpu_time_ns.store(0, Ordering::SeqCst);
        assert_eq!(probe.sample(Some(&third)).snapshot.usage_cpus, 0.0);
    }

    #[test]
    fn v1_mount_root_not_slash() {
        // Docker without a cgroup namespace: the mount's root is the
        // container's own cgroup.
        let t = TempTree::new("v1-root");
        t.proc(
            "4:cpuacct,cpu:/docker/abc/inner\n",
            &[("/docker/abc", "cg/cpu", "cgroup", "rw,cpuacct,cpu")],
        );
        v1_level(&t, "cg/cpu", "-1", "100000");
        v1_level(&t, "cg/cpu/inner", "75000", "50000");
        let s = t.probe(4).read(None);
        assert_eq!(s.cgroup_version, CgroupVersion::V1);
        assert_eq!(s.quota_cpus, Some(1.5));
        assert_eq!(s.effective_cpus, 2);
    }

    #[test]
    fn parsers() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("50000 100000\n"), Some(0.5));
        assert_eq!(parse_cpu_max("50000"), None);
        assert_eq!(parse_cpu_max(""), None);
        assert_eq!(parse_cfs_quota("-1", "100000"), None);
        assert_eq!(parse_cfs_quota(" 300000\n", "100000\n"), Some(3.0));
        assert_eq!(
            parse_nr_throttled("nr_periods 1\nnr_throttled 42\n"),
            Some(42)
        );
        assert_eq!(parse_nr_throttled("nr_throttled_x 42\n"), None);

        assert_eq!(effective_cpus(0, None), 1);
        assert_eq!(effective_cpus(4, Some(0.01)), 1);
        assert_eq!(effective_cpus(4, Some(1e30)), 4);
        assert_eq!(effective_cpus(8, Some(2.0)), 2);
        assert_eq!(effective_cpus(8, Some(2.1)), 3);
    }

    #[test]
    fn system_probe_reads_real_machine() {
        let probe = CpuProbe::system();
        let first = probe.sample(None);
        let s = &first.snapshot;
        assert!(s.affinity_cpus >= 1);
        assert!(s.effective_cpus >= 1 && s.effective_cpus <= s.affinity_cpus);
        if let Some(q) = s.quota_cpus {
            assert!(q > 0.0);
        }
        // Burn a little CPU so the rate is plausibly non-zero.
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        let second = probe.sample(Some(&first));
        assert!(second.snapshot.usage_cpus >= 0.0);
        assert!(second.snapshot.usage_cpus.is_finite());
        println!("real machine: {:?}", second.snapshot);
        assert!(affinity_cpu_count() >= 1);
        assert!(thread_cpu_time() <= process_cpu_time() + Duration::from_millis(20));
    }

    #[test]
    fn refresh_thread_exits_when_budget_dropped() {
        let t = TempTree::new("thread");
        t.proc("", &[]);
        let reads = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&reads);
        let probe = t.probe(2).with_cpu_time_source(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Duration::ZERO
        });
        let (budget, handle) = CpuBudget::start_with_handle(probe, Duration::from_millis(2));
        let handle = handle.expect("refresh thread spawned");
        assert_eq!(handle.thread().name(), Some(REFRESH_THREAD_NAME));

        let deadline = Instant::now() + Duration::from_secs(1);
        while reads.load(Ordering::SeqCst) < 3 {
            assert!(Instant::now() < deadline, "refresh thread never refreshed");
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(budget.snapshot().effective_cpus, 2);

        let weak = Arc::downgrade(&budget);
        drop(budget);
        let deadline = Instant::now() + Duration::from_secs(1);
        while !handle.is_finished() {
            assert!(Instant::now() < deadline, "refresh thread still running");
            thread::sleep(Duration::from_millis(1));
        }
        handle.join().expect("refresh thread did not panic");
        assert!(weak.upgrade().is_none());
        // The probe (and its closure) went with the budget, and no refresh
        // can happen any more.
        assert_eq!(Arc::strong_count(&reads), 1);
        let after = reads.load(Ordering::SeqCst);
        thread::sleep(Duration::from_millis(10));
        assert_eq!(reads.load(Ordering::SeqCst), after);
    }

    #[test]
    fn start_with_long_interval_exits_promptly() {
        let t = TempTree::new("long");
        t.proc("", &[]);
        let (budget, handle) = CpuBudget::start_with_handle(t.probe(1), Duration::from_secs(3600));
        let handle = handle.expect("refresh thread spawned");
        drop(budget);
        let deadline = Instant::now() + Duration::from_secs(1);
        while !handle.is_finished() {
            assert!(Instant::now() < deadline, "drop did not wake the refresher");
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn fixed_budget_and_set_fixed() {
        let mut s = CpuSnapshot::unconstrained(8);
        s.quota_cpus = Some(0.5);
        s.effective_cpus = 1;
        s.cgroup_version = CgroupVersion::V2;
        s.usage_cpus = 0.75;
        let budget = CpuBudget::fixed(s.clone());
        assert_eq!(budget.snapshot(), s);
        budget.refresh_now();
        assert_eq!(budget.snapshot(), s);

        let mut s2 = CpuSnapshot::unconstrained(3);
        s2.throttled_recently = true;
        s2.nr_throttled = 12;
        budget.set_fixed(s2.clone());
        assert_eq!(budget.snapshot(), s2);
        assert_eq!(budget.snapshot().quota_cpus, None);
    }

    #[test]
    fn concurrent_readers_never_see_torn_snapshots() {
        let a = CpuSnapshot::unconstrained(2);
        let mut b = CpuSnapshot::unconstrained(64);
        b.quota_cpus = Some(4.0);
        b.effective_cpus = 4;
        b.cgroup_version = CgroupVersion::V1;
        b.nr_throttled = 1000;
        b.throttled_recently = true;
        b.usage_cpus = 3.5;
        let budget = CpuBudget::fixed(a.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let budget = Arc::clone(&budget);
                let stop = Arc::clone(&stop);
                let reads = Arc::clone(&reads);
                let (a, b) = (a.clone(), b.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let s = budget.snapshot();
                        assert!(s == a || s == b, "torn snapshot {s:?}");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // Keep writing until the readers have overlapped with plenty of
        // writes (threads may start late), but never for long.
        let deadline = Instant::now() + Duration::from_millis(500);
        let mut writes = 0u64;
        while (writes < 20_000 || reads.load(Ordering::Relaxed) < 100_000)
            && Instant::now() < deadline
        {
            budget.set_fixed(if writes & 1 == 0 {
                b.clone()
            } else {
                a.clone()
            });
            writes += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader saw a torn snapshot");
        }
        assert!(reads.load(Ordering::Relaxed) > 0);
    }
}
