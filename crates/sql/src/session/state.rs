//! A session's state: who is connected, its current database, settings,
//! transaction, metadata locks held and prepared statements; and what the
//! stages below read of it (`SessionInfo` for binding, `SessionSettings`
//! for SET).

pub use super::control::ConnInfo;
use super::control::{Control, DisconnectHook};
use super::instance::Instance;
use crate::bind::SessionInfo;
use crate::catalog::TableEntry;
use crate::error::SqlError;
use crate::exec::{interrupted, Kill};
use crate::mysql::functions::{session_function, Caller};
use crate::mysql::set::SessionSettings;
use crate::mysql::variables::session_variables;
use crate::mysql::SessionVars;
use crate::plan::Prepared;
use crate::types::Value;
use millrace_errcode::ER_QUERY_TIMEOUT;
use millrace_trx::Trx;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Session {
    pub(super) server: Arc<Instance>,
    pub(super) conn: ConnInfo,
    pub(super) database: Option<String>,
    pub(super) vars: SessionVars,
    pub(super) trx: Option<Trx>,
    /// BEGIN / START TRANSACTION (or autocommit off) opened `trx`.
    pub(super) explicit: bool,
    /// Tables whose shared metadata lock the transaction holds.
    pub(super) held: Vec<Arc<TableEntry>>,
    pub(super) last_insert_id: u64,
    pub(super) prepared: HashMap<u32, Prepared>,
    pub(super) next_stmt_id: u32,
    /// Shared with the instance's registry (KILL, the process list).
    pub(super) control: Arc<Control>,
    /// When the running statement began (max_execution_time counts from it).
    pub(super) statement_started: Instant,
}

impl Session {
    pub fn new(server: Arc<Instance>, conn: ConnInfo) -> Session {
        let limit = server.statement_memory_bytes.load(Ordering::Relaxed);
        let max_allowed_packet_bytes = server.max_allowed_packet_bytes.load(Ordering::Relaxed);
        let control = Arc::new(Control::new(conn.clone(), limit));
        server.register(control.clone());
        Session {
            control,
            statement_started: Instant::now(),
            server,
            conn,
            database: None,
            vars: SessionVars {
                max_allowed_packet_bytes,
                ..SessionVars::default()
            },
            trx: None,
            explicit: false,
            held: Vec::new(),
            last_insert_id: 0,
            prepared: HashMap::new(),
            next_stmt_id: 1,
        }
    }

    /// The server's hook that disconnects this session's client (shuts its
    /// socket down): KILL CONNECTION from another session calls it.
    pub fn set_disconnect_hook(&mut self, hook: DisconnectHook) {
        *self.control.hook.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    /// Whether KILL CONNECTION was aimed at this session: the server closes
    /// the connection after the command in progress.
    pub fn is_killed(&self) -> bool {
        self.control.guard.kill_state() == Kill::Connection
    }

    /// A statement begins: a KILL QUERY aimed at the one before is
    /// forgotten; its memory bound is the instance's.
    pub(super) fn statement_begins(&mut self, sql: &str) {
        self.statement_started = Instant::now();
        let limit = self.server.statement_memory_bytes.load(Ordering::Relaxed);
        self.control.guard.begin(limit);
        self.control.set_info(Some(sql));
        self.control.running.store(true, Ordering::SeqCst);
    }

    /// A statement ended: an error of a killed statement is 1317, whatever
    /// the engine or operator said.
    pub(super) fn statement_ends<T>(&mut self, r: Result<T, SqlError>) -> Result<T, SqlError> {
        self.control.running.store(false, Ordering::SeqCst);
        self.control.set_info(None);
        let killed = self.control.guard.kill_state() != Kill::None;
        match r {
            Err(e) if killed && e.code != ER_QUERY_TIMEOUT => Err(interrupted()),
            Err(e) if killed => Err(e),
            r => {
                if killed && self.control.guard.kill_state() == Kill::Connection {
                    return Err(interrupted());
                }
                r
            }
        }
    }

    pub fn autocommit(&self) -> bool {
        self.vars.autocommit
    }

    pub fn in_transaction(&self) -> bool {
        self.explicit && self.trx.is_some()
    }

    pub(super) fn lock_timeout(&self) -> Duration {
        Duration::from_millis(
            self.server
                .engine()
                .settings()
                .lock_wait_timeout_ms
                .load(Ordering::Relaxed),
        )
    }

    /// The system variables the session reports, sorted by name.
    pub fn variables(&self) -> Vec<(String, Value)> {
        session_variables(&self.vars, self.server.engine(), self.server.started)
    }
}

impl SessionInfo for Session {
    fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    fn variable(&self, name: &str) -> Option<Value> {
        self.variables()
            .into_iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    fn function(&self, name: &str) -> Option<Value> {
        let caller = Caller {
            database: self.database.as_deref(),
            user: &self.conn.user,
            host: &self.conn.host,
            connection_id: self.conn.connection_id,
            last_insert_id: self.last_insert_id,
        };
        session_function(&caller, name)
    }
}

impl SessionSettings for Session {
    fn settings(&mut self) -> &mut SessionVars {
        &mut self.vars
    }

    fn info(&self) -> &dyn SessionInfo {
        self
    }

    fn commit(&mut self) -> Result<(), SqlError> {
        self.end_trx(true)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A connection that goes away rolls back what it left open.
        let _ = self.end_trx(false);
        self.server
            .unregister(self.conn.connection_id, &self.control);
    }
}
