//! Fuzz targets of the transaction layer (docs/design.md, "Fuzzing"):
//! `undo_record` (undo records, roll pointers, secondary key segments) and
//! `data_dir` (a damaged data directory: `check_data_dir` and `Engine::open`
//! must give an error, never panic).
//! `MILLRACE_FUZZ_SECS=300 cargo test -p millrace-trx --test fuzz -- --nocapture`

use millrace_btree::IndexDef;
use millrace_buf::page;
use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::format::{RecordHeader, RecordKind, DATA_OFFSET};
use millrace_redo::{Durability, Log, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::fuzz::{corpus_dir, fuzz_target, fuzz_target_with, write_seeds, Options};
use millrace_trx::check::check_data_dir;
use millrace_trx::undo_rec::{RollPtr, UndoKind, UndoRecord};
use millrace_trx::{
    encode_segments, split_segments, Engine, Isolation, KeyPart, SecondaryDef, TrxConfig,
};
use std::ops::Bound;
use std::sync::Arc;

fn undo_target(input: &[u8]) {
    if let Ok(rec) = UndoRecord::decode(input) {
        assert_eq!(
            rec.encode(),
            input,
            "decode then encode must give the bytes back"
        );
        let _ = RollPtr::decode(rec.prev_roll_ptr);
    }
    if input.len() >= 8 {
        let v = u64::from_le_bytes(input[..8].try_into().unwrap());
        if let Some(rp) = RollPtr::decode(v) {
            let _ = rp.space;
        }
    }
    let n = input.first().map_or(0, |&b| b as usize % 8);
    let _ = split_segments(input, n);
    let def = SecondaryDef {
        index: IndexDef {
            space: 0,
            root: 3,
            id: 1,
            sys_fields: false,
        },
        key: vec![
            KeyPart::Segment(n as u16),
            KeyPart::Bytes {
                offset: input.len() as u16 / 2,
                len: u16::MAX,
            },
            KeyPart::Segment(u16::MAX / 2),
        ],
    };
    let _ = def.key_of(input);
}

#[test]
fn fuzz_undo_record() {
    let rec = |kind, pk: &[u8], prev: Option<&[u8]>| {
        UndoRecord {
            kind,
            undo_no: 3,
            table_id: 7,
            pk: pk.to_vec(),
            prev_trx_id: 99,
            prev_roll_ptr: RollPtr {
                insert: false,
                space: 1,
                page: 12,
                offset: 300,
            }
            .encode(),
            prev_deleted: false,
            prev_value: prev.map(|v| v.to_vec()),
            sec_existed: 0b10,
        }
        .encode()
    };
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "undo_record");
    write_seeds(
        &dir,
        &[
            ("insert", rec(UndoKind::Insert, b"pk-1", None)),
            ("update", rec(UndoKind::Update, b"pk-2", Some(b"old value"))),
            ("delete-mark", rec(UndoKind::DeleteMark, b"", Some(b""))),
            (
                "segments",
                encode_segments(&[b"oslo", b"", b"admin"], b"payload"),
            ),
        ],
    );
    fuzz_target("undo_record", &dir, 100_000, undo_target);
}

fn config() -> TrxConfig {
    let mut c = TrxConfig::default();
    c.store.buf.page_size = 4096;
    c.store.buf.pool_bytes = 1 << 20;
    c.store.log = LogConfig {
        capacity_bytes: 256 << 10,
        buffer_bytes: 64 << 10,
        writer_threads: WriterThreads::Off,
        durability: Durability::Flush,
        recent_written_bytes: 1024,
        recent_closed_bytes: 1024,
        write_chunk_bytes: 16 << 10,
        ..LogConfig::default()
    };
    c.undo_spaces = Some(1);
    c.rsegs = Some(2);
    c.lock_wait_timeout_ms = 200;
    c
}

fn cpu() -> Arc<CpuBudget> {
    CpuBudget::fixed(CpuSnapshot::unconstrained(2))
}

