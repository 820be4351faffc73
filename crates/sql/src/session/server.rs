//! What the server shares between sessions: the catalog, the plan cache of
//! text statements, and when it started.

use crate::catalog::Catalog;
use crate::error::SqlError;
use crate::plan::PlanCache;
use millrace_trx::Engine;
use std::sync::Arc;
use std::time::Instant;

/// What the server shares between sessions.
pub struct Server {
    pub catalog: Catalog,
    pub(crate) plans: PlanCache,
    pub(crate) started: Instant,
}

impl Server {
    pub fn open(engine: Arc<Engine>) -> Result<Arc<Server>, SqlError> {
        Ok(Arc::new(Server {
            catalog: Catalog::open(engine)?,
            plans: PlanCache::default(),
            started: Instant::now(),
        }))
    }

    pub fn engine(&self) -> &Arc<Engine> {
        self.catalog.engine()
    }
}
