//! SELECT: its source (no table, a stored table or a virtual one), select
//! list with the result columns' names and types, WHERE, DISTINCT, ORDER BY,
//! LIMIT/OFFSET, aggregates and FOR UPDATE.

use super::binder::Binder;
use super::names::{no_table, object_name, unknown_column, Scope};
use super::types::result_kind;
use crate::catalog::system::VirtualTable;
use crate::catalog::TableEntry;
use crate::error::{unsupported, SqlError};
use crate::expr::{Aggregate, Expr};
use crate::types::{OutColumn, ResultKind};
use millrace_errcode::ER_MIX_OF_GROUP_FUNC_AND_FIELDS;
use sqlparser::ast;
use std::sync::Arc;

/// A table a statement reads: a stored table or a virtual one.
#[derive(Debug, Clone)]
pub enum Source {
    /// SELECT without FROM: one empty row.
    Nothing,
    Table(Arc<TableEntry>),
    /// information_schema / performance_schema tables, made at execution.
    Virtual(VirtualTable),
}

/// A bound SELECT: everything but how to find its rows (the planner's).
#[derive(Debug, Clone)]
pub struct BoundSelect {
    pub source: Source,
    pub filter: Option<Expr>,
    pub columns: Vec<OutColumn>,
    pub items: Vec<Expr>,
    pub aggregates: Vec<Aggregate>,
    pub distinct: bool,
    /// (key, ascending), evaluated on the source row (or, with aggregates,
    /// on the aggregated row).
    pub order_by: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
    pub for_update: bool,
    /// FOR SHARE / LOCK IN SHARE MODE: rows read are locked shared.
    pub for_share: bool,
}

