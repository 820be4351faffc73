//! The opensrv-mysql `AsyncMysqlShim` of one connection: authentication,
//! then each command (COM_QUERY, COM_STMT_PREPARE/EXECUTE/CLOSE,
//! COM_INIT_DB) as a call of the connection's SQL session, its outcome
//! encoded as an OK packet, a result set or an ERR packet.

use crate::auth::{err_payload, native_password_ok};
use crate::stmt_types::StmtTypes;
use async_trait::async_trait;
use millrace_errcode::{ErrorCode, ER_ACCESS_DENIED_ERROR, ER_CON_COUNT_ERROR};
use millrace_sql::plan::{OutColumn, ResultKind};
use millrace_sql::{ConnInfo, Output, Session, SqlError, Value};
use opensrv_mysql::{
    AsyncMysqlShim, Column, ColumnFlags, ColumnType, ErrorKind, InitWriter, OkResponse,
    ParamParser, QueryResultWriter, RowWriter, StatementMetaWriter, StatusFlags,
};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWrite;

/// One connection's protocol state; the listener makes it and watches
/// `authed` and `busy`.
pub(crate) struct Shim {
    /// Parameter counts and types of this connection's prepared statements.
    pub(crate) stmt_types: Arc<Mutex<StmtTypes>>,
    pub(crate) sql: Arc<millrace_sql::Instance>,
    /// SHA1(SHA1(password)) of user root; `None`: empty password.
    pub(crate) password_stage2: Option<[u8; 20]>,
    pub(crate) conn_id: u32,
    pub(crate) salt: [u8; 20],
    pub(crate) host: String,
    pub(crate) over_limit: bool,
    /// Set by a failed authentication: the ERR packet to send instead of
    /// opensrv's own (see `crate::writer::ErrSwapWriter`).
    pub(crate) err_swap: Arc<Mutex<Option<Vec<u8>>>>,
    pub(crate) authed: Arc<AtomicBool>,
    /// A command is being executed and its reply written.
    pub(crate) busy: Arc<AtomicBool>,
    pub(crate) user: Mutex<String>,
    pub(crate) session: Option<Session>,
}

/// The session state that OK packets report in their status flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SessionStatus {
    autocommit: bool,
    in_transaction: bool,
}

fn status(s: &Session) -> SessionStatus {
    SessionStatus {
        autocommit: s.autocommit(),
        in_transaction: s.in_transaction(),
    }
}

/// Clears the busy flag when a command's handler returns or is dropped.
struct Busy<'a>(&'a AtomicBool);

impl<'a> Busy<'a> {
    fn start(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::SeqCst);
        Busy(flag)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Shim {
    /// The SQL session, made at the first command.
    fn session(&mut self) -> io::Result<&mut Session> {
        if !self.authed.load(Ordering::SeqCst) {
            // opensrv skips authentication for a handshake without a user
            // name; such a client gets nothing.
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "command before authentication",
            ));
        }
        if self.session.is_none() {
            let conn = ConnInfo {
                connection_id: self.conn_id,
                user: self.user.lock().expect("poisoned").clone(),
                host: self.host.clone(),
            };
            self.session = Some(Session::new(self.sql.clone(), conn));
        }
        Ok(self.session.as_mut().expect("just set"))
    }
}

/// opensrv's name for an error code: it writes the number and its own
/// SQLSTATE for it.
fn error_kind(code: ErrorCode) -> ErrorKind {
    ErrorKind::from(code.number())
}

fn ok_response(status: SessionStatus, affected_rows: u64, last_insert_id: u64) -> OkResponse {
    let mut flags = StatusFlags::empty();
    if status.autocommit {
        flags |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
    }
    if status.in_transaction {
        flags |= StatusFlags::SERVER_STATUS_IN_TRANS;
    }
    OkResponse {
        affected_rows,
        last_insert_id,
        status_flags: flags,
        ..OkResponse::default()
    }
}

