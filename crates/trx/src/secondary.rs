//! Secondary index entries: their keys (the secondary key, then the primary
//! key) and the helpers that the write path and rollback share to make
//! them present or to note which already were.
//!
//! Secondary entries carry no transaction fields: they are inserted or
//! delete-marked as the row changes, and purge removes the delete-marked
//! ones no version in use still has.

use crate::error::TrxError;
use crate::tables::Table;
use millrace_btree::Index;
use millrace_buf::PageStore;

/// Makes a secondary entry present and not delete-marked. Insert, or unmark
/// an existing one; purge may remove a delete-marked entry between the two,
/// so retry until one of them took effect.
pub(crate) fn ensure_entry(
    idx: &Index,
    store: &PageStore,
    entry: &[u8],
    pk: &[u8],
) -> Result<(), TrxError> {
    for _ in 0..1000 {
        match idx.insert(store, entry, pk, 0, 0) {
            Ok(()) => return Ok(()),
            Err(millrace_btree::Error::Duplicate) => {
                if idx.set_deleted(store, entry, false, 0, 0)? {
                    return Ok(());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(TrxError::Corrupt("a secondary entry kept vanishing".into()))
}

/// Secondary entry key: the secondary key, then the primary key (unique).
pub(crate) fn sec_entry(skey: &[u8], pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(skey.len() + pk.len());
    k.extend_from_slice(skey);
    k.extend_from_slice(pk);
    k
}

/// Which secondary entries the new version of row `pk` (`value`) already
/// has, one bit per index: rollback of the change keeps those (it
/// delete-marks them) and removes the others. With `only_changed_from`,
/// indexes whose key the change keeps are skipped.
pub(crate) fn existing_entries(
    store: &PageStore,
    t: &Table,
    value: &[u8],
    pk: &[u8],
    only_changed_from: Option<&[u8]>,
) -> Result<u64, TrxError> {
    let mut bits = 0;
    for (i, (idx, sd)) in t.secondaries.iter().enumerate() {
        let k = sd.key_of(value);
        if only_changed_from.is_some_and(|old| sd.key_of(old) == k) {
            continue;
        }
        if idx.get(store, &sec_entry(&k, pk))?.is_some() {
            bits |= 1 << i;
        }
    }
    Ok(bits)
}

/// Makes the secondary entries of row `pk` with `value` present; with
/// `only_changed_from`, only those whose key the change altered.
pub(crate) fn insert_entries(
    store: &PageStore,
    t: &Table,
    value: &[u8],
    pk: &[u8],
    only_changed_from: Option<&[u8]>,
) -> Result<(), TrxError> {
    for (idx, sd) in &t.secondaries {
        let k = sd.key_of(value);
        if only_changed_from.is_some_and(|old| sd.key_of(old) == k) {
            continue;
        }
        ensure_entry(idx, store, &sec_entry(&k, pk), pk)?;
    }
    Ok(())
}
