//! B+tree tests: seeded random operations against a BTreeMap (small pages
//! force many splits and merges; a pool far smaller than the data forces
//! evictions), many threads on overlapping key ranges, and crash images
//! taken while splits and merges are being written.

use millrace_btree::{Direction, Error, Index};
use millrace_buf::{space, PageStore, StoreConfig};
use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use std::collections::BTreeMap;
use std::sync::Arc;

fn cfg(pool_pages: usize, cleaner: bool) -> StoreConfig {
    let mut c = StoreConfig::default();
    c.buf.page_size = 4096;
    c.buf.pool_bytes = pool_pages * 4096;
    c.buf.doublewrite_pages = 16;
    c.buf.flush_batch_pages = 16;
    c.log = LogConfig {
        capacity_bytes: 4 << 20,
        buffer_bytes: 256 << 10,
        writer_threads: WriterThreads::Off,
        durability: Durability::Write,
        ..LogConfig::default()
    };
    c.cleaner = cleaner;
    c
}

fn open(s: &SimStorage, c: StoreConfig) -> Arc<PageStore> {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    PageStore::open(storage, c, cpu, &Registry::new())
        .expect("open")
        .0
}

fn new_index(store: &PageStore) -> Index {
    let mut mtr = store.mtr().unwrap();
    let id = space::next_space_id(&mut mtr).unwrap();
    assert_eq!(id, 1, "the first space id handed out");
    space::create_space(&mut mtr, id).unwrap();
    mtr.commit().unwrap();
    Index::create(store, 1, true).unwrap()
}

fn key(n: u64) -> Vec<u8> {
    // Big-endian: byte order is numeric order.
    format!("k{:012}", n).into_bytes()
}

fn value(rng: &mut SplitMix64, max: usize) -> Vec<u8> {
    let mut v = vec![0u8; rng.below(max as u64) as usize];
    rng.fill(&mut v);
    v
}

fn scan(
    idx: &Index,
    store: &PageStore,
    dir: Direction,
    from: Option<&[u8]>,
) -> Vec<(Vec<u8>, Vec<u8>, bool)> {
    let mut c = idx.cursor(from, dir);
    let mut out = Vec::new();
    while let Some(r) = c.next(store).unwrap() {
        out.push((r.key, r.value, r.deleted));
    }
    out
}

type Model = BTreeMap<Vec<u8>, (Vec<u8>, bool)>;
type ModelIter<'a> = Box<dyn Iterator<Item = (&'a Vec<u8>, &'a (Vec<u8>, bool))> + 'a>;

fn model_scan(m: &Model, dir: Direction, from: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>, bool)> {
    let it: ModelIter<'_> = match (dir, from) {
        (Direction::Forward, None) => Box::new(m.iter()),
        (Direction::Forward, Some(k)) => Box::new(m.range(k.to_vec()..)),
        (Direction::Backward, None) => Box::new(m.iter().rev()),
        (Direction::Backward, Some(k)) => Box::new(m.range(..=k.to_vec()).rev()),
    };
    it.map(|(k, (v, d))| (k.clone(), v.clone(), *d)).collect()
}

/// One random operation on both the index and the model.
fn step(
    idx: &Index,
    store: &PageStore,
    m: &mut Model,
    rng: &mut SplitMix64,
    key_space: u64,
    max_val: usize,
) {
    let k = key(rng.below(key_space));
    match rng.below(10) {
        0..=3 => {
            let v = value(rng, max_val);
            let r = idx.insert(store, &k, &v, 7, 9);
            match m.entry(k) {
                std::collections::btree_map::Entry::Occupied(_) => {
                    assert_eq!(r, Err(Error::Duplicate))
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    r.unwrap();
                    e.insert((v, false));
                }
            }
        }
        4..=5 => {
            let v = value(rng, max_val);
            let found = idx.update(store, &k, &v, 1, 2).unwrap();
            assert_eq!(found, m.contains_key(&k));
            if let Some(e) = m.get_mut(&k) {
                e.0 = v;
            }
        }
        6 => {
            let d = rng.chance(1, 2);
            let found = idx.set_deleted(store, &k, d, 3, 4).unwrap();
            assert_eq!(found, m.contains_key(&k));
            if let Some(e) = m.get_mut(&k) {
                e.1 = d;
            }
        }
        7..=8 => {
            let found = idx.delete(store, &k).unwrap();
            assert_eq!(found, m.remove(&k).is_some());
        }
        _ => {
            let got = idx.get(store, &k).unwrap().map(|r| (r.value, r.deleted));
            assert_eq!(got, m.get(&k).cloned());
        }
    }
}

