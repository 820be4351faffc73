//! History bounds: each has a setting, a metric, and a stated action.

mod common;
use common::*;
use millrace_io::SimStorage;
use millrace_trx::{Isolation, TrxError, UndoQuotaPolicy};
use std::time::{Duration, Instant};

fn storm_round(
    e: &std::sync::Arc<millrace_trx::Engine>,
    t: u32,
    round: u64,
) -> Result<(), TrxError> {
    let w = e.begin(Isolation::RepeatableRead);
    for n in 0..50 {
        w.update(
            t,
            &k(n),
            format!("round-{round:06}-{n:03}-{}", "x".repeat(100)).as_bytes(),
        )?;
    }
    w.commit()
}

fn setup(e: &std::sync::Arc<millrace_trx::Engine>) -> u32 {
    let t = e.create_table(&[]).unwrap();
    let w = e.begin(Isolation::RepeatableRead);
    for n in 0..50 {
        w.insert(t, &k(n), b"initial").unwrap();
    }
    w.commit().unwrap();
    t
}

/// rollback_oldest: a reader that never ends holds purge back; once undo
/// passes the quota, the reader is rolled back (its next statement gets
/// 1317), purge catches up and undo falls back under the quota.
#[test]
fn undo_quota_rolls_back_the_oldest_reader() {
    let s = SimStorage::new();
    let mut c = cfg();
    c.undo_quota_bytes = 1 << 20;
    c.undo_quota_policy = UndoQuotaPolicy::RollbackOldest;
    let e = open_with(&s, c);
    let t = setup(&e);
    let reader = e.begin(Isolation::RepeatableRead);
    assert_eq!(reader.get(t, &k(1)).unwrap(), Some(b"initial".to_vec()));
    let mut killed_at = None;
    let mut max_undo = 0;
    for round in 0..400 {
        storm_round(&e, t, round).unwrap();
        max_undo = max_undo.max(e.undo_bytes().unwrap());
        if killed_at.is_none() {
            match reader.get(t, &k(1)) {
                Ok(v) => assert_eq!(
                    v,
                    Some(b"initial".to_vec()),
                    "the reader's snapshot holds until it is killed"
                ),
                Err(err) => {
                    assert!(matches!(err, TrxError::RolledBack(_)), "{err}");
                    assert_eq!(err.mysql_code(), 1317);
                    killed_at = Some(round);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        killed_at.is_some(),
        "the quota never acted (max undo {max_undo})"
    );
    assert!(e.registry().get("trx_undo_quota_actions").unwrap() >= 1);
    let t0 = Instant::now();
    while e.undo_bytes().unwrap() > 1 << 20 || e.history_len() > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "purge did not bring undo under the quota"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Bounded: it never ran far past the quota (a round, plus the policy's
    // 100 ms reaction time).
    assert!(max_undo < 4 << 20, "undo grew to {max_undo} bytes");
    e.shutdown().unwrap();
}

/// wait_writers: writers wait for purge instead; with a reader that never
/// ends they time out (1205) and the history stops growing.
#[test]
fn undo_quota_makes_writers_wait() {
    let s = SimStorage::new();
    let mut c = cfg();
    c.undo_quota_bytes = 1 << 20;
    c.undo_quota_policy = UndoQuotaPolicy::WaitWriters;
    c.lock_wait_timeout_ms = 300;
    let e = open_with(&s, c);
    let t = setup(&e);
    let reader = e.begin(Isolation::RepeatableRead);
    reader.get(t, &k(1)).unwrap();
    let mut timed_out = false;
    for round in 0..400 {
        match storm_round(&e, t, round) {
            Ok(()) => {}
            Err(TrxError::LockWaitTimeout) => {
                timed_out = true;
                break;
            }
            Err(err) => panic!("{err}"),
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(timed_out, "writers never waited");
    assert!(e.registry().get("trx_undo_quota_writer_waits").unwrap() >= 1);
    let hl = e.history_len();
    assert!(matches!(
        storm_round(&e, t, 9999),
        Err(TrxError::LockWaitTimeout)
    ));
    assert_eq!(
        e.history_len(),
        hl,
        "no history growth while writers are held"
    );
    // The reader ends: purge runs, writers go again.
    reader.commit().unwrap();
    let t0 = Instant::now();
    loop {
        match storm_round(&e, t, 10_000) {
            Ok(()) => break,
            Err(TrxError::LockWaitTimeout) => assert!(
                t0.elapsed() < Duration::from_secs(20),
                "writers stayed blocked"
            ),
            Err(err) => panic!("{err}"),
        }
    }
    e.shutdown().unwrap();
}

/// max_purge_lag: DML is delayed while purge is behind (here: purge off,
/// as if starved of CPU), and the delay is counted; a history held back by a
/// read view is not a reason to delay (purge could not use the time).
#[test]
fn purge_lag_delays_dml_only_when_purge_is_behind() {
    let s = SimStorage::new();
    let mut c = cfg();
    c.max_purge_lag = 5;
    c.max_purge_lag_delay_us = 2000;
    c.purge = false;
    let e = open_with(&s, c);
    let t = setup(&e);
    for round in 0..30 {
        storm_round(&e, t, round).unwrap();
    }
    assert!(e.history_len() > 5);
    let n = e.registry().get("trx_purge_lag_delays").unwrap();
    let us = e.registry().get("trx_purge_lag_delay_us").unwrap();
    assert!(n > 0 && us > 0, "no delay counted ({n}, {us} us)");
    e.shutdown().unwrap();

    let s = SimStorage::new();
    let mut c = cfg();
    c.max_purge_lag = 5;
    let e = open_with(&s, c);
    let t = setup(&e);
    let reader = e.begin(Isolation::RepeatableRead);
    reader.get(t, &k(1)).unwrap();
    for round in 0..30 {
        storm_round(&e, t, round).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(e.history_len() > 5);
    let before = e.registry().get("trx_purge_lag_delays").unwrap();
    std::thread::sleep(Duration::from_millis(250));
    for round in 30..40 {
        storm_round(&e, t, round).unwrap();
    }
    assert_eq!(
        e.registry().get("trx_purge_lag_delays").unwrap(),
        before,
        "delayed although a view blocks purge"
    );
    reader.commit().unwrap();
    e.shutdown().unwrap();
}

/// An idle transaction is rolled back: its changes are undone, its locks
/// released, and its next statement fails.
#[test]
fn idle_transactions_time_out() {
    let s = SimStorage::new();
    let mut c = cfg();
    c.idle_trx_timeout_ms = 150;
    c.lock_wait_timeout_ms = 5000;
    let e = open_with(&s, c);
    let t = setup(&e);
    let idle = e.begin(Isolation::RepeatableRead);
    idle.update(t, &k(3), b"idle-change").unwrap();
    std::thread::sleep(Duration::from_millis(600));
    // The row lock is gone: this does not wait for the lock timeout.
    let t0 = Instant::now();
    let w = e.begin(Isolation::RepeatableRead);
    assert_eq!(w.get(t, &k(3)).unwrap(), Some(b"initial".to_vec()));
    w.update(t, &k(3), b"other").unwrap();
    w.commit().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2));
    let err = idle.get(t, &k(3)).unwrap_err();
    assert!(
        matches!(err, TrxError::RolledBack(m) if m.contains("idle")),
        "{err}"
    );
    assert!(e.registry().get("trx_idle_timeouts").unwrap() >= 1);
    e.shutdown().unwrap();
}

/// An undo tablespace that grew past `undo_truncate_bytes` is truncated
/// once purge has emptied it; the data is intact and the file is smaller.
#[test]
fn oversized_undo_tablespaces_are_truncated() {
    let s = SimStorage::new();
    let mut c = cfg();
    c.undo_truncate_bytes = 256 << 10;
    let e = open_with(&s, c);
    let t = setup(&e);
    let reader = e.begin(Isolation::RepeatableRead);
    reader.get(t, &k(1)).unwrap();
    for round in 0..60 {
        storm_round(&e, t, round).unwrap();
    }
    let file_bytes = |sp: u32| {
        s.file_bytes(&format!("spaces/{sp:010}.mrs"))
            .map_or(0, |b| b.len())
    };
    // Flush, so the files have the spaces' sizes. Undo spaces are 1 and 2.
    e.store().checkpoint_now().unwrap();
    let grown = file_bytes(1).max(file_bytes(2));
    assert!(
        grown > 256 << 10,
        "undo did not grow past the limit ({grown} bytes)"
    );
    reader.commit().unwrap();
    let t0 = Instant::now();
    while e.registry().get("trx_undo_truncations").unwrap() == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no undo tablespace was truncated"
        );
        // Keep some (small) write traffic so the other space stays in use.
        storm_round(&e, t, 1000).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let now = file_bytes(1).min(file_bytes(2));
    assert!(now < 64 << 10, "the truncated file is still {now} bytes");
    let r = e.begin(Isolation::RepeatableRead);
    assert!(r
        .get(t, &k(7))
        .unwrap()
        .unwrap()
        .starts_with(b"round-001000"));
    r.commit().unwrap();
    e.shutdown().unwrap();
    // And the store reopens and checks out.
    let e = open(&s.clean_image());
    let (ci, _) = e.index_defs(t).unwrap();
    millrace_btree::Index::open(ci).check(e.store()).unwrap();
    assert!(millrace_btree::check_store(e.store()).is_ok());
    e.shutdown().unwrap();
}

/// wait_writers: a writer waiting for purge when the engine stops (here its
/// log fails, as after a page write error) leaves with the engine's error at
/// once, not at its timeout: a stopped engine never purges.
#[test]
fn a_writer_waiting_for_the_undo_quota_leaves_when_the_engine_stops() {
    let s = SimStorage::new();
    let mut c = cfg();
    c.undo_quota_bytes = 1 << 20;
    c.undo_quota_policy = UndoQuotaPolicy::WaitWriters;
    c.lock_wait_timeout_ms = 60_000;
    let e = open_with(&s, c);
    let t = setup(&e);
    let reader = e.begin(Isolation::RepeatableRead);
    reader.get(t, &k(1)).unwrap();
    // Fill undo up to the quota; a writer thread then blocks on it.
    let (tx, rx) = std::sync::mpsc::channel();
    let e2 = e.clone();
    std::thread::spawn(move || {
        for round in 0..400 {
            if let Err(err) = storm_round(&e2, t, round) {
                let _ = tx.send(err);
                return;
            }
        }
    });
    let t0 = Instant::now();
    while e.registry().get("trx_undo_quota_writer_waits").unwrap() == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "writers never waited"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = e.store().log().fail("test: a page write failed");
    let err = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the waiting writer left when the engine stopped");
    assert!(matches!(err, TrxError::EngineFailed(_)), "{err}");
    drop(reader);
    assert!(e.shutdown().is_err());
}
