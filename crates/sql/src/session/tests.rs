use super::*;
use crate::catalog::TableSchema;
use crate::error::SqlError;
use crate::exec::stored::decode_stored;
use crate::types::Value;
use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_trx::Isolation;
use millrace_trx::{Durability, Engine, TrxConfig};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

fn config() -> TrxConfig {
    let mut cfg = TrxConfig::default();
    cfg.store.buf.page_size = 16384;
    cfg.store.buf.pool_bytes = 16 << 20;
    cfg.store.log.capacity_bytes = 16 << 20;
    cfg.store.log.buffer_bytes = 256 << 10;
    cfg.store.log.writer_threads = "off".parse().expect("a writer mode");
    cfg.store.log.durability = Durability::Flush;
    cfg.undo_spaces = Some(2);
    cfg.rsegs = Some(4);
    cfg.lock_wait_timeout_ms = 500;
    cfg
}

fn open(storage: Arc<SimStorage>) -> (Arc<Engine>, Arc<Instance>) {
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let engine = Engine::open(storage, config(), cpu, Registry::new()).expect("engine open");
    let server = Instance::open(engine.clone()).expect("catalog open");
    (engine, server)
}

fn conn(id: u32) -> ConnInfo {
    ConnInfo {
        connection_id: id,
        user: "root".into(),
        host: "127.0.0.1".into(),
    }
}

fn rows(out: Result<Output, SqlError>) -> Vec<Vec<String>> {
    match out {
        Ok(Output::Rows { rows, .. }) => rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| {
                        v.to_text()
                            .map(|b| String::from_utf8(b).unwrap())
                            .unwrap_or_else(|| "NULL".into())
                    })
                    .collect()
            })
            .collect(),
        other => panic!("expected rows, got {other:?}"),
    }
}

fn ok(out: Result<Output, SqlError>) -> u64 {
    match out {
        Ok(Output::Ok { affected_rows, .. }) => affected_rows,
        other => panic!("expected OK, got {other:?}"),
    }
}

fn code(out: Result<Output, SqlError>) -> u16 {
    match out {
        Err(e) => e.code.number(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn r(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const SBTEST: &str = "CREATE TABLE sbtest1(
  id INTEGER NOT NULL AUTO_INCREMENT,
  k INTEGER DEFAULT '0' NOT NULL,
  c CHAR(120) DEFAULT '' NOT NULL,
  pad CHAR(60) DEFAULT '' NOT NULL,
  PRIMARY KEY (id)
) /*! ENGINE = innodb */";

#[test]
fn sysbench_statements_run() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server, conn(1));
    ok(s.query("CREATE DATABASE sbtest"));
    assert_eq!(code(s.query("CREATE DATABASE sbtest")), 1007);
    ok(s.query("USE sbtest"));
    ok(s.query(SBTEST));
    assert_eq!(code(s.query(SBTEST)), 1050);
    let mut values = Vec::new();
    for i in 1..=200 {
        values.push(format!("({}, 'c{i:03}-x', 'pad')", i % 10));
    }
    let n = ok(s.query(&format!(
        "INSERT INTO sbtest1(k, c, pad) VALUES{}",
        values.join(",")
    )));
    assert_eq!(n, 200);
    ok(s.query("CREATE INDEX k_1 ON sbtest1(k)"));
    assert_eq!(
        rows(s.query("SELECT c FROM sbtest1 WHERE id=7")),
        vec![r(&["c007-x"])]
    );
    assert_eq!(
        rows(s.query("SELECT c FROM sbtest1 WHERE id BETWEEN 3 AND 5")),
        vec![r(&["c003-x"]), r(&["c004-x"]), r(&["c005-x"])]
    );
    assert_eq!(
        rows(s.query("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 10")),
        vec![r(&["45"])]
    );
    assert_eq!(
        rows(s.query(
            "SELECT DISTINCT k FROM sbtest1 WHERE id BETWEEN 1 AND 30 ORDER BY k DESC LIMIT 3"
        )),
        vec![r(&["9"]), r(&["8"]), r(&["7"])]
    );
    assert_eq!(
        rows(s.query("SELECT c FROM sbtest1 WHERE id BETWEEN 8 AND 12 ORDER BY c")),
        vec![
            r(&["c008-x"]),
            r(&["c009-x"]),
            r(&["c010-x"]),
            r(&["c011-x"]),
            r(&["c012-x"])
        ]
    );
    // Secondary index access, and its maintenance on UPDATE.
    assert_eq!(
        rows(s.query("SELECT COUNT(*) FROM sbtest1 WHERE k = 3")),
        vec![r(&["20"])]
    );
    assert_eq!(ok(s.query("UPDATE sbtest1 SET k=k+1 WHERE id=3")), 1);
    assert_eq!(
        rows(s.query("SELECT COUNT(*) FROM sbtest1 WHERE k = 3")),
        vec![r(&["19"])]
    );
    assert_eq!(
        rows(s.query("SELECT COUNT(*) FROM sbtest1 WHERE k = 4")),
        vec![r(&["21"])]
    );
    assert_eq!(ok(s.query("UPDATE sbtest1 SET c='new' WHERE id=4")), 1);
    assert_eq!(
        rows(s.query("SELECT c, k FROM sbtest1 WHERE id=4")),
        vec![r(&["new", "4"])]
    );
    // oltp_read_write / oltp_delete: delete then insert the same id.
    ok(s.query("BEGIN"));
    assert_eq!(ok(s.query("DELETE FROM sbtest1 WHERE id=5")), 1);
    assert_eq!(
        ok(s.query("INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 50, 'again', 'p')")),
        1
    );
    ok(s.query("COMMIT"));
    assert_eq!(
        rows(s.query("SELECT k, c FROM sbtest1 WHERE id=5")),
        vec![r(&["50", "again"])]
    );
    assert_eq!(
        code(s.query("INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 1, 'dup', 'p')")),
        1062
    );
    // AUTO_INCREMENT: 0 and NULL generate, LAST_INSERT_ID reports it.
    ok(s.query("INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 1, 'a', 'b')"));
    ok(s.query("INSERT INTO sbtest1 (id, k, c, pad) VALUES (NULL, 1, 'a', 'b')"));
    assert_eq!(rows(s.query("SELECT LAST_INSERT_ID()")), vec![r(&["202"])]);
    assert_eq!(
        rows(s.query("SELECT MAX(id), MIN(id), COUNT(*) FROM sbtest1")),
        vec![r(&["202", "1", "202"])]
    );
    ok(s.query("DROP TABLE IF EXISTS sbtest1"));
    assert_eq!(code(s.query("SELECT * FROM sbtest1")), 1146);
    assert_eq!(code(s.query("DROP TABLE sbtest1")), 1051);
    drop(s);
    engine.shutdown().unwrap();
}

#[test]
fn prepared_statements_and_plan_cache() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,2))"));
    let (ins, n, cols) = s
        .prepare("INSERT INTO t (id, v, d) VALUES (?, ?, ?)")
        .unwrap();
    assert_eq!((n, cols.len()), (3, 0));
    for i in 0..20i64 {
        ok(s.execute(
            ins,
            vec![
                Value::Int(i),
                Value::Bytes(format!("v{i}").into_bytes()),
                Value::Double(i as f64 / 4.0),
            ],
        ));
    }
    let (sel, n, cols) = s
        .prepare("SELECT v, d FROM t WHERE id BETWEEN ? AND ? ORDER BY id DESC")
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["v", "d"]
    );
    assert_eq!(
        rows(s.execute(sel, vec![Value::Int(3), Value::Int(5)])),
        vec![r(&["v5", "1.25"]), r(&["v4", "1.00"]), r(&["v3", "0.75"])]
    );
    assert_eq!(code(s.execute(sel, vec![Value::Int(3)])), 1210);
    assert_eq!(code(s.execute(999, vec![])), 1243);
    // Text statements of one shape share a plan.
    let before = server.plans.len();
    for i in 0..10 {
        assert_eq!(
            rows(s.query(&format!("SELECT v FROM t WHERE id = {i}"))),
            vec![vec![format!("v{i}")]]
        );
    }
    assert_eq!(server.plans.len(), before + 1);
    // A plan made before DDL is made again after it.
    ok(s.query("CREATE INDEX vi ON t (v)"));
    assert_eq!(
        rows(s.execute(sel, vec![Value::Int(1), Value::Int(1)])),
        vec![r(&["v1", "0.25"])]
    );
    assert_eq!(
        rows(s.query("SELECT id FROM t WHERE v = 'v7'")),
        vec![r(&["7"])]
    );
    assert_eq!(code(s.prepare("SELEKT 1").map(|_| Output::ok())), 1064);
    s.close(sel);
    assert_eq!(
        code(s.execute(sel, vec![Value::Int(1), Value::Int(1)])),
        1243
    );
    drop(s);
    engine.shutdown().unwrap();
}