impl Binder<'_> {
    pub(crate) fn select(&mut self, q: &ast::Query) -> Result<BoundSelect, SqlError> {
        if q.with.is_some() || q.fetch.is_some() {
            return Err(unsupported("WITH / FETCH"));
        }
        let ast::SetExpr::Select(s) = q.body.as_ref() else {
            return Err(unsupported("UNION or a subquery"));
        };
        let (source, names, table_name, alias): (Source, Vec<String>, String, Option<String>) =
            match s.from.as_slice() {
                [] => (Source::Nothing, vec![], String::new(), None),
                [twj] if twj.joins.is_empty() => {
                    let ast::TableFactor::Table { name, alias, .. } = &twj.relation else {
                        return Err(unsupported("a derived table"));
                    };
                    let alias = alias.as_ref().map(|a| a.name.value.clone());
                    let (db, t) = object_name(name, self.session)?;
                    if let Some(v) = VirtualTable::find(&db, &t) {
                        let names = v.column_names();
                        (Source::Virtual(v), names, t, alias)
                    } else {
                        let entry = self
                            .catalog
                            .table(&db, &t)
                            .ok_or_else(|| no_table(&db, &t))?;
                        let names = entry
                            .schema
                            .columns
                            .iter()
                            .map(|c| c.name.clone())
                            .collect();
                        (Source::Table(entry), names, t, alias)
                    }
                }
                _ => return Err(unsupported("joins")),
            };
        let scope = Scope {
            names: names.iter().map(|s| s.as_str()).collect(),
            table: &table_name,
            alias,
        };
        let col_kind = |i: usize| match &source {
            Source::Table(t) => ResultKind::of(&t.schema.columns[i].ty),
            Source::Virtual(v) => v.kinds()[i],
            Source::Nothing => ResultKind::Text,
        };
        let mut columns = Vec::new();
        let mut items = Vec::new();
        let mut aggregates = Vec::new();
        for item in &s.projection {
            match item {
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    for (i, n) in names.iter().enumerate() {
                        columns.push(OutColumn {
                            name: n.clone(),
                            table: table_name.clone(),
                            kind: col_kind(i),
                        });
                        items.push(Expr::Column(i));
                    }
                }
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    let before = self.params;
                    let x = self.item_expr(e, &scope, &mut aggregates)?;
                    if self.params != before {
                        self.shape_sensitive = true;
                    }
                    let name = match item {
                        ast::SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                        _ => match e {
                            ast::Expr::Identifier(i) => i.value.clone(),
                            ast::Expr::CompoundIdentifier(p) => {
                                p.last().map(|i| i.value.clone()).unwrap_or_default()
                            }
                            e => e.to_string(),
                        },
                    };
                    let kind = result_kind(&x, &aggregates, &col_kind);
                    columns.push(OutColumn {
                        name,
                        table: table_name.clone(),
                        kind,
                    });
                    items.push(x);
                }
            }
        }
        let filter = s
            .selection
            .as_ref()
            .map(|e| self.expr(e, &scope))
            .transpose()?;
        if !matches!(&s.group_by, ast::GroupByExpr::Expressions(v, _) if v.is_empty()) {
            return Err(unsupported("GROUP BY"));
        }
        if s.having.is_some() {
            return Err(unsupported("HAVING"));
        }
        let distinct = match &s.distinct {
            None => false,
            Some(ast::Distinct::Distinct) => true,
            Some(d) => return Err(unsupported(d)),
        };
        let mut order_by = Vec::new();
        if let Some(ob) = &q.order_by {
            let ast::OrderByKind::Expressions(exprs) = &ob.kind else {
                return Err(unsupported("ORDER BY ALL"));
            };
            for o in exprs {
                let asc = o.options.asc != Some(false);
                let before = self.params;
                let key = match &o.expr {
                    // ORDER BY <position>
                    ast::Expr::Value(v) => match &v.value {
                        ast::Value::Number(n, _) => {
                            let p: usize = n.parse().unwrap_or(0);
                            items
                                .get(p.wrapping_sub(1))
                                .cloned()
                                .ok_or_else(|| unknown_column(n, "order clause"))?
                        }
                        ast::Value::Placeholder(_) => {
                            self.params += 1;
                            self.shape_sensitive = true;
                            Expr::Param(self.params - 1)
                        }
                        _ => self.expr(&o.expr, &scope)?,
                    },
                    // ORDER BY <alias>
                    ast::Expr::Identifier(id)
                        if scope
                            .names
                            .iter()
                            .all(|n| !n.eq_ignore_ascii_case(&id.value)) =>
                    {
                        let at = columns
                            .iter()
                            .position(|c| c.name.eq_ignore_ascii_case(&id.value))
                            .ok_or_else(|| unknown_column(&id.value, "order clause"))?;
                        items[at].clone()
                    }
                    e => self.item_expr(e, &scope, &mut aggregates)?,
                };
                if self.params != before {
                    self.shape_sensitive = true;
                }
                order_by.push((key, asc));
            }
        }
        let (mut limit, mut offset) = (None, None);
        match &q.limit_clause {
            None => {}
            Some(ast::LimitClause::LimitOffset {
                limit: l,
                offset: o,
                ..
            }) => {
                limit = l.as_ref().map(|e| self.expr(e, &scope)).transpose()?;
                offset = o
                    .as_ref()
                    .map(|o| self.expr(&o.value, &scope))
                    .transpose()?;
            }
            Some(ast::LimitClause::OffsetCommaLimit {
                offset: o,
                limit: l,
            }) => {
                offset = Some(self.expr(o, &scope)?);
                limit = Some(self.expr(l, &scope)?);
            }
        }
        let (for_update, for_share) = match q.locks.as_slice() {
            [] => (false, false),
            [l] if l.of.is_some() || l.nonblock.is_some() => {
                return Err(unsupported(
                    "FOR UPDATE / FOR SHARE with OF, NOWAIT or SKIP LOCKED",
                ))
            }
            [l] if l.lock_type == ast::LockType::Update => (true, false),
            // LOCK IN SHARE MODE / FOR SHARE: shared row locks.
            [_] => (false, true),
            _ => return Err(unsupported("several lock clauses")),
        };
        if !aggregates.is_empty() && items.iter().any(Expr::uses_column) {
            return Err(SqlError::new(
                ER_MIX_OF_GROUP_FUNC_AND_FIELDS,
                "In aggregated query without GROUP BY, a nonaggregated column is \
                 not allowed (only_full_group_by)",
            ));
        }
        Ok(BoundSelect {
            source,
            filter,
            columns,
            items,
            aggregates,
            distinct,
            order_by,
            limit,
            offset,
            for_update,
            for_share,
        })
    }
}
