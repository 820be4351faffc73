//! The row lock manager: compatibility, re-entry and upgrades, FIFO
//! fairness, timeouts, cancellation, deadlock detection (2- and 3-cycles),
//! implicit locks, metrics, and a randomized multi-threaded stress run that
//! checks mutual exclusion through per-key counters.

use millrace_metrics::Registry;
use millrace_sys::rng::SplitMix64;
use millrace_trx::lock::{LockError, LockManager, LockMode, TrxId};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use LockMode::{Exclusive, Shared};

const T: u32 = 7;
/// Long enough that a test never times out by accident.
const LONG: Duration = Duration::from_secs(10);

fn manager() -> (Arc<Registry>, Arc<LockManager>) {
    let registry = Registry::new();
    let locks = Arc::new(LockManager::new(&registry));
    (registry, locks)
}

/// Polls `cond` (the test observes the manager from outside; the manager
/// itself never polls) and fails after two seconds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `trx`'s lock request on a thread of its own.
fn lock_async(
    locks: &Arc<LockManager>,
    trx: TrxId,
    key: &'static [u8],
    mode: LockMode,
    timeout: Duration,
) -> thread::JoinHandle<Result<(), LockError>> {
    let locks = locks.clone();
    thread::spawn(move || locks.lock(trx, T, key, mode, timeout))
}

fn join<R>(h: thread::JoinHandle<R>) -> R {
    h.join().expect("lock thread panicked")
}

#[test]
fn lock_manager_is_send_and_sync() {
    fn check<X: Send + Sync>() {}
    check::<LockManager>();
}

#[test]
fn shared_locks_are_compatible() {
    let (_r, locks) = manager();
    assert_eq!(locks.lock(1, T, b"a", Shared, LONG), Ok(()));
    assert_eq!(locks.lock(2, T, b"a", Shared, LONG), Ok(()));
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Shared));
    assert_eq!(locks.held_mode(2, T, b"a"), Some(Shared));
    assert_eq!(locks.total_locks(), 2);
    assert_eq!(locks.waiting(), 0);
    locks.release_all(1);
    locks.release_all(2);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn shared_blocks_exclusive_and_release_wakes_it() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S");
    let x = lock_async(&locks, 2, b"a", Exclusive, LONG);
    wait_until("X waits", || locks.waiting() == 1);
    assert_eq!(locks.held_mode(2, T, b"a"), None);
    locks.release_all(1);
    assert_eq!(join(x), Ok(()));
    assert_eq!(locks.held_mode(2, T, b"a"), Some(Exclusive));
    assert_eq!(locks.waiting(), 0);
    locks.release_all(2);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn exclusive_blocks_shared_and_exclusive() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X");
    let s = lock_async(&locks, 2, b"a", Shared, LONG);
    let x = lock_async(&locks, 3, b"a", Exclusive, LONG);
    wait_until("both wait", || locks.waiting() == 2);
    locks.release_all(1);
    // Whichever queued first goes first; the other follows its release.
    wait_until("one granted", || locks.waiting() == 1);
    if locks.held_mode(2, T, b"a").is_some() {
        assert_eq!(join(s), Ok(()));
        locks.release_all(2);
        assert_eq!(join(x), Ok(()));
        locks.release_all(3);
    } else {
        assert_eq!(locks.held_mode(3, T, b"a"), Some(Exclusive));
        assert_eq!(join(x), Ok(()));
        locks.release_all(3);
        assert_eq!(join(s), Ok(()));
        locks.release_all(2);
    }
    assert_eq!(locks.total_locks(), 0);
    assert_eq!(locks.waiting(), 0);
}

