//! Values stored out of line ("toast", after PostgreSQL's): a table that can
//! hold a long value has a second, hidden engine table, its toast table,
//! that holds such values cut into chunks; the row holds a pointer
//! ([`ExternalRef`]: value id, length, crc32c) in the value's place.
//!
//! Toast table records: key = value id (u64 big-endian) ++ chunk number (u32
//! big-endian), value = the chunk's bytes. Chunk `n` of a value of `len`
//! bytes holds bytes `n * C .. min((n + 1) * C, len)`, C = [`chunk_bytes`]
//! (page size / 10, so a chunk record fits any page with room to spare);
//! there are exactly `ceil(len / C)` chunks. A reader checks every chunk's
//! presence, number and size and the crc of the whole value: damage is error
//! 1877, never a panic and never wrong data.
//!
//! Chunks are ordinary engine records written by the statement's own
//! transaction, so MVCC, rollback, crash recovery and purge need nothing
//! new: a reader fetches them through the transaction (the read view) it read
//! the row with; an UPDATE writes a changed value under a new id and then
//! deletes the old chunks, which older read views keep seeing until purge
//! removes them; rollback undoes chunk writes like any others.
//!
//! When a value goes out of line: a row of a table with a toast table is
//! stored inline if its stored value (key segments and row) is at most
//! [`inline_limit`] (page size / 16) bytes. A longer one moves its inline
//! CHAR, VARCHAR, TEXT and BLOB values of at least [`MIN_OUT_OF_LINE`] bytes
//! out of line, the longest first (ties: the lower column), until it is at
//! most that long or none is left. A row still longer than a B+tree record
//! may be is refused as before (1118).
//!
//! Which tables get a toast table ([`needs_toast`]): those whose longest
//! possible row is over the inline limit and that have a column whose values
//! can reach [`MIN_OUT_OF_LINE`] bytes; the others never hold a pointer.

use super::row::{max_encoded_bytes, max_value_bytes, ExternalRef, EXTERNAL_REF_BYTES};
use crate::error::{engine_err, SqlError};
use crate::types::{scalar, ColumnType, Value};
use millrace_errcode::{ER_TABLE_CORRUPT, ER_TOO_BIG_ROWSIZE};
use millrace_trx::{Engine, LockMode, Trx, TrxError};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

/// Values shorter than this stay inline: moving one out saves little and
/// costs a chunk record and a read.
pub(crate) const MIN_OUT_OF_LINE: usize = 128;

/// A stored row (key segments and row) up to this long stays inline.
pub(crate) fn inline_limit(page_size: usize) -> usize {
    page_size / 16
}

/// The bytes of a full chunk: a tenth of a page, so that the chunk record
/// (12 key bytes, the record header and system fields) is well under the
/// B+tree's limit of an eighth of a page, for every page size (4..32 KiB).
pub(crate) fn chunk_bytes(page_size: usize) -> usize {
    let c = page_size / 10;
    assert!(
        c + 12 + 64 <= page_size / 8,
        "a chunk record must fit a B+tree record"
    );
    c
}

/// Whether a table with columns of `types` needs a toast table (see the
/// module comment).
pub(crate) fn needs_toast(types: &[ColumnType], page_size: usize) -> bool {
    let longest_row = types
        .iter()
        .map(max_encoded_bytes)
        .fold(3 + types.len().div_ceil(8), usize::saturating_add);
    longest_row > inline_limit(page_size)
        && types
            .iter()
            .any(|ty| max_value_bytes(ty).is_some_and(|m| m >= MIN_OUT_OF_LINE))
}

/// The columns of `row` to move out of line (ascending), given the stored
/// length `len` of the row with the pointers in `external` and everything
/// else inline.
pub(crate) fn choose(
    row: &[Value],
    types: &[ColumnType],
    external: &[(usize, ExternalRef)],
    mut len: usize,
    limit: usize,
) -> Vec<usize> {
    let mut candidates: Vec<(usize, usize)> = row
        .iter()
        .zip(types)
        .enumerate()
        .filter_map(|(c, (v, ty))| match v {
            Value::Bytes(b)
                if max_value_bytes(ty).is_some()
                    && b.len() >= MIN_OUT_OF_LINE
                    && !external.iter().any(|&(e, _)| e == c) =>
            {
                Some((b.len(), c))
            }
            _ => None,
        })
        .collect();
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out = Vec::new();
    for (n, c) in candidates {
        if len <= limit {
            break;
        }
        // Inline: u32 length + bytes; out of line: the pointer.
        len = len - (4 + n) + EXTERNAL_REF_BYTES;
        out.push(c);
    }
    out.sort_unstable();
    out
}

