//! `millrace serve`: the MySQL-protocol server. Opens the engine (running
//! crash recovery), then listens on TCP and optionally a Unix socket and
//! speaks the MySQL client/server protocol (opensrv-mysql) to each client.
//!
//! Threads: a small tokio runtime accepts connections, serves metrics and
//! waits for signals. Every connection gets its own OS thread, which runs
//! the connection's protocol on a current-thread runtime of its own and
//! calls its SQL session directly. Engine calls block (row locks, log
//! flushes); blocking here stalls only this connection, never a shared
//! async worker. An earlier design ran the protocol on shared workers and
//! handed each command to a session thread over channels: two thread
//! wake-ups per statement, which on 2 cores cost more than the engine did.
//!
//! Shutdown (SIGTERM or SIGINT): stop accepting, let each connection finish
//! the command it is running (at most `DRAIN_TIMEOUT` in all), close the
//! connections, then shut the engine down (flush and checkpoint).

use crate::stmt_types::{StmtTypes, TypedReader};
use async_trait::async_trait;
use clap::Args;
use millrace_io::FsStorage;
use millrace_metrics::Registry;
use millrace_sql::plan::{OutColumn, ResultKind};
use millrace_sql::{ConnInfo, Output, Session, SqlError, Value};
use millrace_sys::cpu::{CpuBudget, CpuProbe};
use millrace_trx::Engine;
use opensrv_mysql::{
    AsyncMysqlIntermediary, AsyncMysqlShim, Column, ColumnFlags, ColumnType, ErrorKind, InitWriter,
    OkResponse, ParamParser, QueryResultWriter, RowWriter, StatementMetaWriter, StatusFlags,
};
use sha1::{Digest, Sha1};
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};

/// Prints a status line on stdout. A server outlives whoever reads its
/// output (a closed pipe, a terminal gone): a failed write is ignored, where
/// `println!` would panic and take the server down mid-shutdown.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// How long shutdown waits for connections to finish their current command.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// A client must authenticate within this long (MySQL's connect_timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Settings file (TOML; see `config.rs` or the README); default:
    /// ./millrace.toml if it exists. Flags win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// TCP address to listen on [default: 127.0.0.1:3306].
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<String>,
    /// Also listen on this Unix socket.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The data directory (created if missing, recovered if it crashed)
    /// [default: ./millrace-data].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Most client connections at once; more get error 1040 [default: 512].
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// The password of user `root` (else $MILLRACE_ROOT_PASSWORD, else the
    /// config file, else empty; an empty password allows loopback and Unix
    /// socket only).
    #[arg(long, value_name = "PASSWORD")]
    root_password: Option<String>,
    /// Prometheus text metrics at http://ADDR/metrics (loopback only)
    /// [default: 127.0.0.1:9104].
    #[arg(long, value_name = "ADDR:PORT")]
    metrics_listen: Option<String>,
    /// No metrics endpoint.
    #[arg(long)]
    no_metrics: bool,
    /// Buffer pool size, e.g. 512M or 2G [default: 1/16 of the memory
    /// available, within 128M..2G].
    #[arg(long, value_name = "SIZE")]
    buffer_pool_size: Option<String>,
}

