//! One client connection's session: the state a connection carries between
//! statements (current database, session variables) and the statement
//! executor. A `Session` lives on a dedicated OS thread ([`SessionHandle`]
//! spawns it), never on an async worker: engine calls block (row locks, log
//! flushes), and a blocked async worker would stall every connection it
//! serves. The protocol side sends each command over a channel and awaits
//! the reply on a oneshot.
//!
//! TEMPORARY: there is no SQL parser yet. `Session::query` recognises, by
//! case-insensitive matching on the trimmed text, exactly the statements
//! clients send on connect and for the mariadb client's `status` command
//! (`SELECT @@var, ...`, `SELECT DATABASE(), USER()`, `SET ...`, `SHOW
//! VARIABLES LIKE ...`, `BEGIN`/`COMMIT`/`ROLLBACK`, ...). Everything else
//! is error 1235 ER_NOT_SUPPORTED_YET. The SQL layer (crates/sql) replaces
//! this matching.

use millrace_trx::Engine;
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The version the server announces in the handshake and in `@@version`.
/// Clients and connectors gate features on the leading MySQL version.
pub const SERVER_VERSION: &str = "8.0.36-millrace";
/// `@@version_comment`: what the mariadb client prints after the version.
pub const VERSION_COMMENT: &str = "millrace";

/// MySQL error codes the session returns (their SQLSTATEs follow MySQL's
/// table; the protocol side looks them up by code).
pub mod codes {
    /// ER_NOT_SUPPORTED_YET, SQLSTATE 42000.
    pub const NOT_SUPPORTED_YET: u16 = 1235;
    /// ER_UNKNOWN_SYSTEM_VARIABLE, SQLSTATE HY000.
    pub const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
    /// ER_EMPTY_QUERY, SQLSTATE 42000.
    pub const EMPTY_QUERY: u16 = 1065;
}

/// A column of a result set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: String,
    pub kind: ColumnKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// BIGINT.
    Int,
    /// VARCHAR (utf8mb4).
    Text,
}

/// One value of a result row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
}

/// A statement's error: a MySQL error code (its SQLSTATE is MySQL's for
/// that code) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    pub code: u16,
    pub message: String,
}

/// What a statement returns to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryOutcome {
    /// An OK packet.
    Ok {
        affected_rows: u64,
        last_insert_id: u64,
    },
    /// A result set.
    Rows {
        columns: Vec<ColumnDef>,
        rows: Vec<Vec<Value>>,
    },
    Err(SqlError),
}

impl QueryOutcome {
    fn ok() -> Self {
        QueryOutcome::Ok {
            affected_rows: 0,
            last_insert_id: 0,
        }
    }

    fn err(code: u16, message: impl Into<String>) -> Self {
        QueryOutcome::Err(SqlError {
            code,
            message: message.into(),
        })
    }
}

/// The session state that OK packets report in their status flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionStatus {
    pub autocommit: bool,
    pub in_transaction: bool,
}

/// Who is connected: fixed for the life of the connection.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub connection_id: u32,
    pub user: String,
    /// The client's host as MySQL names it in `USER()` (an IP address, or
    /// `localhost` over the Unix socket).
    pub host: String,
}

/// Per connection; runs on the connection's OS thread.
pub struct Session {
    /// What statements will run against; unused until the SQL layer lands.
    #[allow(dead_code)]
    engine: Arc<Engine>,
    conn: ConnInfo,
    database: Option<String>,
    character_set: String,
    collation: String,
    autocommit: bool,
    in_transaction: bool,
}

impl Session {
    pub fn new(engine: Arc<Engine>, conn: ConnInfo) -> Self {
        Session {
            engine,
            conn,
            database: None,
            character_set: "utf8mb4".into(),
            collation: "utf8mb4_general_ci".into(),
            autocommit: true,
            in_transaction: false,
        }
    }

    pub fn status(&self) -> SessionStatus {
        SessionStatus {
            autocommit: self.autocommit,
            in_transaction: self.in_transaction,
        }
    }

