//! Fuzz target `redo_log` (docs/design.md, "Fuzzing"): hostile bytes as a
//! redo log file. The header decoders and `Log::open` (the recovery scan)
//! must give an error or a clean stop, never a panic. Each input is opened
//! twice: as it is, and with every checksum the scan would meet recomputed,
//! so that mutations reach the checks behind the checksums.
//! The input is the file's start; the target pads it with zeros to the size
//! of a log of `CAPACITY` (so the corpus files stay small).
//! `MILLRACE_FUZZ_SECS=300 cargo test -p millrace-redo --test fuzz -- --nocapture`

use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::format::{Checkpoint, FileHeader, RecordHeader, BLOCK, DATA_OFFSET};
use millrace_redo::{Durability, Log, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::fuzz::{corpus_dir, fuzz_target_with, write_seeds, Options};

/// The smallest capacity a log may have: small images, short scans.
const CAPACITY: u64 = 16 * BLOCK;

fn config() -> LogConfig {
    LogConfig {
        capacity_bytes: CAPACITY,
        buffer_bytes: 16 << 10,
        recent_written_bytes: 64,
        recent_closed_bytes: 64,
        writer_threads: WriterThreads::Off,
        durability: Durability::Flush,
        write_chunk_bytes: 8 << 10,
        ..LogConfig::default()
    }
}

fn cpu() -> std::sync::Arc<CpuBudget> {
    CpuBudget::fixed(CpuSnapshot::unconstrained(2))
}

/// Opens a log whose file holds `image`; the applier refuses payloads
/// that start with 0xEE (an apply error mid-scan).
fn open_image(image: &[u8]) {
    let s = SimStorage::new();
    let cfg = config();
    let f = s.open(&cfg.file_name, true).expect("sim open");
    f.write_all_at(image, 0).expect("sim write");
    drop(f);
    let mut records = 0u64;
    let opened = Log::open(&s, cfg, cpu(), &Registry::new(), &mut |r| {
        assert!(
            r.start_lsn < r.end_lsn,
            "record {}..{}",
            r.start_lsn,
            r.end_lsn
        );
        records += 1;
        if r.payload.first() == Some(&0xEE) {
            return Err("refused".into());
        }
        Ok(())
    });
    if let Ok((log, report)) = opened {
        assert_eq!(report.records, records);
        assert!(report.end_lsn >= report.checkpoint_lsn);
        // The reopened log must work: one commit, then a clean shutdown.
        let _ = log.commit(b"after recovery");
        let _ = log.shutdown();
    }
}

/// The byte range of LSN `lsn`'s `len` bytes in the circular region, as
/// file offsets (one or two pieces).
fn circular(lsn: u64, len: usize, capacity: u64) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut at, mut left) = (lsn, len as u64);
    while left > 0 {
        let pos = at % capacity;
        let n = left.min(capacity - pos);
        out.push(((DATA_OFFSET + pos) as usize, n as usize));
        at += n;
        left -= n;
    }
    out
}

fn read_circ(img: &[u8], lsn: u64, len: usize, capacity: u64) -> Vec<u8> {
    circular(lsn, len, capacity)
        .into_iter()
        .flat_map(|(at, n)| img[at..at + n].to_vec())
        .collect()
}

fn write_circ(img: &mut [u8], lsn: u64, bytes: &[u8], capacity: u64) {
    let mut done = 0;
    for (at, n) in circular(lsn, bytes.len(), capacity) {
        img[at..at + n].copy_from_slice(&bytes[done..done + n]);
        done += n;
    }
}

/// Recomputes the checksums of the header, both checkpoint slots and the
/// records the scan would walk through, keeping every other field.
fn fix_checksums(img: &mut [u8]) {
    let b = BLOCK as usize;
    if &img[0..8] == b"MLRCREDO" {
        let crc = crc32c::crc32c(&img[0..32]);
        img[32..36].copy_from_slice(&crc.to_le_bytes());
    }
    let mut best: Option<Checkpoint> = None;
    for slot in 1..3 {
        let at = slot * b;
        if &img[at..at + 8] == b"MLRCCKPT" {
            img[at + 8..at + 10].copy_from_slice(&1u16.to_le_bytes());
            let crc = crc32c::crc32c(&img[at..at + 32]);
            img[at + 32..at + 36].copy_from_slice(&crc.to_le_bytes());
        }
        if let Some(cp) = Checkpoint::decode(&img[at..at + b]) {
            if best.is_none_or(|x| cp.number > x.number) {
                best = Some(cp);
            }
        }
    }
    let (Ok(header), Some(cp)) = (FileHeader::decode(img), best) else {
        return;
    };
    if DATA_OFFSET.saturating_add(header.capacity) > img.len() as u64 {
        return;
    }
    let capacity = header.capacity;
    let mut lsn = cp.lsn;
    for _ in 0..64 {
        let head = read_circ(img, lsn, RecordHeader::LEN, capacity);
        let Some(h) = RecordHeader::decode(&head, (capacity / 4) as u32) else {
            return;
        };
        let payload = read_circ(
            img,
            lsn + RecordHeader::LEN as u64,
            h.len as usize,
            capacity,
        );
        write_circ(img, lsn, &h.encode(&payload), capacity);
        lsn += RecordHeader::LEN as u64 + h.len as u64;
    }
}

fn target(input: &[u8]) {
    let _ = FileHeader::decode(input);
    let _ = Checkpoint::decode(input);
    let _ = RecordHeader::decode(input, u32::MAX);
    let _ = RecordHeader::verify(input, input.get(24..).unwrap_or(&[]));
    let mut img = input.to_vec();
    img.resize(img.len().max((DATA_OFFSET + CAPACITY) as usize), 0);
    open_image(&img);
    fix_checksums(&mut img);
    open_image(&img);
}

/// Real logs: fresh, with records, wrapped around, after a checkpoint.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let image = |records: usize, len: usize, checkpoint: bool| {
        let s = SimStorage::new();
        let log = Log::create(&s, config(), cpu(), &Registry::new()).unwrap();
        for i in 0..records {
            let mut p = vec![i as u8; len];
            p[0] = 1;
            let lsn = log.commit(&p).unwrap();
            if checkpoint && i >= records / 2 {
                log.checkpoint(lsn).unwrap();
            }
        }
        log.shutdown().unwrap();
        let mut b = s.file_bytes(&config().file_name).unwrap();
        // Trailing zeros come back as padding.
        let end = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
        b.truncate(end);
        b
    };
    vec![
        ("fresh", image(0, 0, false)),
        ("records", image(12, 40, false)),
        ("wrapped", image(40, 3000, true)),
        ("checkpointed", image(8, 100, true)),
    ]
}

#[test]
fn fuzz_redo_log() {
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "redo_log");
    write_seeds(&dir, &seeds());
    // Edits gather at the header, the checkpoint slots and the first records.
    let b = BLOCK as usize;
    let opts = Options::new(1500).focus(&[0, b, 2 * b, 3 * b, 3 * b + 64]);
    fuzz_target_with("redo_log", &dir, opts, target);
}