#[test]
fn errors_have_mysql_codes() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server, conn(1));
    assert_eq!(code(s.query("SELECT * FROM t")), 1046);
    ok(s.query("CREATE DATABASE d"));
    assert_eq!(code(s.query("USE nope")), 1049);
    ok(s.query("USE d"));
    assert_eq!(code(s.query("SELEC 1")), 1064);
    assert_eq!(code(s.query("SELECT * FROM nope")), 1146);
    ok(s.query("CREATE TABLE t (a INT NOT NULL, b TINYINT, c VARCHAR(3), UNIQUE KEY ua (a))"));
    assert_eq!(code(s.query("SELECT z FROM t")), 1054);
    assert_eq!(code(s.query("INSERT INTO t (b) VALUES (1)")), 1364);
    assert_eq!(code(s.query("INSERT INTO t (a, b) VALUES (NULL, 1)")), 1048);
    assert_eq!(code(s.query("INSERT INTO t (a, b) VALUES (1, 300)")), 1264);
    assert_eq!(
        code(s.query("INSERT INTO t (a, c) VALUES (1, 'abcd')")),
        1406
    );
    assert_eq!(code(s.query("INSERT INTO t (a) VALUES (1, 2)")), 1136);
    ok(s.query("INSERT INTO t (a) VALUES (1)"));
    assert_eq!(code(s.query("INSERT INTO t (a) VALUES (1)")), 1062);
    assert_eq!(code(s.query("SELECT @@nope")), 1193);
    assert_eq!(code(s.query("SET GLOBAL nope = 1")), 1193);
    assert_eq!(code(s.query("SET innodb_max_purge_lag = 5")), 1229);
    assert_eq!(code(s.query("SET GLOBAL innodb_page_size = 5")), 1238);
    assert_eq!(code(s.query("")), 1065);
    assert_eq!(code(s.query("CREATE TABLE k (a TEXT PRIMARY KEY)")), 1071);
    // A failed statement in a transaction is undone alone.
    ok(s.query("BEGIN"));
    ok(s.query("INSERT INTO t (a) VALUES (2)"));
    assert_eq!(code(s.query("INSERT INTO t (a) VALUES (3), (1)")), 1062);
    ok(s.query("COMMIT"));
    assert_eq!(
        rows(s.query("SELECT a FROM t ORDER BY a")),
        vec![r(&["1"]), r(&["2"])]
    );
    drop(s);
    engine.shutdown().unwrap();
}

