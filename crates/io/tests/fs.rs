//! FsStorage against the real file system, in private temporary directories.

use std::io::ErrorKind;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use millrace_io::{AlignedBuf, FsStorage, Storage};

/// A directory removed when the test ends, even by panicking. pid plus a counter keeps
/// parallel tests, and parallel runs of this binary, out of each other's way.
struct TempDir(PathBuf);

impl TempDir {
    fn new_in(parent: &Path, tag: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("millrace-io-{tag}-{}-{n}", std::process::id()));
        // Left over from a crashed earlier run with a recycled pid: start clean.
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }

    fn new(tag: &str) -> Self {
        Self::new_in(&std::env::temp_dir(), tag)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A direct-I/O storage in the first candidate directory whose file system accepts O_DIRECT:
/// the system temp dir, then cargo's target tmp dir (usually a disk even where /tmp is tmpfs).
/// None, after printing a note, where neither does.
fn direct_storage(tag: &str) -> Option<(TempDir, FsStorage)> {
    let candidates = [
        std::env::temp_dir(),
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    ];
    for parent in candidates {
        let dir = TempDir::new_in(&parent, tag);
        match FsStorage::new(dir.path(), true) {
            Ok(storage) => return Some((dir, storage)),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unsupported, "unexpected error: {e}");
                assert!(
                    e.to_string().contains("O_DIRECT"),
                    "the refusal must name O_DIRECT: {e}"
                );
                eprintln!("note: {} does not support O_DIRECT ({e})", parent.display());
            }
        }
    }
    eprintln!("note: no candidate directory supports O_DIRECT; direct I/O test skipped");
    None
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn fs_round_trip_write_read_len_set_len_reopen() {
    let dir = TempDir::new("roundtrip");
    let storage = FsStorage::new(dir.path().join("root"), false).unwrap();
    assert_eq!(storage.root(), dir.path().join("root"));
    assert!(storage.root().is_dir());

    let file = storage.open("redo/log0", true).unwrap();
    assert_eq!(file.alignment(), 1);
    assert_eq!(file.len().unwrap(), 0);
    assert!(file.is_empty().unwrap());

    let data = pattern(10_000, 7);
    file.write_all_at(&data, 0).unwrap();
    // A write past the end extends the file with a zero-filled gap.
    file.write_all_at(b"tail", 20_000).unwrap();
    file.sync_data().unwrap();
    assert_eq!(file.len().unwrap(), 20_004);

    let mut back = vec![0; data.len()];
    file.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(back, data);
    let mut gap = vec![1; 100];
    file.read_exact_at(&mut gap, 15_000).unwrap();
    assert!(gap.iter().all(|&b| b == 0));

    file.set_len(5_000).unwrap();
    assert_eq!(file.len().unwrap(), 5_000);
    file.set_len(6_000).unwrap();
    let mut extended = vec![1; 1_000];
    file.read_exact_at(&mut extended, 5_000).unwrap();
    assert!(extended.iter().all(|&b| b == 0), "extension is zero-filled");
    file.sync_data().unwrap();
    drop(file);

    // Reopening without create sees the same bytes, and so does a second storage object.
    assert!(storage.exists("redo/log0"));
    assert!(storage.exists("redo"));
    let again = FsStorage::new(dir.path().join("root"), false).unwrap();
    let file = again.open("redo/log0", false).unwrap();
    assert_eq!(file.len().unwrap(), 6_000);
    let mut back = vec![0; 5_000];
    file.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(back, data[..5_000]);

    // Opening with create keeps existing content.
    let file = again.open("redo/log0", true).unwrap();
    assert_eq!(file.len().unwrap(), 6_000);
}

