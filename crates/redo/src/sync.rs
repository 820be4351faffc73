//! Waiting primitives of the commit pipeline. Neither sleeps on a timer to
//! find out whether a condition holds: a thread that changes the condition
//! wakes exactly the threads that can proceed (seed 004: the recent_closed
//! sleep-poll of MySQL 8.0 halved throughput).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, Thread};
use std::time::Duration;

struct Waiter {
    thread: Thread,
    woken: AtomicBool,
}

struct Entry {
    target: u64,
    seq: u64,
    waiter: Arc<Waiter>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.target, self.seq) == (other.target, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.target, self.seq).cmp(&(other.target, other.seq))
    }
}

/// Why `LsnWaiters::wait` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The value reached the target.
    Satisfied,
    /// Woken without the target being reached: picked as the next group
    /// commit leader, or the whole log failed or is shutting down.
    NotSatisfied,
}

/// Threads waiting for a monotonically increasing value (an LSN) to reach
/// their target. `notify` wakes only the waiters whose target is reached
/// (no thundering herd), optionally plus the one with the smallest target
/// still unreached (the next group commit leader).
pub(crate) struct LsnWaiters {
    /// Number of queued waiters; lets `notify` skip the mutex when zero.
    count: AtomicUsize,
    next_seq: AtomicU64,
    queue: Mutex<BinaryHeap<Reverse<Entry>>>,
}

impl LsnWaiters {
    pub(crate) fn new() -> Self {
        Self {
            count: AtomicUsize::new(0),
            next_seq: AtomicU64::new(0),
            queue: Mutex::new(BinaryHeap::new()),
        }
    }

    /// `value` must load with SeqCst (it pairs with the notifier's count load).
    /// Blocks until `value() >= target`, or until woken as a leader candidate,
    /// or until `give_up()` holds when checked under the queue lock. Whoever
    /// makes `give_up()` true must call `notify_all` (or `notify` with
    /// `wake_extra`) after doing so, so that no waiter sleeps through it.
    pub(crate) fn wait(
        &self,
        value: impl Fn() -> u64,
        target: u64,
        give_up: impl Fn() -> bool,
    ) -> Woken {
        let waiter = Arc::new(Waiter {
            thread: thread::current(),
            woken: AtomicBool::new(false),
        });
        {
            let mut queue = self.queue.lock().expect("waiter queue poisoned");
            // SeqCst pairs with the notifier's `value` store then `count`
            // load: either it sees us counted, or we see its new value.
            self.count.fetch_add(1, Ordering::SeqCst);
            if value() >= target {
                self.count.fetch_sub(1, Ordering::SeqCst);
                return Woken::Satisfied;
            }
            if give_up() {
                self.count.fetch_sub(1, Ordering::SeqCst);
                return Woken::NotSatisfied;
            }
            let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
            queue.push(Reverse(Entry {
                target,
                seq,
                waiter: waiter.clone(),
            }));
        }
        // park() may return spuriously; `woken` is the truth.
        while !waiter.woken.load(Ordering::Acquire) {
            thread::park();
        }
        if value() >= target {
            Woken::Satisfied
        } else {
            Woken::NotSatisfied
        }
    }