#[test]
fn transactions_isolate_and_roll_back() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut a = Session::new(server.clone(), conn(1));
    let mut b = Session::new(server, conn(2));
    ok(a.query("CREATE DATABASE d"));
    ok(a.query("USE d"));
    ok(b.query("USE d"));
    ok(a.query("CREATE TABLE acct (id INT PRIMARY KEY, bal BIGINT NOT NULL)"));
    ok(a.query("INSERT INTO acct VALUES (1, 100), (2, 100)"));
    ok(a.query("START TRANSACTION"));
    assert!(a.in_transaction());
    ok(a.query("UPDATE acct SET bal = bal - 30 WHERE id = 1"));
    ok(a.query("UPDATE acct SET bal = bal + 30 WHERE id = 2"));
    // b sees the committed state, not a's changes.
    assert_eq!(
        rows(b.query("SELECT SUM(bal) FROM acct")),
        vec![r(&["200"])]
    );
    assert_eq!(
        rows(b.query("SELECT bal FROM acct WHERE id = 1")),
        vec![r(&["100"])]
    );
    // b's write waits for a's lock, and times out (1205).
    assert_eq!(code(b.query("UPDATE acct SET bal = 0 WHERE id = 1")), 1205);
    ok(a.query("ROLLBACK"));
    assert_eq!(
        rows(b.query("SELECT bal FROM acct ORDER BY id")),
        vec![r(&["100"]), r(&["100"])]
    );
    // BEGIN inside a transaction commits it.
    ok(a.query("BEGIN"));
    ok(a.query("UPDATE acct SET bal = 1 WHERE id = 1"));
    ok(a.query("BEGIN"));
    assert_eq!(
        rows(b.query("SELECT bal FROM acct WHERE id = 1")),
        vec![r(&["1"])]
    );
    ok(a.query("ROLLBACK"));
    // autocommit=0: statements join one transaction until COMMIT.
    ok(a.query("SET autocommit = 0"));
    ok(a.query("UPDATE acct SET bal = 2 WHERE id = 2"));
    assert_eq!(
        rows(b.query("SELECT bal FROM acct WHERE id = 2")),
        vec![r(&["100"])]
    );
    ok(a.query("COMMIT"));
    assert_eq!(
        rows(b.query("SELECT bal FROM acct WHERE id = 2")),
        vec![r(&["2"])]
    );
    // FOR UPDATE locks the row.
    assert_eq!(
        rows(a.query("SELECT bal FROM acct WHERE id = 2 FOR UPDATE")),
        vec![r(&["2"])]
    );
    assert_eq!(code(b.query("DELETE FROM acct WHERE id = 2")), 1205);
    ok(a.query("COMMIT"));
    assert_eq!(ok(b.query("DELETE FROM acct WHERE id = 2")), 1);
    drop((a, b));
    engine.shutdown().unwrap();
}

#[test]
fn catalog_and_rows_survive_a_crash() {
    let storage = Arc::new(SimStorage::new());
    let (engine, server) = open(storage.clone());
    let mut s = Session::new(server, conn(1));
    ok(s.query("CREATE DATABASE shop"));
    ok(s.query("USE shop"));
    ok(s.query(
        "CREATE TABLE items (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) NOT NULL, \
         price DECIMAL(10,2), added DATETIME, KEY by_name (name))",
    ));
    for i in 0..50 {
        ok(s.query(&format!(
            "INSERT INTO items (name, price, added) VALUES ('item{i}', {i}.5, '2026-11-21 10:00:{:02}')",
            i % 60
        )));
    }
    ok(s.query("DELETE FROM items WHERE id > 40"));
    drop(s);
    // Crash: only what was synced survives.
    let image = storage.crash_image(7);
    drop(engine);
    let (engine, server) = open(Arc::new(image));
    let mut s = Session::new(server, conn(2));
    ok(s.query("USE shop"));
    assert_eq!(
        rows(s.query("SELECT COUNT(*), SUM(price) FROM items")),
        vec![r(&["40", "800.00"])]
    );
    assert_eq!(
        rows(s.query("SELECT id, added FROM items WHERE name = 'item7'")),
        vec![r(&["8", "2026-11-21 10:00:07"])]
    );
    // The AUTO_INCREMENT counter resumes after the largest id stored (the
    // deleted rows' ids too, until purge has removed them).
    ok(s.query("INSERT INTO items (name) VALUES ('next')"));
    let id = &rows(s.query("SELECT id FROM items WHERE name = 'next'"))[0][0];
    assert!(id == "41" || id == "51", "{id}");
    assert_eq!(rows(s.query("SHOW TABLES")), vec![r(&["items"])]);
    drop(s);
    engine.shutdown().unwrap();
}

#[test]
fn variables_status_and_virtual_tables() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server, conn(7));
    assert_eq!(
        rows(s.query("select @@version_comment limit 1")),
        vec![r(&["millrace"])]
    );
    assert_eq!(
        rows(s.query("select DATABASE(), USER() limit 1")),
        vec![r(&["NULL", "root@127.0.0.1"])]
    );
    assert_eq!(
        rows(s.query("SELECT CONNECTION_ID(), 1+1")),
        vec![r(&["7", "2"])]
    );
    ok(s.query("SET NAMES latin1"));
    assert_eq!(
        rows(s.query("SHOW VARIABLES LIKE 'collation_connection'")),
        vec![r(&["collation_connection", "latin1_swedish_ci"])]
    );
    ok(s.query("SET GLOBAL innodb_flush_log_at_trx_commit = 2"));
    assert_eq!(engine.durability(), Durability::Write);
    ok(s.query("SET GLOBAL innodb_max_purge_lag = 1234"));
    assert_eq!(
        engine.settings().max_purge_lag.load(Ordering::Relaxed),
        1234
    );
    assert_eq!(
        rows(s.query("SHOW GLOBAL VARIABLES LIKE 'innodb_max_purge_lag'")),
        vec![r(&["innodb_max_purge_lag", "1234"])]
    );
    assert_eq!(
        rows(s.query("SELECT @@innodb_flush_log_at_trx_commit")),
        vec![r(&["2"])]
    );
    let status = rows(s.query("SHOW GLOBAL STATUS LIKE 'log\\_%'"));
    assert!(status.iter().any(|r| r[0] == "log_fsyncs"), "{status:?}");
    let m = rows(s.query(
        "SELECT NAME, COUNT FROM information_schema.innodb_metrics WHERE NAME = 'trx_commits'",
    ));
    assert_eq!(m.len(), 1);
    let w = rows(s.query(
        "SELECT EVENT_NAME, COUNT_STAR FROM performance_schema.events_waits_summary_global_by_event_name",
    ));
    assert!(w.iter().any(|r| r[0].ends_with("/lock")), "{w:?}");
    drop(s);
    engine.shutdown().unwrap();
}

// ---- values stored out of line (toast.rs) ----------------------------------

/// Deterministic bytes: random (`text`: printable ASCII, valid UTF-8).
fn noise(seed: u64, n: usize, text: bool) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = (x >> 24) as u8;
            if text {
                b' ' + b % 95
            } else {
                b
            }
        })
        .collect()
}

/// The values of a result, unconverted.
fn values(out: Result<Output, SqlError>) -> Vec<Vec<Value>> {
    match out {
        Ok(Output::Rows { rows, .. }) => rows,
        other => panic!("expected rows, got {other:?}"),
    }
}

