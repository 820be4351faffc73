//! millrace-metrics: named counters and gauges, registered by every layer and
//! read by whoever exposes them (the benchmarks now, SHOW GLOBAL STATUS,
//! information_schema and Prometheus later).
//!
//! Owns: the registry and the counter type. Must not know about: what any
//! metric means. Layers register their own metrics and keep `Arc<Counter>`
//! handles, so the hot path is one relaxed atomic add and never a lookup.
//! Depends on: nothing of millrace.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// A monotonically increasing count (events, bytes, nanoseconds).
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn new() -> Self {
        Self(AtomicU64::new(0))
    }
    #[inline]
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows; rates are differences of two samples.
    Counter,
    /// A current value (an LSN, a length, an average).
    Gauge,
}

type GaugeFn = Arc<dyn Fn() -> u64 + Send + Sync>;

enum Source {
    Counter(Arc<Counter>),
    Gauge(GaugeFn),
}

struct Entry {
    subsystem: &'static str,
    name: &'static str,
    help: &'static str,
    source: Source,
}

/// One metric's value at the moment of `Registry::snapshot`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub subsystem: &'static str,
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub value: u64,
}

/// The set of metrics of one engine instance. Registration takes a write
/// lock (rare: at start-up); reading takes a read lock and never blocks the
/// counters themselves.
#[derive(Default)]
pub struct Registry {
    entries: RwLock<Vec<Entry>>,
}

impl Registry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Registers a counter and returns the handle to increment. Registering a
    /// name twice returns the first counter, so two components may share one.
    pub fn counter(
        &self,
        subsystem: &'static str,
        name: &'static str,
        help: &'static str,
    ) -> Arc<Counter> {
        let mut entries = self.entries.write().expect("metrics registry poisoned");
        for e in entries.iter() {
            if e.name == name {
                if let Source::Counter(c) = &e.source {
                    return c.clone();
                }
                panic!("metric {name} registered as a gauge and as a counter");
            }
        }
        let c = Arc::new(Counter::new());
        entries.push(Entry {
            subsystem,
            name,
            help,
            source: Source::Counter(c.clone()),
        });
        c
    }

    /// Registers a gauge computed on read. A later registration under the same
    /// name replaces the earlier one (a component re-opened after recovery).
    pub fn gauge(
        &self,
        subsystem: &'static str,
        name: &'static str,
        help: &'static str,
        read: impl Fn() -> u64 + Send + Sync + 'static,
    ) {
        let mut entries = self.entries.write().expect("metrics registry poisoned");
        entries.retain(|e| e.name != name);
        entries.push(Entry {
            subsystem,
            name,
            help,
            source: Source::Gauge(Arc::new(read)),
        });
    }

    /// Every metric's current value, in registration order.
    pub fn snapshot(&self) -> Vec<Sample> {
        let entries = self.entries.read().expect("metrics registry poisoned");
        entries
            .iter()
            .map(|e| {
                let (kind, value) = match &e.source {
                    Source::Counter(c) => (Kind::Counter, c.get()),
                    Source::Gauge(f) => (Kind::Gauge, f()),
                };
                Sample {
                    subsystem: e.subsystem,
                    name: e.name,
                    help: e.help,
                    kind,
                    value,
                }
            })
            .collect()
    }

    /// One metric's current value by name.
    pub fn get(&self, name: &str) -> Option<u64> {
        let entries = self.entries.read().expect("metrics registry poisoned");
        entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| match &e.source {
                Source::Counter(c) => c.get(),
                Source::Gauge(f) => f(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_are_read_back() {
        let r = Registry::new();
        let c = r.counter("log", "log_writes", "writes issued");
        c.add(3);
        c.inc();
        let same = r.counter("log", "log_writes", "writes issued");
        same.inc();
        r.gauge("log", "log_lsn_current", "current LSN", || 42);
        let snap = r.snapshot();
        assert_eq!(snap.len(), 2);
        assert_eq!(snap[0].value, 5);
        assert_eq!(snap[0].kind, Kind::Counter);
        assert_eq!(snap[1].value, 42);
        assert_eq!(snap[1].kind, Kind::Gauge);
        assert_eq!(r.get("log_lsn_current"), Some(42));
        assert_eq!(r.get("nope"), None);
    }
}
