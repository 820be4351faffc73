//! The binder: turns the AST of a statement into bound expressions and
//! statements against the catalog, counting parameters and noting what
//! makes the result unfit for the plan cache.

use crate::catalog::Catalog;
use crate::types::Value;

/// What binding needs of the session: values fixed for the statement
/// (a plan that uses them is `volatile` and never cached).
pub trait SessionInfo {
    fn database(&self) -> Option<&str>;
    fn variable(&self, name: &str) -> Option<Value>;
    fn function(&self, name: &str) -> Option<Value>;
}

/// Binds one statement. `params`, `volatile` and `shape_sensitive` say what
/// binding found; the planner copies them into the plan.
pub struct Binder<'a> {
    pub catalog: &'a Catalog,
    pub session: &'a dyn SessionInfo,
    pub params: usize,
    pub volatile: bool,
    pub shape_sensitive: bool,
    /// Levels of expression being bound now (bounded by
    /// `MAX_EXPR_DEPTH`).
    pub(crate) depth: usize,
}

impl<'a> Binder<'a> {
    pub fn new(catalog: &'a Catalog, session: &'a dyn SessionInfo) -> Self {
        Binder {
            catalog,
            session,
            params: 0,
            volatile: false,
            shape_sensitive: false,
            depth: 0,
        }
    }
}