fn one_value(out: Result<Output, SqlError>) -> Value {
    let mut v = values(out);
    assert_eq!(v.len(), 1, "one row");
    v.pop().unwrap().pop().unwrap()
}

fn bytes(v: Vec<u8>) -> Value {
    Value::Bytes(v)
}

fn schema_of(server: &Instance, db: &str, table: &str) -> Arc<TableSchema> {
    server.catalog.table(db, table).unwrap().schema.clone()
}

/// The keys of a toast table visible to a new transaction.
fn toast_keys(engine: &Arc<Engine>, toast: u32) -> Vec<Vec<u8>> {
    let t = engine.begin(Isolation::RepeatableRead);
    let rows = t
        .scan(toast, Bound::Unbounded, Bound::Unbounded, usize::MAX)
        .unwrap();
    t.commit().unwrap();
    rows.into_iter().map(|(k, _)| k).collect()
}

/// The value ids named by a toast table's keys, each once.
fn toast_ids(engine: &Arc<Engine>, toast: u32) -> Vec<u64> {
    let mut ids: Vec<u64> = toast_keys(engine, toast)
        .iter()
        .map(|k| u64::from_be_bytes(k[..8].try_into().unwrap()))
        .collect();
    ids.dedup();
    ids
}

const DOCS: &str = "CREATE TABLE docs (id INT PRIMARY KEY, n INT, body TEXT, data BLOB)";

fn insert_doc(s: &mut Session, id: i64, body: &[u8], data: &[u8]) {
    let (ins, _, _) = s.prepare("INSERT INTO docs VALUES (?, 0, ?, ?)").unwrap();
    ok(s.execute(
        ins,
        vec![Value::Int(id), bytes(body.to_vec()), bytes(data.to_vec())],
    ));
    s.close(ins);
}

#[test]
fn long_values_go_out_of_line_and_come_back_whole() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query(DOCS));
    let toast = schema_of(&server, "d", "docs")
        .toast_table
        .expect("a toast table");
    assert!(engine.table_ids().contains(&toast));
    let body = noise(1, 60_000, true);
    let data = noise(2, 65_535, false);
    insert_doc(&mut s, 1, &body, &data);
    // A short value stays inline; the chunks are 1638 bytes (16 KiB pages).
    insert_doc(&mut s, 2, b"short", b"");
    assert_eq!(
        toast_keys(&engine, toast).len(),
        60_000usize.div_ceil(1638) + 65_535usize.div_ceil(1638)
    );
    assert_eq!(
        values(s.query("SELECT body, data, LENGTH(data) FROM docs WHERE id = 1")),
        vec![vec![
            bytes(body.clone()),
            bytes(data.clone()),
            Value::Int(65_535)
        ]]
    );
    // Through a scan, a filter on the long value, and a prepared statement.
    let (sel, _, _) = s.prepare("SELECT id FROM docs WHERE body = ?").unwrap();
    assert_eq!(
        rows(s.execute(sel, vec![bytes(body.clone())])),
        vec![r(&["1"])]
    );
    assert_eq!(
        rows(s.query("SELECT id, LENGTH(body) FROM docs ORDER BY id")),
        vec![r(&["1", "60000"]), r(&["2", "5"])]
    );
    // Too long for the type is still 1406, and nothing was written.
    let (ins, _, _) = s.prepare("INSERT INTO docs VALUES (?, 0, ?, ?)").unwrap();
    assert_eq!(
        code(s.execute(
            ins,
            vec![
                Value::Int(3),
                bytes(b"x".to_vec()),
                bytes(noise(3, 65_536, false))
            ]
        )),
        1406
    );
    // A long VARCHAR goes out of line too.
    ok(s.query("CREATE TABLE notes (id INT PRIMARY KEY, v VARCHAR(5000))"));
    let v = noise(4, 5000, true);
    let (ins, _, _) = s.prepare("INSERT INTO notes VALUES (?, ?)").unwrap();
    ok(s.execute(ins, vec![Value::Int(1), bytes(v.clone())]));
    assert_eq!(one_value(s.query("SELECT v FROM notes")), bytes(v));
    // A table that cannot hold a long value gets no toast table.
    ok(s.query(SBTEST));
    assert_eq!(schema_of(&server, "d", "sbtest1").toast_table, None);
    drop(s);
    engine.shutdown().unwrap();
}

