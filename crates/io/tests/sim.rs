//! SimStorage: durability bookkeeping, scheduled crashes, and crash images.

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Instant;

use millrace_io::{AlignedBuf, SimStorage, Storage, StorageFile};

const SECTOR: usize = 512;

fn read_all(file: &Arc<dyn StorageFile>) -> Vec<u8> {
    let mut buf = vec![0; file.len().unwrap() as usize];
    file.read_exact_at(&mut buf, 0).unwrap();
    buf
}

fn assert_crash_error(e: std::io::Error) {
    assert_eq!(e.kind(), ErrorKind::Other, "{e}");
    assert!(e.to_string().contains("simulated crash"), "{e}");
}

#[test]
fn sim_unsynced_writes_absent_from_durable_image_present_in_clean_image() {
    let sim = SimStorage::new();
    let file = sim.open("redo/log0", true).unwrap();
    file.write_all_at(b"synced", 0).unwrap();
    file.sync_data().unwrap();
    file.write_all_at(b"UNSYNCED", 6).unwrap();
    file.write_all_at(b"s", 0).unwrap();

    assert_eq!(read_all(&file), b"syncedUNSYNCED");
    assert_eq!(sim.file_bytes("redo/log0").unwrap(), b"syncedUNSYNCED");
    assert_eq!(sim.durable_bytes("redo/log0").unwrap(), b"synced");

    let durable = sim.durable_image();
    assert_eq!(durable.file_bytes("redo/log0").unwrap(), b"synced");
    let clean = sim.clean_image();
    assert_eq!(clean.file_bytes("redo/log0").unwrap(), b"syncedUNSYNCED");

    // A file created but never synced exists, empty, in the durable image.
    sim.open("empty", true)
        .unwrap()
        .write_all_at(b"x", 0)
        .unwrap();
    assert_eq!(sim.durable_image().file_bytes("empty").unwrap(), b"");
    assert_eq!(sim.clean_image().file_bytes("empty").unwrap(), b"x");

    // Images are independent of the original and of each other.
    let image_file = clean.open("redo/log0", false).unwrap();
    image_file.write_all_at(b"CHANGED", 0).unwrap();
    assert_eq!(sim.file_bytes("redo/log0").unwrap(), b"syncedUNSYNCED");
    assert_eq!(clean.writes(), 1);
    assert_eq!(sim.writes(), 4);
    // The image's own unsynced write is not durable in its durable image.
    assert_eq!(
        clean.durable_image().file_bytes("redo/log0").unwrap(),
        b"syncedUNSYNCED"
    );
}

#[test]
fn sim_synced_writes_survive_every_crash_image() {
    let sim = SimStorage::new();
    let log = sim.open("log", true).unwrap();
    let data = sim.open("data/t1", true).unwrap();
    let synced: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
    log.write_all_at(&synced, 0).unwrap();
    log.sync_data().unwrap();
    data.write_all_at(&synced[..3000], 0).unwrap();
    data.sync_data().unwrap();
    // Unsynced writes only beyond the synced range, so the synced bytes are never legitimately
    // overwritten.
    for i in 0..50u64 {
        log.write_all_at(&[0xEE; 700], 8192 + i * 300).unwrap();
        data.write_all_at(&[0xDD; 100], 3000 + i * 100).unwrap();
    }
    for seed in 0..200 {
        let image = sim.crash_image(seed);
        let log = image.file_bytes("log").unwrap();
        assert!(log.len() >= 8192, "seed {seed}");
        assert_eq!(log[..8192], synced[..], "seed {seed}");
        let data = image.file_bytes("data/t1").unwrap();
        assert_eq!(data[..3000], synced[..3000], "seed {seed}");
        assert!(!image.has_crashed());
        assert_eq!((image.writes(), image.syncs()), (0, 0));
    }
}

