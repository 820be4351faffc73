//! Stored rows as the executor reads them: decoded from the engine's value
//! (key segments, then the row), with the values stored out of line fetched
//! for the columns a statement reads; and the keys of access path bounds.

use crate::catalog::TableSchema;
use crate::codec::{decode_row_external, encode_key, toast, ExternalRef, ExternalRefs};
use crate::error::{corrupt, SqlError};
use crate::expr::Expr;
use crate::types::{ColumnType, Value};
use millrace_trx::{split_segments, Trx};

/// Key bytes appended to a key prefix to make an inclusive upper bound
/// over every key that starts with it (no key encoding has so many 0xFF).
pub(crate) const HIGH_SUFFIX: [u8; 24] = [0xFF; 24];

/// A decoded row: its values, with NULL in place of each value stored out
/// of line that was not fetched, and the pointers to every value stored out
/// of line (column, pointer; ascending columns; usually empty).
pub(crate) type Decoded = (Vec<Value>, ExternalRefs);

/// Decodes a stored row of `s`; values stored out of line are not fetched
/// (see `fetch_external`).
pub(crate) fn decode_stored(
    s: &TableSchema,
    types: &[ColumnType],
    value: &[u8],
) -> Result<Decoded, SqlError> {
    let (_, payload) =
        split_segments(value, s.indexes.len()).ok_or_else(|| corrupt("bad key segments"))?;
    let d = decode_row_external(payload, types).map_err(corrupt)?;
    if !d.1.is_empty() && s.toast_table.is_none() {
        return Err(corrupt(
            "a value out of line in a table without a toast table",
        ));
    }
    Ok(d)
}

/// Fetches the values stored out of line of a row of `s` that `needed`
/// names (all with `None`) into `row`, in `trx`; `lock`: the row was read
/// locked, in its latest version (see `toast::fetch`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch_external(
    trx: &Trx,
    s: &TableSchema,
    types: &[ColumnType],
    page_size: usize,
    row: &mut [Value],
    external: &[(usize, ExternalRef)],
    needed: Option<&[bool]>,
    lock: bool,
) -> Result<(), SqlError> {
    // decode_stored refuses pointers in a table without a toast table.
    let Some(toast) = s.toast_table else {
        return Ok(());
    };
    let chunk = toast::chunk_bytes(page_size);
    for &(c, r) in external {
        if needed.is_none_or(|n| n[c]) {
            row[c] = toast::fetch(trx, toast, &r, &types[c], chunk, lock)?;
        }
    }
    Ok(())
}

/// The columns a statement over table `s` reads through `exprs` (and
/// `also`), for fetching only those values out of line; `None` (fetch all
/// there are) for a table without a toast table, which has none.
pub(crate) fn needed_columns<'a>(
    s: &TableSchema,
    exprs: impl IntoIterator<Item = &'a Expr>,
    also: impl IntoIterator<Item = usize>,
) -> Option<Vec<bool>> {
    s.toast_table?;
    let mut used = vec![false; s.columns.len()];
    for e in exprs {
        e.mark_columns(&mut used);
    }
    for c in also {
        used[c] = true;
    }
    Some(used)
}

/// The key of column `col` of `s` for the bound `e`; `None` when it is NULL
/// or does not convert to the column's type (it then matches nothing by
/// index, and the caller falls back on a scan the filter decides).
pub(crate) fn eval_key(
    s: &TableSchema,
    col: usize,
    e: &Expr,
    params: &[Value],
) -> Result<Option<Vec<u8>>, SqlError> {
    let v = e.eval_const(params)?;
    if v.is_null() {
        return Ok(None);
    }
    let ty = s.columns[col].ty;
    Ok(v.coerce(&ty).ok().map(|v| {
        let mut out = Vec::new();
        encode_key(&[(v, &ty)], &mut out);
        out
    }))
}
