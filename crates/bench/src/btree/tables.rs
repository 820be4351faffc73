//! The two tables the mix runs on: the engine's (a clustered and a
//! secondary B+tree index in one tablespace of a page store) and the
//! baseline's (two BTreeMaps, each under a mutex, in memory).

use super::workload::{row_key, Table, ROW_BYTES};
use millrace_btree::{CheckReport, Error as TreeError, Index};
use millrace_buf::{space, PageStore};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The tablespace of the table's two indexes.
pub(super) const SPACE: u32 = 1;

pub(super) struct EngineTable<'s> {
    pub(super) store: &'s PageStore,
    pub(super) clustered: Index,
    pub(super) secondary: Index,
}

impl<'s> EngineTable<'s> {
    pub(super) fn create(store: &'s PageStore) -> Result<Self, String> {
        let mut mtr = store
            .mtr()
            .map_err(|e| format!("creating space {SPACE}: {e}"))?;
        // Draw the id from the system space's counter, so the store-wide
        // check (`millrace check`) knows the space exists.
        let id =
            space::next_space_id(&mut mtr).map_err(|e| format!("creating space {SPACE}: {e}"))?;
        if id != SPACE {
            return Err(format!(
                "a fresh store handed out space id {id}, expected {SPACE}"
            ));
        }
        space::create_space(&mut mtr, SPACE).map_err(|e| format!("creating space {SPACE}: {e}"))?;
        mtr.commit()
            .map_err(|e| format!("creating space {SPACE}: {e}"))?;
        let clustered = Index::create(store, SPACE, true)
            .map_err(|e| format!("creating the clustered index: {e}"))?;
        let secondary = Index::create(store, SPACE, false)
            .map_err(|e| format!("creating the secondary index: {e}"))?;
        let max = clustered.max_record_bytes(store);
        if row_key(0).len() + ROW_BYTES > max {
            return Err(format!(
                "a row of {} bytes exceeds the largest record of a {} byte page, {max}",
                row_key(0).len() + ROW_BYTES,
                store.pool().page_size()
            ));
        }
        Ok(Self {
            store,
            clustered,
            secondary,
        })
    }

    /// Checks both indexes (no thread may be running operations) and that
    /// the clustered index holds every row.
    pub(super) fn check(&self, rows: u64, races: u64) -> Result<(), String> {
        let mut reports: Vec<CheckReport> = Vec::new();
        for (name, index) in [
            ("clustered", &self.clustered),
            ("secondary", &self.secondary),
        ] {
            let r = index
                .check(self.store)
                .map_err(|e| format!("the check of the {name} index failed: {e}"))?;
            eprintln!(
                "check {name}: {} records ({} delete-marked), {} pages ({} leaves), {} levels, \
                 fill_pct {}",
                r.records, r.deleted_records, r.pages, r.leaf_pages, r.levels, r.fill_pct
            );
            reports.push(r);
        }
        let (clustered, secondary) = (&reports[0], &reports[1]);
        if clustered.records != rows {
            return Err(format!(
                "the clustered index holds {} records, but {rows} rows were loaded or inserted",
                clustered.records
            ));
        }
        if secondary.records != rows {
            eprintln!(
                "note: {} secondary entries for {rows} rows: concurrent updates of one row \
                 (no row locks yet; {races} races seen) leave stale or missing entries",
                secondary.records
            );
        }
        Ok(())
    }

    /// (pages, free pages) of the system space and the table's space.
    pub(super) fn space_pages(&self) -> Result<(u64, u64), String> {
        let err = |e: millrace_buf::Error| format!("reading the space sizes: {e}");
        let mut mtr = self.store.mtr().map_err(err)?;
        let (mut pages, mut free) = (0, 0);
        for s in [space::SYSTEM_SPACE, SPACE] {
            let (size, n_free) = space::space_size(&mut mtr, s).map_err(err)?;
            pages += u64::from(size);
            free += u64::from(n_free);
        }
        mtr.commit().map_err(err)?;
        Ok((pages, free))
    }
}

impl Table for EngineTable<'_> {
    fn get(&self, id: u64) -> Result<Option<Vec<u8>>, String> {
        self.clustered
            .get(self.store, &row_key(id))
            .map(|row| row.map(|r| r.value))
            .map_err(|e| format!("reading row {id}: {e}"))
    }

    fn insert_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String> {
        self.clustered
            .insert(self.store, &row_key(id), row, trx_id, roll_ptr)
            .map_err(|e| format!("inserting row {id}: {e}"))
    }

    fn update_row(&self, id: u64, row: &[u8], trx_id: u64, roll_ptr: u64) -> Result<(), String> {
        match self
            .clustered
            .update(self.store, &row_key(id), row, trx_id, roll_ptr)
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("updating row {id}: it is missing")),
            Err(e) => Err(format!("updating row {id}: {e}")),
        }
    }

    fn delete_entry(&self, key: &[u8]) -> Result<bool, String> {
        self.secondary
            .delete(self.store, key)
            .map_err(|e| format!("deleting a secondary entry: {e}"))
    }

    fn insert_entry(&self, key: &[u8]) -> Result<bool, String> {
        match self.secondary.insert(self.store, key, &[], 0, 0) {
            Ok(()) => Ok(true),
            Err(TreeError::Duplicate) => Ok(false),
            Err(e) => Err(format!("inserting a secondary entry: {e}")),
        }
    }

    fn commit(&self) -> Result<(), String> {
        let log = self.store.log();
        log.wait_durable(log.current_lsn())
            .map_err(|e| format!("commit: {e}"))
    }
}

/// The baseline: the same two indexes as ordered maps in memory, each under
/// one mutex, with no durability.
#[derive(Default)]
pub(super) struct MapTable {
    pub(super) clustered: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    pub(super) secondary: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Table for MapTable {
    fn get(&self, id: u64) -> Result<Option<Vec<u8>>, String> {
        let map = self.clustered.lock().expect("poisoned");
        Ok(map.get(row_key(id).as_slice()).cloned())
    }

    fn insert_row(&self, id: u64, row: &[u8], _: u64, _: u64) -> Result<(), String> {
        let mut map = self.clustered.lock().expect("poisoned");
        match map.insert(row_key(id).to_vec(), row.to_vec()) {
            None => Ok(()),
            Some(_) => Err(format!("inserting row {id}: it exists already")),
        }
    }

    fn update_row(&self, id: u64, row: &[u8], _: u64, _: u64) -> Result<(), String> {
        let mut map = self.clustered.lock().expect("poisoned");
        match map.get_mut(row_key(id).as_slice()) {
            Some(value) => {
                value.clear();
                value.extend_from_slice(row);
                Ok(())
            }
            None => Err(format!("updating row {id}: it is missing")),
        }
    }

    fn delete_entry(&self, key: &[u8]) -> Result<bool, String> {
        let mut map = self.secondary.lock().expect("poisoned");
        Ok(map.remove(key).is_some())
    }

    fn insert_entry(&self, key: &[u8]) -> Result<bool, String> {
        let mut map = self.secondary.lock().expect("poisoned");
        if map.contains_key(key) {
            return Ok(false);
        }
        map.insert(key.to_vec(), Vec::new());
        Ok(true)
    }

    fn commit(&self) -> Result<(), String> {
        Ok(())
    }
}