#[test]
fn sim_crash_after_writes_allows_exactly_n() {
    for n in [0u64, 1, 3, 10] {
        let sim = SimStorage::new();
        let a = sim.open("a", true).unwrap();
        let b = sim.open("b", true).unwrap();
        a.write_all_at(b"before", 0).unwrap();
        sim.crash_after_writes(Some(n));
        for i in 0..n {
            // Writes to any file count; syncs in between do not.
            let file = if i % 2 == 0 { &a } else { &b };
            file.write_all_at(&[i as u8], 100 + i).unwrap();
            file.sync_data().unwrap();
            assert!(!sim.has_crashed(), "n {n}, write {i}");
        }
        assert_crash_error(b.write_all_at(b"one too many", 0).unwrap_err());
        assert!(sim.has_crashed());
        assert_eq!(sim.writes(), 1 + n);

        // Everything that changes state fails from now on; reads still work.
        assert_crash_error(a.write_all_at(b"x", 0).unwrap_err());
        assert_crash_error(a.sync_data().unwrap_err());
        assert_crash_error(a.set_len(0).unwrap_err());
        assert_crash_error(sim.open("new", true).err().unwrap());
        assert_crash_error(sim.remove("a").unwrap_err());
        let mut buf = [0; 6];
        a.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"before");
        assert!(
            sim.open("a", false).is_ok(),
            "opening an existing file reads only"
        );
        assert_eq!(sim.writes(), 1 + n);
    }
}

#[test]
fn sim_crash_after_writes_none_disables_and_crash_now() {
    let sim = SimStorage::new();
    let f = sim.open("f", true).unwrap();
    sim.crash_after_writes(Some(1));
    sim.crash_after_writes(None);
    for i in 0..10 {
        f.write_all_at(&[1], i).unwrap();
    }
    assert!(!sim.has_crashed());

    f.sync_data().unwrap();
    f.write_all_at(b"lost?", 0).unwrap();
    sim.crash_now();
    assert!(sim.has_crashed());
    assert_crash_error(f.write_all_at(b"x", 0).unwrap_err());
    assert_crash_error(f.sync_data().unwrap_err());
    // The frozen state still knows the unsynced write: the clean image has it, the durable
    // one does not.
    assert_eq!(&sim.clean_image().file_bytes("f").unwrap()[..5], b"lost?");
    assert_eq!(sim.durable_image().file_bytes("f").unwrap(), vec![1; 10]);
    // Clones share the crash.
    assert!(sim.clone().has_crashed());
}

#[test]
fn sim_crash_images_deterministic_per_seed_and_vary_across_seeds() {
    let sim = SimStorage::new();
    let f = sim.open("f", true).unwrap();
    let g = sim.open("g", true).unwrap();
    f.write_all_at(&[0; 16384], 0).unwrap();
    f.sync_data().unwrap();
    for i in 0..40u64 {
        f.write_all_at(&[i as u8 + 1; 1500], i * 400).unwrap();
        g.write_all_at(&[i as u8 + 1; 300], i * 300).unwrap();
    }
    g.set_len(5000).unwrap();
    let contents = |image: &SimStorage| (image.file_bytes("f"), image.file_bytes("g"));
    for seed in 0..20 {
        assert_eq!(
            contents(&sim.crash_image(seed)),
            contents(&sim.crash_image(seed)),
            "seed {seed}"
        );
    }
    let first = contents(&sim.crash_image(0));
    assert!(
        (1..10).any(|seed| contents(&sim.crash_image(seed)) != first),
        "different seeds should give different images"
    );
}

#[test]
fn sim_torn_writes_keep_each_sector_wholly_old_or_new() {
    let sim = SimStorage::new();
    let f = sim.open("f", true).unwrap();
    let old = vec![0xAA; 64 * 1024];
    f.write_all_at(&old, 0).unwrap();
    f.sync_data().unwrap();
    // Non-overlapping unsynced writes at unaligned offsets, each with its own byte value so
    // every byte of an image tells which write (if any) it came from.
    let writes: Vec<(usize, usize, u8)> = (0..12)
        .map(|i| (i * 5000 + 100 + i * 37, 3000 + i * 61, i as u8 + 1))
        .collect();
    for &(offset, len, value) in &writes {
        f.write_all_at(&vec![value; len], offset as u64).unwrap();
    }
    let mut saw_torn = false;
    let mut saw_whole = false;
    let mut saw_dropped = false;
    for seed in 0..100 {
        let image = sim.crash_image(seed).file_bytes("f").unwrap();
        assert_eq!(image.len(), old.len(), "seed {seed}");
        for &(offset, len, value) in &writes {
            let end = offset + len;
            let mut new_sectors = 0;
            let mut old_sectors = 0;
            let mut start = offset;
            while start < end {
                let piece_end = ((start / SECTOR + 1) * SECTOR).min(end);
                let piece = &image[start..piece_end];
                if piece.iter().all(|&b| b == value) {
                    new_sectors += 1;
                } else if piece.iter().all(|&b| b == 0xAA) {
                    old_sectors += 1;
                } else {
                    panic!("seed {seed}: sector at {start} of write {value} is mixed");
                }
                start = piece_end;
            }
            match (new_sectors, old_sectors) {
                (_, 0) => saw_whole = true,
                (0, _) => saw_dropped = true,
                _ => saw_torn = true,
            }
        }
        // Bytes outside every write are untouched.
        for (i, &b) in image.iter().enumerate() {
            if !writes.iter().any(|&(o, l, _)| (o..o + l).contains(&i)) {
                assert_eq!(b, 0xAA, "seed {seed} byte {i}");
            }
        }
    }
    assert!(saw_torn && saw_whole && saw_dropped);
}

