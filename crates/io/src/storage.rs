//! The storage traits every backend implements, and the file-name rule
//! both backends share.

use std::io;
use std::path::{Component, Path};
use std::sync::Arc;

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

    /// Names (without the directory) of the files directly in directory
    /// `dir`, sorted; empty when there is no such directory. Lets a reader
    /// go by the files that exist rather than by a count read from a
    /// possibly damaged header.
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;
    /// Takes the exclusive lock on the whole namespace (the data directory),
    /// held until the returned guard is dropped. A second taker, in this
    /// process or another, gets an error (kind `WouldBlock`) naming the
    /// directory, instead of two engines recovering and writing the same
    /// files. The default, for backends no other process can see, locks
    /// nothing.
    fn lock_exclusive(&self) -> io::Result<StorageLock> {
        Ok(StorageLock::none())
    }
}

/// Holds a [`Storage::lock_exclusive`] lock; dropping it releases the lock.
pub struct StorageLock {
    _held: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl StorageLock {
    /// A guard that holds nothing.
    pub fn none() -> Self {
        Self { _held: None }
    }

    /// A guard whose `held` value releases the lock when dropped.
    pub fn new(held: Box<dyn std::any::Any + Send + Sync>) -> Self {
        Self { _held: Some(held) }
    }
}

impl std::fmt::Debug for StorageLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageLock")
            .field("held", &self._held.is_some())
            .finish()
    }
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
