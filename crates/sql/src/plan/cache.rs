//! Plan caches. Text statements: one plan per (database, statement shape),
//! shared by all sessions, so a workload sending the same statements with
//! other literals is planned once. Prepared statements: each keeps the plan
//! made at PREPARE. A cached plan is used only while the catalog is at the
//! version it was planned against.

use super::logical::Plan;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Cached plans of text statements, by (database, shape).
const PLAN_CACHE_ENTRIES: usize = 4096;

/// The plans of text statements, by database and shape.
#[derive(Default)]
pub struct PlanCache {
    plans: Mutex<HashMap<String, Arc<Plan>>>,
}

impl PlanCache {
    /// The cache key of a statement shape in database `db`.
    pub fn key(db: Option<&str>, shape: &str) -> String {
        format!("{}\0{shape}", db.unwrap_or(""))
    }

    /// The plan cached under `key`, if it was planned against catalog
    /// version `catalog_version`.
    pub fn get(&self, key: &str, catalog_version: u64) -> Option<Arc<Plan>> {
        let p = self.plans.lock().expect("poisoned").get(key).cloned()?;
        (p.catalog_version == catalog_version).then_some(p)
    }

    /// Plans cached (tests).
    pub fn len(&self) -> usize {
        self.plans.lock().expect("poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn put(&self, key: String, plan: Arc<Plan>) {
        let mut m = self.plans.lock().expect("poisoned");
        if m.len() >= PLAN_CACHE_ENTRIES {
            m.clear();
        }
        m.insert(key, plan);
    }
}

/// A prepared statement: its text and its plan (`None` for statements that
/// are not planned: parsed again at each execution). The syntax tree is not
/// kept: it may be deep, and is dropped on the stack that parsed it.
pub struct Prepared {
    pub sql: String,
    pub plan: Option<Arc<Plan>>,
    pub params: usize,
}
