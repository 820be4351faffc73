//! Accepting clients: the TCP and Unix socket accept loops, the connection
//! limit, and one OS thread per connection.
//!
//! Every connection gets its own OS thread, which runs the connection's
//! protocol on a current-thread runtime of its own and calls its SQL
//! session directly. Engine calls block (row locks, log flushes); blocking
//! here stalls only this connection, never a shared async worker. An
//! earlier design ran the protocol on shared workers and handed each
//! command to a session thread over channels: two thread wake-ups per
//! statement, which on 2 cores cost more than the engine did.

use crate::auth::new_salt;
use crate::shim::Shim;
use crate::stmt_types::{StmtTypes, TypedReader};
use crate::writer::ErrSwapWriter;
use opensrv_mysql::AsyncMysqlIntermediary;
use std::io;
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};

/// A client must authenticate within this long (MySQL's connect_timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) sql: Arc<millrace_sql::Instance>,
    /// SHA1(SHA1(password)), MySQL's stored form; `None`: empty password.
    pub(crate) password_stage2: Option<[u8; 20]>,
    pub(crate) max_connections: usize,
    pub(crate) connections: AtomicUsize,
    pub(crate) next_id: AtomicU32,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Every connection task and session thread holds a clone; shutdown
    /// waits for all of them to be dropped.
    pub(crate) alive: mpsc::Sender<()>,
}

/// Binds the Unix socket, replacing a stale socket file left by a server
/// that died, but not one a live server answers on.
pub(crate) fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, String> {
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

pub(crate) enum Listener {
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

pub(crate) async fn accept_loop(listener: Listener, shared: Arc<Shared>) {
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
    // authentication then fails with ER_CON_COUNT_ERROR.
    let over_limit = n >= shared.max_connections;
    let err_swap = Arc::new(Mutex::new(None));
    let authed = Arc::new(AtomicBool::new(false));
    let busy = Arc::new(AtomicBool::new(false));
    let stmt_types = Arc::new(Mutex::new(StmtTypes::default()));
    let reader = TypedReader::new(reader, stmt_types.clone());
    let shim = Shim {
        stmt_types,
        sql: shared.sql.clone(),
        password_stage2: shared.password_stage2,
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
    let writer = ErrSwapWriter::new(writer, err_swap);
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
