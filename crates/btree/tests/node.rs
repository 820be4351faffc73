//! Tests of the slotted index page: a randomized model check, split/merge
//! support, searches, log volume, and hostile input to `validate`.

use std::collections::BTreeMap;

use millrace_btree::node::{self, PageMut, HEAP_START, NONE};
use millrace_sys::rng::SplitMix64;

/// A page that counts the calls the redo log would see and checks that no
/// change touches the buffer pool's 32-byte header or leaves the page.
struct Tracked {
    buf: Vec<u8>,
    writes: usize,
    copies: usize,
    written_bytes: usize,
}

impl Tracked {
    fn new(buf: Vec<u8>) -> Self {
        Self {
            buf,
            writes: 0,
            copies: 0,
            written_bytes: 0,
        }
    }
    fn calls(&self) -> usize {
        self.writes + self.copies
    }
    fn reset(&mut self) {
        self.writes = 0;
        self.copies = 0;
        self.written_bytes = 0;
    }
}

impl PageMut for Tracked {
    fn bytes(&self) -> &[u8] {
        &self.buf
    }
    fn write(&mut self, offset: usize, data: &[u8]) {
        assert!(offset >= 32, "write at {offset} into the common header");
        assert!(offset + data.len() <= self.buf.len(), "write past the page");
        self.writes += 1;
        self.written_bytes += data.len();
        self.buf[offset..offset + data.len()].copy_from_slice(data);
    }
    fn copy_within(&mut self, src: usize, dst: usize, len: usize) {
        assert!(src.min(dst) >= 32, "copy into/from the common header");
        assert!(src.max(dst) + len <= self.buf.len(), "copy past the page");
        self.copies += 1;
        // The slice's method: PageMut's, being in scope, would shadow it.
        self.buf.as_mut_slice().copy_within(src..src + len, dst);
    }
}

/// A page whose common header is random, so tests notice if it is touched.
fn new_page(rng: &mut SplitMix64, size: usize, level: u16, sys: bool) -> Tracked {
    let mut buf = vec![0u8; size];
    rng.fill(&mut buf[..32]);
    let mut p = Tracked::new(buf);
    node::init(&mut p, level, 42, sys);
    p
}

/// Keys over a 4-letter alphabet including 0x00 and 0xff, with short lengths,
/// so that prefixes and extreme bytes are common.
fn random_key(rng: &mut SplitMix64) -> Vec<u8> {
    const ALPHABET: [u8; 4] = [0x00, 0x01, 0x7f, 0xff];
    let len = rng.below(10) as usize;
    (0..len).map(|_| ALPHABET[rng.below(4) as usize]).collect()
}

/// The largest value that keeps a record within the callers' cap of page_size/8.
fn max_val_len(size: usize, key_len: usize, sys: bool) -> usize {
    size / 8 - node::rec_size(key_len, 0, sys)
}

