//! Crash images with transactions in flight, while purge and rollback run.

mod common;
use common::*;
use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use millrace_trx::{Engine, Isolation, KeyPart};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

const KEYS: u64 = 60;

/// Transaction i: a seeded set of puts and deletes on keys 0..KEYS.
fn plan(i: u64) -> Vec<(u64, Option<Vec<u8>>)> {
    let mut r = SplitMix64::new(i * 7919);
    (0..1 + r.below(5))
        .map(|_| {
            let key = r.below(KEYS);
            if r.chance(1, 4) {
                (key, None)
            } else {
                (
                    key,
                    Some(format!("t{i:05}-{}", "y".repeat(r.below(200) as usize)).into_bytes()),
                )
            }
        })
        .collect()
}

/// Every 9th transaction rolls back instead of committing, so crashes also
/// fall inside rollbacks; it contributes nothing to the model.
fn rolls_back(i: u64) -> bool {
    i % 9 == 0
}

fn model(k_: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in (1..=k_).filter(|&i| !rolls_back(i)) {
        for (key, v) in plan(i) {
            match v {
                Some(v) => m.insert(k(key), v),
                None => m.remove(&k(key)),
            };
        }
    }
    m
}

fn try_open(s: &SimStorage) -> Result<Arc<Engine>, millrace_trx::TrxError> {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    Engine::open(
        storage,
        cfg(),
        CpuBudget::fixed(CpuSnapshot::unconstrained(2)),
        Registry::new(),
    )
}

#[test]
fn crash_images_keep_exactly_a_committed_prefix() {
    let mut max_writes = 0;
    for n in (5..480).step_by(7) {
        let s = SimStorage::new();
        let e = open(&s);
        let t = e
            .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 6 }]])
            .unwrap();
        e.store().checkpoint_now().unwrap();
        s.crash_after_writes(Some(n));
        // A transaction that never commits, on keys outside the model.
        let stray = e.begin(Isolation::RepeatableRead);
        let _ = stray.insert(t, &k(1000), b"never committed");
        let (mut acked, mut attempted) = (0, 0);
        for i in 1..=150u64 {
            attempted = i;
            let tx = e.begin(Isolation::RepeatableRead);
            let mut ok = true;
            for (key, v) in plan(i) {
                let r = match v {
                    Some(v) => tx.put(t, &k(key), &v),
                    None => tx.delete(t, &k(key)).map(|_| ()),
                };
                if r.is_err() {
                    ok = false;
                    break;
                }
            }
            if ok && rolls_back(i) {
                if tx.rollback().is_err() {
                    break;
                }
                acked = i;
                continue;
            }
            if !ok || tx.commit().is_err() {
                break;
            }
            acked = i;
            if i % 20 == 0 {
                let _ = stray.update(t, &k(1000), format!("stray {i}").as_bytes());
            }
            // Flush pages (undo pages included) and checkpoint now and then,
            // so crashes also fall inside page and doublewrite writes.
            if i % 25 == 0 && e.store().checkpoint_now().is_err() {
                break;
            }
        }
        max_writes = max_writes.max(s.writes());
        std::mem::forget(stray);
        drop(e);
        for seed in 0..2u64 {
            let img = s.crash_image(n * 3 + seed);
            // Crash during recovery (its rollback and first writes) too.
            let again = img.clean_image();
            again.crash_after_writes(Some(3 + seed * 5));
            if let Ok(e) = try_open(&again) {
                drop(e);
            }
            let img2 = again.crash_image(seed + 17);
            let e = try_open(&img2)
                .unwrap_or_else(|err| panic!("crash at write {n} seed {seed}: {err}"));
            let r = e.begin(Isolation::RepeatableRead);
            let got: BTreeMap<_, _> = r
                .scan(t, Bound::Unbounded, Bound::Unbounded, 10_000)
                .unwrap()
                .into_iter()
                .collect();
            let ok = (acked..=attempted).any(|k_| model(k_) == got);
            assert!(ok, "crash at write {n} seed {seed}: state is no committed prefix in {acked}..={attempted}");
            assert!(
                !got.contains_key(&k(1000)),
                "the uncommitted transaction survived"
            );
            // Secondary index agrees with the rows.
            for (pk, v) in &got {
                let hits = r.scan_secondary(t, 0, &v[..6], &v[..6], 1000).unwrap();
                assert!(
                    hits.iter().any(|(p, _)| p == pk),
                    "secondary entry missing for {pk:?}"
                );
            }
            r.commit().unwrap();
            let (ci, si) = e.index_defs(t).unwrap();
            millrace_btree::Index::open(ci).check(e.store()).unwrap();
            millrace_btree::Index::open(si[0]).check(e.store()).unwrap();
            drop(e);
        }
    }
    assert!(max_writes > 300, "too few writes: {max_writes}");
    eprintln!("up to {max_writes} writes per run");
}