#[test]
fn locks_are_reentrant() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X");
    // Weaker and equal requests return at once, even with a waiter queued.
    let w = lock_async(&locks, 2, b"a", Shared, LONG);
    wait_until("S waits", || locks.waiting() == 1);
    assert_eq!(locks.lock(1, T, b"a", Shared, Duration::ZERO), Ok(()));
    assert_eq!(locks.lock(1, T, b"a", Exclusive, Duration::ZERO), Ok(()));
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Exclusive));
    assert_eq!(locks.lock_count(1), 1);
    assert_eq!(locks.total_locks(), 1);
    locks.release_all(1);
    assert_eq!(join(w), Ok(()));
    locks.release_all(2);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn upgrade_waits_for_the_other_shared_holder() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S1");
    locks.lock(2, T, b"a", Shared, LONG).expect("S2");
    let up = lock_async(&locks, 1, b"a", Exclusive, LONG);
    wait_until("upgrade waits", || locks.waiting() == 1);
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Shared));
    locks.release_all(2);
    assert_eq!(join(up), Ok(()));
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Exclusive));
    assert_eq!(locks.lock_count(1), 1);
    assert_eq!(locks.total_locks(), 1);
    locks.release_all(1);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn upgrade_without_other_holders_is_immediate() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S");
    assert_eq!(locks.lock(1, T, b"a", Exclusive, Duration::ZERO), Ok(()));
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Exclusive));
    assert_eq!(locks.total_locks(), 1);
    locks.release_all(1);
}

#[test]
fn upgrade_goes_before_earlier_waiters() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S1");
    locks.lock(2, T, b"a", Shared, LONG).expect("S2");
    let x3 = lock_async(&locks, 3, b"a", Exclusive, LONG);
    wait_until("X3 waits", || locks.waiting() == 1);
    let up1 = lock_async(&locks, 1, b"a", Exclusive, LONG);
    wait_until("upgrade waits", || locks.waiting() == 2);
    locks.release_all(2);
    assert_eq!(join(up1), Ok(()));
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Exclusive));
    assert_eq!(locks.held_mode(3, T, b"a"), None);
    locks.release_all(1);
    assert_eq!(join(x3), Ok(()));
    locks.release_all(3);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn shared_request_queues_behind_waiting_exclusive() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S1");
    let x2 = lock_async(&locks, 2, b"a", Exclusive, LONG);
    wait_until("X2 waits", || locks.waiting() == 1);
    // Only S is held, yet the new S waits behind the queued X.
    let s3 = lock_async(&locks, 3, b"a", Shared, LONG);
    wait_until("S3 waits", || locks.waiting() == 2);
    assert_eq!(locks.held_mode(3, T, b"a"), None);
    locks.release_all(1);
    assert_eq!(join(x2), Ok(()));
    assert_eq!(locks.held_mode(3, T, b"a"), None);
    assert_eq!(locks.waiting(), 1);
    locks.release_all(2);
    assert_eq!(join(s3), Ok(()));
    locks.release_all(3);
    assert_eq!(locks.total_locks(), 0);
    assert_eq!(locks.waiting(), 0);
}

#[test]
fn timeout_returns_error_and_leaves_nothing_behind() {
    let (registry, locks) = manager();
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X");
    let start = Instant::now();
    let r = locks.lock(2, T, b"a", Shared, Duration::from_millis(50));
    let waited = start.elapsed();
    assert_eq!(r, Err(LockError::Timeout));
    assert!(
        waited >= Duration::from_millis(50),
        "returned after {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(1000),
        "returned after {waited:?}"
    );
    assert_eq!(locks.held_mode(2, T, b"a"), None);
    assert_eq!(locks.lock_count(2), 0);
    assert_eq!(locks.total_locks(), 1);
    assert_eq!(locks.waiting(), 0);
    assert_eq!(registry.get("lock_timeouts"), Some(1));
    locks.release_all(1);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn timed_out_waiter_lets_those_behind_it_through() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S1");
    let x2 = lock_async(&locks, 2, b"a", Exclusive, Duration::from_millis(50));
    wait_until("X2 waits", || locks.waiting() == 1);
    let s3 = lock_async(&locks, 3, b"a", Shared, LONG);
    wait_until("S3 waits", || locks.waiting() == 2);
    assert_eq!(join(x2), Err(LockError::Timeout));
    // S3 only waited for X2, which is gone.
    assert_eq!(join(s3), Ok(()));
    assert_eq!(locks.held_mode(3, T, b"a"), Some(Shared));
    assert_eq!(locks.waiting(), 0);
    locks.release_all(1);
    locks.release_all(3);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn cancel_ends_a_wait() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X");
    let w = lock_async(&locks, 2, b"a", Exclusive, LONG);
    wait_until("X2 waits", || locks.waiting() == 1);
    locks.cancel(2);
    assert_eq!(join(w), Err(LockError::Cancelled));
    assert_eq!(locks.waiting(), 0);
    assert_eq!(locks.held_mode(2, T, b"a"), None);
    // Cancelling a trx that does not wait does nothing.
    locks.cancel(1);
    locks.cancel(99);
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Exclusive));
    locks.release_all(1);
    assert_eq!(locks.total_locks(), 0);
}

