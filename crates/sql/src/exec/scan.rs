//! Reading a stored table: the access path's scan (primary key range,
//! secondary index range, full scan) in bounded batches, or the lookup of
//! one primary key. Scans only narrow the search; the filter above them
//! re-checks every row.
//!
//! With `lock` (SELECT ... FOR UPDATE, UPDATE, DELETE: exclusive; FOR SHARE:
//! shared) each row is locked and read again in its latest version as it is handed up; a
//! row deleted meanwhile is skipped.

use super::operator::{ExecContext, Operator, Row};
use super::stored::{decode_stored, eval_key, fetch_external, HIGH_SUFFIX};
use crate::catalog::TableEntry;
use crate::codec::encode_key;
use crate::error::{corrupt, engine_err, SqlError};
use crate::plan::Access;
use crate::types::ColumnType;
use millrace_trx::{split_segments, LockMode};
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

/// Rows read from the engine per call: bounds a scan's memory, and is large
/// enough that the per-call cost (a B+tree descent) is spread thin.
const SCAN_BATCH_ROWS: usize = 256;

/// How the rows of a table are decoded and, with `lock`, locked.
struct Reader {
    entry: Arc<TableEntry>,
    types: Vec<ColumnType>,
    lock: bool,
    /// The lock taken on each row read when `lock`.
    mode: LockMode,
    /// The columns whose values out of line are fetched (`None`: all).
    needed: Option<Vec<bool>>,
    /// Whether rows are decoded at all (false: the statement reads no
    /// value, as COUNT(*); rows are handed up with their key only).
    decode: bool,
}

impl Reader {
    /// The latest version of the row under `pk`, locked in `mode`
    /// (`None`: it is gone).
    fn locked(&self, cx: &ExecContext<'_>, pk: &[u8]) -> Result<Option<Vec<u8>>, SqlError> {
        cx.trx
            .get_locked(self.entry.schema.engine_table, pk, self.mode)
            .map_err(engine_err)
    }

    /// The row under `pk` whose stored value is `v`.
    fn decode(&self, cx: &ExecContext<'_>, pk: Vec<u8>, v: &[u8]) -> Result<Row, SqlError> {
        if !self.decode {
            return Ok(Row {
                values: Vec::new(),
                key: pk,
                external: Vec::new(),
            });
        }
        let s = &self.entry.schema;
        let (mut values, external) = decode_stored(s, &self.types, v)?;
        if !external.is_empty() {
            fetch_external(
                cx.trx,
                s,
                &self.types,
                cx.page_size,
                &mut values,
                &external,
                self.needed.as_deref(),
                self.lock,
            )?;
        }
        Ok(Row {
            values,
            key: pk,
            external,
        })
    }
}

/// Opens the read of `entry` by `access`. `wanted`: the most rows the
/// consumer can use (it stops pulling after them; `usize::MAX` when it
/// cannot tell), so that a `LIMIT 1` reads one row. `decode`: false when
/// the statement reads no value of the rows (COUNT(*)): they are not
/// decoded.
pub fn open_table<'p>(
    cx: &ExecContext<'_>,
    entry: &Arc<TableEntry>,
    access: &Access,
    lock: Option<LockMode>,
    wanted: usize,
    needed: Option<Vec<bool>>,
    decode: bool,
) -> Result<Box<dyn Operator + 'p>, SqlError> {
    let s = &entry.schema;
    let reader = Reader {
        entry: entry.clone(),
        types: s.types(),
        lock: lock.is_some(),
        mode: lock.unwrap_or(LockMode::Exclusive),
        needed,
        decode,
    };
    let params = cx.params;
    let full = |reader| TableScan::new(reader, Range::Full, wanted);
    let scan: Box<dyn Operator> = match access {
        Access::PkPoint(exprs) => {
            // Point keys that do not convert to the column type match
            // nothing by index: fall back on a scan (the filter decides).
            let mut key = Vec::new();
            let mut ok = true;
            for (e, &c) in exprs.iter().zip(&s.primary_key) {
                let v = e.eval_const(params)?;
                if v.is_null() {
                    return Ok(Box::new(PkLookup { reader, key: None }));
                }
                match v.coerce(&s.columns[c].ty) {
                    Ok(v) => encode_key(&[(v, &s.columns[c].ty)], &mut key),
                    Err(_) => ok = false,
                }
            }
            if ok {
                Box::new(PkLookup {
                    reader,
                    key: Some(key),
                })
            } else {
                Box::new(full(reader))
            }
        }
        Access::PkRange { low, high } => {
            let c = s.primary_key[0];
            let lo = match low {
                Some(e) => eval_key(s, c, e, params)?,
                None => None,
            };
            let mut hi = match high {
                Some(e) => eval_key(s, c, e, params)?,
                None => None,
            };
            let bad = low.is_some() && lo.is_none() || high.is_some() && hi.is_none();
            if bad {
                Box::new(full(reader))
            } else {
                if s.primary_key.len() > 1 {
                    if let Some(h) = &mut hi {
                        h.extend_from_slice(&HIGH_SUFFIX);
                    }
                }
                let from = lo.map_or(Bound::Unbounded, Bound::Included);
                let to = hi.map_or(Bound::Unbounded, Bound::Included);
                Box::new(TableScan::new(reader, Range::Primary { from, to }, wanted))
            }
        }
        Access::Secondary { index, low, high } => {
            let c = s.indexes[*index].columns[0];
            let lo = match low {
                Some(e) => eval_key(s, c, e, params)?,
                None => Some(vec![]),
            };
            let hi = match high {
                Some(e) => eval_key(s, c, e, params)?,
                None => Some(HIGH_SUFFIX.to_vec()),
            };
            match (lo, hi) {
                (Some(from), Some(mut to)) => {
                    if s.indexes[*index].columns.len() > 1 {
                        to.extend_from_slice(&HIGH_SUFFIX);
                    }
                    let range = Range::Secondary {
                        index: *index,
                        from,
                        to,
                        after: None,
                    };
                    Box::new(TableScan::new(reader, range, wanted))
                }
                _ => Box::new(full(reader)),
            }
        }
        Access::FullScan => Box::new(full(reader)),
    };
    Ok(scan)
}

