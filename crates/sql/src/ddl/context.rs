//! What DDL runs with: the catalog, the session's names (current database,
//! values of DEFAULT expressions) and how long to wait for metadata locks.

use crate::bind::SessionInfo;
use crate::catalog::Catalog;
use std::time::Duration;

pub struct DdlContext<'a> {
    pub catalog: &'a Catalog,
    pub session: &'a dyn SessionInfo,
    /// How long to wait for a table's exclusive metadata lock.
    pub lock_timeout: Duration,
}
