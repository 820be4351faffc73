//! The simulated backend: files in memory that remember which writes are durable, so tests
//! can crash the "machine" at any write and look at what a power loss could leave behind.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use millrace_sys::rng::SplitMix64;

use crate::aligned::check_aligned;
use crate::storage::{canonical_name, Storage, StorageFile, StorageLock};

/// Which calls an injected fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    Read,
    Write,
    Sync,
}

/// What an injected fault reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// EIO: the call fails; a failed write wrote nothing, a failed sync
    /// made nothing durable (its writes stay pending, as after a kernel's
    /// failed writeback).
    Eio,
    /// ENOSPC: only writes that would grow a file are hit (a preallocated
    /// file, like the redo log, never runs out of space); the write fails
    /// and writes nothing. Reads and syncs never fail with it.
    Enospc,
}

impl FaultKind {
    fn error(self, what: &str) -> io::Error {
        let (code, name) = match self {
            FaultKind::Eio => (libc::EIO, "EIO"),
            FaultKind::Enospc => (libc::ENOSPC, "ENOSPC"),
        };
        let os = io::Error::from_raw_os_error(code);
        io::Error::new(os.kind(), format!("injected {name} on {what}: {os}"))
    }
}

/// A fault plan for one kind of call: the `nth` eligible call from the
/// plan's start fails, and with `every`, each `every`-th call after it too.
#[derive(Debug, Clone, Copy)]
struct Fault {
    kind: FaultKind,
    nth: u64,
    every: Option<u64>,
    /// Eligible calls seen since the plan started.
    seen: u64,
}

impl Fault {
    /// Counts one eligible call; whether it fails.
    fn hit(&mut self) -> bool {
        self.seen += 1;
        match self.every {
            _ if self.seen == self.nth => true,
            Some(p) if self.seen > self.nth => (self.seen - self.nth) % p == 0,
            _ => false,
        }
    }
}

/// The unit a disk writes atomically: after a power loss each sector holds either its old or
/// its new content, never a mix. 512 bytes is the smallest real sector, so it is the most
/// pessimistic choice for torn writes.
const SECTOR: usize = 512;

/// Largest simulated file. Everything lives in memory, so a wild offset (a corrupted length
/// field, say) must become an error rather than an attempt to allocate terabytes.
const MAX_FILE_LEN: usize = 1 << 32;

/// In-memory storage for deterministic crash tests. Cheap to clone (Arc inside); all clones share state.
///
/// One mutex guards the whole storage, not one per file: a crash image must be a single
/// instant across all files (a sync of one file and a later write to another must not be
/// seen out of order), and the crash countdown is global anyway.
#[derive(Clone)]
pub struct SimStorage {
    state: Arc<Mutex<State>>,
}

struct State {
    /// Canonical name to file id. A BTreeMap so that crash images visit files in a fixed
    /// order and therefore consume the seeded random stream identically every time.
    names: BTreeMap<String, u64>,
    /// File id to content. Ids, not names, identify files so that a handle to a removed file
    /// never reaches a later file created under the same name.
    files: HashMap<u64, SimFileState>,
    next_id: u64,
    alignment: usize,
    crashed: bool,
    /// Writes still allowed before the crash; None when no crash is scheduled.
    writes_left: Option<u64>,
    fail_next_sync: bool,
    writes: u64,
    syncs: u64,
    /// Fault plans by op: read, write, sync.
    faults: [Option<Fault>; 3],
    /// Faults that fired so far.
    faults_fired: u64,
    /// Whether `lock_exclusive` is held (by a guard of this storage).
    locked: bool,
}

#[derive(Default)]
struct SimFileState {
    /// What reads see: every write applied.
    current: Vec<u8>,
    /// What the last successful sync_data covered.
    durable: Vec<u8>,
    /// Writes and length changes since the last sync, in the order they were made.
    pending: Vec<Pending>,
    /// Bytes held in `pending`, to pick the cheaper way of syncing.
    pending_bytes: usize,
}

enum Pending {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

impl SimFileState {
    fn with_content(content: Vec<u8>) -> Self {
        Self {
            durable: content.clone(),
            current: content,
            pending: Vec::new(),
            pending_bytes: 0,
        }
    }