fn model_test(seed: u64, pool_pages: usize, steps: usize) {
    let s = SimStorage::new();
    let store = open(&s, cfg(pool_pages, true));
    let idx = new_index(&store);
    let mut m = Model::new();
    let mut rng = SplitMix64::new(seed);
    // Phases: grow (splits), then shrink (merges), then mixed.
    for phase in 0..3 {
        for i in 0..steps {
            let key_space = 4000;
            let mut prng = SplitMix64::new(rng.next_u64());
            if phase == 1 && rng.chance(2, 3) {
                let k = key(prng.below(key_space));
                assert_eq!(idx.delete(&store, &k).unwrap(), m.remove(&k).is_some());
            } else {
                step(&idx, &store, &mut m, &mut prng, key_space, 300);
            }
            if i % 500 == 0 {
                idx.check(&store)
                    .unwrap_or_else(|e| panic!("seed {seed} phase {phase} step {i}: {e}"));
            }
        }
        let report = idx.check(&store).unwrap();
        assert_eq!(report.records as usize, m.len());
        assert_eq!(
            scan(&idx, &store, Direction::Forward, None),
            model_scan(&m, Direction::Forward, None)
        );
        assert_eq!(
            scan(&idx, &store, Direction::Backward, None),
            model_scan(&m, Direction::Backward, None)
        );
        for _ in 0..20 {
            let from = key(rng.below(4100));
            for dir in [Direction::Forward, Direction::Backward] {
                let a = scan(&idx, &store, dir, Some(&from));
                let b = model_scan(&m, dir, Some(&from));
                assert_eq!(
                    a,
                    b,
                    "seed {seed}: {dir:?} scan from {:?}",
                    String::from_utf8_lossy(&from)
                );
            }
        }
        if phase == 0 {
            assert!(report.levels >= 2, "the tree should have grown: {report:?}");
        }
    }
    // Everything survives a restart.
    store.shutdown().unwrap();
    drop(store);
    let store = open(&s.clean_image(), cfg(pool_pages, true));
    let idx = Index::open(idx.def());
    idx.check(&store).unwrap();
    assert_eq!(
        scan(&idx, &store, Direction::Forward, None),
        model_scan(&m, Direction::Forward, None)
    );
}

#[test]
fn random_operations_match_a_model() {
    for seed in 0..3 {
        model_test(seed, 1024, 4000);
    }
}

#[test]
fn random_operations_with_a_pool_far_smaller_than_the_data() {
    // 24 frames of 4 KiB for a tree of a few hundred pages.
    model_test(11, 24, 4000);
}

#[test]
fn deleting_everything_collapses_the_tree() {
    let s = SimStorage::new();
    let store = open(&s, cfg(256, true));
    let idx = new_index(&store);
    for n in 0..3000 {
        idx.insert(&store, &key(n), &[7u8; 100], 0, 0).unwrap();
    }
    assert!(idx.check(&store).unwrap().levels >= 2);
    for n in 0..3000 {
        assert!(idx.delete(&store, &key(n)).unwrap());
    }
    let r = idx.check(&store).unwrap();
    assert_eq!(r.records, 0);
    assert_eq!(r.pages, 1, "{r:?}");
    // The freed pages are reused.
    let mut mtr = store.mtr().unwrap();
    let (size, free) = space::space_size(&mut mtr, 1).unwrap();
    drop(mtr);
    assert!(free + 2 >= size - 1, "size {size} free {free}");
}

#[test]
fn ascending_inserts_fill_pages() {
    let s = SimStorage::new();
    let store = open(&s, cfg(256, true));
    let idx = new_index(&store);
    for n in 0..5000 {
        idx.insert(&store, &key(n), &[1u8; 60], 0, 0).unwrap();
    }
    let r = idx.check(&store).unwrap();
    assert!(
        r.fill_pct >= 80,
        "sequential inserts should leave pages full: {r:?}"
    );
}

