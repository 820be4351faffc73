//! What every bench measures with: latency histograms and their summary,
//! the measured window after the warm-up (clock, process CPU time and
//! counters sampled at both ends), and the counter structs (`counters!`).

use hdrhistogram::Histogram;
use millrace_metrics::Registry;
use millrace_sys::cpu::process_cpu_time;
use std::sync::Barrier;
use std::thread::{self, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// The start of every run that is not measured: threads still starting, the
/// CPU budget's first refresh, the first lap of the log buffer.
pub(crate) const WARMUP: Duration = Duration::from_millis(500);
/// The largest latency the histograms track exactly; longer ones count as
/// this. Fixed bounds, because a clamped record never resizes a histogram.
pub(crate) const HIGHEST_TRACKED_US: u64 = 600_000_000;
pub(crate) const MIB: f64 = (1u64 << 20) as f64;

pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_TRACKED_US, 3)
        .expect("the bounds and precision are valid")
}

/// p50_us, p95_us, p99_us and max_us: how every bench reports latency.
pub(crate) fn latency_summary(latency_us: &Histogram<u64>) -> [(&'static str, u64); 4] {
    [
        ("p50_us", latency_us.value_at_quantile(0.5)),
        ("p95_us", latency_us.value_at_quantile(0.95)),
        ("p99_us", latency_us.value_at_quantile(0.99)),
        ("max_us", latency_us.max()),
    ]
}

/// Adds one thread's latencies to the total.
pub(crate) fn merge_latency(
    total: &mut Histogram<u64>,
    part: &Histogram<u64>,
) -> Result<(), String> {
    total
        .add(part)
        .map_err(|e| format!("merging latency histograms: {e:?}"))
}

/// The warm-up end and the deadline, computed by every thread right after
/// the start barrier (they differ by microseconds).
pub(crate) struct Window {
    pub(crate) warmup_end: Instant,
    pub(crate) end: Instant,
}

impl Window {
    pub(crate) fn starting_now(seconds: f64) -> Self {
        let start = Instant::now();
        Self {
            warmup_end: start + WARMUP,
            end: start + Duration::from_secs_f64(seconds),
        }
    }

    pub(crate) fn sleep_through_warmup(&self) {
        thread::sleep(self.warmup_end.saturating_duration_since(Instant::now()));
    }
}

/// The clock, the process CPU time and a bench's counters at one moment.
pub(crate) struct Sample<C> {
    pub(crate) at: Instant,
    pub(crate) cpu_time: Duration,
    pub(crate) counters: C,
}

impl<C> Sample<C> {
    pub(crate) fn take(read_counters: impl FnOnce() -> C) -> Self {
        Self {
            at: Instant::now(),
            cpu_time: process_cpu_time(),
            counters: read_counters(),
        }
    }

    pub(crate) fn wall_s_since(&self, before: &Self) -> f64 {
        self.at.duration_since(before.at).as_secs_f64()
    }

    pub(crate) fn cpu_s_since(&self, before: &Self) -> f64 {
        self.cpu_time.saturating_sub(before.cpu_time).as_secs_f64()
    }
}

/// The main thread's side of a measured run: passes `start` with the
/// workers, sleeps through the warm-up, samples, waits for every worker,
/// samples again. The window ends when the last operation started before
/// the deadline is done, so every counted operation (and its commit's
/// flush) is in the change between the samples. Returns the workers'
/// results, in order, and the two samples.
pub(crate) fn measure_window<R, C>(
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
    ($(#[$attr:meta])* $vis:vis struct $name:ident { $($field:ident: $metric:literal,)+ }) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Default)]
        $vis struct $name {
            $($vis $field: u64,)+
        }

        impl $name {
            $vis const NAMES: &'static [&'static str] = &[$($metric),+];

            $vis fn read(registry: &millrace_metrics::Registry) -> Self {
                Self {
                    $($field: registry.get($metric).unwrap_or(0),)+
                }
            }

            $vis fn since(&self, before: &Self) -> Self {
                Self {
                    $($field: self.$field - before.$field,)+
                }
            }
        }
    };
}
pub(crate) use counters;

/// Fails before any thread starts if a metric the bench reads is gone;
/// `owner` ("the log", "the store", ...) names who should register it.
pub(crate) fn check_registered<'a>(
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
pub(crate) fn validate_seconds(seconds: f64) -> Result<(), String> {
    if !seconds.is_finite() || seconds <= WARMUP.as_secs_f64() {
        return Err(format!(
            "--seconds must be more than the {} s warm-up, not {seconds}",
            WARMUP.as_secs_f64()
        ));
    }
    Ok(())
}