    fn sync(&mut self) {
        // Replaying the pending operations on `durable` reproduces `current` (both started
        // equal at the last sync) and costs only what was written, where copying `current`
        // would cost the whole file on every sync of a log that is synced after each commit.
        if self.pending_bytes >= self.current.len() {
            self.durable.clone_from(&self.current);
        } else {
            for op in &self.pending {
                match op {
                    Pending::Write { offset, data } => write_into(&mut self.durable, *offset, data),
                    Pending::SetLen(len) => self.durable.resize(*len, 0),
                }
            }
        }
        self.pending.clear();
        self.pending_bytes = 0;
    }

    /// One state the file could be found in after a power loss now; see
    /// [`SimStorage::crash_image`].
    fn crash_content(&self, rng: &mut SplitMix64) -> Vec<u8> {
        let mut image = self.durable.clone();
        // Only the final length matters: intermediate ones are invisible to anyone reading
        // after the crash. It lands before the kept writes, which may extend the file again.
        let last_len = self.pending.iter().rev().find_map(|op| match op {
            Pending::SetLen(len) => Some(*len),
            Pending::Write { .. } => None,
        });
        if let Some(len) = last_len {
            if rng.chance(1, 2) {
                image.resize(len, 0);
            }
        }
        let mut kept: Vec<(usize, &[u8])> = Vec::new();
        for op in &self.pending {
            let Pending::Write { offset, data } = op else {
                continue;
            };
            let (offset, data) = (*offset, data.as_slice());
            match rng.below(3) {
                0 => kept.push((offset, data)),
                1 => {} // dropped whole
                _ => {
                    // Torn: each sector it touches independently old or new.
                    let mut start = offset;
                    let end = offset + data.len();
                    while start < end {
                        let sector_end = ((start / SECTOR) + 1) * SECTOR;
                        let piece_end = sector_end.min(end);
                        if rng.chance(1, 2) {
                            kept.push((start, &data[start - offset..piece_end - offset]));
                        }
                        start = piece_end;
                    }
                }
            }
        }
        // The device may reorder anything not separated by a flush.
        for i in (1..kept.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            kept.swap(i, j);
        }
        for (offset, data) in kept {
            write_into(&mut image, offset, data);
        }
        image
    }
}

fn write_into(content: &mut Vec<u8>, offset: usize, data: &[u8]) {
    let end = offset + data.len();
    if content.len() < end {
        content.resize(end, 0);
    }
    content[offset..end].copy_from_slice(data);
}

/// Converts a byte range to in-memory indices, refusing files larger than `MAX_FILE_LEN`.
fn mem_range(offset: u64, len: usize) -> io::Result<(usize, usize)> {
    let end = offset.checked_add(len as u64);
    match end {
        Some(end) if end <= MAX_FILE_LEN as u64 => Ok((offset as usize, end as usize)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{len} bytes at offset {offset} exceed the simulated file size limit \
                 of {MAX_FILE_LEN} bytes"
            ),
        )),
    }
}

fn crash_error() -> io::Error {
    io::Error::other("simulated crash")
}

impl State {
    fn new(alignment: usize) -> Self {
        Self {
            names: BTreeMap::new(),
            files: HashMap::new(),
            next_id: 0,
            alignment,
            crashed: false,
            writes_left: None,
            fail_next_sync: false,
            writes: 0,
            syncs: 0,
            faults: [None; 3],
            faults_fired: 0,
            locked: false,
        }
    }

    /// Counts a call of `op` (eligible for its plan) and returns the
    /// injected error if it is to fail.
    fn fault(&mut self, op: FaultOp, what: &str) -> Option<io::Error> {
        let slot = &mut self.faults[op as usize];
        let plan = slot.as_mut()?;
        if plan.hit() {
            self.faults_fired += 1;
            Some(plan.kind.error(what))
        } else {
            None
        }
    }

    fn insert(&mut self, name: String, file: SimFileState) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.names.insert(name, id);
        self.files.insert(id, file);
        id
    }

    fn file(&self, id: u64) -> io::Result<&SimFileState> {
        self.files.get(&id).ok_or_else(removed_error)
    }

    fn file_mut(&mut self, id: u64) -> io::Result<&mut SimFileState> {
        self.files.get_mut(&id).ok_or_else(removed_error)
    }

    /// A new storage whose files hold `content(file)` as both durable and current content.
    fn image(&self, mut content: impl FnMut(&SimFileState) -> Vec<u8>) -> SimStorage {
        let mut image = State::new(self.alignment);
        for (name, id) in &self.names {
            let file = &self.files[id];
            image.insert(name.clone(), SimFileState::with_content(content(file)));
        }
        SimStorage {
            state: Arc::new(Mutex::new(image)),
        }
    }
}

