//! Metadata locks: a table's lock that keeps DDL away from transactions
//! that use the table.

use crate::error::SqlError;
use millrace_errcode::ER_LOCK_WAIT_TIMEOUT;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A table's metadata lock: statements that use the table hold it shared
/// until their transaction ends; DDL takes it exclusively, so it never
/// rebuilds or drops a table under a transaction that still uses it.
#[derive(Debug, Default)]
pub struct Mdl {
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl Mdl {
    /// Takes the lock shared; waits for an exclusive holder.
    pub fn shared(&self, timeout: Duration) -> Result<(), SqlError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().expect("poisoned");
        while st.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(mdl_timeout());
            }
            st = self.cv.wait_timeout(st, left).expect("poisoned").0;
        }
        st.0 += 1;
        Ok(())
    }

    pub fn release_shared(&self) {
        let mut st = self.state.lock().expect("poisoned");
        assert!(st.0 > 0, "metadata lock released more often than taken");
        st.0 -= 1;
        if st.0 == 0 {
            self.cv.notify_all();
        }
    }

    /// Takes the lock exclusively: waits for every shared holder to leave.
    pub fn exclusive(&self, timeout: Duration) -> Result<(), SqlError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().expect("poisoned");
        while st.1 || st.0 > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(mdl_timeout());
            }
            st = self.cv.wait_timeout(st, left).expect("poisoned").0;
        }
        st.1 = true;
        Ok(())
    }

    pub fn release_exclusive(&self) {
        let mut st = self.state.lock().expect("poisoned");
        assert!(st.1, "exclusive metadata lock not held");
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