#[test]
fn long_values_follow_updates_rollbacks_and_snapshots() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut a = Session::new(server.clone(), conn(1));
    let mut b = Session::new(server.clone(), conn(2));
    ok(a.query("CREATE DATABASE d"));
    ok(a.query("USE d"));
    ok(b.query("USE d"));
    ok(a.query(DOCS));
    let toast = schema_of(&server, "d", "docs").toast_table.unwrap();
    let (v1, v2, v3) = (
        noise(10, 40_000, true),
        noise(11, 50_000, true),
        noise(12, 30_000, true),
    );
    insert_doc(&mut a, 1, &v1, b"d");
    let (set, _, _) = a.prepare("UPDATE docs SET body = ? WHERE id = 1").unwrap();
    // ROLLBACK restores the old value.
    ok(a.query("BEGIN"));
    assert_eq!(ok(a.execute(set, vec![bytes(v2.clone())])), 1);
    assert_eq!(
        one_value(a.query("SELECT body FROM docs WHERE id = 1")),
        bytes(v2.clone())
    );
    ok(a.query("ROLLBACK"));
    assert_eq!(
        one_value(a.query("SELECT body FROM docs WHERE id = 1")),
        bytes(v1.clone())
    );
    // A repeatable-read snapshot taken before a committed update keeps
    // reading the old value (its chunks are delete-marked, not gone).
    ok(b.query("BEGIN"));
    assert_eq!(
        one_value(b.query("SELECT body FROM docs WHERE id = 1")),
        bytes(v1.clone())
    );
    assert_eq!(ok(a.execute(set, vec![bytes(v2.clone())])), 1);
    assert_eq!(
        one_value(a.query("SELECT body FROM docs WHERE id = 1")),
        bytes(v2.clone())
    );
    assert_eq!(
        one_value(b.query("SELECT body FROM docs WHERE id = 1")),
        bytes(v1.clone())
    );
    // A locking read in that old transaction reads the latest row, whose
    // chunks its snapshot cannot see: they are read locked instead.
    assert_eq!(
        ok(b.query("UPDATE docs SET body = CONCAT(body, '!') WHERE id = 1")),
        1
    );
    ok(b.query("COMMIT"));
    let mut want = v2.clone();
    want.push(b'!');
    assert_eq!(
        one_value(a.query("SELECT body FROM docs WHERE id = 1")),
        bytes(want.clone())
    );
    // An UPDATE of another column keeps the pointer: same value ids.
    let ids = toast_ids(&engine, toast);
    assert_eq!(ids.len(), 1, "only the latest value is visible");
    assert_eq!(ok(a.query("UPDATE docs SET n = n + 1 WHERE id = 1")), 1);
    assert_eq!(toast_ids(&engine, toast), ids);
    assert_eq!(
        rows(a.query("SELECT n, LENGTH(body) FROM docs WHERE id = 1")),
        vec![r(&["1", "50001"])]
    );
    // A statement that fails after writing chunks (the row's new primary
    // key is taken) leaves none behind. (A rebuild first: it keeps them.)
    ok(a.query("CREATE UNIQUE INDEX un ON docs (n)"));
    assert_eq!(toast_ids(&engine, toast), ids);
    insert_doc(&mut a, 2, &v3, b"d");
    ok(a.query("BEGIN"));
    let (setn, _, _) = a
        .prepare("UPDATE docs SET body = ?, id = 1 WHERE id = 2")
        .unwrap();
    assert_eq!(code(a.execute(setn, vec![bytes(v1.clone())])), 1062);
    ok(a.query("COMMIT"));
    assert_eq!(toast_ids(&engine, toast).len(), 2);
    // UPDATE making a value short moves it back inline and deletes the
    // chunks; DELETE deletes them all. Purge then removes them for good.
    assert_eq!(ok(a.query("UPDATE docs SET body = 'tiny' WHERE id = 2")), 1);
    assert_eq!(toast_ids(&engine, toast), ids);
    assert_eq!(ok(a.query("DELETE FROM docs WHERE id = 1")), 1);
    assert_eq!(toast_keys(&engine, toast), Vec::<Vec<u8>>::new());
    assert_eq!(
        rows(a.query("SELECT id, body FROM docs")),
        vec![r(&["2", "tiny"])]
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while engine.last_key(toast).unwrap().is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "purge left chunks in the toast table"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop((a, b));
    engine.shutdown().unwrap();
}

#[test]
fn long_values_survive_a_restart_and_ids_are_not_reused() {
    let storage = Arc::new(SimStorage::new());
    let (engine, server) = open(storage.clone());
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query(DOCS));
    let toast = schema_of(&server, "d", "docs").toast_table.unwrap();
    let docs: Vec<(Vec<u8>, Vec<u8>)> = (0..4)
        .map(|i| (noise(20 + i, 9000, true), noise(30 + i, 20_000, false)))
        .collect();
    for (i, (body, data)) in docs.iter().enumerate() {
        insert_doc(&mut s, i as i64, body, data);
    }
    let before = toast_ids(&engine, toast);
    assert_eq!(before.len(), 8);
    drop(s);
    drop(server);
    engine.shutdown().unwrap();
    drop(engine);
    for image in [storage.clean_image(), storage.crash_image(5)] {
        let (engine, server) = open(Arc::new(image));
        // The orphan cleanup at open kept the toast table.
        assert_eq!(schema_of(&server, "d", "docs").toast_table, Some(toast));
        assert!(engine.table_ids().contains(&toast));
        let mut s = Session::new(server, conn(2));
        ok(s.query("USE d"));
        for (i, (body, data)) in docs.iter().enumerate() {
            assert_eq!(
                values(s.query(&format!("SELECT body, data FROM docs WHERE id = {i}"))),
                vec![vec![bytes(body.clone()), bytes(data.clone())]]
            );
        }
        // New values get ids above the old ones and clobber nothing.
        let fresh = noise(40, 12_000, true);
        insert_doc(&mut s, 9, &fresh, b"");
        let (set, _, _) = s.prepare("UPDATE docs SET body = ? WHERE id = 0").unwrap();
        ok(s.execute(set, vec![bytes(fresh.clone())]));
        let after = toast_ids(&engine, toast);
        assert_eq!(after.len(), 9);
        assert!(after[7..].iter().all(|id| id > before.last().unwrap()));
        assert_eq!(
            one_value(s.query("SELECT body FROM docs WHERE id = 9")),
            bytes(fresh.clone())
        );
        assert_eq!(
            one_value(s.query("SELECT body FROM docs WHERE id = 0")),
            bytes(fresh)
        );
        for (i, (body, data)) in docs.iter().enumerate().skip(1) {
            assert_eq!(
                values(s.query(&format!("SELECT body, data FROM docs WHERE id = {i}"))),
                vec![vec![bytes(body.clone()), bytes(data.clone())]]
            );
        }
        drop(s);
        engine.shutdown().unwrap();
    }
}

