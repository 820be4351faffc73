//! What all sessions of one SQL instance share: the catalog, the plan cache
//! of text statements, and when it started. (Named `Instance`, not
//! `Server`: the server is the crate that speaks the protocol over this.)

use crate::catalog::Catalog;
use crate::error::SqlError;
use crate::plan::PlanCache;
use millrace_trx::Engine;
use std::sync::Arc;
use std::time::Instant;

/// What the sessions of one instance share.
pub struct Instance {
    pub catalog: Catalog,
    pub(crate) plans: PlanCache,
    pub(crate) started: Instant,
}

impl Instance {
    pub fn open(engine: Arc<Engine>) -> Result<Arc<Instance>, SqlError> {
        Ok(Arc::new(Instance {
            catalog: Catalog::open(engine)?,
            plans: PlanCache::default(),
            started: Instant::now(),
        }))
    }

    pub fn engine(&self) -> &Arc<Engine> {
        self.catalog.engine()
    }
}
