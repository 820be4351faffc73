//! What all sessions of one SQL instance share: the catalog, the plan cache
//! of text statements, when it started, the control of each connection
//! (KILL, the process list) and the memory bound of a statement. (Named `Instance`, not
//! `Server`: the server is the crate that speaks the protocol over this.)

use super::control::Control;
use crate::catalog::Catalog;
use crate::error::SqlError;
use crate::exec::Kill;
use crate::plan::PlanCache;
use millrace_errcode::ER_NO_SUCH_THREAD;
use millrace_trx::Engine;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the sessions of one instance share.
pub struct Instance {
    pub catalog: Catalog,
    pub(crate) plans: PlanCache,
    pub(crate) started: Instant,
    pub(crate) controls: Mutex<HashMap<u32, Arc<Control>>>,
    /// The most bytes of rows one statement may hold (sort input, DISTINCT
    /// sets, its result): 1038 past it. Defaults to `default_statement_memory_bytes`.
    pub statement_memory_bytes: AtomicU64,
    /// The largest packet the server accepts, as `@@max_allowed_packet`
    /// reports it (the server enforces it and sets it here at start).
    pub max_allowed_packet_bytes: AtomicU64,
}

/// MySQL 8.0's default max_allowed_packet (64 MiB).
pub const DEFAULT_MAX_ALLOWED_PACKET_BYTES: u64 = 64 << 20;

/// A statement may hold 1/16 of the memory available to the process, at
/// least 64 MiB and at most 4 GiB (256 MiB when the memory is unknown).
pub fn default_statement_memory_bytes() -> u64 {
    millrace_sys::mem::available_memory_bytes()
        .map_or(256 << 20, |m| (m / 16).clamp(64 << 20, 4 << 30))
}

impl Instance {
    pub fn open(engine: Arc<Engine>) -> Result<Arc<Instance>, SqlError> {
        Ok(Arc::new(Instance {
            catalog: Catalog::open(engine)?,
            plans: PlanCache::default(),
            started: Instant::now(),
            controls: Mutex::new(HashMap::new()),
            statement_memory_bytes: AtomicU64::new(default_statement_memory_bytes()),
            max_allowed_packet_bytes: AtomicU64::new(DEFAULT_MAX_ALLOWED_PACKET_BYTES),
        }))
    }

    pub fn engine(&self) -> &Arc<Engine> {
        self.catalog.engine()
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
        self.kill_from(None, target_conn, query_only)
    }

    /// KILL from session `from` (None: from outside any session).
    pub(crate) fn kill_from(
        &self,
        from: Option<u32>,
        target_conn: u32,
        query_only: bool,
    ) -> Result<(), SqlError> {
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
        let k = if query_only {
            Kill::Query
        } else {
            Kill::Connection
        };
        c.kill(k, from == Some(target_conn));
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