fn protocol_column(c: &OutColumn) -> Column {
    let (coltype, colflags) = match c.kind {
        ResultKind::Int => (ColumnType::MYSQL_TYPE_LONGLONG, ColumnFlags::empty()),
        ResultKind::UInt => (ColumnType::MYSQL_TYPE_LONGLONG, ColumnFlags::UNSIGNED_FLAG),
        ResultKind::Double => (ColumnType::MYSQL_TYPE_DOUBLE, ColumnFlags::empty()),
        ResultKind::Decimal => (ColumnType::MYSQL_TYPE_NEWDECIMAL, ColumnFlags::empty()),
        ResultKind::Blob => (ColumnType::MYSQL_TYPE_BLOB, ColumnFlags::BINARY_FLAG),
        // Datetimes travel as text (also in the binary protocol).
        ResultKind::Text | ResultKind::DateTime => {
            (ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty())
        }
    };
    Column {
        table: c.table.clone(),
        column: c.name.clone(),
        coltype,
        colflags,
    }
}

/// Writes one value as its column's declared type needs it (the binary
/// protocol encodes integers and doubles by type; the rest are strings).
fn write_value<W: AsyncWrite + Send + Unpin>(
    w: &mut RowWriter<'_, W>,
    kind: ResultKind,
    v: Value,
) -> io::Result<()> {
    if v.is_null() {
        return w.write_col(None::<i64>);
    }
    match kind {
        ResultKind::Int | ResultKind::UInt => match v {
            Value::Int(i) => w.write_col(i),
            Value::UInt(u) => w.write_col(u),
            v => w.write_col(millrace_sql::expr::as_double(&v) as i64),
        },
        ResultKind::Double => w.write_col(millrace_sql::expr::as_double(&v)),
        _ => w.write_col(v.to_text().unwrap_or_default()),
    }
}

async fn write_outcome<W: AsyncWrite + Send + Unpin>(
    outcome: Result<Output, SqlError>,
    status: SessionStatus,
    results: QueryResultWriter<'_, W>,
) -> io::Result<()> {
    match outcome {
        Ok(Output::Ok {
            affected_rows,
            last_insert_id,
        }) => {
            results
                .completed(ok_response(status, affected_rows, last_insert_id))
                .await
        }
        Err(e) => {
            results
                .error(error_kind(e.code), e.message.as_bytes())
                .await
        }
        Ok(Output::Rows { columns, rows }) => {
            let cols: Vec<Column> = columns.iter().map(protocol_column).collect();
            let mut w = results.start(&cols).await?;
            for row in rows {
                for (v, c) in row.into_iter().zip(&columns) {
                    write_value(&mut w, c.kind, v)?;
                }
                w.end_row().await?;
            }
            w.finish().await
        }
    }
}

/// A parameter of COM_STMT_EXECUTE as a SQL value.
fn param_value(v: opensrv_mysql::ValueInner<'_>) -> Value {
    use opensrv_mysql::ValueInner as V;
    match v {
        V::NULL => Value::Null,
        V::Bytes(b) => Value::Bytes(b.to_vec()),
        V::Int(i) => Value::Int(i),
        V::UInt(u) => Value::UInt(u),
        V::Double(d) => Value::Double(d),
        V::Date(b) | V::Datetime(b) => {
            // Binary date: length-prefixed year(2) month day [h m s [micro(4)]].
            let g = |i: usize| b.get(i).copied().unwrap_or(0);
            let year = u16::from_le_bytes([g(0), g(1)]);
            Value::DateTime(millrace_sql::DateTime {
                year,
                month: g(2),
                day: g(3),
                hour: g(4),
                minute: g(5),
                second: g(6),
                micro: u32::from_le_bytes([g(7), g(8), g(9), g(10)]),
            })
        }
        V::Time(b) => Value::Bytes(b.to_vec()),
    }
}

