//! The catalog: databases, tables, columns, indexes and AUTO_INCREMENT
//! counters. It lives in the engine, in one engine table (the first table of
//! a data directory), and changes inside engine transactions, so DDL that
//! returned survives a crash and DDL cut short leaves either the old or the
//! new definition, never a mix.
//!
//! Catalog rows (key → value):
//! - `M` → `millrace-catalog` ++ version (u8): the marker that says this
//!   engine table is the catalog.
//! - `D\0<db>` → version (u8): a database.
//! - `T\0<db>\0<table>` → a [`TableSchema`], encoded by `TableSchema::encode`.
//!
//! A table's engine table (and its toast table, which holds the values
//! stored out of line, see `toast.rs`) is created (durably) before its
//! catalog row is committed; a crash between the two leaves engine tables no
//! catalog row names, which `Catalog::open` drops. DROP TABLE commits the
//! deletion of the catalog row first and drops the engine tables after.

use crate::types::{ColumnType, Value};
use crate::{encode_key, SqlError};
use millrace_errcode::{ER_GET_ERRNO, ER_LOCK_WAIT_TIMEOUT, ER_TABLE_CORRUPT};
use millrace_io::bytes::ByteReader;
use millrace_trx::{Engine, Isolation, KeyPart, Trx, TrxError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

const MARKER_KEY: &[u8] = b"M";
const MARKER: &[u8] = b"millrace-catalog";
const CATALOG_VERSION: u8 = 1;
/// Version 2 added the toast table id; version 1 schemas (tables made
/// before it, without a toast table) still decode.
const SCHEMA_VERSION: u8 = 2;

/// A column of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSchema {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    pub auto_increment: bool,
    /// The DEFAULT, coerced to the column's type; `None`: no DEFAULT clause.
    pub default: Option<Value>,
}

/// A secondary index: its columns (positions in the table), in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSchema {
    pub name: String,
    pub columns: Vec<usize>,
    pub unique: bool,
}

/// A table as the SQL layer sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    pub db: String,
    pub name: String,
    /// The engine table holding the rows.
    pub engine_table: u32,
    /// The engine table holding the chunks of values stored out of line
    /// (`toast.rs`); `None` for a table that cannot hold a long value, and
    /// for tables made before schema version 2 (their rows stay inline).
    /// A CREATE INDEX rebuild keeps it: the new rows point to the same
    /// values.
    pub toast_table: Option<u32>,
    pub columns: Vec<ColumnSchema>,
    /// Primary key columns; empty: a hidden 8-byte row id is the key.
    pub primary_key: Vec<usize>,
    /// Secondary indexes; index `i` is the engine table's secondary `i` and
    /// its key is segment `i` of the stored row.
    pub indexes: Vec<IndexSchema>,
}

impl TableSchema {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    pub fn types(&self) -> Vec<ColumnType> {
        self.columns.iter().map(|c| c.ty).collect()
    }

    /// The engine's secondary key specs: index `i` is segment `i`.
    pub fn engine_keys(&self) -> Vec<Vec<KeyPart>> {
        (0..self.indexes.len())
            .map(|i| vec![KeyPart::Segment(i as u16)])
            .collect()
    }

