//! Storage faults under transactions (docs/design.md, "Faults: what the
//! engine does when storage fails"):
//! - the fault campaign: reads, writes and fsyncs failing with EIO or
//!   ENOSPC at the Nth call, N = 1..K per kind, under a seeded workload of
//!   inserts, updates, deletes, rollbacks, page splits and a secondary
//!   index; after each fault either the statements failed and the store is
//!   consistent with every acknowledged commit, or the engine stopped and
//!   the next open recovers every acknowledged commit;
//! - a first start crashed at any write or fsync leaves a directory that
//!   opens;
//! - a second open of a live data directory is refused;
//! - a page cleaner write error stops the engine instead of letting
//!   writers wait for log space for ever;
//! - many writers on a small redo log make progress.
//!
//! `MILLRACE_FAULT_ROUNDS=N` (default 12) sets K for the campaign.

mod common;
use common::*;
use millrace_io::{FaultKind, FaultOp, FsStorage, SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Engine, Isolation, KeyPart, TrxConfig, TrxError};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn try_open_with(storage: Arc<dyn Storage>, c: TrxConfig) -> Result<Arc<Engine>, TrxError> {
    Engine::open(
        storage,
        c,
        CpuBudget::fixed(CpuSnapshot::unconstrained(2)),
        Registry::new(),
    )
}

fn try_open(s: &SimStorage, c: TrxConfig) -> Result<Arc<Engine>, TrxError> {
    try_open_with(Arc::new(s.clone()), c)
}

fn rounds() -> u64 {
    std::env::var("MILLRACE_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// A small configuration: a pool far smaller than the data (pages are read
/// back and flushed to free frames), a small log (checkpoints run).
fn campaign_cfg() -> TrxConfig {
    let mut c = cfg();
    c.store.buf.pool_bytes = 32 * 4096;
    c.store.log.capacity_bytes = 1 << 20;
    c.undo_spaces = Some(2);
    c.rsegs = Some(2);
    c
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// (key, Some(value) to put or None to delete).
type Ops = Vec<(u64, Option<Vec<u8>>)>;

/// The table's rows, read through a fresh transaction.
fn rows(e: &Arc<Engine>, t: u32) -> Result<Model, TrxError> {
    let r = e.begin(Isolation::RepeatableRead);
    let got = r.scan(t, Bound::Unbounded, Bound::Unbounded, 100_000)?;
    r.commit()?;
    Ok(got.into_iter().collect())
}

/// The rows are one of the candidate states, the secondary index agrees
/// with them, and every index of the store checks.
fn verify(e: &Arc<Engine>, t: u32, candidates: &[Model], what: &str) {
    let got = rows(e, t).unwrap_or_else(|err| panic!("{what}: scan: {err}"));
    assert!(
        candidates.contains(&got),
        "{what}: {} rows are none of the {} states the acknowledged commits allow",
        got.len(),
        candidates.len()
    );
    let r = e.begin(Isolation::RepeatableRead);
    for (pk, v) in &got {
        let hits = r.scan_secondary(t, 0, &v[..4], &v[..4], 1000).unwrap();
        assert!(
            hits.iter().any(|(p, _)| p == pk),
            "{what}: secondary entry missing for {pk:?}"
        );
    }
    r.commit().unwrap();
    millrace_btree::check_store(e.store()).unwrap_or_else(|err| panic!("{what}: check: {err}"));
}

/// One seeded transaction: puts (some with large values, for splits) and
/// deletes on keys 0..300; one in eight rolls back.
fn transaction(rng: &mut SplitMix64, i: u64) -> (Ops, bool) {
    let ops = (0..1 + rng.below(6))
        .map(|_| {
            let key = rng.below(300);
            if rng.chance(1, 5) {
                (key, None)
            } else {
                let len = if rng.chance(1, 2) { 420 } else { 40 };
                let mut v = format!("{:04}", rng.below(50)).into_bytes();
                v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
                (key, Some(v))
            }
        })
        .collect();
    (ops, rng.chance(1, 8))
}

fn apply(m: &mut Model, ops: &Ops) {
    for (key, v) in ops {
        match v {
            Some(v) => m.insert(k(*key), v.clone()),
            None => m.remove(&k(*key)),
        };
    }
}

/// Runs transactions `from..to`; acknowledged commits go into every
/// candidate, a commit that failed forks the candidates (it may or may not
/// have reached the log). Stops early when the engine has stopped.
fn run(e: &Arc<Engine>, t: u32, from: u64, to: u64, candidates: &mut Vec<Model>) -> u64 {
    let mut errors = 0;
    for i in from..to {
        if e.store().log().failure().is_some() {
            break;
        }
        let mut rng = SplitMix64::new(i * 31 + 7);
        let (ops, roll_back) = transaction(&mut rng, i);
        let tx = e.begin(Isolation::RepeatableRead);
        let mut ok = true;
        for (key, v) in &ops {
            let r = match v {
                Some(v) => tx.put(t, &k(*key), v),
                None => tx.delete(t, &k(*key)).map(|_| ()),
            };
            if r.is_err() {
                ok = false;
                break;
            }
        }
        if !ok || roll_back {
            errors += u64::from(!ok);
            let _ = tx.rollback();
            continue;
        }
        match tx.commit() {
            Ok(()) => candidates.iter_mut().for_each(|m| apply(m, &ops)),
            Err(_) => {
                errors += 1;
                let mut forked = candidates.clone();
                forked.iter_mut().for_each(|m| apply(m, &ops));
                candidates.extend(forked);
                candidates.sort();
                candidates.dedup();
                assert!(candidates.len() <= 64, "too many failed commits to follow");
            }
        }
    }
    errors
}

fn campaign(op: FaultOp, kind: FaultKind) {
    let (mut stopped, mut survived, mut missed) = (0, 0, 0);
    for nth in 1..=rounds() {
        let what = format!("{op:?} {kind:?} at call {nth}");
        let s = SimStorage::new();
        let e = try_open(&s, campaign_cfg()).unwrap();
        let t = e
            .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 4 }]])
            .unwrap();
        let mut candidates = vec![Model::new()];
        run(&e, t, 0, 40, &mut candidates);
        s.inject_fault(op, kind, nth, None);
        let errors = run(&e, t, 40, 160, &mut candidates);
        s.clear_faults();
        if s.faults_fired() == 0 {
            missed += 1;
            drop(e);
            continue;
        }
        if e.store().log().failure().is_some() {
            stopped += 1;
            // Stopped: statements, reads included, get an error at once.
            let err = rows(&e, t).unwrap_err();
            assert_eq!(
                err.mysql_code(),
                millrace_errcode::ER_GET_ERRNO,
                "{what}: {err}"
            );
        } else {
            survived += 1;
            let _ = errors;
            verify(&e, t, &candidates, &format!("{what}, still running"));
            // It goes on working.
            run(&e, t, 160, 170, &mut candidates);
            verify(&e, t, &candidates, &format!("{what}, after more work"));
        }
        // Either way the durable image recovers every acknowledged commit.
        let image = s.durable_image();
        drop(e);
        let again =
            try_open(&image, campaign_cfg()).unwrap_or_else(|err| panic!("{what}: reopen: {err}"));
        verify(&again, t, &candidates, &format!("{what}, recovered"));
        drop(again);
    }
    eprintln!(
        "{op:?} {kind:?}: {stopped} stopped the engine, {survived} failed statements only, \
         {missed} fell on no call"
    );
    assert!(stopped + survived > 0, "no fault hit the workload");
}