#[async_trait]
impl<W: AsyncWrite + Send + Unpin> AsyncMysqlShim<W> for Shim {
    type Error = io::Error;

    fn version(&self) -> String {
        millrace_sql::SERVER_VERSION.to_string()
    }

    fn connect_id(&self) -> u32 {
        self.conn_id
    }

    fn salt(&self) -> [u8; 20] {
        self.salt
    }

    async fn authenticate(
        &self,
        _auth_plugin: &str,
        username: &[u8],
        salt: &[u8],
        auth_data: &[u8],
    ) -> bool {
        let user = String::from_utf8_lossy(username).into_owned();
        let refusal = if self.over_limit {
            Some(err_payload(ER_CON_COUNT_ERROR, "Too many connections"))
        } else if user == "root"
            && native_password_ok(self.password_stage2.as_ref(), salt, auth_data)
        {
            None
        } else {
            let using = if auth_data.is_empty() { "NO" } else { "YES" };
            Some(err_payload(
                ER_ACCESS_DENIED_ERROR,
                &format!(
                    "Access denied for user '{user}'@'{}' (using password: {using})",
                    self.host
                ),
            ))
        };
        match refusal {
            Some(packet) => {
                *self.err_swap.lock().expect("poisoned") = Some(packet);
                false
            }
            None => {
                *self.user.lock().expect("poisoned") = user;
                self.authed.store(true, Ordering::SeqCst);
                true
            }
        }
    }

    async fn on_prepare<'a>(
        &'a mut self,
        query: &'a str,
        info: StatementMetaWriter<'a, W>,
    ) -> io::Result<()> {
        let busy = self.busy.clone();
        let _busy = Busy::start(&busy);
        match self.session()?.prepare(query) {
            Ok((id, params, columns)) => {
                let count = u16::try_from(params).unwrap_or(u16::MAX);
                self.stmt_types
                    .lock()
                    .expect("poisoned")
                    .prepared(id, count);
                let params: Vec<Column> = (0..params)
                    .map(|_| Column {
                        table: String::new(),
                        column: "?".into(),
                        coltype: ColumnType::MYSQL_TYPE_VAR_STRING,
                        colflags: ColumnFlags::empty(),
                    })
                    .collect();
                let columns: Vec<Column> = columns.iter().map(protocol_column).collect();
                info.reply(id, &params, &columns).await
            }
            Err(e) => info.error(error_kind(e.code), e.message.as_bytes()).await,
        }
    }

    async fn on_execute<'a>(
        &'a mut self,
        id: u32,
        params: ParamParser<'a>,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let busy = self.busy.clone();
        let _busy = Busy::start(&busy);
        // opensrv keeps the parameter types a client sends with the first
        // execute of a statement and applies them to later ones.
        let values: Vec<Value> = params
            .into_iter()
            .map(|p| param_value(p.value.into_inner()))
            .collect();
        let session = self.session()?;
        let outcome = session.execute(id, values);
        let status = status(session);
        write_outcome(outcome, status, results).await
    }

    async fn on_close<'a>(&'a mut self, stmt: u32)
    where
        W: 'async_trait,
    {
        self.stmt_types.lock().expect("poisoned").closed(stmt);
        if let Some(s) = &mut self.session {
            s.close(stmt);
        }
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let busy = self.busy.clone();
        let _busy = Busy::start(&busy);
        let session = self.session()?;
        let outcome = session.query(query);
        let status = status(session);
        write_outcome(outcome, status, results).await
    }

    async fn on_init<'a>(&'a mut self, db: &'a str, writer: InitWriter<'a, W>) -> io::Result<()> {
        let busy = self.busy.clone();
        let _busy = Busy::start(&busy);
        match self.session()?.init_db(db) {
            Err(e) => writer.error(error_kind(e.code), e.message.as_bytes()).await,
            Ok(_) => writer.ok().await,
        }
    }
}
