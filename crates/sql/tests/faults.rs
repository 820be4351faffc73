//! The fault campaign through SQL (docs/design.md, "Faults: what the engine
//! does when storage fails"): an Instance over an engine on SimStorage; a
//! seeded workload of transactions (DELETE + INSERT), autocommit DELETEs
//! and rolled-back UPDATEs
//! on a table with a secondary index; reads, writes and fsyncs failing with
//! EIO or ENOSPC at the Nth call, N = 1..K per kind. After each fault the
//! failed statements got an error, and either the instance goes on with
//! every acknowledged commit, or the engine stopped (every statement gets
//! ER_GET_ERRNO) and the next open, after `millrace check`'s check of the
//! directory passes, has every acknowledged commit.
//!
//! `MILLRACE_FAULT_ROUNDS=N` (default 8) sets K.

use millrace_io::{FaultKind, FaultOp, SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_sql::{ConnInfo, Instance, Output, Session, Value};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Durability, Engine, TrxConfig};
use std::collections::BTreeMap;
use std::sync::Arc;

fn cfg() -> TrxConfig {
    let mut c = TrxConfig::default();
    c.store.buf.page_size = 4096;
    c.store.buf.pool_bytes = 24 * 4096;
    c.store.log.capacity_bytes = 1 << 20;
    c.store.log.buffer_bytes = 256 << 10;
    c.store.log.durability = Durability::Flush;
    c.undo_spaces = Some(2);
    c.rsegs = Some(2);
    c
}

fn cpu() -> Arc<CpuBudget> {
    CpuBudget::fixed(CpuSnapshot::unconstrained(2))
}

fn session(s: &SimStorage) -> Result<(Session, Arc<Engine>), String> {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let engine = Engine::open(storage, cfg(), cpu(), Registry::new()).map_err(|e| e.to_string())?;
    let server = Instance::open(engine.clone()).map_err(|e| e.to_string())?;
    let conn = ConnInfo {
        connection_id: 1,
        user: "root".into(),
        host: "localhost".into(),
    };
    let mut session = Session::new(server, conn);
    session.query("USE test").map_err(|e| e.message)?;
    Ok((session, engine))
}

