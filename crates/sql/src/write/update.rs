//! UPDATE: the rows the access path reaches that pass the filter (locked),
//! their SET values, unique checks, then each changed row stored again
//! (under a new key when its primary key changed).

use super::store::{coerce_col, delete_unused, store_row};
use super::unique::{check_unique, dup_entry};
use crate::codec::ExternalRefs;
use crate::error::{engine_err, SqlError};
use crate::exec::stored::needed_columns;
use crate::exec::{limit_of, row_bytes, rows_to_change, Ctx, ExecContext, Output, Row};
use crate::plan::UpdatePlan;
use millrace_errcode::ER_BAD_NULL_ERROR;
use millrace_trx::TrxError;

pub fn update(cx: &mut ExecContext<'_>, plan: &UpdatePlan) -> Result<Output, SqlError> {
    let (p, access) = (&plan.update, &plan.access);
    let params = cx.params;
    let s = p.table.schema.clone();
    let types = s.types();
    let limit = limit_of(&p.limit, params)?.unwrap_or(usize::MAX);
    // Out-of-line values to fetch: what the filter and the SET
    // expressions read, the SET targets (to tell a change) and the key
    // columns (keys are built from whole values). The others keep their
    // pointers unread.
    let exprs = p.filter.iter().chain(p.sets.iter().map(|(_, e)| e));
    let keys = s.indexes.iter().flat_map(|i| i.columns.iter().copied());
    let also = p.sets.iter().map(|(c, _)| *c);
    let also = also.chain(s.primary_key.iter().copied()).chain(keys);
    let needed = needed_columns(&s, exprs, also);
    // The rows to change are read whole before the first change: a change
    // that moves a row to a later key (a new primary key, a new secondary
    // key under a secondary index scan) would otherwise meet the row again
    // further on in the scan and change it twice.
    let mut rows = Vec::new();
    let mut source = rows_to_change(cx, &p.table, access, p.filter.as_ref(), limit, needed)?;
    while let Some(row) = source.next(cx)? {
        cx.guard
            .charge(row_bytes(&row.values) + row.key.len() + 16 * row.external.len())?;
        rows.push(row);
    }
    drop(source);
    let page_size = cx.page_size;
    let mut changed = 0u64;
    let mut matched = 0usize;
    for row in rows {
        cx.guard.check()?;
        let Row {
            values: old,
            key: pk,
            external: old_external,
        } = row;
        matched += 1;
        let mut new = old.clone();
        for (c, e) in &p.sets {
            let v = e.eval(&Ctx {
                row: &new,
                params,
                aggregates: &[],
                guard: Some(cx.guard),
            })?;
            let col = &s.columns[*c];
            let v = coerce_col(col, v, matched)?;
            if v.is_null() && !col.nullable {
                return Err(SqlError::new(
                    ER_BAD_NULL_ERROR,
                    format!("Column '{}' cannot be null", col.name),
                ));
            }
            new[*c] = v;
        }
        if new == old {
            continue;
        }
        let new_pk = if s.primary_key.is_empty() {
            pk.clone()
        } else {
            s.key_of(&s.primary_key, &new)
        };
        let trx = cx.trx;
        check_unique(trx, &s, &new, &new_pk, Some(&old))?;
        // A value out of line that did not change keeps its pointer (the
        // chunks are not copied); an unfetched one cannot have changed,
        // as every SET target was fetched.
        let kept: ExternalRefs = old_external
            .iter()
            .filter(|&&(c, _)| new[c] == old[c])
            .copied()
            .collect();
        let (value, new_external) = store_row(
            trx,
            cx.catalog.engine(),
            &s,
            &p.table.next_value_id,
            &types,
            &new,
            kept,
            page_size,
        )?;
        if new_pk != pk {
            trx.delete(s.engine_table, &pk).map_err(engine_err)?;
            match trx.insert(s.engine_table, &new_pk, &value) {
                Ok(()) => {}
                Err(TrxError::Duplicate) => {
                    return Err(dup_entry(&s, &s.primary_key, &new, "PRIMARY"))
                }
                Err(e) => return Err(engine_err(e)),
            }
        } else {
            trx.update(s.engine_table, &pk, &value)
                .map_err(engine_err)?;
        }
        // The old values under this transaction's delete marks: older
        // read views still see them, purge removes them after.
        delete_unused(trx, &s, page_size, &old_external, &new_external)?;
        changed += 1;
    }
    Ok(Output::affected(changed))
}