fn removed_error() -> io::Error {
    // Unlike POSIX, where an unlinked file lives on while open, a removed simulated file is
    // gone: keeping orphans around would cost memory for no test that needs them.
    io::Error::new(
        io::ErrorKind::NotFound,
        "simulated file was removed while open",
    )
}

impl Default for SimStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl SimStorage {
    pub fn new() -> Self {
        Self::with_alignment(1)
    }

    /// A storage whose files report `alignment()` == `align` and reject misaligned buffer
    /// addresses, lengths and offsets with `InvalidInput`, as O_DIRECT files do, so code paths
    /// meant for direct I/O can be tested without a file system that supports it.
    ///
    /// # Panics
    /// If `align` is not a power of two.
    pub fn with_alignment(align: usize) -> Self {
        assert!(
            align.is_power_of_two(),
            "SimStorage alignment must be a power of two, got {align}"
        );
        Self {
            state: Arc::new(Mutex::new(State::new(align))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("SimStorage mutex poisoned")
    }

    /// Number of write_all_at calls that have succeeded so far (all files).
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    /// Number of sync_data calls that have succeeded so far (all files).
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// After `n` more successful writes in total (counting from now), the storage "crashes": that write and every later
    /// write, sync and set_len fail with an io::Error (kind Other, message "simulated crash"), reads still work, and the
    /// state is frozen for crash_image. None disables.
    ///
    /// So with `Some(n)` exactly `n` further writes succeed and the next one fails; syncs
    /// between the n-th write and that failing write still succeed. Creating and removing
    /// files also fail once crashed. Has no effect on a storage that has already crashed.
    pub fn crash_after_writes(&self, n: Option<u64>) {
        self.lock().writes_left = n;
    }

    /// Crash now (same effect as above).
    pub fn crash_now(&self) {
        self.lock().crashed = true;
    }

    pub fn has_crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Fail the next sync_data (on any file) with an io::Error, once, without crashing (to test that the caller treats fsync failure as fatal).
    ///
    /// The failed sync makes nothing durable; its writes stay pending, as a kernel that
    /// failed writeback may or may not have persisted them.
    pub fn fail_next_sync(&self) {
        self.lock().fail_next_sync = true;
    }

    /// Injects faults into calls of `op`: counting from now, the `nth` call
    /// (1 = the next one) fails with `kind`, and with `every = Some(p)` each
    /// p-th call after it too. Deterministic: the same workload hits the
    /// same call. Replaces any earlier plan for `op`. See [`FaultKind`] for
    /// which calls are eligible and what a failed call leaves behind.
    ///
    /// # Panics
    /// If `nth` or `every` is 0.
    pub fn inject_fault(&self, op: FaultOp, kind: FaultKind, nth: u64, every: Option<u64>) {
        assert!(nth > 0 && every != Some(0), "fault call numbers start at 1");
        self.lock().faults[op as usize] = Some(Fault {
            kind,
            nth,
            every,
            seen: 0,
        });
    }

    /// Removes every fault plan.
    pub fn clear_faults(&self) {
        self.lock().faults = [None; 3];
    }

    /// With `Some(n)`, `n` further reads (of any file) succeed and the next one fails
    /// with an I/O error, as a disk returning EIO does, once: nothing crashes, later reads
    /// and all writes work. `None` cancels a read failure not yet reached. (A one-shot
    /// `inject_fault` on reads.)
    pub fn fail_read_after(&self, n: Option<u64>) {
        self.lock().faults[FaultOp::Read as usize] = n.map(|n| Fault {
            kind: FaultKind::Eio,
            nth: n + 1,
            every: None,
            seen: 0,
        });
    }

    /// How many injected faults have fired.
    pub fn faults_fired(&self) -> u64 {
        self.lock().faults_fired
    }

    /// The storage as it could be found after power loss at this moment: per file, the durable content (what the last
    /// successful sync_data of that file covered) plus a random subset of the writes made since that file's last sync:
    /// each such write is independently kept whole, dropped, or torn (only some of its 512-byte sectors, chosen at random,
    /// keep the new bytes; a sector is either wholly old or wholly new), and the kept ones are applied in a random order.
    /// Deterministic from `seed`. The returned storage is independent (new state, not crashed, counters at 0).
    ///
    /// An unsynced set_len is kept or dropped at random (only the last one counts) and applied
    /// before the kept writes. File creation and removal are durable immediately. The image
    /// keeps this storage's alignment.
    pub fn crash_image(&self, seed: u64) -> SimStorage {
        let mut rng = SplitMix64::new(seed);
        self.lock().image(|file| file.crash_content(&mut rng))
    }

    /// The durable content only (every unsynced write dropped). Equivalent to a crash image where nothing unsynced survives.
    pub fn durable_image(&self) -> SimStorage {
        self.lock().image(|file| file.durable.clone())
    }

    /// The content as the running process would read it (all writes applied), as an independent copy (a clean shutdown).
    pub fn clean_image(&self) -> SimStorage {
        self.lock().image(|file| file.current.clone())
    }

    /// Raw access for tests that corrupt files on purpose.
    ///
    /// Returns the content reads currently see (all writes applied), or None if no such file.
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let name = canonical_name(name).ok()?;
        let state = self.lock();
        let id = state.names.get(&name)?;
        Some(state.files[id].current.clone())
    }

    /// The durable content of a file (what the last successful sync covered), or None if no
    /// such file.
    pub fn durable_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let name = canonical_name(name).ok()?;
        let state = self.lock();
        let id = state.names.get(&name)?;
        Some(state.files[id].durable.clone())
    }

