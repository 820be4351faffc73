//! The persisted limits of transaction ids and serialisation numbers: both
//! are handed out in blocks, and the trx system page records a limit above
//! every value used, so after a crash counting resumes at the limit.

use crate::error::TrxError;
use crate::sys_page;
use crate::trx_sys::TrxSys;
use millrace_buf::PageStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Ids and serial numbers are persisted in blocks of this size.
pub(crate) const ID_BLOCK: u64 = 1 << 16;

/// Persisted limits for ids and serial numbers: read on every
/// transaction's first write (atomics), moved under `update`.
pub(crate) struct IdLimits {
    id_limit: AtomicU64,
    no_limit: AtomicU64,
    update: Mutex<()>,
}

impl IdLimits {
    pub(crate) fn new(id_limit: u64, no_limit: u64) -> Self {
        Self {
            id_limit: AtomicU64::new(id_limit),
            no_limit: AtomicU64::new(no_limit),
            update: Mutex::new(()),
        }
    }

    /// Records new limits and waits until they are flushed.
    pub(crate) fn persist(
        &self,
        store: &PageStore,
        id_limit: u64,
        no_limit: u64,
    ) -> Result<(), TrxError> {
        let _g = self.update.lock().map_err(|_| poisoned())?;
        if let Some(end) = sys_page::write_limits(store, id_limit, no_limit)? {
            store.log().wait_flushed(end)?;
        }
        self.id_limit.store(id_limit, Ordering::SeqCst);
        self.no_limit.store(no_limit, Ordering::SeqCst);
        Ok(())
    }

    fn near(&self, id: u64, no: u64) -> bool {
        id + ID_BLOCK / 2 >= self.id_limit.load(Ordering::SeqCst)
            || no + ID_BLOCK / 2 >= self.no_limit.load(Ordering::SeqCst)
    }

    /// Keeps the persisted limits ahead of the counters. A transaction whose
    /// id or number would reach the limit waits for the new limit to be
    /// logged, so no record ever carries a value the limit does not cover.
    pub(crate) fn keep_ahead(&self, store: &PageStore, sys: &TrxSys) -> Result<(), TrxError> {
        let (id, no) = (sys.next_id(), sys.next_no());
        // The common case takes no lock: two atomic loads.
        if self.near(id, no) {
            let _g = self.update.lock().map_err(|_| poisoned())?;
            if self.near(id, no) {
                let (ni, nn) = (id + ID_BLOCK, no + ID_BLOCK);
                sys_page::write_limits(store, ni, nn)?;
                self.id_limit.store(ni, Ordering::SeqCst);
                self.no_limit.store(nn, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

/// A panic while the limits were being written leaves the trx system page
/// unknown: the engine stops (the caller's `Engine::fail`).
fn poisoned() -> TrxError {
    TrxError::EngineFailed("a panic while the id limits were being written".into())
}
