//! The plan: a bound statement with the access path chosen for its table,
//! and what the plan caches need to know of it. Plans hold no values of a
//! particular execution, so one plan serves every execution of a prepared
//! statement or of a statement shape.

use super::access::{access_path, Access};
use crate::bind::{
    Binder, Bound, BoundDelete, BoundInsert, BoundSelect, BoundUpdate, SessionInfo, Source,
};
use crate::catalog::{Catalog, TableEntry};
use crate::error::SqlError;
use crate::types::OutColumn;
use sqlparser::ast;
use std::sync::Arc;

/// A SELECT and how it reads its source.
#[derive(Debug, Clone)]
pub struct SelectPlan {
    pub select: BoundSelect,
    pub access: Access,
}

/// An INSERT reads no rows: it is planned as bound.
pub type InsertPlan = BoundInsert;

#[derive(Debug, Clone)]
pub struct UpdatePlan {
    pub update: BoundUpdate,
    pub access: Access,
}

#[derive(Debug, Clone)]
pub struct DeletePlan {
    pub delete: BoundDelete,
    pub access: Access,
}

#[derive(Debug, Clone)]
pub enum PlanKind {
    Select(SelectPlan),
    Insert(InsertPlan),
    Update(UpdatePlan),
    Delete(DeletePlan),
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: PlanKind,
    pub params: usize,
    /// Uses session values (DATABASE(), @@vars, ...): plan again each time.
    pub volatile: bool,
    /// Literals made parameters would change its meaning or its column
    /// names (a parameter in the select list or ORDER BY).
    pub shape_sensitive: bool,
    /// The catalog version it was planned against.
    pub catalog_version: u64,
}

impl Plan {
    pub fn columns(&self) -> &[OutColumn] {
        match &self.kind {
            PlanKind::Select(s) => &s.select.columns,
            _ => &[],
        }
    }

    /// The stored table the plan reads or writes, if any: the session takes
    /// its metadata lock before running the plan.
    pub fn table(&self) -> Option<&Arc<TableEntry>> {
        match &self.kind {
            PlanKind::Select(s) => match &s.select.source {
                Source::Table(t) => Some(t),
                _ => None,
            },
            PlanKind::Insert(p) => Some(&p.table),
            PlanKind::Update(p) => Some(&p.update.table),
            PlanKind::Delete(p) => Some(&p.delete.table),
        }
    }
}

/// Plans a DML or SELECT statement: binds it, then chooses its access path;
/// `None` for statements the session executes directly (DDL, SET, SHOW,
/// transaction control).
pub fn plan(
    catalog: &Catalog,
    session: &dyn SessionInfo,
    stmt: &ast::Statement,
) -> Result<Option<Plan>, SqlError> {
    let mut binder = Binder::new(catalog, session);
    let Some(bound) = binder.statement(stmt)? else {
        return Ok(None);
    };
    let kind = match bound {
        Bound::Select(select) => {
            let access = match &select.source {
                Source::Table(t) => access_path(t, select.filter.as_ref()),
                _ => Access::FullScan,
            };
            PlanKind::Select(SelectPlan { select, access })
        }
        Bound::Insert(i) => PlanKind::Insert(i),
        Bound::Update(update) => {
            let access = access_path(&update.table, update.filter.as_ref());
            PlanKind::Update(UpdatePlan { update, access })
        }
        Bound::Delete(delete) => {
            let access = access_path(&delete.table, delete.filter.as_ref());
            PlanKind::Delete(DeletePlan { delete, access })
        }
    };
    Ok(Some(Plan {
        kind,
        params: binder.params,
        volatile: binder.volatile,
        shape_sensitive: binder.shape_sensitive,
        catalog_version: catalog.version(),
    }))
}
