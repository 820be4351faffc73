//! The real backend: files under a root directory, accessed with `pread`/`pwrite`/`fdatasync`
//! and optionally `O_DIRECT`.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::aligned::{check_aligned, DIRECT_IO_ALIGN};
use crate::storage::{canonical_name, Storage, StorageFile, StorageLock};

/// The lock file `lock_exclusive` locks, in the root.
pub const LOCK_FILE: &str = "millrace.lock";

/// Permissions of what the backend creates: the data is the owner's alone,
/// whatever the umask would allow.
const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// Files under a root directory on the real file system.
#[derive(Debug)]
pub struct FsStorage {
    root: PathBuf,
    direct_io: bool,
}

impl FsStorage {
    /// root directory (created if missing). direct_io: open files with O_DIRECT (Linux); if the file system refuses O_DIRECT (EINVAL, e.g. tmpfs), return an error whose message says so clearly.
    ///
    /// With `direct_io` the refusal is detected here, by opening a probe file, rather than at
    /// the first `open`: a server configured for direct I/O on the wrong file system should
    /// fail at startup, not when it first creates a data file. The error's kind is
    /// `Unsupported`. Off Linux, asking for direct I/O is always that error.
    pub fn new(root: impl Into<PathBuf>, direct_io: bool) -> io::Result<Self> {
        let root = root.into();
        create_dir_durable(&root)
            .map_err(|e| with_context(e, "cannot create storage root", &root))?;
        let storage = Self { root, direct_io };
        if direct_io {
            storage.probe_direct_io()?;
        }
        Ok(storage)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether files are opened with `O_DIRECT`.
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }

    fn probe_direct_io(&self) -> io::Result<()> {
        #[cfg(not(target_os = "linux"))]
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "direct I/O (O_DIRECT) is only supported on Linux; turn direct I/O off",
        ));
        // The pid keeps two processes probing the same root from removing each other's file.
        let probe = self
            .root
            .join(format!(".millrace-direct-io-probe-{}", std::process::id()));
        let opened = self.options(true).open(&probe);
        let removed = fs::remove_file(&probe);
        opened.map_err(|e| self.open_error(e, &probe))?;
        removed.map_err(|e| with_context(e, "cannot remove direct I/O probe file", &probe))
    }

    fn options(&self, create: bool) -> OpenOptions {
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(true)
            .create(create)
            .mode(FILE_MODE);
        #[cfg(target_os = "linux")]
        if self.direct_io {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_DIRECT);
        }
        options
    }

    fn open_error(&self, e: io::Error, path: &Path) -> io::Error {
        if self.direct_io && e.raw_os_error() == Some(libc::EINVAL) {
            return io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "direct I/O (O_DIRECT) is not supported for {}: the file system refused it \
                     ({e}); tmpfs and some others do not support O_DIRECT, so put the storage \
                     root on a disk file system or turn direct I/O off",
                    path.display()
                ),
            );
        }
        with_context(e, "cannot open", path)
    }
}

impl Storage for FsStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let path = self.root.join(canonical_name(name)?);
        let file = if create {
            let parent = path.parent().unwrap_or(&self.root);
            create_dir_durable(parent)
                .map_err(|e| with_context(e, "cannot create directory", parent))?;
            // create_new tells us whether this call made the name, and only a new name needs
            // its directory synced; an existing file is simply opened.
            let mut new = self.options(false);
            new.create_new(true);
            match new.open(&path) {
                Ok(file) => {
                    sync_dir(parent)
                        .map_err(|e| with_context(e, "cannot fsync directory", parent))?;
                    file
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self
                    .options(false)
                    .open(&path)
                    .map_err(|e| self.open_error(e, &path))?,
                Err(e) => return Err(self.open_error(e, &path)),
            }
        } else {
            self.options(false)
                .open(&path)
                .map_err(|e| self.open_error(e, &path))?
        };
        Ok(Arc::new(FsFile {
            file,
            path,
            direct_io: self.direct_io,
        }))
    }

    fn exists(&self, name: &str) -> bool {
        canonical_name(name).is_ok_and(|name| self.root.join(name).exists())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let path = self.root.join(canonical_name(name)?);
        fs::remove_file(&path).map_err(|e| with_context(e, "cannot remove", &path))?;
        // Without syncing the directory the file could reappear after a power loss.
        let parent = path.parent().unwrap_or(&self.root);
        sync_dir(parent).map_err(|e| with_context(e, "cannot fsync directory", parent))
    }

    /// flock(LOCK_EX | LOCK_NB) on `millrace.lock` in the root. flock locks
    /// belong to the open file, so a second open in the same process
    /// conflicts too, and the kernel drops the lock when the process dies
    /// (no stale lock after a crash).
    fn lock_exclusive(&self) -> io::Result<StorageLock> {
        let path = self.root.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .open(&path)
            .map_err(|e| with_context(e, "cannot open lock file", &path))?;
        // SAFETY: flock on a descriptor this function owns; no memory involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "data directory {} is in use by another millrace server or check \
                         (its lock file {} is locked); stop that one first",
                        self.root.display(),
                        path.display()
                    ),
                ));
            }
            return Err(with_context(e, "cannot lock", &path));
        }
        Ok(StorageLock::new(Box::new(file)))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let path = self.root.join(canonical_name(dir)?);
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(with_context(e, "cannot list", &path)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| with_context(e, "cannot list", &path))?;
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }
}

