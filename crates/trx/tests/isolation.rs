//! Snapshot isolation against a model, lost updates, purge safety, locks.

mod common;
use common::*;
use millrace_io::SimStorage;
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Isolation, KeyPart, LockMode, TrxError};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

const KEYS: u64 = 40;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn snapshot(e: &millrace_trx::Trx, t: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    e.scan(t, Bound::Unbounded, Bound::Unbounded, 10_000)
        .unwrap()
        .into_iter()
        .collect()
}

/// Writers commit random multi-row changes (serialised through the model's
/// mutex so the model's order is the commit order); RR readers must see
/// exactly the state after some prefix of the commits, the same prefix on
/// every read, and RC readers a prefix at least as new as the last commit
/// before the statement.
#[test]
fn reads_match_a_snapshot_of_the_model() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 3 }]])
        .unwrap();
    // states[i] = the table after i commits.
    let states: Arc<Mutex<Vec<State>>> = Arc::new(Mutex::new(vec![BTreeMap::new()]));
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let (e, states) = (e.clone(), states.clone());
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(w);
                for i in 0..150 {
                    let tx = e.begin(Isolation::RepeatableRead);
                    let mut changes: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
                    let mut failed = false;
                    for _ in 0..1 + rng.below(3) {
                        let key = k(rng.below(KEYS));
                        let v = format!("w{w}-{i:04}-{}", rng.below(1000)).into_bytes();
                        let r = match rng.below(3) {
                            0 => tx.delete(t, &key).map(|found| found.then_some(None)),
                            _ => tx.put(t, &key, &v).map(|_| Some(Some(v.clone()))),
                        };
                        match r {
                            Ok(Some(c)) => changes.push((key, c)),
                            Ok(None) => {}
                            Err(TrxError::Deadlock) | Err(TrxError::LockWaitTimeout) => {
                                failed = true;
                                break;
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    if failed || rng.chance(1, 5) {
                        let _ = tx.rollback();
                        continue;
                    }
                    let mut st = states.lock().unwrap();
                    tx.commit().unwrap();
                    let mut next = st.last().unwrap().clone();
                    for (key, c) in changes {
                        match c {
                            Some(v) => next.insert(key, v),
                            None => next.remove(&key),
                        };
                    }
                    st.push(next);
                }
            })
        })
        .collect();
    let mut rng = SplitMix64::new(99);
    let mut checks = 0;
    while writers.iter().any(|w| !w.is_finished()) || checks < 20 {
        let iso = if rng.chance(1, 2) {
            Isolation::RepeatableRead
        } else {
            Isolation::ReadCommitted
        };
        let before = states.lock().unwrap().len() - 1;
        let r = e.begin(iso);
        let first = snapshot(&r, t);
        std::thread::sleep(std::time::Duration::from_millis(rng.below(3)));
        let second = snapshot(&r, t);
        let after = states.lock().unwrap().len() - 1;
        let st = states.lock().unwrap();
        let find = |snap: &BTreeMap<Vec<u8>, Vec<u8>>| (before..=after).find(|&i| &st[i] == snap);
        let diff = |snap: &BTreeMap<Vec<u8>, Vec<u8>>| {
            let m = &st[after];
            let mut d = Vec::new();
            for (key, v) in snap {
                if m.get(key) != Some(v) {
                    d.push(format!(
                        "{:?}: read {:?} model {:?}",
                        key,
                        String::from_utf8_lossy(v),
                        m.get(key).map(|x| String::from_utf8_lossy(x).to_string())
                    ));
                }
            }
            for key in m.keys() {
                if !snap.contains_key(key) {
                    d.push(format!(
                        "{:?}: read absent, model {:?}",
                        key,
                        String::from_utf8_lossy(&m[key])
                    ));
                }
            }
            d
        };
        let k1 = find(&first).unwrap_or_else(|| {
            panic!(
                "{iso:?} read is no committed state in {before}..={after}: {:?}",
                diff(&first)
            )
        });
        let k2 = find(&second).unwrap_or_else(|| {
            panic!(
                "{iso:?} second read is no committed state: {:?}",
                diff(&second)
            )
        });
        if iso == Isolation::RepeatableRead {
            assert_eq!(first, second, "repeatable read changed");
        } else {
            assert!(k2 >= k1);
        }
        drop(st);
        r.commit().unwrap();
        checks += 1;
    }
    for w in writers {
        w.join().unwrap();
    }
    let commits = states.lock().unwrap().len() - 1;
    assert!(
        commits > 200 && checks >= 20,
        "too little happened: {commits} commits, {checks} checks"
    );
    assert_eq!(e.locks_held(), 0);
    e.shutdown().unwrap();
}