fn chunk_key(id: u64, n: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&id.to_be_bytes());
    k[8..].copy_from_slice(&n.to_be_bytes());
    k
}

fn damaged(r: &ExternalRef, what: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        ER_TABLE_CORRUPT,
        format!("row data damaged: out-of-line value {}: {what}", r.id),
    )
}

/// Hands out the next value id of toast table `toast` from `counter` (the
/// table's `next_value_id`; 0 until loaded).
///
/// The counter starts after the largest key in the toast table in any
/// version (`Engine::last_key`: uncommitted and delete-marked chunks
/// included), and only grows while the server runs, so an id is never
/// handed out twice while any row version or read view can still name it.
/// After a restart an id above the largest stored key may be handed out
/// again (its value was deleted and purged before the restart): that is
/// safe because no read view survives a restart, recovery has rolled back
/// every unfinished transaction before the first statement, and so the
/// only pointers left are those of the latest committed row versions, whose
/// chunks are all still stored (at or below the largest key).
pub(crate) fn next_value_id(
    engine: &Engine,
    counter: &AtomicU64,
    toast: u32,
) -> Result<u64, SqlError> {
    if counter.load(Ordering::SeqCst) == 0 {
        let start = match engine.last_key(toast).map_err(engine_err)? {
            None => 1,
            Some(k) => {
                let id = k
                    .get(..8)
                    .filter(|_| k.len() == 12)
                    .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
                    .ok_or_else(|| {
                        SqlError::new(
                            ER_TABLE_CORRUPT,
                            "row data damaged: a toast table key is not 12 bytes",
                        )
                    })?;
                id.checked_add(1)
                    .ok_or_else(|| SqlError::new(ER_TABLE_CORRUPT, "toast value ids exhausted"))?
            }
        };
        // Another session may have loaded it meanwhile: either start is
        // above every stored key, and ids come from the one counter.
        let _ = counter.compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst);
    }
    let id = counter.fetch_add(1, Ordering::SeqCst);
    if id == 0 || id == u64::MAX {
        return Err(SqlError::new(ER_TABLE_CORRUPT, "toast value ids exhausted"));
    }
    Ok(id)
}

/// Writes `bytes` as value `id` of toast table `toast` in `trx` (one
/// engine insert per chunk); returns the pointer to it.
pub(crate) fn write(
    trx: &Trx,
    toast: u32,
    id: u64,
    bytes: &[u8],
    chunk: usize,
) -> Result<ExternalRef, SqlError> {
    // Column types bound values far below u32::MAX; chosen values are at
    // least MIN_OUT_OF_LINE bytes.
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| SqlError::new(ER_TOO_BIG_ROWSIZE, "value too long to store out of line"))?;
    let r = ExternalRef {
        id,
        len,
        crc: crc32c::crc32c(bytes),
    };
    for (n, part) in bytes.chunks(chunk).enumerate() {
        match trx.insert(toast, &chunk_key(id, n as u32), part) {
            Ok(()) => {}
            // Ids are never reused (above), so a taken key is damage.
            Err(TrxError::Duplicate) => return Err(damaged(&r, "its id is already in use")),
            Err(e) => return Err(engine_err(e)),
        }
    }
    Ok(r)
}