/// One file of an [`FsStorage`].
#[derive(Debug)]
struct FsFile {
    file: File,
    /// Kept only for error messages: an EIO without the file's name is hard to act on.
    path: PathBuf,
    direct_io: bool,
}

impl FsFile {
    /// Enforces the O_DIRECT contract. Misalignment is a bug in the caller, so debug builds
    /// panic at the call site; release builds return `InvalidInput` instead of the kernel's
    /// bare EINVAL, which would not say what was misaligned.
    fn check_aligned(&self, addr: usize, len: usize, offset: u64) -> io::Result<()> {
        if !self.direct_io {
            return Ok(());
        }
        let checked = check_aligned(addr, len, offset, DIRECT_IO_ALIGN);
        if let Err(e) = &checked {
            if cfg!(debug_assertions) {
                panic!("{}: {e}", self.path.display());
            }
        }
        checked
    }

    fn io_error(&self, e: io::Error, what: &str, offset: u64, len: usize) -> io::Error {
        io::Error::new(
            e.kind(),
            format!(
                "{what} {} ({len} bytes at offset {offset}): {e}",
                self.path.display()
            ),
        )
    }
}

impl StorageFile for FsFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_aligned(buf.as_ptr() as usize, buf.len(), offset)?;
        // A hand-written loop rather than FileExt::read_exact_at: with O_DIRECT a read that
        // comes up short at an unaligned end of file would otherwise be retried at an
        // unaligned offset and fail with EINVAL instead of reporting the end of file.
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => {
                    done += n;
                    if self.direct_io && done & (DIRECT_IO_ALIGN - 1) != 0 && done < buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e, "cannot read", offset, buf.len())),
            }
        }
        if done < buf.len() {
            return Err(self.io_error(
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("end of file after {done} bytes"),
                ),
                "cannot read",
                offset,
                buf.len(),
            ));
        }
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_aligned(buf.as_ptr() as usize, buf.len(), offset)?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| self.io_error(e, "cannot write", offset, buf.len()))
    }

    fn sync_data(&self) -> io::Result<()> {
        // Also needed with O_DIRECT: it bypasses the page cache but neither flushes the
        // device's volatile cache nor persists the metadata (size) of an extending write.
        self.file
            .sync_data()
            .map_err(|e| with_context(e, "cannot fdatasync", &self.path))
    }

    fn len(&self) -> io::Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| with_context(e, "cannot stat", &self.path))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| with_context(e, "cannot set length of", &self.path))
    }

    fn alignment(&self) -> usize {
        if self.direct_io {
            DIRECT_IO_ALIGN
        } else {
            1
        }
    }
}

/// Creates `dir` and any missing ancestors, fsyncing the parent of each directory it creates
/// so the new names survive a power loss (create_dir_all alone gives no such promise).
fn create_dir_durable(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(Path::new(""));
    create_dir_durable(parent)?;
    match fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => sync_dir(parent),
        // Another thread or process made it first; syncing its parent is their job.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    // An empty parent is the current directory (relative roots like "data").
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)?.sync_all()
}

/// Keeps the error kind (callers match on it) while saying which file was involved.
fn with_context(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}
