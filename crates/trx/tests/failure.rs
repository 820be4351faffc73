//! Transactions under failure: a rollback that cannot finish (a read error
//! in the middle of it) must not make the changes it did not undo look
//! committed. The engine stops with the transaction still active and
//! locked, and the next open rolls it back from its undo log.

mod common;

use common::k;
use millrace_io::SimStorage;
use millrace_trx::{Engine, Isolation, TrxError};
use std::sync::Arc;

const ROWS: u64 = 300;
const OLD: [u8; 200] = [1; 200];
const NEW: [u8; 200] = [2; 200];

/// A small pool (pages of the transaction are evicted, so its rollback
/// reads them back) and no purge thread (its reads would move the fault).
fn setup(s: &SimStorage) -> (Arc<Engine>, u32) {
    let mut c = common::cfg();
    c.store.buf.pool_bytes = 24 * 4096;
    c.purge = false;
    let e = common::open_with(s, c);
    let t = e.create_table(&[]).unwrap();
    let base = e.begin(Isolation::RepeatableRead);
    for i in 0..ROWS {
        base.insert(t, &k(i), &OLD).unwrap();
    }
    base.commit().unwrap();
    (e, t)
}

/// For each read of a rollback in turn, that read fails: either the
/// rollback still succeeds (the read was retried or not needed), or it
/// fails and then the transaction keeps its locks, no reader sees its
/// changes, no writer gets its rows, and the next open undoes it all.
#[test]
fn a_rollback_that_fails_half_way_leaves_its_changes_uncommitted() {
    let mut failures = 0;
    for n in 0..400u64 {
        let s = SimStorage::new();
        let (e, t) = setup(&s);
        let w = e.begin(Isolation::RepeatableRead);
        for i in 0..ROWS {
            assert!(w.update(t, &k(i), &NEW).unwrap());
        }
        let locks = e.locks_held();
        assert_eq!(locks, ROWS as usize);
        s.fail_read_after(Some(n));
        let r = w.rollback();
        s.fail_read_after(None);
        if r.is_ok() {
            // This rollback needed fewer than n reads: every later n too.
            assert_eq!(e.locks_held(), 0);
            e.shutdown().unwrap();
            break;
        }
        assert!(matches!(r, Err(TrxError::EngineFailed(_))), "{r:?}");
        assert!(e.failure().is_some());
        assert_eq!(
            e.locks_held(),
            locks,
            "n={n}: a failed rollback keeps its locks"
        );
        // What was not undone is not committed: no reader sees it.
        let reader = e.begin(Isolation::ReadCommitted);
        for i in 0..ROWS {
            match reader.get(t, &k(i)) {
                Ok(Some(v)) => assert_eq!(v, OLD, "n={n}: row {i} shows an uncommitted change"),
                Ok(None) => panic!("n={n}: row {i} vanished"),
                Err(_) => {}
            }
        }
        drop(reader);
        // Nor does a writer get a row whose change was not undone.
        let writer = e.begin(Isolation::ReadCommitted);
        assert!(writer.update(t, &k(ROWS - 1), &OLD).is_err());
        drop(writer);
        failures += 1;
        // The stopped engine writes nothing more, also at shutdown.
        assert!(e.shutdown().is_err());
        drop(e);

        let e = common::open(&s.durable_image());
        let r = e.begin(Isolation::ReadCommitted);
        for i in 0..ROWS {
            assert_eq!(
                r.get(t, &k(i)).unwrap(),
                Some(OLD.to_vec()),
                "n={n} row {i}"
            );
        }
        r.commit().unwrap();
        e.shutdown().unwrap();
    }
    eprintln!("{failures} rollbacks failed at a read");
    assert!(failures > 0, "no read of a rollback failed");
}

/// Once the engine stops, nobody will release the locks of its unfinished
/// transactions: waits end at once instead of running to their timeout.
#[test]
fn a_stopped_engines_lock_waits_end_at_once() {
    use millrace_metrics::Registry;
    use millrace_trx::lock::{LockError, LockManager, LockMode};
    use std::time::{Duration, Instant};
    let locks = Arc::new(LockManager::new(&Registry::new()));
    locks
        .lock(1, 7, b"row", LockMode::Exclusive, Duration::ZERO)
        .unwrap();
    let l2 = locks.clone();
    let waiter = std::thread::spawn(move || {
        l2.lock(2, 7, b"row", LockMode::Exclusive, Duration::from_secs(60))
    });
    while locks.waiting() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let t0 = Instant::now();
    locks.cancel_all();
    assert_eq!(waiter.join().unwrap(), Err(LockError::Cancelled));
    // A request made after the stop does not wait either.
    assert_eq!(
        locks.lock(3, 7, b"row", LockMode::Shared, Duration::from_secs(60)),
        Err(LockError::Cancelled)
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    // One that needs no wait is still granted.
    locks
        .lock(3, 7, b"other", LockMode::Exclusive, Duration::ZERO)
        .unwrap();
}
