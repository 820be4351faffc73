//! Page latches: shared/exclusive, held across function calls by a
//! mini-transaction (so no borrow-scoped guards), with waits counted.
//! Fast path: one compare-exchange. Slow path: a mutex and condvar; the
//! releaser notifies only when someone waits.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

const WRITER: u32 = 1 << 31;

pub struct Latch {
    /// WRITER bit, or the number of readers.
    state: AtomicU32,
    waiters: AtomicU32,
    /// Writers waiting: new readers hold back so a writer is not starved.
    x_waiters: AtomicU32,
    mutex: Mutex<()>,
    cv: Condvar,
}

/// What a blocking acquisition cost; the pool adds it to its metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct LatchWait {
    pub waited: bool,
    pub wait_ns: u64,
}

impl Default for Latch {
    fn default() -> Self {
        Self::new()
    }
}

impl Latch {
    pub fn new() -> Self {
        Self {
            state: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            x_waiters: AtomicU32::new(0),
            mutex: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    pub fn try_s(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        s & WRITER == 0
            && self.x_waiters.load(Ordering::Relaxed) == 0
            && self
                .state
                .compare_exchange(s, s + 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    pub fn try_x(&self) -> bool {
        self.state
            .compare_exchange(0, WRITER, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    pub fn lock_s(&self) -> LatchWait {
        for _ in 0..32 {
            if self.try_s() {
                return LatchWait::default();
            }
            std::hint::spin_loop();
        }
        // Queued readers also wait for queued writers: a stream of readers
        // cannot starve a writer (a B+tree split waiting for the index latch).
        self.slow(|| self.try_s(), false)
    }

    pub fn lock_x(&self) -> LatchWait {
        for _ in 0..32 {
            if self.try_x() {
                return LatchWait::default();
            }
            std::hint::spin_loop();
        }
        self.slow(|| self.try_x(), true)
    }

    fn slow(&self, try_get: impl Fn() -> bool, exclusive: bool) -> LatchWait {
        let t0 = Instant::now();
        if exclusive {
            self.x_waiters.fetch_add(1, Ordering::SeqCst);
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = self.mutex.lock().expect("latch mutex poisoned");
        while !try_get() {
            g = self.cv.wait(g).expect("latch mutex poisoned");
        }
        drop(g);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        if exclusive && self.x_waiters.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Readers queued behind us may go once we release; wake them
            // now too in case we never block anyone.
            self.wake();
        }
        LatchWait {
            waited: true,
            wait_ns: t0.elapsed().as_nanos() as u64,
        }
    }

    pub fn unlock_s(&self) {
        let prev = self.state.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(
            prev & !WRITER > 0 && prev & WRITER == 0,
            "unlock_s without S"
        );
        if prev == 1 {
            self.wake();
        }
    }

    pub fn unlock_x(&self) {
        let prev = self.state.swap(0, Ordering::SeqCst);
        debug_assert_eq!(prev, WRITER, "unlock_x without X");
        self.wake();
    }

    /// X to S without letting a writer in between.
    pub fn downgrade(&self) {
        let prev = self.state.swap(1, Ordering::SeqCst);
        debug_assert_eq!(prev, WRITER, "downgrade without X");
        self.wake();
    }

    fn wake(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.mutex.lock().expect("latch mutex poisoned");
            self.cv.notify_all();
        }
    }

    pub fn is_x_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & WRITER != 0
    }
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn shared_excludes_exclusive() {
        let l = Latch::new();
        assert!(l.try_s());
        assert!(l.try_s());
        assert!(!l.try_x());
        l.unlock_s();
        l.unlock_s();
        assert!(l.try_x());
        assert!(!l.try_s());
        l.downgrade();
        assert!(l.try_s());
        l.unlock_s();
        l.unlock_s();
        assert!(!l.is_locked());
    }

    #[test]
    fn contended_counter_is_exact() {
        let l = Arc::new(Latch::new());
        let v = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let (l, v) = (l.clone(), v.clone());
                std::thread::spawn(move || {
                    for n in 0..20_000 {
                        if (n + i) % 3 == 0 {
                            l.lock_s();
                            let _ = v.load(Ordering::Relaxed);
                            l.unlock_s();
                        } else {
                            l.lock_x();
                            // Not atomic as a whole: only correct under X.
                            let x = v.load(Ordering::Relaxed);
                            v.store(x + 1, Ordering::Relaxed);
                            l.unlock_x();
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let expected: u64 = (0..4u64)
            .map(|i| (0..20_000u64).filter(|n| (n + i) % 3 != 0).count() as u64)
            .sum();
        assert_eq!(v.load(Ordering::Relaxed), expected);
    }
}
