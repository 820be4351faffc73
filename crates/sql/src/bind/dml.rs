//! INSERT, UPDATE and DELETE of one table: target columns, VALUES rows, SET
//! assignments, WHERE and LIMIT.

use super::binder::Binder;
use super::names::{unknown_column, Scope};
use crate::catalog::TableEntry;
use crate::error::{unsupported, SqlError};
use crate::expr::Expr;
use millrace_errcode::{ER_FIELD_SPECIFIED_TWICE, ER_WRONG_VALUE_COUNT_ON_ROW};
use sqlparser::ast;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct BoundInsert {
    pub table: Arc<TableEntry>,
    /// For each table column: the position of its value in a VALUES row.
    pub targets: Vec<Option<usize>>,
    pub rows: Vec<Vec<Expr>>,
}

#[derive(Debug, Clone)]
pub struct BoundUpdate {
    pub table: Arc<TableEntry>,
    pub filter: Option<Expr>,
    pub sets: Vec<(usize, Expr)>,
    pub limit: Option<Expr>,
}

#[derive(Debug, Clone)]
pub struct BoundDelete {
    pub table: Arc<TableEntry>,
    pub filter: Option<Expr>,
    pub limit: Option<Expr>,
}

impl Binder<'_> {
    pub(crate) fn insert(&mut self, i: &ast::Insert) -> Result<BoundInsert, SqlError> {
        if i.on.is_some() || i.replace_into || i.returning.is_some() {
            return Err(unsupported("INSERT ... ON DUPLICATE KEY / REPLACE"));
        }
        let ast::TableObject::TableName(name) = &i.table else {
            return Err(unsupported(&i.table));
        };
        let entry = self.table(name)?;
        let schema = entry.schema.clone();
        let mut targets = vec![None; schema.columns.len()];
        let width;
        if i.columns.is_empty() {
            for (n, t) in targets.iter_mut().enumerate() {
                *t = Some(n);
            }
            width = schema.columns.len();
        } else {
            for (n, c) in i.columns.iter().enumerate() {
                let pos = schema
                    .column(&c.value)
                    .ok_or_else(|| unknown_column(&c.value, "field list"))?;
                if targets[pos].is_some() {
                    return Err(SqlError::new(
                        ER_FIELD_SPECIFIED_TWICE,
                        format!("Column '{}' specified twice", c.value),
                    ));
                }
                targets[pos] = Some(n);
            }
            width = i.columns.len();
        }
        let Some(source) = &i.source else {
            return Err(unsupported("INSERT ... SET"));
        };
        let ast::SetExpr::Values(values) = source.body.as_ref() else {
            return Err(unsupported("INSERT ... SELECT"));
        };
        let scope = Scope {
            names: vec![],
            table: &schema.name,
            alias: None,
        };
        let mut rows = Vec::with_capacity(values.rows.len());
        for (n, row) in values.rows.iter().enumerate() {
            if row.len() != width {
                return Err(SqlError::new(
                    ER_WRONG_VALUE_COUNT_ON_ROW,
                    format!("Column count doesn't match value count at row {}", n + 1),
                ));
            }
            rows.push(
                row.iter()
                    .map(|e| match e {
                        // DEFAULT in VALUES: the column's default.
                        ast::Expr::Identifier(id) if id.value.eq_ignore_ascii_case("default") => {
                            Ok(Expr::Default)
                        }
                        e => self.expr(e, &scope),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Ok(BoundInsert {
            table: entry,
            targets,
            rows,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        &mut self,
        table: &ast::TableWithJoins,
        assignments: &[ast::Assignment],
        from: Option<&ast::UpdateTableFromKind>,
        selection: Option<&ast::Expr>,
        returning: Option<&Vec<ast::SelectItem>>,
        limit: Option<&ast::Expr>,
    ) -> Result<BoundUpdate, SqlError> {
        if from.is_some() || returning.is_some() || !table.joins.is_empty() {
            return Err(unsupported("UPDATE with joins"));
        }
        let entry = self.table_factor(&table.relation)?;
        let schema = entry.schema.clone();
        let scope = Scope {
            names: schema.columns.iter().map(|c| c.name.as_str()).collect(),
            table: &schema.name,
            alias: None,
        };
        let mut sets = Vec::new();
        for a in assignments {
            let ast::AssignmentTarget::ColumnName(name) = &a.target else {
                return Err(unsupported("UPDATE of a tuple"));
            };
            let col = name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.as_str())
                .unwrap_or_default();
            let pos = schema
                .column(col)
                .ok_or_else(|| unknown_column(col, "field list"))?;
            sets.push((pos, self.expr(&a.value, &scope)?));
        }
        let filter = selection
            .as_ref()
            .map(|e| self.expr(e, &scope))
            .transpose()?;
        let limit = limit.as_ref().map(|e| self.expr(e, &scope)).transpose()?;
        Ok(BoundUpdate {
            table: entry,
            filter,
            sets,
            limit,
        })
    }

    pub(crate) fn delete(&mut self, d: &ast::Delete) -> Result<BoundDelete, SqlError> {
        let from = match &d.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
        };
        if from.len() != 1 || !from[0].joins.is_empty() || d.using.is_some() {
            return Err(unsupported("DELETE with joins"));
        }
        if !d.order_by.is_empty() {
            return Err(unsupported("DELETE ... ORDER BY"));
        }
        let entry = self.table_factor(&from[0].relation)?;
        let schema = entry.schema.clone();
        let scope = Scope {
            names: schema.columns.iter().map(|c| c.name.as_str()).collect(),
            table: &schema.name,
            alias: None,
        };
        let filter = d
            .selection
            .as_ref()
            .map(|e| self.expr(e, &scope))
            .transpose()?;
        let limit = d.limit.as_ref().map(|e| self.expr(e, &scope)).transpose()?;
        Ok(BoundDelete {
            table: entry,
            filter,
            limit,
        })
    }
}
