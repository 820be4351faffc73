//! A client session: its database, variables, transaction, prepared
//! statements; and the execution of statements against the engine.
//!
//! Transactions: with autocommit on, each statement runs in its own engine
//! transaction, committed at its end (or rolled back on an error); BEGIN /
//! START TRANSACTION opens an explicit one (committing an open one first, as
//! MySQL does). A failed statement inside a transaction is undone alone
//! (statement savepoint); a deadlock rolls the whole transaction back.
//! Tables used by a transaction hold a shared metadata lock until it ends.

use crate::catalog::{Catalog, ColumnSchema, IndexSchema, TableEntry, TableSchema};
use crate::expr::{compare_values, truth, Ctx, Expr};
use crate::plan::{
    self, no_table, object_name, unsupported, Access, AggKind, OutColumn, Plan, PlanKind, Planner,
    ResultKind, SelectPlan, SessionInfo, Source,
};
use crate::toast;
use crate::types::{ColumnType, DateTime, Value};
use crate::{
    decode_row_external, encode_key, encode_row_external, ExternalRef, ExternalRefs, SqlError,
};
use millrace_errcode::{
    ER_AUTOINC_READ_FAILED, ER_BAD_DB_ERROR, ER_BAD_NULL_ERROR, ER_BAD_TABLE_ERROR,
    ER_DATA_OUT_OF_RANGE, ER_DB_CREATE_EXISTS, ER_DB_DROP_EXISTS, ER_DUP_ENTRY, ER_DUP_FIELDNAME,
    ER_DUP_KEYNAME, ER_EMPTY_QUERY, ER_GLOBAL_VARIABLE, ER_INCORRECT_GLOBAL_LOCAL_VAR,
    ER_INVALID_DEFAULT, ER_KEY_COLUMN_DOES_NOT_EXITS, ER_LOCK_DEADLOCK, ER_MULTIPLE_PRI_KEY,
    ER_NEED_REPREPARE, ER_NO_DB_ERROR, ER_NO_DEFAULT_FOR_FIELD, ER_QUERY_INTERRUPTED,
    ER_TABLE_CORRUPT, ER_TABLE_DEF_CHANGED, ER_TABLE_EXISTS_ERROR, ER_TABLE_MUST_HAVE_COLUMNS,
    ER_TOO_LONG_KEY, ER_TOO_MANY_KEYS, ER_UNKNOWN_STMT_HANDLER, ER_UNKNOWN_SYSTEM_VARIABLE,
    ER_UNSUPPORTED_PS, ER_WRONG_ARGUMENTS, ER_WRONG_AUTO_KEY, ER_WRONG_FIELD_SPEC,
    ER_WRONG_TABLE_NAME, ER_WRONG_TYPE_FOR_VAR, ER_WRONG_VALUE_FOR_VAR,
};
use millrace_trx::{
    encode_segments, split_segments, Engine, Isolation, LockMode, RuntimeSettings, Trx, TrxError,
};
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The version the server announces in the handshake and in `@@version`.
/// Clients and connectors gate features on the leading MySQL version.
pub const SERVER_VERSION: &str = "8.0.36-millrace";
/// `@@version_comment`: what the mariadb client prints after the version.
pub const VERSION_COMMENT: &str = "millrace";

/// Cached plans of text statements, by (database, shape).
const PLAN_CACHE_ENTRIES: usize = 4096;
/// Rows copied per transaction by CREATE INDEX's table rebuild.
const COPY_BATCH_ROWS: usize = 1000;
/// Key bytes appended to a key prefix to make an inclusive upper bound
/// over every key that starts with it (no key encoding has so many 0xFF).
const HIGH_SUFFIX: [u8; 24] = [0xFF; 24];

/// A decoded row: its values, with NULL in place of each value stored out
/// of line that was not fetched, and the pointers to every value stored out
/// of line (column, pointer; ascending columns; usually empty).
type Decoded = (Vec<Value>, ExternalRefs);
/// A decoded row with its primary key.
type KeyedRow = (Vec<u8>, Vec<Value>, ExternalRefs);
/// A stored row: primary key and value bytes.
type KeyValue = (Vec<u8>, Vec<u8>);

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Ok {
        affected_rows: u64,
        last_insert_id: u64,
    },
    Rows {
        columns: Vec<OutColumn>,
        rows: Vec<Vec<Value>>,
    },
}

impl Output {
    fn ok() -> Output {
        Output::Ok {
            affected_rows: 0,
            last_insert_id: 0,
        }
    }

    fn affected(n: u64) -> Output {
        Output::Ok {
            affected_rows: n,
            last_insert_id: 0,
        }
    }
}

/// Who is connected: fixed for the life of the connection.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub connection_id: u32,
    pub user: String,
    /// The client's host as MySQL names it in `USER()`.
    pub host: String,
}

/// What the server shares between sessions.
pub struct Server {
    pub catalog: Catalog,
    plans: Mutex<HashMap<String, Arc<Plan>>>,
    started: std::time::Instant,
}

impl Server {
    pub fn open(engine: Arc<millrace_trx::Engine>) -> Result<Arc<Server>, SqlError> {
        Ok(Arc::new(Server {
            catalog: Catalog::open(engine)?,
            plans: Mutex::new(HashMap::new()),
            started: std::time::Instant::now(),
        }))
    }

    pub fn engine(&self) -> &Arc<millrace_trx::Engine> {
        self.catalog.engine()
    }

    fn cached(&self, key: &str) -> Option<Arc<Plan>> {
        let p = self.plans.lock().expect("poisoned").get(key).cloned()?;
        (p.catalog_version == self.catalog.version()).then_some(p)
    }

    fn cache(&self, key: String, plan: Arc<Plan>) {
        let mut m = self.plans.lock().expect("poisoned");
        if m.len() >= PLAN_CACHE_ENTRIES {
            m.clear();
        }
        m.insert(key, plan);
    }
}

struct Prepared {
    sql: String,
    stmt: ast::Statement,
    plan: Option<Arc<Plan>>,
    params: usize,
}

pub struct Session {
    server: Arc<Server>,
    conn: ConnInfo,
    database: Option<String>,
    character_set: String,
    collation: String,
    autocommit: bool,
    trx: Option<Trx>,
    /// BEGIN / START TRANSACTION (or autocommit off) opened `trx`.
    explicit: bool,
    /// Tables whose shared metadata lock the transaction holds.
    held: Vec<Arc<TableEntry>>,
    last_insert_id: u64,
    prepared: HashMap<u32, Prepared>,
    next_stmt_id: u32,
}

fn engine_err(e: TrxError) -> SqlError {
    SqlError::new(e.mysql_code(), e.to_string())
}

fn corrupt(e: impl std::fmt::Display) -> SqlError {
    SqlError::new(ER_TABLE_CORRUPT, format!("row data damaged: {e}"))
}

fn parse(sql: &str) -> Result<ast::Statement, SqlError> {
    let mut stmts = Parser::parse_sql(&MySqlDialect {}, sql).map_err(plan::err_parse)?;
    match stmts.len() {
        0 => Err(SqlError::new(ER_EMPTY_QUERY, "Query was empty")),
        1 => Ok(stmts.pop().expect("one")),
        _ => Err(unsupported("several statements in one query")),
    }
}