#[test]
fn fs_open_missing_remove_and_exists() {
    let dir = TempDir::new("remove");
    let storage = FsStorage::new(dir.path(), false).unwrap();
    let err = storage.open("nope", false).err().expect("missing file");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(!storage.exists("nope"));

    storage.open("a/b/c/data", true).unwrap();
    assert!(storage.exists("a/b/c/data"));
    assert!(
        storage.exists("./a/b/c/data"),
        "spellings are canonicalised"
    );
    storage.remove("a/b/c/data").unwrap();
    assert!(!storage.exists("a/b/c/data"));
    assert_eq!(
        storage.remove("a/b/c/data").unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn fs_rejects_names_outside_root() {
    let dir = TempDir::new("names");
    let storage = FsStorage::new(dir.path(), false).unwrap();
    for name in ["", "/etc/passwd", "../escape", "a/../../escape", "."] {
        let err = storage.open(name, true).err().expect(name);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name:?}: {err}");
        assert!(!storage.exists(name));
    }
}

#[test]
fn fs_read_past_eof_is_unexpected_eof() {
    let dir = TempDir::new("eof");
    let storage = FsStorage::new(dir.path(), false).unwrap();
    let file = storage.open("f", true).unwrap();
    file.write_all_at(&[5; 100], 0).unwrap();
    let mut buf = [0; 50];
    // Wholly past the end, and straddling it.
    for offset in [100, 1_000, 60] {
        let err = file.read_exact_at(&mut buf, offset).unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::UnexpectedEof,
            "offset {offset}: {err}"
        );
    }
    file.read_exact_at(&mut buf, 50).unwrap();
    assert_eq!(buf, [5; 50]);
}

#[test]
fn fs_direct_io_round_trip_with_aligned_buf() {
    let Some((_dir, storage)) = direct_storage("direct") else {
        return;
    };
    assert!(storage.direct_io());
    let file = storage.open("data/ibdata", true).unwrap();
    assert_eq!(file.alignment(), 4096);

    let mut page = AlignedBuf::zeroed(8192, file.alignment());
    page.copy_from_slice(&pattern(8192, 3));
    file.write_all_at(&page, 4096).unwrap();
    file.sync_data().unwrap();
    assert_eq!(file.len().unwrap(), 4096 + 8192);

    let mut back = AlignedBuf::zeroed(8192, 4096);
    file.read_exact_at(&mut back, 4096).unwrap();
    assert_eq!(&back[..], &page[..]);
    let mut head = AlignedBuf::zeroed(4096, 4096);
    file.read_exact_at(&mut head, 0).unwrap();
    assert!(head.iter().all(|&b| b == 0));

    let err = file.read_exact_at(&mut back, 8192).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof, "{err}");

    // A file whose length is not aligned (set_len needs no alignment): reading across its end
    // must report the end, not the EINVAL a naive retry at an unaligned offset would get.
    file.set_len(4096 + 100).unwrap();
    let err = file.read_exact_at(&mut back, 4096).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof, "{err}");
    drop(file);

    let file = storage.open("data/ibdata", false).unwrap();
    assert_eq!(file.len().unwrap(), 4096 + 100);
}

#[test]
fn fs_direct_io_misaligned_is_error() {
    let Some((_dir, storage)) = direct_storage("misaligned") else {
        return;
    };
    let file = storage.open("f", true).unwrap();
    let aligned = AlignedBuf::zeroed(8192, 4096);
    file.write_all_at(&aligned, 0).unwrap();

    let misaligned_address = &aligned[1..4097];
    let short_length = &aligned[..100];
    let cases: [(&[u8], u64); 3] = [
        (misaligned_address, 0),
        (short_length, 0),
        (&aligned[..4096], 512),
    ];
    for (buf, offset) in cases {
        // Debug builds treat misalignment as the bug it is and panic; release builds return
        // InvalidInput. Either way nothing reaches the kernel.
        expect_misaligned(panic::catch_unwind(AssertUnwindSafe(|| {
            file.write_all_at(buf, offset)
        })));
        let mut read_buf = AlignedBuf::zeroed(8192, 4096);
        let read_slice: &mut [u8] = if buf.len() == 100 {
            &mut read_buf[..100]
        } else if buf.as_ptr() as usize & 4095 != 0 {
            &mut read_buf[1..4097]
        } else {
            &mut read_buf[..4096]
        };
        expect_misaligned(panic::catch_unwind(AssertUnwindSafe(|| {
            file.read_exact_at(read_slice, offset)
        })));
    }
    assert_eq!(file.len().unwrap(), 8192, "no misaligned write got through");
}

