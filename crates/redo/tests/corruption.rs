//! Damage in the middle of the durable log is an error, never the end of
//! the log; a torn tail still is the end (docs/design.md, "Faults: what
//! the engine does when storage fails").

mod common;

use common::{check_payload, config, cpu, open, payload};
use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_redo::format::{unsynced_window_bytes, DATA_OFFSET};
use millrace_redo::{Durability, Log, LogError, WriterThreads};

const CAPACITY: u64 = 256 << 10;

/// Creates a log and commits `n` records of 500 bytes; returns their
/// (start, end) LSNs.
fn committed(s: &SimStorage, n: u32) -> Vec<(u64, u64)> {
    let cfg = config(CAPACITY, WriterThreads::Off, Durability::Flush);
    let log = Log::create(s, cfg, cpu(), &Registry::new()).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let r = log.append(&payload(1, i, 500)).unwrap();
        log.close(r);
        log.wait_durable(r.end).unwrap();
        out.push((r.start, r.end));
    }
    // Leave without a clean shutdown's checkpoint: the records must be
    // found by the recovery scan.
    std::mem::forget(log);
    out
}

fn flip_byte(s: &SimStorage, lsn: u64) {
    let at = DATA_OFFSET + lsn % CAPACITY;
    let name = config(CAPACITY, WriterThreads::Off, Durability::Flush).file_name;
    let old = s.durable_bytes(&name).unwrap()[at as usize];
    s.corrupt(&name, at, &[old ^ 0x5a]);
}

#[test]
fn damage_in_the_middle_of_the_durable_log_refuses_to_open() {
    let s = SimStorage::new();
    let recs = committed(&s, 200);
    let window = unsynced_window_bytes(CAPACITY);
    assert!(
        recs[199].1 - recs[10].1 > window,
        "records must span more than the window"
    );
    // A payload byte of record 10: its checksum fails, the 189 acknowledged
    // records after it are intact.
    flip_byte(&s, recs[10].0 + 100);
    let img = s.durable_image();
    let cfg = config(CAPACITY, WriterThreads::Off, Durability::Flush);
    match open(&img, cfg.clone()) {
        Err(LogError::Corrupt(m)) => assert!(m.contains("middle"), "{m}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok((_, report, got)) => panic!(
            "opened with {} of 200 acknowledged records ({}): later commits silently dropped",
            got.len(),
            report.stop_reason
        ),
    }
    // Refusing changed nothing: a second try refuses again.
    assert!(matches!(open(&img, cfg), Err(LogError::Corrupt(_))));
}

#[test]
fn damage_in_the_header_in_the_middle_refuses_to_open() {
    let s = SimStorage::new();
    let recs = committed(&s, 200);
    flip_byte(&s, recs[20].0 + 9); // the LSN field of record 20's header
    let cfg = config(CAPACITY, WriterThreads::Off, Durability::Flush);
    assert!(matches!(
        open(&s.durable_image(), cfg),
        Err(LogError::Corrupt(_))
    ));
}

#[test]
fn a_damaged_last_record_is_a_torn_tail() {
    let s = SimStorage::new();
    let recs = committed(&s, 200);
    flip_byte(&s, recs[199].0 + 100);
    let cfg = config(CAPACITY, WriterThreads::Off, Durability::Flush);
    let (_log, report, got) = open(&s.durable_image(), cfg).expect("a torn tail opens");
    assert_eq!(report.end_lsn, recs[199].0, "{}", report.stop_reason);
    assert_eq!(got.len(), 199);
    assert!(got.iter().all(|r| check_payload(&r.payload).is_some()));
}

#[test]
fn damage_within_the_unsynced_window_of_the_end_is_a_torn_tail() {
    // Records after the damage but within the window could be unsynced
    // writes that a crash kept while it dropped an earlier one.
    let s = SimStorage::new();
    let recs = committed(&s, 200);
    let window = unsynced_window_bytes(CAPACITY);
    let i = recs
        .iter()
        .position(|r| r.1 + window > recs[199].1)
        .unwrap();
    flip_byte(&s, recs[i].0 + 100);
    let cfg = config(CAPACITY, WriterThreads::Off, Durability::Flush);
    let (_log, report, got) = open(&s.durable_image(), cfg).expect("opens");
    assert_eq!(got.len(), i);
    assert_eq!(report.end_lsn, recs[i].0);
}