#[test]
fn sim_unsynced_set_len_is_kept_or_dropped_and_synced_one_is_durable() {
    let sim = SimStorage::new();
    let f = sim.open("f", true).unwrap();
    f.write_all_at(&[7; 4096], 0).unwrap();
    f.sync_data().unwrap();
    f.set_len(1000).unwrap();
    assert_eq!(f.len().unwrap(), 1000);
    assert_eq!(sim.durable_image().file_bytes("f").unwrap().len(), 4096);
    let lens: std::collections::BTreeSet<usize> = (0..40)
        .map(|seed| sim.crash_image(seed).file_bytes("f").unwrap().len())
        .collect();
    assert_eq!(lens, [1000, 4096].into_iter().collect());

    // A write made before a truncation cannot resurface beyond the new end.
    let g = sim.open("g", true).unwrap();
    g.write_all_at(&[9; 2048], 0).unwrap();
    g.set_len(100).unwrap();
    for seed in 0..40 {
        assert!(sim.crash_image(seed).file_bytes("g").unwrap().len() <= 100);
    }

    f.sync_data().unwrap();
    for seed in 0..10 {
        assert_eq!(
            sim.crash_image(seed).file_bytes("f").unwrap(),
            vec![7; 1000]
        );
    }
    // Extending is zero-filled.
    f.set_len(1500).unwrap();
    let mut tail = [1; 500];
    f.read_exact_at(&mut tail, 1000).unwrap();
    assert_eq!(tail, [0; 500]);
}

#[test]
fn sim_fail_next_sync_fails_exactly_once() {
    let sim = SimStorage::new();
    let f = sim.open("f", true).unwrap();
    let g = sim.open("g", true).unwrap();
    f.write_all_at(b"data", 0).unwrap();
    sim.fail_next_sync();
    let err = g.sync_data().unwrap_err();
    assert_ne!(err.kind(), ErrorKind::NotFound);
    assert!(!sim.has_crashed(), "a failed sync is not a crash");
    assert_eq!(sim.syncs(), 0);
    // The failed sync made nothing durable.
    assert_eq!(sim.durable_bytes("f").unwrap(), b"");
    f.sync_data().unwrap();
    g.sync_data().unwrap();
    assert_eq!(sim.syncs(), 2);
    assert_eq!(sim.durable_bytes("f").unwrap(), b"data");
}

#[test]
fn sim_fail_read_after_fails_the_chosen_read_once() {
    let sim = SimStorage::new();
    let f = sim.open("f", true).unwrap();
    f.write_all_at(b"data", 0).unwrap();
    let mut buf = [0u8; 4];
    sim.fail_read_after(Some(2));
    f.read_exact_at(&mut buf, 0).unwrap();
    f.read_exact_at(&mut buf, 0).unwrap();
    assert!(
        f.read_exact_at(&mut buf, 0).is_err(),
        "the third read fails"
    );
    assert!(!sim.has_crashed(), "a failed read is not a crash");
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"data");
    f.write_all_at(b"more", 4).unwrap();
    sim.fail_read_after(Some(0));
    sim.fail_read_after(None);
    f.read_exact_at(&mut buf, 4).unwrap();
    assert_eq!(&buf, b"more");
}

