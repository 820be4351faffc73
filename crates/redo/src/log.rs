// Long file, one job: the reservation, writer, flusher and
// commit-wait roles all work on `Inner`'s private state; a split by role
// would first have to make those fields crate-visible.
//! The redo log: reservation, the log buffer, the writer and flusher roles
//! (dedicated threads or a group commit leader), commit waits, checkpoints,
//! and opening with recovery. docs/design.md, "The commit pipeline", explains
//! the protocol; the invariants it lists are asserted here.

use crate::buffer::LogBuffer;
use crate::config::{Durability, LogConfig};
use crate::error::LogError;
use crate::format::{
    align_down, align_up, unsynced_window_bytes, Checkpoint, FileHeader, RecordHeader, RecordKind,
    BLOCK, DATA_OFFSET, START_LSN,
};
use crate::link_buf::LinkBuf;
use crate::recovery::{self, Record, RecoveryReport};
use crate::spin::{self, SpinVerdict};
use crate::sync::{Event, LsnWaiters, Woken};
use millrace_io::{AlignedBuf, Storage, StorageFile};
use millrace_metrics::{Counter, Registry};
use millrace_sys::cpu::{thread_cpu_time, CpuBudget};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often levels 0 and 2 write and flush in the background.
const BACKGROUND_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// The LSN range one `append` reserved: [start, end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LsnRange {
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Written,
    Flushed,
}

struct Metrics {
    appends: Arc<Counter>,
    writes: Arc<Counter>,
    bytes_written: Arc<Counter>,
    fsyncs: Arc<Counter>,
    flush_ns_total: Arc<Counter>,
    commit_waits: Arc<Counter>,
    spin_ns: Arc<Counter>,
    spin_hits: Arc<Counter>,
    spin_misses: Arc<Counter>,
    block_waits: Arc<Counter>,
    recent_written_full: Arc<Counter>,
    recent_closed_full: Arc<Counter>,
    buffer_full_waits: Arc<Counter>,
    log_full_waits: Arc<Counter>,
    checkpoints: Arc<Counter>,
    leader_rounds: Arc<Counter>,
}

impl Metrics {
    fn register(r: &Registry) -> Self {
        let c = |name, help| r.counter("log", name, help);
        Self {
            appends: c("log_appends", "records appended (mini-transactions)"),
            writes: c("log_writes", "write calls to the log file"),
            bytes_written: c(
                "log_bytes_written",
                "bytes written to the log file, padding included",
            ),
            fsyncs: c("log_fsyncs", "fdatasync calls on the log file"),
            flush_ns_total: c("log_flush_ns_total", "time spent in fdatasync, ns"),
            commit_waits: c("log_commit_waits", "commits that had to wait for the log"),
            spin_ns: c("log_spin_ns", "CPU time commit waits spent spinning, ns"),
            spin_hits: c("log_spin_hits", "commit waits satisfied while spinning"),
            spin_misses: c("log_spin_misses", "commit waits that spun, then blocked"),
            block_waits: c(
                "log_block_waits",
                "commit waits that blocked (after spinning or not)",
            ),
            recent_written_full: c(
                "log_recent_written_full",
                "appends that waited for space in recent_written",
            ),
            recent_closed_full: c(
                "log_recent_closed_full",
                "appends that waited for space in recent_closed",
            ),
            buffer_full_waits: c(
                "log_buffer_full_waits",
                "appends that waited for log buffer space",
            ),
            log_full_waits: c(
                "log_full_waits",
                "appends that waited for a checkpoint to free log file space",
            ),
            checkpoints: c("log_checkpoints", "checkpoint headers written"),
            leader_rounds: c(
                "log_leader_rounds",
                "write/flush rounds done by a group commit leader",
            ),
        }
    }
}

struct CheckpointState {
    number: u64,
    /// Epoch of the record at the checkpoint LSN.
    floor_epoch: u32,
    /// Epoch starts after the checkpoint LSN, in LSN order.
    eras: Vec<(u64, u32)>,
    block: AlignedBuf,
}

struct WriterState {
    staging: AlignedBuf,
}

struct Inner {
    cfg: LogConfig,
    file: Arc<dyn StorageFile>,
    capacity: u64,
    epoch: u32,
    max_payload: u32,
    dedicated: bool,
    buffer: LogBuffer,

    /// Next LSN to reserve.
    current_lsn: AtomicU64,
    /// Everything below is written to the file (not necessarily durable).
    write_lsn: AtomicU64,
    /// Everything below is durable.
    flushed_lsn: AtomicU64,
    /// Recovery would start here; the file may not overwrite anything after.
    checkpoint_lsn: AtomicU64,
    /// The highest LSN a level-1 commit wants flushed (dedicated mode).
    flush_requested_lsn: AtomicU64,
    /// What the fdatasync in flight (or the last one) will make durable.
    flushing_lsn: AtomicU64,

