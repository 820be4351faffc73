//! Settings of the redo log, with defaults and the rules that derive them.

use std::fmt;
use std::str::FromStr;

/// `flush_log_at_trx_commit`: what a commit waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// 0: write and flush about once a second; the commit waits for nothing.
    Lazy = 0,
    /// 1: the commit waits until its records are flushed (fdatasync).
    Flush = 1,
    /// 2: the commit waits until its records are written; flush once a second.
    Write = 2,
}

impl Durability {
    pub fn from_level(level: u8) -> Option<Self> {
        match level {
            0 => Some(Self::Lazy),
            1 => Some(Self::Flush),
            2 => Some(Self::Write),
            _ => None,
        }
    }
    pub fn level(self) -> u8 {
        self as u8
    }
}

/// `log_writer_threads`: who writes and flushes the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterThreads {
    /// Dedicated threads when the effective CPU count is at least
    /// `AUTO_DEDICATED_MIN_CPUS`, a group commit leader otherwise.
    Auto,
    /// A dedicated log writer thread and a log flusher thread (MySQL 8.0).
    On,
    /// Committing threads write and flush for each other: one becomes the
    /// group commit leader, the others wait (MariaDB's group_commit_lock).
    Off,
}

/// With fewer effective CPUs, two always-ready background threads compete
/// with the committing threads for the same cores and add two wake-ups to
/// every commit; a leader that writes and flushes itself is cheaper.
pub const AUTO_DEDICATED_MIN_CPUS: u32 = 4;

impl WriterThreads {
    /// Whether dedicated threads run, given the effective CPU count.
    pub fn dedicated(self, effective_cpus: u32) -> bool {
        match self {
            Self::On => true,
            Self::Off => false,
            Self::Auto => effective_cpus >= AUTO_DEDICATED_MIN_CPUS,
        }
    }
}

impl FromStr for WriterThreads {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "on" | "1" | "true" => Ok(Self::On),
            "off" | "0" | "false" => Ok(Self::Off),
            _ => Err(format!(
                "log_writer_threads must be auto, on or off, not {s:?}"
            )),
        }
    }
}

impl fmt::Display for WriterThreads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        })
    }
}

/// When a commit wait may spin before it blocks. The thresholds are MySQL
/// 8.0's defaults (innodb_log_spin_cpu_abs_lwm, innodb_log_spin_cpu_pct_hwm,
/// innodb_log_wait_for_flush_spin_hwm).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpinConfig {
    /// No spinning while the process uses less than this share of one CPU,
    /// in percent: with the CPUs idle, blocking costs no throughput.
    pub cpu_abs_lwm_pct: f64,
    /// No spinning while usage per available CPU is at or above this, in
    /// percent: spinning would take CPU from threads doing work.
    pub cpu_pct_hwm: f64,
    /// No spinning while the average flush takes longer than this.
    pub flush_hwm_us: u64,
    /// How long one commit wait may spin before it blocks.
    pub max_spin_us: u64,
    /// `cpu_quota_aware`: count CPUs by the cgroup quota and react to
    /// throttling (on), or by the affinity mask only as MySQL 8.0 does (off).
    pub cpu_quota_aware: bool,
    /// `spin_inflight_only`: a flush wait spins only if the fdatasync already
    /// in flight covers its LSN (on). Otherwise it needs a whole further
    /// round, longer than any useful spin. Off spins regardless, as MySQL
    /// 8.0 does. (With it off, 64 committers on 2 CPUs spun 26-70% of their
    /// CPU for a 0.3% hit rate.)
    pub spin_inflight_only: bool,
}

impl Default for SpinConfig {
    fn default() -> Self {
        Self {
            cpu_abs_lwm_pct: 80.0,
            cpu_pct_hwm: 50.0,
            flush_hwm_us: 400,
            max_spin_us: 100,
            cpu_quota_aware: true,
            spin_inflight_only: true,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    /// The log file, relative to the storage root.
    pub file_name: String,
    /// Bytes of the circular data region; a multiple of 4096.
    pub capacity_bytes: u64,
    /// Log buffer size; a power of two.
    pub buffer_bytes: usize,
    /// Slots of the recent_written link buffer.
    pub recent_written_bytes: usize,
    /// Slots of the recent_closed link buffer.
    pub recent_closed_bytes: usize,
    pub writer_threads: WriterThreads,
    pub durability: Durability,
    pub spin: SpinConfig,
    /// Bytes the writer copies and writes per write call at most.
    pub write_chunk_bytes: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            file_name: "redo/log0".into(),
            capacity_bytes: 256 << 20,
            buffer_bytes: 16 << 20,
            recent_written_bytes: 1 << 20,
            recent_closed_bytes: 2 << 20,
            writer_threads: WriterThreads::Auto,
            durability: Durability::Flush,
            spin: SpinConfig::default(),
            write_chunk_bytes: 1 << 20,
        }
    }
}

impl LogConfig {
    /// The largest payload one record may carry. A record must fit in half
    /// the log buffer and a quarter of the file, so a reservation waiting for
    /// space can always be satisfied by the records before it.
    pub fn max_payload_bytes(&self) -> u32 {
        let by_buffer = self.buffer_bytes as u64 / 2 - crate::format::BLOCK;
        let by_file = self.capacity_bytes / 4;
        (by_buffer.min(by_file) - crate::format::RecordHeader::LEN as u64).min(u32::MAX as u64)
            as u32
    }

    pub fn validate(&self) -> Result<(), String> {
        let block = crate::format::BLOCK;
        let max = crate::format::MAX_CAPACITY;
        if !(16 * block..=max).contains(&self.capacity_bytes) || self.capacity_bytes % block != 0 {
            return Err(format!(
                "log capacity {} must be a multiple of {block} from {} to {max}",
                self.capacity_bytes,
                16 * block
            ));
        }
        if !self.buffer_bytes.is_power_of_two() || (self.buffer_bytes as u64) < 4 * block {
            return Err(format!(
                "log buffer {} must be a power of two of at least {}",
                self.buffer_bytes,
                4 * block
            ));
        }
        if self.recent_written_bytes < 2 || self.recent_closed_bytes < 2 {
            return Err("link buffer sizes must be at least 2".into());
        }
        if self.write_chunk_bytes < block as usize || self.write_chunk_bytes % block as usize != 0 {
            return Err(format!("write chunk must be a multiple of {block}"));
        }
        Ok(())
    }
}
