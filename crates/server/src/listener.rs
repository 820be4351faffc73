//! Accepting clients: the TCP and Unix socket accept loops, the connection
//! limit, one OS thread per admitted connection, and the handles that stop
//! connections at shutdown.
//!
//! Every admitted connection gets its own OS thread running `conn::serve`
//! on a blocking socket: engine calls block (row locks, log flushes), and
//! blocking here stalls only this connection. The accept loops run on the
//! small tokio runtime of `start` (with the signal handlers and the
//! metrics endpoint); nothing else of a connection does.
//!
//! The limit is checked before a thread is made: a connection over it is
//! handed to one refuser thread (through a bounded queue; when that is full
//! the connection is just closed), which sends the handshake, waits at
//! most `REFUSE_WAIT` for the client's answer and replies
//! ER_CON_COUNT_ERROR, so that clients see the usual error.

use crate::auth::{new_salt, LoginThrottle};
use crate::conn::{self, linger_close};
use crate::protocol::packet::{PacketReader, PacketWriter};
use crate::protocol::{handshake, resultset};
use millrace_errcode::ER_CON_COUNT_ERROR;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// MySQL's default max_prepared_stmt_count, for the whole server.
pub(crate) const MAX_PREPARED_STMT_COUNT: usize = 16382;
/// Refused connections waiting for the refuser thread, at most.
const REFUSE_QUEUE: usize = 64;
/// How long the refuser waits for a refused client's handshake response.
const REFUSE_WAIT: Duration = Duration::from_secs(1);

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) sql: Arc<millrace_sql::Instance>,
    /// SHA1(SHA1(password)), MySQL's stored form; `None`: empty password.
    pub(crate) password_stage2: Option<[u8; 20]>,
    pub(crate) max_connections: usize,
    /// The largest command a client may send (max_allowed_packet).
    pub(crate) max_allowed_packet: usize,
    pub(crate) connections: AtomicUsize,
    pub(crate) next_id: AtomicU32,
    /// Prepared statements of all connections (max_prepared_stmt_count).
    pub(crate) prepared: AtomicUsize,
    pub(crate) max_prepared: usize,
    /// Commands received (COM_STATISTICS' "Questions").
    pub(crate) questions: AtomicU64,
    pub(crate) started: Instant,
    pub(crate) logins: LoginThrottle,
    /// The running connections, to stop them at shutdown.
    pub(crate) live: Mutex<HashMap<u32, Arc<ConnCtl>>>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Every connection thread holds a clone; shutdown waits for all of
    /// them to be dropped.
    pub(crate) alive: mpsc::Sender<()>,
    pub(crate) refuser: SyncSender<Stream>,
}

impl Shared {
    /// Reserves a prepared statement of the server's budget.
    pub(crate) fn reserve_statement(&self) -> bool {
        self.prepared
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max_prepared).then_some(n + 1)
            })
            .is_ok()
    }

    pub(crate) fn release_statements(&self, n: usize) {
        if n > 0 {
            self.prepared.fetch_sub(n, Ordering::SeqCst);
        }
    }

    /// Shutdown: every connection finishes the command it runs (if any),
    /// then closes; idle ones close now.
    pub(crate) fn stop_connections(&self) {
        let live: Vec<Arc<ConnCtl>> = self
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for c in live {
            c.stop();
        }
    }
}

/// A client socket, blocking.
pub(crate) enum Stream {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Stream {
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    pub(crate) fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        };
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }

    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How others stop a connection: shutdown, and later KILL CONNECTION.
pub(crate) struct ConnCtl {
    /// A clone of the connection's socket: shutting it down wakes a thread
    /// blocked reading it.
    stream: Stream,
    state: Mutex<CtlState>,
}

#[derive(Default)]
struct CtlState {
    /// A command is running (its reply not yet sent).
    busy: bool,
    /// Stop after the current command.
    stop: bool,
}

impl ConnCtl {
    /// Asks the connection to stop: now if idle (its socket is shut down
    /// under a thread waiting in read), else after the command it runs.
    pub(crate) fn stop(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.stop = true;
        if !s.busy {
            self.stream.shutdown(Shutdown::Both);
        }
    }

    /// Before waiting for the next command: false when asked to stop.
    pub(crate) fn idle(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.busy = false;
        !s.stop
    }

    /// A command arrived: false when asked to stop meanwhile.
    pub(crate) fn begin_command(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.busy = !s.stop;
        s.busy
    }
}