    recent_written: LinkBuf,
    recent_closed: LinkBuf,

    write_waiters: LsnWaiters,
    flush_waiters: LsnWaiters,
    checkpoint_waiters: LsnWaiters,

    writer_event: Event,
    flusher_event: Event,
    timer_event: Event,

    writer: Mutex<WriterState>,
    flusher: Mutex<()>,
    leader: Mutex<()>,
    leader_active: AtomicBool,
    checkpointer: Mutex<CheckpointState>,

    durability: AtomicU8,
    cpu: Arc<CpuBudget>,
    flush_avg_ns: AtomicU64,

    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    shutdown: AtomicBool,
    m: Metrics,
}

/// A redo log. Cheap to share by reference across threads; `shutdown` (or
/// drop) stops its threads after everything appended is flushed.
pub struct Log {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Log {
    /// Creates a new log file (it must not exist) and opens it.
    pub fn create(
        storage: &dyn Storage,
        cfg: LogConfig,
        cpu: Arc<CpuBudget>,
        registry: &Registry,
    ) -> Result<Log, LogError> {
        cfg.validate().map_err(LogError::Config)?;
        if storage.exists(&cfg.file_name) {
            return Err(LogError::Config(format!(
                "redo log {} already exists",
                cfg.file_name
            )));
        }
        let io = |e: std::io::Error| LogError::Io(format!("creating the redo log: {e}"));
        let file = storage.open(&cfg.file_name, true).map_err(io)?;
        // Write the whole file rather than extend it sparsely: a write into
        // an unallocated block makes its fdatasync update file system
        // metadata too (measured here: 219 us against 129 us per commit).
        let zeros = AlignedBuf::zeroed(1 << 20, BLOCK as usize);
        let total = DATA_OFFSET + cfg.capacity_bytes;
        let mut at = 0;
        let mut next_progress = 1 << 30;
        while at < total {
            let n = (total - at).min(zeros.len() as u64) as usize;
            file.write_all_at(&zeros[..n], at).map_err(io)?;
            at += n as u64;
            if at >= next_progress {
                tracing::info!(
                    written_mib = at >> 20,
                    total_mib = total >> 20,
                    "creating the redo log"
                );
                next_progress += 1 << 30;
            }
        }
        let mut block = AlignedBuf::zeroed(BLOCK as usize, BLOCK as usize);
        FileHeader {
            capacity: cfg.capacity_bytes,
        }
        .encode(&mut block);
        file.write_all_at(&block, 0).map_err(io)?;
        let cp = Checkpoint {
            number: 0,
            lsn: START_LSN,
            epoch: 0,
        };
        cp.encode(&mut block);
        file.write_all_at(&block, Checkpoint::slot_offset(0))
            .map_err(io)?;
        file.sync_data().map_err(io)?;
        drop(file);
        let (log, _) = Self::open(storage, cfg, cpu, registry, &mut |_| Ok(()))?;
        Ok(log)
    }

