//! AUTO_INCREMENT values and hidden row ids: a per-table counter, loaded
//! from the largest key stored at the table's first insert.

use crate::catalog::TableEntry;
use crate::codec::decode_key_prefix;
use crate::error::{corrupt, engine_err, SqlError};
use crate::types::{ColumnType, Value};
use millrace_trx::Engine;
use std::sync::atomic::Ordering;

/// The next AUTO_INCREMENT value (or hidden row id) of a table; the
/// counter starts after the largest key stored. `explicit`: a value the
/// statement gave, which moves the counter past it.
pub(crate) fn next_id(
    engine: &Engine,
    entry: &TableEntry,
    explicit: Option<u64>,
) -> Result<u64, SqlError> {
    if entry.next_id.load(Ordering::SeqCst) == 0 {
        let s = &entry.schema;
        let last = engine.last_key(s.engine_table).map_err(engine_err)?;
        let start = match last {
            None => 1,
            Some(k) if s.primary_key.is_empty() => {
                u64::from_be_bytes(k.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8])) + 1
            }
            Some(k) => {
                let types: Vec<ColumnType> =
                    s.primary_key.iter().map(|&c| s.columns[c].ty).collect();
                let vals = decode_key_prefix(&k, &types).map_err(corrupt)?.0;
                let first = vals.first().cloned().unwrap_or(Value::Null);
                match first {
                    Value::Int(i) if i > 0 => i as u64 + 1,
                    Value::UInt(u) => u + 1,
                    _ => 1,
                }
            }
        };
        let _ = entry
            .next_id
            .compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst);
    }
    match explicit {
        Some(v) => {
            entry
                .next_id
                .fetch_max(v.saturating_add(1), Ordering::SeqCst);
            Ok(v)
        }
        None => Ok(entry.next_id.fetch_add(1, Ordering::SeqCst)),
    }
}