pub fn run(args: ServeArgs) -> Result<(), String> {
    let flags = crate::config::Flags {
        config: args.config,
        listen: args.listen,
        socket: args.socket,
        data_dir: args.data_dir,
        max_connections: args.max_connections,
        root_password: args.root_password,
        metrics_listen: args.metrics_listen,
        no_metrics: args.no_metrics,
        buffer_pool_size: args.buffer_pool_size,
    };
    let settings = crate::config::resolve(
        flags,
        std::env::var("MILLRACE_ROOT_PASSWORD").ok(),
        millrace_sys::mem::available_memory_bytes(),
    )?;
    let password = settings.root_password.clone();
    let addr = settings
        .listen
        .to_socket_addrs()
        .map_err(|e| format!("listen {}: {e}", settings.listen))?
        .next()
        .ok_or_else(|| format!("listen {}: no address", settings.listen))?;
    if password.is_empty() && !is_loopback(addr.ip()) {
        return Err(format!(
            "refusing to listen on {addr} with an empty root password: set --root-password, \
             MILLRACE_ROOT_PASSWORD or root_password in the config, or listen on loopback \
             (127.0.0.1, ::1) or --socket"
        ));
    }
    let metrics_addr = match &settings.metrics_listen {
        None => None,
        Some(m) => {
            let a = m
                .to_socket_addrs()
                .map_err(|e| format!("metrics_listen {m}: {e}"))?
                .next()
                .ok_or_else(|| format!("metrics_listen {m}: no address"))?;
            if !is_loopback(a.ip()) {
                return Err(format!(
                    "metrics_listen {a}: the metrics endpoint listens on loopback only"
                ));
            }
            Some(a)
        }
    };
    if let Some(f) = &settings.config_file {
        say!("settings from {}", f.display());
    }

    let t0 = Instant::now();
    let dir = &settings.data_dir;
    let storage =
        Arc::new(FsStorage::new(dir, false).map_err(|e| format!("{}: {e}", dir.display()))?);
    let cpu = CpuBudget::start(CpuProbe::system(), Duration::from_secs(1));
    let engine = Engine::open(storage, settings.engine.clone(), cpu, Registry::new())
        .map_err(|e| format!("opening {}: {e}", dir.display()))?;
    let sql = millrace_sql::Server::open(engine.clone())
        .map_err(|e| format!("opening the catalog in {}: {}", dir.display(), e.message))?;
    say!(
        "millrace {}: data directory {} open in {:.1} s; {}",
        env!("CARGO_PKG_VERSION"),
        dir.display(),
        t0.elapsed().as_secs_f64(),
        settings.engine_summary
    );

    let served = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("millrace-net")
        .build()
        .map_err(|e| format!("starting the network runtime: {e}"))
        .and_then(|rt| {
            let r = rt.block_on(serve(&settings, addr, metrics_addr, password, sql));
            rt.shutdown_timeout(Duration::from_secs(1));
            r
        });
    if let Some(path) = &settings.socket {
        if served.is_ok() {
            let _ = std::fs::remove_file(path);
        }
    }
    // The engine is shut down even when serving failed (a listener could
    // not bind, say): a clean shutdown spares the next start a recovery.
    let stopped = engine.shutdown().map_err(|e| format!("shutting down: {e}"));
    served?;
    stopped?;
    say!("millrace stopped");
    Ok(())
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// What every connection shares.
struct Shared {
    sql: Arc<millrace_sql::Server>,
    /// SHA1(SHA1(password)), MySQL's stored form; `None`: empty password.
    password_stage2: Option<[u8; 20]>,
    max_connections: usize,
    connections: AtomicUsize,
    next_id: AtomicU32,
    shutdown: watch::Receiver<bool>,
    /// Every connection task and session thread holds a clone; shutdown
    /// waits for all of them to be dropped.
    alive: mpsc::Sender<()>,
}

async fn serve(
    args: &crate::config::Settings,
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    password: String,
    sql: Arc<millrace_sql::Server>,
) -> Result<(), String> {
    // Handlers first: a signal that arrives once we listen must stop us
    // cleanly, not kill us.
    let signals = Signals::install()?;
    let tcp = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("listening on {addr}: {e}"))?;
    let local = tcp.local_addr().map_err(|e| e.to_string())?;
    let unix = match &args.socket {
        Some(path) => Some(bind_unix(path)?),
        None => None,
    };
    let metrics = match metrics_addr {
        Some(a) => Some(
            tokio::net::TcpListener::bind(a)
                .await
                .map_err(|e| format!("--metrics-listen {a}: {e}"))?,
        ),
        None => None,
    };
    let registry = sql.engine().registry().clone();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (alive, mut all_gone) = mpsc::channel::<()>(1);
    let shared = Arc::new(Shared {
        sql,
        password_stage2: (!password.is_empty())
            .then(|| Sha1::digest(Sha1::digest(password.as_bytes())).into()),
        max_connections: args.max_connections,
        connections: AtomicUsize::new(0),
        next_id: AtomicU32::new(1),
        shutdown: shutdown_rx,
        alive,
    });

    let pw = if password.is_empty() { "" } else { " -p" };
    say!(
        "listening on {local}; connect with: mariadb -h{} -P{} -uroot{pw}",
        local.ip(),
        local.port()
    );
    tokio::spawn(accept_loop(Listener::Tcp(tcp), shared.clone()));
    if let Some(listener) = metrics {
        let at = listener.local_addr().map_err(|e| e.to_string())?;
        say!("metrics at http://{at}/metrics");
        tokio::spawn(crate::metrics_http::serve(listener, registry));
    }
    if let (Some(listener), Some(path)) = (unix, &args.socket) {
        say!(
            "listening on {}; connect with: mariadb --socket={} -uroot{pw}",
            path.display(),
            path.display()
        );
        tokio::spawn(accept_loop(Listener::Unix(listener), shared.clone()));
    }

    signals.wait().await;
    say!("stopping: no new connections, waiting for running commands");
    let _ = shutdown_tx.send(true);
    drop(shared);
    if tokio::time::timeout(DRAIN_TIMEOUT, all_gone.recv())
        .await
        .is_err()
    {
        eprintln!(
            "warning: connections still busy after {} s; shutting down anyway",
            DRAIN_TIMEOUT.as_secs()
        );
    }
    Ok(())
}

