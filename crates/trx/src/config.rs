//! How the engine is configured: the settings fixed at open (`TrxConfig`,
//! with the undo layout derived from them), the ones `SET GLOBAL` may
//! change while it runs (`RuntimeSettings`), and a transaction's isolation
//! level.

use crate::sys_page;
use millrace_buf::StoreConfig;
use std::sync::atomic::AtomicU64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Each statement sees what was committed when it started.
    ReadCommitted,
    /// The whole transaction sees what was committed at its first read.
    RepeatableRead,
}

/// What to do when undo passes its quota while a long-lived read view
/// stops purge from freeing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UndoQuotaPolicy {
    /// Roll back the transaction holding the oldest read view (it gets an
    /// error at its next statement), so purge can proceed.
    RollbackOldest,
    /// Make writers wait (up to the lock wait timeout) until purge has
    /// brought undo back under the quota.
    WaitWriters,
}

#[derive(Debug, Clone)]
pub struct TrxConfig {
    pub store: StoreConfig,
    /// Undo tablespaces; default: the effective CPU count, within 2..=8.
    pub undo_spaces: Option<u32>,
    /// Rollback segments; default: 16 per effective CPU, within 16..=128
    /// (seed 003: too few segments make commits queue on their mutexes).
    pub rsegs: Option<u32>,
    pub max_active_trx: usize,
    pub lock_wait_timeout_ms: u64,
    /// Run purge (tests of history growth may turn it off).
    pub purge: bool,
    /// Most purge worker threads; how many run follows the backlog.
    pub purge_threads: usize,
    /// History length above which DML statements are delayed; 0 = never.
    /// On by default (InnoDB's default is off): seed 002 shows a history
    /// left unbounded costing throughput for long after its cause is gone.
    pub max_purge_lag: u64,
    pub max_purge_lag_delay_us: u64,
    /// Undo bytes above which `undo_quota_policy` acts; 0 = no quota.
    pub undo_quota_bytes: u64,
    pub undo_quota_policy: UndoQuotaPolicy,
    /// A transaction idle this long is rolled back; 0 = never.
    pub idle_trx_timeout_ms: u64,
    /// An undo tablespace larger than this is truncated once purge has
    /// emptied it (new undo goes to the other spaces meanwhile); 0 = never.
    pub undo_truncate_bytes: u64,
}

impl Default for TrxConfig {
    fn default() -> Self {
        Self {
            store: StoreConfig::default(),
            undo_spaces: None,
            rsegs: None,
            max_active_trx: 1024,
            lock_wait_timeout_ms: 50_000,
            purge: true,
            purge_threads: 4,
            max_purge_lag: 10_000,
            max_purge_lag_delay_us: 10_000,
            undo_quota_bytes: 0,
            undo_quota_policy: UndoQuotaPolicy::RollbackOldest,
            idle_trx_timeout_ms: 0,
            undo_truncate_bytes: 256 << 20,
        }
    }
}

impl TrxConfig {
    /// (undo tablespaces, rollback segments), from the settings or the
    /// documented rule.
    pub fn undo_layout(&self, effective_cpus: u32, page_size: usize) -> (u32, u32) {
        let spaces = self
            .undo_spaces
            .unwrap_or(effective_cpus.clamp(2, 8))
            .max(1);
        let rsegs = self
            .rsegs
            .unwrap_or((16 * effective_cpus).clamp(16, 128))
            .clamp(1, sys_page::max_rsegs(page_size) as u32);
        (spaces, rsegs)
    }
}

/// Engine settings that `SET GLOBAL` may change while the engine runs; each
/// read takes the current value (no restart, no lock). The other
/// `TrxConfig` fields fix the on-disk layout or thread counts at open.
#[derive(Debug)]
pub struct RuntimeSettings {
    pub max_purge_lag: AtomicU64,
    pub max_purge_lag_delay_us: AtomicU64,
    pub lock_wait_timeout_ms: AtomicU64,
    pub idle_trx_timeout_ms: AtomicU64,
    pub undo_quota_bytes: AtomicU64,
}

impl RuntimeSettings {
    pub(crate) fn from_config(cfg: &TrxConfig) -> Self {
        Self {
            max_purge_lag: AtomicU64::new(cfg.max_purge_lag),
            max_purge_lag_delay_us: AtomicU64::new(cfg.max_purge_lag_delay_us),
            lock_wait_timeout_ms: AtomicU64::new(cfg.lock_wait_timeout_ms),
            idle_trx_timeout_ms: AtomicU64::new(cfg.idle_trx_timeout_ms),
            undo_quota_bytes: AtomicU64::new(cfg.undo_quota_bytes),
        }
    }
}