    /// Names of all files, sorted.
    pub fn file_names(&self) -> Vec<String> {
        self.lock().names.keys().cloned().collect()
    }

    /// Overwrites durable and current content directly (extending both with zeros if the
    /// range runs past their end), bypassing the crash machinery and the counters.
    ///
    /// # Panics
    /// If there is no such file, or the range exceeds the simulated size limit: a corruption
    /// test that silently corrupted nothing would pass for the wrong reason.
    pub fn corrupt(&self, name: &str, offset: u64, bytes: &[u8]) {
        let mut state = self.lock();
        let id = canonical_name(name)
            .ok()
            .and_then(|name| state.names.get(&name).copied())
            .unwrap_or_else(|| panic!("SimStorage::corrupt: no file named {name:?}"));
        let (start, _) = mem_range(offset, bytes.len())
            .unwrap_or_else(|e| panic!("SimStorage::corrupt {name:?}: {e}"));
        let file = state
            .files
            .get_mut(&id)
            .expect("names only map to live files");
        write_into(&mut file.durable, start, bytes);
        write_into(&mut file.current, start, bytes);
    }
}

impl fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("SimStorage")
            .field("files", &state.names.len())
            .field("alignment", &state.alignment)
            .field("crashed", &state.crashed)
            .field("writes", &state.writes)
            .field("syncs", &state.syncs)
            .finish()
    }
}

impl Storage for SimStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let name = canonical_name(name)?;
        let mut state = self.lock();
        let id = match state.names.get(&name) {
            Some(&id) => id,
            // Creating a name changes durable state, which a crashed machine cannot do.
            None if create && state.crashed => return Err(crash_error()),
            None if create => state.insert(name.clone(), SimFileState::default()),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("simulated file {name:?} does not exist"),
                ))
            }
        };
        Ok(Arc::new(SimFile {
            storage: self.clone(),
            id,
            name,
        }))
    }

    fn exists(&self, name: &str) -> bool {
        let Ok(name) = canonical_name(name) else {
            return false;
        };
        let state = self.lock();
        // A "directory" exists when some file lives under it, as on the real backend.
        let dir = format!("{name}/");
        state.names.contains_key(&name)
            || state
                .names
                .range(dir.clone()..)
                .next()
                .is_some_and(|(file, _)| file.starts_with(&dir))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let prefix = format!("{}/", canonical_name(dir)?);
        let state = self.lock();
        Ok(state
            .names
            .range(prefix.clone()..)
            .take_while(|(name, _)| name.starts_with(&prefix))
            .filter_map(|(name, _)| {
                Some(name[prefix.len()..].to_string()).filter(|n| !n.contains('/'))
            })
            .collect())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let name = canonical_name(name)?;
        let mut state = self.lock();
        if state.crashed {
            return Err(crash_error());
        }
        match state.names.remove(&name) {
            Some(id) => {
                state.files.remove(&id);
                Ok(())
            }
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("simulated file {name:?} does not exist"),
            )),
        }
    }

    /// An in-process flag: a second taker while a guard lives gets the
    /// same `WouldBlock` error as on the real backend. Images made by
    /// `crash_image` and the like start unlocked (a new machine).
    fn lock_exclusive(&self) -> io::Result<StorageLock> {
        let mut state = self.lock();
        if state.locked {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "simulated data directory is in use by another engine (its lock is held)",
            ));
        }
        state.locked = true;
        Ok(StorageLock::new(Box::new(SimLock(self.clone()))))
    }
}