#[test]
fn oversized_records_are_refused() {
    let s = SimStorage::new();
    let store = open(&s, cfg(64, true));
    let idx = new_index(&store);
    let max = idx.max_record_bytes(&store);
    assert!(matches!(
        idx.insert(&store, b"k", &vec![0u8; max], 0, 0),
        Err(Error::TooLarge { .. })
    ));
    idx.insert(&store, b"k", &vec![0u8; max - 1], 0, 0).unwrap();
}

/// Several threads on interleaved keys (so they share leaves) insert,
/// update and delete while a reader scans; the tree checks out and holds
/// exactly what the threads left.
#[test]
fn concurrent_writers_and_readers_on_shared_leaves() {
    let s = SimStorage::new();
    let store = open(&s, cfg(512, true));
    let idx = Arc::new(new_index(&store));
    let threads = 4u64;
    let per = 3000u64;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (idx, store, done) = (idx.clone(), store.clone(), done.clone());
        std::thread::spawn(move || {
            let mut scans = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let dir = if scans % 2 == 0 {
                    Direction::Forward
                } else {
                    Direction::Backward
                };
                let rows = scan(&idx, &store, dir, None);
                let mut keys: Vec<_> = rows.iter().map(|r| r.0.clone()).collect();
                if dir == Direction::Backward {
                    keys.reverse();
                }
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "scan out of order");
                scans += 1;
            }
            scans
        })
    };
    let writers: Vec<_> = (0..threads)
        .map(|t| {
            let (idx, store) = (idx.clone(), store.clone());
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(t);
                let mut mine = BTreeMap::new();
                for i in 0..per {
                    let n = (rng.below(per) * threads) + t;
                    let k = key(n);
                    match rng.below(4) {
                        0 | 1 => {
                            let v = value(&mut rng, 200);
                            match idx.insert(&store, &k, &v, t, i) {
                                Ok(()) => {
                                    mine.insert(k, v);
                                }
                                Err(Error::Duplicate) => assert!(mine.contains_key(&k)),
                                Err(e) => panic!("{e}"),
                            }
                        }
                        2 => {
                            let v = value(&mut rng, 400);
                            assert_eq!(
                                idx.update(&store, &k, &v, t, i).unwrap(),
                                mine.contains_key(&k)
                            );
                            if let Some(e) = mine.get_mut(&k) {
                                *e = v;
                            }
                        }
                        _ => assert_eq!(idx.delete(&store, &k).unwrap(), mine.remove(&k).is_some()),
                    }
                }
                mine
            })
        })
        .collect();
    let mut all = BTreeMap::new();
    for w in writers {
        all.extend(w.join().unwrap());
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);
    let report = idx.check(&store).unwrap();
    assert_eq!(report.records as usize, all.len());
    let rows = scan(&idx, &store, Direction::Forward, None);
    let got: BTreeMap<_, _> = rows.into_iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(got, all);
}

