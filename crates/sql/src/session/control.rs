//! Who is connected, and per-connection control shared through the instance: each session's
//! statement guard (kill state, deadline, memory bound), the handle that
//! interrupts its transaction's lock wait, and the hook that disconnects
//! it; KILL [QUERY | CONNECTION] and COM_PROCESS_KILL go through it. See
//! docs/design.md, "Bounds and interruption in the SQL layer".

use crate::exec::{Kill, StatementGuard};
use millrace_trx::TrxInterrupt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Who is connected: fixed for the life of the connection.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub connection_id: u32,
    pub user: String,
    /// The client's host as MySQL names it in `USER()`.
    pub host: String,
}

pub type DisconnectHook = Box<dyn Fn() + Send + Sync>;

/// One connection's control.
pub(crate) struct Control {
    pub(crate) conn: ConnInfo,
    pub(crate) guard: StatementGuard,
    /// A statement is running.
    pub(crate) running: AtomicBool,
    /// Interrupts the session's open transaction.
    pub(crate) trx: Mutex<Option<TrxInterrupt>>,
    pub(crate) hook: Mutex<Option<DisconnectHook>>,
    /// The statement running (for the process list), its first bytes.
    pub(crate) info: Mutex<Option<String>>,
    pub(crate) since: Mutex<Instant>,
}

/// Bytes of a statement the process list shows.
const INFO_BYTES: usize = 100;

impl Control {
    pub(crate) fn new(conn: ConnInfo, limit_bytes: u64) -> Control {
        Control {
            conn,
            guard: StatementGuard::new(limit_bytes),
            running: AtomicBool::new(false),
            trx: Mutex::new(None),
            hook: Mutex::new(None),
            info: Mutex::new(None),
            since: Mutex::new(Instant::now()),
        }
    }

    pub(crate) fn set_info(&self, sql: Option<&str>) {
        let text = sql.map(|s| {
            let mut end = s.len().min(INFO_BYTES);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s[..end].to_string()
        });
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = text;
        *self.since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// KILL: marks the session; a running statement stops at its next row
    /// and its lock wait is cancelled; KILL CONNECTION also disconnects.
    /// `from_itself`: the session kills itself (its own KILL statement is
    /// what runs; it waits for no lock).
    /// Interrupts the session's open transaction, if any.
    pub(crate) fn interrupt_trx(&self) {
        if let Some(t) = self.trx.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            t.interrupt();
        }
    }

    pub(crate) fn kill(&self, k: Kill, from_itself: bool) {
        self.guard.kill(k);
        // One interrupt suffices: the engine cancels the trx's lock wait or,
        // if it is not waiting yet, its next one (`LockManager::cancel`);
        // a trx begun after this looks at the guard (`Session::trx`).
        if !from_itself && self.running.load(Ordering::SeqCst) {
            self.interrupt_trx();
        }
        if k == Kill::Connection {
            if let Some(h) = self.hook.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                h();
            }
        }
    }
}
