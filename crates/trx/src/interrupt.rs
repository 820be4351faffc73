//! The handle another thread uses to interrupt a transaction (KILL QUERY /
//! KILL CONNECTION in the SQL layer): it marks the transaction and cancels
//! its lock wait.

use crate::kill::KillReason;
use crate::shared::{Engine, TrxShared};
use std::sync::Arc;

/// Interrupts one transaction from another thread: it is marked
/// [`KillReason::Interrupted`] (its next call fails, and the engine rolls it
/// back) and a lock wait it is in returns at once. Holding it keeps nothing
/// alive but the engine and the transaction's shared state.
#[derive(Clone)]
pub struct TrxInterrupt {
    e: Arc<Engine>,
    shared: Arc<TrxShared>,
}

impl TrxInterrupt {
    pub(crate) fn new(e: Arc<Engine>, shared: Arc<TrxShared>) -> Self {
        Self { e, shared }
    }

    /// Marks the transaction interrupted (unless the engine already ended it
    /// for another reason) and cancels its lock wait, or the next one it
    /// begins (`LockManager::cancel`); its next call fails.
    pub fn interrupt(&self) {
        self.shared.killed.interrupt();
        let id = self.shared.killed.id();
        if id != 0 {
            self.e.locks.cancel(id);
        }
    }

    /// Whether the transaction was interrupted.
    pub fn interrupted(&self) -> bool {
        self.shared.killed.get() == KillReason::Interrupted
    }
}
