//! One connection from handshake to close, on its own thread: the
//! connection phase (handshake, authentication, within `CONNECT_TIMEOUT`),
//! then the command loop: read a command, run it through the SQL session,
//! send the whole reply with one write.
//!
//! Limits: a command may be at most max_allowed_packet bytes (a larger one
//! gets ER_NET_PACKET_TOO_LARGE and the connection is closed, as MySQL
//! does); before authentication a packet may be at most
//! `HANDSHAKE_LIMIT_BYTES`; prepared statements count against the server's
//! max_prepared_stmt_count; long data against max_allowed_packet.

use crate::auth::native_password_ok;
use crate::protocol::command::Execute;
use crate::protocol::handshake::{self, AuthStep};
use crate::protocol::packet::{PacketReader, PacketWriter, ReadError};
use crate::protocol::prepared::{decode_execute, StmtState, StmtTable};
use crate::protocol::resultset::{self, RowFormat};
use crate::protocol::{caps, decode_command, status, Command};
use crate::shared::{ConnCtl, Shared, Stream};
use millrace_errcode::{
    ErrorCode, ER_ACCESS_DENIED_ERROR, ER_HANDSHAKE_ERROR, ER_MALFORMED_PACKET,
    ER_MAX_PREPARED_STMT_COUNT_REACHED, ER_NET_PACKET_TOO_LARGE, ER_PS_MANY_PARAM,
    ER_STMT_HAS_NO_OPEN_CURSOR, ER_UNKNOWN_COM_ERROR, ER_UNKNOWN_STMT_HANDLER, ER_WRONG_ARGUMENTS,
};
use millrace_sql::{ConnInfo, Output, Session, SqlError};
use std::io::{self, Read};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A client must authenticate within this long (MySQL's connect_timeout).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest packet accepted before authentication (the handshake
/// response with its connection attributes).
pub(crate) const HANDSHAKE_LIMIT_BYTES: usize = 64 * 1024;
/// How long a closing connection waits for the client to read a last error.
const LINGER: Duration = Duration::from_millis(200);
/// Bytes a closing connection reads and discards at most.
const LINGER_BYTES: usize = 1 << 20;

/// Runs the connection until the client quits, fails, or is stopped.
pub(crate) fn serve(id: u32, stream: Stream, host: String, shared: &Shared, ctl: &Arc<ConnCtl>) {
    let mut c = Conn {
        id,
        shared,
        ctl,
        stream,
        reader: PacketReader::new(),
        writer: PacketWriter::new(),
        inbuf: Vec::new(),
        caps: 0,
        host,
        user: String::new(),
        scramble: crate::auth::new_salt(),
        session: None,
        stmts: StmtTable::new(),
    };
    let result = c.run();
    match result {
        Ok(()) => tracing::debug!(id, "connection closed"),
        Err(e) => tracing::debug!(id, error = %e, "connection ended"),
    }
}

/// After a last error: stop sending, read (and drop) what the client still
/// sends for a moment, so closing does not reset the connection before the
/// client has read the error.
pub(crate) fn linger_close(s: &mut Stream) {
    s.shutdown(Shutdown::Write);
    let _ = s.set_read_timeout(Some(LINGER));
    let deadline = Instant::now() + LINGER;
    let mut buf = [0u8; 4096];
    let mut read = 0;
    while read < LINGER_BYTES && Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
}

struct Conn<'a> {
    id: u32,
    shared: &'a Shared,
    ctl: &'a Arc<ConnCtl>,
    stream: Stream,
    reader: PacketReader,
    writer: PacketWriter,
    /// The last message read (reused).
    inbuf: Vec<u8>,
    /// The negotiated capability flags.
    caps: u32,
    host: String,
    /// Who logged in (COM_CHANGE_USER changes it).
    user: String,
    scramble: [u8; 20],
    session: Option<Session>,
    stmts: StmtTable,
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        self.shared.release_statements(self.stmts.len());
        // The session's Drop rolls back what it left open.
        self.session = None;
    }
}

/// Whether the command loop goes on.
enum Flow {
    Continue,
    Close,
}