/// Counter increments with a locking read: none is lost.
#[test]
fn no_lost_updates_under_locking() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e.create_table(&[]).unwrap();
    let init = e.begin(Isolation::RepeatableRead);
    for n in 0..4 {
        init.insert(t, &k(n), &0u64.to_le_bytes()).unwrap();
    }
    init.commit().unwrap();
    let committed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let hs: Vec<_> = (0..4u64)
        .map(|w| {
            let (e, committed) = (e.clone(), committed.clone());
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(w + 10);
                for _ in 0..200 {
                    let tx = e.begin(Isolation::RepeatableRead);
                    let key = k(rng.below(4));
                    let r = tx.get_locked(t, &key, LockMode::Exclusive).and_then(|v| {
                        let n = u64::from_le_bytes(v.unwrap().try_into().unwrap());
                        tx.update(t, &key, &(n + 1).to_le_bytes())
                    });
                    match r {
                        Ok(_) => {
                            tx.commit().unwrap();
                            committed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        Err(TrxError::Deadlock) | Err(TrxError::LockWaitTimeout) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let r = e.begin(Isolation::RepeatableRead);
    let sum: u64 = snapshot(&r, t)
        .values()
        .map(|v| u64::from_le_bytes(v.clone().try_into().unwrap()))
        .sum();
    assert_eq!(sum, committed.load(std::sync::atomic::Ordering::SeqCst));
    r.commit().unwrap();
    e.shutdown().unwrap();
}

/// A reader keeps its snapshot while writers update and delete everything
/// many times over and purge runs; after it ends, purge empties the history.
#[test]
fn long_readers_keep_their_snapshot_while_purge_runs() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 6 }]])
        .unwrap();
    let w = e.begin(Isolation::RepeatableRead);
    for n in 0..100 {
        w.insert(t, &k(n), format!("orig{n:02}").as_bytes())
            .unwrap();
    }
    w.commit().unwrap();
    let reader = e.begin(Isolation::RepeatableRead);
    let snap = snapshot(&reader, t);
    assert_eq!(snap.len(), 100);
    for round in 0..20 {
        let w = e.begin(Isolation::RepeatableRead);
        for n in 0..100 {
            if (n + round) % 3 == 0 {
                w.delete(t, &k(n)).unwrap();
            } else {
                w.put(t, &k(n), format!("r{round:02}-{n:02}").as_bytes())
                    .unwrap();
            }
        }
        w.commit().unwrap();
        assert_eq!(snapshot(&reader, t), snap, "round {round}");
        assert_eq!(
            reader
                .scan_secondary(t, 0, b"orig07", b"orig07", 10)
                .unwrap()
                .len(),
            1
        );
    }
    assert!(e.history_len() > 0, "the reader holds purge back");
    reader.commit().unwrap();
    let t0 = std::time::Instant::now();
    while e.history_len() > 0 {
        assert!(t0.elapsed().as_secs() < 20, "purge did not catch up");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    e.shutdown().unwrap();
}

#[test]
fn deadlock_and_timeout_give_the_right_errors_and_leave_no_locks() {
    let s = SimStorage::new();
    let mut c = cfg();
    c.lock_wait_timeout_ms = 300;
    let e = open_with(&s, c);
    let t = e.create_table(&[]).unwrap();
    let init = e.begin(Isolation::RepeatableRead);
    for n in 0..3 {
        init.insert(t, &k(n), b"0").unwrap();
    }
    init.commit().unwrap();
    // Timeout: the statement is rolled back, the transaction goes on.
    let a = e.begin(Isolation::RepeatableRead);
    a.update(t, &k(0), b"a").unwrap();
    let b = e.begin(Isolation::RepeatableRead);
    b.update(t, &k(2), b"b-kept").unwrap();
    let t0 = std::time::Instant::now();
    let err = b.update(t, &k(0), b"b").unwrap_err();
    assert_eq!(err, TrxError::LockWaitTimeout);
    assert_eq!(err.mysql_code(), 1205);
    assert!(t0.elapsed().as_millis() >= 250);
    assert!(b.update(t, &k(1), b"b1").unwrap(), "b is still usable");
    // Deadlock: a waits for k1 (held by b), b waits for k0 (held by a).
    let e2 = e.clone();
    let h = std::thread::spawn(move || {
        let _ = &e2;
        a.update(t, &k(1), b"a1").map(|_| a)
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    let rb = b.update(t, &k(0), b"b0");
    let ra = h.join().unwrap();
    // Exactly one is the victim.
    match (ra, rb) {
        (Ok(a), Err(TrxError::Deadlock)) => {
            assert_eq!(TrxError::Deadlock.mysql_code(), 1213);
            a.commit().unwrap();
            assert!(matches!(b.get(t, &k(2)), Err(TrxError::RolledBack(_))));
        }
        (Err(TrxError::Deadlock), Ok(_)) => b.commit().unwrap(),
        (ra, rb) => panic!("expected one deadlock victim: {:?} {:?}", ra.err(), rb),
    }
    assert_eq!(e.locks_held(), 0, "locks left behind");
    let r = e.begin(Isolation::ReadCommitted);
    let rows = snapshot(&r, t);
    // The victim's changes were undone (b's k2 change, if b was the victim).
    assert!(rows[&k(2)] == b"b-kept" || rows[&k(2)] == b"0");
    r.commit().unwrap();
    e.shutdown().unwrap();
}

#[test]
fn large_transactions_commit_and_roll_back() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 4 }]])
        .unwrap();
    let big = e.begin(Isolation::RepeatableRead);
    for n in 0..5000 {
        big.insert(t, &k(n), format!("row-{n:06}").as_bytes())
            .unwrap();
    }
    big.commit().unwrap();
    let big = e.begin(Isolation::RepeatableRead);
    for n in 0..5000 {
        big.update(t, &k(n), b"changed!!!").unwrap();
    }
    big.rollback().unwrap();
    let r = e.begin(Isolation::RepeatableRead);
    let rows = snapshot(&r, t);
    assert_eq!(rows.len(), 5000);
    assert_eq!(rows[&k(17)], b"row-000017");
    r.commit().unwrap();
    e.shutdown().unwrap();
}

