//! The history bounds: what keeps undo from growing without limit while
//! purge is behind or held back. Purge lag delay (DML waits when the
//! history is long and purge could catch up), the undo quota (roll back
//! the transaction with the oldest read view, or make writers wait), and
//! the idle transaction timeout. The purge thread runs `policies` after
//! each round; the write path calls the writer-side waits.

use crate::config::UndoQuotaPolicy;
use crate::error::{unpoisoned, TrxError};
use crate::kill::KillReason;
use crate::shared::{Engine, TrxShared};
use millrace_buf::space;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Applies the idle timeout and the undo quota policy (the purge thread,
/// after each round).
pub(crate) fn policies(e: &Engine) -> Result<(), TrxError> {
    let now = e.now_ms();
    let open = e.open_trx.all();
    if e.settings().idle_trx_timeout_ms.load(Ordering::Relaxed) > 0 {
        for t in &open {
            let idle = now.saturating_sub(t.last_active_ms.load(Ordering::Relaxed));
            if idle > e.settings().idle_trx_timeout_ms.load(Ordering::Relaxed)
                && e.kill_if_idle(t, KillReason::IdleTimeout)
            {
                e.m.idle_timeouts.inc();
            }
        }
    }
    if e.settings().undo_quota_bytes.load(Ordering::Relaxed) > 0 {
        let bytes = e.undo_bytes()?;
        let over = bytes > e.settings().undo_quota_bytes.load(Ordering::Relaxed);
        match e.cfg.undo_quota_policy {
            UndoQuotaPolicy::RollbackOldest if over => {
                // The transaction whose view holds purge back the most.
                let oldest = open
                    .iter()
                    .filter_map(|t| {
                        let ticket = t.view_no.load(Ordering::SeqCst);
                        e.sys.view_limit(ticket).map(|no| (no, t))
                    })
                    .min_by_key(|(no, _)| *no);
                if let Some((no, t)) = oldest {
                    if no <= e.sys.purge_limit_no() && e.history_len() > 0 {
                        tracing::warn!(undo_bytes = bytes, "undo quota exceeded: rolling back the transaction with the oldest read view");
                        e.kill_for_quota(t);
                        e.m.quota_actions.inc();
                    }
                }
            }
            UndoQuotaPolicy::WaitWriters => {
                let (m, cv) = &e.writers_blocked;
                let mut blocked = unpoisoned(m.lock());
                if over && !*blocked {
                    tracing::warn!(
                        undo_bytes = bytes,
                        "undo quota exceeded: writers wait for purge"
                    );
                    *blocked = true;
                    e.m.quota_actions.inc();
                } else if *blocked
                    && bytes <= e.settings().undo_quota_bytes.load(Ordering::Relaxed) * 9 / 10
                {
                    *blocked = false;
                    cv.notify_all();
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// How often a writer waiting for the undo quota looks whether the engine
/// stopped (see `wait_for_quota`).
const FAILURE_POLL: Duration = Duration::from_millis(100);

impl Engine {
    /// Bytes of undo tablespaces in use (allocated minus free pages).
    pub fn undo_bytes(&self) -> Result<u64, TrxError> {
        let ps = self.store.pool().page_size() as u64;
        let mut spaces: Vec<u32> = self.rsegs.iter().map(|r| r.space).collect();
        spaces.sort_unstable();
        spaces.dedup();
        let mut total = 0;
        for s in spaces {
            let mut mtr = self.store.mtr()?;
            let (size, free) = space::space_size(&mut mtr, s)?;
            total += (size - free) as u64 * ps;
        }
        Ok(total)
    }

    pub(crate) fn oldest_view_age_ms(&self) -> u64 {
        let now = self.now_ms();
        self.open_trx
            .all()
            .into_iter()
            .filter_map(|t| {
                let opened = t.view_opened_ms.load(Ordering::Relaxed);
                (opened != 0).then(|| (now + 1).saturating_sub(opened))
            })
            .max()
            .unwrap_or(0)
    }
    /// Rolls back a transaction on behalf of a policy if it is idle (not in
    /// a call). Returns whether it was done now; false if it is busy (its
    /// owner is told at its next call) or already over.
    pub(crate) fn kill_if_idle(&self, t: &TrxShared, reason: KillReason) -> bool {
        let Ok(mut st) = t.state.try_lock() else {
            return false;
        };
        if st.done {
            return false;
        }
        t.killed.set(reason);
        let _ = self.rollback_state(&mut st);
        true
    }

    /// The undo quota's victim must let purge proceed now: its read view is
    /// closed at once (its next statement fails; a statement running now
    /// may fail reading undo purge freed, with an error, not a panic), and
    /// it is rolled back now if idle, else by its owner at the next call.
    pub(crate) fn kill_for_quota(&self, t: &TrxShared) {
        t.killed.set(KillReason::UndoQuota);
        if self.kill_if_idle(t, KillReason::UndoQuota) {
            return;
        }
        // Busy: close the view now through the registry of view slots.
        let ticket = t.view_no.swap(0, Ordering::SeqCst);
        if ticket != 0 {
            self.sys.force_close_view(ticket);
        }
    }

    /// The wait_writers policy: block while undo is over quota.
    pub(crate) fn wait_for_quota(&self) -> Result<(), TrxError> {
        let (m, cv) = &self.writers_blocked;
        let mut blocked = unpoisoned(m.lock());
        if !*blocked {
            return Ok(());
        }
        self.m.writer_quota_waits.inc();
        let deadline = Instant::now()
            + Duration::from_millis(self.settings.lock_wait_timeout_ms.load(Ordering::Relaxed));
        while *blocked {
            // A stopped engine will never purge: waiting writers leave
            // with its error (`Engine::fail` wakes them). Not
            // `check_alive`, which may call `fail`, which takes this mutex.
            if self.failed.get().is_some() || self.store.log().is_failed() {
                drop(blocked);
                return self.check_alive();
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(TrxError::LockWaitTimeout);
            }
            // Woken by purge or `Engine::fail`; a store that stopped on its
            // own wakes nobody, so look again at least every FAILURE_POLL.
            blocked = unpoisoned(cv.wait_timeout(blocked, (deadline - now).min(FAILURE_POLL))).0;
        }
        Ok(())
    }

    /// DML delay when the history is longer than max_purge_lag (InnoDB's
    /// innodb_max_purge_lag): grows with the excess, capped.
    pub(crate) fn purge_lag_delay(&self) {
        let lag = self.settings.max_purge_lag.load(Ordering::Relaxed);
        let hl = self.history_len();
        // Only when purge is behind for lack of time: when a read view holds
        // it back, slowing writers frees nothing (the undo quota's case).
        if lag == 0 || hl <= lag || self.purge_blocked_by_view.load(Ordering::Relaxed) {
            return;
        }
        let delay_us = ((hl - lag).saturating_mul(5_000) / lag)
            .min(self.settings.max_purge_lag_delay_us.load(Ordering::Relaxed));
        if delay_us > 0 {
            self.m.purge_delay_count.inc();
            self.m.purge_delay_us.add(delay_us);
            std::thread::sleep(Duration::from_micros(delay_us));
        }
    }
}