impl Conn<'_> {
    fn run(&mut self) -> io::Result<()> {
        if !self.connect()? {
            return Ok(());
        }
        self.stream.set_read_timeout(None)?;
        self.stream.set_write_timeout(None)?;
        self.commands()
    }

    /// The status flags of OK and EOF packets.
    fn status(&self) -> u16 {
        let mut s = 0;
        if let Some(session) = &self.session {
            if session.autocommit() {
                s |= status::AUTOCOMMIT;
            }
            if session.in_transaction() {
                s |= status::IN_TRANS;
            }
        } else {
            s |= status::AUTOCOMMIT;
        }
        s
    }

    /// Sends an ERR as the last word and closes.
    fn fatal(&mut self, code: ErrorCode, message: &str) -> io::Result<()> {
        resultset::err(self.writer.begin(), code, message);
        self.writer.end();
        self.writer.flush(&mut self.stream)?;
        linger_close(&mut self.stream);
        Ok(())
    }

    /// Reads one message of at most `limit` bytes into `inbuf`; on a larger
    /// one answers ER_NET_PACKET_TOO_LARGE (with sequence number `seq`)
    /// and returns `None`.
    fn read(&mut self, limit: usize, too_large_seq: u8) -> io::Result<Option<u8>> {
        match self
            .reader
            .read_message(&mut self.stream, &mut self.inbuf, limit)
        {
            Ok(seq) => Ok(Some(seq)),
            Err(ReadError::Io(e)) => Err(e),
            Err(ReadError::TooLarge) => {
                self.writer.seq = too_large_seq;
                self.fatal(
                    ER_NET_PACKET_TOO_LARGE,
                    "Got a packet bigger than 'max_allowed_packet' bytes",
                )?;
                Ok(None)
            }
        }
    }

    /// The connection phase; true when the client is in.
    fn connect(&mut self) -> io::Result<bool> {
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        let left = || {
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        };
        self.stream.set_read_timeout(Some(left()))?;
        self.stream.set_write_timeout(Some(left()))?;
        self.writer.seq = 0;
        handshake::greeting(
            self.writer.begin(),
            self.id,
            millrace_sql::SERVER_VERSION,
            &self.scramble,
            status::AUTOCOMMIT,
        );
        self.writer.end();
        self.writer.flush(&mut self.stream)?;

        let Some(seq) = self.read(HANDSHAKE_LIMIT_BYTES, 2)? else {
            return Ok(false);
        };
        self.writer.seq = seq.wrapping_add(1);
        let payload = std::mem::take(&mut self.inbuf);
        let outcome = self.handshake_response(&payload, &left);
        self.inbuf = payload;
        outcome
    }

    fn handshake_response(
        &mut self,
        payload: &[u8],
        left: &dyn Fn() -> Duration,
    ) -> io::Result<bool> {
        let resp = match handshake::decode_handshake_response(payload) {
            Ok(r) => r,
            Err(e) => {
                self.fatal(ER_HANDSHAKE_ERROR, &format!("Bad handshake: {e}"))?;
                return Ok(false);
            }
        };
        self.caps = resp.caps & caps::SERVER;
        let user = String::from_utf8_lossy(resp.user).into_owned();
        let verified = match handshake::first_auth_step(resp.plugin) {
            AuthStep::Verify => self.verify(&user, resp.auth),
            AuthStep::SwitchToNative => {
                self.stream.set_read_timeout(Some(left()))?;
                match self.switch_to_native()? {
                    Some(answer) => self.verify(&user, &answer),
                    None => return Ok(false),
                }
            }
        };
        if !verified {
            self.refuse_login(&user, !resp.auth.is_empty())?;
            return Ok(false);
        }
        self.new_session(user);
        if let Some(db) = resp.database.filter(|d| !d.is_empty()) {
            let db = String::from_utf8_lossy(db).into_owned();
            if let Err(e) = self.session_mut().init_db(&db) {
                self.fatal(e.code, &e.message)?;
                return Ok(false);
            }
        }
        let st = self.status();
        resultset::ok(self.writer.begin(), 0, 0, st);
        self.writer.end();
        self.writer.flush(&mut self.stream)?;
        Ok(true)
    }

    /// Sends the AuthSwitchRequest and reads the client's answer; `None`
    /// when the answer was too large (and refused).
    fn switch_to_native(&mut self) -> io::Result<Option<Vec<u8>>> {
        handshake::auth_switch_request(self.writer.begin(), &self.scramble);
        self.writer.end();
        self.writer.flush(&mut self.stream)?;
        let next = self.writer.seq.wrapping_add(1);
        let Some(seq) = self.read(HANDSHAKE_LIMIT_BYTES, next)? else {
            return Ok(None);
        };
        self.writer.seq = seq.wrapping_add(1);
        Ok(Some(self.inbuf.clone()))
    }

    fn verify(&self, user: &str, response: &[u8]) -> bool {
        user == "root"
            && native_password_ok(
                self.shared.password_stage2.as_ref(),
                &self.scramble,
                response,
            )
    }

    /// A failed login: the back-off wait, then ER_ACCESS_DENIED_ERROR, and
    /// the connection is closed.
    fn refuse_login(&mut self, user: &str, with_password: bool) -> io::Result<()> {
        std::thread::sleep(self.shared.logins.failed(&self.host));
        let using = if with_password { "YES" } else { "NO" };
        let message = format!(
            "Access denied for user '{user}'@'{}' (using password: {using})",
            self.host
        );
        self.fatal(ER_ACCESS_DENIED_ERROR, &message)
    }

    /// A fresh session for `user`: the old one (if any) is dropped first
    /// (its Drop rolls back its transaction and releases its locks), and
    /// the prepared statements with it.
    fn new_session(&mut self, user: String) {
        self.session = None;
        self.shared.release_statements(self.stmts.len());
        self.stmts.clear();
        self.shared.logins.succeeded(&self.host);
        self.user = user.clone();
        let conn = ConnInfo {
            connection_id: self.id,
            user,
            host: self.host.clone(),
        };
        let mut session = Session::new(self.shared.sql.clone(), conn);
        // KILL CONNECTION from another session: stop this connection (at
        // once if idle, else after the reply to the command it runs, which
        // the kill interrupts).
        let ctl = Arc::clone(self.ctl);
        session.set_disconnect_hook(Box::new(move || ctl.stop()));
        self.session = Some(session);
    }

    fn session_mut(&mut self) -> &mut Session {
        self.session
            .as_mut()
            .expect("a session exists after authentication")
    }

    /// The command phase.
    fn commands(&mut self) -> io::Result<()> {
        // Bounded by the client: each turn consumes one command.
        loop {
            if !self.ctl.idle() {
                return Ok(());
            }
            let Some(seq) = self.read(self.shared.max_allowed_packet, 1)? else {
                return Ok(());
            };
            if !self.ctl.begin_command() {
                return Ok(());
            }
            self.shared.questions.fetch_add(1, Ordering::Relaxed);
            self.writer.seq = seq.wrapping_add(1);
            let payload = std::mem::take(&mut self.inbuf);
            let flow = self.command(&payload);
            self.inbuf = payload;
            match flow {
                Ok(Flow::Continue) => self.writer.flush(&mut self.stream)?,
                Ok(Flow::Close) => {
                    self.writer.flush(&mut self.stream)?;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn ok(&mut self) {
        let st = self.status();
        resultset::ok(self.writer.begin(), 0, 0, st);
        self.writer.end();
    }

    fn err(&mut self, code: ErrorCode, message: &str) {
        resultset::err(self.writer.begin(), code, message);
        self.writer.end();
    }

    fn command(&mut self, payload: &[u8]) -> io::Result<Flow> {
        let cmd = match decode_command(payload, self.caps) {
            Ok(c) => c,
            Err(e) => {
                self.err(
                    ER_MALFORMED_PACKET,
                    &format!("Malformed communication packet: {e}"),
                );
                return Ok(Flow::Continue);
            }
        };
        match cmd {
            Command::Quit => return Ok(Flow::Close),
            Command::Ping => self.ok(),
            Command::InitDb(db) => {
                let db = String::from_utf8_lossy(db).into_owned();
                let outcome = self.session_mut().init_db(&db);
                self.outcome(outcome, RowFormat::Text)?;
            }
            Command::Query(q) => {
                let q = String::from_utf8_lossy(q);
                let outcome = self.session_mut().query(&q);
                self.outcome(outcome, RowFormat::Text)?;
            }
            Command::ProcessKill(id) => {
                // The SQL layer decides what KILL does (or that it is not
                // supported): the answer is its answer.
                let outcome = self.session_mut().query(&format!("KILL {id}"));
                self.outcome(outcome, RowFormat::Text)?;
            }
            Command::Statistics => {
                let text = format!(
                    "Uptime: {}  Threads: {}  Questions: {}  Slow queries: 0  Opens: 0  \
                     Flush tables: 0  Open tables: 0  Queries per second avg: 0.000",
                    self.shared.started.elapsed().as_secs(),
                    self.shared.connections.load(Ordering::Relaxed),
                    self.shared.questions.load(Ordering::Relaxed),
                );
                self.writer.packet(text.as_bytes());
            }
            Command::ChangeUser(cu) => {
                let user = String::from_utf8_lossy(cu.user).into_owned();
                let verified = match handshake::first_auth_step(cu.plugin) {
                    AuthStep::Verify => self.verify(&user, cu.auth),
                    AuthStep::SwitchToNative => match self.switch_to_native()? {
                        Some(answer) => self.verify(&user, &answer),
                        None => return Ok(Flow::Close),
                    },
                };
                if !verified {
                    self.session = None;
                    self.refuse_login(&user, !cu.auth.is_empty())?;
                    return Ok(Flow::Close);
                }
                self.new_session(user);
                if !cu.database.is_empty() {
                    let db = String::from_utf8_lossy(cu.database).into_owned();
                    if let Err(e) = self.session_mut().init_db(&db) {
                        self.err(e.code, &e.message);
                        return Ok(Flow::Continue);
                    }
                }
                self.ok();
            }
            Command::ResetConnection => {
                self.new_session(self.user.clone());
                self.ok();
            }
            Command::StmtPrepare(sql) => self.prepare(&String::from_utf8_lossy(sql)),
            Command::StmtExecute(e) => self.execute(e)?,
            Command::StmtSendLongData { stmt, param, data } => {
                let limit = self.shared.max_allowed_packet;
                if let Some(st) = self.stmts.get_mut(&stmt) {
                    st.append_long_data(param, data, limit);
                }
            }
            Command::StmtClose(stmt) => {
                if self.stmts.remove(&stmt).is_some() {
                    self.shared.release_statements(1);
                }
                self.session_mut().close(stmt);
            }
            Command::StmtReset(stmt) => match self.stmts.get_mut(&stmt) {
                Some(st) => {
                    st.reset();
                    self.ok();
                }
                None => self.unknown_stmt(stmt, "mysqld_stmt_reset"),
            },
            Command::StmtFetch { stmt, .. } => {
                if self.stmts.contains_key(&stmt) {
                    self.err(
                        ER_STMT_HAS_NO_OPEN_CURSOR,
                        &format!("The statement ({stmt}) has no open cursor."),
                    );
                } else {
                    self.unknown_stmt(stmt, "mysqld_stmt_fetch");
                }
            }
            Command::Unknown(_) => self.err(ER_UNKNOWN_COM_ERROR, "Unknown command"),
        }
        Ok(Flow::Continue)
    }

    fn unknown_stmt(&mut self, stmt: u32, what: &str) {
        self.err(
            ER_UNKNOWN_STMT_HANDLER,
            &format!("Unknown prepared statement handler ({stmt}) given to {what}"),
        );
    }

    fn prepare(&mut self, sql: &str) {
        if !self.shared.reserve_statement() {
            let message = format!(
                "Can't create more than max_prepared_stmt_count statements (current value: {})",
                self.shared.max_prepared
            );
            self.err(ER_MAX_PREPARED_STMT_COUNT_REACHED, &message);
            return;
        }
        let (id, params, columns) = match self.session_mut().prepare(sql) {
            Ok(p) => p,
            Err(e) => {
                self.shared.release_statements(1);
                self.err(e.code, &e.message);
                return;
            }
        };
        let Ok(count) = u16::try_from(params) else {
            self.shared.release_statements(1);
            self.session_mut().close(id);
            self.err(
                ER_PS_MANY_PARAM,
                "Prepared statement contains too many placeholders",
            );
            return;
        };
        if self.stmts.insert(id, StmtState::new(count)).is_some() {
            // The session reused an id it still had: one statement, counted once.
            self.shared.release_statements(1);
        }
        let st = self.status();
        resultset::prepare_ok(&mut self.writer, id, count, &columns, self.caps, st);
    }

    fn execute(&mut self, e: Execute<'_>) -> io::Result<()> {
        let Some(st) = self.stmts.get_mut(&e.stmt) else {
            self.unknown_stmt(e.stmt, "mysqld_stmt_execute");
            return Ok(());
        };
        if st.long_too_large {
            st.reset();
            self.err(
                ER_NET_PACKET_TOO_LARGE,
                "Parameter of prepared statement which is set through \
                 mysql_send_long_data() is longer than 'max_allowed_packet' bytes",
            );
            return Ok(());
        }
        let values = decode_execute(e.params, st.params, &mut st.types, &st.long_data);
        st.reset();
        let values = match values {
            Ok(v) => v,
            Err(_) => {
                self.err(
                    ER_WRONG_ARGUMENTS,
                    "Incorrect arguments to mysqld_stmt_execute",
                );
                return Ok(());
            }
        };
        let outcome = self.session_mut().execute(e.stmt, values);
        self.outcome(outcome, RowFormat::Binary)
    }

    /// A statement's outcome as OK, a result set, or ERR.
    fn outcome(&mut self, outcome: Result<Output, SqlError>, format: RowFormat) -> io::Result<()> {
        let st = self.status();
        match outcome {
            Ok(Output::Ok {
                affected_rows,
                last_insert_id,
            }) => {
                resultset::ok(self.writer.begin(), affected_rows, last_insert_id, st);
                self.writer.end();
            }
            Ok(Output::Rows { columns, rows }) => resultset::result_set(
                &mut self.writer,
                &mut self.stream,
                &columns,
                rows,
                format,
                self.caps,
                st,
            )?,
            Err(e) => self.err(e.code, &e.message),
        }
        Ok(())
    }
}
