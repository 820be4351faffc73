//! The page store: round trips, recovery, a pool far smaller than the data,
//! torn pages, and crash images at every Nth write of a workload that
//! commits mini-transactions across many pages while flushing and
//! checkpointing (and crashing again during recovery).

use millrace_buf::{page_type, space, LatchMode, PageId, PageStore, StoreConfig};
use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use std::sync::Arc;

const SPACE: u32 = 1;
const PAGES: u32 = 48;
const VALUE_AT: usize = 100;
/// The pattern lives in another 512-byte sector than the page header, so a
/// torn page write can leave a page half old, half new.
const PATTERN_AT: usize = 3500;

fn cfg(pool_pages: usize) -> StoreConfig {
    let mut c = StoreConfig::default();
    c.buf.page_size = 4096;
    c.buf.pool_bytes = pool_pages * 4096;
    c.buf.doublewrite_pages = 8;
    c.buf.flush_batch_pages = 8;
    c.buf.frame_wait_timeout_ms = 2000;
    c.log = LogConfig {
        capacity_bytes: 256 << 10,
        buffer_bytes: 64 << 10,
        writer_threads: WriterThreads::Off,
        durability: Durability::Flush,
        write_chunk_bytes: 16 << 10,
        ..LogConfig::default()
    };
    c.cleaner = false;
    c
}

fn open(s: &SimStorage, c: StoreConfig) -> Arc<PageStore> {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    PageStore::open(storage, c, cpu, &Registry::new())
        .expect("open")
        .0
}

/// Creates space 1 with PAGES data pages (1..=PAGES), all value 0.
fn setup(store: &PageStore) {
    let mut mtr = store.mtr().unwrap();
    space::create_space(&mut mtr, SPACE).unwrap();
    mtr.commit().unwrap();
    for _ in 0..PAGES / 8 {
        let mut mtr = store.mtr().unwrap();
        for _ in 0..8 {
            space::allocate_page(&mut mtr, SPACE, page_type::OTHER).unwrap();
        }
        let end = mtr.commit().unwrap().unwrap();
        store.log().wait_flushed(end).unwrap();
    }
}

/// An mtr that latches more pages than the pool has frames gets a clear
/// error in bounded time, not a hang.
#[test]
fn latching_more_pages_than_frames_is_an_error_not_a_hang() {
    let s = SimStorage::new();
    let store = open(&s, cfg(16));
    setup(&store);
    let mut mtr = store.mtr().unwrap();
    let mut err = None;
    for p in 1..=PAGES {
        if let Err(e) = mtr.get(PageId::new(SPACE, p), LatchMode::Shared) {
            err = Some(e);
            break;
        }
    }
    assert!(
        matches!(err, Some(millrace_buf::Error::PoolExhausted(_))),
        "{err:?}"
    );
    drop(mtr);
    // The pool works again once the latches are released.
    assert_eq!(read_value(&store, PAGES).0, 0);
}

fn read_value(store: &PageStore, page: u32) -> (u64, Vec<u8>) {
    let mut mtr = store.mtr().unwrap();
    let r = mtr
        .get(PageId::new(SPACE, page), LatchMode::Shared)
        .unwrap();
    let p = mtr.page(r);
    let v = u64::from_le_bytes(p[VALUE_AT..VALUE_AT + 8].try_into().unwrap());
    (v, p[PATTERN_AT..PATTERN_AT + 200].to_vec())
}

/// The bytes mtr `i` writes after its value on a page: derived from both,
/// so a page holding half of an mtr's change is caught.
fn pattern(i: u64, page: u32) -> Vec<u8> {
    let mut r = SplitMix64::new(i * 1_000_003 + page as u64);
    let mut b = vec![0u8; 200];
    r.fill(&mut b);
    b
}