    /// Opens an existing log: recovers (every record after the checkpoint
    /// goes to `applier`, in order), starts a new epoch, and starts the
    /// writer roles. The file's own capacity wins over `cfg.capacity_bytes`.
    pub fn open(
        storage: &dyn Storage,
        mut cfg: LogConfig,
        cpu: Arc<CpuBudget>,
        registry: &Registry,
        applier: &mut dyn FnMut(Record<'_>) -> Result<(), String>,
    ) -> Result<(Log, RecoveryReport), LogError> {
        cfg.validate().map_err(LogError::Config)?;
        let io = |e: std::io::Error| LogError::Io(format!("opening the redo log: {e}"));
        let file = storage.open(&cfg.file_name, false).map_err(io)?;
        let mut block = AlignedBuf::zeroed(BLOCK as usize, BLOCK as usize);
        file.read_exact_at(&mut block, 0).map_err(io)?;
        let header = FileHeader::decode(&block).map_err(LogError::Corrupt)?;
        if header.capacity != cfg.capacity_bytes {
            tracing::info!(
                file_capacity = header.capacity,
                configured = cfg.capacity_bytes,
                "the redo log keeps the capacity it was created with"
            );
            cfg.capacity_bytes = header.capacity;
        }
        let capacity = header.capacity;
        let len = file.len().map_err(io)?;
        if len < DATA_OFFSET + capacity {
            return Err(LogError::Corrupt(format!(
                "redo log is {len} bytes, its header says {}",
                DATA_OFFSET + capacity
            )));
        }
        let mut best: Option<Checkpoint> = None;
        for slot in 0..2 {
            file.read_exact_at(&mut block, Checkpoint::slot_offset(slot))
                .map_err(io)?;
            if let Some(cp) = Checkpoint::decode(&block) {
                if cp.number % 2 == slot && best.is_none_or(|b| cp.number > b.number) {
                    best = Some(cp);
                }
            }
        }
        let cp = best.ok_or_else(|| {
            LogError::Corrupt("neither redo log checkpoint header is valid".into())
        })?;

        // Decoding accepts any record a log of this capacity could hold,
        // whatever the buffer size it was written with.
        let decode_max = (capacity / 4) as u32;
        let scan = recovery::scan(&*file, capacity, cp.lsn, cp.epoch, decode_max, applier)?;
        let new_epoch = scan
            .max_epoch
            .max(cp.epoch)
            .checked_add(1)
            .ok_or_else(|| LogError::Corrupt("redo log epoch overflow".into()))?;
        let end = scan.end_lsn;
        tracing::info!(
            checkpoint_lsn = cp.lsn,
            end_lsn = end,
            records = scan.records,
            reason = %scan.stop_reason,
            "redo log scanned"
        );

        let snapshot = cpu.snapshot();
        let dedicated = cfg.writer_threads.dedicated(snapshot.effective_cpus);
        // A chunk never exceeds the unsynced window, so one write can always
        // be issued after a sync (see `write_locked`).
        let chunk = cfg
            .write_chunk_bytes
            .min(cfg.buffer_bytes / 2)
            .min(unsynced_window_bytes(capacity) as usize);
        let buffer = LogBuffer::new(cfg.buffer_bytes);
        // The writer rewrites the last partial block from its start, so the
        // bytes of that block before `end` must be in the buffer.
        if end % BLOCK != 0 {
            let pos = align_down(end) % capacity;
            file.read_exact_at(&mut block, DATA_OFFSET + pos)
                .map_err(io)?;
            buffer.copy_in(align_down(end), &block[..(end % BLOCK) as usize]);
        }
        let max_payload = cfg.max_payload_bytes();
        let inner = Arc::new(Inner {
            capacity,
            epoch: new_epoch,
            max_payload,
            dedicated,
            buffer,
            current_lsn: AtomicU64::new(end),
            write_lsn: AtomicU64::new(end),
            flushed_lsn: AtomicU64::new(end),
            checkpoint_lsn: AtomicU64::new(cp.lsn),
            flush_requested_lsn: AtomicU64::new(end),
            flushing_lsn: AtomicU64::new(end),
            recent_written: LinkBuf::new(cfg.recent_written_bytes, end),
            recent_closed: LinkBuf::new(cfg.recent_closed_bytes, end),
            write_waiters: LsnWaiters::new(),
            flush_waiters: LsnWaiters::new(),
            checkpoint_waiters: LsnWaiters::new(),
            writer_event: Event::new(),
            flusher_event: Event::new(),
            timer_event: Event::new(),
            writer: Mutex::new(WriterState {
                staging: AlignedBuf::zeroed(chunk, BLOCK as usize),
            }),
            flusher: Mutex::new(()),
            leader: Mutex::new(()),
            leader_active: AtomicBool::new(false),
            checkpointer: Mutex::new(CheckpointState {
                number: cp.number,
                floor_epoch: cp.epoch,
                eras: scan.eras,
                block,
            }),
            durability: AtomicU8::new(cfg.durability.level()),
            cpu,
            flush_avg_ns: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            m: Metrics::register(registry),
            file,
            cfg,
        });
        register_gauges(registry, &inner);
        let log = Log {
            inner: inner.clone(),
            threads: Mutex::new(Vec::new()),
        };
        log.start_threads()?;

        // The epoch start record: durable before any new record is written,
        // so that a later scan can tell new records from bytes left behind.
        let r = inner.append_kind(RecordKind::EpochStart, &[])?;
        inner.close(r);
        inner
            .checkpointer
            .lock()
            .expect("checkpointer poisoned")
            .eras
            .push((r.start, new_epoch));
        inner.wait_for(r.end, Target::Flushed, false)?;
        let report = RecoveryReport {
            checkpoint_lsn: cp.lsn,
            end_lsn: end,
            records: scan.records,
            payload_bytes: scan.payload_bytes,
            stop_reason: scan.stop_reason,
            new_epoch,
        };
        Ok((log, report))
    }

    fn start_threads(&self) -> Result<(), LogError> {
        let mut threads = self.inner.threads_lock(&self.threads);
        let spawn = |name: &str, f: fn(&Inner)| {
            let inner = self.inner.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || f(&inner))
                .map_err(|e| LogError::Io(format!("starting {name}: {e}")))
        };
        if self.inner.dedicated {
            threads.push(spawn("millrace-log-writer", Inner::writer_thread)?);
            threads.push(spawn("millrace-log-flusher", Inner::flusher_thread)?);
        } else {
            threads.push(spawn("millrace-log-timer", Inner::timer_thread)?);
        }
        Ok(())
    }

