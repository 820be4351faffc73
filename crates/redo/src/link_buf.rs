//! The link buffer (MySQL's `Link_buf`): a ring of atomics that lets many
//! threads publish "[from, to) is done" in any order, and lets anyone advance
//! a tail up to which everything is done, without a mutex.
//!
//! Slot `from % capacity` holds `to` for the link that starts at `from`.
//! A slot never needs clearing: links are contiguous and the tail moves from
//! one link's end to the next link's start, so every value left in a slot by
//! an earlier lap is an old link's end, which the tail has already passed
//! (`value <= tail`). A slot value greater than the tail can only be the link
//! starting exactly at the tail. This is why several threads may advance the
//! tail concurrently with a compare-exchange (the closers of recent_closed do).

use crate::sync::{LsnWaiters, Woken};
// Under `--cfg loom` the slots and the tail are loom's atomics, so the model
// check at the end of this file explores every interleaving of them.
#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicU64, Ordering};

pub struct LinkBuf {
    slots: Box<[AtomicU64]>,
    /// Power of two, so `from % capacity` is a mask.
    mask: u64,
    tail: AtomicU64,
    space_waiters: LsnWaiters,
}

impl LinkBuf {
    /// `capacity` is rounded up to a power of two (at least 2).
    pub fn new(capacity: usize, start: u64) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        let slots = (0..capacity).map(|_| AtomicU64::new(0)).collect();
        Self {
            slots,
            mask: capacity as u64 - 1,
            tail: AtomicU64::new(start),
            space_waiters: LsnWaiters::new(),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.mask + 1
    }

    pub fn tail(&self) -> u64 {
        self.tail.load(Ordering::Acquire)
    }

    pub fn has_space(&self, from: u64) -> bool {
        from < self.tail.load(Ordering::SeqCst) + self.capacity()
    }

    /// Publishes that [from, to) is done. The caller must have waited for
    /// space (`from - tail < capacity`).
    pub fn add_link(&self, from: u64, to: u64) {
        debug_assert!(to > from, "a link covers at least one byte");
        debug_assert!(self.has_space(from), "add_link without space: from {from}");
        // SeqCst: an advancer that loads this slot after we store it, or we
        // (in `advance`) see its tail; never both miss each other.
        self.slots[(from & self.mask) as usize].store(to, Ordering::SeqCst);
    }

    /// Moves the tail over every contiguous finished link and returns it.
    /// Safe to call from many threads at once.
    pub fn advance(&self) -> u64 {
        // The fences order "publish a slot, then read the tail" (a publisher
        // calling advance after add_link) against "move the tail, then read
        // the next slot" (an advancer): of two threads doing these, at least
        // one sees the other's store, so a published link is never stranded
        // behind a tail nobody advances. (The loom model check found exactly
        // that stranding without them.)
        fence(Ordering::SeqCst);
        let start = self.tail.load(Ordering::SeqCst);
        let mut cur = start;
        loop {
            fence(Ordering::SeqCst);
            let next = self.slots[(cur & self.mask) as usize].load(Ordering::SeqCst);
            if next <= cur {
                break;
            }
            match self
                .tail
                .compare_exchange(cur, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => cur = next,
                // Someone else advanced; continue from where they are.
                Err(actual) => cur = actual,
            }
        }
        if cur != start {
            self.space_waiters.notify(cur, false);
        }
        cur
    }

    /// Blocks until a link starting at `from` fits. The caller holds a range
    /// after `from`'s predecessors, which are being finished by running
    /// threads; their `advance` wakes us. Returns whether it had to wait.
    pub fn wait_for_space(&self, from: u64, give_up: impl Fn() -> bool) -> bool {
        if self.has_space(from) {
            return false;
        }
        let target = from + 1 - self.capacity();
        loop {
            // Advance ourselves first: the links may all be there already.
            if self.advance() >= target || give_up() {
                return true;
            }
            match self
                .space_waiters
                .wait(|| self.tail.load(Ordering::SeqCst), target, &give_up)
            {
                Woken::Satisfied => return true,
                Woken::NotSatisfied => {
                    if give_up() {
                        return true;
                    }
                }
            }
        }
    }