/// SIGTERM and SIGINT, caught.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Self, String> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?,
            int: signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Binds the Unix socket, replacing a stale socket file left by a server
/// that died, but not one a live server answers on.
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, String> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{}: another server is listening there",
                path.display()
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    tokio::net::UnixListener::bind(path)
        .map_err(|e| format!("listening on {}: {e}", path.display()))
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

impl Listener {
    /// The next connection, as a std socket: it is registered again on its
    /// own thread's runtime (`spawn_connection`).
    async fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(l) => {
                let (stream, peer) = l.accept().await?;
                let _ = stream.set_nodelay(true);
                let host = match peer.ip() {
                    IpAddr::V6(v6) => v6
                        .to_ipv4_mapped()
                        .map_or_else(|| v6.to_string(), |v4| v4.to_string()),
                    ip => ip.to_string(),
                };
                Ok(Accepted::Tcp(stream.into_std()?, host))
            }
            Listener::Unix(l) => Ok(Accepted::Unix(l.accept().await?.0.into_std()?)),
        }
    }
}

async fn accept_loop(listener: Listener, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopping(&mut shutdown) => return,
        };
        match accepted {
            Ok(a) => spawn_connection(a, shared.clone()),
            Err(e) => accept_failed(e).await,
        }
    }
}

/// Resolves once shutdown has begun.
async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Out of file descriptors and the like: back off rather than spin.
async fn accept_failed(e: io::Error) {
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Holds one of `max_connections` slots.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection the accept loop has taken, with the client's host name.
enum Accepted {
    Tcp(std::net::TcpStream, String),
    Unix(std::os::unix::net::UnixStream),
}

/// Starts the connection's own thread (see the module's comment). If the
/// thread cannot be started the stream is dropped: the client sees the
/// connection closed, and the server goes on.
fn spawn_connection(accepted: Accepted, shared: Arc<Shared>) {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let started = std::thread::Builder::new()
        .name(format!("millrace-conn-{id}"))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::warn!(id, error = %e, "could not start a connection's runtime");
                    return;
                }
            };
            rt.block_on(async move {
                // Registering the socket with this thread's reactor needs
                // the runtime, so it happens here and not in the acceptor.
                let registered = match accepted {
                    Accepted::Tcp(s, host) => tokio::net::TcpStream::from_std(s).map(|s| {
                        let (r, w) = s.into_split();
                        Box::pin(connection(id, r, w, host, shared))
                            as Pin<Box<dyn std::future::Future<Output = ()>>>
                    }),
                    Accepted::Unix(s) => tokio::net::UnixStream::from_std(s).map(|s| {
                        let (r, w) = s.into_split();
                        Box::pin(connection(id, r, w, "localhost".into(), shared))
                            as Pin<Box<dyn std::future::Future<Output = ()>>>
                    }),
                };
                match registered {
                    Ok(conn) => conn.await,
                    Err(e) => tracing::warn!(id, error = %e, "could not register a connection"),
                }
            });
        });
    if let Err(e) = started {
        tracing::warn!(id, error = %e, "could not start a connection thread");
    }
}