    /// Wakes every waiter whose target is at most `value`; with `wake_extra`
    /// also the first waiter still unsatisfied. Call after storing `value`.
    pub(crate) fn notify(&self, value: u64, wake_extra: bool) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut woken: Vec<Arc<Waiter>> = Vec::new();
        {
            let mut queue = self.queue.lock().expect("waiter queue poisoned");
            while let Some(Reverse(top)) = queue.peek() {
                if top.target > value {
                    break;
                }
                let Reverse(e) = queue.pop().expect("peeked entry exists");
                woken.push(e.waiter);
            }
            if wake_extra {
                if let Some(Reverse(e)) = queue.pop() {
                    woken.push(e.waiter);
                }
            }
            self.count.fetch_sub(woken.len(), Ordering::SeqCst);
        }
        for w in woken {
            w.woken.store(true, Ordering::Release);
            w.thread.unpark();
        }
    }

    /// Wakes everyone (failure, shutdown).
    pub(crate) fn notify_all(&self) {
        self.notify(u64::MAX, false);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

/// A wake-up for one background role (the log writer, the flusher). `set`
/// costs one atomic load when the sleeper is awake, so producers may call it
/// on every commit.
pub(crate) struct Event {
    sleeping: AtomicBool,
    flag: Mutex<bool>,
    cv: Condvar,
}

impl Event {
    pub(crate) fn new() -> Self {
        Self {
            sleeping: AtomicBool::new(false),
            flag: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Call after making the sleeper's condition true.
    pub(crate) fn set(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            let mut f = self.flag.lock().expect("event poisoned");
            *f = true;
            self.cv.notify_one();
        }
    }

    /// Sleeps until `ready()` holds (checked after announcing the sleep, so a
    /// `set` that follows a change is never missed) or `timeout` passes.
    /// Returns whether `ready()` held.
    pub(crate) fn wait_until(&self, timeout: Option<Duration>, ready: impl Fn() -> bool) -> bool {
        if ready() {
            return true;
        }
        self.sleeping.store(true, Ordering::SeqCst);
        let mut f = self.flag.lock().expect("event poisoned");
        loop {
            if ready() {
                break;
            }
            if *f {
                // A stale set from before this sleep; consume and re-check.
                *f = false;
                continue;
            }
            match timeout {
                None => f = self.cv.wait(f).expect("event poisoned"),
                Some(t) => {
                    let (g, res) = self.cv.wait_timeout(f, t).expect("event poisoned");
                    f = g;
                    if res.timed_out() && !*f {
                        break;
                    }
                }
            }
        }
        *f = false;
        self.sleeping.store(false, Ordering::SeqCst);
        ready()
    }

    /// Wakes the sleeper unconditionally (shutdown).
    pub(crate) fn force(&self) {
        let mut f = self.flag.lock().expect("event poisoned");
        *f = true;
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn waiters_wake_only_when_satisfied() {
        let w = Arc::new(LsnWaiters::new());
        let v = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        for target in [10u64, 20, 30] {
            let (w, v) = (w.clone(), v.clone());
            handles.push(thread::spawn(move || {
                assert_eq!(
                    w.wait(|| v.load(Ordering::SeqCst), target, || false),
                    Woken::Satisfied
                );
                assert!(v.load(Ordering::SeqCst) >= target);
            }));
        }
        while w.len() < 3 {
            thread::yield_now();
        }
        v.store(20, Ordering::SeqCst);
        w.notify(20, false);
        // The waiter for 30 must still be queued.
        for h in handles.drain(..2) {
            h.join().unwrap();
        }
        assert_eq!(w.len(), 1);
        v.store(30, Ordering::SeqCst);
        w.notify(30, false);
        handles.pop().unwrap().join().unwrap();
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn wake_extra_wakes_the_smallest_unsatisfied() {
        let w = Arc::new(LsnWaiters::new());
        let v = Arc::new(AtomicU64::new(0));
        let (w2, v2) = (w.clone(), v.clone());
        let h = thread::spawn(move || w2.wait(|| v2.load(Ordering::SeqCst), 5, || false));
        while w.len() < 1 {
            thread::yield_now();
        }
        w.notify(1, true);
        assert_eq!(h.join().unwrap(), Woken::NotSatisfied);
    }

    #[test]
    fn event_wait_sees_condition_set_before_sleep() {
        let e = Arc::new(Event::new());
        let flag = Arc::new(AtomicBool::new(false));
        let (e2, f2) = (e.clone(), flag.clone());
        let h = thread::spawn(move || e2.wait_until(None, || f2.load(Ordering::SeqCst)));
        thread::sleep(Duration::from_millis(5));
        flag.store(true, Ordering::SeqCst);
        e.set();
        assert!(h.join().unwrap());
        assert!(!e.wait_until(Some(Duration::from_millis(1)), || false));
    }
}
