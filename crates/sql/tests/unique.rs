//! UNIQUE under concurrency: the check is a locking current read, so two
//! transactions that write one value take turns and at most one commits it.

use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_sql::{ConnInfo, Instance, Output, Session, SqlError};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Durability, Engine, TrxConfig};
use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

fn open(lock_wait_timeout_ms: u64) -> (Arc<Engine>, Arc<Instance>) {
    let mut cfg = TrxConfig::default();
    cfg.store.buf.page_size = 16384;
    cfg.store.buf.pool_bytes = 16 << 20;
    cfg.store.log.capacity_bytes = 16 << 20;
    cfg.store.log.buffer_bytes = 256 << 10;
    cfg.store.log.writer_threads = "off".parse().expect("a writer mode");
    cfg.store.log.durability = Durability::Flush;
    cfg.undo_spaces = Some(2);
    cfg.rsegs = Some(4);
    cfg.lock_wait_timeout_ms = lock_wait_timeout_ms;
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let storage = Arc::new(SimStorage::new());
    let engine = Engine::open(storage, cfg, cpu, Registry::new()).expect("engine open");
    let server = Instance::open(engine.clone()).expect("catalog open");
    let mut s = session(&server, 1);
    ok(s.query("CREATE DATABASE d"));
    ok(s.query("USE d"));
    ok(s.query("CREATE TABLE u (id INT PRIMARY KEY, v INT, UNIQUE KEY uv (v))"));
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

fn code(out: &Result<Output, SqlError>) -> Option<u16> {
    out.as_ref().err().map(|e| e.code.number())
}

fn ints(s: &mut Session, sql: &str) -> Vec<Vec<i64>> {
    match s.query(sql) {
        Ok(Output::Rows { rows, .. }) => rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| {
                        let t = v.to_text().expect("not NULL");
                        String::from_utf8(t).unwrap().parse().unwrap()
                    })
                    .collect()
            })
            .collect(),
        other => panic!("expected rows, got {other:?}"),
    }
}

/// `b` inserts the value `a` inserted and has not committed: `b` waits,
/// then gets 1062 if `a` commits, or succeeds if `a` rolls back.
fn second_writer_waits(commit_first: bool) {
    let (engine, server) = open(10_000);
    let mut a = session(&server, 2);
    ok(a.query("BEGIN"));
    ok(a.query("INSERT INTO u VALUES (1, 42)"));
    let srv = server.clone();
    let b = thread::spawn(move || {
        let mut b = session(&srv, 3);
        ok(b.query("BEGIN"));
        let r = b.query("INSERT INTO u VALUES (2, 42)");
        let commit = b.query("COMMIT");
        (r, commit)
    });
    thread::sleep(Duration::from_millis(300));
    assert!(
        !b.is_finished(),
        "the second writer of 42 must wait for the first"
    );
    ok(a.query(if commit_first { "COMMIT" } else { "ROLLBACK" }));
    let (r, commit) = b.join().unwrap();
    if commit_first {
        assert_eq!(code(&r), Some(1062), "{r:?}");
    } else {
        assert_eq!(ok(r), 1);
    }
    ok(commit);
    let rows = ints(&mut a, "SELECT id, v FROM u ORDER BY id");
    let want = if commit_first {
        vec![1, 42]
    } else {
        vec![2, 42]
    };
    assert_eq!(rows, vec![want]);
    drop((a, server));
    engine.shutdown().unwrap();
}

#[test]
fn a_second_writer_of_a_unique_value_gets_1062_once_the_first_commits() {
    second_writer_waits(true);
}

#[test]
fn a_second_writer_of_a_unique_value_succeeds_once_the_first_rolls_back() {
    second_writer_waits(false);
}

/// An uncommitted delete of the value: the inserter waits for it (if it
/// rolled back, the value would be back).
#[test]
fn an_uncommitted_delete_of_the_value_makes_the_inserter_wait() {
    let (engine, server) = open(10_000);
    let mut a = session(&server, 2);
    ok(a.query("INSERT INTO u VALUES (1, 42)"));
    ok(a.query("BEGIN"));
    ok(a.query("DELETE FROM u WHERE id = 1"));
    let srv = server.clone();
    let b = thread::spawn(move || session(&srv, 3).query("INSERT INTO u VALUES (2, 42)"));
    thread::sleep(Duration::from_millis(300));
    assert!(
        !b.is_finished(),
        "the inserter must wait for the delete's outcome"
    );
    ok(a.query("ROLLBACK"));
    let r = b.join().unwrap();
    assert_eq!(code(&r), Some(1062), "{r:?}");
    drop((a, server));
    engine.shutdown().unwrap();
}

