//! The binder: turns the AST of a statement into bound expressions and
//! statements against the catalog, counting parameters and noting what
//! makes the result unfit for the plan cache.

use super::names::SessionInfo;
use crate::catalog::Catalog;

/// Binds one statement. `params`, `volatile` and `shape_sensitive` say what
/// binding found; the planner copies them into the plan.
pub struct Binder<'a> {
    pub catalog: &'a Catalog,
    pub session: &'a dyn SessionInfo,
    pub params: usize,
    pub volatile: bool,
    pub shape_sensitive: bool,
}

impl<'a> Binder<'a> {
    pub fn new(catalog: &'a Catalog, session: &'a dyn SessionInfo) -> Self {
        Binder {
            catalog,
            session,
            params: 0,
            volatile: false,
            shape_sensitive: false,
        }
    }
}