/// Two data directories made by the real engine: shut down cleanly, and
/// crashed with a transaction in flight (so opening it rolls back through
/// the undo log).
struct Images {
    clean: SimStorage,
    crashed: SimStorage,
    /// (LSN, epoch) where a new redo record would go in `clean`'s log.
    log_end: (u64, u32),
}

fn build_images() -> Images {
    let s = SimStorage::new();
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let engine = Engine::open(storage, config(), cpu(), Registry::new()).unwrap();
    let t = engine
        .create_table(&[vec![KeyPart::Bytes { offset: 0, len: 4 }]])
        .unwrap();
    let tx = engine.begin(Isolation::RepeatableRead);
    for i in 0..200u32 {
        tx.insert(
            t,
            &i.to_be_bytes(),
            format!("{:04}-row-{i}", i % 13).as_bytes(),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let tx = engine.begin(Isolation::RepeatableRead);
    for i in (0..200u32).step_by(3) {
        tx.update(t, &i.to_be_bytes(), b"updated").unwrap();
    }
    tx.delete(t, &7u32.to_be_bytes()).unwrap();
    tx.commit().unwrap();
    let open_tx = engine.begin(Isolation::RepeatableRead);
    open_tx
        .insert(t, &5000u32.to_be_bytes(), b"in flight")
        .unwrap();
    open_tx
        .update(t, &1u32.to_be_bytes(), b"in flight")
        .unwrap();
    // Make the in-flight changes durable without committing them.
    let tx = engine.begin(Isolation::RepeatableRead);
    tx.insert(t, &6000u32.to_be_bytes(), b"flush").unwrap();
    tx.commit().unwrap();
    let crashed = s.durable_image();
    open_tx.rollback().unwrap();
    engine.shutdown().unwrap();
    drop(engine);
    let clean = s.clean_image();
    // Where the log ends: open a copy of it (which appends its own epoch
    // start record there) and read the report.
    let probe = clean.clean_image();
    let (log, report) = Log::open(
        &probe,
        config().store.log,
        cpu(),
        &Registry::new(),
        &mut |_| Ok(()),
    )
    .unwrap();
    log.shutdown().unwrap();
    Images {
        clean,
        crashed,
        log_end: (report.end_lsn, report.new_epoch),
    }
}

/// Reads a little-endian integer of `n` bytes, 0 past the end.
fn take(input: &mut &[u8], n: usize) -> u64 {
    let k = n.min(input.len());
    let mut b = [0u8; 8];
    b[..k].copy_from_slice(&input[..k]);
    *input = &input[k..];
    u64::from_le_bytes(b)
}

/// Applies the input to a copy of a base image. Byte 0: bit 0 picks the
/// base (clean or crashed), bit 1 the mode. Patch mode: a list of (file u8,
/// offset u32, len u8, bytes); the file's bit 7 clear reseals the patched
/// page's checksum so that the checks behind it run. Redo mode: the rest
/// is the payload of one well-formed redo record appended to the log.
fn damaged(images: &Images, input: &[u8]) -> SimStorage {
    let mut input = input;
    let mode = take(&mut input, 1);
    let img = if mode & 1 == 0 {
        images.clean.clean_image()
    } else {
        images.crashed.clean_image()
    };
    let log_name = config().store.log.file_name;
    if mode & 2 != 0 {
        let (lsn, epoch) = images.log_end;
        let payload = &input[..input.len().min(16 << 10)];
        let h = RecordHeader {
            len: payload.len() as u32,
            lsn,
            epoch,
            kind: RecordKind::Data,
        };
        let mut rec = h.encode(payload).to_vec();
        rec.extend_from_slice(payload);
        let capacity = config().store.log.capacity_bytes;
        let pos = lsn % capacity;
        let first = rec.len().min((capacity - pos) as usize);
        img.corrupt(&log_name, DATA_OFFSET + pos, &rec[..first]);
        if first < rec.len() {
            img.corrupt(&log_name, DATA_OFFSET, &rec[first..]);
        }
        return img;
    }
    let names = img.file_names();
    for _ in 0..16 {
        if input.is_empty() {
            break;
        }
        let file = take(&mut input, 1) as usize;
        let name = &names[(file & 0x7f) % names.len()];
        let len_file = img.file_bytes(name).map_or(0, |b| b.len()) as u64;
        let offset = take(&mut input, 4) % len_file.max(1);
        let n = take(&mut input, 1) as usize;
        let bytes = input[..n.min(input.len())].to_vec();
        input = &input[bytes.len()..];
        img.corrupt(name, offset, &bytes);
        let page_size = config().store.buf.page_size as u64;
        if file & 0x80 == 0 && name.ends_with(".mrs") {
            let content = img.file_bytes(name).unwrap();
            let start = (offset / page_size * page_size) as usize;
            if start + page_size as usize <= content.len() {
                let mut p = content[start..start + page_size as usize].to_vec();
                page::seal(&mut p);
                img.corrupt(name, start as u64, &p[..4]);
            }
        }
    }
    img
}

/// A known, unfixed class (fuzz/known/README.md): a redo op naming a page
/// far past its space's end makes recovery grow the file to it, which the
/// simulated disk materialises (seconds per input). Such inputs are skipped
/// so that the runs look for other problems; remove this with the fix.
fn names_a_far_page(input: &[u8]) -> bool {
    use millrace_buf::ops::{Op, OpReader};
    let far = |id: page::PageId| id.page >= 1 << 12;
    input.first().is_some_and(|m| m & 2 != 0)
        && OpReader::new(&input[1..]).flatten().any(|op| match op {
            Op::Write { id, .. } | Op::Move { id, .. } | Op::Init { id, .. } => far(id),
            Op::CreateSpace { .. } => false,
        })
}

fn data_dir_target(images: &Images, input: &[u8]) {
    if names_a_far_page(input) {
        return;
    }
    let img = damaged(images, input);
    let copy = img.clean_image();
    let _ = check_data_dir(Arc::new(img), 1 << 20, cpu());
    let Ok(engine) = Engine::open(Arc::new(copy), config(), cpu(), Registry::new()) else {
        return;
    };
    for t in engine.table_ids() {
        let tx = engine.begin(Isolation::ReadCommitted);
        let _ = tx.scan(t, Bound::Unbounded, Bound::Unbounded, 1000);
        let _ = tx.scan_secondary(t, 0, b"", b"\xff\xff\xff\xff", 1000);
        let _ = tx.insert(t, b"new key", b"new value");
        let _ = tx.commit();
    }
    let _ = engine.shutdown();
}

#[test]
fn fuzz_data_dir() {
    let images = build_images();
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "data_dir");
    let names = images.clean.file_names();
    eprintln!("data_dir files: {names:?}");
    let patch = |mode: u8, file: &str, offset: u32, bytes: &[u8]| {
        let i = names.iter().position(|n| n == file).unwrap() as u8;
        let mut v = vec![mode, i];
        v.extend_from_slice(&offset.to_le_bytes());
        v.push(bytes.len() as u8);
        v.extend_from_slice(bytes);
        v
    };
    let mut redo_ops = vec![2u8];
    millrace_buf::ops::encode_write(&mut redo_ops, page::PageId::new(0, 3), 64, b"redo");
    millrace_buf::ops::encode_move(&mut redo_ops, page::PageId::new(0, 1), 40, 48, 8);
    millrace_buf::ops::encode_create_space(&mut redo_ops, 9);
    let space0 = millrace_buf::files::space_file_name(0);
    let space0 = space0.as_str();
    write_seeds(
        &dir,
        &[
            ("nothing", vec![0]),
            ("crashed", vec![1]),
            ("trx-sys-page", patch(0, space0, 4096 + 56, &[0xff, 0xff])),
            (
                "tables-page",
                patch(1, space0, 2 * 4096 + 40, &[7, 7, 7, 7]),
            ),
            ("space-header", patch(0, space0, 32, &[0; 8])),
            ("index-root", patch(1, space0, 3 * 4096 + 34, &[0x40, 0])),
            ("redo-ops", redo_ops),
        ],
    );
    let opts = Options::new(300);
    fuzz_target_with("data_dir", &dir, opts, move |input: &[u8]| {
        data_dir_target(&images, input)
    });
}