/// mtr i (i >= 1) writes value i and its pattern to a seeded set of pages.
fn pages_of(i: u64) -> Vec<u32> {
    let mut r = SplitMix64::new(i);
    let n = 1 + r.below(6) as usize;
    let mut v: Vec<u32> = (0..n).map(|_| 1 + r.below(PAGES as u64) as u32).collect();
    v.sort();
    v.dedup();
    v
}

/// Runs mtr i and waits for it as the log's durability level says.
fn run_mtr(store: &PageStore, i: u64) -> Result<u64, millrace_buf::Error> {
    let mut mtr = store.mtr()?;
    for p in pages_of(i) {
        let r = mtr.get(PageId::new(SPACE, p), LatchMode::Exclusive)?;
        mtr.write(r, VALUE_AT, &i.to_le_bytes());
        mtr.write(r, PATTERN_AT, &pattern(i, p));
    }
    let end = mtr.commit()?.expect("changed pages");
    store
        .log()
        .wait_durable(end)
        .map_err(millrace_buf::Error::Log)?;
    Ok(end)
}

/// The model: the value of every page after mtrs 1..=k.
fn model(k: u64) -> Vec<u64> {
    let mut v = vec![0u64; PAGES as usize + 1];
    for i in 1..=k {
        for p in pages_of(i) {
            v[p as usize] = i;
        }
    }
    v
}

/// Checks the store holds exactly the state after some prefix 1..=k with
/// k >= acked, and returns k.
fn verify_prefix(store: &PageStore, acked: u64, what: &str) -> u64 {
    let got: Vec<(u64, Vec<u8>)> = (0..=PAGES)
        .map(|p| {
            if p == 0 {
                (0, vec![])
            } else {
                read_value(store, p)
            }
        })
        .collect();
    let k = got.iter().map(|g| g.0).max().unwrap();
    assert!(
        k >= acked,
        "{what}: acknowledged mtr {acked} lost (recovered up to {k})"
    );
    let m = model(k);
    for p in 1..=PAGES {
        assert_eq!(
            got[p as usize].0, m[p as usize],
            "{what}: page {p} is not at the state after mtr {k}"
        );
        if m[p as usize] > 0 {
            assert_eq!(
                got[p as usize].1,
                pattern(m[p as usize], p),
                "{what}: page {p} half-changed"
            );
        }
    }
    k
}

#[test]
fn committed_changes_survive_clean_restart_and_crash() {
    let s = SimStorage::new();
    let store = open(&s, cfg(64));
    setup(&store);
    for i in 1..=200 {
        run_mtr(&store, i).unwrap();
        if i % 20 == 0 {
            store.clean_once().unwrap();
        }
    }
    // Crash without flushing: everything comes back from the redo log.
    let img = s.durable_image();
    let store2 = open(&img, cfg(64));
    assert_eq!(verify_prefix(&store2, 200, "crash"), 200);
    store2.shutdown().unwrap();
    // Clean shutdown of the original, reopen.
    store.shutdown().unwrap();
    drop(store);
    let store3 = open(&s.clean_image(), cfg(64));
    assert_eq!(verify_prefix(&store3, 200, "clean"), 200);
}

#[test]
fn data_larger_than_the_pool_is_read_back() {
    let s = SimStorage::new();
    // 16 frames for 48 pages: every pass evicts and rereads.
    let store = open(&s, cfg(16));
    setup(&store);
    for i in 1..=300 {
        run_mtr(&store, i).unwrap();
        if i % 10 == 0 {
            store.clean_once().unwrap();
        }
    }
    verify_prefix(&store, 300, "small pool");
    let reg = Registry::new();
    let _ = reg;
    store.shutdown().unwrap();
    let store = open(&s.clean_image(), cfg(16));
    verify_prefix(&store, 300, "small pool reopened");
}