#[test]
fn damaged_out_of_line_values_are_1877() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query(DOCS));
    let schema = schema_of(&server, "d", "docs");
    let toast = schema.toast_table.unwrap();
    for i in 1..=3 {
        insert_doc(&mut s, i, &noise(50 + i as u64, 8000, true), b"d");
    }
    let ids = toast_ids(&engine, toast);
    let chunk = |id: u64, n: u32| {
        let mut k = id.to_be_bytes().to_vec();
        k.extend_from_slice(&n.to_be_bytes());
        k
    };
    let t = engine.begin(Isolation::RepeatableRead);
    // Row 1: a chunk missing. Row 2: a chunk's bytes changed.
    assert!(t.delete(toast, &chunk(ids[0], 2)).unwrap());
    let mut part = t.get(toast, &chunk(ids[1], 0)).unwrap().unwrap();
    part[7] ^= 1;
    assert!(t.update(toast, &chunk(ids[1], 0), &part).unwrap());
    // Row 3: its pointer's length changed.
    let pk = encode_key_of(&schema, 3);
    let stored = t.get(schema.engine_table, &pk).unwrap().unwrap();
    let types = schema.types();
    let (mut row, mut ext) = decode_stored(&schema, &types, &stored).unwrap();
    assert_eq!(ext.len(), 1);
    ext[0].1.len -= 1;
    row[2] = Value::Null; // not read: the column is a pointer
    let mut payload = Vec::new();
    crate::encode_row_external(&row, &ext, &types, &mut payload).unwrap();
    t.update(schema.engine_table, &pk, &payload).unwrap();
    t.commit().unwrap();
    for i in 1..=3 {
        let q = format!("SELECT body FROM docs WHERE id = {i}");
        assert_eq!(code(s.query(&q)), 1877, "{q}");
        let q = format!("SELECT body FROM docs WHERE id = {i} FOR UPDATE");
        assert_eq!(code(s.query(&q)), 1877, "{q}");
    }
    assert_eq!(
        code(s.query("SELECT COUNT(*) FROM docs WHERE body > ''")),
        1877
    );
    // What does not need the value still works, DELETE included.
    assert_eq!(
        rows(s.query("SELECT id, n FROM docs ORDER BY id")),
        vec![r(&["1", "0"]), r(&["2", "0"]), r(&["3", "0"])]
    );
    assert_eq!(ok(s.query("DELETE FROM docs WHERE id = 1")), 1);
    drop(s);
    engine.shutdown().unwrap();
}

/// The primary key of an INT key column holding `id`.
fn encode_key_of(s: &TableSchema, id: i64) -> Vec<u8> {
    let mut row = vec![Value::Null; s.columns.len()];
    row[s.primary_key[0]] = Value::Int(id);
    s.key_of(&s.primary_key, &row)
}

#[test]
fn create_index_keeps_long_values_and_drop_table_drops_them() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query(
        "CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR(400), n INT, body TEXT, KEY kk (k))",
    ));
    let toast = schema_of(&server, "d", "t").toast_table.unwrap();
    let (ins, _, _) = s.prepare("INSERT INTO t VALUES (?, ?, ?, ?)").unwrap();
    let mut want = Vec::new();
    // 400 four-byte characters: the key column itself goes out of line once
    // the long body has and the row (with its 1.8 KB key) is still long.
    let wide = "\u{1F600}".repeat(400).into_bytes();
    for i in 0..30i64 {
        let k = if i == 7 {
            wide.clone()
        } else {
            format!("k{i:02}").into_bytes()
        };
        let body = noise(60 + i as u64, 3000 + 1000 * i as usize, true);
        ok(s.execute(
            ins,
            vec![
                Value::Int(i),
                bytes(k.clone()),
                Value::Int(i % 3),
                bytes(body.clone()),
            ],
        ));
        want.push(vec![Value::Int(i), bytes(k), bytes(body)]);
    }
    let ids = toast_ids(&engine, toast);
    assert_eq!(ids.len(), 31, "30 bodies and one key value");
    let (by_k, _, _) = s.prepare("SELECT id FROM t WHERE k = ?").unwrap();
    assert_eq!(
        rows(s.execute(by_k, vec![bytes(wide.clone())])),
        vec![r(&["7"])]
    );
    // An UPDATE of row 7 builds its keys from the fetched key value.
    assert_eq!(ok(s.query("UPDATE t SET n = n + 10 WHERE id = 7")), 1);
    assert_eq!(
        rows(s.execute(by_k, vec![bytes(wide.clone())])),
        vec![r(&["7"])]
    );
    let old_engine_table = schema_of(&server, "d", "t").engine_table;
    // The rebuild fetches row 7's key value to build its keys again.
    ok(s.query("CREATE INDEX nn ON t (n)"));
    let after = schema_of(&server, "d", "t");
    assert_ne!(after.engine_table, old_engine_table);
    assert_eq!(after.toast_table, Some(toast));
    assert!(!engine.table_ids().contains(&old_engine_table));
    assert_eq!(
        toast_ids(&engine, toast),
        ids,
        "the rebuild copied pointers"
    );
    assert_eq!(
        values(s.query("SELECT id, k, body FROM t ORDER BY id")),
        want
    );
    assert_eq!(
        rows(s.query("SELECT id FROM t WHERE n = 11")),
        vec![r(&["7"])]
    );
    assert_eq!(rows(s.execute(by_k, vec![bytes(wide)])), vec![r(&["7"])]);
    ok(s.query("DROP TABLE t"));
    assert!(!engine.table_ids().contains(&toast));
    assert!(!engine.table_ids().contains(&after.engine_table));
    drop(s);
    engine.shutdown().unwrap();
}

#[test]
fn tables_from_before_toast_tables_keep_1118_until_rebuilt() {
    let (engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query("CREATE TABLE t (id INT PRIMARY KEY, n INT, body TEXT)"));
    // Made as before schema version 2: no toast table.
    let mut old = (*schema_of(&server, "d", "t")).clone();
    old.name = "legacy".into();
    server.catalog.create_table(old, false).unwrap();
    assert_eq!(schema_of(&server, "d", "legacy").toast_table, None);
    let (ins, _, _) = s.prepare("INSERT INTO legacy VALUES (?, 0, ?)").unwrap();
    ok(s.execute(ins, vec![Value::Int(1), bytes(noise(70, 1500, true))]));
    assert_eq!(
        code(s.execute(ins, vec![Value::Int(2), bytes(noise(71, 5000, true))])),
        1118
    );
    // A rebuild gives it a toast table, and the copied rows follow the rule
    // (the 1500-byte value, over the inline limit, goes out of line).
    ok(s.query("CREATE INDEX nn ON legacy (n)"));
    let toast = schema_of(&server, "d", "legacy").toast_table.unwrap();
    assert_eq!(toast_ids(&engine, toast).len(), 1);
    ok(s.execute(ins, vec![Value::Int(2), bytes(noise(71, 5000, true))]));
    assert_eq!(toast_ids(&engine, toast).len(), 2);
    assert_eq!(
        values(s.query("SELECT body FROM legacy ORDER BY id")),
        vec![
            vec![bytes(noise(70, 1500, true))],
            vec![bytes(noise(71, 5000, true))]
        ]
    );
    drop(s);
    engine.shutdown().unwrap();
}