    /// Appends one record (a mini-transaction's changes) and publishes it in
    /// recent_written; waits for log file space, buffer space and link buffer
    /// space as needed. Call `close` once its dirty pages are on the flush
    /// list, then `wait_durable(range.end)` to commit.
    pub fn append(&self, payload: &[u8]) -> Result<LsnRange, LogError> {
        self.inner.append_kind(RecordKind::Data, payload)
    }

    /// Publishes the range in recent_closed: the checkpoint may now pass it.
    pub fn close(&self, range: LsnRange) {
        self.inner.close(range)
    }

    /// Waits until `lsn` is as durable as the current level asks:
    /// 0 nothing, 2 written, 1 flushed.
    pub fn wait_durable(&self, lsn: u64) -> Result<(), LogError> {
        match self.durability() {
            Durability::Lazy => self.inner.check_alive(),
            Durability::Write => self.inner.wait_for(lsn, Target::Written, true),
            Durability::Flush => self.inner.wait_for(lsn, Target::Flushed, true),
        }
    }

    /// Waits until `lsn` is flushed whatever the level (the write-ahead rule
    /// before a page write, and checkpoints).
    pub fn wait_flushed(&self, lsn: u64) -> Result<(), LogError> {
        self.inner.wait_for(lsn, Target::Flushed, false)
    }

    /// append + close + wait_durable; returns the end LSN.
    pub fn commit(&self, payload: &[u8]) -> Result<u64, LogError> {
        let r = self.append(payload)?;
        self.close(r);
        self.wait_durable(r.end)?;
        Ok(r.end)
    }

    /// Before latching pages: waits until the log file has room for
    /// `margin_bytes` more (the page cleaner may need those latches to make
    /// room, so waiting after latching could deadlock).
    pub fn free_check(&self, margin_bytes: u64) -> Result<(), LogError> {
        let i = &*self.inner;
        let need =
            (i.current_lsn.load(Ordering::Acquire) + margin_bytes).saturating_sub(i.capacity);
        i.wait_checkpoint(align_up(need))
    }

    pub fn durability(&self) -> Durability {
        Durability::from_level(self.inner.durability.load(Ordering::Relaxed))
            .expect("only valid levels are stored")
    }

    /// Switches `flush_log_at_trx_commit` while commits run; each commit
    /// reads the level once when it starts waiting.
    pub fn set_durability(&self, level: Durability) {
        self.inner
            .durability
            .store(level.level(), Ordering::Relaxed);
        // Commits at the old level may be waiting for a flush nobody will
        // request at the new one: request it.
        let written = self.inner.write_lsn.load(Ordering::Acquire);
        self.inner
            .flush_requested_lsn
            .fetch_max(written, Ordering::SeqCst);
        self.inner.flusher_event.set();
        self.inner.timer_event.set();
    }

    /// Writes a checkpoint at `lsn`: recovery will start there. `lsn` must be
    /// a record boundary no later than `closed_lsn()` with every page change
    /// before it already on disk; the log is flushed up to it first.
    pub fn checkpoint(&self, lsn: u64) -> Result<(), LogError> {
        self.inner.checkpoint(lsn)
    }

    /// The recent_closed tail: every record before it has its dirty pages on
    /// the flush list. With no pages (the log on its own), it is the highest
    /// LSN a checkpoint may take.
    pub fn closed_lsn(&self) -> u64 {
        self.inner.recent_closed.advance()
    }
    pub fn current_lsn(&self) -> u64 {
        self.inner.current_lsn.load(Ordering::Acquire)
    }
    pub fn write_lsn(&self) -> u64 {
        self.inner.write_lsn.load(Ordering::Acquire)
    }
    pub fn flushed_lsn(&self) -> u64 {
        self.inner.flushed_lsn.load(Ordering::Acquire)
    }
    pub fn checkpoint_lsn(&self) -> u64 {
        self.inner.checkpoint_lsn.load(Ordering::Acquire)
    }
    pub fn capacity_bytes(&self) -> u64 {
        self.inner.capacity
    }
    pub fn max_payload_bytes(&self) -> u32 {
        self.inner.max_payload
    }
    /// Whether dedicated writer/flusher threads run (else a leader).
    pub fn dedicated_writer_threads(&self) -> bool {
        self.inner.dedicated
    }
    pub fn epoch(&self) -> u32 {
        self.inner.epoch
    }
    /// Average fdatasync time (moving average), microseconds.
    pub fn flush_avg_us(&self) -> u64 {
        self.inner.flush_avg_ns.load(Ordering::Relaxed) / 1000
    }
    /// Stops the log (and with it the engine above) for good, for a failure
    /// found outside the log: a page write or fsync that failed, or a
    /// mini-transaction abandoned after changing pages. Every waiter wakes
    /// to an error and every later append, commit or checkpoint fails; the
    /// next open recovers from what is durable. The first cause is kept.
    pub fn fail(&self, cause: &str) -> LogError {
        self.inner.fail_msg(cause.to_string())
    }

