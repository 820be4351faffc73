//! File access for millrace: every byte the engine reads from or writes to disk goes through
//! the [`Storage`] / [`StorageFile`] traits defined here.
//!
//! The crate owns:
//! - the traits themselves (positional reads and writes, `fdatasync`, length changes);
//! - [`FsStorage`], the real backend: `pread`/`pwrite`/`fdatasync` on `std::fs::File`, with
//!   optional `O_DIRECT` (and [`AlignedBuf`] for the aligned buffers that requires);
//! - [`SimStorage`], an in-memory backend for deterministic crash tests: it remembers which
//!   writes are durable, can be told to "crash" after a given number of writes, and produces
//!   the images a power loss could leave behind (unsynced writes dropped, kept, torn per
//!   512-byte sector, reordered).
//!
//! - [`bytes::ByteReader`], the bounds-checked reader every decoder of on-disk bytes uses.
//!
//! It must not know about log records, pages, transactions or SQL: it moves bytes at offsets
//! in named files, and the meaning of those bytes belongs to the crates above it. Keeping it
//! that ignorant is what lets the simulated backend stand in for the real one everywhere.

use std::alloc::{self, Layout};
use std::fmt;
use std::io;
use std::ops::{Deref, DerefMut};
use std::path::{Component, Path};
use std::ptr::NonNull;
use std::sync::Arc;

pub mod bytes;
mod fs;
mod sim;

pub use fs::FsStorage;
pub use sim::SimStorage;

/// The alignment `O_DIRECT` files demand of buffer addresses, lengths and offsets. 4096 rather
/// than the device's logical block size (often 512) because it satisfies both 512- and
/// 4096-byte devices and matches the page size, so callers need no per-device probing.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// A namespace of files under one root: the real file system or a simulation of it.
pub trait Storage: Send + Sync + 'static {
    /// Opens (creating it if `create`) the file at `name`, a relative path like "redo/log0" under the storage's root.
    /// Creating also creates parent directories, and on the real backend fsyncs the parent directory so the new name is durable.
    ///
    /// `name` must be relative and must not contain `..` (an `InvalidInput` error otherwise), so
    /// that nothing outside the root can be reached by a malformed name.
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>>;

    /// Whether a file (or, on the real backend, any entry) exists at `name`.
    fn exists(&self, name: &str) -> bool;

    /// Removes the file at `name`; the removal is durable when this returns.
    fn remove(&self, name: &str) -> io::Result<()>;
}

/// One open file. All access is positional, so a file can be shared between threads without
/// a cursor to fight over.
pub trait StorageFile: Send + Sync {
    /// Reads exactly buf.len() bytes at offset; a short file gives ErrorKind::UnexpectedEof.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Writes all of `buf` at `offset`, extending the file (zero-filling any gap) if needed.
    /// The write is not durable until a later [`StorageFile::sync_data`] succeeds.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Makes every completed write durable (fdatasync).
    ///
    /// A failure must be treated as fatal by the caller: after a failed fsync the kernel may
    /// already have dropped the dirty data, so retrying can falsely report success.
    fn sync_data(&self) -> io::Result<()>;

    fn len(&self) -> io::Result<u64>;

    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Extends (zero-filled) or truncates.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// 1 for buffered I/O; with O_DIRECT, 4096: buffer addresses, lengths and offsets must be multiples of it.
    fn alignment(&self) -> usize;
}

/// A heap buffer whose address is aligned (for O_DIRECT). Deref/DerefMut to [u8]; zero-initialised; Send + Sync.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation, exactly like a Vec<u8>; shared access only
// hands out `&[u8]`, and mutation needs `&mut self`.
unsafe impl Send for AlignedBuf {}
// SAFETY: see above; `&AlignedBuf` only gives read access.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zero-filled buffer of `len` bytes whose address is a multiple of `align`.
    ///
    /// # Panics
    /// If `align` is not a power of two or `len` rounded up to `align` overflows `isize`:
    /// both are programming errors, like asking a `Vec` for an impossible capacity.
    pub fn zeroed(len: usize, align: usize) -> Self {
        assert!(
            align.is_power_of_two(),
            "AlignedBuf alignment must be a power of two, got {align}"
        );
        if len == 0 {
            // The allocator may not be asked for zero bytes; a dangling but aligned pointer is
            // what Vec uses too, and it is never dereferenced for a zero-length slice.
            let ptr = NonNull::new(align as *mut u8).expect("a power of two is non-zero");
            return Self { ptr, len, align };
        }
        let layout = Self::layout(len, align);
        // SAFETY: layout has a non-zero size (len > 0).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Self { ptr, len, align }
    }

    /// The alignment the buffer was created with (its address is a multiple of it).
    pub fn align(&self) -> usize {
        self.align
    }

    fn layout(len: usize, align: usize) -> Layout {
        Layout::from_size_align(len, align).unwrap_or_else(|e| {
            panic!("AlignedBuf of {len} bytes aligned to {align} is not allocatable: {e}")
        })
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout, and not freed before.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len, self.align)) }
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes (zeroed at allocation) for as long as
        // self lives, or dangling-but-aligned with len == 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut copy = Self::zeroed(self.len, self.align);
        copy.copy_from_slice(self);
        copy
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The contents are usually a 4 KiB page or more; printing them helps nobody.
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.align)
            .finish()
    }
}

/// Validates a file name and returns its canonical form (normal components joined by '/').
///
/// Names that are empty, absolute or climb with `..` are rejected, so both backends accept
/// exactly the same names and neither can be steered outside its root. Canonicalising
/// ("redo/./log0/" becomes "redo/log0") makes the simulated backend, which keys files by name,
/// agree with the file system about which spellings mean the same file.
pub(crate) fn canonical_name(name: &str) -> io::Result<String> {
    let mut parts = Vec::new();
    let mut well_formed = true;
    for component in Path::new(name).components() {
        match component {
            Component::Normal(part) => match part.to_str() {
                Some(part) => parts.push(part),
                None => well_formed = false,
            },
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => well_formed = false,
        }
    }
    if well_formed && !parts.is_empty() {
        Ok(parts.join("/"))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("storage file name {name:?} must be a relative path without '..'"),
        ))
    }
}

/// Checks the `O_DIRECT` contract: buffer address, length and file offset all multiples of
/// `align`. Shared by the real backend (where the kernel would answer a bare EINVAL) and the
/// simulated one (which has no kernel to complain), so both fail the same clear way.
pub(crate) fn check_aligned(addr: usize, len: usize, offset: u64, align: usize) -> io::Result<()> {
    if align <= 1 {
        return Ok(());
    }
    // align is a power of two (AlignedBuf, DIRECT_IO_ALIGN, SimStorage all insist), so a
    // mask test is exact.
    let mask = align as u64 - 1;
    if (addr as u64 | len as u64 | offset) & mask == 0 {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "misaligned direct I/O: buffer address {addr:#x}, length {len}, offset {offset} \
                 must all be multiples of {align}"
            ),
        ))
    }
}