/// Reads value `r` (of a column of type `ty`) from toast table `toast` in
/// `trx`: through the transaction's read view, or, with `lock` (the row was
/// read locked, in its latest version, which may be newer than the view),
/// each chunk's latest version under a shared lock. The chunks of one id
/// are written once, by the transaction that wrote the pointer, so either
/// read gives the value the pointer names.
pub(crate) fn fetch(
    trx: &Trx,
    toast: u32,
    r: &ExternalRef,
    ty: &ColumnType,
    chunk: usize,
    lock: bool,
) -> Result<Value, SqlError> {
    let len = r.len as usize;
    let count = len.div_ceil(chunk);
    let count32 = u32::try_from(count).map_err(|_| damaged(r, "too many chunks"))?;
    // Bounded: the length comes from the row, which may be damaged.
    let mut bytes = Vec::with_capacity(len.min(1 << 20));
    let mut add = |n: usize, part: &[u8]| -> Result<(), SqlError> {
        let want = chunk.min(len - n * chunk);
        if part.len() != want {
            return Err(damaged(
                r,
                format!("chunk {n} has {} bytes, not {want}", part.len()),
            ));
        }
        bytes.extend_from_slice(part);
        Ok(())
    };
    if lock {
        for n in 0..count32 {
            let part = trx
                .get_locked(toast, &chunk_key(r.id, n), LockMode::Shared)
                .map_err(engine_err)?
                .ok_or_else(|| damaged(r, format!("chunk {n} is missing")))?;
            add(n as usize, &part)?;
        }
    } else {
        let (from, to) = (chunk_key(r.id, 0), chunk_key(r.id, count32 - 1));
        let parts = trx
            .scan(toast, Bound::Included(&from), Bound::Included(&to), count)
            .map_err(engine_err)?;
        for (n, (k, part)) in parts.iter().enumerate() {
            if k.as_slice() != chunk_key(r.id, n as u32) {
                return Err(damaged(r, format!("chunk {n} is missing")));
            }
            add(n, part)?;
        }
        if parts.len() != count {
            return Err(damaged(r, format!("chunk {} is missing", parts.len())));
        }
    }
    if crc32c::crc32c(&bytes) != r.crc {
        return Err(damaged(r, "checksum mismatch"));
    }
    let v = Value::Bytes(bytes);
    if scalar(&v, ty).is_none() {
        return Err(damaged(r, "not a value of its column type"));
    }
    Ok(v)
}

/// Deletes value `r` from toast table `toast` in `trx` (delete-marks its
/// chunks; purge removes them once no read view can see them). Stops at the
/// first chunk that is not there, so a damaged length cannot make it loop.
pub(crate) fn delete(trx: &Trx, toast: u32, r: &ExternalRef, chunk: usize) -> Result<(), SqlError> {
    let count = (r.len as usize).div_ceil(chunk);
    for n in 0..count {
        let n = n as u32;
        if !trx.delete(toast, &chunk_key(r.id, n)).map_err(engine_err)? {
            tracing::warn!(
                toast,
                value = r.id,
                chunk = n,
                "deleting an out-of-line value: chunk missing"
            );
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys_sort_by_value_then_chunk() {
        assert_eq!(chunk_key(0x0102, 3), [0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 3]);
        assert!(chunk_key(1, u32::MAX) < chunk_key(2, 0));
        assert!(chunk_key(1, 255) < chunk_key(1, 256));
        for ps in [4096, 8192, 16384, 32768] {
            assert!(chunk_bytes(ps) >= 400);
            assert!(inline_limit(ps) < ps / 8);
        }
    }

    #[test]
    fn the_longest_values_go_first_until_the_row_fits() {
        let b = |n: usize| Value::Bytes(vec![b'x'; n]);
        let types = [
            ColumnType::Int { unsigned: false },
            ColumnType::Text,
            ColumnType::Blob,
            ColumnType::VarChar(1000),
            ColumnType::Text,
        ];
        let row = [Value::Int(1), b(3000), b(5000), b(100), b(3000)];
        // 3 + 1 + 4 + (4+3000) + (4+5000) + (4+100) + (4+3000)
        let len = 11124;
        assert_eq!(choose(&row, &types, &[], len, 1024), vec![1, 2, 4]);
        assert_eq!(choose(&row, &types, &[], len, 7000), vec![2]);
        assert_eq!(choose(&row, &types, &[], 1000, 1024), Vec::<usize>::new());
        // A column already out of line is not chosen again; short ones never.
        let kept = [(
            2,
            ExternalRef {
                id: 1,
                len: 5000,
                crc: 0,
            },
        )];
        assert_eq!(choose(&row, &types, &kept, 6140, 1024), vec![1, 4]);
        assert_eq!(choose(&row, &types, &kept, 6140, 0), vec![1, 4]);
    }
}