#[test]
fn crash_images_at_every_nth_write_recover_a_committed_prefix() {
    let mut total_writes = 0;
    for n in (1..400).step_by(3) {
        let s = SimStorage::new();
        let store = open(&s, cfg(16));
        setup(&store);
        store.checkpoint_now().unwrap();
        // Level 2: commits are not flushed, so pages evicted or cleaned
        // before the log is flushed test the write-ahead rule. An mtr is
        // acknowledged when an explicit flush covers it.
        store.log().set_durability(Durability::Write);
        s.crash_after_writes(Some(n));
        let mut acked = 0;
        for i in 1..=120u64 {
            let Ok(end) = run_mtr(&store, i) else { break };
            if i % 5 == 0 {
                if store.log().wait_flushed(end).is_err() {
                    break;
                }
                acked = i;
            }
            let r = if i % 7 == 0 {
                store.clean_once().map(|_| ())
            } else {
                Ok(())
            };
            let r = r.and_then(|_| {
                if i % 40 == 0 {
                    store.checkpoint_now()
                } else {
                    Ok(())
                }
            });
            if r.is_err() {
                break;
            }
        }
        total_writes = total_writes.max(s.writes());
        drop(store);
        for seed in 0..2u64 {
            let img = s.crash_image(n * 10 + seed);
            // Crash recovery itself once, then recover for real.
            let again = img.clean_image();
            again.crash_after_writes(Some(seed + 1));
            let storage: Arc<dyn Storage> = Arc::new(again.clone());
            let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
            let _ = PageStore::open(storage, cfg(16), cpu, &Registry::new()).map(|(st, _)| {
                let _ = st.checkpoint_now();
            });
            let img2 = again.crash_image(seed + 99);
            let store = open(&img2, cfg(16));
            verify_prefix(&store, acked, &format!("crash at write {n}, seed {seed}"));
        }
    }
    assert!(
        total_writes > 100,
        "the workload wrote too little to test anything ({total_writes})"
    );
}

/// A log far smaller than the redo written: writers wait for room and the
/// page cleaner, woken by them, flushes and checkpoints until they can go on.
#[test]
fn a_full_log_waits_for_the_cleaner() {
    let s = SimStorage::new();
    let mut c = cfg(32);
    c.log.capacity_bytes = 64 << 10;
    c.log.buffer_bytes = 32 << 10;
    c.cleaner = true;
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let registry = Registry::new();
    let store = PageStore::open(storage, c.clone(), cpu, &registry)
        .unwrap()
        .0;
    setup(&store);
    store.log().set_durability(Durability::Lazy);
    for i in 1..=3000 {
        run_mtr(&store, i).unwrap();
    }
    let written = store.log().current_lsn();
    assert!(
        written > 30 * (64 << 10),
        "the log should have cycled many times: {written}"
    );
    assert!(registry.get("log_checkpoints").unwrap() > 20);
    verify_prefix(&store, 3000, "after cycling the log");
    store.shutdown().unwrap();
    drop(store);
    let store = open(&s.durable_image(), c);
    verify_prefix(&store, 3000, "reopened");
}

/// Midpoint insertion: pages read by a one-pass scan enter the old sublist
/// and leave first, so the hot set (touched again later) stays resident.
#[test]
fn a_scan_does_not_wash_out_the_hot_set() {
    let s = SimStorage::new();
    let mut c = cfg(64);
    c.buf.old_blocks_time_ms = 50;
    c.cleaner = true;
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    let registry = Registry::new();
    let store = PageStore::open(storage, c, cpu, &registry).unwrap().0;
    // 200 pages: three times the pool.
    let mut mtr = store.mtr().unwrap();
    space::create_space(&mut mtr, SPACE).unwrap();
    mtr.commit().unwrap();
    for _ in 0..25 {
        let mut mtr = store.mtr().unwrap();
        for _ in 0..8 {
            space::allocate_page(&mut mtr, SPACE, page_type::OTHER).unwrap();
        }
        mtr.commit().unwrap();
    }
    store.checkpoint_now().unwrap();
    let touch = |p: u32| {
        let mut mtr = store.mtr().unwrap();
        mtr.get(PageId::new(SPACE, p), LatchMode::Shared).unwrap();
    };
    // The hot set: read, then touched again after old_blocks_time, which
    // makes it young.
    let hot: Vec<u32> = (1..=16).collect();
    for &p in &hot {
        touch(p);
    }
    std::thread::sleep(std::time::Duration::from_millis(80));
    for &p in &hot {
        touch(p);
    }
    // A scan of twice the pool, of pages not resident (the last pages
    // allocated are), each touched once.
    for p in 17..=136 {
        touch(p);
    }
    let reads = registry.get("buffer_page_reads").unwrap();
    for &p in &hot {
        touch(p);
    }
    assert_eq!(
        registry.get("buffer_page_reads").unwrap(),
        reads,
        "the scan evicted hot pages"
    );
}

