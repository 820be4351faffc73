//! DDL under errors and panics: whatever happens half-way through a
//! statement, its table is not left locked and later DDL still runs.

use super::rebuild::PANIC_IN_REBUILD;
use crate::error::SqlError;
use crate::session::{ConnInfo, Instance, Output, Session};
use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_trx::{Durability, Engine, TrxConfig};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

fn open() -> (Arc<Engine>, Arc<Instance>) {
    let mut cfg = TrxConfig::default();
    cfg.store.buf.page_size = 16384;
    cfg.store.buf.pool_bytes = 16 << 20;
    cfg.store.log.capacity_bytes = 16 << 20;
    cfg.store.log.buffer_bytes = 256 << 10;
    cfg.store.log.writer_threads = "off".parse().expect("a writer mode");
    cfg.store.log.durability = Durability::Flush;
    cfg.undo_spaces = Some(2);
    cfg.rsegs = Some(4);
    cfg.lock_wait_timeout_ms = 300;
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let storage = Arc::new(SimStorage::new());
    let engine = Engine::open(storage, cfg, cpu, Registry::new()).expect("engine open");
    let server = Instance::open(engine.clone()).expect("catalog open");
    (engine, server)
}

fn session(server: &Arc<Instance>, id: u32) -> Session {
    let mut s = Session::new(
        server.clone(),
        ConnInfo {
            connection_id: id,
            user: "root".into(),
            host: "127.0.0.1".into(),
        },
    );
    if server.catalog.has_database("d") {
        ok(s.query("USE d"));
    }
    s
}

fn ok(out: Result<Output, SqlError>) -> u64 {
    match out {
        Ok(Output::Ok { affected_rows, .. }) => affected_rows,
        other => panic!("expected OK, got {other:?}"),
    }
}

fn count(s: &mut Session, sql: &str) -> String {
    match s.query(sql) {
        Ok(Output::Rows { rows, .. }) => {
            let v = rows[0][0].to_text().expect("a value");
            String::from_utf8(v).expect("text")
        }
        other => panic!("expected rows, got {other:?}"),
    }
}

/// A table t(id, v) with `n` rows, v = id % `distinct`.
fn table_with_rows(server: &Arc<Instance>, n: usize, distinct: usize) {
    let mut s = session(server, 1);
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query("CREATE TABLE t (id INT PRIMARY KEY, v INT)"));
    let ids: Vec<usize> = (1..=n).collect();
    for chunk in ids.chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, {})", i % distinct))
            .collect();
        ok(s.query(&format!("INSERT INTO t VALUES {}", values.join(","))));
    }
}

/// The table is not locked: another session writes it at once, and DDL on
/// it runs.
fn assert_usable(server: &Arc<Instance>) {
    let entry = server.catalog.table("d", "t").expect("the table");
    assert!(
        !entry.mdl.is_exclusive(),
        "t's exclusive lock outlived its DDL"
    );
    let mut b = session(server, 2);
    assert_eq!(ok(b.query("INSERT INTO t VALUES (1000000, 7)")), 1);
    ok(b.query("CREATE INDEX v_again ON t(v)"));
    assert_eq!(
        count(&mut b, "SELECT COUNT(*) FROM t WHERE v = 7"),
        count(&mut b, "SELECT COUNT(*) FROM t WHERE v + 0 = 7")
    );
}

/// A panic in the middle of CREATE INDEX's rebuild (after its first batch
/// was copied): the exclusive metadata lock and the DDL mutex are released
/// by the unwinding, so the table stays usable without a restart.
#[test]
fn a_panic_in_the_middle_of_a_rebuild_leaves_the_table_usable() {
    let (engine, server) = open();
    table_with_rows(&server, 2500, 100);
    let mut a = session(&server, 3);
    PANIC_IN_REBUILD.with(|p| p.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| a.query("CREATE INDEX v_1 ON t(v)")));
    assert!(r.is_err(), "the injected panic");
    drop(a);
    assert_usable(&server);
    drop(server);
    engine.shutdown().unwrap();
}

/// An error in the middle of a rebuild (CREATE UNIQUE INDEX over
/// duplicates, found in a later batch): 1062, and the table stays usable.
#[test]
fn create_unique_index_over_duplicates_fails_and_leaves_the_table_usable() {
    let (engine, server) = open();
    table_with_rows(&server, 2500, 2000);
    let mut a = session(&server, 3);
    match a.query("CREATE UNIQUE INDEX v_u ON t(v)") {
        Err(e) => assert_eq!(e.code.number(), 1062, "{e:?}"),
        other => panic!("expected 1062, got {other:?}"),
    }
    assert_usable(&server);
    drop((a, server));
    engine.shutdown().unwrap();
}
