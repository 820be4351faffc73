use super::*;
use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_trx::{Engine, TrxConfig};

fn config() -> TrxConfig {
    let mut cfg = TrxConfig::default();
    cfg.store.buf.page_size = 16384;
    cfg.store.buf.pool_bytes = 16 << 20;
    cfg.store.log = LogConfig {
        capacity_bytes: 16 << 20,
        buffer_bytes: 256 << 10,
        writer_threads: WriterThreads::Off,
        durability: Durability::Flush,
        ..LogConfig::default()
    };
    cfg.undo_spaces = Some(2);
    cfg.rsegs = Some(4);
    cfg.lock_wait_timeout_ms = 500;
    cfg
}

fn open(storage: Arc<SimStorage>) -> (Arc<Engine>, Arc<Server>) {
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let engine = Engine::open(storage, config(), cpu, Registry::new()).expect("engine open");
    let server = Server::open(engine.clone()).expect("catalog open");
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
        Err(e) => e.code,
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
    let before = server.plans.lock().unwrap().len();
    for i in 0..10 {
        assert_eq!(
            rows(s.query(&format!("SELECT v FROM t WHERE id = {i}"))),
            vec![vec![format!("v{i}")]]
        );
    }
    assert_eq!(server.plans.lock().unwrap().len(), before + 1);
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
    assert_eq!(engine.store().log().durability(), Durability::Write);
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