async fn connection<R, W>(id: u32, reader: R, writer: W, host: String, shared: Arc<Shared>)
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin,
{
    let _alive = shared.alive.clone();
    let n = shared.connections.fetch_add(1, Ordering::SeqCst);
    let slot = Slot(shared.clone());
    // Over the limit the handshake still runs, so that the error reaches the
    // client as an ordinary protocol error (with its SQLSTATE), but
    // authentication then fails with 1040.
    let over_limit = n >= shared.max_connections;
    let err_swap = Arc::new(Mutex::new(None));
    let authed = Arc::new(AtomicBool::new(false));
    let busy = Arc::new(AtomicBool::new(false));
    let stmt_types = Arc::new(Mutex::new(StmtTypes::default()));
    let reader = TypedReader::new(reader, stmt_types.clone());
    let shim = Shim {
        stmt_types,
        shared: shared.clone(),
        conn_id: id,
        salt: new_salt(),
        host,
        over_limit,
        err_swap: err_swap.clone(),
        authed: authed.clone(),
        busy: busy.clone(),
        user: Mutex::new(String::new()),
        session: None,
    };
    let writer = ErrSwapWriter {
        inner: writer,
        swap: err_swap,
        captured: Vec::new(),
        out: Vec::with_capacity(OUT_BUFFER_BYTES),
        out_pos: 0,
    };
    let run = AsyncMysqlIntermediary::run_on(shim, reader, writer);
    tokio::pin!(run);
    let mut shutdown = shared.shutdown.clone();
    let connect_deadline = tokio::time::sleep(CONNECT_TIMEOUT);
    tokio::pin!(connect_deadline);
    let result = loop {
        tokio::select! {
            r = &mut run => break r,
            _ = &mut connect_deadline, if !authed.load(Ordering::SeqCst) => {
                if !authed.load(Ordering::SeqCst) {
                    break Err(io::Error::new(io::ErrorKind::TimedOut, "no handshake in time"));
                }
            }
            _ = stopping(&mut shutdown) => {
                // Let the command in progress (if any) finish and its reply
                // go out; the server's drain timeout bounds this.
                while busy.load(Ordering::SeqCst) {
                    tokio::select! {
                        r = &mut run => return log_end(id, r),
                        _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                    }
                }
                break Ok(());
            }
        }
    };
    drop(slot);
    log_end(id, result);
}

fn log_end(id: u32, result: io::Result<()>) {
    match result {
        Ok(()) => tracing::debug!(id, "connection closed"),
        Err(e) => tracing::debug!(id, error = %e, "connection ended"),
    }
}

/// A random 20-byte scramble of printable characters, none of them `$`
/// (as MySQL makes them).
fn new_salt() -> [u8; 20] {
    use std::io::Read;
    let mut raw = [0u8; 20];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut raw));
    if from_os.is_err() {
        // Unlikely; fall back on std's randomly keyed hasher.
        use std::hash::{BuildHasher, Hasher};
        for (i, chunk) in raw.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(Instant::now().elapsed().as_nanos());
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    raw.map(|b| match b % 94 + 33 {
        b'$' => b'%',
        c => c,
    })
}

/// mysql_native_password: the client sends SHA1(pw) XOR SHA1(salt ++
/// SHA1(SHA1(pw))); knowing SHA1(SHA1(pw)) the server recovers SHA1(pw)
/// and checks that it hashes to the stored value. An empty password
/// accepts only an empty response.
fn native_password_ok(stage2: Option<&[u8; 20]>, salt: &[u8], response: &[u8]) -> bool {
    let Some(stage2) = stage2 else {
        return response.is_empty();
    };
    if response.len() != 20 {
        return false;
    }
    let mask = Sha1::new()
        .chain_update(salt)
        .chain_update(stage2)
        .finalize();
    let stage1: Vec<u8> = response.iter().zip(mask).map(|(r, m)| r ^ m).collect();
    let candidate = Sha1::digest(&stage1);
    // Constant time: no early exit on the first differing byte.
    candidate
        .iter()
        .zip(stage2)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// An ERR packet's payload (protocol 4.1: with the SQLSTATE).
fn err_payload(kind: ErrorKind, message: &str) -> Vec<u8> {
    let mut p = vec![0xff];
    p.extend_from_slice(&(kind as u16).to_le_bytes());
    p.push(b'#');
    p.extend_from_slice(kind.sqlstate());
    p.extend_from_slice(message.as_bytes());
    p
}

struct Shim {
    /// Parameter counts and types of this connection's prepared statements.
    stmt_types: Arc<Mutex<StmtTypes>>,
    shared: Arc<Shared>,
    conn_id: u32,
    salt: [u8; 20],
    host: String,
    over_limit: bool,
    /// Set by a failed authentication: the ERR packet to send instead of
    /// opensrv's own (see `ErrSwapWriter`).
    err_swap: Arc<Mutex<Option<Vec<u8>>>>,
    authed: Arc<AtomicBool>,
    /// A command is being executed and its reply written.
    busy: Arc<AtomicBool>,
    user: Mutex<String>,
    session: Option<Session>,
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
            self.session = Some(Session::new(self.shared.sql.clone(), conn));
        }
        Ok(self.session.as_mut().expect("just set"))
    }
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
                .error(ErrorKind::from(e.code.number()), e.message.as_bytes())
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
            Some(err_payload(
                ErrorKind::ER_CON_COUNT_ERROR,
                "Too many connections",
            ))
        } else if user == "root"
            && native_password_ok(self.shared.password_stage2.as_ref(), salt, auth_data)
        {
            None
        } else {
            let using = if auth_data.is_empty() { "NO" } else { "YES" };
            Some(err_payload(
                ErrorKind::ER_ACCESS_DENIED_ERROR,
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
            Err(e) => {
                info.error(ErrorKind::from(e.code.number()), e.message.as_bytes())
                    .await
            }
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
            Err(e) => {
                writer
                    .error(ErrorKind::from(e.code.number()), e.message.as_bytes())
                    .await
            }
            Ok(_) => writer.ok().await,
        }
    }
}