#[test]
fn campaign_read_eio() {
    campaign(FaultOp::Read, FaultKind::Eio);
}

#[test]
fn campaign_write_eio() {
    campaign(FaultOp::Write, FaultKind::Eio);
}

#[test]
fn campaign_write_enospc() {
    campaign(FaultOp::Write, FaultKind::Enospc);
}

#[test]
fn campaign_fsync_eio() {
    campaign(FaultOp::Sync, FaultKind::Eio);
}

/// After a first start cut short at any write or fsync, the directory
/// opens (created again) and works.
#[test]
fn a_first_start_crashed_anywhere_leaves_an_openable_directory() {
    let c = || {
        let mut c = cfg();
        c.store.log.capacity_bytes = 256 << 10;
        c
    };
    let check = |img: &SimStorage, what: &str| {
        let e = try_open(img, c()).unwrap_or_else(|err| panic!("{what}: reopen: {err}"));
        let t = e.create_table(&[]).unwrap();
        let tx = e.begin(Isolation::RepeatableRead);
        tx.insert(t, b"k", b"v").unwrap();
        tx.commit().unwrap();
        millrace_btree::check_store(e.store()).unwrap();
        e.shutdown().unwrap();
    };
    let mut points = 0;
    for n in 0.. {
        let s = SimStorage::new();
        s.crash_after_writes(Some(n));
        let opened = try_open(&s, c());
        if !s.has_crashed() {
            assert!(opened.is_ok(), "no crash, yet the open failed");
            break;
        }
        drop(opened);
        points += 1;
        for seed in 0..2 {
            check(
                &s.crash_image(n * 2 + seed),
                &format!("crash at write {n} seed {seed}"),
            );
        }
        check(
            &s.durable_image(),
            &format!("crash at write {n}, durable image"),
        );
    }
    for n in 1.. {
        let s = SimStorage::new();
        s.inject_fault(FaultOp::Sync, FaultKind::Eio, n, None);
        let opened = try_open(&s, c());
        if s.faults_fired() == 0 {
            assert!(opened.is_ok());
            break;
        }
        drop(opened);
        points += 1;
        check(
            &s.crash_image(n),
            &format!("fsync {n} failed, then a crash"),
        );
    }
    assert!(points > 20, "only {points} crash points");
}

