//! The transaction system: transaction ids and serialisation numbers, the
//! set of active read-write transactions, and read views, with no global
//! lock (docs/design.md, "Transactions and read views").
//!
//! Active transactions live in a fixed array of slots of atomics. A writer
//! claims a slot (PENDING), then takes its id, then publishes it; a read
//! view reads the counters first and then scans the slots, waiting out any
//! PENDING one. Because a slot is marked before the counter moves, a view
//! that read a counter value after a transaction's id was handed out also
//! sees that transaction's slot (SeqCst order). Commit uses the same trick
//! for the serialisation number; a view reads each slot's number before its
//! id, which leaving the active set clears first, so a transaction a view
//! counts active has its number counted too. Read views register the oldest
//! serialisation number they need in a second array of slots, which purge
//! scans for its limit. A view slot's word also holds a generation that
//! moves at each reuse, so that a view closed twice (by the undo quota and
//! then by its owner) never frees the slot of a later view that happens to
//! have the same number.

use crate::error::{unpoisoned, TrxError};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

pub type TrxId = u64;

/// A view's ticket: its slot and the slot's generation in one nonzero word
/// (0 means no view), what others use to find or close it
/// (`view_limit`, `force_close_view`).
pub fn pack_view(slot: usize, generation: u16) -> u64 {
    VIEW_TICKET | ((slot as u64 & 0xffff_ffff) << 16) | generation as u64
}
/// (slot, generation) of a ticket from `pack_view`.
pub fn unpack_view(ticket: u64) -> (usize, u16) {
    (((ticket >> 16) & 0xffff_ffff) as usize, ticket as u16)
}
const VIEW_TICKET: u64 = 1 << 63;
const PENDING: u64 = u64::MAX;
/// A view slot's word: the generation in the top 16 bits, the view's
/// serialisation limit in the low 48 (0: the slot is free). Limits stay
/// below 2^48.
const NO_BITS: u32 = 48;
const NO_MASK: u64 = (1 << NO_BITS) - 1;
fn view_word(generation: u16, no: u64) -> u64 {
    debug_assert!(no & !NO_MASK == 0, "serialisation number past 2^48");
    ((generation as u64) << NO_BITS) | (no & NO_MASK)
}
fn word_generation(word: u64) -> u16 {
    (word >> NO_BITS) as u16
}

pub struct TrxSlot {
    id: AtomicU64,
    no: AtomicU64,
}

pub struct TrxSys {
    next_id: AtomicU64,
    next_no: AtomicU64,
    slots: Box<[TrxSlot]>,
    views: Box<[AtomicU64]>,
    slot_hint: AtomicUsize,
    /// Membership for "is this id active?" (implicit locks), sharded.
    active: Box<[Mutex<HashSet<TrxId>>]>,
}

const ACTIVE_SHARDS: usize = 64;

/// A consistent snapshot: which transactions' changes are visible.
#[derive(Debug, Clone)]
pub struct ReadView {
    /// The transaction that owns the view (its own changes are visible); 0
    /// for a read-only transaction.
    pub creator: TrxId,
    /// Ids at or above: not yet started when the view was made.
    pub low_limit_id: TrxId,
    /// Ids below: committed before the view was made.
    pub up_limit_id: TrxId,
    /// Active (uncommitted) ids in [up_limit_id, low_limit_id), sorted.
    pub active: Vec<TrxId>,
    /// Undo of transactions serialised below this number is not needed.
    pub low_limit_no: u64,
    pub(crate) slot: usize,
    /// The slot's generation when this view took it.
    pub(crate) generation: u16,
}

impl ReadView {
    pub fn sees(&self, id: TrxId) -> bool {
        id == self.creator
            || id < self.up_limit_id
            || (id < self.low_limit_id && self.active.binary_search(&id).is_err())
    }
}

