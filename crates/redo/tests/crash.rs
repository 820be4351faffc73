//! Crash-image tests: concurrent committers on the simulated backend, a crash
//! at the Nth write for many N and seeds, in both writer modes. After
//! recovery from the crash image (unsynced writes dropped, reordered or
//! torn), every commit that returned at level 1 is there, nothing after the
//! first invalid record was applied, and LSNs are contiguous. Recovery is
//! itself crashed and retried.

mod common;
use common::*;
use millrace_io::SimStorage;
use millrace_metrics::Registry;
use millrace_redo::{Durability, Log, LogConfig, WriterThreads};
use millrace_sys::rng::SplitMix64;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

const THREADS: u32 = 4;
const PER_THREAD: u32 = 40;

/// An acknowledged commit: (thread, seq) ended at `end`.
#[derive(Debug, Clone, Copy)]
struct Acked {
    thread: u32,
    seq: u32,
    start: u64,
}

/// Runs the workload until it finishes or the storage crashes; returns the
/// commits acknowledged at level 1.
fn workload(s: &SimStorage, cfg: &LogConfig, seed: u64, crash_after: u64) -> Vec<Acked> {
    let log = Arc::new(Log::create(s, cfg.clone(), cpu(), &Registry::new()).expect("create"));
    s.crash_after_writes(Some(crash_after));
    let done = Arc::new(AtomicBool::new(false));
    // The checkpointer stands in for the page cleaner.
    let cp = {
        let (log, done) = (log.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if log.current_lsn() - log.checkpoint_lsn() > log.capacity_bytes() / 2 {
                    let lsn = log.closed_lsn();
                    if log.checkpoint(lsn).is_err() {
                        return;
                    }
                }
                thread::yield_now();
            }
        })
    };
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = log.clone();
            thread::spawn(move || {
                let mut rng = SplitMix64::new(seed ^ (t as u64) << 40);
                let mut acked = Vec::new();
                for seq in 0..PER_THREAD {
                    let len = 12 + rng.below(600) as usize;
                    match log.commit(&payload(t, seq, len)) {
                        Ok(end) => acked.push(Acked {
                            thread: t,
                            seq,
                            start: end - 24 - len as u64,
                        }),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    let acked: Vec<Acked> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    done.store(true, Ordering::SeqCst);
    cp.join().unwrap();
    // Whatever is still in flight fails or finishes; the image is taken from
    // the storage's state at the crash either way.
    let _ = log.shutdown();
    acked
}

fn verify(img: &SimStorage, cfg: &LogConfig, acked: &[Acked], what: &str) {
    let (log, report, recs) = open(img, cfg.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_contiguous(&report, &recs);
    let mut found: HashMap<(u32, u32), u64> = HashMap::new();
    let mut last_seq: HashMap<u32, u32> = HashMap::new();
    for r in &recs {
        let id = check_payload(&r.payload)
            .unwrap_or_else(|| panic!("{what}: damaged record applied at {}", r.start));
        if let Some(prev) = last_seq.insert(id.0, id.1) {
            assert!(id.1 > prev, "{what}: thread {} went back", id.0);
        }
        found.insert(id, r.start);
    }
    for a in acked {
        if a.start < report.checkpoint_lsn {
            continue; // before the checkpoint: its pages are on disk.
        }
        assert_eq!(
            found.get(&(a.thread, a.seq)),
            Some(&a.start),
            "{what}: acknowledged commit {:?} lost; recovery stopped: {}",
            a,
            report.stop_reason
        );
    }
    drop(log);
}

fn run(mode: WriterThreads, crash_points: impl Iterator<Item = u64>, seeds: u64) {
    let mut cfg = config(64 << 10, mode, Durability::Flush);
    cfg.recent_closed_bytes = 64;
    let mut writes_seen = 0;
    for n in crash_points {
        let s = SimStorage::new();
        let acked = workload(&s, &cfg, n, n);
        writes_seen = writes_seen.max(s.writes());
        for seed in 0..seeds {
            let img = s.crash_image(seed * 1000 + n);
            verify(
                &img.clean_image(),
                &cfg,
                &acked,
                &format!("{mode} crash at write {n} seed {seed}"),
            );
            // Crash again during recovery (its epoch-start write and sync),
            // then recover from that.
            for k in 0..2 {
                let again = img.clean_image();
                again.crash_after_writes(Some(k));
                let _ = open(&again, cfg.clone());
                let img2 = again.crash_image(seed + 7);
                verify(
                    &img2,
                    &cfg,
                    &acked,
                    &format!("{mode} crash at {n}, again at {k}, seed {seed}"),
                );
            }
        }
    }
    assert!(
        writes_seen > 20,
        "the workload did too few writes to test anything"
    );
}

#[test]
fn crash_at_every_nth_write_leader_mode() {
    run(WriterThreads::Off, 1..120, 2);
}

#[test]
fn crash_at_every_nth_write_dedicated_threads() {
    run(WriterThreads::On, 1..120, 2);
}

#[test]
fn crash_after_the_workload_ends() {
    for mode in [WriterThreads::On, WriterThreads::Off] {
        run(mode, [100_000u64].into_iter(), 8);
    }
}