#[test]
fn a_second_open_of_a_live_data_directory_is_refused() {
    let s = SimStorage::new();
    let e = try_open(&s, cfg()).unwrap();
    let err = try_open(&s, cfg()).err().expect("a second open must fail");
    assert!(err.to_string().contains("in use"), "{err}");
    e.shutdown().unwrap();
    drop(e);

    // The real file system: two storages on one directory, as two server
    // processes or a server and `millrace check` would have.
    let dir = std::env::temp_dir().join(format!("millrace-trx-lock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let a: Arc<dyn Storage> = Arc::new(FsStorage::new(&dir, false).unwrap());
    let b: Arc<dyn Storage> = Arc::new(FsStorage::new(&dir, false).unwrap());
    let e = try_open_with(a.clone(), cfg()).unwrap();
    let err = try_open_with(b.clone(), cfg()).err().expect("second open");
    assert!(
        err.to_string().contains(&dir.display().to_string()),
        "{err}"
    );
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let err = millrace_trx::check::check_data_dir(b.clone(), 1 << 20, cpu.clone())
        .err()
        .expect("check on a live directory");
    assert!(err.to_string().contains("in use"), "{err}");
    e.shutdown().unwrap();
    drop(e);
    // Released with the engine.
    millrace_trx::check::check_data_dir(b, 1 << 20, cpu).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `f` on a thread; fails the test (instead of hanging it) if it does
/// not finish within `limit`.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what}: no progress within {limit:?} (hung)"))
}

#[test]
fn a_page_cleaner_write_error_stops_the_engine_instead_of_hanging() {
    let mut c = cfg();
    // A pool big enough that only the cleaner writes pages, a log small
    // enough that writers soon need the checkpoint it makes.
    c.store.buf.pool_bytes = 16 << 20;
    c.store.log.capacity_bytes = 512 << 10;
    let s = SimStorage::new();
    let e = try_open(&s, c.clone()).unwrap();
    let t = e.create_table(&[]).unwrap();
    // ENOSPC on every write that grows a file: page writes fail (the
    // doublewrite file and the tablespaces grow), the preallocated log's
    // writes do not.
    s.inject_fault(FaultOp::Write, FaultKind::Enospc, 1, Some(1));
    let e2 = e.clone();
    let (acked, err) = within(Duration::from_secs(60), "writers", move || {
        let mut acked = Vec::new();
        for i in 0..20_000u64 {
            let tx = e2.begin(Isolation::RepeatableRead);
            let r = tx.insert(t, &k(i), &[7u8; 300]).and_then(|()| tx.commit());
            match r {
                Ok(()) => acked.push(i),
                Err(err) => return (acked, Some(err)),
            }
        }
        (acked, None)
    });
    let err = err.expect("20000 inserts through a 512 KiB log without one page write");
    assert_eq!(err.mysql_code(), millrace_errcode::ER_GET_ERRNO, "{err}");
    assert!(e.store().log().failure().is_some(), "the engine stopped");
    // Every statement gets the error at once, none waits.
    let e3 = e.clone();
    within(
        Duration::from_secs(10),
        "a statement after the failure",
        move || {
            let tx = e3.begin(Isolation::RepeatableRead);
            assert!(tx.insert(t, b"late", b"x").is_err());
            assert!(tx.get(t, &k(0)).is_err());
        },
    );
    s.clear_faults();
    let image = s.durable_image();
    drop(e);
    let again = try_open(&image, c).unwrap();
    let got = rows(&again, t).unwrap();
    for i in &acked {
        assert!(got.contains_key(&k(*i)), "acknowledged commit {i} lost");
    }
    millrace_btree::check_store(again.store()).unwrap();
}

#[test]
fn many_writers_on_a_small_log_make_progress() {
    let mut c = cfg();
    // The smallest log (16 blocks): before the margin grew with the number
    // of running mtrs, 64 writers hung here (seen: no progress in 60 s).
    c.store.log.capacity_bytes = 64 << 10;
    c.store.buf.pool_bytes = 4 << 20;
    c.rsegs = Some(8);
    let s = SimStorage::new();
    let e = try_open(&s, c).unwrap();
    let t = e.create_table(&[]).unwrap();
    let writers: u64 = 64;
    let e2 = e.clone();
    within(
        Duration::from_secs(120),
        "writers on a small log",
        move || {
            let threads: Vec<_> = (0..writers)
                .map(|w| {
                    let e = e2.clone();
                    std::thread::spawn(move || {
                        for i in 0..60u64 {
                            // Big rows on shared leaves: every mtr writes a lot
                            // of redo and many split.
                            let tx = e.begin(Isolation::RepeatableRead);
                            tx.put(t, &k(i * writers + w), &[w as u8; 450]).unwrap();
                            tx.commit().unwrap();
                        }
                    })
                })
                .collect();
            for th in threads {
                th.join().unwrap();
            }
        },
    );
    assert_eq!(rows(&e, t).unwrap().len() as u64, writers * 60);
}