fn rounds() -> u64 {
    std::env::var("MILLRACE_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// id -> (k, c).
type Model = BTreeMap<i64, (i64, i64)>;

/// What a statement does to the model when it commits.
type Effect = Box<dyn Fn(&mut Model)>;

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::UInt(u) => *u as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

fn rows(s: &mut Session) -> Result<Model, millrace_sql::SqlError> {
    match s.query("SELECT id, k, c FROM t ORDER BY id")? {
        Output::Rows { rows, .. } => Ok(rows
            .iter()
            .map(|r| (int(&r[0]), (int(&r[1]), int(&r[2]))))
            .collect()),
        _ => panic!("SELECT gave no rows"),
    }
}

fn verify(s: &mut Session, candidates: &[Model], what: &str) {
    let got = rows(s).unwrap_or_else(|e| panic!("{what}: SELECT: {}", e.message));
    assert!(
        candidates.contains(&got),
        "{what}: {} rows are none of the {} states the acknowledged commits allow",
        got.len(),
        candidates.len()
    );
    // The secondary index agrees with the rows.
    for k in 0..20 {
        let want: Vec<i64> = got
            .iter()
            .filter(|(_, (kk, _))| *kk == k)
            .map(|(id, _)| *id)
            .collect();
        let out = s
            .query(&format!("SELECT id FROM t WHERE k = {k} ORDER BY id"))
            .unwrap_or_else(|e| panic!("{what}: {}", e.message));
        let Output::Rows { rows, .. } = out else {
            panic!("no rows")
        };
        let ids: Vec<i64> = rows.iter().map(|r| int(&r[0])).collect();
        assert_eq!(ids, want, "{what}: the index on k disagrees for k = {k}");
    }
}

/// One seeded statement (or a transaction rolled back); returns its effect
/// on the model when it commits.
fn statement(rng: &mut SplitMix64, i: u64) -> (Vec<String>, Effect) {
    let id = rng.below(200) as i64;
    let k = rng.below(20) as i64;
    let c = i as i64;
    let pad = "p".repeat(if rng.chance(1, 2) { 300 } else { 10 });
    match rng.below(4) {
        0 | 1 => (
            vec![
                "BEGIN".into(),
                format!("DELETE FROM t WHERE id = {id}"),
                format!("INSERT INTO t VALUES ({id}, {k}, {c}, '{pad}')"),
                "COMMIT".into(),
            ],
            Box::new(move |m: &mut Model| {
                m.insert(id, (k, c));
            }),
        ),
        2 => (
            vec![format!("DELETE FROM t WHERE id = {id}")],
            Box::new(move |m: &mut Model| {
                m.remove(&id);
            }),
        ),
        _ => (
            vec![
                "BEGIN".into(),
                format!("UPDATE t SET k = {k}, c = {c} WHERE id <= {id}"),
                "ROLLBACK".into(),
            ],
            Box::new(|_: &mut Model| {}),
        ),
    }
}

/// Runs statements `from..to` (fewer once the engine has stopped).
fn run(s: &mut Session, e: &Engine, from: u64, to: u64, candidates: &mut Vec<Model>) {
    for i in from..to {
        if e.store().log().failure().is_some() {
            break;
        }
        let mut rng = SplitMix64::new(i * 131 + 5);
        let (sqls, effect) = statement(&mut rng, i);
        let mut ok = true;
        let mut at_commit = false;
        for sql in &sqls {
            if let Err(err) = s.query(sql) {
                at_commit = sqls.len() == 1 || sql == "COMMIT";
                if std::env::var("FAULTS_DEBUG").is_ok() {
                    eprintln!("statement {i} failed: {} {}", err.code, err.message);
                }
                ok = false;
                break;
            }
        }
        if ok {
            candidates.iter_mut().for_each(&effect);
        } else if at_commit {
            // A commit that failed (or an autocommit statement) may have
            // failed after its record reached the log.
            let mut forked = candidates.clone();
            forked.iter_mut().for_each(&effect);
            candidates.extend(forked);
            candidates.sort();
            candidates.dedup();
            assert!(candidates.len() <= 64, "too many failed commits to follow");
        } else {
            let _ = s.query("ROLLBACK");
        }
    }
}

fn campaign(op: FaultOp, kind: FaultKind) {
    let (mut stopped, mut survived) = (0, 0);
    for nth in 1..=rounds() {
        let what = format!("{op:?} {kind:?} at call {nth}");
        let st = SimStorage::new();
        let (mut s, engine) = session(&st).unwrap();
        s.query("CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, c INT NOT NULL, pad VARCHAR(400) NOT NULL, KEY kk (k))")
            .unwrap();
        let mut candidates = vec![Model::new()];
        run(&mut s, &engine, 0, 40, &mut candidates);
        st.inject_fault(op, kind, nth, None);
        run(&mut s, &engine, 40, 140, &mut candidates);
        st.clear_faults();
        if st.faults_fired() == 0 {
            continue;
        }
        match rows(&mut s) {
            Ok(_) => {
                survived += 1;
                verify(&mut s, &candidates, &format!("{what}, running"));
            }
            Err(e) => {
                stopped += 1;
                assert_eq!(
                    e.code,
                    millrace_errcode::ER_GET_ERRNO,
                    "{what}: {}",
                    e.message
                );
            }
        }
        let image = st.durable_image();
        drop(s);
        drop(engine);
        let report = millrace_trx::check::check_data_dir(Arc::new(image.clone()), 1 << 20, cpu());
        if let Err(e) = report {
            panic!("{what}: check of the durable image: {e}");
        }
        let (mut again, _engine) =
            session(&image).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        verify(&mut again, &candidates, &format!("{what}, recovered"));
    }
    eprintln!("{op:?} {kind:?}: {stopped} stopped the engine, {survived} failed statements only");
    assert!(stopped + survived > 0, "no fault hit the workload");
}

#[test]
fn sql_campaign_read_eio() {
    campaign(FaultOp::Read, FaultKind::Eio);
}

#[test]
fn sql_campaign_write_eio() {
    campaign(FaultOp::Write, FaultKind::Eio);
}

#[test]
fn sql_campaign_write_enospc() {
    campaign(FaultOp::Write, FaultKind::Enospc);
}

#[test]
fn sql_campaign_fsync_eio() {
    campaign(FaultOp::Sync, FaultKind::Eio);
}
