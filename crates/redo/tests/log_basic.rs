//! The log on its own: round trips through recovery, checkpoints, levels,
//! both writer modes, epochs, failures and hostile files.

mod common;
use common::*;
use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::{Durability, Log, LogConfig, LogError, WriterThreads};
use std::sync::Arc;
use std::thread;

const MODES: [WriterThreads; 2] = [WriterThreads::On, WriterThreads::Off];

fn create(s: &SimStorage, cfg: LogConfig) -> Log {
    Log::create(s, cfg, cpu(), &Registry::new()).expect("create")
}

#[test]
fn records_come_back_in_order_after_clean_shutdown() {
    for mode in MODES {
        let s = SimStorage::new();
        let cfg = config(1 << 20, mode, Durability::Flush);
        let log = create(&s, cfg.clone());
        let mut ends = Vec::new();
        for seq in 0..200 {
            ends.push(
                log.commit(&payload(0, seq, 12 + seq as usize % 300))
                    .unwrap(),
            );
        }
        assert!(log.flushed_lsn() >= *ends.last().unwrap());
        log.shutdown().unwrap();
        let (log2, report, recs) = open(&s.clean_image(), cfg).unwrap();
        assert_eq!(recs.len(), 200);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(check_payload(&r.payload), Some((0, i as u32)));
            assert_eq!(r.end, ends[i]);
        }
        assert_contiguous(&report, &recs);
        assert_eq!(report.new_epoch, log2.epoch());
        assert_eq!(log2.epoch(), 2, "create is epoch 1, the reopen 2");
    }
}

#[test]
fn checkpoint_bounds_recovery_and_space_is_reused() {
    for mode in MODES {
        let s = SimStorage::new();
        // 64 KiB of log, 600 KiB of records: wraps ~10 times.
        let cfg = config(64 << 10, mode, Durability::Flush);
        let log = create(&s, cfg.clone());
        let mut last_cp = 0;
        for seq in 0..2000u32 {
            if log.current_lsn() - log.checkpoint_lsn() > 32 << 10 {
                let lsn = log.closed_lsn();
                log.checkpoint(lsn).unwrap();
                last_cp = lsn;
            }
            log.commit(&payload(1, seq, 300)).unwrap();
        }
        assert!(log.checkpoint_lsn() == last_cp && last_cp > 500 << 10);
        log.shutdown().unwrap();
        let (_l, report, recs) = open(&s.durable_image(), cfg).unwrap();
        assert_eq!(report.checkpoint_lsn, last_cp);
        assert_contiguous(&report, &recs);
        let seqs: Vec<u32> = recs
            .iter()
            .map(|r| check_payload(&r.payload).unwrap().1)
            .collect();
        assert!(!seqs.is_empty());
        assert_eq!(*seqs.last().unwrap(), 1999);
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
    }
}

#[test]
fn log_full_waits_for_a_checkpoint_and_wakes() {
    let s = SimStorage::new();
    let cfg = config(64 << 10, WriterThreads::Off, Durability::Flush);
    let log = Arc::new(create(&s, cfg));
    // Fill the log without checkpointing, in a thread that will block.
    let l2 = log.clone();
    let h = thread::spawn(move || {
        for seq in 0..400u32 {
            l2.commit(&payload(2, seq, 500)).unwrap();
        }
    });
    // Wait until the writer is stuck on a full log, then free it.
    while log.current_lsn() - log.checkpoint_lsn() < 60 << 10 {
        thread::yield_now();
    }
    while !h.is_finished() {
        let lsn = log.closed_lsn();
        if lsn > log.checkpoint_lsn() {
            log.checkpoint(lsn).unwrap();
        }
        thread::yield_now();
    }
    h.join().unwrap();
}

#[test]
fn durability_levels_switch_while_committing() {
    for mode in MODES {
        let s = SimStorage::new();
        let cfg = config(1 << 20, mode, Durability::Flush);
        let log = Arc::new(create(&s, cfg));
        let mut hs = Vec::new();
        for t in 0..4u32 {
            let log = log.clone();
            hs.push(thread::spawn(move || {
                for seq in 0..300u32 {
                    let level = log.durability();
                    let end = log.commit(&payload(t, seq, 40)).unwrap();
                    match level {
                        // The level may change between reading it and
                        // waiting; only a stricter promise is checked.
                        Durability::Flush | Durability::Write | Durability::Lazy => {
                            assert!(log.current_lsn() >= end)
                        }
                    }
                }
            }));
        }
        for level in [
            Durability::Write,
            Durability::Lazy,
            Durability::Flush,
            Durability::Write,
        ] {
            thread::sleep(std::time::Duration::from_millis(5));
            log.set_durability(level);
        }
        log.set_durability(Durability::Flush);
        for h in hs {
            h.join().unwrap();
        }
        // At level 1 a commit returns only when flushed.
        let end = log.commit(&payload(9, 0, 20)).unwrap();
        assert!(log.flushed_lsn() >= end);
        log.set_durability(Durability::Write);
        let end = log.commit(&payload(9, 1, 20)).unwrap();
        assert!(log.write_lsn() >= end);
    }
}

