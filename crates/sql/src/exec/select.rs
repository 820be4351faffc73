//! SELECT: the operator tree built from the plan, run into a sink; and the
//! rows UPDATE and DELETE change, read through the same operators.

use super::aggregate::Aggregate;
use super::distinct::Distinct;
use super::filter::Filter;
use super::guard::{row_bytes, StatementGuard};
use super::limit::{limit_of, Limit};
use super::operator::{ExecContext, Operator, RowSink};
use super::output::Output;
use super::project::Project;
use super::scan::open_table;
use super::sort::Sort;
use super::stored::needed_columns;
use super::values::Values;
use crate::bind::Source;
use crate::catalog::TableEntry;
use crate::error::SqlError;
use crate::expr::Expr;
use crate::plan::{Access, SelectPlan};
use crate::types::Value;
use millrace_trx::LockMode;
use std::sync::Arc;

/// Runs a SELECT and collects its rows as the result.
pub fn select(p: &SelectPlan, cx: &mut ExecContext<'_>) -> Result<Output, SqlError> {
    let mut rows = Collect {
        rows: Vec::new(),
        guard: cx.guard,
    };
    run_select(p, cx, &mut rows)?;
    let rows = rows.rows;
    Ok(Output::Rows {
        columns: p.select.columns.clone(),
        rows,
    })
}

/// The result rows, held whole until the statement ends: charged to the
/// statement's memory bound.
struct Collect<'g> {
    rows: Vec<Vec<Value>>,
    guard: &'g StatementGuard,
}

impl RowSink for Collect<'_> {
    fn push(&mut self, row: Vec<Value>) -> Result<(), SqlError> {
        self.guard.charge(row_bytes(&row))?;
        self.rows.push(row);
        Ok(())
    }
}

/// Runs a SELECT, handing its rows to `sink` as they come.
pub fn run_select(
    p: &SelectPlan,
    cx: &mut ExecContext<'_>,
    sink: &mut dyn RowSink,
) -> Result<(), SqlError> {
    let mut root = build(p, cx)?;
    while let Some(row) = root.next(cx)? {
        sink.push(row.values)?;
    }
    Ok(())
}

/// The operator tree of a SELECT: source -> Filter -> (Aggregate | Sort) ->
/// Project -> Distinct -> Limit.
fn build<'p>(
    p: &'p SelectPlan,
    cx: &mut ExecContext<'_>,
) -> Result<Box<dyn Operator + 'p>, SqlError> {
    let s = &p.select;
    let limit = limit_of(&s.limit, cx.params)?;
    let offset = limit_of(&s.offset, cx.params)?.unwrap_or(0);
    // Without a filter, sort, DISTINCT or aggregates every row read is a
    // result row: the scan needs no more than LIMIT + OFFSET of them.
    let simple =
        s.filter.is_none() && s.order_by.is_empty() && !s.distinct && s.aggregates.is_empty();
    let wanted = match limit {
        Some(l) if simple => l.saturating_add(offset),
        _ => usize::MAX,
    };
    let mut op: Box<dyn Operator + 'p> = match &s.source {
        Source::Nothing => Box::new(Values::new(vec![vec![]])),
        Source::Virtual(v) => Box::new(Values::new((cx.virtual_rows)(*v, cx.catalog))),
        Source::Table(t) => {
            let exprs = s
                .filter
                .iter()
                .chain(&s.items)
                .chain(s.order_by.iter().map(|(e, _)| e))
                .chain(s.aggregates.iter().filter_map(|a| a.arg.as_ref()));
            let exprs: Vec<&Expr> = exprs.collect();
            // COUNT(*), SELECT 1 FROM t, ...: no value of a row is read, so
            // none is decoded.
            let decode = exprs.iter().any(|e| e.uses_column());
            let needed = needed_columns(&t.schema, exprs, []);
            let lock = if s.for_update {
                Some(LockMode::Exclusive)
            } else if s.for_share {
                Some(LockMode::Shared)
            } else {
                None
            };
            open_table(cx, t, &p.access, lock, wanted, needed, decode)?
        }
    };
    if let Some(f) = &s.filter {
        op = Box::new(Filter::new(op, f));
    }
    if !s.aggregates.is_empty() {
        // One row: ORDER BY has nothing to order.
        op = Box::new(Aggregate::new(op, &s.aggregates));
        op = Box::new(Project::new(op, &s.items, true));
    } else {
        if !s.order_by.is_empty() {
            op = Box::new(Sort::new(op, &s.order_by));
        }
        op = Box::new(Project::new(op, &s.items, false));
    }
    if s.distinct {
        op = Box::new(Distinct::new(op));
    }
    if limit.is_some() || offset > 0 {
        op = Box::new(Limit::new(op, offset, limit));
    }
    Ok(op)
}

/// The rows of `table` an UPDATE or DELETE changes: those `access` reaches,
/// locked, that pass `filter`, at most `limit` of them. Of the values out of
/// line, those of the columns `needed` names are fetched.
pub fn rows_to_change<'p>(
    cx: &mut ExecContext<'_>,
    table: &Arc<TableEntry>,
    access: &Access,
    filter: Option<&'p Expr>,
    limit: usize,
    needed: Option<Vec<bool>>,
) -> Result<Box<dyn Operator + 'p>, SqlError> {
    let mut op = open_table(
        cx,
        table,
        access,
        Some(LockMode::Exclusive),
        usize::MAX,
        needed,
        true,
    )?;
    if let Some(f) = filter {
        op = Box::new(Filter::new(op, f));
    }
    if limit != usize::MAX {
        op = Box::new(Limit::new(op, 0, Some(limit)));
    }
    Ok(op)
}