/// Checks the path given to `--socket`: nothing there, or a stale socket
/// (a socket nobody answers on), which is removed. Anything else (a live
/// server's socket, a file, a directory) is an error and is left alone.
pub(crate) fn prepare_socket_path(path: &Path) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if !meta.file_type().is_socket() {
        return Err(format!(
            "{}: exists and is not a socket; not replacing it",
            path.display()
        ));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(format!(
            "{}: another server is listening there",
            path.display()
        ));
    }
    std::fs::remove_file(path)
        .map_err(|e| format!("{}: removing a stale socket: {e}", path.display()))
}

/// Binds the Unix socket (see `prepare_socket_path`).
pub(crate) fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, String> {
    prepare_socket_path(path)?;
    tokio::net::UnixListener::bind(path)
        .map_err(|e| format!("listening on {}: {e}", path.display()))
}

pub(crate) enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

impl Listener {
    /// The next connection, as a blocking std socket, with the client's
    /// host name.
    async fn accept(&self) -> io::Result<(Stream, String)> {
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
                let s = stream.into_std()?;
                s.set_nonblocking(false)?;
                Ok((Stream::Tcp(s), host))
            }
            Listener::Unix(l) => {
                let s = l.accept().await?.0.into_std()?;
                s.set_nonblocking(false)?;
                Ok((Stream::Unix(s), "localhost".into()))
            }
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
            Ok((stream, host)) => admit(stream, host, &shared),
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

/// Holds one of `max_connections` slots and the connection's entry in
/// `live`.
struct Slot {
    shared: Arc<Shared>,
    id: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
        self.shared.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Admits a connection under the limit (its own thread), or refuses it
/// without a thread of its own.
fn admit(stream: Stream, host: String, shared: &Arc<Shared>) {
    let n = shared.connections.fetch_add(1, Ordering::SeqCst);
    if n >= shared.max_connections {
        shared.connections.fetch_sub(1, Ordering::SeqCst);
        match shared.refuser.try_send(stream) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(s)) => s.shutdown(Shutdown::Both),
        }
        return;
    }
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let ctl = match stream.try_clone() {
        Ok(clone) => Arc::new(ConnCtl {
            stream: clone,
            state: Mutex::new(CtlState::default()),
        }),
        Err(e) => {
            shared.connections.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(id, error = %e, "could not clone a connection's socket");
            return;
        }
    };
    shared
        .live
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, ctl.clone());
    let slot = Slot {
        shared: shared.clone(),
        id,
    };
    let alive = shared.alive.clone();
    let started = std::thread::Builder::new()
        .name(format!("millrace-conn-{id}"))
        .spawn(move || {
            let _alive = alive;
            let shared = slot.shared.clone();
            conn::serve(id, stream, host, &shared, &ctl);
            drop(slot);
        });
    if let Err(e) = started {
        // The closure (and with it the slot and the stream) was dropped.
        tracing::warn!(id, error = %e, "could not start a connection thread");
    }
}

/// Starts the refuser thread; connections over the limit are sent to it.
pub(crate) fn start_refuser(next_id: Arc<AtomicU32>) -> SyncSender<Stream> {
    let (tx, rx) = sync_channel::<Stream>(REFUSE_QUEUE);
    let started = std::thread::Builder::new()
        .name("millrace-refuser".into())
        .spawn(move || {
            let mut reader = PacketReader::new();
            let mut buf = Vec::new();
            for mut s in rx {
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                refuse(&mut s, id, &mut reader, &mut buf);
                reader = PacketReader::new();
            }
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "could not start the refuser thread");
    }
    tx
}

/// Handshake, the client's answer (bounded in size and time), then
/// ER_CON_COUNT_ERROR.
fn refuse(s: &mut Stream, id: u32, reader: &mut PacketReader, buf: &mut Vec<u8>) {
    let _ = s.set_read_timeout(Some(REFUSE_WAIT));
    let _ = s.set_write_timeout(Some(REFUSE_WAIT));
    let mut w = PacketWriter::new();
    handshake::greeting(w.begin(), id, millrace_sql::SERVER_VERSION, &new_salt(), 0);
    w.end();
    if w.flush(s).is_err() {
        return;
    }
    let seq = reader
        .read_message(s, buf, conn::HANDSHAKE_LIMIT_BYTES)
        .unwrap_or(1);
    w.seq = seq.wrapping_add(1);
    resultset::err(w.begin(), ER_CON_COUNT_ERROR, "Too many connections");
    w.end();
    let _ = w.flush(s);
    linger_close(s);
}
