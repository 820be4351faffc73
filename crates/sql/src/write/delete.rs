//! DELETE: the rows the access path reaches that pass the filter (locked),
//! deleted as they are read, with their values out of line.

use super::store::delete_unused;
use crate::error::{engine_err, SqlError};
use crate::exec::stored::needed_columns;
use crate::exec::{limit_of, rows_to_change, ExecContext, Output};
use crate::plan::DeletePlan;

pub fn delete(cx: &mut ExecContext<'_>, plan: &DeletePlan) -> Result<Output, SqlError> {
    let (p, access) = (&plan.delete, &plan.access);
    let limit = limit_of(&p.limit, cx.params)?.unwrap_or(usize::MAX);
    let s = &p.table.schema;
    let needed = needed_columns(s, p.filter.iter(), []);
    // Deleting as the scan goes is safe: a deleted row is behind the scan
    // and, deleted in this transaction, invisible to its later batches.
    let mut rows = rows_to_change(cx, &p.table, access, p.filter.as_ref(), limit, needed)?;
    let mut n = 0u64;
    // The scan checks the statement's kill state and deadline for each row.
    while let Some(row) = rows.next(cx)? {
        let trx = cx.trx;
        if trx.delete(s.engine_table, &row.key).map_err(engine_err)? {
            delete_unused(trx, s, cx.page_size, &row.external, &[])?;
            n += 1;
        }
    }
    Ok(Output::affected(n))
}