/// Output is gathered here and written when it reaches this size or when
/// opensrv flushes, which it does once at the end of every reply: a result
/// set of a hundred rows then costs one send, not one per packet.
const OUT_BUFFER_BYTES: usize = 64 * 1024;

/// The connection's output stream, buffered (see `OUT_BUFFER_BYTES`).
///
/// It also swaps error packets: opensrv answers a failed authentication
/// with its own error (1698, "Authenticate failed ..."); MySQL clients and
/// tools expect 1045 "Access denied ..." (or 1040 over the connection
/// limit). When the shim refuses a client it stores the ERR payload to send
/// instead; this writer then swallows opensrv's packet and, at the flush
/// that follows it, writes the stored payload under the same sequence
/// number.
struct ErrSwapWriter<W> {
    inner: W,
    swap: Arc<Mutex<Option<Vec<u8>>>>,
    captured: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
}

impl<W: AsyncWrite + Unpin> ErrSwapWriter<W> {
    fn poll_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.out_pos < self.out.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.out[self.out_pos..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.out_pos += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.out.clear();
        self.out_pos = 0;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for ErrSwapWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if this.swap.lock().expect("poisoned").is_some() {
            for b in bufs {
                this.captured.extend_from_slice(b);
            }
            return Poll::Ready(Ok(len));
        }
        // Bounded: a full buffer is drained before more is taken.
        if this.out.len() - this.out_pos >= OUT_BUFFER_BYTES {
            match this.poll_out(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other.map_ok(|()| 0),
            }
        }
        for b in bufs {
            this.out.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.captured.is_empty() {
            if let Some(payload) = this.swap.lock().expect("poisoned").take() {
                let seq = this.captured.get(3).copied().unwrap_or(2);
                let len = (payload.len() as u32).to_le_bytes();
                this.out.extend_from_slice(&len[..3]);
                this.out.push(seq);
                this.out.extend_from_slice(&payload);
            }
            this.captured.clear();
        }
        match this.poll_out(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_out(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client computes (libmariadb's ma_scramble_41).
    fn client_scramble(password: &str, salt: &[u8]) -> Vec<u8> {
        let stage1 = Sha1::digest(password.as_bytes());
        let stage2 = Sha1::digest(stage1);
        let mask = Sha1::new()
            .chain_update(salt)
            .chain_update(stage2)
            .finalize();
        stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
    }

    #[test]
    fn native_password_check() {
        let salt = new_salt();
        assert!(salt.iter().all(|&b| (33..=126).contains(&b) && b != b'$'));
        let stage2: [u8; 20] = Sha1::digest(Sha1::digest(b"s3cret")).into();
        assert!(native_password_ok(
            Some(&stage2),
            &salt,
            &client_scramble("s3cret", &salt)
        ));
        assert!(!native_password_ok(
            Some(&stage2),
            &salt,
            &client_scramble("wrong", &salt)
        ));
        assert!(!native_password_ok(Some(&stage2), &salt, b""));
        assert!(native_password_ok(None, &salt, b""));
        assert!(!native_password_ok(
            None,
            &salt,
            &client_scramble("x", &salt)
        ));
    }

    #[test]
    fn loopback_only() {
        assert!(is_loopback("127.0.0.1".parse().unwrap()));
        assert!(is_loopback("127.1.2.3".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(!is_loopback("0.0.0.0".parse().unwrap()));
        assert!(!is_loopback("::".parse().unwrap()));
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
    }
}