#[test]
fn sim_read_past_eof_and_writes_extend_with_zeros() {
    let sim = SimStorage::new();
    let f = sim.open("f", true).unwrap();
    f.write_all_at(b"abc", 10).unwrap();
    assert_eq!(f.len().unwrap(), 13);
    assert_eq!(read_all(&f), b"\0\0\0\0\0\0\0\0\0\0abc");
    let mut buf = [0; 4];
    for offset in [10, 13, 100, u64::MAX] {
        let err = f.read_exact_at(&mut buf, offset).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof, "offset {offset}");
    }
    // Offsets no in-memory file could reach are an error, not a giant allocation.
    assert_eq!(
        f.write_all_at(b"x", 1 << 40).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        f.set_len(1 << 40).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

#[test]
fn sim_with_alignment_rejects_misaligned_io() {
    let sim = SimStorage::with_alignment(4096);
    let f = sim.open("f", true).unwrap();
    assert_eq!(f.alignment(), 4096);
    let mut page = AlignedBuf::zeroed(8192, 4096);
    page[..5].copy_from_slice(b"hello");
    f.write_all_at(&page, 4096).unwrap();
    let mut back = AlignedBuf::zeroed(4096, 4096);
    f.read_exact_at(&mut back, 4096).unwrap();
    assert_eq!(&back[..5], b"hello");

    let bad: [(&[u8], u64); 3] = [(&page[1..4097], 0), (&page[..100], 0), (&page[..4096], 512)];
    for (buf, offset) in bad {
        let err = f.write_all_at(buf, offset).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }
    let err = f.read_exact_at(&mut back[..100], 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(sim.writes(), 1, "rejected writes are not counted");
    // Images keep the alignment, so a recovery test exercises the same path.
    assert_eq!(
        sim.crash_image(1).open("f", false).unwrap().alignment(),
        4096
    );
    assert_eq!(SimStorage::new().open("f", true).unwrap().alignment(), 1);
}

#[test]
fn sim_corrupt_changes_durable_and_current() {
    let sim = SimStorage::new();
    let f = sim.open("data/t1", true).unwrap();
    f.write_all_at(&[1; 100], 0).unwrap();
    f.sync_data().unwrap();
    sim.corrupt("data/t1", 10, &[0xFF; 5]);
    let mut buf = [0; 20];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[10..15], &[0xFF; 5]);
    assert_eq!(&buf[15..], &[1; 5]);
    for image in [sim.durable_image(), sim.crash_image(3), sim.clean_image()] {
        assert_eq!(&image.file_bytes("data/t1").unwrap()[10..15], &[0xFF; 5]);
    }
    assert_eq!(sim.writes(), 1, "corruption is not a counted write");
    assert_eq!(sim.file_bytes("missing"), None);
}

#[test]
fn sim_names_exists_remove_and_stale_handles() {
    let sim = SimStorage::new();
    assert_eq!(
        sim.open("f", false).err().unwrap().kind(),
        ErrorKind::NotFound
    );
    for name in ["", "/abs", "../up", "a/../../b"] {
        assert_eq!(
            sim.open(name, true).err().unwrap().kind(),
            ErrorKind::InvalidInput,
            "{name:?}"
        );
    }
    let f = sim.open("redo/log0", true).unwrap();
    f.write_all_at(b"old", 0).unwrap();
    assert!(sim.exists("redo/log0"));
    assert!(sim.exists("./redo//log0"));
    assert!(sim.exists("redo"), "a directory with files exists");
    assert!(!sim.exists("red"));
    assert_eq!(sim.file_names(), vec!["redo/log0".to_string()]);

    sim.remove("redo/log0").unwrap();
    assert!(!sim.exists("redo/log0"));
    assert_eq!(
        sim.remove("redo/log0").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert!(sim.crash_image(0).file_bytes("redo/log0").is_none());

    // A handle to the removed file must not reach a new file of the same name.
    let g = sim.open("redo/log0", true).unwrap();
    assert_eq!(
        f.write_all_at(b"x", 0).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(f.len().unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(g.len().unwrap(), 0);
}

#[test]
fn sim_is_fast_for_many_small_writes_and_large_images() {
    let sim = SimStorage::new();
    let log = sim.open("log", true).unwrap();
    let data = sim.open("data", true).unwrap();
    // A 4 MiB data file, durable.
    data.write_all_at(&vec![3; 4 << 20], 0).unwrap();
    data.sync_data().unwrap();

    let start = Instant::now();
    let record = [0x5A; 200];
    for i in 0..20_000u64 {
        log.write_all_at(&record, i * 200).unwrap();
        // Group commit every 8 records: syncing must cost the pending bytes, not the file.
        if i % 8 == 7 {
            log.sync_data().unwrap();
        }
        if i % 4 == 0 {
            data.write_all_at(&[i as u8; 64], (i * 64) % (4 << 20))
                .unwrap();
        }
    }
    let workload = start.elapsed();

    let start = Instant::now();
    for seed in 0..10 {
        let image = sim.crash_image(seed);
        assert_eq!(image.file_bytes("data").unwrap().len(), 4 << 20);
    }
    let per_image = start.elapsed() / 10;
    eprintln!("20k writes + 2.5k syncs: {workload:?}; crash image of ~8 MiB: {per_image:?}");
    assert_eq!(sim.writes(), 1 + 20_000 + 5_000);
    assert_eq!(sim.syncs(), 2_501);
    // Generous bounds: these only catch an accidental O(file size) per operation.
    assert!(workload.as_secs_f64() < 1.0, "{workload:?}");
    assert!(per_image.as_secs_f64() < 0.1, "{per_image:?}");
}

#[test]
fn sim_storage_is_shareable_across_threads() {
    let sim = SimStorage::new();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let sim = sim.clone();
            std::thread::spawn(move || {
                let f = sim.open(&format!("t{t}"), true).unwrap();
                for i in 0..1000u64 {
                    f.write_all_at(&i.to_le_bytes(), i * 8).unwrap();
                }
                f.sync_data().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(sim.writes(), 4000);
    let image = sim.durable_image();
    for t in 0..4 {
        assert_eq!(image.file_bytes(&format!("t{t}")).unwrap().len(), 8000);
    }
}

#[test]
fn injected_faults_hit_the_chosen_calls() {
    use millrace_io::{FaultKind, FaultOp};
    let s = SimStorage::new();
    let f = s.open("a", true).unwrap();
    f.write_all_at(&[1; 100], 0).unwrap();
    // EIO on the 2nd read from now, then every 3rd.
    s.inject_fault(FaultOp::Read, FaultKind::Eio, 2, Some(3));
    let mut buf = [0u8; 10];
    let fails: Vec<bool> = (0..8)
        .map(|_| f.read_exact_at(&mut buf, 0).is_err())
        .collect();
    assert_eq!(fails, [false, true, false, false, true, false, false, true]);
    assert_eq!(s.faults_fired(), 3);
    s.clear_faults();
    // ENOSPC hits only writes that grow the file, and writes nothing.
    s.inject_fault(FaultOp::Write, FaultKind::Enospc, 1, None);
    f.write_all_at(&[2; 10], 0).unwrap();
    let e = f.write_all_at(&[3; 10], 100).unwrap_err();
    assert_eq!(e.raw_os_error(), None);
    assert!(e.to_string().contains("ENOSPC"), "{e}");
    assert_eq!(f.len().unwrap(), 100);
    f.write_all_at(&[3; 10], 100).unwrap();
    // A failed fsync makes nothing durable.
    s.inject_fault(FaultOp::Sync, FaultKind::Eio, 1, None);
    assert!(f.sync_data().is_err());
    assert_eq!(s.durable_bytes("a").unwrap().len(), 0);
    f.sync_data().unwrap();
    assert_eq!(s.durable_bytes("a").unwrap().len(), 110);
}

#[test]
fn sim_lock_is_exclusive_until_dropped() {
    let s = SimStorage::new();
    let held = s.lock_exclusive().unwrap();
    assert_eq!(
        s.clone().lock_exclusive().unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // An image is another machine: not locked.
    let _other = s.crash_image(1).lock_exclusive().unwrap();
    drop(held);
    let _again = s.lock_exclusive().unwrap();
}

#[test]
fn sim_list_names_the_files_of_one_directory() {
    let sim = SimStorage::new();
    assert!(sim.list("spaces").unwrap().is_empty());
    for name in ["spaces/b", "spaces/a", "spaces/sub/c", "spacesx/d", "other"] {
        sim.open(name, true).unwrap();
    }
    assert_eq!(sim.list("spaces").unwrap(), ["a", "b"]);
    assert_eq!(sim.list("./spaces/sub").unwrap(), ["c"]);
    sim.remove("spaces/a").unwrap();
    assert_eq!(sim.list("spaces").unwrap(), ["b"]);
}