/// One transaction deletes a row and inserts another with the same unique
/// value, or changes a row's value away and another's to it.
#[test]
fn a_transaction_may_reuse_a_value_it_freed() {
    let (engine, server) = open(2_000);
    let mut a = session(&server, 2);
    ok(a.query("INSERT INTO u VALUES (1, 42), (2, 7)"));
    ok(a.query("BEGIN"));
    ok(a.query("DELETE FROM u WHERE id = 1"));
    ok(a.query("INSERT INTO u VALUES (3, 42)"));
    assert_eq!(code(&a.query("INSERT INTO u VALUES (4, 42)")), Some(1062));
    ok(a.query("UPDATE u SET v = 8 WHERE id = 2"));
    ok(a.query("UPDATE u SET v = 7 WHERE id = 3"));
    ok(a.query("COMMIT"));
    assert_eq!(
        ints(&mut a, "SELECT id, v FROM u ORDER BY id"),
        vec![vec![2, 8], vec![3, 7]]
    );
    assert_eq!(
        code(&a.query("UPDATE u SET v = 7 WHERE id = 2")),
        Some(1062)
    );
    drop((a, server));
    engine.shutdown().unwrap();
}

/// Seeded clients insert, change and delete rows with values from a small
/// range, committing or rolling back at random, their transactions
/// overlapping; in the end no value is held by two rows.
#[test]
fn concurrent_writers_never_commit_a_duplicate() {
    const CLIENTS: u64 = 4;
    const OPS: u64 = 150;
    const VALUES: u64 = 60;
    let (engine, server) = open(200);
    let workers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let srv = server.clone();
            thread::spawn(move || {
                let mut rng = SplitMix64::new(0x5eed_0000 + c);
                let mut s = session(&srv, 10 + c as u32);
                let mut outcomes: HashMap<Option<u16>, u64> = HashMap::new();
                for i in 0..OPS {
                    let id = c * 1_000_000 + i;
                    let explicit = rng.chance(1, 2);
                    if explicit {
                        ok(s.query("BEGIN"));
                    }
                    for _ in 0..1 + rng.below(3) {
                        let v = rng.below(VALUES);
                        let other = c * 1_000_000 + rng.below(i + 1);
                        let sql = match rng.below(5) {
                            0..=2 => format!("INSERT INTO u VALUES ({id}, {v})"),
                            3 => format!("UPDATE u SET v = {v} WHERE id = {other}"),
                            _ => format!("DELETE FROM u WHERE id = {other}"),
                        };
                        let r = s.query(&sql);
                        let code = code(&r);
                        assert!(
                            matches!(code, None | Some(1062) | Some(1205) | Some(1213)),
                            "{sql}: {r:?}"
                        );
                        *outcomes.entry(code).or_default() += 1;
                        if code == Some(1213) {
                            break;
                        }
                        // Transactions stay open a while, so that they
                        // overlap (the race needs two open at once).
                        if explicit {
                            thread::sleep(Duration::from_micros(rng.below(1500)));
                        }
                    }
                    if explicit {
                        let end = if rng.chance(1, 4) {
                            "ROLLBACK"
                        } else {
                            "COMMIT"
                        };
                        let r = s.query(end);
                        assert!(r.is_ok(), "{end}: {r:?}");
                    }
                }
                outcomes
            })
        })
        .collect();
    let mut total: HashMap<Option<u16>, u64> = HashMap::new();
    for w in workers {
        for (k, n) in w.join().unwrap() {
            *total.entry(k).or_default() += n;
        }
    }
    let mut s = session(&server, 99);
    let rows = ints(&mut s, "SELECT v, id FROM u ORDER BY v");
    eprintln!("outcomes {total:?}; {} rows at the end", rows.len());
    for pair in rows.windows(2) {
        assert_ne!(pair[0][0], pair[1][0], "value held by two rows: {pair:?}");
    }
    // The index agrees with the rows: each value found through it once.
    for v in 0..VALUES as i64 {
        let n = ints(&mut s, &format!("SELECT COUNT(*) FROM u WHERE v = {v}"));
        assert!(n[0][0] <= 1, "value {v} found {} times", n[0][0]);
    }
    assert!(
        total.get(&Some(1062)).copied().unwrap_or(0) > 0,
        "the workload met duplicates: {total:?}"
    );
    drop((s, server));
    engine.shutdown().unwrap();
}