/// Changes made through `pages_mut` views, interleaved across three pages,
/// are each logged: a crash image (nothing flushed) recovers all of them.
#[test]
fn pages_mut_views_log_every_change() {
    let s = SimStorage::new();
    let store = open(&s, cfg(64));
    setup(&store);
    let mut mtr = store.mtr().unwrap();
    let refs = [1, 2, 3].map(|p| {
        mtr.get(PageId::new(SPACE, p), LatchMode::Exclusive)
            .unwrap()
    });
    let before_bytes = mtr.log_len();
    {
        let [mut a, mut b, mut c] = mtr.pages_mut(refs);
        a.write(VALUE_AT, &7u64.to_le_bytes());
        b.write(VALUE_AT, &8u64.to_le_bytes());
        c.write(PATTERN_AT, &pattern(9, 3));
        // memmove: page 3's value field takes its pattern's first 8 bytes.
        c.copy_within(PATTERN_AT, VALUE_AT, 8);
        a.write(PATTERN_AT, &pattern(7, 1));
        assert_eq!(b.bytes()[VALUE_AT], 8);
    }
    assert!(mtr.log_len() > before_bytes);
    assert!(refs.iter().all(|&r| mtr.is_modified(r)));
    let end = mtr.commit().unwrap().unwrap();
    store.log().wait_flushed(end).unwrap();
    let img = s.durable_image();
    let store2 = open(&img, cfg(64));
    assert_eq!(read_value(&store2, 1), (7, pattern(7, 1)));
    assert_eq!(read_value(&store2, 2).0, 8);
    let p9 = pattern(9, 3);
    let (v3, pat3) = read_value(&store2, 3);
    assert_eq!(v3.to_le_bytes(), p9[..8]);
    assert_eq!(pat3, p9);
    store2.shutdown().unwrap();
}

/// Two views of one page would alias: `pages_mut` refuses them.
#[test]
#[should_panic(expected = "asked for twice")]
fn pages_mut_refuses_the_same_page_twice() {
    let s = SimStorage::new();
    let store = open(&s, cfg(64));
    setup(&store);
    let mut mtr = store.mtr().unwrap();
    let a = mtr
        .get(PageId::new(SPACE, 1), LatchMode::Exclusive)
        .unwrap();
    let b = mtr
        .get(PageId::new(SPACE, 1), LatchMode::Exclusive)
        .unwrap();
    let _ = mtr.pages_mut([a, b]);
}

/// A view is for changing: a page held S cannot be had through `pages_mut`.
#[test]
#[should_panic(expected = "without an X latch")]
fn pages_mut_refuses_a_shared_page() {
    let s = SimStorage::new();
    let store = open(&s, cfg(64));
    setup(&store);
    let mut mtr = store.mtr().unwrap();
    let a = mtr
        .get(PageId::new(SPACE, 1), LatchMode::Exclusive)
        .unwrap();
    let b = mtr.get(PageId::new(SPACE, 2), LatchMode::Shared).unwrap();
    let _ = mtr.pages_mut([a, b]);
}