    /// Whether the log has stopped after an error (see `fail`).
    pub fn is_failed(&self) -> bool {
        self.inner.failed.load(Ordering::SeqCst)
    }

    /// The failure that stopped the log, if any.
    pub fn failure(&self) -> Option<String> {
        self.inner.failure.lock().expect("poisoned").clone()
    }

    /// Flushes everything appended, then stops the threads. Appends racing
    /// with shutdown may fail with `ShutDown`.
    pub fn shutdown(&self) -> Result<(), LogError> {
        let i = &*self.inner;
        let mut result = Ok(());
        if !i.shutdown.load(Ordering::SeqCst) && !i.failed.load(Ordering::SeqCst) {
            let end = i.current_lsn.load(Ordering::Acquire);
            result = i.wait_for(end, Target::Flushed, false);
        }
        i.shutdown.store(true, Ordering::SeqCst);
        i.wake_everyone();
        let threads = std::mem::take(&mut *i.threads_lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
        result
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn register_gauges(r: &Registry, inner: &Arc<Inner>) {
    type Read = fn(&Inner) -> u64;
    let gauges: [(&'static str, &'static str, Read); 7] = [
        ("log_lsn_current", "next LSN to reserve", |i| {
            i.current_lsn.load(Ordering::Relaxed)
        }),
        ("log_lsn_written", "LSN written to the file", |i| {
            i.write_lsn.load(Ordering::Relaxed)
        }),
        ("log_lsn_flushed", "LSN durable on disk", |i| {
            i.flushed_lsn.load(Ordering::Relaxed)
        }),
        ("log_lsn_checkpoint", "LSN of the last checkpoint", |i| {
            i.checkpoint_lsn.load(Ordering::Relaxed)
        }),
        ("log_lsn_closed", "recent_closed tail", |i| {
            i.recent_closed.tail()
        }),
        (
            "log_checkpoint_age_bytes",
            "current LSN minus checkpoint LSN",
            |i| {
                // Read apart: a checkpoint may pass the current LSN read first.
                i.current_lsn
                    .load(Ordering::Relaxed)
                    .saturating_sub(i.checkpoint_lsn.load(Ordering::Relaxed))
            },
        ),
        (
            "log_flush_avg_us",
            "moving average of fdatasync time, us",
            |i| i.flush_avg_ns.load(Ordering::Relaxed) / 1000,
        ),
    ];
    for (name, help, read) in gauges {
        let weak: Weak<Inner> = Arc::downgrade(inner);
        r.gauge("log", name, help, move || {
            weak.upgrade().map_or(0, |i| read(&i))
        });
    }
}

impl Inner {
    fn threads_lock<'a>(
        &self,
        t: &'a Mutex<Vec<JoinHandle<()>>>,
    ) -> std::sync::MutexGuard<'a, Vec<JoinHandle<()>>> {
        t.lock().expect("thread list poisoned")
    }

    fn is_dead(&self) -> bool {
        self.failed.load(Ordering::SeqCst) || self.shutdown.load(Ordering::SeqCst)
    }

    fn check_alive(&self) -> Result<(), LogError> {
        if self.failed.load(Ordering::SeqCst) {
            let msg = self.failure.lock().expect("poisoned").clone();
            return Err(LogError::Failed(msg.unwrap_or_default()));
        }
        if self.shutdown.load(Ordering::SeqCst) {
            return Err(LogError::ShutDown);
        }
        Ok(())
    }

    /// An I/O error stops the log for good: after a failed fdatasync the
    /// kernel may have dropped the dirty pages, so retrying could report
    /// durable what is not ("fsyncgate"). Every waiter is woken to an error.
    fn fail(&self, what: &str, e: std::io::Error) -> LogError {
        self.fail_msg(format!("{what}: {e}"))
    }

    fn fail_msg(&self, msg: String) -> LogError {
        {
            let mut f = self.failure.lock().expect("poisoned");
            if f.is_none() {
                tracing::error!(error = %msg, "redo log failed; no more commits are possible");
                *f = Some(msg.clone());
            }
        }
        self.failed.store(true, Ordering::SeqCst);
        self.wake_everyone();
        LogError::Io(msg)
    }

    fn wake_everyone(&self) {
        self.write_waiters.notify_all();
        self.flush_waiters.notify_all();
        self.checkpoint_waiters.notify_all();
        self.recent_written.wake_all_waiters();
        self.recent_closed.wake_all_waiters();
        self.writer_event.force();
        self.flusher_event.force();
        self.timer_event.force();
    }

    fn append_kind(&self, kind: RecordKind, payload: &[u8]) -> Result<LsnRange, LogError> {
        self.check_alive()?;
        if payload.len() > self.max_payload as usize {
            return Err(LogError::TooLarge {
                len: payload.len(),
                max: self.max_payload as usize,
            });
        }
        let total = (RecordHeader::LEN + payload.len()) as u64;
        // The one point of serialisation: an atomic add.
        let start = self.current_lsn.fetch_add(total, Ordering::AcqRel);
        let end = start + total;

        // 1. Log file space: with its padding to a block, the write of this
        // record may not reach what the checkpoint still needs.
        let need = align_up(end).saturating_sub(self.capacity);
        if self.checkpoint_lsn.load(Ordering::Acquire) < need {
            self.m.log_full_waits.inc();
            self.wait_checkpoint(need)?;
        }
        // 2. Log buffer space: the bytes of the previous lap, up to the start
        // of the block holding write_lsn (the writer rereads that block).
        let need = align_up(end.saturating_sub(self.buffer.size()));
        if self.write_lsn.load(Ordering::Acquire) < need {
            self.m.buffer_full_waits.inc();
            self.wait_for(need, Target::Written, false)?;
        }
        // 3. A slot in recent_written.
        if self.recent_written.wait_for_space(start, || self.is_dead()) {
            self.m.recent_written_full.inc();
            self.check_alive()?;
        }

        let header = RecordHeader {
            len: payload.len() as u32,
            lsn: start,
            epoch: self.epoch,
            kind,
        }
        .encode(payload);
        self.buffer.copy_in(start, &header);
        self.buffer
            .copy_in(start + RecordHeader::LEN as u64, payload);
        self.recent_written.add_link(start, end);
        self.writer_event.set();
        self.m.appends.inc();

        // 4. A slot in recent_closed, before the caller adds dirty pages
        // (their order on the flush list is relaxed by at most its size).
        if self.recent_closed.wait_for_space(start, || self.is_dead()) {
            self.m.recent_closed_full.inc();
            self.check_alive()?;
        }
        Ok(LsnRange { start, end })
    }

    fn close(&self, r: LsnRange) {
        self.recent_closed.add_link(r.start, r.end);
        // Closers advance the tail themselves: no closer thread to wake.
        self.recent_closed.advance();
    }

    fn wait_checkpoint(&self, need: u64) -> Result<(), LogError> {
        while self.checkpoint_lsn.load(Ordering::Acquire) < need {
            self.check_alive()?;
            self.checkpoint_waiters.wait(
                || self.checkpoint_lsn.load(Ordering::SeqCst),
                need,
                || self.is_dead(),
            );
        }
        Ok(())
    }

    fn target_atomic(&self, t: Target) -> &AtomicU64 {
        match t {
            Target::Written => &self.write_lsn,
            Target::Flushed => &self.flushed_lsn,
        }
    }

    fn waiters(&self, t: Target) -> &LsnWaiters {
        match t {
            Target::Written => &self.write_waiters,
            Target::Flushed => &self.flush_waiters,
        }
    }

    /// Waits until write_lsn or flushed_lsn reaches `lsn`. `commit` waits
    /// may spin first and are counted in the commit metrics.
    fn wait_for(&self, lsn: u64, t: Target, commit: bool) -> Result<(), LogError> {
        let value = self.target_atomic(t);
        if value.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        if commit {
            self.m.commit_waits.inc();
        }
        if self.dedicated {
            if t == Target::Flushed {
                self.flush_requested_lsn.fetch_max(lsn, Ordering::SeqCst);
                self.flusher_event.set();
            }
            if commit && self.try_spin(value, lsn, t) {
                return Ok(());
            }
            if commit {
                self.m.block_waits.inc();
            }
            loop {
                self.check_alive()?;
                if self
                    .waiters(t)
                    .wait(|| value.load(Ordering::SeqCst), lsn, || self.is_dead())
                    == Woken::Satisfied
                {
                    return Ok(());
                }
            }
        }
        let mut spun = !commit;
        loop {
            if value.load(Ordering::Acquire) >= lsn {
                return Ok(());
            }
            self.check_alive()?;
            if let Ok(guard) = self.leader.try_lock() {
                self.leader_active.store(true, Ordering::SeqCst);
                self.m.leader_rounds.inc();
                let r = self.lead(lsn, t);
                self.leader_active.store(false, Ordering::SeqCst);
                drop(guard);
                // Hand leadership on: the waiter with the smallest unmet LSN
                // wakes and leads the next round.
                self.write_waiters
                    .notify(self.write_lsn.load(Ordering::Acquire), true);
                self.flush_waiters
                    .notify(self.flushed_lsn.load(Ordering::Acquire), true);
                r?;
                continue;
            }
            if !spun {
                spun = true;
                if self.try_spin(value, lsn, t) {
                    return Ok(());
                }
                self.m.block_waits.inc();
            }
            // Sleep while a leader works; the leader wakes us when our LSN
            // is met or when we are to lead.
            self.waiters(t).wait(
                || value.load(Ordering::SeqCst),
                lsn,
                || self.is_dead() || !self.leader_active.load(Ordering::SeqCst),
            );
        }
    }

    /// Spins while the CPU budget allows (spin::decide), for at most
    /// `max_spin_us`. Returns whether the target was reached.
    fn try_spin(&self, value: &AtomicU64, lsn: u64, t: Target) -> bool {
        if t == Target::Flushed
            && self.cfg.spin.spin_inflight_only
            && lsn > self.flushing_lsn.load(Ordering::SeqCst)
        {
            return false;
        }
        let flush_avg_us = self.flush_avg_ns.load(Ordering::Relaxed) / 1000;
        if spin::decide(&self.cpu.snapshot(), &self.cfg.spin, flush_avg_us) != SpinVerdict::Spin {
            return false;
        }
        let budget = Duration::from_micros(self.cfg.spin.max_spin_us);
        // Spin time is this thread's CPU time, not wall time: a spinner that
        // is throttled or descheduled mid-spin burns no CPU meanwhile.
        let cpu0 = thread_cpu_time();
        let t0 = Instant::now();
        let mut rounds: u32 = 0;
        let reached = loop {
            if value.load(Ordering::Acquire) >= lsn {
                break true;
            }
            std::hint::spin_loop();
            rounds = rounds.wrapping_add(1);
            if rounds % 64 == 0 && (t0.elapsed() >= budget || self.is_dead()) {
                break false;
            }
        };
        let spun = thread_cpu_time().saturating_sub(cpu0);
        self.m.spin_ns.add(spun.as_nanos() as u64);
        if reached {
            self.m.spin_hits.inc();
        } else {
            self.m.spin_misses.inc();
        }
        reached
    }

    /// One group commit round by the leader: write at least up to `lsn`,
    /// then flush if asked.
    fn lead(&self, lsn: u64, t: Target) -> Result<(), LogError> {
        self.write_up_to(lsn)?;
        if t == Target::Flushed {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes everything published, waiting for the appenders of any gap
    /// before `lsn` to publish (they wake us through writer_event).
    fn write_up_to(&self, lsn: u64) -> Result<(), LogError> {
        let mut w = self.writer.lock().expect("writer poisoned");
        loop {
            let ready = self.recent_written.advance();
            if ready > self.write_lsn.load(Ordering::Acquire) {
                self.write_locked(&mut w, ready)?;
            }
            if self.write_lsn.load(Ordering::Acquire) >= lsn {
                return Ok(());
            }
            self.check_alive()?;
            self.writer_event.wait_until(None, || {
                self.recent_written.advance() > self.write_lsn.load(Ordering::SeqCst)
                    || self.is_dead()
            });
        }
    }

    /// Writes [write_lsn, ready) to the file. The first block is rewritten
    /// from its start and the last is padded with zeros, so every write is
    /// whole blocks (what O_DIRECT needs).
    fn write_locked(&self, w: &mut WriterState, ready: u64) -> Result<(), LogError> {
        let start = self.write_lsn.load(Ordering::Acquire);
        debug_assert!(ready > start);
        // Invariant: the write never reaches bytes the checkpoint needs.
        assert!(
            align_up(ready) <= self.checkpoint_lsn.load(Ordering::Acquire) + self.capacity,
            "log write up to {ready} would overwrite the checkpoint's records"
        );
        let chunk = w.staging.len() as u64;
        let mut from = align_down(start);
        while from < ready {
            let to = ready.min(from + chunk);
            let n = (to - from) as usize;
            let padded = align_up(n as u64) as usize;
            // Keep written-but-unsynced bytes within the window recovery
            // assumes: sync what is written before going further.
            let window = unsynced_window_bytes(self.capacity);
            if from + padded as u64 > self.flushed_lsn.load(Ordering::Acquire) + window {
                self.write_lsn.store(from.max(start), Ordering::SeqCst);
                self.flush()?;
            }
            self.buffer.copy_out(from, &mut w.staging[..n]);
            w.staging[n..padded].fill(0);
            let mut at = from;
            let mut rest = &w.staging[..padded];
            while !rest.is_empty() {
                let pos = at % self.capacity;
                let len = rest.len().min((self.capacity - pos) as usize);
                self.file
                    .write_all_at(&rest[..len], DATA_OFFSET + pos)
                    .map_err(|e| self.fail("writing the redo log", e))?;
                self.m.writes.inc();
                self.m.bytes_written.add(len as u64);
                at += len as u64;
                rest = &rest[len..];
            }
            from = to;
        }
        self.write_lsn.store(ready, Ordering::SeqCst);
        self.write_waiters.notify(ready, false);
        if self.flush_requested_lsn.load(Ordering::SeqCst) > self.flushed_lsn.load(Ordering::SeqCst)
        {
            self.flusher_event.set();
        }
        Ok(())
    }

    /// fdatasync; then flushed_lsn = what was written before it started.
    fn flush(&self) -> Result<(), LogError> {
        let _role = self.flusher.lock().expect("flusher poisoned");
        let target = self.write_lsn.load(Ordering::Acquire);
        if target <= self.flushed_lsn.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flushing_lsn.store(target, Ordering::SeqCst);
        let t0 = Instant::now();
        self.file
            .sync_data()
            .map_err(|e| self.fail("flushing the redo log", e))?;
        let ns = t0.elapsed().as_nanos() as u64;
        self.m.fsyncs.inc();
        self.m.flush_ns_total.add(ns);
        // Moving average with weight 1/8 on the newest flush.
        let avg = self.flush_avg_ns.load(Ordering::Relaxed);
        let avg = if avg == 0 { ns } else { avg - avg / 8 + ns / 8 };
        self.flush_avg_ns.store(avg, Ordering::Relaxed);
        // Invariant: flushed_lsn <= write_lsn, and it only grows.
        let prev = self.flushed_lsn.fetch_max(target, Ordering::SeqCst);
        assert!(prev <= target, "flushed_lsn went backwards");
        self.flush_waiters.notify(target, false);
        Ok(())
    }

    fn writer_thread(&self) {
        loop {
            if self.is_dead() {
                return;
            }
            let ready = self.recent_written.advance();
            if ready > self.write_lsn.load(Ordering::Acquire) {
                let mut w = self.writer.lock().expect("writer poisoned");
                if self.write_locked(&mut w, ready).is_err() {
                    return;
                }
                continue;
            }
            self.writer_event.wait_until(None, || {
                self.recent_written.advance() > self.write_lsn.load(Ordering::SeqCst)
                    || self.is_dead()
            });
        }
    }

    fn flusher_thread(&self) {
        let pending =
            || self.write_lsn.load(Ordering::Acquire) > self.flushed_lsn.load(Ordering::Acquire);
        let requested = || {
            self.flush_requested_lsn.load(Ordering::SeqCst)
                > self.flushed_lsn.load(Ordering::SeqCst)
        };
        loop {
            if self.is_dead() {
                return;
            }
            if pending() && requested() {
                if self.flush().is_err() {
                    return;
                }
                continue;
            }
            let woke = self
                .flusher_event
                .wait_until(Some(BACKGROUND_FLUSH_INTERVAL), || {
                    (pending() && requested()) || self.is_dead()
                });
            // Levels 0 and 2: flush once a second.
            if !woke && pending() && self.flush().is_err() {
                return;
            }
        }
    }

    /// Leader mode only: levels 0 and 2 write and flush once a second.
    fn timer_thread(&self) {
        loop {
            self.timer_event
                .wait_until(Some(BACKGROUND_FLUSH_INTERVAL), || self.is_dead());
            if self.is_dead() {
                return;
            }
            let ready = self.recent_written.advance();
            if ready > self.flushed_lsn.load(Ordering::Acquire)
                && self.wait_for(ready, Target::Flushed, false).is_err()
            {
                return;
            }
        }
    }

    fn checkpoint(&self, lsn: u64) -> Result<(), LogError> {
        let closed = self.recent_closed.advance();
        assert!(
            lsn <= closed,
            "checkpoint at {lsn} passes the recent_closed tail {closed}"
        );
        self.wait_for(lsn, Target::Flushed, false)?;
        let mut st = self.checkpointer.lock().expect("checkpointer poisoned");
        if lsn <= self.checkpoint_lsn.load(Ordering::Acquire) {
            return Ok(());
        }
        // The epoch of the record at `lsn`: that of the last epoch start at
        // or before it.
        let mut epoch = st.floor_epoch;
        let mut keep_from = 0;
        for (i, &(start, e)) in st.eras.iter().enumerate() {
            if start <= lsn {
                epoch = e;
                keep_from = i + 1;
            }
        }
        let cp = Checkpoint {
            number: st.number + 1,
            lsn,
            epoch,
        };
        cp.encode(&mut st.block);
        self.file
            .write_all_at(&st.block, Checkpoint::slot_offset(cp.number))
            .map_err(|e| self.fail("writing a checkpoint", e))?;
        self.file
            .sync_data()
            .map_err(|e| self.fail("flushing a checkpoint", e))?;
        st.number = cp.number;
        st.floor_epoch = epoch;
        st.eras.drain(..keep_from);
        // Only now may writers reuse the space before `lsn`: the header that
        // stops recovery from reading it is durable.
        self.checkpoint_lsn.store(lsn, Ordering::SeqCst);
        self.checkpoint_waiters.notify(lsn, false);
        self.m.checkpoints.inc();
        Ok(())
    }
}
