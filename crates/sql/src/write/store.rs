//! A row as the engine stores it: its keys, its values inline or out of
//! line (which ones move out of line is the rule in `codec::toast`), and
//! the chunks a changed or deleted row no longer points to.

use crate::catalog::{ColumnSchema, TableSchema};
use crate::codec::{encode_row_external, toast, ExternalRef, ExternalRefs};
use crate::error::{corrupt, SqlError};
use crate::types::{ColumnType, Value};
use millrace_trx::{encode_segments, Engine, Trx};
use std::sync::atomic::AtomicU64;

/// Encodes a row of `s` (coerced values) as the engine stores it. The
/// columns in `external` stay pointers to their values out of line (their
/// entries in `row` are not read, except for key columns, which must hold
/// the fetched value); when the row is over the inline limit, more values go
/// out of line by the rule in `toast.rs`: their chunks are written in `trx`
/// under ids from `counter`. Returns the stored value and all its pointers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store_row(
    trx: &Trx,
    engine: &Engine,
    s: &TableSchema,
    counter: &AtomicU64,
    types: &[ColumnType],
    row: &[Value],
    mut external: ExternalRefs,
    page_size: usize,
) -> Result<(Vec<u8>, ExternalRefs), SqlError> {
    // Keys are built from whole values: a key column out of line was
    // fetched by the statement (a value stored out of line is never NULL).
    for &(c, _) in &external {
        assert!(
            !row[c].is_null() || !s.indexes.iter().any(|i| i.columns.contains(&c)),
            "key column {c} of {} stored out of line but not fetched",
            s.name
        );
    }
    let keys: Vec<Vec<u8>> = s
        .indexes
        .iter()
        .map(|i| s.key_of(&i.columns, row))
        .collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    let mut payload = Vec::new();
    encode_row_external(row, &external, types, &mut payload).map_err(corrupt)?;
    if let Some(toast) = s.toast_table {
        let segments: usize = keys.iter().map(|k| 2 + k.len()).sum();
        let limit = toast::inline_limit(page_size);
        let moved = toast::choose(row, types, &external, segments + payload.len(), limit);
        if !moved.is_empty() {
            let chunk = toast::chunk_bytes(page_size);
            let newest_kept = external.iter().map(|(_, r)| r.id).max().unwrap_or(0);
            for c in moved {
                let Value::Bytes(b) = &row[c] else {
                    unreachable!("toast::choose picks byte values")
                };
                let id = toast::next_value_id(engine, counter, toast)?;
                // Ids only grow (toast::next_value_id): a kept pointer at or
                // above a new id means the toast table lost its newest keys.
                if id <= newest_kept {
                    return Err(corrupt(format!(
                        "toast table {toast} ends below value {newest_kept} a row points to"
                    )));
                }
                external.push((c, toast::write(trx, toast, id, b, chunk)?));
            }
            external.sort_unstable_by_key(|&(c, _)| c);
            payload.clear();
            encode_row_external(row, &external, types, &mut payload).map_err(corrupt)?;
        }
    }
    Ok((encode_segments(&refs, &payload), external))
}

/// Deletes the values out of line of `old` (a row's pointers before a
/// change) that `new` (its pointers after; empty when the row is deleted)
/// no longer points to. Called after the row change, so that a failure in
/// between leaves at worst chunks nothing points to, never a row pointing
/// to deleted chunks.
pub(crate) fn delete_unused(
    trx: &Trx,
    s: &TableSchema,
    page_size: usize,
    old: &[(usize, ExternalRef)],
    new: &[(usize, ExternalRef)],
) -> Result<(), SqlError> {
    let Some(toast) = s.toast_table else {
        return Ok(());
    };
    let chunk = toast::chunk_bytes(page_size);
    for (_, r) in old {
        if !new.iter().any(|(_, n)| n.id == r.id) {
            toast::delete(trx, toast, r, chunk)?;
        }
    }
    Ok(())
}

/// `v` coerced to column `c`'s type; an error names the column and the
/// statement's row number.
pub(crate) fn coerce_col(c: &ColumnSchema, v: Value, row: usize) -> Result<Value, SqlError> {
    v.coerce(&c.ty)
        .map_err(|e| SqlError::new(e.mysql_code(), format!("{e} '{}' at row {row}", c.name)))
}
