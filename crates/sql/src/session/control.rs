//! Per-connection control shared through the instance: each session's
//! statement guard (kill state, deadline, memory bound), the handle that
//! interrupts its transaction's lock wait, and the hook that disconnects
//! it; KILL [QUERY | CONNECTION] and COM_PROCESS_KILL go through it. See
//! docs/design.md, "Bounds and interruption in the SQL layer".

use super::instance::Instance;
use super::state::ConnInfo;
use crate::error::SqlError;
use crate::exec::{Kill, StatementGuard};
use millrace_errcode::ER_NO_SUCH_THREAD;
use millrace_trx::TrxInterrupt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long KILL goes on cancelling the target's lock wait while its
/// statement runs: a wait that began just after a cancel is cancelled by
/// the next one.
const CANCEL_FOR: Duration = Duration::from_millis(1000);
const CANCEL_EVERY: Duration = Duration::from_millis(10);

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
    fn kill(&self, k: Kill) {
        self.guard.kill(k);
        let deadline = Instant::now() + CANCEL_FOR;
        loop {
            if !self.running.load(Ordering::SeqCst) {
                break;
            }
            if let Some(t) = self.trx.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                t.interrupt();
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(CANCEL_EVERY);
        }
        if k == Kill::Connection {
            if let Some(h) = self.hook.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                h();
            }
        }
    }
}

impl Instance {
    pub(crate) fn register(&self, c: Arc<Control>) {
        self.controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(c.conn.connection_id, c);
    }

    pub(crate) fn unregister(&self, id: u32, c: &Arc<Control>) {
        let mut m = self.controls.lock().unwrap_or_else(|p| p.into_inner());
        if m.get(&id).is_some_and(|x| Arc::ptr_eq(x, c)) {
            m.remove(&id);
        }
    }

    /// KILL [QUERY | CONNECTION] and COM_PROCESS_KILL: 1094 for an id no
    /// session has. Returns once the target's statement has stopped or a
    /// second has passed.
    pub fn kill(&self, target_conn: u32, query_only: bool) -> Result<(), SqlError> {
        let c = self
            .controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&target_conn)
            .cloned()
            .ok_or_else(|| {
                SqlError::new(
                    ER_NO_SUCH_THREAD,
                    format!("Unknown thread id: {target_conn}"),
                )
            })?;
        c.kill(if query_only {
            Kill::Query
        } else {
            Kill::Connection
        });
        Ok(())
    }

    /// The connections: (id, user, host, seconds in the current state,
    /// statement running).
    pub fn processes(&self) -> Vec<(u32, String, String, u64, Option<String>)> {
        let m = self.controls.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = m
            .values()
            .map(|c| {
                let since = c.since.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
                let info = c.info.lock().unwrap_or_else(|p| p.into_inner()).clone();
                (
                    c.conn.connection_id,
                    c.conn.user.clone(),
                    c.conn.host.clone(),
                    since.as_secs(),
                    info,
                )
            })
            .collect();
        v.sort_by_key(|p| p.0);
        v
    }
}