/// Crash images during a workload of splits and merges: after recovery the
/// tree checks out and holds exactly the state after some prefix of the
/// operations, at least every acknowledged one.
#[test]
fn crash_images_during_splits_and_merges() {
    let ops = 400usize;
    // The same operations every time, as (is_insert, key, value).
    let mut rng = SplitMix64::new(99);
    let plan: Vec<(bool, Vec<u8>, Vec<u8>)> = (0..ops)
        .map(|i| {
            let insert = i < 250 || rng.chance(1, 3);
            let k = key(rng.below(if i < 250 { 100_000 } else { 300 }) * 7 % 100_000);
            (insert, k, value(&mut rng, 400))
        })
        .collect();
    let model_after = |k: usize| {
        let mut m = BTreeMap::new();
        for (insert, key, val) in &plan[..k] {
            if *insert {
                m.entry(key.clone()).or_insert_with(|| val.clone());
            } else {
                m.remove(key);
            }
        }
        m
    };
    // Crash points spread over the run (each run's writes: a few hundred).
    let mut max_writes = 0;
    for n in (3..240).step_by(4) {
        let s = SimStorage::new();
        let store = open(&s, cfg(20, false));
        let idx = new_index(&store);
        store.checkpoint_now().unwrap();
        s.crash_after_writes(Some(n));
        let (mut acked, mut attempted) = (0, 0);
        for (i, (insert, k, v)) in plan.iter().enumerate() {
            attempted = i + 1;
            let r = if *insert {
                match idx.insert(&store, k, v, 0, 0) {
                    Err(Error::Duplicate) => Ok(()),
                    r => r,
                }
            } else {
                idx.delete(&store, k).map(|_| ())
            };
            if r.is_err() {
                break;
            }
            if i % 10 == 9 {
                if store.log().wait_flushed(store.log().current_lsn()).is_err() {
                    break;
                }
                acked = i + 1;
            }
            let flushed = if i % 40 == 39 {
                store.checkpoint_now()
            } else {
                Ok(())
            };
            if flushed.is_err() || (i % 25 == 24 && store.clean_once().is_err()) {
                break;
            }
        }
        max_writes = max_writes.max(s.writes());
        let def = idx.def();
        drop(store);
        for seed in 0..2 {
            let img = s.crash_image(seed + n);
            let store = open(&img, cfg(20, false));
            let idx = Index::open(def);
            idx.check(&store)
                .unwrap_or_else(|e| panic!("crash at write {n} seed {seed}: {e}"));
            let got: BTreeMap<_, _> = scan(&idx, &store, Direction::Forward, None)
                .into_iter()
                .map(|r| (r.0, r.1))
                .collect();
            let ok = (acked..=attempted).any(|k| model_after(k) == got);
            assert!(
                ok,
                "crash at write {n} seed {seed}: state is no prefix in {acked}..={attempted}"
            );
        }
    }
    assert!(
        max_writes > 150,
        "too few writes to test anything: {max_writes}"
    );
    eprintln!("crash test: up to {max_writes} writes per run");
}

/// The store-wide check finds every index and reads every page; a page
/// damaged on disk is reported as corruption, not a panic.
#[test]
fn check_store_finds_indexes_and_damaged_pages() {
    let s = SimStorage::new();
    let store = open(&s, cfg(64, true));
    let idx = new_index(&store);
    let idx2 = Index::create(&store, 1, false).unwrap();
    for n in 0..2000 {
        idx.insert(&store, &key(n), &[3u8; 80], 0, 0).unwrap();
        idx2.insert(&store, &key(n * 3), b"", 0, 0).unwrap();
    }
    let reports = millrace_btree::check_store(&store).unwrap();
    let sp = reports.iter().find(|r| r.space == 1).unwrap();
    assert_eq!(sp.indexes.len(), 2);
    assert_eq!(sp.indexes[0].2.records, 2000);
    store.shutdown().unwrap();
    drop(store);
    // Flip a byte in the middle of an index page on disk.
    let img = s.clean_image();
    img.corrupt("spaces/0000000001.mrs", 5 * 4096 + 2000, &[0x5A]);
    let store = open(&img, cfg(64, true));
    let err = millrace_btree::check_store(&store).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt(ref m) if m.contains("checksum")),
        "{err}"
    );
}

/// A page whose checksum is right but whose content is impossible (here:
/// a record count far beyond the page) is reported as corrupt on first
/// use, never decoded into a panic.
#[test]
fn impossible_page_content_with_a_valid_checksum_is_corrupt_not_a_panic() {
    let s = SimStorage::new();
    let store = open(&s, cfg(64, true));
    let idx = new_index(&store);
    for n in 0..500 {
        idx.insert(&store, &key(n), &[5u8; 100], 0, 0).unwrap();
    }
    let root = idx.def().root;
    store.shutdown().unwrap();
    drop(store);
    let img = s.clean_image();
    let name = "spaces/0000000001.mrs";
    let at = root as usize * 4096;
    let mut page = img.file_bytes(name).unwrap()[at..at + 4096].to_vec();
    page[34..36].copy_from_slice(&60_000u16.to_le_bytes());
    millrace_buf::page::seal(&mut page);
    img.corrupt(name, at as u64, &page);
    let store = open(&img, cfg(64, true));
    let idx = Index::open(idx.def());
    let e = idx.get(&store, &key(3)).unwrap_err();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
    assert!(millrace_btree::check_store(&store).is_err());
}
