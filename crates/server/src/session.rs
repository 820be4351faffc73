//! The bridge between a connection's protocol task and its SQL session.
//! A `millrace_sql::Session` lives on a dedicated OS thread
//! ([`SessionHandle`] spawns it), never on an async worker: engine calls
//! block (row locks, log flushes), and a blocked async worker would stall
//! every connection it serves. The protocol side sends each command over a
//! channel and awaits the reply on a oneshot.

use millrace_sql::plan::OutColumn;
use millrace_sql::{ConnInfo, Output, Server, Session, SqlError, Value};
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The session state that OK packets report in their status flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionStatus {
    pub autocommit: bool,
    pub in_transaction: bool,
}

pub type Reply = (Result<Output, SqlError>, SessionStatus);
pub type Prepared = Result<(u32, usize, Vec<OutColumn>), SqlError>;

enum Request {
    Query(String, oneshot::Sender<Reply>),
    InitDb(String, oneshot::Sender<Reply>),
    Prepare(String, oneshot::Sender<Prepared>),
    Execute(u32, Vec<Value>, oneshot::Sender<Reply>),
    Close(u32),
}

/// The protocol side's end of a session: the session itself runs on its own
/// OS thread, which ends when the handle is dropped (after the command in
/// progress, if any).
pub struct SessionHandle {
    tx: mpsc::Sender<Request>,
}

fn status(s: &Session) -> SessionStatus {
    SessionStatus {
        autocommit: s.autocommit(),
        in_transaction: s.in_transaction(),
    }
}

impl SessionHandle {
    /// Starts the session's thread. `guard` is dropped when the thread ends
    /// (the server counts live sessions with it).
    pub fn spawn<G: Send + 'static>(
        server: Arc<Server>,
        conn: ConnInfo,
        guard: G,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name(format!("millrace-conn-{}", conn.connection_id))
            .spawn(move || {
                let _guard = guard;
                let mut session = Session::new(server, conn);
                while let Ok(req) = rx.recv() {
                    // A reply nobody awaits any more (the connection closed)
                    // is dropped.
                    match req {
                        Request::Query(sql, reply) => {
                            let out = session.query(&sql);
                            let _ = reply.send((out, status(&session)));
                        }
                        Request::InitDb(db, reply) => {
                            let out = session.init_db(&db);
                            let _ = reply.send((out, status(&session)));
                        }
                        Request::Prepare(sql, reply) => {
                            let _ = reply.send(session.prepare(&sql));
                        }
                        Request::Execute(id, params, reply) => {
                            let out = session.execute(id, params);
                            let _ = reply.send((out, status(&session)));
                        }
                        Request::Close(id) => session.close(id),
                    }
                }
            })?;
        Ok(SessionHandle { tx })
    }

    pub async fn query(&self, sql: &str) -> std::io::Result<Reply> {
        self.call(|reply| Request::Query(sql.to_string(), reply))
            .await
    }

    pub async fn init_db(&self, db: &str) -> std::io::Result<Reply> {
        self.call(|reply| Request::InitDb(db.to_string(), reply))
            .await
    }

    pub async fn prepare(&self, sql: &str) -> std::io::Result<Prepared> {
        self.call(|reply| Request::Prepare(sql.to_string(), reply))
            .await
    }

    pub async fn execute(&self, id: u32, params: Vec<Value>) -> std::io::Result<Reply> {
        self.call(|reply| Request::Execute(id, params, reply)).await
    }

    pub fn close(&self, id: u32) {
        let _ = self.tx.send(Request::Close(id));
    }

    async fn call<T>(&self, req: impl FnOnce(oneshot::Sender<T>) -> Request) -> std::io::Result<T> {
        let (reply, rx) = oneshot::channel();
        let gone = || std::io::Error::other("session thread ended");
        self.tx.send(req(reply)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }
}
