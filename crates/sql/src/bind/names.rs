//! Name resolution: databases and tables (through the catalog and the
//! session's current database) and columns in scope.

use super::binder::{Binder, SessionInfo};
use crate::catalog::TableEntry;
use crate::error::{unsupported, SqlError};
use crate::expr::Expr;
use millrace_errcode::{ER_BAD_FIELD_ERROR, ER_NO_DB_ERROR, ER_NO_SUCH_TABLE};
use sqlparser::ast;
use std::sync::Arc;

pub fn no_table(db: &str, name: &str) -> SqlError {
    SqlError::new(
        ER_NO_SUCH_TABLE,
        format!("Table '{db}.{name}' doesn't exist"),
    )
}

pub(crate) fn unknown_column(name: &str, clause: &str) -> SqlError {
    SqlError::new(
        ER_BAD_FIELD_ERROR,
        format!("Unknown column '{name}' in '{clause}'"),
    )
}

/// `db.name` or `name` (in the session's database).
pub fn object_name(
    name: &ast::ObjectName,
    session: &dyn SessionInfo,
) -> Result<(String, String), SqlError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(i.value.clone()),
            _ => Err(unsupported(name)),
        })
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [t] => match session.database() {
            Some(db) => Ok((db.to_string(), t.clone())),
            None => Err(SqlError::new(ER_NO_DB_ERROR, "No database selected")),
        },
        [d, t] => Ok((d.clone(), t.clone())),
        _ => Err(unsupported(name)),
    }
}

/// Columns in scope for name resolution.
pub(crate) struct Scope<'a> {
    pub names: Vec<&'a str>,
    pub table: &'a str,
    pub alias: Option<String>,
}

impl Scope<'_> {
    /// No columns: constant expressions (SET values, DEFAULTs, VALUES rows).
    pub fn empty() -> Scope<'static> {
        Scope {
            names: vec![],
            table: "",
            alias: None,
        }
    }
}

impl Binder<'_> {
    pub(crate) fn table(&self, name: &ast::ObjectName) -> Result<Arc<TableEntry>, SqlError> {
        let (db, t) = object_name(name, self.session)?;
        self.catalog.table(&db, &t).ok_or_else(|| no_table(&db, &t))
    }

    pub(crate) fn table_factor(&self, f: &ast::TableFactor) -> Result<Arc<TableEntry>, SqlError> {
        match f {
            ast::TableFactor::Table { name, .. } => self.table(name),
            other => Err(unsupported(other)),
        }
    }

    pub(crate) fn column(&self, parts: &[&str], scope: &Scope<'_>) -> Result<Expr, SqlError> {
        let (qual, name) = match parts {
            [n] => (None, *n),
            [t, n] => (Some(*t), *n),
            [_, t, n] => (Some(*t), *n),
            _ => return Err(unsupported(parts.join("."))),
        };
        if let Some(q) = qual {
            let ok = q.eq_ignore_ascii_case(scope.table)
                || scope
                    .alias
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(q));
            if !ok {
                return Err(unknown_column(&parts.join("."), "field list"));
            }
        }
        scope
            .names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(Expr::Column)
            .ok_or_else(|| unknown_column(name, "field list"))
    }
}