/// What misaligned direct I/O must produce: a panic in debug builds, InvalidInput in release.
fn expect_misaligned(outcome: std::thread::Result<std::io::Result<()>>) {
    let debug = cfg!(debug_assertions);
    match outcome {
        Err(_) if debug => {}
        Ok(Err(e)) if !debug => assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}"),
        Err(_) => panic!("release builds must return an error, not panic"),
        Ok(result) => panic!("debug builds must panic on misaligned I/O, got {result:?}"),
    }
}

#[test]
fn aligned_buf_is_aligned_zeroed_and_owned() {
    for align in [1, 8, 512, 4096, 65536] {
        for len in [0, 1, 511, 4096, 10_000] {
            let mut buf = AlignedBuf::zeroed(len, align);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.align(), align);
            assert_eq!(
                buf.as_ptr() as usize & (align - 1),
                0,
                "len {len} align {align}"
            );
            assert!(buf.iter().all(|&b| b == 0));
            buf.fill(0xAB);
            let copy = buf.clone();
            assert_eq!(&copy[..], &buf[..]);
            assert_eq!(copy.as_ptr() as usize & (align - 1), 0);
        }
    }
    // Send + Sync, so pages can move between threads.
    let buf = AlignedBuf::zeroed(4096, 4096);
    let sum = std::thread::spawn(move || buf.iter().map(|&b| b as u64).sum::<u64>())
        .join()
        .unwrap();
    assert_eq!(sum, 0);
}

#[test]
#[should_panic(expected = "power of two")]
fn aligned_buf_rejects_non_power_of_two_alignment() {
    AlignedBuf::zeroed(100, 3);
}

#[test]
fn fs_lock_is_exclusive_and_released_on_drop() {
    let dir = TempDir::new("lock");
    let a = FsStorage::new(dir.path(), false).unwrap();
    let b = FsStorage::new(dir.path(), false).unwrap();
    let held = a.lock_exclusive().unwrap();
    let e = b.lock_exclusive().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    assert!(
        e.to_string().contains(&dir.path().display().to_string()),
        "the error names the directory: {e}"
    );
    drop(held);
    let _again = b.lock_exclusive().expect("free after the holder drops it");
}

#[test]
fn fs_creates_private_directories_and_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("perm");
    // A permissive umask must not widen what is created.
    // SAFETY: umask only changes this process's creation mask.
    let old = unsafe { libc::umask(0o000) };
    let made = (|| {
        let root = dir.path().join("data");
        let s = FsStorage::new(&root, false)?;
        s.open("spaces/0000000001.mrs", true)?;
        s.lock_exclusive()?;
        Ok::<_, std::io::Error>(root)
    })();
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    let root = made.unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&root.join("spaces")), 0o700);
    assert_eq!(mode(&root.join("spaces/0000000001.mrs")), 0o600);
    assert_eq!(mode(&root.join("millrace.lock")), 0o600);
}

#[test]
fn fs_list_names_the_files_of_one_directory() {
    let dir = TempDir::new("list");
    let storage = FsStorage::new(dir.path(), false).unwrap();
    assert!(
        storage.list("spaces").unwrap().is_empty(),
        "no directory yet"
    );
    for name in ["spaces/b", "spaces/a", "spaces/sub/c", "other"] {
        storage.open(name, true).unwrap();
    }
    assert_eq!(storage.list("spaces").unwrap(), ["a", "b"]);
    assert_eq!(storage.list("spaces/sub").unwrap(), ["c"]);
    assert!(storage.list("../x").is_err(), "names outside the root");
}