    /// COM_INIT_DB (and `USE db`): any name is accepted for now, as there is
    /// no catalog of databases yet.
    pub fn init_db(&mut self, database: &str) -> QueryOutcome {
        self.database = Some(database.to_string());
        QueryOutcome::ok()
    }

    /// Executes one statement (COM_QUERY). TEMPORARY: pattern matching, see
    /// the module documentation.
    pub fn query(&mut self, sql: &str) -> QueryOutcome {
        let stmt = sql.trim().trim_end_matches(';').trim_end();
        let lower = stmt.to_ascii_lowercase();
        let words: Vec<&str> = lower.split_whitespace().collect();
        match words.as_slice() {
            [] => QueryOutcome::err(codes::EMPTY_QUERY, "Query was empty"),
            ["select", ..] => self.select(stmt),
            ["set", ..] => self.set(&stmt["set".len()..]),
            ["begin"] | ["begin", "work"] | ["start", "transaction", ..] => {
                self.in_transaction = true;
                QueryOutcome::ok()
            }
            ["commit"] | ["commit", "work"] | ["rollback"] | ["rollback", "work"] => {
                self.in_transaction = false;
                QueryOutcome::ok()
            }
            ["show", "databases"] | ["show", "schemas"] => QueryOutcome::Rows {
                columns: vec![text_column("Database")],
                rows: vec![vec![Value::Text("information_schema".into())]],
            },
            ["show", rest @ ..] if show_variables(rest).is_some() => {
                let pattern = show_variables(rest).flatten();
                let pattern = match pattern {
                    Some(p) => match unquote(&stmt[stmt.len() - p.len()..]) {
                        Some(p) => Some(p),
                        None => return not_supported(stmt),
                    },
                    None => None,
                };
                let rows = self
                    .variables()
                    .into_iter()
                    .filter(|(name, _)| pattern.as_ref().is_none_or(|p| like(p, name)))
                    .map(|(name, value)| vec![Value::Text(name.into()), value_as_text(value)])
                    .collect();
                QueryOutcome::Rows {
                    columns: vec![text_column("Variable_name"), text_column("Value")],
                    rows,
                }
            }
            ["show", rest @ ..] if show_status(rest).is_some() => {
                let pattern = match show_status(rest).flatten() {
                    Some(p) => match unquote(&stmt[stmt.len() - p.len()..]) {
                        Some(p) => Some(p),
                        None => return not_supported(stmt),
                    },
                    None => None,
                };
                // The engine's metrics registry: counters and gauges of
                // every layer (log_*, buffer_*, trx_*, lock_*).
                let rows = self
                    .engine
                    .registry()
                    .snapshot()
                    .into_iter()
                    .filter(|m| pattern.as_ref().is_none_or(|p| like(p, m.name)))
                    .map(|m| vec![Value::Text(m.name.into()), Value::Text(m.value.to_string())])
                    .collect();
                QueryOutcome::Rows {
                    columns: vec![text_column("Variable_name"), text_column("Value")],
                    rows,
                }
            }
            _ => not_supported(stmt),
        }
    }

    /// `SELECT item [AS alias], ... [LIMIT n]` where each item is `@@var`,
    /// one of the functions clients call on connect, or an integer.
    fn select(&mut self, stmt: &str) -> QueryOutcome {
        let mut list = stmt["select".len()..].trim();
        let mut limit = None;
        let lower = list.to_ascii_lowercase();
        if let Some(at) = lower.rfind(" limit ") {
            match list[at + " limit ".len()..].trim().parse::<u64>() {
                Ok(n) => {
                    limit = Some(n);
                    list = list[..at].trim_end();
                }
                Err(_) => return not_supported(stmt),
            }
        }
        let mut columns = Vec::new();
        let mut row = Vec::new();
        for item in list.split(',') {
            let item = item.trim();
            let (expr, alias) = split_alias(item);
            let (kind, value) = match self.select_item(expr) {
                Some(Ok(v)) => v,
                Some(Err(e)) => return QueryOutcome::Err(e),
                None => return not_supported(stmt),
            };
            columns.push(ColumnDef {
                name: alias.unwrap_or(expr).to_string(),
                kind,
            });
            row.push(value);
        }
        let rows = if limit == Some(0) { vec![] } else { vec![row] };
        QueryOutcome::Rows { columns, rows }
    }

