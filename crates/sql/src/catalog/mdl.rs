//! Metadata locks: a table's lock that keeps DDL away from transactions
//! that use the table.
//!
//! The exclusive lock is a guard (`MdlExclusive`) released when dropped, so
//! a DDL statement that returns early or panics half-way never leaves its
//! table locked. The state is a count and a flag changed in one step, so a
//! poisoned mutex (a panic elsewhere while it was held) still holds a
//! consistent state and is used as it is.

use crate::error::SqlError;
use millrace_errcode::ER_LOCK_WAIT_TIMEOUT;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// A table's metadata lock: statements that use the table hold it shared
/// until their transaction ends; DDL takes it exclusively, so it never
/// rebuilds or drops a table under a transaction that still uses it.
#[derive(Debug, Default)]
pub struct Mdl {
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

/// A table's exclusive metadata lock, held until dropped.
#[must_use = "the exclusive lock is released when the guard is dropped"]
#[derive(Debug)]
pub struct MdlExclusive<'a> {
    mdl: &'a Mdl,
}

impl Drop for MdlExclusive<'_> {
    fn drop(&mut self) {
        self.mdl.release_exclusive();
    }
}

impl Mdl {
    fn state(&self) -> MutexGuard<'_, (usize, bool)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(
        &self,
        st: MutexGuard<'a, (usize, bool)>,
        left: Duration,
    ) -> MutexGuard<'a, (usize, bool)> {
        self.cv
            .wait_timeout(st, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// Takes the lock shared; waits for an exclusive holder.
    pub fn shared(&self, timeout: Duration) -> Result<(), SqlError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state();
        while st.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(mdl_timeout());
            }
            st = self.wait(st, left);
        }
        st.0 += 1;
        Ok(())
    }

    pub fn release_shared(&self) {
        let mut st = self.state();
        assert!(st.0 > 0, "metadata lock released more often than taken");
        st.0 -= 1;
        if st.0 == 0 {
            self.cv.notify_all();
        }
    }

    /// Takes the lock exclusively: waits for every shared holder to leave.
    /// Released when the guard is dropped (also by a panic's unwinding).
    pub fn exclusive(&self, timeout: Duration) -> Result<MdlExclusive<'_>, SqlError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state();
        while st.1 || st.0 > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(mdl_timeout());
            }
            st = self.wait(st, left);
        }
        st.1 = true;
        Ok(MdlExclusive { mdl: self })
    }

    /// Whether DDL holds the lock now (tests, diagnostics).
    pub fn is_exclusive(&self) -> bool {
        self.state().1
    }

    fn release_exclusive(&self) {
        let mut st = self.state();
        // Only the guard releases, once: this cannot fail (a panic here
        // could run while another unwinds).
        debug_assert!(st.1, "exclusive metadata lock not held");
        st.1 = false;
        self.cv.notify_all();
    }
}

fn mdl_timeout() -> SqlError {
    SqlError::new(
        ER_LOCK_WAIT_TIMEOUT,
        "Lock wait timeout exceeded; try restarting transaction (metadata lock)",
    )
}
