//! A panic inside an engine call (a bug) while a transaction is open: the
//! owner's clean-up that runs while the panic unwinds (the SQL session's
//! drop rolls back) must not panic again, which would abort the process.
//! The engine stops instead, and the next open recovers.

use crate::trx::PANIC_IN_NEXT_STATEMENT;
use crate::{Engine, Isolation, Trx, TrxConfig, TrxError};
use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use std::process::Command;
use std::sync::Arc;

fn open(s: &SimStorage) -> Arc<Engine> {
    let mut c = TrxConfig::default();
    c.store.buf.page_size = 4096;
    c.store.buf.pool_bytes = 4 << 20;
    c.store.log = LogConfig {
        capacity_bytes: 8 << 20,
        buffer_bytes: 256 << 10,
        writer_threads: WriterThreads::Off,
        durability: Durability::Flush,
        ..LogConfig::default()
    };
    c.undo_spaces = Some(2);
    c.rsegs = Some(4);
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    Engine::open(storage, c, cpu, Registry::new()).expect("engine open")
}

/// Owns a transaction the way the SQL session does: dropping it rolls the
/// transaction back.
struct Owner(Option<Trx>);

impl Owner {
    fn trx(&self) -> &Trx {
        self.0.as_ref().expect("open")
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.rollback();
        }
    }
}

const CHILD_ENV: &str = "MILLRACE_TRX_PANIC_CHILD";

/// Runs the scenario in a child process: a panic while panicking aborts the
/// whole process, which a thread cannot catch.
#[test]
fn a_panic_in_an_engine_call_stops_the_engine_without_aborting() {
    if std::env::var_os(CHILD_ENV).is_some() {
        panic_then_drop();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([
            "failure_tests::a_panic_in_an_engine_call_stops_the_engine_without_aborting",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .expect("running the child");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the child ended with {:?} (an abort is a panic while panicking):\n{text}",
        out.status
    );
    assert!(
        text.contains("a panic injected into an engine call"),
        "the child ran the scenario:\n{text}"
    );
}

fn panic_then_drop() {
    let storage = SimStorage::new();
    let e = open(&storage);
    let t = e.create_table(&[]).unwrap();
    let setup = e.begin(Isolation::RepeatableRead);
    setup.insert(t, b"kept", b"1").unwrap();
    setup.commit().unwrap();
    let other = e.begin(Isolation::RepeatableRead);
    other.insert(t, b"other", b"1").unwrap();

    let e2 = e.clone();
    let worker = std::thread::spawn(move || {
        let owner = Owner(Some(e2.begin(Isolation::RepeatableRead)));
        owner.trx().insert(t, b"a", b"1").unwrap();
        PANIC_IN_NEXT_STATEMENT.with(|p| p.set(true));
        // Panics holding the transaction's state; `owner` drops while the
        // panic unwinds.
        let _ = owner.trx().insert(t, b"b", b"2");
    });
    assert!(worker.join().is_err(), "the worker ends with its one panic");

    let why = e.failure().expect("the engine stopped").to_string();
    assert!(why.contains("panicked"), "{why}");
    let after = e.begin(Isolation::ReadCommitted);
    assert!(matches!(
        after.get(t, b"kept"),
        Err(TrxError::EngineFailed(_))
    ));
    assert!(matches!(
        other.insert(t, b"x", b"1"),
        Err(TrxError::EngineFailed(_))
    ));
    drop(after);
    drop(other);
    // A stopped engine writes nothing more, also at shutdown (its log and
    // buffer pool stopped with it).
    assert!(
        e.shutdown().is_err(),
        "a stopped engine's shutdown flushes nothing"
    );
    drop(e);

    // The next open, on what was durable, rolls back both unfinished
    // transactions from undo.
    let e = open(&storage.durable_image());
    assert_eq!(e.failure(), None);
    let r = e.begin(Isolation::ReadCommitted);
    assert_eq!(r.get(t, b"kept").unwrap(), Some(b"1".to_vec()));
    assert_eq!(r.get(t, b"a").unwrap(), None);
    assert_eq!(r.get(t, b"other").unwrap(), None);
    r.commit().unwrap();
    e.shutdown().unwrap();
}
