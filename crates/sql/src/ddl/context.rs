//! What DDL runs with: the catalog, the session's names (current database,
//! values of DEFAULT expressions) and how long to wait for metadata locks.

use crate::bind::SessionInfo;
use crate::catalog::Catalog;
use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

pub struct DdlContext<'a> {
    pub catalog: &'a Catalog,
    pub session: &'a dyn SessionInfo,
    /// How long to wait for a table's exclusive metadata lock.
    pub lock_timeout: Duration,
}

impl DdlContext<'_> {
    /// The catalog's DDL mutex (one DDL statement at a time). It guards no
    /// data of its own (the catalog changes in engine transactions), so a
    /// DDL statement that panicked while holding it leaves nothing half-done
    /// here: the next DDL takes it as it is, rather than every later DDL
    /// failing on the poison.
    pub(crate) fn ddl_mutex(&self) -> MutexGuard<'_, ()> {
        self.catalog
            .ddl
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
