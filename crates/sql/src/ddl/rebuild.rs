//! The table rebuild of CREATE INDEX: rows copied to a new engine table in
//! batches, each batch in its own transaction, then the catalog switched to
//! the new table in one.

use crate::catalog::{Catalog, TableEntry, TableSchema};
use crate::codec::{toast, ExternalRef};
use crate::error::{engine_err, SqlError};
use crate::exec::stored::{decode_stored, fetch_external, needed_columns};
use crate::write::store::store_row;
use crate::write::unique::check_unique;
use millrace_trx::Isolation;
use std::ops::Bound;

#[cfg(test)]
thread_local! {
    /// A test's panic, raised by this thread's next rebuild after its first
    /// batch (as a bug in the copy would).
    pub(crate) static PANIC_IN_REBUILD: std::cell::Cell<bool> =
        const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn injected_panic() {
    if PANIC_IN_REBUILD.with(|p| p.replace(false)) {
        panic!("a panic injected into a table rebuild");
    }
}

/// Rows copied per transaction by CREATE INDEX's table rebuild.
const COPY_BATCH_ROWS: usize = 1000;

/// Copies the rows of `old` into a new engine table for schema `s`, then
/// switches the catalog to it. The rows keep their pointers to values
/// out of line: the new schema keeps the toast table (a table from
/// before toast tables that needs one gets it here), and only the old
/// engine table is dropped.
pub(crate) fn rebuild(cat: &Catalog, old: &TableEntry, mut s: TableSchema) -> Result<(), SqlError> {
    let engine = cat.engine();
    let page_size = engine.page_size();
    s.engine_table = engine.create_table(&s.engine_keys()).map_err(engine_err)?;
    let new_toast = if s.toast_table.is_none() && toast::needs_toast(&s.types(), page_size) {
        match engine.create_table(&[]) {
            Ok(id) => Some(id),
            Err(e) => {
                let _ = engine.drop_table(s.engine_table);
                return Err(engine_err(e));
            }
        }
    } else {
        None
    };
    s.toast_table = s.toast_table.or(new_toast);
    let (old_types, new_types) = (old.schema.types(), s.types());
    // Only the key columns' values out of line are needed (to build the
    // new keys); the rest is copied as pointers.
    let keys = s.indexes.iter().flat_map(|i| i.columns.iter().copied());
    let needed = needed_columns(&s, [], keys);
    // Values this rebuild moved out of line (a row that the new key
    // makes longer): deleted again if the rebuild fails.
    let mut fresh: Vec<ExternalRef> = Vec::new();
    let mut copy = || -> Result<u64, SqlError> {
        let mut from: Option<Vec<u8>> = None;
        let mut copied = 0u64;
        loop {
            let reader = engine.begin(Isolation::RepeatableRead);
            let bound = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let batch = reader
                .scan(
                    old.schema.engine_table,
                    bound,
                    Bound::Unbounded,
                    COPY_BATCH_ROWS,
                )
                .map_err(engine_err)?;
            reader.commit().map_err(engine_err)?;
            if batch.is_empty() {
                return Ok(copied);
            }
            // The exclusive metadata lock keeps writers out, so the
            // writer reads (the values out of line) what the reader saw.
            let writer = engine.begin(Isolation::RepeatableRead);
            let mut batch_fresh = Vec::new();
            for (pk, v) in &batch {
                let (mut row, external) = decode_stored(&old.schema, &old_types, v)?;
                fetch_external(
                    &writer,
                    &old.schema,
                    &old_types,
                    page_size,
                    &mut row,
                    &external,
                    needed.as_deref(),
                    false,
                )?;
                check_unique(&writer, &s, &row, pk, None)?;
                let (value, stored) = store_row(
                    &writer,
                    engine,
                    &s,
                    &old.next_value_id,
                    &new_types,
                    &row,
                    external.clone(),
                    page_size,
                )?;
                batch_fresh.extend(
                    stored
                        .iter()
                        .filter(|(_, r)| !external.iter().any(|(_, e)| e.id == r.id))
                        .map(|&(_, r)| r),
                );
                writer
                    .insert(s.engine_table, pk, &value)
                    .map_err(engine_err)?;
            }
            writer.commit().map_err(engine_err)?;
            // (An uncommitted batch's chunks go with its rollback.)
            fresh.append(&mut batch_fresh);
            copied += batch.len() as u64;
            from = batch.last().map(|(k, _)| k.clone());
            #[cfg(test)]
            injected_panic();
        }
    };
    match copy() {
        Ok(n) => {
            tracing::info!(table = %s.name, rows = n, "table rebuilt with a new index");
            cat.replace_table(old, s)?;
            Ok(())
        }
        Err(e) => {
            let _ = engine.drop_table(s.engine_table);
            match (new_toast, s.toast_table) {
                (Some(t), _) => {
                    let _ = engine.drop_table(t);
                }
                (None, Some(t)) if !fresh.is_empty() => {
                    // Best effort: what is left is unreferenced chunks
                    // (space), never a row pointing to missing ones.
                    let chunk = toast::chunk_bytes(page_size);
                    let cleanup = engine.begin(Isolation::RepeatableRead);
                    let r = fresh
                        .iter()
                        .try_for_each(|v| toast::delete(&cleanup, t, v, chunk));
                    let _ = if r.is_ok() {
                        cleanup.commit().map_err(engine_err)
                    } else {
                        cleanup.rollback().map_err(engine_err)
                    };
                }
                _ => {}
            }
            Err(e)
        }
    }
}