fn random_value(rng: &mut SplitMix64, size: usize, key_len: usize, sys: bool) -> Vec<u8> {
    let max = max_val_len(size, key_len, sys);
    let len = if rng.chance(1, 10) {
        rng.below(max as u64 + 1) as usize
    } else {
        rng.below(64.min(max as u64) + 1) as usize
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    v
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ModelRec {
    value: Vec<u8>,
    deleted: bool,
    trx_id: u64,
    roll_ptr: u64,
}

fn check_against_model(page: &[u8], model: &BTreeMap<Vec<u8>, ModelRec>, header: &[u8]) {
    if let Err(e) = node::validate(page) {
        panic!("invalid page: {e}");
    }
    assert_eq!(&page[..32], header, "common header changed");
    let h = node::header(page);
    assert_eq!(h.n_recs as usize, model.len());
    let mut used = 0;
    for (slot, (key, m)) in model.iter().enumerate() {
        let r = node::rec(page, slot);
        assert_eq!(r.key, &key[..], "slot {slot}");
        assert_eq!(r.value, &m.value[..], "slot {slot}");
        assert_eq!(r.deleted, m.deleted, "slot {slot}");
        assert_eq!(
            (r.trx_id, r.roll_ptr),
            (m.trx_id, m.roll_ptr),
            "slot {slot}"
        );
        used += node::rec_size(key.len(), m.value.len(), h.recs_have_sys_fields()) + 2;
    }
    assert_eq!(node::used_bytes(page), used);
    // Every byte after the index header is a record, a slot, garbage or free.
    assert_eq!(
        node::free_space(page) + used + h.garbage as usize,
        page.len() - HEAP_START
    );
}

#[derive(Default, Debug)]
struct Coverage {
    inserts: usize,
    insert_refusals: usize,
    insert_compactions: usize,
    grows: usize,
    grow_refusals: usize,
    max_recs: usize,
}

fn run_model(seed: u64, size: usize, sys: bool, steps: usize, cov: &mut Coverage) {
    let mut rng = SplitMix64::new(seed);
    let mut p = new_page(&mut rng, size, 0, sys);
    let common_header = p.buf[..32].to_vec();
    let mut model: BTreeMap<Vec<u8>, ModelRec> = BTreeMap::new();
    for step in 0..steps {
        // Alternate filling and draining phases so the page goes both full and empty.
        let filling = (step / 300) % 2 == 0;
        let n = model.len();
        let op = rng.below(100);
        let (insert_pct, delete_pct) = if filling { (55, 8) } else { (15, 45) };
        if op < insert_pct || n == 0 {
            let key = random_key(&mut rng);
            let value = random_value(&mut rng, size, key.len(), sys);
            let (trx_id, roll_ptr) = if sys {
                (rng.next_u64(), rng.next_u64())
            } else {
                (0, 0)
            };
            match node::search_leaf(&p.buf, &key) {
                Ok(slot) => assert!(model.contains_key(&key), "found {key:?} at {slot}"),
                Err(slot) => {
                    assert!(!model.contains_key(&key));
                    assert_eq!(slot, model.range(..key.clone()).count());
                    let needed = node::rec_size(key.len(), value.len(), sys) + 2;
                    let free = node::free_space(&p.buf);
                    let garbage = node::header(&p.buf).garbage as usize;
                    let fits = free + garbage >= needed;
                    let before = p.buf.clone();
                    let ok = node::insert(&mut p, slot, &key, &value, trx_id, roll_ptr);
                    assert_eq!(
                        ok, fits,
                        "step {step}: free {free} garbage {garbage} needed {needed}"
                    );
                    cov.inserts += 1;
                    if ok {
                        if free < needed {
                            cov.insert_compactions += 1;
                        }
                        model.insert(
                            key,
                            ModelRec {
                                value,
                                deleted: false,
                                trx_id,
                                roll_ptr,
                            },
                        );
                    } else {
                        cov.insert_refusals += 1;
                        assert_eq!(p.buf, before, "a refused insert changed the page");
                    }
                }
            }
        } else if op < insert_pct + delete_pct {
            let slot = rng.below(n as u64) as usize;
            let key = model.keys().nth(slot).cloned().expect("slot < n");
            node::delete(&mut p, slot);
            model.remove(&key);
        } else if op < insert_pct + delete_pct + 12 {
            let slot = rng.below(n as u64) as usize;
            let deleted = rng.chance(1, 2);
            node::set_deleted(&mut p, slot, deleted);
            model.values_mut().nth(slot).expect("slot < n").deleted = deleted;
        } else if op < insert_pct + delete_pct + 30 {
            let slot = rng.below(n as u64) as usize;
            let (key, m) = model.iter_mut().nth(slot).expect("slot < n");
            let value = if rng.chance(1, 5) {
                // Same size: the in-place path.
                let mut v = vec![0u8; m.value.len()];
                rng.fill(&mut v);
                v
            } else {
                random_value(&mut rng, size, key.len(), sys)
            };
            let old_len = node::rec_size(key.len(), m.value.len(), sys);
            let new_len = node::rec_size(key.len(), value.len(), sys);
            let free = node::free_space(&p.buf);
            let garbage = node::header(&p.buf).garbage as usize;
            let fits = new_len <= old_len || free + garbage + old_len >= new_len;
            let before = p.buf.clone();
            let ok = node::update_value(&mut p, slot, &value);
            assert_eq!(
                ok, fits,
                "step {step}: update {old_len} -> {new_len}, free {free} garbage {garbage}"
            );
            if new_len > old_len {
                cov.grows += 1;
            }
            if ok {
                m.value = value;
            } else {
                cov.grow_refusals += 1;
                assert_eq!(p.buf, before, "a refused update changed the page");
            }
        } else if op < insert_pct + delete_pct + 36 && sys {
            let slot = rng.below(n as u64) as usize;
            let (trx_id, roll_ptr) = (rng.next_u64(), rng.next_u64());
            node::set_sys_fields(&mut p, slot, trx_id, roll_ptr);
            let m = model.values_mut().nth(slot).expect("slot < n");
            (m.trx_id, m.roll_ptr) = (trx_id, roll_ptr);
        } else if op < insert_pct + delete_pct + 40 {
            let free = node::free_space(&p.buf);
            let garbage = node::header(&p.buf).garbage as usize;
            node::compact(&mut p);
            assert_eq!(node::header(&p.buf).garbage, 0);
            assert_eq!(node::free_space(&p.buf), free + garbage);
        }
        check_against_model(&p.buf, &model, &common_header);
        cov.max_recs = cov.max_recs.max(model.len());
        if step % 16 == 0 {
            for (slot, key) in model.keys().enumerate() {
                assert_eq!(node::search_leaf(&p.buf, key), Ok(slot));
            }
        }
    }
}

#[test]
fn random_operations_match_a_model() {
    let mut cov = Coverage::default();
    for size in [4096, 16384] {
        for sys in [false, true] {
            for seed in 0..2 {
                run_model(
                    seed * 1000 + size as u64 + sys as u64,
                    size,
                    sys,
                    2000,
                    &mut cov,
                );
            }
        }
    }
    // The runs must have reached the interesting cases, or they prove little.
    assert!(cov.insert_refusals > 20, "{cov:?}");
    assert!(cov.insert_compactions > 20, "{cov:?}");
    assert!(cov.grow_refusals > 0, "{cov:?}");
    assert!(cov.grows > 100, "{cov:?}");
    assert!(cov.max_recs > 100, "{cov:?}");
}

/// Fills a page with records of `val_len`-byte values and 8-byte keys, in
/// random or ascending order, until an insert is refused.
fn fill(rng: &mut SplitMix64, p: &mut Tracked, val_len: usize, ascending: bool) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let mut next = 0u64;
    loop {
        let key = if ascending {
            next += 1;
            next.to_be_bytes().to_vec()
        } else {
            rng.next_u64().to_be_bytes().to_vec()
        };
        let mut value = vec![0u8; val_len];
        rng.fill(&mut value);
        let slot = node::search_leaf(&p.buf, &key).expect_err("random keys are distinct");
        if !node::insert(p, slot, &key, &value, 1, 2) {
            break;
        }
        keys.push(key);
    }
    keys.sort();
    keys
}

fn keys_of(page: &[u8]) -> Vec<Vec<u8>> {
    (0..node::n_recs(page))
        .map(|s| node::rec(page, s).key.to_vec())
        .collect()
}

#[test]
fn split_halves_hold_about_half_the_bytes() {
    let mut rng = SplitMix64::new(7);
    for size in [4096, 16384] {
        for val_len in [10, 100, 300] {
            for ascending in [false, true] {
                let mut src = new_page(&mut rng, size, 0, true);
                let keys = fill(&mut rng, &mut src, val_len, ascending);
                let total = node::used_bytes(&src.buf);
                let at = node::split_point(&src.buf);
                let n = keys.len();
                assert!((1..n).contains(&at), "split at {at} of {n}");
                let mut dst = new_page(&mut rng, size, 0, true);
                node::move_tail(&mut src, at, &mut dst);
                node::validate(&src.buf).expect("left half valid");
                node::validate(&dst.buf).expect("right half valid");
                let mut both = keys_of(&src.buf);
                both.extend(keys_of(&dst.buf));
                assert_eq!(both, keys, "keys lost or reordered");
                for half in [&src.buf, &dst.buf] {
                    let used = node::used_bytes(half);
                    assert!(
                        3 * used >= total && 3 * used <= 2 * total,
                        "half of {used} of {total} bytes (size {size}, val {val_len})"
                    );
                }
                // Ascending inserts leave the moved tail at the top of the heap:
                // it comes back as free space, not garbage.
                if ascending {
                    assert_eq!(node::header(&src.buf).garbage, 0);
                }
                // Values and system fields moved intact.
                let r = node::rec(&dst.buf, 0);
                assert_eq!((r.value.len(), r.trx_id, r.roll_ptr), (val_len, 1, 2));
                // Both halves take new records again.
                for p in [&mut src, &mut dst] {
                    let key = node::rec(&p.buf, 0).key.to_vec();
                    let mut smaller = key.clone();
                    smaller.pop();
                    let slot = node::search_leaf(&p.buf, &smaller).expect_err("absent");
                    assert!(node::insert(p, slot, &smaller, &vec![1; val_len], 0, 0));
                    node::validate(&p.buf).expect("valid after insert");
                }
            }
        }
    }
}

#[test]
fn move_tail_of_an_internal_node() {
    let mut rng = SplitMix64::new(8);
    let mut src = new_page(&mut rng, 4096, 1, true);
    assert!(node::insert(&mut src, 0, b"", &100u32.to_le_bytes(), 0, 0));
    for i in 1..10u32 {
        let key = [b'a' + i as u8];
        assert!(node::insert(
            &mut src,
            i as usize,
            &key,
            &(100 + i).to_le_bytes(),
            0,
            0
        ));
    }
    node::validate(&src.buf).expect("valid");
    let mut dst = new_page(&mut rng, 4096, 1, true);
    node::move_tail(&mut src, 5, &mut dst);
    node::validate(&src.buf).expect("left valid");
    node::validate(&dst.buf).expect("right valid");
    assert_eq!(node::n_recs(&src.buf), 5);
    assert_eq!(node::n_recs(&dst.buf), 5);
    // dst's slot 0 (key "f") is now its minus-infinity child.
    assert_eq!(node::search_internal(&dst.buf, b"a"), 0);
    assert_eq!(node::child(&dst.buf, 0), 105);
    assert_eq!(node::child(&dst.buf, 4), 109);
    assert_eq!(node::search_internal(&src.buf, b"z"), 4);
}

#[test]
fn append_all_merges_half_empty_nodes() {
    let mut rng = SplitMix64::new(9);
    for size in [4096, 16384] {
        let mut left = new_page(&mut rng, size, 0, true);
        let mut right = new_page(&mut rng, size, 0, true);
        let all = fill(&mut rng, &mut left, 40, false);
        // Redistribute: keys of the upper half go right; then thin both out
        // so each is under half full and the left one holds garbage.
        let half = all.len() / 2;
        node::move_tail(&mut left, half, &mut right);
        let mut expected = Vec::new();
        for p in [&mut left, &mut right] {
            let mut slot = 0;
            let mut i = 0;
            while slot < node::n_recs(&p.buf) {
                if i % 3 == 0 {
                    node::delete(p, slot);
                } else {
                    let r = node::rec(&p.buf, slot);
                    expected.push((r.key.to_vec(), r.value.to_vec()));
                    if i % 5 == 0 {
                        node::set_deleted(p, slot, true);
                    }
                    slot += 1;
                }
                i += 1;
            }
        }
        assert!(node::header(&left.buf).garbage > 0);
        let before = node::used_bytes(&left.buf) + node::used_bytes(&right.buf);
        assert!(node::append_all(&mut left, &right.buf));
        node::validate(&left.buf).expect("merged node valid");
        assert_eq!(node::used_bytes(&left.buf), before);
        let merged: Vec<_> = (0..node::n_recs(&left.buf))
            .map(|s| {
                let r = node::rec(&left.buf, s);
                (r.key.to_vec(), r.value.to_vec())
            })
            .collect();
        assert_eq!(merged, expected);
        // Delete marks and system fields travel with the records.
        let marked = (0..node::n_recs(&left.buf))
            .filter(|&s| node::rec(&left.buf, s).deleted)
            .count();
        assert!(marked > 0);
        assert!((0..node::n_recs(&left.buf)).all(|s| node::rec(&left.buf, s).trx_id == 1));
    }
}

#[test]
fn append_all_refuses_what_does_not_fit() {
    let mut rng = SplitMix64::new(10);
    let mut left = new_page(&mut rng, 4096, 0, false);
    let mut right = new_page(&mut rng, 4096, 0, false);
    let all = fill(&mut rng, &mut left, 30, true);
    node::move_tail(&mut left, all.len() / 3, &mut right);
    // Together they now hold one record more than the full page did.
    assert!(node::insert(&mut left, 0, &[0; 8], &[0; 30], 0, 0));
    let before = left.buf.clone();
    assert!(!node::append_all(&mut left, &right.buf));
    assert_eq!(left.buf, before);
    // An empty source always fits.
    let empty = new_page(&mut rng, 4096, 0, false);
    assert!(node::append_all(&mut left, &empty.buf));
    assert_eq!(left.buf, before);
}

#[test]
fn append_all_with_separator_merges_internal_nodes() {
    let mut rng = SplitMix64::new(11);
    let mut left = new_page(&mut rng, 4096, 2, false);
    let mut right = new_page(&mut rng, 4096, 2, false);
    for (i, key) in [&b""[..], b"b", b"d"].iter().enumerate() {
        assert!(node::insert(
            &mut left,
            i,
            key,
            &(i as u32).to_le_bytes(),
            0,
            0
        ));
    }
    // right's slot 0 stores a junk key: it is minus infinity there.
    for (i, key) in [&b"zzz"[..], b"m", b"p"].iter().enumerate() {
        assert!(node::insert(
            &mut right,
            i,
            key,
            &(10 + i as u32).to_le_bytes(),
            0,
            0
        ));
    }
    node::validate(&right.buf).expect("slot 0's key is ignored");
    assert!(node::append_all_with_separator(&mut left, &right.buf, b"k"));
    node::validate(&left.buf).expect("merged internal node valid");
    assert_eq!(keys_of(&left.buf), [&b""[..], b"b", b"d", b"k", b"m", b"p"]);
    let children: Vec<u32> = (0..6).map(|s| node::child(&left.buf, s)).collect();
    assert_eq!(children, [0, 1, 2, 10, 11, 12]);
    assert_eq!(node::search_internal(&left.buf, b"l"), 3);
}

#[test]
fn search_internal_treats_slot_0_as_minus_infinity() {
    let mut rng = SplitMix64::new(12);
    let mut p = new_page(&mut rng, 4096, 1, false);
    // Slot 0's stored key is larger than everything: search must ignore it.
    let entries: [(&[u8], u32); 4] = [(b"\xff\xff", 7), (b"b", 8), (b"d", 9), (b"f", 10)];
    for (i, (key, child)) in entries.iter().enumerate() {
        assert!(node::insert(&mut p, i, key, &child.to_le_bytes(), 0, 0));
    }
    node::validate(&p.buf).expect("valid internal node");
    let cases: [(&[u8], usize); 9] = [
        (b"", 0),
        (b"a", 0),
        (b"b", 1),
        (b"b\x00", 1),
        (b"c", 1),
        (b"d", 2),
        (b"e", 2),
        (b"f", 3),
        (b"\xff\xff\xff", 3),
    ];
    for (key, slot) in cases {
        assert_eq!(node::search_internal(&p.buf, key), slot, "key {key:?}");
    }
    assert_eq!(node::child(&p.buf, 0), 7);
    assert_eq!(node::child(&p.buf, 3), 10);
    // A lone node pointer covers everything.
    let mut root = new_page(&mut rng, 4096, 1, false);
    assert!(node::insert(&mut root, 0, b"q", &3u32.to_le_bytes(), 0, 0));
    assert_eq!(node::search_internal(&root.buf, b"a"), 0);
    // A node pointer update (same size) is in place.
    assert!(node::update_value(&mut root, 0, &4u32.to_le_bytes()));
    assert_eq!(node::child(&root.buf, 0), 4);
}

#[test]
fn header_fields_round_trip() {
    let mut rng = SplitMix64::new(13);
    let mut p = new_page(&mut rng, 16384, 3, true);
    let h = node::header(&p.buf);
    assert_eq!(
        h,
        node::NodeHeader {
            level: 3,
            n_recs: 0,
            heap_top: HEAP_START as u16,
            garbage: 0,
            left: NONE,
            right: NONE,
            index_id: 42,
            sys_fields: true,
        }
    );
    assert!(!h.recs_have_sys_fields());
    node::set_left(&mut p, 5);
    node::set_right(&mut p, 6);
    let h = node::header(&p.buf);
    assert_eq!((h.left, h.right), (5, 6));
    assert_eq!(node::free_space(&p.buf), 16384 - HEAP_START);
    node::validate(&p.buf).expect("empty node valid");
}

/// A leaf of 100 records inserted in random order.
fn hundred_records(rng: &mut SplitMix64) -> Tracked {
    let mut p = new_page(rng, 16384, 0, true);
    for _ in 0..100 {
        let key = rng.next_u64().to_be_bytes();
        let slot = node::search_leaf(&p.buf, &key).expect_err("distinct");
        assert!(node::insert(&mut p, slot, &key, &[7; 20], 1, 2));
    }
    p
}

#[test]
fn log_volume_of_single_record_operations() {
    let mut rng = SplitMix64::new(14);
    let mut p = hundred_records(&mut rng);
    let rec_len = node::rec_size(8, 20, true);

    // Insert in the middle: the record, one directory shift, the slot, the header.
    let key = [0x80, 0, 0, 0, 0, 0, 0, 1];
    let slot = node::search_leaf(&p.buf, &key).expect_err("absent");
    p.reset();
    assert!(node::insert(&mut p, slot, &key, &[9; 20], 3, 4));
    assert!(
        p.calls() <= 4,
        "insert: {} writes, {} copies",
        p.writes,
        p.copies
    );
    assert!(
        p.written_bytes <= rec_len + 2 + 6,
        "insert wrote {} bytes",
        p.written_bytes
    );

    // Delete: one directory shift and the header.
    p.reset();
    node::delete(&mut p, 50);
    assert!(
        p.calls() <= 2,
        "delete: {} writes, {} copies",
        p.writes,
        p.copies
    );

    // Delete mark, system fields, same-size update: one write each.
    for op in 0..3 {
        p.reset();
        match op {
            0 => node::set_deleted(&mut p, 10, true),
            1 => node::set_sys_fields(&mut p, 10, 5, 6),
            _ => assert!(node::update_value(&mut p, 10, &[1; 20])),
        }
        assert_eq!(p.calls(), 1, "op {op}");
    }
    // Growing and shrinking updates stay small and never shift the directory.
    p.reset();
    assert!(node::update_value(&mut p, 20, &[2; 30]));
    assert_eq!(p.copies, 0);
    assert!(p.calls() <= 3, "grow: {} writes", p.writes);
    p.reset();
    assert!(node::update_value(&mut p, 20, &[3; 5]));
    assert_eq!(p.copies, 0);
    assert!(p.calls() <= 3, "shrink: {} writes", p.writes);

    // Compaction: at most one write each for heap, directory and header,
    // and the hole-free prefix of the heap is not rewritten.
    let heap_len = node::header(&p.buf).heap_top as usize - HEAP_START;
    p.reset();
    node::compact(&mut p);
    assert!(p.calls() <= 3, "compact: {} writes", p.writes);
    assert!(p.written_bytes < heap_len + 2 * 100 + 6);
    node::validate(&p.buf).expect("valid");
    p.reset();
    node::compact(&mut p);
    assert_eq!(
        p.calls(),
        0,
        "compacting a page without garbage writes nothing"
    );
}

#[test]
fn update_value_keeps_delete_mark_and_system_fields() {
    let mut rng = SplitMix64::new(15);
    let mut p = hundred_records(&mut rng);
    node::set_deleted(&mut p, 3, true);
    node::set_sys_fields(&mut p, 3, 77, 88);
    let key = node::rec(&p.buf, 3).key.to_vec();
    for len in [20, 40, 0, 300, 1] {
        assert!(node::update_value(&mut p, 3, &vec![len as u8; len]));
        node::validate(&p.buf).expect("valid");
        let r = node::rec(&p.buf, 3);
        assert_eq!(
            (r.key, r.value, r.deleted, r.trx_id, r.roll_ptr),
            (&key[..], &vec![len as u8; len][..], true, 77, 88)
        );
    }
    // Fill the page, then grow a record so that only compaction makes room.
    let mut p = new_page(&mut rng, 4096, 0, true);
    fill(&mut rng, &mut p, 40, false);
    node::set_sys_fields(&mut p, 0, 5, 6);
    node::set_deleted(&mut p, 0, true);
    node::delete(&mut p, 2);
    node::delete(&mut p, 2);
    let free = node::free_space(&p.buf);
    let garbage = node::header(&p.buf).garbage as usize;
    let grow = free + garbage; // exactly fills the page
    assert!(grow > free);
    let key = node::rec(&p.buf, 0).key.to_vec();
    assert!(!node::update_value(&mut p, 0, &vec![1; 40 + grow + 1]));
    assert!(node::update_value(&mut p, 0, &vec![1; 40 + grow]));
    node::validate(&p.buf).expect("valid");
    assert_eq!(node::free_space(&p.buf), 0);
    let r = node::rec(&p.buf, 0);
    assert_eq!(
        (r.key, r.deleted, r.trx_id, r.roll_ptr),
        (&key[..], true, 5, 6)
    );
}

#[test]
fn deleting_everything_returns_all_space() {
    let mut rng = SplitMix64::new(16);
    let mut p = hundred_records(&mut rng);
    while node::n_recs(&p.buf) > 0 {
        let slot = rng.below(node::n_recs(&p.buf) as u64) as usize;
        node::delete(&mut p, slot);
        node::validate(&p.buf).expect("valid");
    }
    let h = node::header(&p.buf);
    assert_eq!(
        node::free_space(&p.buf) + h.garbage as usize,
        16384 - HEAP_START
    );
    node::compact(&mut p);
    assert_eq!(node::free_space(&p.buf), 16384 - HEAP_START);
}

/// Calls every reader on a page that passed validate: none may panic.
fn exercise_readers(page: &[u8]) {
    let h = node::header(page);
    let n = h.n_recs as usize;
    let _ = node::free_space(page);
    let _ = node::used_bytes(page);
    for slot in 0..n {
        let r = node::rec(page, slot);
        if h.level == 0 {
            assert_eq!(node::search_leaf(page, r.key), Ok(slot));
        } else {
            let _ = node::child(page, slot);
            let _ = node::search_internal(page, r.key);
        }
    }
    if n >= 2 {
        let _ = node::split_point(page);
    }
}

#[test]
fn validate_never_panics_on_random_bytes() {
    let mut rng = SplitMix64::new(17);
    let mut accepted = 0;
    for case in 0..3000 {
        let size = match case % 4 {
            0 => rng.below(600) as usize,
            1 => 4096,
            _ => 256 + rng.below(2048) as usize,
        };
        let mut page = vec![0u8; size];
        rng.fill(&mut page);
        if size > HEAP_START && case % 2 == 0 {
            // Plausible headers get past the first checks into the records.
            page[32..34].copy_from_slice(&(rng.below(3) as u16).to_le_bytes());
            page[34..36].copy_from_slice(&(rng.below(4) as u16).to_le_bytes());
            let top = HEAP_START + rng.below((size - HEAP_START) as u64) as usize;
            page[36..38].copy_from_slice(&(top as u16).to_le_bytes());
            page[56] &= 1;
            page[57..64].fill(0);
        }
        if node::validate(&page).is_ok() {
            accepted += 1;
            exercise_readers(&page);
        }
    }
    // Empty-looking pages do pass; nothing else should need to.
    assert!(accepted < 300, "{accepted} random pages accepted");
}

#[test]
fn validate_never_panics_on_bit_flips_of_valid_pages() {
    let mut rng = SplitMix64::new(18);
    let mut pages = Vec::new();
    for (size, level, sys) in [(4096, 0, true), (4096, 0, false), (16384, 0, true)] {
        let mut p = new_page(&mut rng, size, level, sys);
        fill(&mut rng, &mut p, 12, false);
        // Holes in the heap, so garbage is non-zero.
        for slot in (0..node::n_recs(&p.buf)).rev().step_by(7) {
            node::delete(&mut p, slot);
        }
        pages.push(p.buf);
    }
    let mut p = new_page(&mut rng, 4096, 1, false);
    for i in 0..150u32 {
        let key = if i == 0 {
            Vec::new()
        } else {
            i.to_be_bytes().to_vec()
        };
        assert!(node::insert(
            &mut p,
            i as usize,
            &key,
            &i.to_le_bytes(),
            0,
            0
        ));
    }
    pages.push(p.buf);

    let (mut rejected, mut accepted) = (0, 0);
    for case in 0..4000 {
        let mut page = pages[case % pages.len()].clone();
        node::validate(&page).expect("the original is valid");
        let size = page.len();
        let n = node::n_recs(&page);
        // Aim half of the flips at the header and the slot directory, where
        // they matter most.
        for _ in 0..1 + rng.below(3) {
            let at = match rng.below(4) {
                0 => 32 + rng.below(32) as usize,
                1 => size - 1 - rng.below(2 * n.max(1) as u64) as usize,
                _ => 32 + rng.below(size as u64 - 32) as usize,
            };
            page[at] ^= 1 << rng.below(8);
        }
        match node::validate(&page) {
            Ok(()) => {
                accepted += 1;
                exercise_readers(&page);
            }
            Err(_) => rejected += 1,
        }
    }
    assert!(rejected > 1000, "{rejected} rejected, {accepted} accepted");
}

/// A valid leaf with records "a".."e" laid out in heap order, no garbage.
fn small_leaf() -> Vec<u8> {
    let mut p = vec![0u8; 4096];
    node::init(&mut p, 0, 1, false);
    for (i, key) in [b"a", b"b", b"c", b"d", b"e"].iter().enumerate() {
        assert!(node::insert(&mut p, i, *key, b"vv", 0, 0));
    }
    node::validate(&p).expect("valid");
    p
}

fn slot_at(slot: usize) -> usize {
    4096 - 2 * (slot + 1)
}

fn set_u16(page: &mut [u8], at: usize, v: u16) {
    page[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn expect_rejected(page: &[u8], what: &str, needle: &str) {
    match node::validate(page) {
        Ok(()) => panic!("{what}: accepted"),
        Err(e) => assert!(e.contains(needle), "{what}: unexpected message {e:?}"),
    }
}

#[test]
fn validate_rejects_constructed_corruption() {
    let base = small_leaf();
    let off: Vec<u16> = (0..5)
        .map(|s| u16::from_le_bytes([base[slot_at(s)], base[slot_at(s) + 1]]))
        .collect();
    let top = node::header(&base).heap_top;

    // Two slots sharing one record.
    let mut p = base.clone();
    set_u16(&mut p, slot_at(2), off[0]);
    expect_rejected(&p, "shared record", "overlap");
    // A slot pointing into the middle of another record (whatever it then
    // parses as, it must be rejected).
    let mut p = base.clone();
    set_u16(&mut p, slot_at(1), off[0] + 1);
    assert!(node::validate(&p).is_err(), "misaligned slot accepted");
    // Records overlapping by a byte, keys still in order: record "a"'s value
    // lengthened into record "b".
    let mut p = base.clone();
    set_u16(&mut p, off[0] as usize + 3, 3);
    expect_rejected(&p, "lengthened record", "overlap");

    // Out-of-order slots.
    let mut p = base.clone();
    set_u16(&mut p, slot_at(1), off[2]);
    set_u16(&mut p, slot_at(2), off[1]);
    expect_rejected(&p, "swapped slots", "not greater");
    // A duplicate key.
    let mut p = base.clone();
    p[off[1] as usize + 5] = b'a';
    expect_rejected(&p, "duplicate key", "not greater");

    // Garbage that does not add up.
    let mut p = base.clone();
    set_u16(&mut p, 38, 1);
    expect_rejected(&p, "garbage", "garbage");
    let mut p = base.clone();
    set_u16(&mut p, 36, top + 3);
    expect_rejected(&p, "heap_top past the records", "garbage");

    // heap_top outside the heap.
    let mut p = base.clone();
    set_u16(&mut p, 36, 4096 - 4);
    expect_rejected(&p, "heap_top in the directory", "heap_top");
    let mut p = base.clone();
    set_u16(&mut p, 36, 10);
    expect_rejected(&p, "heap_top in the header", "heap_top");

    // A slot pointing outside the heap, and a record running past heap_top.
    let mut p = base.clone();
    set_u16(&mut p, slot_at(4), top);
    expect_rejected(&p, "slot past heap_top", "outside the heap");
    let mut p = base.clone();
    set_u16(&mut p, slot_at(4), 20);
    expect_rejected(&p, "slot into the header", "outside the heap");
    let mut p = base.clone();
    set_u16(&mut p, off[4] as usize + 3, 500);
    expect_rejected(&p, "long value", "past heap_top");

    // Too many slots; a level beyond the limit; unknown flags.
    let mut p = base.clone();
    set_u16(&mut p, 34, 3000);
    expect_rejected(&p, "n_recs", "slots do not fit");
    let mut p = base.clone();
    set_u16(&mut p, 32, 65);
    expect_rejected(&p, "level", "level");
    let mut p = base.clone();
    p[56] = 2;
    expect_rejected(&p, "page flags", "flags");
    let mut p = base.clone();
    p[60] = 1;
    expect_rejected(&p, "reserved", "reserved");
    let mut p = base.clone();
    p[off[0] as usize] = 4;
    expect_rejected(&p, "record flags", "flags");

    // The same bytes as an internal node: node pointers must be 4 bytes.
    let mut p = base.clone();
    set_u16(&mut p, 32, 1);
    expect_rejected(&p, "2-byte node pointers", "not 4");

    // Page sizes outside the supported range.
    expect_rejected(&base[..100], "tiny page", "page size");
    expect_rejected(&vec![0u8; 65537], "huge page", "page size");
}