    pub(crate) fn wake_all_waiters(&self) {
        self.space_waiters.notify_all();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use millrace_sys::rng::SplitMix64;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn out_of_order_links_advance_to_the_first_gap() {
        let lb = LinkBuf::new(16, 100);
        lb.add_link(105, 110);
        assert_eq!(lb.advance(), 100);
        lb.add_link(100, 105);
        assert_eq!(lb.advance(), 110);
        lb.add_link(112, 120);
        assert_eq!(lb.advance(), 110, "gap at 110..112");
        lb.add_link(110, 112);
        assert_eq!(lb.advance(), 120);
    }

    #[test]
    fn stale_slots_from_earlier_laps_are_not_links() {
        let lb = LinkBuf::new(8, 0);
        // A long link, then short ones that wrap the ring several times.
        lb.add_link(0, 3);
        assert_eq!(lb.advance(), 3);
        for from in 3..40 {
            lb.add_link(from, from + 1);
            assert_eq!(lb.advance(), from + 1);
        }
    }

    /// Many threads take ranges from a shared counter, wait for space, publish
    /// in random order and sometimes advance; the tail must end exactly at the
    /// total and never jump over an unpublished range.
    #[test]
    fn stress_many_threads_small_ring() {
        for seed in 0..4u64 {
            let lb = Arc::new(LinkBuf::new(64, 0));
            let next = Arc::new(AtomicU64::new(0));
            let threads = 8;
            let per_thread = 4000;
            let mut hs = Vec::new();
            for t in 0..threads {
                let (lb, next) = (lb.clone(), next.clone());
                hs.push(thread::spawn(move || {
                    let mut rng = SplitMix64::new(seed * 100 + t);
                    for _ in 0..per_thread {
                        let len = 1 + rng.below(20);
                        let from = next.fetch_add(len, Ordering::SeqCst);
                        lb.wait_for_space(from, || false);
                        if rng.chance(1, 8) {
                            thread::yield_now();
                        }
                        lb.add_link(from, from + len);
                        let tail = lb.advance();
                        // Our own link is published; the tail may not be past
                        // the end of anything unpublished, which we cannot see
                        // here, but it can never exceed what was handed out.
                        assert!(tail <= next.load(Ordering::SeqCst));
                    }
                }));
            }
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(lb.advance(), next.load(Ordering::SeqCst));
        }
    }
}

/// Model check of the lock-free core with loom: every interleaving (up to the
/// preemption bound) of three publishers on a 4-slot ring. The first
/// publishes [0,1), advances past it, then publishes [4,6) into the same slot
/// (the previous lap's value, 1, is still there for the others to read).
/// Run with
/// `RUSTFLAGS="--cfg loom" cargo test -p millrace-redo --release --lib link_buf`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::LinkBuf;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;

    const LINKS: [(u64, u64); 4] = [(0, 1), (4, 6), (1, 3), (3, 4)];
    /// Which links each thread publishes, in order.
    const PLAN: [&[usize]; 3] = [&[0, 1], &[2], &[3]];

    #[test]
    fn tail_never_skips_a_link_and_always_reaches_the_end() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let lb = Arc::new(LinkBuf::new(4, 0));
            let published: Arc<[AtomicBool; 4]> =
                Arc::new(std::array::from_fn(|_| AtomicBool::new(false)));
            let handles: Vec<_> = PLAN
                .iter()
                .map(|plan| {
                    let (lb, published) = (lb.clone(), published.clone());
                    loom::thread::spawn(move || {
                        for &i in plan.iter() {
                            let (from, to) = LINKS[i];
                            // Never waits: the plan keeps every link in space.
                            assert!(lb.has_space(from));
                            published[i].store(true, Ordering::SeqCst);
                            lb.add_link(from, to);
                            let tail = lb.advance();
                            // Safety: every link the tail passed was published.
                            for (j, &(_, end)) in LINKS.iter().enumerate() {
                                if end <= tail {
                                    assert!(
                                        published[j].load(Ordering::SeqCst),
                                        "tail {tail} skipped link {j}"
                                    );
                                }
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            // Liveness: each publisher advanced after publishing, so the
            // last one saw everything. No further advance here.
            assert_eq!(lb.tail(), 6);
        });
    }
}
