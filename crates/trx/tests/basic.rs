mod common;
use common::*;
use millrace_io::SimStorage;
use millrace_trx::{Isolation, KeyPart, TrxError};
use std::ops::Bound;

#[test]
fn commit_rollback_and_visibility() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 4 }]])
        .unwrap();
    let a = e.begin(Isolation::RepeatableRead);
    a.insert(t, &k(1), b"v1aaaaa").unwrap();
    a.insert(t, &k(2), b"v2bbbbb").unwrap();
    assert_eq!(a.insert(t, &k(1), b"dup"), Err(TrxError::Duplicate));
    // Another transaction does not see uncommitted rows.
    let b = e.begin(Isolation::RepeatableRead);
    assert_eq!(b.get(t, &k(1)).unwrap(), None);
    assert_eq!(a.get(t, &k(1)).unwrap(), Some(b"v1aaaaa".to_vec()));
    a.commit().unwrap();
    // b's snapshot was taken before the commit.
    assert_eq!(b.get(t, &k(1)).unwrap(), None);
    let c = e.begin(Isolation::ReadCommitted);
    assert_eq!(c.get(t, &k(1)).unwrap(), Some(b"v1aaaaa".to_vec()));
    // Update, delete, rollback.
    let d = e.begin(Isolation::RepeatableRead);
    assert!(d.update(t, &k(1), b"v1-new!").unwrap());
    assert!(d.delete(t, &k(2)).unwrap());
    assert_eq!(d.get(t, &k(2)).unwrap(), None);
    assert_eq!(
        c.get(t, &k(1)).unwrap(),
        Some(b"v1aaaaa".to_vec()),
        "RC sees only committed"
    );
    d.rollback().unwrap();
    assert_eq!(c.get(t, &k(1)).unwrap(), Some(b"v1aaaaa".to_vec()));
    assert_eq!(c.get(t, &k(2)).unwrap(), Some(b"v2bbbbb".to_vec()));
    let rows = c.scan(t, Bound::Unbounded, Bound::Unbounded, 100).unwrap();
    assert_eq!(rows.len(), 2);
    let by_sec = c.scan_secondary(t, 0, b"v1aa", b"v1aa", 10).unwrap();
    assert_eq!(by_sec, vec![(k(1), b"v1aaaaa".to_vec())]);
    drop(b);
    c.commit().unwrap();
    e.shutdown().unwrap();
}

#[test]
fn secondary_index_follows_updates_and_purge_cleans_up() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 2 }]])
        .unwrap();
    let w = e.begin(Isolation::RepeatableRead);
    for n in 0..50 {
        w.insert(t, &k(n), format!("{:02}xxxxxxxx", n % 10).as_bytes())
            .unwrap();
    }
    w.commit().unwrap();
    let old = e.begin(Isolation::RepeatableRead);
    assert_eq!(
        old.scan_secondary(t, 0, b"03", b"03", 100).unwrap().len(),
        5
    );
    let w = e.begin(Isolation::RepeatableRead);
    for n in 0..50 {
        if n % 10 == 3 {
            w.update(t, &k(n), b"99moved").unwrap();
        }
        if n % 10 == 4 {
            w.delete(t, &k(n)).unwrap();
        }
    }
    w.commit().unwrap();
    let now = e.begin(Isolation::RepeatableRead);
    assert_eq!(
        now.scan_secondary(t, 0, b"03", b"03", 100).unwrap().len(),
        0
    );
    assert_eq!(
        now.scan_secondary(t, 0, b"99", b"99", 100).unwrap().len(),
        5
    );
    assert_eq!(
        now.scan_secondary(t, 0, b"04", b"04", 100).unwrap().len(),
        0
    );
    // The old snapshot still sees the old keys and rows.
    assert_eq!(
        old.scan_secondary(t, 0, b"03", b"03", 100).unwrap().len(),
        5
    );
    assert_eq!(
        old.scan_secondary(t, 0, b"04", b"04", 100).unwrap().len(),
        5
    );
    assert_eq!(old.get(t, &k(4)).unwrap(), Some(b"04xxxxxxxx".to_vec()));
    assert!(e.history_len() >= 1);
    drop(old);
    drop(now);
    // Purge catches up: history empties, delete-marked rows are gone.
    let t0 = std::time::Instant::now();
    while e.history_len() > 0 {
        assert!(t0.elapsed().as_secs() < 10, "purge did not catch up");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (clustered, secs) = e.index_defs(t).unwrap();
    let store = e.store();
    let ci = millrace_btree::Index::open(clustered);
    let rep = ci.check(store).unwrap();
    assert_eq!(rep.records, 45, "the 5 deleted rows were purged");
    assert_eq!(rep.deleted_records, 0);
    let si = millrace_btree::Index::open(secs[0]);
    let rep = si.check(store).unwrap();
    assert_eq!(rep.records, 45, "old secondary entries were purged");
    e.shutdown().unwrap();
}