/// Scans longer than one engine batch (primary key and secondary index
/// ranges, runs of equal secondary keys across batch ends), LIMIT that stops
/// a scan, and UPDATEs that move rows ahead of their own scan.
#[test]
fn scans_span_batches() {
    let (_engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server, conn(1));
    ok(s.query("USE test"));
    ok(s.query("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, KEY k (k))"));
    let values: Vec<String> = (0..1000).map(|i| format!("({i}, {})", i % 3)).collect();
    assert_eq!(
        ok(s.query(&format!("INSERT INTO t VALUES {}", values.join(",")))),
        1000
    );
    let one = |s: &mut Session, q: &str| rows(s.query(q))[0][0].clone();
    assert_eq!(one(&mut s, "SELECT COUNT(*) FROM t"), "1000");
    assert_eq!(one(&mut s, "SELECT COUNT(*) FROM t WHERE k = 1"), "333");
    assert_eq!(
        one(&mut s, "SELECT SUM(id) FROM t WHERE k BETWEEN 0 AND 2"),
        "499500"
    );
    assert_eq!(
        one(&mut s, "SELECT COUNT(DISTINCT id) FROM t WHERE k >= 0"),
        "1000"
    );
    assert_eq!(one(&mut s, "SELECT COUNT(*) FROM t WHERE id >= 100"), "900");
    assert_eq!(
        rows(s.query("SELECT id FROM t LIMIT 2 OFFSET 700")),
        vec![r(&["700"]), r(&["701"])]
    );
    assert_eq!(
        rows(s.query("SELECT id FROM t WHERE k = 2 ORDER BY id DESC LIMIT 1")),
        vec![r(&["998"])]
    );
    // Each row changes once, though its new keys lie ahead of the scan.
    assert_eq!(ok(s.query("UPDATE t SET k = k + 10 WHERE k >= 0")), 1000);
    assert_eq!(
        ok(s.query("UPDATE t SET id = id + 5000 WHERE id >= 0")),
        1000
    );
    assert_eq!(one(&mut s, "SELECT MIN(id) FROM t"), "5000");
    assert_eq!(one(&mut s, "SELECT COUNT(*) FROM t WHERE k = 11"), "333");
    assert_eq!(ok(s.query("DELETE FROM t WHERE k = 12")), 333);
    assert_eq!(ok(s.query("DELETE FROM t WHERE id >= 5000 LIMIT 300")), 300);
    assert_eq!(one(&mut s, "SELECT COUNT(*) FROM t"), "367");
}

// ---- Bounds and interruption (docs/design.md, "Bounds and interruption in
// the SQL layer").

/// Runs `f` on a thread with the 2 MiB stack a connection thread has (the
/// server spawns them with std's default, 2 MiB): an overflow aborts the
/// test process.
fn on_connection_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

fn with_rows(s: &mut Session, n: usize) {
    ok(s.query("CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(100))"));
    let values: Vec<String> = (1..=n).map(|i| format!("({i}, 'row{i}')")).collect();
    ok(s.query(&format!("INSERT INTO t VALUES {}", values.join(","))));
}

#[test]
fn flat_operator_chains_give_a_result_or_a_clean_error() {
    let (_engine, server) = open(Arc::new(SimStorage::new()));
    on_connection_stack(move || {
        let mut s = Session::new(server, conn(1));
        ok(s.query("CREATE DATABASE d"));
        ok(s.query("USE d"));
        with_rows(&mut s, 10);
        let or: Vec<String> = (0..20_000).map(|i| format!("id={i}")).collect();
        let or = format!("SELECT COUNT(*) FROM t WHERE {}", or.join(" OR "));
        assert_eq!(rows(s.query(&or)), vec![r(&["10"])]);
        let and: Vec<String> = (0..20_000).map(|i| format!("id<>{}", -i)).collect();
        let and = format!("SELECT COUNT(*) FROM t WHERE {}", and.join(" AND "));
        assert_eq!(rows(s.query(&and)), vec![r(&["10"])]);
        let (id, _, _) = s.prepare(&or).expect("prepare");
        assert_eq!(rows(s.execute(id, vec![])), vec![r(&["10"])]);
        s.close(id);
        let plus = format!("SELECT 1{}", "+1".repeat(20_000));
        assert_eq!(code(s.query(&plus)), 1436);
        let neg = format!("SELECT {}1", "- ".repeat(20_000));
        assert!(s.query(&neg).is_err());
        let parens = format!("SELECT {}1{}", "(".repeat(5_000), ")".repeat(5_000));
        assert!(s.query(&parens).is_err());
        let concat = format!("SELECT {}'x'{}", "CONCAT(".repeat(5_000), ")".repeat(5_000));
        assert!(s.query(&concat).is_err());
        let sub = format!("SELECT {}1{}", "(SELECT ".repeat(2_000), ")".repeat(2_000));
        assert!(s.query(&sub).is_err());
        let is_null = format!("SELECT 1{}", " IS NULL".repeat(20_000));
        assert!(s.query(&is_null).is_err());
        // Unsupported, with a long chain inside: the error does not quote it.
        let case = format!(
            "SELECT CASE WHEN {} THEN 1 END FROM t",
            vec!["id=1"; 20_000].join(" OR ")
        );
        assert_eq!(code(s.query(&case)), 1235);
        let huge = format!(
            "SELECT 1 FROM t WHERE {}",
            vec!["id=1"; 200_000].join(" OR ")
        );
        assert_eq!(code(s.query(&huge)), 1436);
        // The session still works.
        assert_eq!(
            rows(s.query("SELECT COUNT(*) FROM t WHERE id = 1 OR id = 2")),
            vec![r(&["2"])]
        );
    });
}