    fn select_item(&self, expr: &str) -> Option<Result<(ColumnKind, Value), SqlError>> {
        let lower = expr.to_ascii_lowercase();
        if let Some(var) = lower.strip_prefix("@@") {
            let var = ["session.", "local.", "global."]
                .iter()
                .find_map(|scope| var.strip_prefix(scope))
                .unwrap_or(var);
            return Some(match self.variable(var) {
                Some(v @ Value::Int(_)) => Ok((ColumnKind::Int, v)),
                Some(v) => Ok((ColumnKind::Text, v)),
                None => Err(SqlError {
                    code: codes::UNKNOWN_SYSTEM_VARIABLE,
                    message: format!("Unknown system variable '{var}'"),
                }),
            });
        }
        let compact: String = lower.chars().filter(|c| !c.is_whitespace()).collect();
        let text = |s: String| Some(Ok((ColumnKind::Text, Value::Text(s))));
        match compact.as_str() {
            "database()" | "schema()" => Some(Ok((
                ColumnKind::Text,
                self.database
                    .as_ref()
                    .map_or(Value::Null, |d| Value::Text(d.clone())),
            ))),
            "user()" | "session_user()" | "system_user()" => {
                text(format!("{}@{}", self.conn.user, self.conn.host))
            }
            "current_user()" | "current_user" => text(format!("{}@%", self.conn.user)),
            "connection_id()" => Some(Ok((
                ColumnKind::Int,
                Value::Int(i64::from(self.conn.connection_id)),
            ))),
            "version()" => text(SERVER_VERSION.into()),
            _ => compact
                .parse::<i64>()
                .ok()
                .map(|n| Ok((ColumnKind::Int, Value::Int(n)))),
        }
    }

    /// `SET ...`: `SET NAMES cs [COLLATE c]` and `SET [SESSION] autocommit
    /// = 0|1` change what the session reports; every other `SET` is accepted
    /// and ignored for now.
    fn set(&mut self, rest: &str) -> QueryOutcome {
        let rest = rest.trim();
        let lower = rest.to_ascii_lowercase();
        let words: Vec<&str> = lower.split_whitespace().collect();
        if let ["names", charset, tail @ ..] = words.as_slice() {
            let charset = charset.trim_matches(|c| c == '\'' || c == '"' || c == '`');
            self.character_set = charset.to_string();
            self.collation = match tail {
                ["collate", c, ..] => c.trim_matches(|c| c == '\'' || c == '"' || c == '`'),
                _ => default_collation(charset),
            }
            .to_string();
            return QueryOutcome::ok();
        }
        for assignment in lower.split(',') {
            if let Some((name, value)) = assignment.split_once('=') {
                let name = name.trim().trim_start_matches("@@");
                let name = ["session ", "session.", "local ", "local."]
                    .iter()
                    .find_map(|p| name.strip_prefix(p))
                    .unwrap_or(name)
                    .trim();
                if name == "autocommit" {
                    match value.trim() {
                        "1" | "on" | "true" => {
                            self.autocommit = true;
                            self.in_transaction = false;
                        }
                        "0" | "off" | "false" => self.autocommit = false,
                        _ => {}
                    }
                }
            }
        }
        QueryOutcome::ok()
    }

    fn variable(&self, name: &str) -> Option<Value> {
        self.variables()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// The system variables the session reports, sorted by name (SHOW
    /// VARIABLES order).
    fn variables(&self) -> Vec<(&'static str, Value)> {
        let t = |s: &str| Value::Text(s.to_string());
        let cs = t(&self.character_set);
        let coll = t(&self.collation);
        let mut vars = vec![
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
        ];
        vars.sort_by_key(|(n, _)| *n);
        vars
    }
}

fn text_column(name: &str) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        kind: ColumnKind::Text,
    }
}

fn value_as_text(v: Value) -> Value {
    match v {
        Value::Int(n) => Value::Text(n.to_string()),
        v => v,
    }
}