/// The row of one primary key (`None`: a NULL key part, which matches
/// nothing).
struct PkLookup {
    reader: Reader,
    key: Option<Vec<u8>>,
}

impl Operator for PkLookup {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        let Some(pk) = self.key.take() else {
            return Ok(None);
        };
        let v = if self.reader.lock {
            self.reader.locked(cx, &pk)?
        } else {
            let table = self.reader.entry.schema.engine_table;
            cx.trx.get(table, &pk).map_err(engine_err)?
        };
        match v {
            Some(v) => self.reader.decode(cx, pk, &v).map(Some),
            None => Ok(None),
        }
    }
}

/// The key range a scan reads, and where its next batch starts.
enum Range {
    Full,
    /// Primary keys in [from, to]; `from` moves past each batch.
    Primary {
        from: Bound<Vec<u8>>,
        to: Bound<Vec<u8>>,
    },
    /// Secondary index `index` keys in [from, to]. A batch ends inside a run
    /// of equal secondary keys as often as not, so the next one starts at
    /// the last entry read (secondary key ++ primary key, the index's own
    /// key) and skips the row `after` names.
    Secondary {
        index: usize,
        from: Vec<u8>,
        to: Vec<u8>,
        after: Option<Vec<u8>>,
    },
}

/// A range or full scan read in batches of at most [`SCAN_BATCH_ROWS`].
struct TableScan {
    reader: Reader,
    range: Range,
    /// Engine rows still wanted (see `open_table`).
    wanted: usize,
    batch: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// The engine has no more rows in the range.
    done: bool,
}

impl TableScan {
    fn new(reader: Reader, range: Range, wanted: usize) -> TableScan {
        TableScan {
            reader,
            range,
            wanted,
            batch: VecDeque::new(),
            done: false,
        }
    }

    /// Reads the next batch into `self.batch`.
    fn fill(&mut self, cx: &ExecContext<'_>) -> Result<(), SqlError> {
        let s = &self.reader.entry.schema;
        let table = s.engine_table;
        let n = self.wanted.min(SCAN_BATCH_ROWS);
        let (rows, asked, repeated) = match &self.range {
            Range::Full => (
                cx.trx.scan(table, Bound::Unbounded, Bound::Unbounded, n),
                n,
                None,
            ),
            Range::Primary { from, to } => {
                (cx.trx.scan(table, as_ref(from), as_ref(to), n), n, None)
            }
            Range::Secondary {
                index,
                from,
                to,
                after,
            } => {
                // One more row for the repeated one, so each batch advances.
                let asked = n.saturating_add(usize::from(after.is_some()));
                let rows = cx.trx.scan_secondary(table, *index, from, to, asked);
                (rows, asked, after.clone())
            }
        };
        let rows = rows.map_err(engine_err)?;
        self.done = rows.len() < asked;
        if let Some((pk, v)) = rows.last() {
            match &mut self.range {
                // A full scan goes on as a primary key range.
                Range::Full => {
                    self.range = Range::Primary {
                        from: Bound::Excluded(pk.clone()),
                        to: Bound::Unbounded,
                    }
                }
                Range::Primary { from, .. } => *from = Bound::Excluded(pk.clone()),
                Range::Secondary {
                    index, from, after, ..
                } => {
                    let (segments, _) = split_segments(v, s.indexes.len())
                        .ok_or_else(|| corrupt("bad key segments"))?;
                    *from = [segments[*index], pk.as_slice()].concat();
                    *after = Some(pk.clone());
                }
            }
        }
        let before = self.batch.len();
        self.batch.extend(
            rows.into_iter()
                .filter(|(pk, _)| repeated.as_deref() != Some(pk.as_slice())),
        );
        self.wanted -= self.batch.len() - before;
        self.done |= self.wanted == 0;
        Ok(())
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Operator for TableScan {
    fn next(&mut self, cx: &mut ExecContext<'_>) -> Result<Option<Row>, SqlError> {
        loop {
            cx.guard.check()?;
            if let Some((pk, v)) = self.batch.pop_front() {
                let v = if self.reader.lock {
                    match self.reader.locked(cx, &pk)? {
                        Some(v) => v,
                        // Deleted since the scan read it.
                        None => continue,
                    }
                } else {
                    v
                };
                return self.reader.decode(cx, pk, &v).map(Some);
            }
            if self.done {
                return Ok(None);
            }
            self.fill(cx)?;
        }
    }
}