#[test]
fn committed_survive_a_crash_in_flight_are_rolled_back() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 3 }]])
        .unwrap();
    let a = e.begin(Isolation::RepeatableRead);
    for n in 0..20 {
        a.insert(t, &k(n), b"committed").unwrap();
    }
    a.commit().unwrap();
    let b = e.begin(Isolation::RepeatableRead);
    for n in 0..10 {
        b.update(t, &k(n), b"in-flight").unwrap();
    }
    for n in 100..110 {
        b.insert(t, &k(n), b"in-flight").unwrap();
    }
    b.delete(t, &k(15)).unwrap();
    // Make b's changes durable (but not its commit): flush the log.
    e.store()
        .log()
        .wait_flushed(e.store().log().current_lsn())
        .unwrap();
    let img = s.durable_image();
    std::mem::forget(b);
    drop(e);
    let e = open(&img);
    let r = e.begin(Isolation::RepeatableRead);
    let rows = r
        .scan(
            t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            1000,
        )
        .unwrap();
    assert_eq!(rows.len(), 20);
    assert!(rows.iter().all(|(_, v)| v == b"committed"));
    assert_eq!(
        r.scan_secondary(t, 0, b"in-", b"in-", 100).unwrap().len(),
        0
    );
    assert_eq!(
        r.scan_secondary(t, 0, b"com", b"com", 100).unwrap().len(),
        20
    );
    r.commit().unwrap();
    e.shutdown().unwrap();
}

#[test]
fn oldest_view_age_is_reported() {
    let s = SimStorage::new();
    let e = open(&s);
    let t = e.create_table(&[]).unwrap();
    let r = e.begin(Isolation::RepeatableRead);
    r.get(t, &k(1)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(120));
    let age = e.registry().get("trx_oldest_view_age_ms").unwrap();
    assert!(age >= 100, "age {age}");
    r.commit().unwrap();
    assert_eq!(e.registry().get("trx_oldest_view_age_ms").unwrap(), 0);
    e.shutdown().unwrap();
}

/// Secondary keys taken from length-prefixed segments (the layout for rows
/// with variable-length columns) follow updates, rollbacks, purge and a
/// restart like byte-range keys do.
#[test]
fn segment_keys_for_variable_length_rows() {
    use millrace_trx::{encode_segments, split_segments};
    let s = SimStorage::new();
    let e = open(&s);
    // Two secondaries: segment 0, and segments 1 then 0.
    let t = e
        .create_table(&[
            vec![KeyPart::Segment(0)],
            vec![KeyPart::Segment(1), KeyPart::Segment(0)],
        ])
        .unwrap();
    let row = |a: &str, b: &str, payload: &str| {
        encode_segments(&[a.as_bytes(), b.as_bytes()], payload.as_bytes())
    };
    let w = e.begin(Isolation::RepeatableRead);
    w.insert(t, &k(1), &row("apple", "x", "first")).unwrap();
    w.insert(t, &k(2), &row("banana-long-key", "y", "second"))
        .unwrap();
    w.commit().unwrap();
    let w = e.begin(Isolation::RepeatableRead);
    w.update(t, &k(1), &row("cherry", "x", "moved")).unwrap();
    w.rollback().unwrap();
    let w = e.begin(Isolation::RepeatableRead);
    w.update(t, &k(2), &row("date", "z", "moved")).unwrap();
    w.commit().unwrap();
    let r = e.begin(Isolation::RepeatableRead);
    assert_eq!(
        r.scan_secondary(t, 0, b"apple", b"apple", 10)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        r.scan_secondary(t, 0, b"cherry", b"cherry", 10)
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        r.scan_secondary(t, 0, b"banana-long-key", b"banana-long-key", 10)
            .unwrap()
            .len(),
        0
    );
    let hits = r.scan_secondary(t, 1, b"zdate", b"zdate", 10).unwrap();
    assert_eq!(hits.len(), 1);
    let (segs, payload) = split_segments(&hits[0].1, 2).unwrap();
    assert_eq!(
        (segs[0], segs[1], payload),
        (&b"date"[..], &b"z"[..], &b"moved"[..])
    );
    assert!(
        split_segments(b"\x05\x00ab", 1).is_none(),
        "a truncated segment is None, not a panic"
    );
    r.commit().unwrap();
    let t0 = std::time::Instant::now();
    while e.history_len() > 0 {
        assert!(t0.elapsed().as_secs() < 10);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    e.shutdown().unwrap();
    let e = open(&s.clean_image());
    let r = e.begin(Isolation::RepeatableRead);
    assert_eq!(
        r.scan_secondary(t, 0, b"date", b"date", 10).unwrap().len(),
        1
    );
    let (_, secs) = e.index_defs(t).unwrap();
    let rep = millrace_btree::Index::open(secs[0])
        .check(e.store())
        .unwrap();
    assert_eq!(rep.records - rep.deleted_records, 2, "{rep:?}");
    r.commit().unwrap();
    e.shutdown().unwrap();
}
