//! `Trx::unique_key_taken`: the unique check as a locking current read.

mod common;

use millrace_io::SimStorage;
use millrace_trx::{Isolation, KeyPart, TrxError};
use std::thread;
use std::time::Duration;

/// A table whose secondary index 0 is bytes 0..4 of the value.
fn table(e: &millrace_trx::Engine) -> u32 {
    e.create_table(&[vec![KeyPart::Bytes { offset: 0, len: 4 }]])
        .unwrap()
}

#[test]
fn the_check_sees_uncommitted_writers_and_waits_for_them() {
    let s = SimStorage::new();
    let e = common::open(&s);
    let t = table(&e);
    let a = e.begin(Isolation::RepeatableRead);
    // A reader's snapshot, older than everything below.
    let old = e.begin(Isolation::RepeatableRead);
    assert_eq!(old.get(t, b"none").unwrap(), None);
    assert!(!a.unique_key_taken(t, 0, b"oslo", b"pk-a").unwrap());
    a.insert(t, b"pk-a", b"oslo, a").unwrap();
    // Its own row does not count.
    assert!(!a.unique_key_taken(t, 0, b"oslo", b"pk-a").unwrap());
    let e2 = e.clone();
    let b = thread::spawn(move || {
        let b = e2.begin(Isolation::RepeatableRead);
        let taken = b.unique_key_taken(t, 0, b"oslo", b"pk-b");
        b.rollback().unwrap();
        taken
    });
    thread::sleep(Duration::from_millis(200));
    assert!(!b.is_finished(), "b waits for a's value lock");
    a.commit().unwrap();
    assert_eq!(b.join().unwrap(), Ok(true), "a committed the value");
    // The snapshot does not see a's row; the current read does.
    assert!(old.unique_key_taken(t, 0, b"oslo", b"pk-c").unwrap());
    old.rollback().unwrap();
    // Another value is free; a prefix of a value is another value.
    let c = e.begin(Isolation::RepeatableRead);
    assert!(!c.unique_key_taken(t, 0, b"rome", b"pk-c").unwrap());
    assert!(!c.unique_key_taken(t, 0, b"osl", b"pk-c").unwrap());
    c.commit().unwrap();
    e.shutdown().unwrap();
}

#[test]
fn value_locks_take_part_in_deadlock_detection() {
    let s = SimStorage::new();
    let e = common::open(&s);
    let t = table(&e);
    let a = e.begin(Isolation::RepeatableRead);
    let b = e.begin(Isolation::RepeatableRead);
    assert!(!a.unique_key_taken(t, 0, b"aaaa", b"1").unwrap());
    assert!(!b.unique_key_taken(t, 0, b"bbbb", b"2").unwrap());
    let e2 = e.clone();
    let waiter = thread::spawn(move || {
        let r = b.unique_key_taken(t, 0, b"aaaa", b"2");
        drop(b);
        r
    });
    thread::sleep(Duration::from_millis(100));
    let r_a = a.unique_key_taken(t, 0, b"bbbb", b"1");
    let r_b = waiter.join().unwrap();
    let deadlocks = [&r_a, &r_b]
        .iter()
        .filter(|r| matches!(r, Err(TrxError::Deadlock)))
        .count();
    assert_eq!(deadlocks, 1, "{r_a:?} {r_b:?}");
    drop(a);
    assert_eq!(e2.locks_held(), 0);
    e.shutdown().unwrap();
}