    /// The AUTO_INCREMENT column, if any.
    pub fn auto_increment_column(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.auto_increment)
    }

    /// The key of index `columns` for `row` (coerced values).
    pub fn key_of(&self, columns: &[usize], row: &[Value]) -> Vec<u8> {
        let vals: Vec<(Value, &ColumnType)> = columns
            .iter()
            .map(|&c| (row[c].clone(), &self.columns[c].ty))
            .collect();
        let mut out = Vec::new();
        encode_key(&vals, &mut out);
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![SCHEMA_VERSION];
        b.extend_from_slice(&self.engine_table.to_le_bytes());
        // Engine table ids are tablespace ids, never 0 (the system space).
        assert_ne!(self.toast_table, Some(0), "toast table id 0");
        b.extend_from_slice(&self.toast_table.unwrap_or(0).to_le_bytes());
        put_str(&mut b, &self.db);
        put_str(&mut b, &self.name);
        b.extend_from_slice(&(self.columns.len() as u16).to_le_bytes());
        for c in &self.columns {
            put_str(&mut b, &c.name);
            put_type(&mut b, &c.ty);
            let flags = u8::from(c.nullable)
                | u8::from(c.auto_increment) << 1
                | u8::from(c.default.is_some()) << 2;
            b.push(flags);
            if let Some(d) = &c.default {
                let mut row = Vec::new();
                crate::encode_row(std::slice::from_ref(d), &[c.ty], &mut row)
                    .expect("defaults are coerced when the table is created");
                b.extend_from_slice(&(row.len() as u32).to_le_bytes());
                b.extend_from_slice(&row);
            }
        }
        put_cols(&mut b, &self.primary_key);
        b.push(self.indexes.len() as u8);
        for i in &self.indexes {
            put_str(&mut b, &i.name);
            b.push(u8::from(i.unique));
            put_cols(&mut b, &i.columns);
        }
        b
    }

    /// Decodes a schema; hostile input gives an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<TableSchema, String> {
        let mut r = Reader(ByteReader::new(bytes));
        let version = r.u8()?;
        if version != 1 && version != SCHEMA_VERSION {
            return Err(format!("table schema version {version} is not supported"));
        }
        let engine_table = r.u32()?;
        let toast_table = match version {
            1 => None,
            _ => Some(r.u32()?).filter(|&t| t != 0),
        };
        if toast_table == Some(engine_table) {
            return Err("the toast table is the table itself".into());
        }
        let db = r.str()?;
        let name = r.str()?;
        let n = r.u16()? as usize;
        let mut columns = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            let cname = r.str()?;
            let ty = r.ty()?;
            let flags = r.u8()?;
            let default = if flags & 4 != 0 {
                let len = r.u32()? as usize;
                let row = r.take(len)?;
                let mut v = crate::decode_row(row, &[ty]).map_err(|e| e.to_string())?;
                v.pop()
            } else {
                None
            };
            columns.push(ColumnSchema {
                name: cname,
                ty,
                nullable: flags & 1 != 0,
                auto_increment: flags & 2 != 0,
                default,
            });
        }
        let primary_key = r.cols(n)?;
        let ni = r.u8()? as usize;
        let mut indexes = Vec::with_capacity(ni);
        for _ in 0..ni {
            let iname = r.str()?;
            let unique = r.u8()? != 0;
            let cols = r.cols(n)?;
            indexes.push(IndexSchema {
                name: iname,
                columns: cols,
                unique,
            });
        }
        if !r.is_empty() {
            return Err("trailing bytes after a table schema".into());
        }
        Ok(TableSchema {
            db,
            name,
            engine_table,
            toast_table,
            columns,
            primary_key,
            indexes,
        })
    }
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u16).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

fn put_cols(b: &mut Vec<u8>, cols: &[usize]) {
    b.push(cols.len() as u8);
    for &c in cols {
        b.extend_from_slice(&(c as u16).to_le_bytes());
    }
}

fn put_type(b: &mut Vec<u8>, ty: &ColumnType) {
    match *ty {
        ColumnType::TinyInt { unsigned } => b.extend_from_slice(&[1, u8::from(unsigned)]),
        ColumnType::SmallInt { unsigned } => b.extend_from_slice(&[2, u8::from(unsigned)]),
        ColumnType::Int { unsigned } => b.extend_from_slice(&[3, u8::from(unsigned)]),
        ColumnType::BigInt { unsigned } => b.extend_from_slice(&[4, u8::from(unsigned)]),
        ColumnType::Double => b.push(5),
        ColumnType::Decimal { precision, scale } => b.extend_from_slice(&[6, precision, scale]),
        ColumnType::Char(n) => {
            b.push(7);
            b.extend_from_slice(&n.to_le_bytes());
        }
        ColumnType::VarChar(n) => {
            b.push(8);
            b.extend_from_slice(&n.to_le_bytes());
        }
        ColumnType::Text => b.push(9),
        ColumnType::Blob => b.push(10),
        ColumnType::DateTime => b.push(11),
        ColumnType::Timestamp => b.push(12),
    }
}

/// The schema decoder's reads: the bounded byte reader plus the schema's
/// own compound fields.
struct Reader<'a>(ByteReader<'a>);

impl<'a> std::ops::Deref for Reader<'a> {
    type Target = ByteReader<'a>;
    fn deref(&self) -> &ByteReader<'a> {
        &self.0
    }
}

impl std::ops::DerefMut for Reader<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Reader<'_> {
    fn str(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a name is not UTF-8".into())
    }
    fn cols(&mut self, ncols: usize) -> Result<Vec<usize>, String> {
        let n = self.u8()? as usize;
        (0..n)
            .map(|_| {
                let c = self.u16()? as usize;
                if c >= ncols {
                    return Err(format!("index column {c} of {ncols}"));
                }
                Ok(c)
            })
            .collect()
    }
    fn ty(&mut self) -> Result<ColumnType, String> {
        let tag = self.u8()?;
        let ty = match tag {
            1..=4 => {
                let unsigned = self.u8()? != 0;
                match tag {
                    1 => ColumnType::TinyInt { unsigned },
                    2 => ColumnType::SmallInt { unsigned },
                    3 => ColumnType::Int { unsigned },
                    _ => ColumnType::BigInt { unsigned },
                }
            }
            5 => ColumnType::Double,
            6 => ColumnType::Decimal {
                precision: self.u8()?,
                scale: self.u8()?,
            },
            7 => ColumnType::Char(self.u32()?),
            8 => ColumnType::VarChar(self.u32()?),
            9 => ColumnType::Text,
            10 => ColumnType::Blob,
            11 => ColumnType::DateTime,
            12 => ColumnType::Timestamp,
            t => return Err(format!("unknown column type tag {t}")),
        };
        ty.validate().map_err(|e| e.to_string())?;
        Ok(ty)
    }
}