fn not_supported(stmt: &str) -> QueryOutcome {
    let shown: String = stmt.chars().take(200).collect();
    QueryOutcome::err(
        codes::NOT_SUPPORTED_YET,
        format!(
            "This version of millrace doesn't yet support '{shown}' (SQL is not implemented yet)"
        ),
    )
}

/// `SHOW [SESSION|GLOBAL|LOCAL] VARIABLES [LIKE 'p']` (lowercased words):
/// `Some(None)` without a pattern, `Some(Some(p))` with one (`p` is the
/// pattern word as written, quotes included), `None` if not this statement.
fn show_variables<'a>(words: &[&'a str]) -> Option<Option<&'a str>> {
    let words = match words {
        ["session" | "global" | "local", rest @ ..] => rest,
        rest => rest,
    };
    match words {
        ["variables"] => Some(None),
        ["variables", "like", p] => Some(Some(p)),
        _ => None,
    }
}

/// `[GLOBAL|SESSION] STATUS [LIKE p]`: Some(pattern word) if it is one.
fn show_status<'a>(words: &[&'a str]) -> Option<Option<&'a str>> {
    let words = match words {
        ["session" | "global" | "local", rest @ ..] => rest,
        rest => rest,
    };
    match words {
        ["status"] => Some(None),
        ["status", "like", p] => Some(Some(p)),
        _ => None,
    }
}

/// A single- or double-quoted string literal without escapes.
fn unquote(s: &str) -> Option<String> {
    let s = s.trim();
    let q = s.chars().next()?;
    if (q == '\'' || q == '"') && s.len() >= 2 && s.ends_with(q) {
        let inner = &s[1..s.len() - 1];
        (!inner.contains(q)).then(|| inner.to_string())
    } else {
        None
    }
}