#[test]
fn level_zero_and_two_are_flushed_in_the_background() {
    for mode in MODES {
        let s = SimStorage::new();
        let log = create(&s, config(1 << 20, mode, Durability::Lazy));
        let end = log.commit(&payload(0, 0, 100)).unwrap();
        let t0 = std::time::Instant::now();
        while log.flushed_lsn() < end {
            assert!(t0.elapsed().as_secs() < 5, "background flush never came");
            thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[test]
fn many_threads_commit_in_both_modes_and_all_records_recover() {
    for mode in MODES {
        let s = SimStorage::new();
        let cfg = config(4 << 20, mode, Durability::Flush);
        let log = Arc::new(create(&s, cfg.clone()));
        let threads = 16u32;
        let per = 250u32;
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let log = log.clone();
                thread::spawn(move || {
                    for seq in 0..per {
                        let end = log
                            .commit(&payload(t, seq, 12 + (seq as usize * 7) % 200))
                            .unwrap();
                        assert!(log.flushed_lsn() >= end);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        log.shutdown().unwrap();
        let (_l, report, recs) = open(&s.durable_image(), cfg).unwrap();
        assert_contiguous(&report, &recs);
        let mut seen = std::collections::HashSet::new();
        for r in &recs {
            assert!(seen.insert(check_payload(&r.payload).expect("intact")));
        }
        assert_eq!(seen.len(), (threads * per) as usize);
    }
}

/// Bytes left after the recovered end from before a crash must never be read
/// as new records: the epoch start record makes them stale.
#[test]
fn stale_records_after_a_hole_are_not_revived() {
    let s = SimStorage::new();
    let mut cfg = config(1 << 20, WriterThreads::Off, Durability::Flush);
    cfg.buffer_bytes = 64 << 10;
    let log = create(&s, cfg.clone());
    let a_end = log.commit(&payload(0, 0, 100)).unwrap();
    log.set_durability(Durability::Write);
    // The writer zero-pads the rest of the block after the last record, so
    // stale bytes can only survive from a block boundary on: B ends on one.
    let b_len = (4096 - a_end % 4096) as usize - 24;
    let b_end = log.commit(&payload(0, 1, b_len)).unwrap();
    assert_eq!(b_end % 4096, 0);
    let c_end = log.commit(&payload(0, 2, 50)).unwrap();
    assert!(log.write_lsn() >= c_end);
    // Power loss in which B's header is lost but C survived.
    let img = s.clean_image();
    drop(log);
    let b_start = a_end;
    img.corrupt(&cfg.file_name, 3 * 4096 + b_start, &[0u8; 24]);
    let (log, report, recs) = open(&img, cfg.clone()).unwrap();
    assert_eq!(report.end_lsn, b_start);
    assert_eq!(recs.len(), 1);
    // New epoch record (24 bytes) + D end exactly where C starts.
    let d_len = (b_end - b_start) as usize - 24 - 24;
    let d_end = log.commit(&payload(1, 0, d_len)).unwrap();
    assert_eq!(d_end, b_end, "D must end where the stale C begins");
    log.shutdown().unwrap();
    let (_l, report, recs) = open(&img.durable_image(), cfg).unwrap();
    let ids: Vec<_> = recs
        .iter()
        .map(|r| check_payload(&r.payload).unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![(0, 0), (1, 0)],
        "stale C revived: {}",
        report.stop_reason
    );
    assert!(
        report.stop_reason.contains("epoch"),
        "{}",
        report.stop_reason
    );
}

#[test]
fn fsync_failure_stops_the_log_with_errors() {
    for mode in MODES {
        let s = SimStorage::new();
        let log = create(&s, config(1 << 20, mode, Durability::Flush));
        log.commit(&payload(0, 0, 20)).unwrap();
        s.fail_next_sync();
        let e = log.commit(&payload(0, 1, 20)).unwrap_err();
        assert!(matches!(e, LogError::Io(_) | LogError::Failed(_)), "{e:?}");
        let e = log.commit(&payload(0, 2, 20)).unwrap_err();
        assert!(matches!(e, LogError::Failed(_)), "{e:?}");
        assert!(log.failure().is_some());
    }
}

#[test]
fn oversized_records_and_bad_configs_are_refused() {
    let s = SimStorage::new();
    let log = create(&s, config(1 << 20, WriterThreads::Off, Durability::Flush));
    let max = log.max_payload_bytes() as usize;
    assert!(matches!(
        log.append(&vec![0u8; max + 1]),
        Err(LogError::TooLarge { .. })
    ));
    log.commit(&vec![7u8; max]).unwrap();
    let mut bad = config(1 << 20, WriterThreads::Off, Durability::Flush);
    bad.buffer_bytes = 10_000;
    assert!(matches!(
        Log::create(&SimStorage::new(), bad, cpu(), &Registry::new()),
        Err(LogError::Config(_))
    ));
    assert!(matches!(
        Log::create(
            &s,
            config(1 << 20, WriterThreads::Off, Durability::Flush),
            cpu(),
            &Registry::new()
        ),
        Err(LogError::Config(_))
    ));
}

#[test]
fn corrupt_headers_give_errors_not_panics() {
    let s = SimStorage::new();
    let cfg = config(1 << 20, WriterThreads::Off, Durability::Flush);
    create(&s, cfg.clone()).shutdown().unwrap();
    let name = cfg.file_name.clone();
    let img = s.clean_image();
    img.corrupt(&name, 10, &[0xFF]);
    assert!(matches!(open(&img, cfg.clone()), Err(LogError::Corrupt(_))));
    let img = s.clean_image();
    img.corrupt(&name, 4096 + 20, &[0xFF]);
    img.corrupt(&name, 2 * 4096 + 20, &[0xFF]);
    assert!(matches!(open(&img, cfg.clone()), Err(LogError::Corrupt(_))));
    // A bad newest checkpoint slot: the older one is used.
    let (log, _, _) = open(&s.clean_image(), cfg.clone()).unwrap();
    let first = log.checkpoint_lsn();
    log.commit(&payload(0, 0, 50)).unwrap();
    let cp = log.closed_lsn();
    log.checkpoint(cp).unwrap();
    log.shutdown().unwrap();
    drop(log);
    // That log lived on a clean image; rebuild it the same way and corrupt
    // slot 1 (checkpoint number 1).
    let s2 = SimStorage::new();
    let log = create(&s2, cfg.clone());
    log.commit(&payload(0, 0, 50)).unwrap();
    let cp = log.closed_lsn();
    log.checkpoint(cp).unwrap();
    log.shutdown().unwrap();
    let img = s2.clean_image();
    let (_l, report, recs) = open(&img, cfg.clone()).unwrap();
    assert_eq!(report.checkpoint_lsn, cp);
    assert!(recs.is_empty());
    img.corrupt(&name, 2 * 4096 + 20, &[0xFF]);
    let (_l, report, recs) = open(&img.clean_image(), cfg.clone()).unwrap();
    assert!(report.checkpoint_lsn < cp && report.checkpoint_lsn >= first.min(4096));
    assert_eq!(recs.len(), 1, "the older checkpoint replays the record");
    let img = SimStorage::new();
    img.open(&name, true)
        .unwrap()
        .write_all_at(b"short", 0)
        .unwrap();
    assert!(open(&img, cfg).is_err());
}

/// Random damage anywhere in the data region: opening never panics, and
/// whatever is recovered is an intact prefix of what was written.
#[test]
fn random_corruption_of_the_data_region_never_panics() {
    let s = SimStorage::new();
    let cfg = config(64 << 10, WriterThreads::Off, Durability::Flush);
    let log = create(&s, cfg.clone());
    for seq in 0..150u32 {
        log.commit(&payload(0, seq, 12 + (seq as usize * 13) % 300))
            .unwrap();
    }
    log.shutdown().unwrap();
    let mut rng = millrace_sys::rng::SplitMix64::new(5);
    let mut refused = 0;
    for _ in 0..300 {
        let img = s.clean_image();
        for _ in 0..1 + rng.below(4) {
            let off = 3 * 4096 + rng.below(64 << 10);
            let mut junk = vec![0u8; 1 + rng.below(64) as usize];
            rng.fill(&mut junk);
            img.corrupt(&cfg.file_name, off, &junk);
        }
        // Damage followed by durable records more than the unsynced window
        // later is refused (it is not a torn tail); anything else opens.
        let (_l, report, recs) = match open(&img, cfg.clone()) {
            Ok(opened) => opened,
            Err(millrace_redo::LogError::Corrupt(_)) => {
                refused += 1;
                continue;
            }
            Err(e) => panic!("unexpected error: {e}"),
        };
        assert_contiguous(&report, &recs);
        for (i, r) in recs.iter().enumerate() {
            let id = check_payload(&r.payload).expect("a recovered record is intact");
            if i > 0 {
                assert_eq!(id.1, check_payload(&recs[i - 1].payload).unwrap().1 + 1);
            }
        }
    }
    assert!(
        refused > 0,
        "damage in the middle of the log was never refused"
    );
}

/// With O_DIRECT every buffer address, offset and length must be a multiple
/// of 4096; the simulated disk enforces it, so every log I/O path (create,
/// write with wrap-around, checkpoint, recovery) is checked.
#[test]
fn all_log_io_is_aligned_for_direct_io() {
    for mode in MODES {
        let s = SimStorage::with_alignment(4096);
        let cfg = config(64 << 10, mode, Durability::Flush);
        let log = create(&s, cfg.clone());
        for seq in 0..600u32 {
            if log.current_lsn() - log.checkpoint_lsn() > 32 << 10 {
                log.checkpoint(log.closed_lsn()).unwrap();
            }
            log.commit(&payload(3, seq, 12 + (seq as usize * 31) % 500))
                .unwrap();
        }
        log.shutdown().unwrap();
        let (_l, report, recs) = open(&s.durable_image(), cfg).unwrap();
        assert_contiguous(&report, &recs);
        assert_eq!(check_payload(&recs.last().unwrap().payload), Some((3, 599)));
    }
}