/// A cancel that comes before the wait begins (KILL racing a statement on
/// its way to a lock) ends the next wait at once instead of being lost;
/// requests granted without a wait are not affected.
#[test]
fn a_cancel_before_the_wait_ends_the_next_wait() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X");
    locks.cancel(2);
    locks
        .lock(2, T, b"b", Exclusive, LONG)
        .expect("no wait: granted");
    let t0 = Instant::now();
    assert_eq!(
        locks.lock(2, T, b"a", Exclusive, LONG),
        Err(LockError::Cancelled)
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "ended by the cancel");
    assert_eq!(locks.waiting(), 0);
    // Used once: a later wait waits (and times out here).
    assert_eq!(
        locks.lock(2, T, b"a", Exclusive, Duration::from_millis(50)),
        Err(LockError::Timeout)
    );
    locks.release_all(1);
    locks.release_all(2);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn implicit_lock_makes_others_wait_for_the_holder() {
    let (_r, locks) = manager();
    locks.grant_implicit(1, T, b"a");
    assert_eq!(locks.held_mode(1, T, b"a"), Some(Exclusive));
    // Already X: a no-op.
    locks.grant_implicit(1, T, b"a");
    assert_eq!(locks.lock_count(1), 1);
    assert_eq!(locks.total_locks(), 1);
    let w = lock_async(&locks, 2, b"a", Shared, LONG);
    wait_until("S2 waits", || locks.waiting() == 1);
    locks.release_all(1);
    assert_eq!(join(w), Ok(()));
    locks.release_all(2);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn implicit_lock_is_granted_ahead_of_waiters() {
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X1");
    let w = lock_async(&locks, 2, b"a", Exclusive, LONG);
    wait_until("X2 waits", || locks.waiting() == 1);
    // Trx 3 owns another row implicitly while X2 waits elsewhere.
    locks.grant_implicit(3, T, b"b");
    assert_eq!(locks.held_mode(3, T, b"b"), Some(Exclusive));
    locks.release_all(1);
    assert_eq!(join(w), Ok(()));
    locks.release_all(2);
    locks.release_all(3);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn implicit_lock_closing_a_cycle_picks_a_waiting_victim() {
    let (registry, locks) = manager();
    // Trx 1 holds a and waits for b (trx 3's S stands in for whatever made
    // it wait); trx 2 waits for a. Converting trx 2's implicit lock on b
    // closes 1 -> 2 -> 1 through an edge that trx 1's queued wait gained,
    // so trx 1 is woken as the victim. (grant_implicit trusts its caller
    // that no conflicting lock is held; this only exercises the search.)
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X1");
    locks.lock(3, T, b"b", Shared, LONG).expect("S3");
    let w1 = lock_async(&locks, 1, b"b", Exclusive, LONG);
    wait_until("1 waits", || locks.waiting() == 1);
    let w2 = lock_async(&locks, 2, b"a", Exclusive, LONG);
    wait_until("2 waits", || locks.waiting() == 2);
    locks.grant_implicit(2, T, b"b");
    assert_eq!(join(w1), Err(LockError::Deadlock));
    assert_eq!(registry.get("lock_deadlocks"), Some(1));
    locks.release_all(1);
    assert_eq!(join(w2), Ok(()));
    locks.release_all(2);
    locks.release_all(3);
    assert_eq!(locks.total_locks(), 0);
    assert_eq!(locks.waiting(), 0);
}

/// Each of `n` threads holds key i and then asks for key i+1 (mod n).
fn run_cycle(n: usize) {
    let (registry, locks) = manager();
    const KEYS: [&[u8]; 3] = [b"k1", b"k2", b"k3"];
    let barrier = Arc::new(Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let locks = locks.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                let trx = i as TrxId + 1;
                locks
                    .lock(trx, T, KEYS[i], Exclusive, LONG)
                    .expect("own key");
                barrier.wait();
                let r = locks.lock(trx, T, KEYS[(i + 1) % n], Exclusive, LONG);
                // A victim rolls back; a winner commits.
                locks.release_all(trx);
                r
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(join).collect();
    let victims = results
        .iter()
        .filter(|r| **r == Err(LockError::Deadlock))
        .count();
    let winners = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!((victims, winners), (1, n - 1), "{results:?}");
    assert_eq!(registry.get("lock_deadlocks"), Some(1));
    assert_eq!(locks.total_locks(), 0);
    assert_eq!(locks.waiting(), 0);
}

#[test]
fn two_cycle_deadlock_has_one_victim() {
    run_cycle(2);
}

#[test]
fn three_cycle_deadlock_has_one_victim() {
    run_cycle(3);
}

#[test]
fn upgrade_deadlock_is_detected() {
    // Two S holders both asking for X: the second asker is the victim.
    let (_r, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S1");
    locks.lock(2, T, b"a", Shared, LONG).expect("S2");
    let up1 = lock_async(&locks, 1, b"a", Exclusive, LONG);
    wait_until("upgrade 1 waits", || locks.waiting() == 1);
    assert_eq!(
        locks.lock(2, T, b"a", Exclusive, LONG),
        Err(LockError::Deadlock)
    );
    assert_eq!(locks.held_mode(2, T, b"a"), Some(Shared));
    locks.release_all(2);
    assert_eq!(join(up1), Ok(()));
    locks.release_all(1);
    assert_eq!(locks.total_locks(), 0);
}

#[test]
fn released_holder_is_no_longer_waited_for() {
    // Trx 2 first waits for S holders 1 and 3; after trx 1 commits, a new
    // wait of trx 1 for trx 2 must not look like a cycle through a stale
    // 2 -> 1 edge.
    let (registry, locks) = manager();
    locks.lock(1, T, b"a", Shared, LONG).expect("S1");
    locks.lock(3, T, b"a", Shared, LONG).expect("S3");
    locks.lock(2, T, b"b", Exclusive, LONG).expect("X2");
    let w2 = lock_async(&locks, 2, b"a", Exclusive, LONG);
    wait_until("2 waits", || locks.waiting() == 1);
    locks.release_all(1);
    let w1 = lock_async(&locks, 1, b"b", Shared, LONG);
    wait_until("1 waits", || locks.waiting() == 2);
    assert_eq!(registry.get("lock_deadlocks"), Some(0));
    locks.release_all(3);
    assert_eq!(join(w2), Ok(()));
    locks.release_all(2);
    assert_eq!(join(w1), Ok(()));
    locks.release_all(1);
    assert_eq!(locks.total_locks(), 0);
    assert_eq!(locks.waiting(), 0);
}

#[test]
fn metrics_follow_waits_deadlocks_and_timeouts() {
    let (registry, locks) = manager();
    let get = |name| registry.get(name).expect("metric registered");
    assert_eq!(get("lock_waits"), 0);
    locks.lock(1, T, b"a", Exclusive, LONG).expect("X1");
    locks.lock(1, T, b"b", Shared, LONG).expect("S1");
    assert_eq!(get("lock_rows_locked"), 2);
    // Immediate grants are not waits.
    locks.lock(2, T, b"b", Shared, LONG).expect("S2");
    assert_eq!(get("lock_waits"), 0);

    let w = lock_async(&locks, 2, b"a", Exclusive, LONG);
    wait_until("2 waits", || locks.waiting() == 1);
    assert_eq!(get("lock_waiting"), 1);
    // 1 -> 2 (S on b) closes 1 -> 2 -> 1: trx 1 is the victim, no wait counted.
    assert_eq!(
        locks.lock(1, T, b"b", Exclusive, LONG),
        Err(LockError::Deadlock)
    );
    assert_eq!(get("lock_deadlocks"), 1);
    thread::sleep(Duration::from_millis(5));
    locks.release_all(1);
    assert_eq!(join(w), Ok(()));
    assert_eq!(get("lock_waits"), 1);
    assert!(
        get("lock_wait_ns") >= 5_000_000,
        "wait_ns {}",
        get("lock_wait_ns")
    );

    assert_eq!(
        locks.lock(3, T, b"a", Shared, Duration::from_millis(10)),
        Err(LockError::Timeout)
    );
    assert_eq!(get("lock_timeouts"), 1);
    assert_eq!(get("lock_waits"), 2);
    assert_eq!(get("lock_waiting"), 0);
    locks.release_all(2);
    assert_eq!(get("lock_rows_locked"), 0);
}

/// Per-key counts of current holders, moved after acquiring and before
/// releasing, so they never exceed what the lock manager granted.
#[derive(Default)]
struct KeyHolders {
    shared: AtomicI64,
    exclusive: AtomicI64,
}

#[test]
fn randomized_stress_keeps_mutual_exclusion() {
    const THREADS: usize = 8;
    const TRXS_PER_THREAD: usize = 300;
    const KEYS: usize = 20;
    let (registry, locks) = manager();
    let holders: Arc<Vec<KeyHolders>> =
        Arc::new((0..KEYS).map(|_| KeyHolders::default()).collect());
    let (done_tx, done_rx) = mpsc::channel();
    for t in 0..THREADS {
        let locks = locks.clone();
        let holders = holders.clone();
        let done_tx = done_tx.clone();
        thread::spawn(move || {
            let mut rng = SplitMix64::new(0x10c4 + t as u64);
            let mut retries = 0u64;
            for n in 0..TRXS_PER_THREAD {
                let keys = 1 + rng.below(4) as usize;
                let plan: Vec<(usize, LockMode)> = (0..keys)
                    .map(|_| {
                        let mode = if rng.chance(1, 2) { Shared } else { Exclusive };
                        (rng.below(KEYS as u64) as usize, mode)
                    })
                    .collect();
                let mut attempt = 0u64;
                loop {
                    // A fresh id per attempt, as a restarted transaction gets.
                    let trx = ((t * TRXS_PER_THREAD + n) as u64) << 16 | attempt;
                    let mut mine: Vec<(usize, LockMode)> = Vec::new();
                    let mut failed = false;
                    for &(k, mode) in &plan {
                        let key = [k as u8];
                        match locks.lock(trx, T, &key, mode, Duration::from_secs(2)) {
                            Ok(()) => {}
                            Err(LockError::Deadlock) | Err(LockError::Timeout) => {
                                failed = true;
                                break;
                            }
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                        let h = &holders[k];
                        match mine.iter().position(|m| m.0 == k) {
                            Some(p) if mine[p].1 >= mode => {}
                            Some(p) => {
                                // An upgrade: our own S count moves to X.
                                h.shared.fetch_sub(1, Ordering::SeqCst);
                                h.exclusive.fetch_add(1, Ordering::SeqCst);
                                mine[p].1 = Exclusive;
                            }
                            None => {
                                match mode {
                                    Shared => h.shared.fetch_add(1, Ordering::SeqCst),
                                    Exclusive => h.exclusive.fetch_add(1, Ordering::SeqCst),
                                };
                                mine.push((k, mode));
                            }
                        }
                        let (s, x) = (
                            h.shared.load(Ordering::SeqCst),
                            h.exclusive.load(Ordering::SeqCst),
                        );
                        assert!(
                            x == 0 || (x == 1 && s == 0),
                            "key {k}: {s} S and {x} X holders"
                        );
                    }
                    assert_eq!(locks.lock_count(trx), mine.len());
                    if !failed {
                        thread::yield_now();
                    }
                    for &(k, mode) in &mine {
                        match mode {
                            Shared => holders[k].shared.fetch_sub(1, Ordering::SeqCst),
                            Exclusive => holders[k].exclusive.fetch_sub(1, Ordering::SeqCst),
                        };
                    }
                    locks.release_all(trx);
                    if !failed {
                        break;
                    }
                    attempt += 1;
                    retries += 1;
                    thread::yield_now();
                }
            }
            // Sending only after finishing: a missing message is a hang.
            let _ = done_tx.send(retries);
        });
    }
    drop(done_tx);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut retries = 0;
    for _ in 0..THREADS {
        let left = deadline.saturating_duration_since(Instant::now());
        retries += done_rx
            .recv_timeout(left)
            .expect("a stress thread hung or panicked");
    }
    assert_eq!(locks.total_locks(), 0);
    assert_eq!(locks.waiting(), 0);
    let deadlocks = registry.get("lock_deadlocks").expect("registered");
    let timeouts = registry.get("lock_timeouts").expect("registered");
    assert_eq!(deadlocks + timeouts, retries);
    // Every deadlock is detected, so nothing waits out the 2 s timeout.
    assert_eq!(timeouts, 0);
    for (k, h) in holders.iter().enumerate() {
        assert_eq!(h.shared.load(Ordering::SeqCst), 0, "key {k}");
        assert_eq!(h.exclusive.load(Ordering::SeqCst), 0, "key {k}");
    }
}
