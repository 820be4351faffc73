//! Fuzz target `btree_page` (docs/design.md, "Fuzzing"): hostile bytes as an
//! index page. The buffer pool's checks (`page::verify`) and `node::validate`
//! must never panic; on a page `validate` accepts, every reader and writer of
//! `node` must not panic either, and the writers must leave a valid page.
//! `MILLRACE_FUZZ_SECS=300 cargo test -p millrace-btree --test fuzz -- --nocapture`
//! runs it longer.

use millrace_btree::node::{self, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use millrace_buf::page::{self as bufpage, page_type, PageId};
use millrace_sys::fuzz::{corpus_dir, fuzz_target, write_seeds};
use std::sync::atomic::{AtomicU64, Ordering};

/// Inputs that `validate` accepted: how deep the mutations reach.
static VALID: AtomicU64 = AtomicU64::new(0);

fn page_of(input: &[u8]) -> Vec<u8> {
    let size = if input.len().is_power_of_two()
        && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&input.len())
    {
        input.len()
    } else if input.len() <= MIN_PAGE_SIZE {
        MIN_PAGE_SIZE
    } else {
        4096
    };
    let mut page = input.to_vec();
    page.resize(size, 0);
    page
}

fn must_validate(page: &[u8], after: &str) {
    if let Err(e) = node::validate(page) {
        panic!("{after} made a valid page invalid: {e}");
    }
}

fn target(input: &[u8]) {
    let page = page_of(input);
    let _ = bufpage::verify(&page, PageId::new(0, 3));
    let _ = bufpage::page_type_of(&page);
    if node::validate(&page).is_err() {
        return;
    }
    VALID.fetch_add(1, Ordering::Relaxed);
    let h = node::header(&page);
    let n = h.n_recs as usize;
    let mut keys = Vec::new();
    for slot in 0..n {
        let r = node::rec(&page, slot);
        keys.push(r.key.to_vec());
        if h.level > 0 {
            let _ = node::child(&page, slot);
        }
    }
    let _ = (node::free_space(&page), node::used_bytes(&page));
    // Probe keys: every stored key, a prefix and an extension of each.
    let mut probes = vec![Vec::new(), vec![0xff; 3]];
    for k in keys.iter().take(8) {
        probes.push(k.clone());
        probes.push(k[..k.len() / 2].to_vec());
        let mut longer = k.clone();
        longer.push(0);
        probes.push(longer);
    }
    for key in &probes {
        if h.level == 0 {
            let _ = node::search_leaf(&page, key);
        } else {
            let _ = node::search_internal(&page, key);
        }
    }
    if n >= 2 {
        let split = node::split_point(&page);
        assert!((1..n).contains(&split), "split point {split} of {n}");
        let (mut left, mut right) = (page.clone(), page.clone());
        node::init(&mut right, h.level, h.index_id, h.sys_fields);
        right[node::HEAP_START..].fill(0);
        node::move_tail(&mut left, split, &mut right);
        must_validate(&left, "move_tail (source)");
        must_validate(&right, "move_tail (destination)");
        if node::append_all(&mut left, &right) {
            must_validate(&left, "append_all");
        }
    }
    let mut p = page.clone();
    node::compact(&mut p);
    must_validate(&p, "compact");
    if n > 0 {
        let slot = n / 2;
        let mut p = page.clone();
        node::delete(&mut p, slot);
        must_validate(&p, "delete");
        if h.level == 0 {
            let mut p = page.clone();
            node::set_deleted(&mut p, slot, true);
            if h.sys_fields {
                node::set_sys_fields(&mut p, slot, 7, 9);
            }
            must_validate(&p, "set_deleted");
            let value = vec![0xab; input.len() % 40];
            if node::update_value(&mut p, slot, &value) {
                must_validate(&p, "update_value");
            }
        } else {
            let mut p = page.clone();
            if node::update_value(&mut p, slot, &[1, 2, 3, 4]) {
                must_validate(&p, "update_value");
            }
        }
    }
    if h.level == 0 {
        let cap = (page.len() - node::HEAP_START) / 4 - 2 - node::REC_HEADER - node::SYS_FIELDS;
        for key in probes.iter().filter(|k| k.len() + 2 <= cap) {
            let mut p = page.clone();
            if let Err(slot) = node::search_leaf(&p, key) {
                if node::insert(&mut p, slot, key, b"v", 1, 2) {
                    must_validate(&p, "insert");
                }
            }
        }
    }
}

fn seed_pages() -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds = Vec::new();
    let leaf = |size: usize, sys: bool, n: usize, del: bool| {
        let mut p = vec![0u8; size];
        bufpage::init_header(&mut p, PageId::new(0, 3), page_type::INDEX);
        node::init(&mut p, 0, 42, sys);
        for i in 0..n {
            let key = format!("key{i:04}");
            let value = format!("value-{}", "x".repeat(i % 7));
            assert!(node::insert(
                &mut p,
                i,
                key.as_bytes(),
                value.as_bytes(),
                5,
                6
            ));
        }
        if del && n > 2 {
            node::delete(&mut p, 1);
            node::set_deleted(&mut p, 0, true);
        }
        bufpage::seal(&mut p);
        p
    };
    seeds.push(("leaf-4k-sys", leaf(4096, true, 20, false)));
    seeds.push(("leaf-4k-garbage", leaf(4096, false, 30, true)));
    seeds.push(("leaf-256", leaf(256, false, 3, false)));
    seeds.push(("leaf-16k-full", leaf(16384, true, 300, true)));
    seeds.push(("leaf-empty", leaf(4096, false, 0, false)));
    let mut p = vec![0u8; 4096];
    bufpage::init_header(&mut p, PageId::new(0, 4), page_type::INDEX);
    node::init(&mut p, 1, 42, true);
    for i in 0..10u32 {
        let key = format!("sep{i:03}");
        assert!(node::insert(
            &mut p,
            i as usize,
            key.as_bytes(),
            &(100 + i).to_le_bytes(),
            0,
            0
        ));
    }
    bufpage::seal(&mut p);
    seeds.push(("internal-4k", p));
    seeds
}

#[test]
fn fuzz_btree_page() {
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "btree_page");
    write_seeds(&dir, &seed_pages());
    let stats = fuzz_target("btree_page", &dir, 100_000, target);
    eprintln!(
        "btree_page: {} of {} inputs were valid pages",
        VALID.load(Ordering::Relaxed),
        stats.inputs
    );
}