/// A table's metadata lock: statements that use the table hold it shared
/// until their transaction ends; DDL takes it exclusively, so it never
/// rebuilds or drops a table under a transaction that still uses it.
#[derive(Debug, Default)]
pub struct Mdl {
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl Mdl {
    /// Takes the lock shared; waits for an exclusive holder.
    pub fn shared(&self, timeout: Duration) -> Result<(), SqlError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().expect("poisoned");
        while st.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(mdl_timeout());
            }
            st = self.cv.wait_timeout(st, left).expect("poisoned").0;
        }
        st.0 += 1;
        Ok(())
    }

    pub fn release_shared(&self) {
        let mut st = self.state.lock().expect("poisoned");
        assert!(st.0 > 0, "metadata lock released more often than taken");
        st.0 -= 1;
        if st.0 == 0 {
            self.cv.notify_all();
        }
    }

    /// Takes the lock exclusively: waits for every shared holder to leave.
    pub fn exclusive(&self, timeout: Duration) -> Result<(), SqlError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().expect("poisoned");
        while st.1 || st.0 > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(mdl_timeout());
            }
            st = self.cv.wait_timeout(st, left).expect("poisoned").0;
        }
        st.1 = true;
        Ok(())
    }

    pub fn release_exclusive(&self) {
        let mut st = self.state.lock().expect("poisoned");
        assert!(st.1, "exclusive metadata lock not held");
        st.1 = false;
        self.cv.notify_all();
    }
}

fn mdl_timeout() -> SqlError {
    SqlError::new(
        ER_LOCK_WAIT_TIMEOUT,
        "Lock wait timeout exceeded; try restarting transaction (metadata lock)",
    )
}

/// A table known to the server: its schema and run-time state.
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

fn engine_err(e: TrxError) -> SqlError {
    SqlError::new(e.mysql_code(), e.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        TableSchema {
            db: "sbtest".into(),
            name: "sbtest1".into(),
            engine_table: 7,
            toast_table: Some(9),
            columns: vec![
                ColumnSchema {
                    name: "id".into(),
                    ty: ColumnType::Int { unsigned: false },
                    nullable: false,
                    auto_increment: true,
                    default: None,
                },
                ColumnSchema {
                    name: "c".into(),
                    ty: ColumnType::Char(120),
                    nullable: false,
                    auto_increment: false,
                    default: Some(Value::Bytes(b"x".to_vec())),
                },
                ColumnSchema {
                    name: "d".into(),
                    ty: ColumnType::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                    nullable: true,
                    auto_increment: false,
                    default: None,
                },
            ],
            primary_key: vec![0],
            indexes: vec![IndexSchema {
                name: "k_1".into(),
                columns: vec![1, 2],
                unique: false,
            }],
        }
    }

    #[test]
    fn schema_round_trip() {
        let s = schema();
        assert_eq!(TableSchema::decode(&s.encode()).unwrap(), s);
        let none = TableSchema {
            toast_table: None,
            ..schema()
        };
        assert_eq!(TableSchema::decode(&none.encode()).unwrap(), none);
    }

    #[test]
    fn version_1_schemas_decode_without_a_toast_table() {
        // Version 1 is version 2 without the toast table id.
        let v2 = TableSchema {
            toast_table: None,
            ..schema()
        }
        .encode();
        assert_eq!(&v2[5..9], &[0, 0, 0, 0]);
        let mut v1 = vec![1];
        v1.extend_from_slice(&v2[1..5]);
        v1.extend_from_slice(&v2[9..]);
        let s = TableSchema::decode(&v1).unwrap();
        assert_eq!(s.toast_table, None);
        assert_eq!(s.columns, schema().columns);
        assert!(TableSchema::decode(&[3]).is_err());
        // A toast table that is the table itself is damage.
        let mut same = schema().encode();
        same[5..9].copy_from_slice(&7u32.to_le_bytes());
        assert!(TableSchema::decode(&same).is_err());
    }

    #[test]
    fn hostile_schema_bytes_give_errors() {
        let good = schema().encode();
        for cut in 0..good.len() {
            assert!(TableSchema::decode(&good[..cut]).is_err(), "cut {cut}");
        }
        let mut rng = 0x9e3779b97f4a7c15u64;
        for _ in 0..5000 {
            let mut b = good.clone();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let at = (rng % b.len() as u64) as usize;
            b[at] ^= (rng >> 32) as u8 | 1;
            let _ = TableSchema::decode(&b);
        }
    }
}