fn spin_load(a: &AtomicU64) -> u64 {
    let mut n = 0u32;
    loop {
        let v = a.load(Ordering::SeqCst);
        if v != PENDING {
            return v;
        }
        // The owner is between two atomic stores; yield if it was preempted.
        n += 1;
        if n < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

impl TrxSys {
    pub fn new(next_id: TrxId, next_no: u64, max_active: usize) -> Self {
        let n = max_active.max(16);
        Self {
            next_id: AtomicU64::new(next_id.max(1)),
            next_no: AtomicU64::new(next_no.max(1)),
            slots: (0..n)
                .map(|_| TrxSlot {
                    id: AtomicU64::new(0),
                    no: AtomicU64::new(0),
                })
                .collect(),
            views: (0..n * 2).map(|_| AtomicU64::new(0)).collect(),
            slot_hint: AtomicUsize::new(0),
            active: (0..ACTIVE_SHARDS)
                .map(|_| Mutex::new(HashSet::new()))
                .collect(),
        }
    }

    pub fn next_id(&self) -> TrxId {
        self.next_id.load(Ordering::SeqCst)
    }
    pub fn next_no(&self) -> u64 {
        self.next_no.load(Ordering::SeqCst)
    }

    /// Claims a free view slot (marks it PENDING); returns it and the
    /// generation its view gets (one past the slot's last).
    fn claim_view(&self, hint: usize) -> Option<(usize, u16)> {
        let n = self.views.len();
        (0..n).map(|i| (hint + i) % n).find_map(|i| {
            let word = self.views[i].load(Ordering::SeqCst);
            let free = word != PENDING && word & NO_MASK == 0;
            let won = free
                && self.views[i]
                    .compare_exchange(word, PENDING, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok();
            won.then(|| (i, word_generation(word).wrapping_add(1)))
        })
    }

    /// A new read-write transaction: slot, id, active membership.
    pub fn register(&self) -> Result<(TrxId, usize), TrxError> {
        let hint = self.slot_hint.fetch_add(1, Ordering::Relaxed);
        let n = self.slots.len();
        let slot = (0..n)
            .map(|i| (hint + i) % n)
            .find(|&i| {
                self.slots[i]
                    .id
                    .compare_exchange(0, PENDING, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(TrxError::TooManyTransactions(n))?;
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        unpoisoned(self.active[id as usize % ACTIVE_SHARDS].lock()).insert(id);
        self.slots[slot].id.store(id, Ordering::SeqCst);
        Ok((id, slot))
    }

    /// Assigns the serialisation number of a committing transaction. The
    /// caller holds its rollback segment's mutex (history lists stay sorted).
    pub fn assign_no(&self, slot: usize) -> u64 {
        let s = &self.slots[slot];
        s.no.store(PENDING, Ordering::SeqCst);
        let no = self.next_no.fetch_add(1, Ordering::SeqCst);
        s.no.store(no, Ordering::SeqCst);
        no
    }

    /// The transaction is committed (or rolled back): new views see it.
    /// The id is cleared before the number (`open_view` reads them in the
    /// other order).
    pub fn deregister(&self, id: TrxId, slot: usize) {
        let s = &self.slots[slot];
        s.id.store(0, Ordering::SeqCst);
        s.no.store(0, Ordering::SeqCst);
        unpoisoned(self.active[id as usize % ACTIVE_SHARDS].lock()).remove(&id);
    }

    /// Runs `f` only if `id` is active, holding its active-set shard, so a
    /// commit (which leaves the set before releasing its locks) cannot slip
    /// between the check and `f`: an implicit lock converted here is
    /// released by that commit's release_all.
    pub fn with_active(&self, id: TrxId, f: impl FnOnce()) {
        let shard = unpoisoned(self.active[id as usize % ACTIVE_SHARDS].lock());
        if shard.contains(&id) {
            f();
        }
    }

    pub fn is_active(&self, id: TrxId) -> bool {
        unpoisoned(self.active[id as usize % ACTIVE_SHARDS].lock()).contains(&id)
    }

    pub fn active_count(&self) -> usize {
        self.active.iter().map(|s| unpoisoned(s.lock()).len()).sum()
    }

    /// Makes a read view for `creator` (0 = read-only). Takes no global lock.
    pub fn open_view(&self, creator: TrxId) -> Result<ReadView, TrxError> {
        let hint = self.slot_hint.fetch_add(1, Ordering::Relaxed);
        let (vslot, generation) = self
            .claim_view(hint)
            .ok_or(TrxError::TooManyTransactions(self.views.len()))?;
        let mut low_limit_no = self.next_no.load(Ordering::SeqCst);
        let low_limit_id = self.next_id.load(Ordering::SeqCst);
        let mut active = Vec::new();
        for s in self.slots.iter() {
            // The number before the id: `deregister` clears the id first,
            // so a transaction counted active here also has its number
            // counted. (Id first, a transaction leaving the active set
            // between the two loads would be active to this view with its
            // number missed, and purge could free undo this view follows.)
            let no = spin_load(&s.no);
            if no != 0 {
                low_limit_no = low_limit_no.min(no);
            }
            #[cfg(test)]
            between_slot_loads(s);
            let id = spin_load(&s.id);
            if id != 0 && id < low_limit_id && id != creator {
                active.push(id);
            }
        }
        active.sort_unstable();
        let up_limit_id = active.first().copied().unwrap_or(low_limit_id);
        self.views[vslot].store(view_word(generation, low_limit_no), Ordering::SeqCst);
        Ok(ReadView {
            creator,
            low_limit_id,
            up_limit_id,
            active,
            low_limit_no,
            slot: vslot,
            generation,
        })
    }

    pub fn close_view(&self, v: &ReadView) {
        // A view force-closed by the undo quota may have been reused since:
        // clear the slot only if it still holds this view (its generation;
        // a later view may have the same number).
        let _ = self.views[v.slot].compare_exchange(
            view_word(v.generation, v.low_limit_no),
            view_word(v.generation, 0),
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
    }

    /// The view of ticket `pack_view(slot, generation)` if its slot still
    /// holds it: its word.
    fn ticket_word(&self, ticket: u64) -> Option<(usize, u64)> {
        let (slot, generation) = unpack_view(ticket);
        let word = self.views.get(slot)?.load(Ordering::SeqCst);
        let live = ticket & VIEW_TICKET != 0
            && word != PENDING
            && word & NO_MASK != 0
            && word_generation(word) == generation;
        live.then_some((slot, word))
    }

    /// The serialisation limit of the view with this ticket, if it is
    /// still open.
    pub fn view_limit(&self, ticket: u64) -> Option<u64> {
        self.ticket_word(ticket).map(|(_, word)| word & NO_MASK)
    }

    /// Releases a view's slot from outside its owner (undo quota), given
    /// its ticket; a no-op if that view is closed already.
    pub fn force_close_view(&self, ticket: u64) {
        if let Some((slot, word)) = self.ticket_word(ticket) {
            let _ = self.views[slot].compare_exchange(
                word,
                view_word(word_generation(word), 0),
                Ordering::SeqCst,
                Ordering::Relaxed,
            );
        }
    }

    /// Undo of transactions with a serialisation number below this is seen
    /// by every open read view and by every view made from now on (their
    /// transactions have left the active set), so purge may remove it.
    pub fn purge_limit_no(&self) -> u64 {
        let mut limit = self.next_no.load(Ordering::SeqCst);
        // A transaction between taking its number and leaving the active
        // set has its log in the history already, but a view made now
        // still counts it as active and needs its undo: hold purge below it.
        for s in self.slots.iter() {
            let no = spin_load(&s.no);
            if no != 0 {
                limit = limit.min(no);
            }
        }
        for v in self.views.iter() {
            let no = spin_load(v) & NO_MASK;
            if no != 0 {
                limit = limit.min(no);
            }
        }
        limit
    }

    /// Open read views (for metrics).
    pub fn open_views(&self) -> usize {
        self.views
            .iter()
            .filter(|v| {
                let word = v.load(Ordering::Relaxed);
                word != PENDING && word & NO_MASK != 0
            })
            .count()
    }
}

/// A test's hook run by `open_view` between its two loads of one
/// transaction slot (on the thread that set it).
#[cfg(test)]
type SlotHook = Box<dyn FnMut(&TrxSlot)>;
#[cfg(test)]
thread_local! {
    static SLOT_HOOK: std::cell::RefCell<Option<SlotHook>> = std::cell::RefCell::new(None);
}
#[cfg(test)]
fn between_slot_loads(slot: &TrxSlot) {
    SLOT_HOOK.with(|h| {
        if let Some(f) = h.borrow_mut().as_mut() {
            f(slot)
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    /// A transaction that leaves the active set while a view is between its
    /// two loads of the transaction's slot: the view may count it active
    /// only if it also counts its serialisation number, or purge would free
    /// undo that the view follows (sysbench: "undo page ... is damaged").
    #[test]
    fn a_view_that_counts_a_trx_active_holds_purge_below_its_number() {
        let sys = Arc::new(TrxSys::new(1, 1, 16));
        let (id, slot) = sys.register().unwrap();
        let no = sys.assign_no(slot);
        let s2 = sys.clone();
        let mut fired = false;
        SLOT_HOOK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |s| {
                if std::ptr::eq(s, &s2.slots[slot]) && !fired {
                    fired = true;
                    s2.deregister(id, slot);
                }
            }))
        });
        let v = sys.open_view(0).unwrap();
        SLOT_HOOK.with(|h| *h.borrow_mut() = None);
        if !v.sees(id) {
            assert!(
                v.low_limit_no <= no,
                "the view counts trx {id} active but its limit {} passed its number {no}",
                v.low_limit_no
            );
            assert!(sys.purge_limit_no() <= no);
        }
        sys.close_view(&v);
    }

    /// The undo quota force-closes a busy transaction's view; another
    /// transaction's view takes the slot with the same serialisation
    /// number (nothing committed in between); then the first owner closes
    /// its view: that must not unregister the second view, or purge would
    /// free undo the second view still reads.
    #[test]
    fn a_view_closed_twice_leaves_the_slots_next_view_registered() {
        let sys = TrxSys::new(1, 1, 16);
        let a = sys.open_view(0).unwrap();
        sys.force_close_view(pack_view(a.slot, a.generation));
        // Fill every free slot, so one of the new views takes a's.
        let later: Vec<ReadView> = (0..sys.views.len())
            .map_while(|_| sys.open_view(0).ok())
            .collect();
        let b = later
            .iter()
            .find(|v| v.slot == a.slot)
            .expect("a's slot reused");
        assert_eq!(
            b.low_limit_no, a.low_limit_no,
            "the same number: the ABA case"
        );
        for v in later.iter().filter(|v| v.slot != a.slot) {
            sys.close_view(v);
        }
        sys.close_view(&a);
        sys.force_close_view(pack_view(a.slot, a.generation));
        // Commits move the counter on; b still holds purge at its number.
        let (id, slot) = sys.register().unwrap();
        sys.assign_no(slot);
        sys.deregister(id, slot);
        assert!(
            sys.purge_limit_no() <= b.low_limit_no,
            "b's view was unregistered by a's stale close"
        );
        assert_eq!(
            sys.view_limit(pack_view(b.slot, b.generation)),
            Some(b.low_limit_no)
        );
        assert_eq!(sys.view_limit(pack_view(a.slot, a.generation)), None);
        sys.close_view(b);
        assert_eq!(sys.open_views(), 0);
        assert!(sys.purge_limit_no() > b.low_limit_no);
    }

    #[test]
    fn views_see_committed_not_active() {
        let sys = TrxSys::new(1, 1, 16);
        let (a, sa) = sys.register().unwrap();
        let (b, sb) = sys.register().unwrap();
        let v1 = sys.open_view(0).unwrap();
        assert!(!v1.sees(a) && !v1.sees(b));
        sys.assign_no(sa);
        sys.deregister(a, sa);
        assert!(!v1.sees(a), "a view is a snapshot");
        let v2 = sys.open_view(b).unwrap();
        assert!(v2.sees(a) && v2.sees(b));
        let (c, _) = sys.register().unwrap();
        assert!(!v2.sees(c));
        assert!(sys.purge_limit_no() <= v1.low_limit_no);
        sys.close_view(&v1);
        sys.close_view(&v2);
        let _ = sb;
    }

    /// Between taking its serialisation number and leaving the active set, a
    /// committing transaction holds purge below its number (a view made in
    /// that window still needs its undo).
    #[test]
    fn purge_waits_for_the_commit_window() {
        let sys = TrxSys::new(1, 1, 16);
        let (id, slot) = sys.register().unwrap();
        let no = sys.assign_no(slot);
        assert!(sys.purge_limit_no() <= no);
        let v = sys.open_view(0).unwrap();
        assert!(!v.sees(id), "still active for a view made now");
        sys.close_view(&v);
        assert!(
            sys.purge_limit_no() <= no,
            "the open window alone holds purge"
        );
        sys.deregister(id, slot);
        assert!(sys.purge_limit_no() > no);
    }

    /// Concurrent registration, commit and view creation: a view never
    /// sees a transaction that commits after the view was made, and the
    /// purge limit never passes an open view's serialisation limit.
    #[test]
    fn snapshot_rules_hold_under_concurrency() {
        let sys = Arc::new(TrxSys::new(1, 1, 64));
        let committed = Arc::new(Mutex::new(HashSet::new()));
        let numbers = Arc::new(Mutex::new(HashMap::new()));
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let (sys, committed) = (sys.clone(), committed.clone());
                let numbers = numbers.clone();
                std::thread::spawn(move || {
                    for _ in 0..3000 {
                        let (id, slot) = sys.register().unwrap();
                        let no = sys.assign_no(slot);
                        numbers.lock().unwrap().insert(id, no);
                        sys.deregister(id, slot);
                        committed.lock().unwrap().insert(id);
                    }
                })
            })
            .collect();
        for _ in 0..3000 {
            let before: HashSet<u64> = committed.lock().unwrap().clone();
            let v = sys.open_view(0).unwrap();
            for id in &before {
                assert!(v.sees(*id), "committed before the view, invisible");
            }
            let numbers = numbers.lock().unwrap();
            for id in &v.active {
                if let Some(&no) = numbers.get(id) {
                    assert!(
                        no >= v.low_limit_no,
                        "trx {id} (no {no}) active in a view whose limit is {}",
                        v.low_limit_no
                    );
                }
            }
            drop(numbers);
            assert!(sys.purge_limit_no() <= v.low_limit_no);
            sys.close_view(&v);
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(sys.active_count(), 0);
    }
}
