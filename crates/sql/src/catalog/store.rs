//! The catalog in memory and in its engine table: databases and tables
//! (with their run-time state), loaded at open and changed by DDL in engine
//! transactions.

use super::mdl::Mdl;
use super::schema::TableSchema;
use crate::error::{engine_err, SqlError};
use millrace_errcode::{ER_GET_ERRNO, ER_TABLE_CORRUPT};
use millrace_trx::{Engine, Isolation, Trx, TrxError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

const MARKER_KEY: &[u8] = b"M";
const MARKER: &[u8] = b"millrace-catalog";
const CATALOG_VERSION: u8 = 1;

#[derive(Debug)]
pub struct TableEntry {
    pub schema: Arc<TableSchema>,
    /// The next AUTO_INCREMENT value (or hidden row id); 0 until loaded.
    pub next_id: AtomicU64,
    /// The next id of a value stored out of line in the toast table; 0
    /// until loaded (see `toast::next_value_id`).
    pub next_value_id: AtomicU64,
    pub mdl: Mdl,
}

/// The catalog in memory, loaded from its engine table at open and changed
/// only by DDL (which holds `ddl`).
pub struct Catalog {
    engine: Arc<Engine>,
    table_id: u32,
    databases: RwLock<BTreeSet<String>>,
    tables: RwLock<BTreeMap<(String, String), Arc<TableEntry>>>,
    /// Bumped by every DDL: cached plans of an older version are re-planned.
    version: AtomicU64,
    /// Serialises DDL statements.
    pub ddl: Mutex<()>,
}

fn table_key(db: &str, name: &str) -> Vec<u8> {
    let mut k = b"T\0".to_vec();
    k.extend_from_slice(db.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

fn db_key(db: &str) -> Vec<u8> {
    let mut k = b"D\0".to_vec();
    k.extend_from_slice(db.as_bytes());
    k
}

impl Catalog {
    /// Opens (or, in an empty data directory, creates) the catalog, and drops
    /// engine tables left by DDL that a crash cut short.
    pub fn open(engine: Arc<Engine>) -> Result<Catalog, SqlError> {
        let ids = engine.table_ids();
        let table_id = match ids.first() {
            None => {
                let id = engine.create_table(&[]).map_err(engine_err)?;
                let mut marker = MARKER.to_vec();
                marker.push(CATALOG_VERSION);
                let t = engine.begin(Isolation::RepeatableRead);
                t.insert(id, MARKER_KEY, &marker).map_err(engine_err)?;
                t.insert(id, &db_key("test"), &[CATALOG_VERSION])
                    .map_err(engine_err)?;
                t.commit().map_err(engine_err)?;
                id
            }
            Some(&id) => id,
        };
        let t = engine.begin(Isolation::RepeatableRead);
        let marker = t.get(table_id, MARKER_KEY).map_err(engine_err)?;
        match marker {
            Some(m) if m.len() == MARKER.len() + 1 && m.starts_with(MARKER) => {
                if m[MARKER.len()] != CATALOG_VERSION {
                    return Err(SqlError::new(
                        ER_GET_ERRNO,
                        format!("catalog version {} is not supported", m[MARKER.len()]),
                    ));
                }
            }
            _ => {
                return Err(SqlError::new(
                    ER_GET_ERRNO,
                    "this data directory holds engine tables but no SQL catalog \
                     (was it made by `millrace bench`?)",
                ))
            }
        }
        let rows = t
            .scan(
                table_id,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                usize::MAX,
            )
            .map_err(engine_err)?;
        t.commit().map_err(engine_err)?;
        let mut databases = BTreeSet::new();
        let mut tables = BTreeMap::new();
        for (k, v) in rows {
            if let Some(db) = k.strip_prefix(b"D\0") {
                databases.insert(String::from_utf8_lossy(db).into_owned());
            } else if k.starts_with(b"T\0") {
                let s = TableSchema::decode(&v).map_err(|e| {
                    SqlError::new(ER_TABLE_CORRUPT, format!("catalog row damaged: {e}"))
                })?;
                tables.insert(
                    (s.db.clone(), s.name.clone()),
                    Arc::new(TableEntry {
                        schema: Arc::new(s),
                        next_id: AtomicU64::new(0),
                        next_value_id: AtomicU64::new(0),
                        mdl: Mdl::default(),
                    }),
                );
            }
        }
        // A toast table is named by its table's catalog row too.
        let used: std::collections::HashSet<u32> = tables
            .values()
            .flat_map(|t: &Arc<TableEntry>| {
                std::iter::once(t.schema.engine_table).chain(t.schema.toast_table)
            })
            .collect();
        for id in ids {
            if id != table_id && !used.contains(&id) {
                tracing::info!(
                    table = id,
                    "dropping an engine table left by interrupted DDL"
                );
                engine.drop_table(id).map_err(engine_err)?;
            }
        }
        Ok(Catalog {
            engine,
            table_id,
            databases: RwLock::new(databases),
            tables: RwLock::new(tables),
            version: AtomicU64::new(1),
            ddl: Mutex::new(()),
        })
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn databases(&self) -> Vec<String> {
        self.databases
            .read()
            .expect("poisoned")
            .iter()
            .cloned()
            .collect()
    }

    pub fn has_database(&self, db: &str) -> bool {
        self.databases.read().expect("poisoned").contains(db)
    }

    pub fn tables_of(&self, db: &str) -> Vec<Arc<TableEntry>> {
        self.tables
            .read()
            .expect("poisoned")
            .iter()
            .filter(|((d, _), _)| d == db)
            .map(|(_, t)| t.clone())
            .collect()
    }

    pub fn all_tables(&self) -> Vec<Arc<TableEntry>> {
        self.tables
            .read()
            .expect("poisoned")
            .values()
            .cloned()
            .collect()
    }

    pub fn table(&self, db: &str, name: &str) -> Option<Arc<TableEntry>> {
        self.tables
            .read()
            .expect("poisoned")
            .get(&(db.to_string(), name.to_string()))
            .cloned()
    }

    /// Runs `f` in a catalog transaction and commits it.
    fn change(&self, f: impl FnOnce(&Trx) -> Result<(), TrxError>) -> Result<(), SqlError> {
        let t = self.engine.begin(Isolation::RepeatableRead);
        match f(&t) {
            Ok(()) => t.commit().map_err(engine_err),
            Err(e) => {
                let _ = t.rollback();
                Err(engine_err(e))
            }
        }
    }

    pub fn create_database(&self, db: &str) -> Result<(), SqlError> {
        self.change(|t| t.insert(self.table_id, &db_key(db), &[CATALOG_VERSION]))?;
        self.databases
            .write()
            .expect("poisoned")
            .insert(db.to_string());
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Drops a database and its tables (the caller holds `ddl` and the
    /// tables' exclusive metadata locks).
    pub fn drop_database(&self, db: &str) -> Result<(), SqlError> {
        let tables = self.tables_of(db);
        self.change(|t| {
            for e in &tables {
                t.delete(self.table_id, &table_key(db, &e.schema.name))?;
            }
            t.delete(self.table_id, &db_key(db)).map(|_| ())
        })?;
        {
            let mut map = self.tables.write().expect("poisoned");
            for e in &tables {
                map.remove(&(db.to_string(), e.schema.name.clone()));
            }
        }
        self.databases.write().expect("poisoned").remove(db);
        self.version.fetch_add(1, Ordering::AcqRel);
        for e in &tables {
            self.drop_engine_tables(&e.schema)?;
        }
        Ok(())
    }

    /// Drops a table's engine table and its toast table (after its catalog
    /// row is gone, or was never committed).
    fn drop_engine_tables(&self, s: &TableSchema) -> Result<(), SqlError> {
        self.engine.drop_table(s.engine_table).map_err(engine_err)?;
        if let Some(toast) = s.toast_table {
            self.engine.drop_table(toast).map_err(engine_err)?;
        }
        Ok(())
    }

    /// Creates the engine table for `schema`, and with `with_toast` its toast
    /// table (`engine_table` and `toast_table` are set here), and commits its
    /// catalog row. A crash before the commit leaves engine tables that no
    /// catalog row names: `open` drops them.
    pub fn create_table(
        &self,
        mut schema: TableSchema,
        with_toast: bool,
    ) -> Result<Arc<TableEntry>, SqlError> {
        schema.engine_table = self
            .engine
            .create_table(&schema.engine_keys())
            .map_err(engine_err)?;
        schema.toast_table = None;
        if with_toast {
            match self.engine.create_table(&[]) {
                Ok(id) => schema.toast_table = Some(id),
                Err(e) => {
                    let _ = self.engine.drop_table(schema.engine_table);
                    return Err(engine_err(e));
                }
            }
        }
        let key = table_key(&schema.db, &schema.name);
        let bytes = schema.encode();
        if let Err(e) = self.change(|t| t.insert(self.table_id, &key, &bytes)) {
            let _ = self.drop_engine_tables(&schema);
            return Err(e);
        }
        let entry = Arc::new(TableEntry {
            schema: Arc::new(schema),
            next_id: AtomicU64::new(0),
            next_value_id: AtomicU64::new(0),
            mdl: Mdl::default(),
        });
        self.tables.write().expect("poisoned").insert(
            (entry.schema.db.clone(), entry.schema.name.clone()),
            entry.clone(),
        );
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(entry)
    }

    /// Replaces a table's definition by `new` (same name, rows already
    /// copied to `new.engine_table`): one catalog transaction, then the old
    /// engine table is dropped. The toast table is not: the new rows point
    /// to the same out-of-line values, so `new` keeps the old toast table
    /// (or, when the old table had none, may bring a new one).
    pub fn replace_table(
        &self,
        old: &TableEntry,
        new: TableSchema,
    ) -> Result<Arc<TableEntry>, SqlError> {
        assert!(
            old.schema.toast_table.is_none() || old.schema.toast_table == new.toast_table,
            "a rebuild must keep the toast table its rows point into"
        );
        let key = table_key(&new.db, &new.name);
        let bytes = new.encode();
        self.change(|t| t.update(self.table_id, &key, &bytes).map(|_| ()))?;
        let entry = Arc::new(TableEntry {
            schema: Arc::new(new),
            next_id: AtomicU64::new(old.next_id.load(Ordering::SeqCst)),
            // Same toast table, same counter: ids handed out stay unique.
            next_value_id: AtomicU64::new(old.next_value_id.load(Ordering::SeqCst)),
            mdl: Mdl::default(),
        });
        self.tables.write().expect("poisoned").insert(
            (entry.schema.db.clone(), entry.schema.name.clone()),
            entry.clone(),
        );
        self.version.fetch_add(1, Ordering::AcqRel);
        self.engine
            .drop_table(old.schema.engine_table)
            .map_err(engine_err)?;
        Ok(entry)
    }

    pub fn drop_table(&self, entry: &TableEntry) -> Result<(), SqlError> {
        let s = &entry.schema;
        self.change(|t| {
            t.delete(self.table_id, &table_key(&s.db, &s.name))
                .map(|_| ())
        })?;
        self.tables
            .write()
            .expect("poisoned")
            .remove(&(s.db.clone(), s.name.clone()));
        self.version.fetch_add(1, Ordering::AcqRel);
        self.drop_engine_tables(s)
    }
}
