//! What the connection threads share with the listener and with each
//! other: the server-wide state (`Shared`), the client socket (`Stream`) and
//! the handle that stops a connection (`ConnCtl`).

use crate::auth::LoginThrottle;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// MySQL's default max_prepared_stmt_count, for the whole server.
pub(crate) const MAX_PREPARED_STMT_COUNT: usize = 16382;

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
    pub(crate) fn new(stream: Stream) -> Self {
        ConnCtl {
            stream,
            state: Mutex::new(CtlState::default()),
        }
    }

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
