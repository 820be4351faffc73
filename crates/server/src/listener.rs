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

use crate::auth::new_salt;
use crate::conn::{self, linger_close};
use crate::protocol::packet::{PacketReader, PacketWriter};
use crate::protocol::{handshake, resultset};
use crate::shared::{ConnCtl, Shared, Stream};
use millrace_errcode::ER_CON_COUNT_ERROR;
use std::io;
use std::net::{IpAddr, Shutdown};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Refused connections waiting for the refuser thread, at most.
const REFUSE_QUEUE: usize = 64;
/// How long the refuser waits for a refused client's handshake response.
const REFUSE_WAIT: Duration = Duration::from_secs(1);

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
        Ok(clone) => Arc::new(ConnCtl::new(clone)),
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