/// Releases a `SimStorage` lock when dropped.
struct SimLock(SimStorage);

impl Drop for SimLock {
    fn drop(&mut self) {
        self.0.lock().locked = false;
    }
}

/// One open file of a [`SimStorage`].
struct SimFile {
    storage: SimStorage,
    id: u64,
    /// For error messages only.
    name: String,
}

impl SimFile {
    fn context(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("simulated file {:?}: {e}", self.name))
    }
}

impl StorageFile for SimFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut state = self.storage.lock();
        check_aligned(buf.as_ptr() as usize, buf.len(), offset, state.alignment)?;
        state.file(self.id)?;
        if let Some(e) = state.fault(FaultOp::Read, "read") {
            return Err(self.context(e));
        }
        let file = state.file(self.id)?;
        let len = file.current.len() as u64;
        match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= len => {
                let start = offset as usize;
                buf.copy_from_slice(&file.current[start..start + buf.len()]);
                Ok(())
            }
            _ => Err(self.context(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at offset {offset} past end of file ({len} bytes)",
                    buf.len()
                ),
            ))),
        }
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.storage.lock();
        check_aligned(buf.as_ptr() as usize, buf.len(), offset, state.alignment)?;
        let (start, _) = mem_range(offset, buf.len()).map_err(|e| self.context(e))?;
        if state.crashed {
            return Err(crash_error());
        }
        // Look the file up before spending the crash budget: a write to a removed file is
        // not a write that happened.
        let grows = state.file(self.id)?.current.len() < start + buf.len();
        let plan = state.faults[FaultOp::Write as usize].map(|f| f.kind);
        if plan == Some(FaultKind::Eio) || (plan == Some(FaultKind::Enospc) && grows) {
            if let Some(e) = state.fault(FaultOp::Write, "write") {
                return Err(self.context(e));
            }
        }
        match state.writes_left {
            Some(0) => {
                state.crashed = true;
                return Err(crash_error());
            }
            Some(n) => state.writes_left = Some(n - 1),
            None => {}
        }
        state.writes += 1;
        let file = state.file_mut(self.id)?;
        write_into(&mut file.current, start, buf);
        file.pending.push(Pending::Write {
            offset: start,
            data: buf.to_vec(),
        });
        file.pending_bytes += buf.len();
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.storage.lock();
        if state.crashed {
            return Err(crash_error());
        }
        state.file(self.id)?;
        if state.fail_next_sync {
            state.fail_next_sync = false;
            return Err(self.context(io::Error::other("simulated fsync failure")));
        }
        if state.faults[FaultOp::Sync as usize].map(|f| f.kind) == Some(FaultKind::Eio) {
            if let Some(e) = state.fault(FaultOp::Sync, "fsync") {
                return Err(self.context(e));
            }
        }
        state.syncs += 1;
        state.file_mut(self.id)?.sync();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.storage.lock().file(self.id)?.current.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.storage.lock();
        let (_, len) = mem_range(len, 0).map_err(|e| self.context(e))?;
        if state.crashed {
            return Err(crash_error());
        }
        let file = state.file_mut(self.id)?;
        if len < file.current.len() {
            // Bytes cut off by a truncation cannot resurface in a crash image through a
            // pending write that preceded it, so clip those writes now (this also frees
            // their memory). Syncing is unaffected: the truncation would cut them anyway.
            let mut clipped = 0;
            file.pending.retain_mut(|op| match op {
                Pending::Write { offset, data } if *offset >= len => {
                    clipped += data.len();
                    false
                }
                Pending::Write { offset, data } => {
                    let keep = data.len().min(len - *offset);
                    clipped += data.len() - keep;
                    data.truncate(keep);
                    true
                }
                Pending::SetLen(_) => true,
            });
            file.pending_bytes -= clipped;
        }
        file.current.resize(len, 0);
        file.pending.push(Pending::SetLen(len));
        Ok(())
    }

    fn alignment(&self) -> usize {
        self.storage.lock().alignment
    }
}