/// Decodes a stored row of `s`; values stored out of line are not fetched
/// (see `fetch_external`).
fn decode_stored(s: &TableSchema, types: &[ColumnType], value: &[u8]) -> Result<Decoded, SqlError> {
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
fn fetch_external(
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

/// Encodes a row of `s` (coerced values) as the engine stores it. The
/// columns in `external` stay pointers to their values out of line (their
/// entries in `row` are not read, except for key columns, which must hold
/// the fetched value); when the row is over the inline limit, more values go
/// out of line by the rule in `toast.rs`: their chunks are written in `trx`
/// under ids from `counter`. Returns the stored value and all its pointers.
#[allow(clippy::too_many_arguments)]
fn store_row(
    trx: &Trx,
    engine: &Engine,
    s: &TableSchema,
    counter: &AtomicU64,
    types: &[ColumnType],
    row: &[Value],
    mut external: ExternalRefs,
    page_size: usize,
) -> Result<(Vec<u8>, ExternalRefs), SqlError> {
    // Keys are built from whole values: a key column out of line was
    // fetched by the statement (a value stored out of line is never NULL).
    for &(c, _) in &external {
        assert!(
            !row[c].is_null() || !s.indexes.iter().any(|i| i.columns.contains(&c)),
            "key column {c} of {} stored out of line but not fetched",
            s.name
        );
    }
    let keys: Vec<Vec<u8>> = s
        .indexes
        .iter()
        .map(|i| s.key_of(&i.columns, row))
        .collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    let mut payload = Vec::new();
    encode_row_external(row, &external, types, &mut payload).map_err(corrupt)?;
    if let Some(toast) = s.toast_table {
        let segments: usize = keys.iter().map(|k| 2 + k.len()).sum();
        let limit = toast::inline_limit(page_size);
        let moved = toast::choose(row, types, &external, segments + payload.len(), limit);
        if !moved.is_empty() {
            let chunk = toast::chunk_bytes(page_size);
            let newest_kept = external.iter().map(|(_, r)| r.id).max().unwrap_or(0);
            for c in moved {
                let Value::Bytes(b) = &row[c] else {
                    unreachable!("toast::choose picks byte values")
                };
                let id = toast::next_value_id(engine, counter, toast)?;
                // Ids only grow (toast::next_value_id): a kept pointer at or
                // above a new id means the toast table lost its newest keys.
                if id <= newest_kept {
                    return Err(corrupt(format!(
                        "toast table {toast} ends below value {newest_kept} a row points to"
                    )));
                }
                external.push((c, toast::write(trx, toast, id, b, chunk)?));
            }
            external.sort_unstable_by_key(|&(c, _)| c);
            payload.clear();
            encode_row_external(row, &external, types, &mut payload).map_err(corrupt)?;
        }
    }
    Ok((encode_segments(&refs, &payload), external))
}

/// Deletes the values out of line of `old` (a row's pointers before a
/// change) that `new` (its pointers after; empty when the row is deleted)
/// no longer points to. Called after the row change, so that a failure in
/// between leaves at worst chunks nothing points to, never a row pointing
/// to deleted chunks.
fn delete_unused(
    trx: &Trx,
    s: &TableSchema,
    page_size: usize,
    old: &[(usize, ExternalRef)],
    new: &[(usize, ExternalRef)],
) -> Result<(), SqlError> {
    let Some(toast) = s.toast_table else {
        return Ok(());
    };
    let chunk = toast::chunk_bytes(page_size);
    for (_, r) in old {
        if !new.iter().any(|(_, n)| n.id == r.id) {
            toast::delete(trx, toast, r, chunk)?;
        }
    }
    Ok(())
}

/// The columns a statement over table `s` reads through `exprs` (and
/// `also`), for fetching only those values out of line; `None` (fetch all
/// there are) for a table without a toast table, which has none.
fn needed_columns<'a>(
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

/// Checks the UNIQUE secondary indexes of `s` for `row` (keyed `pk`) by a
/// read in `trx`; with `only_changed_from`, only indexes whose columns
/// differ from that old row. Two concurrent writers can both pass (no gap
/// locks): see docs/design.md.
fn check_unique(
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
        let hits = trx
            .scan_secondary(s.engine_table, i, &key, &key, 2)
            .map_err(engine_err)?;
        if hits.iter().any(|(other, _)| other.as_slice() != pk) {
            return Err(dup_entry(s, &idx.columns, row, &idx.name));
        }
    }
    Ok(())
}

fn coerce_col(c: &ColumnSchema, v: Value, row: usize) -> Result<Value, SqlError> {
    v.coerce(&c.ty)
        .map_err(|e| SqlError::new(e.mysql_code(), format!("{e} '{}' at row {row}", c.name)))
}

fn dup_entry(s: &TableSchema, cols: &[usize], row: &[Value], key: &str) -> SqlError {
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

/// The current UTC time as a DATETIME.
fn now() -> Value {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Days since the epoch to a civil date (Howard Hinnant's algorithm).
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
    Value::DateTime(DateTime {
        year,
        month,
        day,
        hour: (rem / 3600) as u8,
        minute: (rem / 60 % 60) as u8,
        second: (rem % 60) as u8,
        micro: 0,
    })
}

impl SessionInfo for Session {
    fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    fn variable(&self, name: &str) -> Option<Value> {
        self.variables()
            .into_iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    fn function(&self, name: &str) -> Option<Value> {
        let t = |s: String| Some(Value::Bytes(s.into_bytes()));
        match name {
            "database" | "schema" => Some(
                self.database
                    .as_ref()
                    .map_or(Value::Null, |d| Value::Bytes(d.clone().into_bytes())),
            ),
            "user" | "session_user" | "system_user" => {
                t(format!("{}@{}", self.conn.user, self.conn.host))
            }
            "current_user" => t(format!("{}@%", self.conn.user)),
            "connection_id" => Some(Value::Int(i64::from(self.conn.connection_id))),
            "version" => t(SERVER_VERSION.into()),
            "last_insert_id" => Some(Value::UInt(self.last_insert_id)),
            "now" | "current_timestamp" | "sysdate" | "localtime" | "localtimestamp" => Some(now()),
            _ => None,
        }
    }
}

/// A global (engine) variable and where its value lives.
#[derive(Clone, Copy)]
enum Global {
    /// A run-time engine setting: the atomic, the unit it stores in per unit
    /// shown (1000 for seconds stored as ms), and the least value allowed.
    Setting(fn(&RuntimeSettings) -> &AtomicU64, u64, u64),
    /// The redo log's durability level (0, 1, 2).
    Durability,
    PageSize,
    HistoryLength,
    Uptime,
}

const GLOBALS: [(&str, Global); 9] = [
    ("innodb_flush_log_at_trx_commit", Global::Durability),
    (
        "innodb_lock_wait_timeout",
        Global::Setting(|r| &r.lock_wait_timeout_ms, 1000, 1),
    ),
    (
        "innodb_max_purge_lag",
        Global::Setting(|r| &r.max_purge_lag, 1, 0),
    ),
    (
        "innodb_max_purge_lag_delay",
        Global::Setting(|r| &r.max_purge_lag_delay_us, 1, 0),
    ),
    ("innodb_page_size", Global::PageSize),
    ("millrace_history_length", Global::HistoryLength),
    (
        "millrace_idle_trx_timeout",
        Global::Setting(|r| &r.idle_trx_timeout_ms, 1000, 0),
    ),
    (
        "millrace_undo_quota_bytes",
        Global::Setting(|r| &r.undo_quota_bytes, 1, 0),
    ),
    ("uptime", Global::Uptime),
];

impl Global {
    /// Status-like values that SHOW VARIABLES leaves out.
    fn is_status(self) -> bool {
        matches!(self, Global::HistoryLength | Global::Uptime)
    }

    fn get(self, s: &Server) -> Value {
        let e = s.engine();
        Value::UInt(match self {
            Global::Setting(field, unit, _) => field(e.settings()).load(Ordering::Relaxed) / unit,
            Global::Durability => e.store().log().durability() as u64,
            Global::PageSize => e.store().pool().page_size() as u64,
            Global::HistoryLength => e.history_len(),
            Global::Uptime => s.started.elapsed().as_secs(),
        })
    }

    fn set(self, s: &Server, name: &str, v: &Value) -> Result<(), SqlError> {
        let n = match v {
            Value::Int(i) if *i >= 0 => *i as u64,
            Value::UInt(u) => *u,
            _ => {
                return Err(SqlError::new(
                    ER_WRONG_TYPE_FOR_VAR,
                    format!("Incorrect argument type to variable '{name}'"),
                ))
            }
        };
        match self {
            Global::Setting(field, unit, min) => {
                field(s.engine().settings())
                    .store(n.max(min).saturating_mul(unit), Ordering::Relaxed);
            }
            Global::Durability => {
                let d = u8::try_from(n)
                    .ok()
                    .and_then(millrace_redo::Durability::from_level)
                    .ok_or_else(|| {
                        SqlError::new(
                            ER_WRONG_VALUE_FOR_VAR,
                            format!("Variable '{name}' can't be set to the value of '{n}'"),
                        )
                    })?;
                s.engine().store().log().set_durability(d);
            }
            _ => {
                return Err(SqlError::new(
                    ER_INCORRECT_GLOBAL_LOCAL_VAR,
                    format!("Variable '{name}' is a read only variable"),
                ))
            }
        }
        Ok(())
    }
}

fn default_collation(charset: &str) -> &'static str {
    match charset {
        "utf8" | "utf8mb3" => "utf8mb3_general_ci",
        "latin1" => "latin1_swedish_ci",
        "binary" => "binary",
        "ascii" => "ascii_general_ci",
        _ => "utf8mb4_general_ci",
    }
}

/// SQL LIKE for SHOW ... LIKE: case-insensitive.
fn like_ci(pattern: &str, text: &str) -> bool {
    crate::expr::like(
        pattern.to_lowercase().as_bytes(),
        text.to_lowercase().as_bytes(),
    )
}

fn text_col(name: &str) -> OutColumn {
    OutColumn {
        name: name.into(),
        table: String::new(),
        kind: ResultKind::Text,
    }
}

fn t(s: impl Into<String>) -> Value {
    Value::Bytes(s.into().into_bytes())
}

/// The text of a SET value (`ON`, `'utf8'`, 1, ...), for session settings.
fn set_word(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            ast::Value::Boolean(b) => u8::from(*b).to_string(),
            ast::Value::Null => "NULL".into(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
    .to_ascii_lowercase()
}

fn column_type(dt: &ast::DataType) -> Result<ColumnType, SqlError> {
    use ast::DataType as D;
    let len = |n: &Option<ast::CharacterLength>, default: u32| match n {
        Some(ast::CharacterLength::IntegerLength { length, .. }) => {
            u32::try_from(*length).unwrap_or(u32::MAX)
        }
        Some(ast::CharacterLength::Max) => 65_535,
        None => default,
    };
    let ty = match dt {
        D::TinyInt(_) | D::Int2(_) if matches!(dt, D::TinyInt(_)) => {
            ColumnType::TinyInt { unsigned: false }
        }
        D::TinyIntUnsigned(_) | D::UTinyInt => ColumnType::TinyInt { unsigned: true },
        D::Bool | D::Boolean => ColumnType::TinyInt { unsigned: false },
        D::SmallInt(_) | D::Int2(_) => ColumnType::SmallInt { unsigned: false },
        D::SmallIntUnsigned(_) | D::Int2Unsigned(_) => ColumnType::SmallInt { unsigned: true },
        D::MediumInt(_) | D::Int(_) | D::Integer(_) | D::Int4(_) => {
            ColumnType::Int { unsigned: false }
        }
        D::MediumIntUnsigned(_)
        | D::IntUnsigned(_)
        | D::IntegerUnsigned(_)
        | D::Int4Unsigned(_)
        | D::UnsignedInteger => ColumnType::Int { unsigned: true },
        D::BigInt(_) | D::Int8(_) | D::Int64 => ColumnType::BigInt { unsigned: false },
        D::BigIntUnsigned(_) | D::Int8Unsigned(_) => ColumnType::BigInt { unsigned: true },
        D::Double(_) | D::DoublePrecision | D::Float(_) | D::Real | D::Float8 | D::Float64 => {
            ColumnType::Double
        }
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => {
            let (precision, scale) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s as u64),
            };
            ColumnType::Decimal {
                precision: u8::try_from(precision).unwrap_or(u8::MAX),
                scale: u8::try_from(scale).unwrap_or(u8::MAX),
            }
        }
        D::Char(n) | D::Character(n) => ColumnType::Char(len(n, 1)),
        D::Varchar(n) | D::CharVarying(n) | D::CharacterVarying(n) | D::Nvarchar(n) => match n {
            None => return Err(plan::err_parse("VARCHAR needs a length")),
            n => ColumnType::VarChar(len(n, 0)),
        },
        D::Text | D::TinyText | D::MediumText | D::LongText | D::String(_) => ColumnType::Text,
        D::Blob(_) | D::TinyBlob | D::MediumBlob | D::LongBlob | D::Bytea => ColumnType::Blob,
        D::Binary(_) | D::Varbinary(_) => ColumnType::Blob,
        D::Datetime(_) | D::Date => ColumnType::DateTime,
        D::Timestamp(_, _) => ColumnType::Timestamp,
        other => return Err(unsupported(format!("column type {other}"))),
    };
    ty.validate()
        .map_err(|e| SqlError::new(e.mysql_code(), e.to_string()))?;
    Ok(ty)
}

fn index_columns(s: &TableSchema, cols: &[ast::IndexColumn]) -> Result<Vec<usize>, SqlError> {
    cols.iter()
        .map(|c| {
            let name = match &c.column.expr {
                ast::Expr::Identifier(i) => i.value.clone(),
                other => return Err(unsupported(format!("index on {other}"))),
            };
            s.column(&name).ok_or_else(|| {
                SqlError::new(
                    ER_KEY_COLUMN_DOES_NOT_EXITS,
                    format!("Key column '{name}' doesn't exist in table"),
                )
            })
        })
        .collect()
}

impl Session {
    pub fn new(server: Arc<Server>, conn: ConnInfo) -> Session {
        Session {
            server,
            conn,
            database: None,
            character_set: "utf8mb4".into(),
            collation: "utf8mb4_general_ci".into(),
            autocommit: true,
            trx: None,
            explicit: false,
            held: Vec::new(),
            last_insert_id: 0,
            prepared: HashMap::new(),
            next_stmt_id: 1,
        }
    }

    pub fn autocommit(&self) -> bool {
        self.autocommit
    }

    pub fn in_transaction(&self) -> bool {
        self.explicit && self.trx.is_some()
    }

    fn lock_timeout(&self) -> Duration {
        Duration::from_millis(
            self.server
                .engine()
                .settings()
                .lock_wait_timeout_ms
                .load(Ordering::Relaxed),
        )
    }

    /// The system variables the session reports, sorted by name.
    pub fn variables(&self) -> Vec<(String, Value)> {
        let cs = t(self.character_set.clone());
        let coll = t(self.collation.clone());
        let mut vars: Vec<(String, Value)> = vec![
            ("auto_increment_increment", Value::Int(1)),
            ("auto_increment_offset", Value::Int(1)),
            ("autocommit", Value::Int(i64::from(self.autocommit))),
            ("character_set_client", cs.clone()),
            ("character_set_connection", cs.clone()),
            ("character_set_database", t("utf8mb4")),
            ("character_set_filesystem", t("binary")),
            ("character_set_results", cs),
            ("character_set_server", t("utf8mb4")),
            ("character_set_system", t("utf8mb3")),
            ("collation_connection", coll),
            ("collation_database", t("utf8mb4_general_ci")),
            ("collation_server", t("utf8mb4_general_ci")),
            ("interactive_timeout", Value::Int(28800)),
            ("license", t("Apache-2.0")),
            ("lower_case_table_names", Value::Int(0)),
            ("max_allowed_packet", Value::Int(67_108_864)),
            ("net_write_timeout", Value::Int(60)),
            ("performance_schema", Value::Int(0)),
            ("sql_mode", t("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION")),
            ("system_time_zone", t("UTC")),
            ("time_zone", t("SYSTEM")),
            ("transaction_isolation", t("REPEATABLE-READ")),
            ("tx_isolation", t("REPEATABLE-READ")),
            ("version", t(SERVER_VERSION)),
            ("version_comment", t(VERSION_COMMENT)),
            ("version_compile_os", t(std::env::consts::OS)),
            ("wait_timeout", Value::Int(28800)),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
        for (name, g) in GLOBALS {
            if !g.is_status() {
                vars.push((name.to_string(), g.get(&self.server)));
            }
        }
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        vars
    }

    // ---- transactions ---------------------------------------------------

    fn trx(&mut self) -> &Trx {
        if self.trx.is_none() {
            self.trx = Some(self.server.engine().begin(Isolation::RepeatableRead));
            if !self.autocommit {
                self.explicit = true;
            }
        }
        self.trx.as_ref().expect("just begun")
    }

    fn release_mdl(&mut self) {
        for e in self.held.drain(..) {
            e.mdl.release_shared();
        }
    }

    fn end_trx(&mut self, commit: bool) -> Result<(), SqlError> {
        let r = match self.trx.take() {
            Some(t) if commit => t.commit().map_err(engine_err),
            Some(t) => t.rollback().map_err(engine_err),
            None => Ok(()),
        };
        self.explicit = false;
        self.release_mdl();
        r
    }

    /// Takes the table's shared metadata lock for the transaction; false
    /// when the catalog changed meanwhile (the plan must be made again).
    fn use_table(&mut self, e: &Arc<TableEntry>, version: u64) -> Result<bool, SqlError> {
        if !self.held.iter().any(|h| Arc::ptr_eq(h, e)) {
            e.mdl.shared(self.lock_timeout())?;
            self.held.push(e.clone());
        }
        Ok(version == self.server.catalog.version())
    }

    // ---- entry points ---------------------------------------------------

    /// COM_INIT_DB and `USE db`.
    pub fn init_db(&mut self, db: &str) -> Result<Output, SqlError> {
        if !self.server.catalog.has_database(db)
            && !db.eq_ignore_ascii_case("information_schema")
            && !db.eq_ignore_ascii_case("performance_schema")
        {
            return Err(SqlError::new(
                ER_BAD_DB_ERROR,
                format!("Unknown database '{db}'"),
            ));
        }
        self.database = Some(db.to_string());
        Ok(Output::ok())
    }

    /// COM_QUERY.
    pub fn query(&mut self, sql: &str) -> Result<Output, SqlError> {
        let sql = sql.trim().trim_end_matches(';').trim_end();
        if sql.is_empty() {
            return Err(SqlError::new(ER_EMPTY_QUERY, "Query was empty"));
        }
        if let Some((shape, literals)) = crate::shape::shape(sql) {
            let key = format!("{}\0{shape}", self.database.as_deref().unwrap_or(""));
            let plan = match self.server.cached(&key) {
                Some(p) => Some(p),
                None => match parse(&shape)
                    .ok()
                    .map(|stmt| Planner::new(&self.server.catalog, self).plan(&stmt))
                {
                    Some(Ok(Some(p)))
                        if !p.volatile && !p.shape_sensitive && p.params == literals.len() =>
                    {
                        let p = Arc::new(p);
                        self.server.cache(key, p.clone());
                        Some(p)
                    }
                    _ => None,
                },
            };
            if let Some(plan) = plan {
                // None: the catalog changed under the plan; plan again below.
                if let Some(out) = self.run_plan(&plan, &literals)? {
                    return Ok(out);
                }
            }
        }
        let stmt = parse(sql)?;
        self.statement(&stmt, &[])
    }

    /// COM_STMT_PREPARE: (statement id, parameter count, result columns).
    pub fn prepare(&mut self, sql: &str) -> Result<(u32, usize, Vec<OutColumn>), SqlError> {
        let sql = sql.trim().trim_end_matches(';').trim_end();
        let stmt = parse(sql)?;
        let plan = Planner::new(&self.server.catalog, self).plan(&stmt)?;
        let (params, columns, plan) = match plan {
            Some(p) => (p.params, p.columns().to_vec(), Some(Arc::new(p))),
            None => {
                if count_placeholders(sql) > 0 {
                    return Err(SqlError::new(
                        ER_UNSUPPORTED_PS,
                        "This command is not supported in the prepared statement protocol yet",
                    ));
                }
                (0, vec![], None)
            }
        };
        let id = self.next_stmt_id;
        self.next_stmt_id = self.next_stmt_id.wrapping_add(1).max(1);
        self.prepared.insert(
            id,
            Prepared {
                sql: sql.to_string(),
                stmt,
                plan,
                params,
            },
        );
        Ok((id, params, columns))
    }

    /// COM_STMT_EXECUTE.
    pub fn execute(&mut self, id: u32, params: Vec<Value>) -> Result<Output, SqlError> {
        let Some(p) = self.prepared.get(&id) else {
            return Err(SqlError::new(
                ER_UNKNOWN_STMT_HANDLER,
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
            ));
        };
        if params.len() != p.params {
            return Err(SqlError::new(
                ER_WRONG_ARGUMENTS,
                "Incorrect arguments to mysqld_stmt_execute",
            ));
        }
        let stmt = p.stmt.clone();
        let plan = p.plan.clone();
        let sql = p.sql.clone();
        if let Some(plan) = plan {
            if !plan.volatile {
                if let Some(out) = self.run_plan(&plan, &params)? {
                    return Ok(out);
                }
            }
            // Volatile, or planned against an older catalog: plan again.
            let fresh = Planner::new(&self.server.catalog, self)
                .plan(&parse(&sql)?)?
                .ok_or_else(|| unsupported("a statement that changed kind"))?;
            let fresh = Arc::new(fresh);
            if !fresh.volatile {
                if let Some(p) = self.prepared.get_mut(&id) {
                    p.plan = Some(fresh.clone());
                }
            }
            for _ in 0..3 {
                if let Some(out) = self.run_plan(&fresh, &params)? {
                    return Ok(out);
                }
            }
            return Err(SqlError::new(
                ER_NEED_REPREPARE,
                "Prepared statement needs to be re-prepared",
            ));
        }
        self.statement(&stmt, &params)
    }

    /// COM_STMT_CLOSE.
    pub fn close(&mut self, id: u32) {
        self.prepared.remove(&id);
    }

    /// Executes a parsed statement.
    fn statement(&mut self, stmt: &ast::Statement, params: &[Value]) -> Result<Output, SqlError> {
        for _ in 0..3 {
            let planned = Planner::new(&self.server.catalog, self).plan(stmt)?;
            if let Some(plan) = planned {
                if let Some(out) = self.run_plan(&plan, params)? {
                    return Ok(out);
                }
                continue;
            }
            return self.other(stmt);
        }
        Err(SqlError::new(
            ER_TABLE_DEF_CHANGED,
            "Table definition has changed, please retry transaction",
        ))
    }

    // ---- DML ------------------------------------------------------------

    /// Runs a plan in the session's transaction. `None`: the catalog
    /// changed since planning; nothing was done.
    fn run_plan(&mut self, plan: &Plan, params: &[Value]) -> Result<Option<Output>, SqlError> {
        let table = match &plan.kind {
            PlanKind::Select(s) => match &s.source {
                Source::Table(t) => Some(t.clone()),
                _ => None,
            },
            PlanKind::Insert(p) => Some(p.table.clone()),
            PlanKind::Update(p) => Some(p.table.clone()),
            PlanKind::Delete(p) => Some(p.table.clone()),
        };
        self.trx();
        if let Some(t) = &table {
            match self.use_table(t, plan.catalog_version) {
                Ok(true) => {}
                Ok(false) => {
                    if !self.explicit {
                        self.end_trx(false)?;
                    }
                    return Ok(None);
                }
                Err(e) => {
                    if !self.explicit {
                        let _ = self.end_trx(false);
                    }
                    return Err(e);
                }
            }
        }
        let writes = !matches!(plan.kind, PlanKind::Select(_));
        let savepoint = if writes && self.explicit {
            Some(self.trx().savepoint().map_err(engine_err)?)
        } else {
            None
        };
        let r = match &plan.kind {
            PlanKind::Select(s) => self.select(s, params),
            PlanKind::Insert(_) => self.insert(plan, params),
            PlanKind::Update(_) => self.update(plan, params),
            PlanKind::Delete(_) => self.delete(plan, params),
        };
        match r {
            Ok(out) => {
                if !self.explicit {
                    self.end_trx(true)?;
                }
                Ok(Some(out))
            }
            Err(e) => {
                if e.code == ER_LOCK_DEADLOCK || e.code == ER_QUERY_INTERRUPTED || !self.explicit {
                    // A deadlock (or the engine's rollback) ended the whole
                    // transaction; without one open, the statement's own
                    // transaction is rolled back.
                    let _ = self.end_trx(false);
                } else if let (Some(sp), Some(trx)) = (savepoint, &self.trx) {
                    // The whole statement, a lock wait timeout's too (the
                    // engine undid only the call that waited): as MySQL does,
                    // and so that the chunks an INSERT or UPDATE wrote for
                    // long values do not outlive the row change that failed.
                    trx.rollback_to_savepoint(sp).map_err(engine_err)?;
                }
                Err(e)
            }
        }
    }

    fn eval_key(
        &self,
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

    fn page_size(&self) -> usize {
        self.server.engine().store().pool().page_size()
    }

    /// Reads the rows `access` can reach (a superset of those the filter
    /// accepts): (primary key, row, pointers out of line). With `lock`, each
    /// row is locked exclusively and read in its latest version. Of the
    /// values stored out of line, those of the columns `needed` names (all
    /// with `None`) are fetched; the others stay NULL in the row.
    fn read_rows(
        &mut self,
        entry: &TableEntry,
        access: &Access,
        params: &[Value],
        lock: bool,
        limit: usize,
        needed: Option<&[bool]>,
    ) -> Result<Vec<KeyedRow>, SqlError> {
        let s = entry.schema.clone();
        let types = s.types();
        let table = s.engine_table;
        let page_size = self.page_size();
        let decode = |trx: &Trx, v: &[u8]| -> Result<Decoded, SqlError> {
            let (mut row, external) = decode_stored(&s, &types, v)?;
            if !external.is_empty() {
                fetch_external(
                    trx, &s, &types, page_size, &mut row, &external, needed, lock,
                )?;
            }
            Ok((row, external))
        };
        let mut access = access.clone();
        // Point keys that do not convert to the column type match nothing
        // by index: fall back on a scan (the filter decides).
        let mut point = None;
        if let Access::PkPoint(exprs) = &access {
            let mut key = Vec::new();
            let mut ok = true;
            for (e, &c) in exprs.iter().zip(&s.primary_key) {
                let v = e.eval_const(params)?;
                if v.is_null() {
                    return Ok(vec![]);
                }
                match v.coerce(&s.columns[c].ty) {
                    Ok(v) => encode_key(&[(v, &s.columns[c].ty)], &mut key),
                    Err(_) => ok = false,
                }
            }
            if ok {
                point = Some(key);
            } else {
                access = Access::FullScan;
            }
        }
        let trx = self.trx.as_ref().expect("statement has a transaction");
        if let Some(pk) = point {
            let v = if lock {
                trx.get_locked(table, &pk, LockMode::Exclusive)
            } else {
                trx.get(table, &pk)
            }
            .map_err(engine_err)?;
            return match v {
                Some(v) => {
                    let (row, external) = decode(trx, &v)?;
                    Ok(vec![(pk, row, external)])
                }
                None => Ok(vec![]),
            };
        }
        let multi_pk = s.primary_key.len() > 1;
        let rows = match &access {
            Access::PkRange { low, high } => {
                let c = s.primary_key[0];
                let lo = match low {
                    Some(e) => self.eval_key(&s, c, e, params)?,
                    None => None,
                };
                let mut hi = match high {
                    Some(e) => self.eval_key(&s, c, e, params)?,
                    None => None,
                };
                let bad = low.is_some() && lo.is_none() || high.is_some() && hi.is_none();
                if bad {
                    self.scan_all(table, limit)?
                } else {
                    if multi_pk {
                        if let Some(h) = &mut hi {
                            h.extend_from_slice(&HIGH_SUFFIX);
                        }
                    }
                    let from = lo.as_deref().map_or(Bound::Unbounded, Bound::Included);
                    let to = hi.as_deref().map_or(Bound::Unbounded, Bound::Included);
                    trx.scan(table, from, to, limit).map_err(engine_err)?
                }
            }
            Access::Secondary { index, low, high } => {
                let c = s.indexes[*index].columns[0];
                let lo = match low {
                    Some(e) => self.eval_key(&s, c, e, params)?,
                    None => Some(vec![]),
                };
                let hi = match high {
                    Some(e) => self.eval_key(&s, c, e, params)?,
                    None => Some(HIGH_SUFFIX.to_vec()),
                };
                match (lo, hi) {
                    (Some(lo), Some(mut hi)) => {
                        if s.indexes[*index].columns.len() > 1 {
                            hi.extend_from_slice(&HIGH_SUFFIX);
                        }
                        trx.scan_secondary(table, *index, &lo, &hi, limit)
                            .map_err(engine_err)?
                    }
                    _ => self.scan_all(table, limit)?,
                }
            }
            _ => self.scan_all(table, limit)?,
        };
        let trx = self.trx.as_ref().expect("statement has a transaction");
        let mut out = Vec::with_capacity(rows.len());
        for (pk, v) in rows {
            if lock {
                if let Some(v) = trx
                    .get_locked(table, &pk, LockMode::Exclusive)
                    .map_err(engine_err)?
                {
                    let (row, external) = decode(trx, &v)?;
                    out.push((pk, row, external));
                }
            } else {
                let (row, external) = decode(trx, &v)?;
                out.push((pk, row, external));
            }
        }
        Ok(out)
    }

    fn scan_all(&self, table: u32, limit: usize) -> Result<Vec<KeyValue>, SqlError> {
        let trx = self.trx.as_ref().expect("statement has a transaction");
        trx.scan(table, Bound::Unbounded, Bound::Unbounded, limit)
            .map_err(engine_err)
    }

    fn limit_of(e: &Option<Expr>, params: &[Value]) -> Result<Option<usize>, SqlError> {
        match e {
            None => Ok(None),
            Some(e) => match e.eval_const(params)? {
                Value::Int(i) if i >= 0 => Ok(Some(i as usize)),
                Value::UInt(u) => Ok(Some(usize::try_from(u).unwrap_or(usize::MAX))),
                _ => Err(SqlError::new(
                    ER_WRONG_ARGUMENTS,
                    "Incorrect arguments to LIMIT",
                )),
            },
        }
    }

    fn passes(filter: &Option<Expr>, row: &[Value], params: &[Value]) -> Result<bool, SqlError> {
        match filter {
            None => Ok(true),
            Some(f) => Ok(truth(&f.eval(&Ctx {
                row,
                params,
                aggregates: &[],
            })?) == Some(true)),
        }
    }

    fn select(&mut self, p: &SelectPlan, params: &[Value]) -> Result<Output, SqlError> {
        let limit = Self::limit_of(&p.limit, params)?;
        let offset = Self::limit_of(&p.offset, params)?.unwrap_or(0);
        let simple =
            p.filter.is_none() && p.order_by.is_empty() && !p.distinct && p.aggregates.is_empty();
        let scan_limit = match limit {
            Some(l) if simple => l.saturating_add(offset),
            _ => usize::MAX,
        };
        let source: Vec<Vec<Value>> = match &p.source {
            Source::Nothing => vec![vec![]],
            Source::Virtual(v) => v.rows(&self.server.catalog),
            Source::Table(t) => {
                let exprs = p
                    .filter
                    .iter()
                    .chain(&p.items)
                    .chain(p.order_by.iter().map(|(e, _)| e))
                    .chain(p.aggregates.iter().filter_map(|a| a.arg.as_ref()));
                let needed = needed_columns(&t.schema, exprs, []);
                self.read_rows(
                    t,
                    &p.access,
                    params,
                    p.for_update,
                    scan_limit,
                    needed.as_deref(),
                )?
                .into_iter()
                .map(|(_, r, _)| r)
                .collect()
            }
        };
        let mut rows = Vec::new();
        for r in source {
            if Self::passes(&p.filter, &r, params)? {
                rows.push(r);
            }
        }
        let mut out: Vec<(Vec<Value>, Vec<Value>)> = Vec::new();
        if !p.aggregates.is_empty() {
            let aggs = aggregate(p, &rows, params)?;
            let cx = Ctx {
                row: &[],
                params,
                aggregates: &aggs,
            };
            let vals = p
                .items
                .iter()
                .map(|e| e.eval(&cx))
                .collect::<Result<Vec<_>, _>>()?;
            out.push((vec![], vals));
        } else {
            for r in &rows {
                let cx = Ctx {
                    row: r,
                    params,
                    aggregates: &[],
                };
                let keys = p
                    .order_by
                    .iter()
                    .map(|(e, _)| e.eval(&cx))
                    .collect::<Result<Vec<_>, _>>()?;
                let vals = p
                    .items
                    .iter()
                    .map(|e| e.eval(&cx))
                    .collect::<Result<Vec<_>, _>>()?;
                out.push((keys, vals));
            }
        }
        if !p.order_by.is_empty() {
            out.sort_by(|a, b| {
                for (i, (_, asc)) in p.order_by.iter().enumerate() {
                    let (x, y) = (&a.0[i], &b.0[i]);
                    let o = match (x.is_null(), y.is_null()) {
                        (true, true) => CmpOrdering::Equal,
                        (true, false) => CmpOrdering::Less,
                        (false, true) => CmpOrdering::Greater,
                        _ => compare_values(x, y),
                    };
                    let o = if *asc { o } else { o.reverse() };
                    if o != CmpOrdering::Equal {
                        return o;
                    }
                }
                CmpOrdering::Equal
            });
        }
        let mut rows: Vec<Vec<Value>> = out.into_iter().map(|(_, v)| v).collect();
        if p.distinct {
            let mut seen = HashSet::new();
            rows.retain(|r| seen.insert(r.iter().map(|v| v.to_text()).collect::<Vec<_>>()));
        }
        let rows: Vec<Vec<Value>> = rows
            .into_iter()
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        Ok(Output::Rows {
            columns: p.columns.clone(),
            rows,
        })
    }

    /// The next AUTO_INCREMENT value (or hidden row id) of a table; the
    /// counter starts after the largest key stored.
    fn next_id(&self, entry: &TableEntry, explicit: Option<u64>) -> Result<u64, SqlError> {
        if entry.next_id.load(Ordering::SeqCst) == 0 {
            let s = &entry.schema;
            let last = self
                .server
                .engine()
                .last_key(s.engine_table)
                .map_err(engine_err)?;
            let start = match last {
                None => 1,
                Some(k) if s.primary_key.is_empty() => {
                    u64::from_be_bytes(k.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]))
                        + 1
                }
                Some(k) => {
                    let types: Vec<ColumnType> =
                        s.primary_key.iter().map(|&c| s.columns[c].ty).collect();
                    let vals = crate::decode_key_prefix(&k, &types).map_err(corrupt)?.0;
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

    fn insert(&mut self, plan: &Plan, params: &[Value]) -> Result<Output, SqlError> {
        let PlanKind::Insert(p) = &plan.kind else {
            unreachable!("insert plan")
        };
        let s = p.table.schema.clone();
        let types = s.types();
        let auto = s.auto_increment_column();
        let mut first_generated = None;
        for (n, exprs) in p.rows.iter().enumerate() {
            let mut row = Vec::with_capacity(s.columns.len());
            for (c, col) in s.columns.iter().enumerate() {
                let given = match p.targets[c] {
                    Some(i) if exprs[i] != Expr::Default => Some(exprs[i].eval_const(params)?),
                    _ => None,
                };
                let v = match given {
                    Some(v) => coerce_col(col, v, n + 1)?,
                    None => match &col.default {
                        Some(d) => d.clone(),
                        None if col.nullable || col.auto_increment => Value::Null,
                        None => {
                            return Err(SqlError::new(
                                ER_NO_DEFAULT_FOR_FIELD,
                                format!("Field '{}' doesn't have a default value", col.name),
                            ))
                        }
                    },
                };
                row.push(v);
            }
            if let Some(a) = auto {
                let explicit = match &row[a] {
                    Value::Null => None,
                    Value::Int(0) | Value::UInt(0) => None,
                    Value::Int(i) if *i > 0 => Some(*i as u64),
                    Value::UInt(u) => Some(*u),
                    _ => Some(0),
                };
                let is_generated = explicit.is_none();
                let id = if explicit == Some(0) {
                    0
                } else {
                    self.next_id(&p.table, explicit)?
                };
                if is_generated {
                    row[a] = coerce_col(&s.columns[a], Value::UInt(id), n + 1).map_err(|_| {
                        SqlError::new(
                            ER_AUTOINC_READ_FAILED,
                            "Failed to read auto-increment value from storage engine",
                        )
                    })?;
                    first_generated.get_or_insert(id);
                }
            }
            for (c, col) in s.columns.iter().enumerate() {
                if row[c].is_null() && !col.nullable {
                    return Err(SqlError::new(
                        ER_BAD_NULL_ERROR,
                        format!("Column '{}' cannot be null", col.name),
                    ));
                }
            }
            let pk = if s.primary_key.is_empty() {
                self.next_id(&p.table, None)?.to_be_bytes().to_vec()
            } else {
                s.key_of(&s.primary_key, &row)
            };
            let trx = self.trx.as_ref().expect("statement has a transaction");
            check_unique(trx, &s, &row, &pk, None)?;
            // The chunks of long values first, then the row that points to
            // them (a failure undoes both with the statement).
            let (value, _) = store_row(
                trx,
                self.server.engine(),
                &s,
                &p.table.next_value_id,
                &types,
                &row,
                Vec::new(),
                self.page_size(),
            )?;
            match trx.insert(s.engine_table, &pk, &value) {
                Ok(()) => {}
                Err(TrxError::Duplicate) => {
                    return Err(dup_entry(&s, &s.primary_key, &row, "PRIMARY"))
                }
                Err(e) => return Err(engine_err(e)),
            }
        }
        if let Some(id) = first_generated {
            self.last_insert_id = id;
        }
        Ok(Output::Ok {
            affected_rows: p.rows.len() as u64,
            last_insert_id: first_generated.unwrap_or(0),
        })
    }

    fn update(&mut self, plan: &Plan, params: &[Value]) -> Result<Output, SqlError> {
        let PlanKind::Update(p) = &plan.kind else {
            unreachable!("update plan")
        };
        let s = p.table.schema.clone();
        let types = s.types();
        let limit = Self::limit_of(&p.limit, params)?.unwrap_or(usize::MAX);
        // Out-of-line values to fetch: what the filter and the SET
        // expressions read, the SET targets (to tell a change) and the key
        // columns (keys are built from whole values). The others keep their
        // pointers unread.
        let exprs = p.filter.iter().chain(p.sets.iter().map(|(_, e)| e));
        let keys = s.indexes.iter().flat_map(|i| i.columns.iter().copied());
        let also = p.sets.iter().map(|(c, _)| *c);
        let also = also.chain(s.primary_key.iter().copied()).chain(keys);
        let needed = needed_columns(&s, exprs, also);
        let rows = self.read_rows(
            &p.table,
            &p.access,
            params,
            true,
            usize::MAX,
            needed.as_deref(),
        )?;
        let page_size = self.page_size();
        let mut changed = 0u64;
        let mut matched = 0usize;
        for (pk, old, old_external) in rows {
            if matched >= limit {
                break;
            }
            if !Self::passes(&p.filter, &old, params)? {
                continue;
            }
            matched += 1;
            let mut new = old.clone();
            for (c, e) in &p.sets {
                let v = e.eval(&Ctx {
                    row: &new,
                    params,
                    aggregates: &[],
                })?;
                let col = &s.columns[*c];
                let v = coerce_col(col, v, matched)?;
                if v.is_null() && !col.nullable {
                    return Err(SqlError::new(
                        ER_BAD_NULL_ERROR,
                        format!("Column '{}' cannot be null", col.name),
                    ));
                }
                new[*c] = v;
            }
            if new == old {
                continue;
            }
            let new_pk = if s.primary_key.is_empty() {
                pk.clone()
            } else {
                s.key_of(&s.primary_key, &new)
            };
            let trx = self.trx.as_ref().expect("statement has a transaction");
            check_unique(trx, &s, &new, &new_pk, Some(&old))?;
            // A value out of line that did not change keeps its pointer (the
            // chunks are not copied); an unfetched one cannot have changed,
            // as every SET target was fetched.
            let kept: ExternalRefs = old_external
                .iter()
                .filter(|&&(c, _)| new[c] == old[c])
                .copied()
                .collect();
            let (value, new_external) = store_row(
                trx,
                self.server.engine(),
                &s,
                &p.table.next_value_id,
                &types,
                &new,
                kept,
                page_size,
            )?;
            if new_pk != pk {
                trx.delete(s.engine_table, &pk).map_err(engine_err)?;
                match trx.insert(s.engine_table, &new_pk, &value) {
                    Ok(()) => {}
                    Err(TrxError::Duplicate) => {
                        return Err(dup_entry(&s, &s.primary_key, &new, "PRIMARY"))
                    }
                    Err(e) => return Err(engine_err(e)),
                }
            } else {
                trx.update(s.engine_table, &pk, &value)
                    .map_err(engine_err)?;
            }
            // The old values under this transaction's delete marks: older
            // read views still see them, purge removes them after.
            delete_unused(trx, &s, page_size, &old_external, &new_external)?;
            changed += 1;
        }
        Ok(Output::affected(changed))
    }

    fn delete(&mut self, plan: &Plan, params: &[Value]) -> Result<Output, SqlError> {
        let PlanKind::Delete(p) = &plan.kind else {
            unreachable!("delete plan")
        };
        let limit = Self::limit_of(&p.limit, params)?.unwrap_or(usize::MAX);
        let s = &p.table.schema;
        let needed = needed_columns(s, p.filter.iter(), []);
        let rows = self.read_rows(
            &p.table,
            &p.access,
            params,
            true,
            usize::MAX,
            needed.as_deref(),
        )?;
        let page_size = self.page_size();
        let mut n = 0u64;
        for (pk, row, external) in rows {
            if n as usize >= limit {
                break;
            }
            if !Self::passes(&p.filter, &row, params)? {
                continue;
            }
            let trx = self.trx.as_ref().expect("statement has a transaction");
            if trx.delete(s.engine_table, &pk).map_err(engine_err)? {
                delete_unused(trx, s, page_size, &external, &[])?;
                n += 1;
            }
        }
        Ok(Output::affected(n))
    }

    // ---- everything else --------------------------------------------------

    /// Statements that are not planned: DDL, SET, SHOW, USE, transactions.
    fn other(&mut self, stmt: &ast::Statement) -> Result<Output, SqlError> {
        use ast::Statement as S;
        match stmt {
            S::StartTransaction { .. } => {
                self.end_trx(true)?;
                self.trx = Some(self.server.engine().begin(Isolation::RepeatableRead));
                self.explicit = true;
                Ok(Output::ok())
            }
            S::Commit { .. } => {
                self.end_trx(true)?;
                Ok(Output::ok())
            }
            S::Rollback {
                savepoint: None, ..
            } => {
                self.end_trx(false)?;
                Ok(Output::ok())
            }
            S::Use(u) => {
                let name = match u {
                    ast::Use::Object(n)
                    | ast::Use::Database(n)
                    | ast::Use::Schema(n)
                    | ast::Use::Catalog(n) => n.to_string(),
                    other => return Err(unsupported(other)),
                };
                self.init_db(name.trim_matches('`'))
            }
            S::Set(set) => self.set(set),
            // Session and global values are the same set here.
            S::ShowVariables { filter, .. } => {
                let pattern = like_filter(filter)?;
                let rows = self
                    .variables()
                    .into_iter()
                    .filter(|(n, _)| pattern.as_ref().is_none_or(|p| like_ci(p, n)))
                    .map(|(n, v)| vec![t(n), t(text_of(&v))])
                    .collect();
                Ok(Output::Rows {
                    columns: vec![text_col("Variable_name"), text_col("Value")],
                    rows,
                })
            }
            S::ShowStatus { filter, .. } => {
                let pattern = like_filter(filter)?;
                let mut rows: Vec<Vec<Value>> = self
                    .server
                    .engine()
                    .registry()
                    .snapshot()
                    .into_iter()
                    .map(|m| vec![t(m.name), t(m.value.to_string())])
                    .collect();
                rows.push(vec![
                    t("Uptime"),
                    t(self.server.started.elapsed().as_secs().to_string()),
                ]);
                rows.retain(|r| pattern.as_ref().is_none_or(|p| like_ci(p, &text_of(&r[0]))));
                Ok(Output::Rows {
                    columns: vec![text_col("Variable_name"), text_col("Value")],
                    rows,
                })
            }
            S::ShowDatabases { .. } | S::ShowSchemas { .. } => {
                let mut dbs = vec![
                    "information_schema".to_string(),
                    "performance_schema".to_string(),
                ];
                dbs.extend(self.server.catalog.databases());
                Ok(Output::Rows {
                    columns: vec![text_col("Database")],
                    rows: dbs.into_iter().map(|d| vec![t(d)]).collect(),
                })
            }
            S::ShowTables { show_options, .. } => {
                let db = match &show_options.show_in {
                    Some(ast::ShowStatementIn {
                        parent_name: Some(n),
                        ..
                    }) => n.to_string(),
                    _ => self
                        .database
                        .clone()
                        .ok_or_else(|| SqlError::new(ER_NO_DB_ERROR, "No database selected"))?,
                };
                let pattern = match &show_options.filter_position {
                    Some(
                        ast::ShowStatementFilterPosition::Suffix(f)
                        | ast::ShowStatementFilterPosition::Infix(f),
                    ) => like_filter(&Some(f.clone()))?,
                    None => None,
                };
                let rows = self
                    .server
                    .catalog
                    .tables_of(&db)
                    .iter()
                    .map(|e| e.schema.name.clone())
                    .filter(|n| pattern.as_ref().is_none_or(|p| like_ci(p, n)))
                    .map(|n| vec![t(n)])
                    .collect();
                Ok(Output::Rows {
                    columns: vec![text_col(&format!("Tables_in_{db}"))],
                    rows,
                })
            }
            S::ExplainTable { table_name, .. } => self.describe(table_name),
            S::ShowColumns { show_options, .. } => match &show_options.show_in {
                Some(ast::ShowStatementIn {
                    parent_name: Some(n),
                    ..
                }) => self.describe(n),
                _ => Err(unsupported(stmt)),
            },
            S::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => {
                self.end_trx(true)?;
                let db = db_name.to_string().trim_matches('`').to_string();
                let _ddl = self.server.catalog.ddl.lock().expect("poisoned");
                if self.server.catalog.has_database(&db) {
                    if *if_not_exists {
                        return Ok(Output::ok());
                    }
                    return Err(SqlError::new(
                        ER_DB_CREATE_EXISTS,
                        format!("Can't create database '{db}'; database exists"),
                    ));
                }
                self.server.catalog.create_database(&db)?;
                Ok(Output::affected(1))
            }
            S::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => {
                let name = ast::ObjectName::from(vec![ast::Ident::new(
                    schema_name.to_string().trim_matches('`'),
                )]);
                let again = S::CreateDatabase {
                    db_name: name,
                    if_not_exists: *if_not_exists,
                    location: None,
                    managed_location: None,
                    or_replace: false,
                    transient: false,
                    clone: None,
                    data_retention_time_in_days: None,
                    max_data_extension_time_in_days: None,
                    external_volume: None,
                    catalog: None,
                    replace_invalid_characters: None,
                    default_ddl_collation: None,
                    storage_serialization_policy: None,
                    comment: None,
                    catalog_sync: None,
                    catalog_sync_namespace_mode: None,
                    catalog_sync_namespace_flatten_delimiter: None,
                    with_tags: None,
                    with_contacts: None,
                };
                self.other(&again)
            }
            S::Drop {
                object_type,
                if_exists,
                names,
                ..
            } => {
                self.end_trx(true)?;
                match object_type {
                    ast::ObjectType::Table => self.drop_tables(names, *if_exists),
                    ast::ObjectType::Schema | ast::ObjectType::Database => {
                        let db = names
                            .first()
                            .map(|n| n.to_string().trim_matches('`').to_string())
                            .unwrap_or_default();
                        self.drop_database(&db, *if_exists)
                    }
                    other => Err(unsupported(format!("DROP {other}"))),
                }
            }
            S::CreateTable(ct) => {
                self.end_trx(true)?;
                self.create_table(ct)
            }
            S::CreateIndex(ci) => {
                self.end_trx(true)?;
                let name = ci
                    .name
                    .as_ref()
                    .map(|n| n.to_string().trim_matches('`').to_string());
                self.create_index(&ci.table_name, name, &ci.columns, ci.unique)
            }
            S::Flush { .. } | S::LockTables { .. } | S::UnlockTables => Ok(Output::ok()),
            S::Query(_) | S::Insert(_) | S::Update { .. } | S::Delete(_) => {
                unreachable!("planned statements do not get here")
            }
            other => Err(unsupported(other)),
        }
    }

    fn describe(&mut self, name: &ast::ObjectName) -> Result<Output, SqlError> {
        let (db, tn) = object_name(name, self)?;
        let e = self
            .server
            .catalog
            .table(&db, &tn)
            .ok_or_else(|| no_table(&db, &tn))?;
        let s = &e.schema;
        let rows = s
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let key = if s.primary_key.contains(&i) {
                    "PRI"
                } else if s.indexes.iter().any(|x| x.columns[0] == i && x.unique) {
                    "UNI"
                } else if s.indexes.iter().any(|x| x.columns[0] == i) {
                    "MUL"
                } else {
                    ""
                };
                vec![
                    t(c.name.clone()),
                    t(type_name(&c.ty)),
                    t(if c.nullable { "YES" } else { "NO" }),
                    t(key),
                    c.default.as_ref().map_or(Value::Null, |d| {
                        d.to_text().map_or(Value::Null, Value::Bytes)
                    }),
                    t(if c.auto_increment {
                        "auto_increment"
                    } else {
                        ""
                    }),
                ]
            })
            .collect();
        Ok(Output::Rows {
            columns: ["Field", "Type", "Null", "Key", "Default", "Extra"]
                .iter()
                .map(|n| text_col(n))
                .collect(),
            rows,
        })
    }

    fn set(&mut self, set: &ast::Set) -> Result<Output, SqlError> {
        use ast::Set as St;
        match set {
            St::SetNames {
                charset_name,
                collation_name,
            } => {
                let cs = charset_name.value.to_ascii_lowercase();
                self.collation = collation_name
                    .clone()
                    .map(|c| c.trim_matches('\'').to_ascii_lowercase())
                    .unwrap_or_else(|| default_collation(&cs).to_string());
                self.character_set = cs;
                Ok(Output::ok())
            }
            St::SetNamesDefault {} => {
                self.character_set = "utf8mb4".into();
                self.collation = "utf8mb4_general_ci".into();
                Ok(Output::ok())
            }
            St::SingleAssignment {
                scope,
                variable,
                values,
                ..
            } => {
                let v = values
                    .first()
                    .ok_or_else(|| plan::err_parse("SET without a value"))?;
                self.set_one(scope.as_ref(), &variable.to_string(), v)
            }
            St::MultipleAssignments { assignments } => {
                for a in assignments {
                    self.set_one(a.scope.as_ref(), &a.name.to_string(), &a.value)?;
                }
                Ok(Output::ok())
            }
            St::SetTransaction { .. } => Ok(Output::ok()),
            other => Err(unsupported(other)),
        }
    }

    fn set_one(
        &mut self,
        scope: Option<&ast::ContextModifier>,
        name: &str,
        value: &ast::Expr,
    ) -> Result<Output, SqlError> {
        let mut global = matches!(scope, Some(ast::ContextModifier::Global));
        let mut name = name.trim_start_matches("@@").to_ascii_lowercase();
        for (prefix, is_global) in [("global.", true), ("session.", false), ("local.", false)] {
            if let Some(n) = name.strip_prefix(prefix) {
                name = n.to_string();
                global |= is_global;
            }
        }
        if name.starts_with('@') {
            return Err(unsupported("user variables"));
        }
        if let Some((_, g)) = GLOBALS.iter().find(|(n, _)| *n == name) {
            if !global && matches!(g, Global::Setting(..) | Global::Durability) {
                return Err(SqlError::new(
                    ER_GLOBAL_VARIABLE,
                    format!(
                        "Variable '{name}' is a GLOBAL variable and should be set with SET GLOBAL"
                    ),
                ));
            }
            let mut planner = Planner::new(&self.server.catalog, self);
            let v = match value {
                ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("on") => Value::Int(1),
                ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("off") => Value::Int(0),
                e => planner.expr_const(e)?.eval_const(&[])?,
            };
            g.set(&self.server, &name, &v)?;
            return Ok(Output::ok());
        }
        let word = set_word(value);
        match name.as_str() {
            "autocommit" => match word.as_str() {
                "1" | "on" | "true" => {
                    if !self.autocommit {
                        self.end_trx(true)?;
                    }
                    self.autocommit = true;
                }
                "0" | "off" | "false" => self.autocommit = false,
                _ => {
                    return Err(SqlError::new(
                        ER_WRONG_VALUE_FOR_VAR,
                        format!("Variable 'autocommit' can't be set to the value of '{word}'"),
                    ))
                }
            },
            "names" => {
                self.collation = default_collation(&word).to_string();
                self.character_set = word;
            }
            "character_set_client" | "character_set_connection" | "character_set_results" => {
                if word != "null" {
                    self.character_set = word;
                }
            }
            "collation_connection" => self.collation = word,
            _ => {
                let known = self.variables().iter().any(|(n, _)| *n == name)
                    || matches!(
                        name.as_str(),
                        "sql_mode"
                            | "sql_select_limit"
                            | "sql_auto_is_null"
                            | "sql_safe_updates"
                            | "foreign_key_checks"
                            | "unique_checks"
                            | "transaction_isolation"
                            | "tx_isolation"
                            | "transaction_read_only"
                            | "time_zone"
                            | "wait_timeout"
                            | "interactive_timeout"
                            | "net_write_timeout"
                            | "net_read_timeout"
                            | "sql_quote_show_create"
                            | "group_concat_max_len"
                            | "max_execution_time"
                            | "session_track_schema"
                            | "session_track_system_variables"
                            | "session_track_state_change"
                    );
                if !known {
                    return Err(SqlError::new(
                        ER_UNKNOWN_SYSTEM_VARIABLE,
                        format!("Unknown system variable '{name}'"),
                    ));
                }
            }
        }
        Ok(Output::ok())
    }

    fn drop_database(&mut self, db: &str, if_exists: bool) -> Result<Output, SqlError> {
        let cat = &self.server.catalog;
        let _ddl = cat.ddl.lock().expect("poisoned");
        if !cat.has_database(db) {
            if if_exists {
                return Ok(Output::ok());
            }
            return Err(SqlError::new(
                ER_DB_DROP_EXISTS,
                format!("Can't drop database '{db}'; database doesn't exist"),
            ));
        }
        let tables = cat.tables_of(db);
        let timeout = self.lock_timeout();
        let mut locked: Vec<Arc<TableEntry>> = Vec::new();
        for e in &tables {
            if let Err(err) = e.mdl.exclusive(timeout) {
                for l in locked {
                    l.mdl.release_exclusive();
                }
                return Err(err);
            }
            locked.push(e.clone());
        }
        let r = cat.drop_database(db);
        for l in locked {
            l.mdl.release_exclusive();
        }
        r?;
        if self.database.as_deref() == Some(db) {
            self.database = None;
        }
        Ok(Output::affected(tables.len() as u64))
    }

    fn drop_tables(
        &mut self,
        names: &[ast::ObjectName],
        if_exists: bool,
    ) -> Result<Output, SqlError> {
        let cat = &self.server.catalog;
        let _ddl = cat.ddl.lock().expect("poisoned");
        let mut missing = Vec::new();
        for n in names {
            let (db, tn) = object_name(n, self)?;
            let Some(e) = cat.table(&db, &tn) else {
                missing.push(format!("{db}.{tn}"));
                continue;
            };
            e.mdl.exclusive(self.lock_timeout())?;
            let r = cat.drop_table(&e);
            e.mdl.release_exclusive();
            r?;
        }
        if !missing.is_empty() && !if_exists {
            return Err(SqlError::new(
                ER_BAD_TABLE_ERROR,
                format!("Unknown table '{}'", missing.join(",")),
            ));
        }
        Ok(Output::ok())
    }

    fn create_table(&mut self, ct: &ast::CreateTable) -> Result<Output, SqlError> {
        if ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
            return Err(unsupported("CREATE TABLE ... AS / LIKE"));
        }
        let (db, name) = object_name(&ct.name, self)?;
        let cat = &self.server.catalog;
        if !cat.has_database(&db) {
            return Err(SqlError::new(
                ER_BAD_DB_ERROR,
                format!("Unknown database '{db}'"),
            ));
        }
        if name.is_empty() || name.len() > 64 {
            return Err(SqlError::new(
                ER_WRONG_TABLE_NAME,
                format!("Incorrect table name '{name}'"),
            ));
        }
        let mut s = TableSchema {
            db: db.clone(),
            name: name.clone(),
            engine_table: 0,
            toast_table: None,
            columns: Vec::new(),
            primary_key: Vec::new(),
            indexes: Vec::new(),
        };
        let mut pending: Vec<(Option<String>, Vec<ast::IndexColumn>, bool, bool)> = Vec::new();
        for c in &ct.columns {
            if s.column(&c.name.value).is_some() {
                return Err(SqlError::new(
                    ER_DUP_FIELDNAME,
                    format!("Duplicate column name '{}'", c.name.value),
                ));
            }
            let ty = column_type(&c.data_type)?;
            let mut col = ColumnSchema {
                name: c.name.value.clone(),
                ty,
                nullable: true,
                auto_increment: false,
                default: None,
            };
            let mut default_expr = None;
            for o in &c.options {
                match &o.option {
                    ast::ColumnOption::Null => col.nullable = true,
                    ast::ColumnOption::NotNull => col.nullable = false,
                    ast::ColumnOption::Default(e) => default_expr = Some(e.clone()),
                    ast::ColumnOption::Unique { is_primary, .. } => {
                        let ic = vec![ast::IndexColumn {
                            column: ast::OrderByExpr {
                                expr: ast::Expr::Identifier(c.name.clone()),
                                options: ast::OrderByOptions {
                                    asc: None,
                                    nulls_first: None,
                                },
                                with_fill: None,
                            },
                            operator_class: None,
                        }];
                        pending.push((None, ic, true, *is_primary));
                    }
                    ast::ColumnOption::DialectSpecific(tokens)
                        if tokens
                            .iter()
                            .any(|t| t.to_string().eq_ignore_ascii_case("AUTO_INCREMENT")) =>
                    {
                        col.auto_increment = true
                    }
                    ast::ColumnOption::CharacterSet(_)
                    | ast::ColumnOption::Collation(_)
                    | ast::ColumnOption::Comment(_)
                    | ast::ColumnOption::OnUpdate(_) => {}
                    other => return Err(unsupported(format!("column option {other}"))),
                }
            }
            if let Some(e) = default_expr {
                let mut planner = Planner::new(cat, self);
                let v = planner.expr_const(&e)?.eval_const(&[])?;
                if v.is_null() {
                    if !col.nullable {
                        return Err(SqlError::new(
                            ER_INVALID_DEFAULT,
                            format!("Invalid default value for '{}'", col.name),
                        ));
                    }
                } else {
                    col.default = Some(v.coerce(&ty).map_err(|_| {
                        SqlError::new(
                            ER_INVALID_DEFAULT,
                            format!("Invalid default value for '{}'", col.name),
                        )
                    })?);
                }
            }
            if col.auto_increment
                && !matches!(
                    ty,
                    ColumnType::TinyInt { .. }
                        | ColumnType::SmallInt { .. }
                        | ColumnType::Int { .. }
                        | ColumnType::BigInt { .. }
                )
            {
                return Err(SqlError::new(
                    ER_WRONG_FIELD_SPEC,
                    format!("Incorrect column specifier for column '{}'", col.name),
                ));
            }
            s.columns.push(col);
        }
        if s.columns.is_empty() {
            return Err(SqlError::new(
                ER_TABLE_MUST_HAVE_COLUMNS,
                "A table must have at least 1 column",
            ));
        }
        for c in &ct.constraints {
            match c {
                ast::TableConstraint::PrimaryKey { columns, .. } => {
                    pending.push((None, columns.clone(), true, true))
                }
                ast::TableConstraint::Unique {
                    name,
                    index_name,
                    columns,
                    ..
                } => pending.push((
                    index_name
                        .as_ref()
                        .or(name.as_ref())
                        .map(|i| i.value.clone()),
                    columns.clone(),
                    true,
                    false,
                )),
                ast::TableConstraint::Index { name, columns, .. } => pending.push((
                    name.as_ref().map(|i| i.value.clone()),
                    columns.clone(),
                    false,
                    false,
                )),
                other => return Err(unsupported(other)),
            }
        }
        for (iname, cols, unique, primary) in pending {
            let cols = index_columns(&s, &cols)?;
            if primary {
                if !s.primary_key.is_empty() {
                    return Err(SqlError::new(
                        ER_MULTIPLE_PRI_KEY,
                        "Multiple primary key defined",
                    ));
                }
                for &c in &cols {
                    s.columns[c].nullable = false;
                }
                s.primary_key = cols;
            } else {
                add_index(&mut s, iname, cols, unique)?;
            }
        }
        if let Some(a) = s.auto_increment_column() {
            let keyed =
                s.primary_key.first() == Some(&a) || s.indexes.iter().any(|i| i.columns[0] == a);
            if !keyed || s.columns.iter().filter(|c| c.auto_increment).count() > 1 {
                return Err(SqlError::new(
                    ER_WRONG_AUTO_KEY,
                    "Incorrect table definition; there can be only one auto column and it \
                     must be defined as a key",
                ));
            }
        }
        check_key_sizes(&s, self.server.engine().store().pool().page_size())?;
        let _ddl = cat.ddl.lock().expect("poisoned");
        if cat.table(&db, &name).is_some() {
            if ct.if_not_exists {
                return Ok(Output::ok());
            }
            return Err(SqlError::new(
                ER_TABLE_EXISTS_ERROR,
                format!("Table '{name}' already exists"),
            ));
        }
        let with_toast = toast::needs_toast(&s, self.page_size());
        cat.create_table(s, with_toast)?;
        Ok(Output::ok())
    }

    /// CREATE INDEX: the table is rebuilt with the new index (rows copied to
    /// a new engine table in batches, then the catalog switches to it in
    /// one transaction) while its exclusive metadata lock keeps writers out.
    fn create_index(
        &mut self,
        table: &ast::ObjectName,
        name: Option<String>,
        cols: &[ast::IndexColumn],
        unique: bool,
    ) -> Result<Output, SqlError> {
        let (db, tn) = object_name(table, self)?;
        let cat = &self.server.catalog;
        let _ddl = cat.ddl.lock().expect("poisoned");
        let old = cat.table(&db, &tn).ok_or_else(|| no_table(&db, &tn))?;
        let mut s = (*old.schema).clone();
        let cols = index_columns(&s, cols)?;
        add_index(&mut s, name, cols, unique)?;
        check_key_sizes(&s, self.server.engine().store().pool().page_size())?;
        old.mdl.exclusive(self.lock_timeout())?;
        let r = self.rebuild(&old, s);
        old.mdl.release_exclusive();
        r?;
        Ok(Output::ok())
    }

    /// Copies the rows of `old` into a new engine table for schema `s`, then
    /// switches the catalog to it. The rows keep their pointers to values
    /// out of line: the new schema keeps the toast table (a table from
    /// before toast tables that needs one gets it here), and only the old
    /// engine table is dropped.
    fn rebuild(&self, old: &TableEntry, mut s: TableSchema) -> Result<(), SqlError> {
        let cat = &self.server.catalog;
        let engine = self.server.engine();
        let page_size = self.page_size();
        s.engine_table = engine.create_table(&s.engine_keys()).map_err(engine_err)?;
        let new_toast = if s.toast_table.is_none() && toast::needs_toast(&s, page_size) {
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
}

impl Drop for Session {
    fn drop(&mut self) {
        // A connection that goes away rolls back what it left open.
        let _ = self.end_trx(false);
    }
}

fn add_index(
    s: &mut TableSchema,
    name: Option<String>,
    cols: Vec<usize>,
    unique: bool,
) -> Result<(), SqlError> {
    if cols.is_empty() {
        return Err(plan::err_parse("an index needs columns"));
    }
    let name = name.unwrap_or_else(|| {
        let base = s.columns[cols[0]].name.clone();
        let mut n = base.clone();
        let mut i = 2;
        while s.indexes.iter().any(|x| x.name.eq_ignore_ascii_case(&n)) {
            n = format!("{base}_{i}");
            i += 1;
        }
        n
    });
    if s.indexes.iter().any(|x| x.name.eq_ignore_ascii_case(&name)) {
        return Err(SqlError::new(
            ER_DUP_KEYNAME,
            format!("Duplicate key name '{name}'"),
        ));
    }
    if s.indexes.len() >= 32 {
        return Err(SqlError::new(
            ER_TOO_MANY_KEYS,
            "Too many keys specified; max 32 keys allowed",
        ));
    }
    s.indexes.push(IndexSchema {
        name,
        columns: cols,
        unique,
    });
    Ok(())
}

/// The most bytes a key of `ty` can take in the key encoding.
fn max_key_bytes(ty: &ColumnType) -> usize {
    match ty {
        ColumnType::Char(n) | ColumnType::VarChar(n) => (*n as usize * 4) * 9 / 8 + 10,
        ColumnType::Text | ColumnType::Blob => usize::MAX / 4,
        _ => 20,
    }
}

/// Index entries must fit the B+tree's record limit (a page / 8): MySQL's
/// 1071 "Specified key was too long" when they cannot.
fn check_key_sizes(s: &TableSchema, page_size: usize) -> Result<(), SqlError> {
    let limit = page_size / 8 - 64;
    let pk: usize = if s.primary_key.is_empty() {
        8
    } else {
        s.primary_key
            .iter()
            .map(|&c| max_key_bytes(&s.columns[c].ty))
            .sum()
    };
    let too_long = |n: usize| {
        SqlError::new(
            ER_TOO_LONG_KEY,
            format!("Specified key was too long; max key length is {limit} bytes (needed {n})"),
        )
    };
    if pk > limit {
        return Err(too_long(pk));
    }
    for i in &s.indexes {
        let n: usize = i
            .columns
            .iter()
            .map(|&c| max_key_bytes(&s.columns[c].ty))
            .fold(pk, usize::saturating_add);
        if n > limit {
            return Err(too_long(n));
        }
    }
    Ok(())
}

fn type_name(ty: &ColumnType) -> String {
    match ty {
        ColumnType::TinyInt { unsigned } => {
            format!("tinyint{}", if *unsigned { " unsigned" } else { "" })
        }
        ColumnType::SmallInt { unsigned } => {
            format!("smallint{}", if *unsigned { " unsigned" } else { "" })
        }
        ColumnType::Int { unsigned } => format!("int{}", if *unsigned { " unsigned" } else { "" }),
        ColumnType::BigInt { unsigned } => {
            format!("bigint{}", if *unsigned { " unsigned" } else { "" })
        }
        ColumnType::Double => "double".into(),
        ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        ColumnType::Char(n) => format!("char({n})"),
        ColumnType::VarChar(n) => format!("varchar({n})"),
        ColumnType::Text => "text".into(),
        ColumnType::Blob => "blob".into(),
        ColumnType::DateTime => "datetime".into(),
        ColumnType::Timestamp => "timestamp".into(),
    }
}

fn text_of(v: &Value) -> String {
    v.to_text()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn like_filter(f: &Option<ast::ShowStatementFilter>) -> Result<Option<String>, SqlError> {
    match f {
        None => Ok(None),
        Some(ast::ShowStatementFilter::Like(p)) | Some(ast::ShowStatementFilter::NoKeyword(p)) => {
            Ok(Some(p.clone()))
        }
        Some(other) => Err(unsupported(other)),
    }
}

/// `?` outside quotes, backquotes and comments.
fn count_placeholders(sql: &str) -> usize {
    let mut n = 0;
    let mut quote = None;
    for c in sql.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            None if c == '?' => n += 1,
            None => {}
        }
    }
    n
}

fn aggregate(
    p: &SelectPlan,
    rows: &[Vec<Value>],
    params: &[Value],
) -> Result<Vec<Value>, SqlError> {
    let mut out = Vec::with_capacity(p.aggregates.len());
    for a in &p.aggregates {
        let mut vals = Vec::new();
        let mut count = 0u64;
        for r in rows {
            match &a.arg {
                None => count += 1,
                Some(e) => {
                    let v = e.eval(&Ctx {
                        row: r,
                        params,
                        aggregates: &[],
                    })?;
                    if !v.is_null() {
                        vals.push(v);
                    }
                }
            }
        }
        if a.distinct {
            let mut seen = HashSet::new();
            vals.retain(|v| seen.insert(v.to_text()));
        }
        let v = match a.kind {
            AggKind::Count => Value::Int(if a.arg.is_none() {
                count
            } else {
                vals.len() as u64
            } as i64),
            AggKind::Min | AggKind::Max => {
                let mut best: Option<Value> = None;
                for v in vals {
                    let better = match &best {
                        None => true,
                        Some(b) => {
                            let o = compare_values(&v, b);
                            if a.kind == AggKind::Min {
                                o == CmpOrdering::Less
                            } else {
                                o == CmpOrdering::Greater
                            }
                        }
                    };
                    if better {
                        best = Some(v);
                    }
                }
                best.unwrap_or(Value::Null)
            }
            AggKind::Sum | AggKind::Avg => {
                if vals.is_empty() {
                    Value::Null
                } else {
                    sum_avg(a.kind, &vals)?
                }
            }
        };
        out.push(v);
    }
    Ok(out)
}

/// SUM exact over integers and decimals (as MySQL's DECIMAL result), as a
/// double when any input is one; AVG as a double.
fn sum_avg(kind: AggKind, vals: &[Value]) -> Result<Value, SqlError> {
    let n = vals.len() as f64;
    let exact = vals
        .iter()
        .all(|v| matches!(v, Value::Int(_) | Value::UInt(_) | Value::Decimal { .. }));
    if kind == AggKind::Avg || !exact {
        let s: f64 = vals.iter().map(crate::expr::as_double).sum();
        return Ok(Value::Double(if kind == AggKind::Avg { s / n } else { s }));
    }
    let scale = vals
        .iter()
        .map(|v| match v {
            Value::Decimal { scale, .. } => *scale,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    let mut sum: i128 = 0;
    for v in vals {
        let (u, s) = match v {
            Value::Int(i) => (i128::from(*i), 0),
            Value::UInt(u) => (i128::from(*u), 0),
            Value::Decimal { unscaled, scale } => (*unscaled, *scale),
            _ => unreachable!("exact values only"),
        };
        let scaled = 10i128
            .checked_pow(u32::from(scale - s))
            .and_then(|m| u.checked_mul(m))
            .ok_or_else(|| {
                SqlError::new(
                    ER_DATA_OUT_OF_RANGE,
                    "DECIMAL value is out of range in 'sum'",
                )
            })?;
        sum = sum.checked_add(scaled).ok_or_else(|| {
            SqlError::new(
                ER_DATA_OUT_OF_RANGE,
                "DECIMAL value is out of range in 'sum'",
            )
        })?;
    }
    Ok(Value::Decimal {
        unscaled: sum,
        scale,
    })
}

#[cfg(test)]
mod tests;
