//! Unique checks: a row's primary key and UNIQUE secondary keys must not be
//! taken by another row.

use crate::catalog::TableSchema;
use crate::error::{engine_err, SqlError};
use crate::types::Value;
use millrace_errcode::ER_DUP_ENTRY;
use millrace_trx::Trx;

/// Checks the UNIQUE secondary indexes of `s` for `row` (keyed `pk`) in
/// `trx`; with `only_changed_from`, only indexes whose columns differ from
/// that old row. Each check is a locking current read in the index
/// (`Trx::unique_key_taken`): it locks the key value until the transaction
/// ends and waits for any other transaction that has the value in an
/// uncommitted change, so two concurrent writers of one value cannot both
/// commit: the second waits, then gets 1062 if the first committed (see
/// docs/design.md, "Transactions under failure").
pub(crate) fn check_unique(
    trx: &Trx,
    s: &TableSchema,
    row: &[Value],
    pk: &[u8],
    only_changed_from: Option<&[Value]>,
) -> Result<(), SqlError> {
    for (i, idx) in s.indexes.iter().enumerate() {
        if !idx.unique || idx.columns.iter().any(|&c| row[c].is_null()) {
            continue;
        }
        if let Some(old) = only_changed_from {
            if idx.columns.iter().all(|&c| old[c] == row[c]) {
                continue;
            }
        }
        let key = s.key_of(&idx.columns, row);
        if trx
            .unique_key_taken(s.engine_table, i, &key, pk)
            .map_err(engine_err)?
        {
            return Err(dup_entry(s, &idx.columns, row, &idx.name));
        }
    }
    Ok(())
}

/// 1062 for `row`'s key `key` (its columns `cols`).
pub(crate) fn dup_entry(s: &TableSchema, cols: &[usize], row: &[Value], key: &str) -> SqlError {
    let shown: Vec<String> = cols
        .iter()
        .map(|&c| {
            row[c]
                .to_text()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
                .unwrap_or_else(|| "NULL".into())
        })
        .collect();
    SqlError::new(
        ER_DUP_ENTRY,
        format!(
            "Duplicate entry '{}' for key '{}.{key}'",
            shown.join("-"),
            s.name
        ),
    )
}
