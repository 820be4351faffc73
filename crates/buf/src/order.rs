//! Latch order, asserted in debug builds (docs/design.md, "Latch order").
//! Each thread records which buffer pool mutexes it holds; acquiring one
//! checks the order, and a blocking wait for a page latch checks that no
//! pool mutex is held.
//!
//! Rules: LRU before a hash shard; at most one hash shard; the free list
//! and flush list mutexes are leaves (nothing is acquired while holding
//! them); no pool mutex is held while blocking on a page latch (the
//! doublewrite mutex is held by a flush batch, which only tries latches).

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Dblwr = 1,
    Lru = 2,
    Shard = 4,
    Free = 8,
    Flush = 16,
}

#[cfg(debug_assertions)]
thread_local! {
    static HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

#[cfg(debug_assertions)]
fn check_acquire(level: Level) {
    HELD.with(|h| {
        let held = h.get();
        let leaf = Level::Free as u32 | Level::Flush as u32;
        assert!(
            held & leaf == 0,
            "latch order: {level:?} acquired while holding the free or flush list mutex"
        );
        match level {
            Level::Lru => assert!(
                held & Level::Shard as u32 == 0,
                "latch order: LRU after a hash shard"
            ),
            Level::Shard => assert!(
                held & Level::Shard as u32 == 0,
                "latch order: two hash shards"
            ),
            Level::Dblwr => assert!(
                held == 0,
                "latch order: doublewrite mutex under another pool mutex"
            ),
            Level::Free | Level::Flush => {}
        }
        h.set(held | level as u32);
    });
}

/// Debug builds: asserts that no pool mutex is held (before blocking on a
/// page latch). The doublewrite mutex may be held only by a flush batch,
/// which never blocks on a latch; it is not exempt here.
pub(crate) fn assert_no_pool_mutex() {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        assert!(
            h.get() == 0,
            "latch order: blocking on a page latch while holding pool mutexes {:#b}",
            h.get()
        )
    });
}

pub(crate) struct Guard<'a, T> {
    inner: MutexGuard<'a, T>,
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    level: Level,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}
impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        HELD.with(|h| h.set(h.get() & !(self.level as u32)));
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>, level: Level) -> Guard<'_, T> {
    #[cfg(debug_assertions)]
    check_acquire(level);
    Guard {
        inner: m.lock().expect("buffer pool mutex poisoned"),
        level,
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "latch order: LRU after a hash shard")]
    fn lru_after_shard_is_caught() {
        let (a, b) = (Mutex::new(()), Mutex::new(()));
        let _s = lock(&a, Level::Shard);
        let _l = lock(&b, Level::Lru);
    }

    #[test]
    #[should_panic(expected = "while holding pool mutexes")]
    fn blocking_on_a_page_latch_under_a_mutex_is_caught() {
        let a = Mutex::new(());
        let _f = lock(&a, Level::Flush);
        assert_no_pool_mutex();
    }

    #[test]
    fn the_documented_order_passes() {
        let (a, b, c) = (Mutex::new(()), Mutex::new(()), Mutex::new(()));
        {
            let _l = lock(&a, Level::Lru);
            let _s = lock(&b, Level::Shard);
        }
        let _f = lock(&c, Level::Free);
        drop(_f);
        assert_no_pool_mutex();
    }
}