#[test]
fn kill_query_stops_a_lock_wait_and_kill_connection_disconnects() {
    let (_engine, server) = open(Arc::new(SimStorage::new()));
    let mut a = Session::new(server.clone(), conn(1));
    ok(a.query("SET GLOBAL innodb_lock_wait_timeout = 60"));
    ok(a.query("CREATE DATABASE d"));
    ok(a.query("USE d"));
    with_rows(&mut a, 3);
    ok(a.query("BEGIN"));
    rows(a.query("SELECT * FROM t WHERE id = 1 FOR UPDATE"));
    let srv = server.clone();
    let waiter = std::thread::spawn(move || {
        let mut b = Session::new(srv, conn(2));
        ok(b.query("USE d"));
        let start = std::time::Instant::now();
        let r = b.query("UPDATE t SET c = 'x' WHERE id = 1");
        let after = b.query("SELECT COUNT(*) FROM t");
        (
            r.map_err(|e| e.code.number()),
            start.elapsed(),
            after.is_ok(),
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    ok(a.query("KILL QUERY 2"));
    let (res, waited, after) = waiter.join().expect("waiter");
    assert_eq!(res.unwrap_err(), 1317);
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert!(after, "the session goes on after KILL QUERY");
    assert_eq!(code(a.query("KILL 999")), 1094);
    assert_eq!(code(a.query("KILL QUERY 999")), 1094);
    ok(a.query("COMMIT"));

    let mut c = Session::new(server.clone(), conn(3));
    let hooked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let h = hooked.clone();
    c.set_disconnect_hook(Box::new(move || h.store(true, Ordering::SeqCst)));
    assert!(!c.is_killed());
    server.kill(3, false).expect("kill");
    assert!(hooked.load(Ordering::SeqCst));
    assert!(c.is_killed());
    assert_eq!(code(c.query("SELECT 1")), 1317);
    // Its own connection may be killed too (at once: it waits for no lock).
    let start = std::time::Instant::now();
    ok(a.query("KILL QUERY 1"));
    assert!(start.elapsed() < Duration::from_millis(500));
    assert_eq!(rows(a.query("SELECT 1")), vec![r(&["1"])]);
    drop(c);
    assert_eq!(server.kill(3, true).unwrap_err().code.number(), 1094);
}

#[test]
fn max_execution_time_stops_a_select() {
    let (_engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server, conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    with_rows(&mut s, 3000);
    ok(s.query("SET max_execution_time = 1"));
    assert_eq!(
        rows(s.query("SELECT @@max_execution_time")),
        vec![r(&["1"])]
    );
    let slow = "SELECT COUNT(*) FROM t a WHERE c LIKE '%r%o%w%9%9%' OR c LIKE '%x%'";
    let mut timed_out = false;
    for _ in 0..50 {
        match s.query(slow) {
            Err(e) if e.code.number() == 3024 => {
                timed_out = true;
                break;
            }
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(timed_out, "a 1 ms limit stops a scan of 3000 rows");
    // A long LIKE match is stopped inside the match.
    ok(s.query("SET max_execution_time = 200"));
    let like = format!(
        "SELECT '{}' LIKE '%{}b'",
        "a".repeat(300_000),
        "a".repeat(3_000)
    );
    let start = std::time::Instant::now();
    assert_eq!(code(s.query(&like)), 3024);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    ok(s.query("SET max_execution_time = 1"));
    // Writes are not limited (MySQL: read-only SELECTs only).
    ok(s.query("UPDATE t SET c = 'y'"));
    ok(s.query("SET max_execution_time = 0"));
    assert_eq!(rows(s.query(slow)), vec![r(&["0"])]);
}

#[test]
fn statement_memory_is_bounded() {
    let (_engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    with_rows(&mut s, 500);
    server
        .statement_memory_bytes
        .store(16 << 10, Ordering::Relaxed);
    assert_eq!(code(s.query("SELECT * FROM t ORDER BY c DESC")), 1038);
    assert_eq!(code(s.query("SELECT DISTINCT c FROM t")), 1038);
    assert_eq!(code(s.query("SELECT * FROM t")), 1038);
    assert_eq!(code(s.query("SELECT COUNT(DISTINCT c) FROM t")), 1038);
    assert_eq!(code(s.query("UPDATE t SET c = 'z'")), 1038);
    assert_eq!(rows(s.query("SELECT COUNT(*) FROM t")), vec![r(&["500"])]);
    assert_eq!(rows(s.query("SELECT id FROM t WHERE id = 1")).len(), 1);
}

#[test]
fn commands_that_did_nothing_work_or_refuse() {
    let (_engine, server) = open(Arc::new(SimStorage::new()));
    let mut s = Session::new(server.clone(), conn(1));
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    with_rows(&mut s, 3);
    assert_eq!(code(s.query("LOCK TABLES t READ")), 1235);
    assert_eq!(code(s.query("FLUSH TABLES WITH READ LOCK")), 1235);
    ok(s.query("UNLOCK TABLES"));
    assert_eq!(
        code(s.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")),
        1235
    );
    assert_eq!(
        code(s.query("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")),
        1235
    );
    assert_eq!(
        code(s.query("SET transaction_isolation = 'READ-COMMITTED'")),
        1235
    );
    ok(s.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
    ok(s.query("SET transaction_isolation = 'REPEATABLE-READ'"));
    assert_eq!(code(s.query("SET TRANSACTION READ ONLY")), 1235);
    assert_eq!(code(s.query("SET sql_mode = ''")), 1231);
    assert_eq!(
        code(s.query("SET sql_mode = 'ANSI_QUOTES,STRICT_TRANS_TABLES'")),
        1231
    );
    ok(s.query("SET sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'"));
    assert_eq!(
        rows(s.query("SELECT @@sql_mode")),
        vec![r(&["STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"])]
    );
    assert_eq!(code(s.query("SET sql_safe_updates = 1")), 1235);
    ok(s.query("SET foreign_key_checks = 0"));
    assert_eq!(code(s.query("SET time_zone = '+02:00'")), 1235);
    // FOR SHARE takes shared row locks: a writer waits (and times out).
    ok(s.query("SET GLOBAL innodb_lock_wait_timeout = 1"));
    ok(s.query("BEGIN"));
    assert_eq!(
        rows(s.query("SELECT id FROM t WHERE id = 1 FOR SHARE")).len(),
        1
    );
    let mut w = Session::new(server.clone(), conn(2));
    ok(w.query("USE d"));
    assert_eq!(code(w.query("UPDATE t SET c = 'w' WHERE id = 1")), 1205);
    // A second reader shares it.
    assert_eq!(
        rows(w.query("SELECT id FROM t WHERE id = 1 FOR SHARE")).len(),
        1
    );
    ok(s.query("COMMIT"));
}