/// Writers move rows between 3 secondary keys (and back), a quarter of the
/// transactions roll back, purge races with all of it. Afterwards every row
/// has exactly one live secondary entry, under its own key.
#[test]
fn secondary_entries_survive_purge_races_and_rollbacks() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 1 }]])
        .unwrap();
    let init = e.begin(Isolation::RepeatableRead);
    for n in 0..20 {
        init.insert(t, &k(n), b"a-initial").unwrap();
    }
    init.commit().unwrap();
    let hs: Vec<_> = (0..3u64)
        .map(|w| {
            let e = e.clone();
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(w + 77);
                for i in 0..300 {
                    let tx = e.begin(Isolation::RepeatableRead);
                    let mut ok = true;
                    for _ in 0..1 + rng.below(3) {
                        let key = [b'a', b'b', b'c'][rng.below(3) as usize];
                        let v = format!("{}-w{w}-{i}", key as char).into_bytes();
                        match tx.update(t, &k(rng.below(20)), &v) {
                            Ok(_) => {}
                            Err(TrxError::Deadlock) | Err(TrxError::LockWaitTimeout) => {
                                ok = false;
                                break;
                            }
                            Err(err) => panic!("{err}"),
                        }
                    }
                    if !ok || rng.chance(1, 4) {
                        let _ = tx.rollback();
                    } else {
                        tx.commit().unwrap();
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let t0 = std::time::Instant::now();
    while e.history_len() > 0 {
        assert!(t0.elapsed().as_secs() < 20, "purge did not catch up");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = e.begin(Isolation::RepeatableRead);
    let rows = snapshot(&r, t);
    assert_eq!(rows.len(), 20);
    for (pk, v) in &rows {
        let hits = r.scan_secondary(t, 0, &v[..1], &v[..1], 1000).unwrap();
        assert!(
            hits.iter().any(|(p, _)| p == pk),
            "row {pk:?} ({}) has no secondary entry",
            String::from_utf8_lossy(v)
        );
    }
    r.commit().unwrap();
    // Live entries (not delete-marked) are exactly one per row.
    let (_, secs) = e.index_defs(t).unwrap();
    let si = millrace_btree::Index::open(secs[0]);
    let rep = si.check(e.store()).unwrap();
    assert_eq!(rep.records - rep.deleted_records, 20, "{rep:?}");
    e.shutdown().unwrap();
}

/// Readers follow roll pointers into the undo logs of transactions that are
/// rolling back at that moment. A rolled-back log must stay readable until
/// no read view that could have seen the row before the rollback remains:
/// before rolled-back logs went through the history list, a reader here
/// soon met a freed undo page ("undo page ... is damaged").
#[test]
fn readers_racing_rollbacks_never_meet_a_freed_undo_page() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e.create_table(&[]).unwrap();
    const ROWS: u64 = 8;
    let w = e.begin(Isolation::RepeatableRead);
    for n in 0..ROWS {
        w.insert(t, &k(n), b"committed").unwrap();
    }
    w.commit().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..3u64)
        .map(|id| {
            let (e, stop) = (e.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = id;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let w = e.begin(Isolation::RepeatableRead);
                    // Rows of their own per writer: no lock waits, only the
                    // rollback racing the readers.
                    for r in (id..ROWS).step_by(3) {
                        w.update(t, &k(r), format!("doomed {n}").as_bytes())
                            .unwrap();
                    }
                    w.rollback().unwrap();
                    n += 3;
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let e = e.clone();
            std::thread::spawn(move || {
                for _ in 0..4000 {
                    let r = e.begin(Isolation::ReadCommitted);
                    for n in 0..ROWS {
                        let v = r.get(t, &k(n)).expect("a consistent read");
                        assert_eq!(v.as_deref(), Some(&b"committed"[..]));
                    }
                    r.commit().unwrap();
                }
            })
        })
        .collect();
    for r in readers {
        r.join().expect("reader");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    e.shutdown().unwrap();
}
