//! Storage faults in the middle of B+tree changes (docs/design.md, "Faults:
//! what the engine does when storage fails"): a read, write or fsync that
//! fails while an insert splits pages either fails the statement with the
//! tree intact, or stops the engine, and then the next open recovers. Never
//! a half-done split: keys unreachable, duplicates insertable.
//!
//! `MILLRACE_FAULT_ROUNDS` (default 40) sets how many fault positions are
//! tried per kind of fault.

use millrace_btree::{Error, Index, IndexDef};
use millrace_buf::{space, PageStore, StoreConfig};
use millrace_io::{FaultKind, FaultOp, SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use std::sync::Arc;

fn cfg() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.buf.page_size = 4096;
    // The smallest pool: most pages of the tree are not cached, so splits
    // read siblings from disk and getting a frame flushes dirty pages.
    c.buf.pool_bytes = 16 * 4096;
    c.buf.doublewrite_pages = 8;
    c.buf.flush_batch_pages = 8;
    c.log = LogConfig {
        capacity_bytes: 4 << 20,
        buffer_bytes: 256 << 10,
        writer_threads: WriterThreads::Off,
        durability: Durability::Flush,
        ..LogConfig::default()
    };
    c.cleaner = false;
    c
}

fn open(s: &SimStorage) -> Result<Arc<PageStore>, millrace_buf::Error> {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    Ok(PageStore::open(storage, cfg(), cpu, &Registry::new())?.0)
}

fn key(n: u64) -> Vec<u8> {
    format!("k{:012}", n).into_bytes()
}

/// Keys in a scattered order, so inserts split pages all over the tree
/// (and splits find right siblings to relink).
fn key_order(n: u64) -> u64 {
    (n * 7919) % 100_003
}

fn value(n: u64) -> Vec<u8> {
    let mut v = vec![0u8; 150];
    SplitMix64::new(n).fill(&mut v);
    v
}

fn rounds() -> u64 {
    std::env::var("MILLRACE_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

/// Every acknowledged key is found with its value, the tree checks, and an
/// acknowledged key cannot be inserted again.
fn verify(store: &PageStore, def: IndexDef, acked: &[u64], what: &str) {
    let index = Index::open(def);
    index
        .check(store)
        .unwrap_or_else(|e| panic!("{what}: check failed: {e}"));
    for &n in acked {
        let row = index
            .get(store, &key(key_order(n)))
            .unwrap_or_else(|e| panic!("{what}: get: {e}"))
            .unwrap_or_else(|| panic!("{what}: acknowledged key {n} unreachable"));
        assert_eq!(row.value, value(n), "{what}: key {n}");
    }
    for &n in acked.iter().step_by(7) {
        assert_eq!(
            index.insert(store, &key(key_order(n)), b"again", 1, 1),
            Err(Error::Duplicate),
            "{what}: an acknowledged key was insertable again"
        );
    }
}

fn campaign(op: FaultOp, kind: FaultKind) -> (u64, u64) {
    let (mut stopped, mut survived) = (0, 0);
    for nth in 1..=rounds() {
        let what = format!("{op:?} {kind:?} at call {nth}");
        let s = SimStorage::new();
        let store = open(&s).unwrap();
        let def = {
            let mut mtr = store.mtr().unwrap();
            let id = space::next_space_id(&mut mtr).unwrap();
            space::create_space(&mut mtr, id).unwrap();
            mtr.commit().unwrap();
            Index::create(&store, id, true).unwrap().def()
        };
        let index = Index::open(def);
        let mut acked = Vec::new();
        let mut n = 0;
        while n < 400 {
            index
                .insert(&store, &key(key_order(n)), &value(n), 1, 1)
                .unwrap();
            acked.push(n);
            n += 1;
        }
        store.log().wait_flushed(store.log().current_lsn()).unwrap();
        s.inject_fault(op, kind, nth, None);
        let mut failed = None;
        while n < 1200 && failed.is_none() {
            // Acknowledged: inserted and its redo durable, as a commit is.
            let done = index
                .insert(&store, &key(key_order(n)), &value(n), 1, 1)
                .and_then(|()| {
                    let log = store.log();
                    log.wait_flushed(log.current_lsn())
                        .map_err(|e| Error::Buf(millrace_buf::Error::Log(e)))
                });
            match done {
                Ok(()) => acked.push(n),
                Err(e) => failed = Some(e),
            }
            n += 1;
        }
        s.clear_faults();
        if failed.is_none() {
            // The fault fell on a call the workload did not make (or one
            // that needs no error, like a read past the end).
            continue;
        }
        if store.failure().is_some() {
            stopped += 1;
            // Stopped: nothing more is done, not even reads.
            assert!(index.get(&store, &key(key_order(0))).is_err(), "{what}");
            assert!(store.mtr().is_err(), "{what}");
            // Acknowledged means durable at level 1: every record before
            // the failure is in the log, which recovery replays.
            let image = s.durable_image();
            drop(store);
            let again = open(&image).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            verify(&again, def, &acked, &format!("{what}, recovered"));
        } else {
            survived += 1;
            verify(&store, def, &acked, &format!("{what}, still running"));
            // And what the running store wrote recovers too.
            let image = s.durable_image();
            drop(store);
            let again = open(&image).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            verify(&again, def, &acked, &format!("{what}, reopened"));
        }
    }
    eprintln!("{op:?} {kind:?}: {stopped} stopped the engine, {survived} failed statements only");
    (stopped, survived)
}

#[test]
fn read_errors_during_splits() {
    let (stopped, survived) = campaign(FaultOp::Read, FaultKind::Eio);
    assert!(stopped + survived > 0, "no fault hit the workload");
}

#[test]
fn write_errors_during_splits() {
    let (stopped, survived) = campaign(FaultOp::Write, FaultKind::Eio);
    assert!(stopped + survived > 0, "no fault hit the workload");
}

#[test]
fn no_space_during_splits() {
    let (stopped, survived) = campaign(FaultOp::Write, FaultKind::Enospc);
    assert!(stopped + survived > 0, "no fault hit the workload");
}

#[test]
fn fsync_errors_during_splits() {
    let (stopped, survived) = campaign(FaultOp::Sync, FaultKind::Eio);
    assert!(stopped + survived > 0, "no fault hit the workload");
    // A failed fsync is never retried: it always stops the engine.
    assert_eq!(survived, 0);
}