/// `expr [AS] alias` -> (expr, alias); backquoted or quoted aliases are
/// unquoted.
fn split_alias(item: &str) -> (&str, Option<&str>) {
    fn strip(a: &str) -> &str {
        a.trim().trim_matches(|c| c == '`' || c == '\'' || c == '"')
    }
    if let Some(body) = item.strip_suffix('`') {
        if let Some(open) = body.rfind('`') {
            let expr = body[..open].trim_end();
            let lower = expr.to_ascii_lowercase();
            let expr = match lower.strip_suffix(" as") {
                Some(e) => expr[..e.len()].trim_end(),
                None => expr,
            };
            if !expr.is_empty() {
                return (expr, Some(&body[open + 1..]));
            }
        }
    }
    let lower = item.to_ascii_lowercase();
    if let Some(at) = lower.find(" as ") {
        return (item[..at].trim(), Some(strip(&item[at + 4..])));
    }
    match item.rsplit_once(char::is_whitespace) {
        Some((expr, alias)) if !expr.trim().is_empty() => (expr.trim(), Some(strip(alias))),
        _ => (item, None),
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

/// SQL LIKE, case-insensitive: `%` any run, `_` one character, `\` escapes.
fn like(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('%', rest)) => (0..=t.len()).any(|i| go(rest, &t[i..])),
            Some(('_', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some(('\\', rest)) if !rest.is_empty() => {
                t.first() == Some(&rest[0]) && go(&rest[1..], &t[1..])
            }
            Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    go(&p, &t)
}

enum Request {
    Query(String, oneshot::Sender<(QueryOutcome, SessionStatus)>),
    InitDb(String, oneshot::Sender<(QueryOutcome, SessionStatus)>),
}

/// The protocol side's end of a session: the session itself runs on its own
/// OS thread, which ends when the handle is dropped (after the command in
/// progress, if any).
pub struct SessionHandle {
    tx: mpsc::Sender<Request>,
}

impl SessionHandle {
    /// Starts the session's thread. `guard` is dropped when the thread ends
    /// (the server counts live sessions with it).
    pub fn spawn<G: Send + 'static>(
        engine: Arc<Engine>,
        conn: ConnInfo,
        guard: G,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name(format!("millrace-conn-{}", conn.connection_id))
            .spawn(move || {
                let _guard = guard;
                let mut session = Session::new(engine, conn);
                while let Ok(req) = rx.recv() {
                    // A reply nobody awaits any more (the connection closed)
                    // is dropped.
                    match req {
                        Request::Query(sql, reply) => {
                            let out = session.query(&sql);
                            let _ = reply.send((out, session.status()));
                        }
                        Request::InitDb(db, reply) => {
                            let out = session.init_db(&db);
                            let _ = reply.send((out, session.status()));
                        }
                    }
                }
            })?;
        Ok(SessionHandle { tx })
    }

    pub async fn query(&self, sql: &str) -> std::io::Result<(QueryOutcome, SessionStatus)> {
        self.call(|reply| Request::Query(sql.to_string(), reply))
            .await
    }

    pub async fn init_db(&self, db: &str) -> std::io::Result<(QueryOutcome, SessionStatus)> {
        self.call(|reply| Request::InitDb(db.to_string(), reply))
            .await
    }

    async fn call(
        &self,
        req: impl FnOnce(oneshot::Sender<(QueryOutcome, SessionStatus)>) -> Request,
    ) -> std::io::Result<(QueryOutcome, SessionStatus)> {
        let (reply, rx) = oneshot::channel();
        let gone = || std::io::Error::other("session thread ended");
        self.tx.send(req(reply)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_io::SimStorage;
    use millrace_metrics::Registry;
    use millrace_redo::{Durability, LogConfig, WriterThreads};
    use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
    use millrace_trx::TrxConfig;

    /// A session on a small in-memory engine.
    fn session() -> (Arc<Engine>, Session) {
        let mut cfg = TrxConfig::default();
        cfg.store.buf.page_size = 4096;
        cfg.store.buf.pool_bytes = 4 << 20;
        cfg.store.log = LogConfig {
            capacity_bytes: 8 << 20,
            buffer_bytes: 256 << 10,
            writer_threads: WriterThreads::Off,
            durability: Durability::Flush,
            ..LogConfig::default()
        };
        cfg.undo_spaces = Some(2);
        cfg.rsegs = Some(4);
        let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
        let engine = Engine::open(Arc::new(SimStorage::new()), cfg, cpu, Registry::new())
            .expect("engine open");
        let conn = ConnInfo {
            connection_id: 7,
            user: "root".into(),
            host: "127.0.0.1".into(),
        };
        (engine.clone(), Session::new(engine, conn))
    }

    fn rows(out: QueryOutcome) -> (Vec<String>, Vec<Vec<Value>>) {
        match out {
            QueryOutcome::Rows { columns, rows } => {
                (columns.into_iter().map(|c| c.name).collect(), rows)
            }
            other => panic!("expected rows, got {other:?}"),
        }
    }

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn connect_and_status_queries() {
        let (engine, mut s) = session();
        assert_eq!(
            rows(s.query("select @@version_comment limit 1")),
            (
                vec!["@@version_comment".into()],
                vec![vec![text("millrace")]]
            )
        );
        assert_eq!(
            rows(s.query("  SELECT VERSION(); ")).1,
            vec![vec![text(SERVER_VERSION)]]
        );
        assert_eq!(
            rows(s.query("select DATABASE(), USER() limit 1")),
            (
                vec!["DATABASE()".into(), "USER()".into()],
                vec![vec![Value::Null, text("root@127.0.0.1")]]
            )
        );
        assert_eq!(s.init_db("shop"), QueryOutcome::ok());
        assert_eq!(
            rows(s.query("SELECT database()")).1,
            vec![vec![text("shop")]]
        );
        assert_eq!(
            rows(s.query("SELECT CONNECTION_ID(), 1")).1,
            vec![vec![Value::Int(7), Value::Int(1)]]
        );
        assert_eq!(
            rows(s.query(
                "SELECT @@session.auto_increment_increment AS auto_increment_increment, \
                 @@character_set_client, @@max_allowed_packet"
            )),
            (
                vec![
                    "auto_increment_increment".into(),
                    "@@character_set_client".into(),
                    "@@max_allowed_packet".into()
                ],
                vec![vec![Value::Int(1), text("utf8mb4"), Value::Int(67_108_864)]]
            )
        );
        assert_eq!(s.query("SET NAMES latin1"), QueryOutcome::ok());
        assert_eq!(
            rows(s.query("SHOW VARIABLES LIKE 'collation_connection'")).1,
            vec![vec![
                text("collation_connection"),
                text("latin1_swedish_ci")
            ]]
        );
        let (_, vars) = rows(s.query("show session variables like 'character_set_%'"));
        assert_eq!(vars.len(), 7);
        assert!(vars.contains(&vec![text("character_set_client"), text("latin1")]));
        assert_eq!(
            rows(s.query("SHOW DATABASES")).1,
            vec![vec![text("information_schema")]]
        );
        engine.shutdown().unwrap();
    }

    #[test]
    fn set_and_transactions_report_status() {
        let (engine, mut s) = session();
        assert!(s.status().autocommit);
        assert_eq!(s.query("SET autocommit=0"), QueryOutcome::ok());
        assert!(!s.status().autocommit);
        assert_eq!(s.query("set sql_mode = ''"), QueryOutcome::ok());
        assert_eq!(s.query("BEGIN"), QueryOutcome::ok());
        assert!(s.status().in_transaction);
        assert_eq!(s.query("commit"), QueryOutcome::ok());
        assert!(!s.status().in_transaction);
        assert_eq!(s.query("ROLLBACK"), QueryOutcome::ok());
        assert_eq!(s.query("SET @@session.autocommit = ON"), QueryOutcome::ok());
        assert!(s.status().autocommit);
        engine.shutdown().unwrap();
    }

    #[test]
    fn everything_else_is_not_supported_yet() {
        let (engine, mut s) = session();
        for sql in [
            "CREATE TABLE t (a INT)",
            "select * from t",
            "SELECT @@x",
            "",
        ] {
            match s.query(sql) {
                QueryOutcome::Err(e) => match sql {
                    "SELECT @@x" => assert_eq!(e.code, codes::UNKNOWN_SYSTEM_VARIABLE),
                    "" => assert_eq!(e.code, codes::EMPTY_QUERY),
                    _ => {
                        assert_eq!(e.code, codes::NOT_SUPPORTED_YET, "{sql}");
                        assert!(e.message.contains(sql), "{}", e.message);
                    }
                },
                other => panic!("{sql}: {other:?}"),
            }
        }
        engine.shutdown().unwrap();
    }

    #[test]
    fn show_global_status_lists_engine_metrics() {
        let (_engine, mut s) = session();
        let (cols, log) = rows(s.query("SHOW GLOBAL STATUS LIKE 'log\\_%'"));
        assert_eq!(cols, vec!["Variable_name".to_string(), "Value".to_string()]);
        assert!(
            log.iter().any(|r| r[0] == Value::Text("log_fsyncs".into())),
            "{log:?}"
        );
        assert!(log
            .iter()
            .all(|r| matches!(&r[0], Value::Text(n) if n.starts_with("log_"))));
        let (_, all) = rows(s.query("show status"));
        assert!(all.len() > log.len());
    }

    #[test]
    fn like_matches_sql_patterns() {
        assert!(like("character_set_%", "character_set_client"));
        assert!(like("COLLATION%", "collation_server"));
        assert!(like("version", "VERSION"));
        assert!(like("v_rsion", "version"));
        assert!(like("character\\_set%", "character_set_x"));
        assert!(!like("character\\_set%", "characterXset_x"));
        assert!(!like("version", "version_comment"));
    }

    #[test]
    fn aliases_split() {
        assert_eq!(split_alias("@@a AS b"), ("@@a", Some("b")));
        assert_eq!(split_alias("@@a `b c`"), ("@@a", Some("b c")));
        assert_eq!(split_alias("@@a AS `b c`"), ("@@a", Some("b c")));
        assert_eq!(split_alias("@@a b"), ("@@a", Some("b")));
        assert_eq!(split_alias("DATABASE()"), ("DATABASE()", None));
    }
}
