//! Point-select timing through `Session` (the OLTP fast path: a prepared
//! statement's kept plan, and a text statement's plan cached by shape).
//! Ignored by default; run in release mode:
//! `cargo test --release -p millrace-sql --test point_select -- --ignored --nocapture`

use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_sql::{ConnInfo, Instance, Output, Session, Value};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_trx::{Durability, Engine, TrxConfig};
use std::sync::Arc;
use std::time::Instant;

const ROWS: i64 = 10_000;
const SELECTS: i64 = 200_000;

fn session() -> Session {
    let mut cfg = TrxConfig::default();
    cfg.store.buf.page_size = 16384;
    cfg.store.buf.pool_bytes = 64 << 20;
    cfg.store.log.capacity_bytes = 64 << 20;
    cfg.store.log.durability = Durability::Write;
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let engine = Engine::open(Arc::new(SimStorage::new()), cfg, cpu, Registry::new()).unwrap();
    let server = Instance::open(engine).unwrap();
    let conn = ConnInfo {
        connection_id: 1,
        user: "root".into(),
        host: "localhost".into(),
    };
    let mut s = Session::new(server, conn);
    s.query("USE test").unwrap();
    s.query("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL)")
        .unwrap();
    s.query("BEGIN").unwrap();
    for i in 0..ROWS {
        s.query(&format!(
            "INSERT INTO t VALUES ({i}, {}, 'row-{i:0>100}')",
            i * 7
        ))
        .unwrap();
    }
    s.query("COMMIT").unwrap();
    s
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[test]
#[ignore = "a timing; run in release mode"]
fn point_select_timing() {
    let mut s = session();
    let (id, _, _) = s.prepare("SELECT c FROM t WHERE id=?").unwrap();
    let (mut prepared, mut text) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let start = Instant::now();
        for i in 0..SELECTS {
            let out = s.execute(id, vec![Value::Int(i * 7919 % ROWS)]).unwrap();
            assert!(matches!(out, Output::Rows { ref rows, .. } if rows.len() == 1));
        }
        prepared.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        for i in 0..SELECTS {
            let sql = format!("SELECT c FROM t WHERE id={}", i * 7919 % ROWS);
            let out = s.query(&sql).unwrap();
            assert!(matches!(out, Output::Rows { ref rows, .. } if rows.len() == 1));
        }
        text.push(start.elapsed().as_secs_f64());
    }
    let (p, t) = (median(prepared.clone()), median(text.clone()));
    println!(
        "prepared runs {prepared:?} median {p:.3}s = {:.0} ns/select",
        p * 1e9 / SELECTS as f64
    );
    println!(
        "text runs {text:?} median {t:.3}s = {:.0} ns/select",
        t * 1e9 / SELECTS as f64
    );
}
