//! Why the engine, rather than its owner, ended a transaction; the one
//! place where a reason is turned into the byte its atomic flag holds and
//! back (the handle that interrupts a transaction is in `interrupt`).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Why a transaction was rolled back by the engine rather than its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum KillReason {
    None = 0,
    /// Its read view was the oldest when the undo quota was exceeded.
    UndoQuota = 1,
    /// Idle in a transaction longer than the timeout.
    IdleTimeout = 2,
    /// Chosen as a deadlock victim.
    Deadlock = 3,
    /// Interrupted by another session (KILL).
    Interrupted = 4,
}

impl KillReason {
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// The reason a flag byte holds; a byte no reason has reads as `None`.
    pub fn from_u8(b: u8) -> Self {
        match b {
            1 => Self::UndoQuota,
            2 => Self::IdleTimeout,
            3 => Self::Deadlock,
            4 => Self::Interrupted,
            _ => Self::None,
        }
    }

    /// What the transaction's owner is told at its next call.
    pub fn message(self) -> &'static str {
        match self {
            Self::UndoQuota => {
                "undo quota exceeded while this transaction's read view was the oldest"
            }
            Self::IdleTimeout => "idle in transaction longer than idle_trx_timeout",
            Self::Deadlock => "chosen as a deadlock victim",
            Self::Interrupted => "interrupted by KILL",
            Self::None => "the transaction has ended",
        }
    }
}

/// A transaction's kill reason, set by the background policies (or its own
/// failed statement) and read by its owner without the state mutex.
/// Also holds the transaction's id once it has one, readable without the
/// state mutex (which the owner holds through a lock wait), so that an
/// interrupt can cancel the wait.
pub(crate) struct KillFlag(AtomicU8, AtomicU64);

impl KillFlag {
    pub(crate) fn new() -> Self {
        Self(AtomicU8::new(KillReason::None.as_u8()), AtomicU64::new(0))
    }
    pub(crate) fn get(&self) -> KillReason {
        KillReason::from_u8(self.0.load(Ordering::SeqCst))
    }
    pub(crate) fn set(&self, reason: KillReason) {
        self.0.store(reason.as_u8(), Ordering::SeqCst)
    }
    /// Records the id the transaction was given (at its first write).
    pub(crate) fn note_id(&self, id: u64) {
        self.1.store(id, Ordering::SeqCst)
    }
    /// The transaction's id (0: it has none yet).
    pub(crate) fn id(&self) -> u64 {
        self.1.load(Ordering::SeqCst)
    }
    /// Sets `Interrupted` unless another reason is set already.
    pub(crate) fn interrupt(&self) {
        let _ = self.0.compare_exchange(
            KillReason::None.as_u8(),
            KillReason::Interrupted.as_u8(),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_through_their_byte() {
        for r in [
            KillReason::None,
            KillReason::UndoQuota,
            KillReason::IdleTimeout,
            KillReason::Deadlock,
            KillReason::Interrupted,
        ] {
            assert_eq!(KillReason::from_u8(r.as_u8()), r);
        }
    }
}
