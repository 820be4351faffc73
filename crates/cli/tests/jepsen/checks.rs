//! The checkers: each judges the history (and, for the durable state, what
//! a fresh connection reads after a restart) and returns its violations, one
//! line each. Only `Ok` reads are judged; a write's outcome decides what
//! the state may hold: `Ok` must be there, `Fail` must not, `Info` may.

use crate::common::client::{Client, ClientError};
use crate::history::{Event, Op, Outcome, MARKER};
use crate::workload::{ints, pairs, Mix, ACCOUNTS, INITIAL_BALANCE, TOTAL_BALANCE};
use std::collections::{BTreeMap, BTreeSet};

/// What the database holds, read in one transaction after a restart.
#[derive(Default, Debug)]
pub struct State {
    pub balances: Vec<(i64, i64)>,
    /// (id, src, dst, amt)
    pub ledger: Vec<(i64, i64, i64, i64)>,
    pub counters: Vec<(i64, i64)>,
    pub unique_values: Vec<i64>,
}

pub fn read_state(c: &mut Client, mix: Mix) -> Result<State, ClientError> {
    let mut s = State::default();
    c.exec("BEGIN")?;
    match mix {
        Mix::Bank => {
            s.balances = pairs(&c.rows("SELECT id, bal FROM jep.accounts ORDER BY id")?)?;
            s.counters = pairs(&c.rows("SELECT id, n FROM jep.counters ORDER BY id")?)?;
            for r in c.rows("SELECT id, src, dst, amt FROM jep.ledger ORDER BY id")? {
                let v: Option<Vec<i64>> = r.iter().map(|x| x.as_deref()?.parse().ok()).collect();
                match v.as_deref() {
                    Some(&[id, src, dst, amt]) => s.ledger.push((id, src, dst, amt)),
                    _ => return Err(ClientError::Protocol(format!("ledger row {r:?}"))),
                }
            }
        }
        Mix::Unique => s.unique_values = ints(&c.rows("SELECT v FROM jep.uniq")?)?,
    }
    c.exec("COMMIT")?;
    Ok(s)
}

/// A named list of violations.
pub type Verdict = (&'static str, Vec<String>);

/// The checks of what reads saw during the run.
pub fn check_reads(mix: Mix, history: &[Event]) -> Vec<Verdict> {
    match mix {
        Mix::Bank => vec![
            (
                "balances_sum_to_the_total_in_every_read",
                balance_reads(history),
            ),
            (
                "reads_repeat_within_a_transaction",
                repeatable_reads(history),
            ),
            ("no_read_sees_a_rolled_back_write", dirty_reads(history)),
            ("no_lost_update_of_a_locked_counter", lost_updates(history)),
        ],
        Mix::Unique => vec![("unique_index_holds_in_every_read", unique_reads(history))],
    }
}

/// The checks of the state read after a restart, against the history up
/// to the kill.
pub fn check_state(mix: Mix, history: &[Event], s: &State) -> Vec<Verdict> {
    match mix {
        Mix::Bank => vec![
            (
                "acknowledged_transfers_survive",
                durable_transfers(history, s),
            ),
            ("ledger_explains_every_balance", ledger_explains(s)),
            (
                "counters_count_acknowledged_increments",
                counters(history, s),
            ),
        ],
        Mix::Unique => vec![("unique_index_holds_after_restart", unique_state(s))],
    }
}

fn oks(history: &[Event]) -> impl Iterator<Item = &Event> {
    history.iter().filter(|e| e.outcome == Outcome::Ok)
}

fn balance_reads(history: &[Event]) -> Vec<String> {
    let mut v = Vec::new();
    for e in oks(history) {
        if let Op::ReadBalances { first, second } = &e.op {
            for (which, read) in [("first", first), ("second", second)] {
                let sum: i64 = read.iter().map(|(_, b)| b).sum();
                if sum != TOTAL_BALANCE || read.len() != ACCOUNTS as usize {
                    v.push(format!(
                        "process {} round {} at {:?}: {which} read of {} accounts sums to {sum}, not {TOTAL_BALANCE}: {read:?}",
                        e.process,
                        e.round,
                        e.invoked,
                        read.len()
                    ));
                }
            }
        }
    }
    v
}

fn repeatable_reads(history: &[Event]) -> Vec<String> {
    let mut v = Vec::new();
    for e in oks(history) {
        let differ = match &e.op {
            Op::ReadBalances { first, second } => first != second,
            Op::ReadLedger { first, second, .. } => first != second,
            _ => false,
        };
        if differ {
            v.push(format!(
                "process {} round {}: two reads in one transaction differ: {:?}",
                e.process, e.round, e.op
            ));
        }
    }
    v
}

/// No read sees a marker (a write always rolled back), nor a ledger row of
/// a transfer that failed.
fn dirty_reads(history: &[Event]) -> Vec<String> {
    let failed: BTreeSet<i64> = history
        .iter()
        .filter_map(|e| match (&e.op, &e.outcome) {
            (Op::Transfer { ledger_id, .. }, Outcome::Fail(_)) => Some(*ledger_id),
            _ => None,
        })
        .collect();
    let mut v = Vec::new();
    for e in oks(history) {
        let seen: Vec<String> = match &e.op {
            Op::ReadBalances { first, second } => first
                .iter()
                .chain(second)
                .filter(|(_, b)| b.abs() >= MARKER / 2)
                .map(|(id, b)| format!("account {id} = {b}"))
                .collect(),
            Op::ReadLedger { first, second, .. } => first
                .iter()
                .chain(second)
                .filter(|id| **id < 0 || failed.contains(id))
                .map(|id| format!("ledger row {id}"))
                .collect(),
            _ => Vec::new(),
        };
        if !seen.is_empty() {
            v.push(format!(
                "process {} round {} saw writes that were rolled back: {}",
                e.process,
                e.round,
                seen.join(", ")
            ));
        }
    }
    v
}

/// Two acknowledged read-modify-writes of one counter under FOR UPDATE
/// never read the same value (if they did, one increment was lost).
fn lost_updates(history: &[Event]) -> Vec<String> {
    let mut seen: BTreeMap<(i64, i64), &Event> = BTreeMap::new();
    let mut v = Vec::new();
    for e in oks(history) {
        if let Op::Increment {
            counter,
            read: Some(n),
        } = e.op
        {
            if let Some(other) = seen.insert((counter, n), e) {
                v.push(format!(
                    "counter {counter}: processes {} (round {}) and {} (round {}) both read {n} and committed {}",
                    other.process,
                    other.round,
                    e.process,
                    e.round,
                    n + 1
                ));
            }
        }
    }
    v
}

fn durable_transfers(history: &[Event], s: &State) -> Vec<String> {
    let present: BTreeSet<i64> = s.ledger.iter().map(|r| r.0).collect();
    let mut attempted = BTreeSet::new();
    let mut v = Vec::new();
    for e in history {
        if let Op::Transfer { ledger_id, .. } = e.op {
            attempted.insert(ledger_id);
            let here = present.contains(&ledger_id);
            match &e.outcome {
                Outcome::Ok if !here => v.push(format!(
                    "transfer {ledger_id} (process {}, round {}) was acknowledged and is gone",
                    e.process, e.round
                )),
                Outcome::Fail(code) if here => v.push(format!(
                    "transfer {ledger_id} (process {}, round {}) failed ({code}) and is there",
                    e.process, e.round
                )),
                _ => {}
            }
        }
    }
    for id in present.difference(&attempted) {
        v.push(format!("ledger row {id} was never written by a transfer"));
    }
    v
}

/// Each balance is the initial one plus the surviving ledger rows: a
/// transfer's updates and its ledger row committed together or not at all.
fn ledger_explains(s: &State) -> Vec<String> {
    let mut want: BTreeMap<i64, i64> = (0..ACCOUNTS).map(|a| (a, INITIAL_BALANCE)).collect();
    for &(_, src, dst, amt) in &s.ledger {
        *want.entry(src).or_default() -= amt;
        *want.entry(dst).or_default() += amt;
    }
    let got: BTreeMap<i64, i64> = s.balances.iter().copied().collect();
    let mut v = Vec::new();
    if got != want {
        v.push(format!(
            "balances {got:?} are not what the {} ledger rows make {want:?}",
            s.ledger.len()
        ));
    }
    let sum: i64 = got.values().sum();
    if sum != TOTAL_BALANCE {
        v.push(format!("balances sum to {sum}, not {TOTAL_BALANCE}"));
    }
    v
}

/// Each counter lies between its acknowledged increments and those plus
/// the ones in doubt.
fn counters(history: &[Event], s: &State) -> Vec<String> {
    let mut bounds: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for e in history {
        let counter = match e.op {
            Op::Increment { counter, .. } | Op::Add { counter } => counter,
            _ => continue,
        };
        let b = bounds.entry(counter).or_default();
        match e.outcome {
            Outcome::Ok => b.0 += 1,
            Outcome::Info(_) => b.1 += 1,
            Outcome::Fail(_) => {}
        }
    }
    let mut v = Vec::new();
    for &(counter, n) in &s.counters {
        let (ok, info) = bounds.get(&counter).copied().unwrap_or_default();
        if n < ok || n > ok + info {
            v.push(format!(
                "counter {counter} = {n}: {ok} increments acknowledged, {info} in doubt"
            ));
        }
    }
    v
}

fn duplicates(values: &[i64]) -> Vec<i64> {
    let mut seen = BTreeSet::new();
    let mut dup = BTreeSet::new();
    for &x in values {
        if !seen.insert(x) {
            dup.insert(x);
        }
    }
    dup.into_iter().collect()
}

fn unique_reads(history: &[Event]) -> Vec<String> {
    let mut v = Vec::new();
    for e in oks(history) {
        if let Op::ReadUnique { lo, hi, values } = &e.op {
            let dup = duplicates(values);
            if !dup.is_empty() {
                v.push(format!(
                    "process {} round {}: values {dup:?} more than once in one read of [{lo}, {hi}]",
                    e.process, e.round
                ));
            }
        }
    }
    v
}

fn unique_state(s: &State) -> Vec<String> {
    let dup = duplicates(&s.unique_values);
    if dup.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "values {dup:?} are in the UNIQUE column more than once ({} rows)",
            s.unique_values.len()
        )]
    }
}

/// The checkers flag hand-made bad histories and pass good ones: none of
/// them is vacuous.
mod tests {
    use super::*;
    use std::time::Duration;

    fn ev(process: usize, op: Op, outcome: Outcome) -> Event {
        Event {
            process,
            round: 0,
            invoked: Duration::ZERO,
            completed: Duration::ZERO,
            op,
            outcome,
        }
    }

    fn transfer(id: i64, outcome: Outcome) -> Event {
        let op = Op::Transfer {
            from: 0,
            to: 1,
            amount: 5,
            ledger_id: id,
        };
        ev(0, op, outcome)
    }

    fn balances_after(ledger: &[(i64, i64, i64, i64)]) -> Vec<(i64, i64)> {
        let mut b: Vec<(i64, i64)> = (0..ACCOUNTS).map(|a| (a, INITIAL_BALANCE)).collect();
        for &(_, src, dst, amt) in ledger {
            b[src as usize].1 -= amt;
            b[dst as usize].1 += amt;
        }
        b
    }

    fn bad(verdicts: &[Verdict]) -> Vec<&'static str> {
        verdicts
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, _)| *n)
            .collect()
    }

    #[test]
    fn checker_flags_lost_acknowledged_and_resurrected_failed_transfers() {
        let history = [
            transfer(1, Outcome::Ok),
            transfer(2, Outcome::Fail(1213)),
            transfer(3, Outcome::Info("lost".into())),
        ];
        let good = [(1, 0, 1, 5)];
        let s = State {
            balances: balances_after(&good),
            ledger: good.to_vec(),
            ..State::default()
        };
        assert!(bad(&check_state(Mix::Bank, &history, &s)).is_empty());
        let with_info = [(1, 0, 1, 5), (3, 0, 1, 5)];
        let s = State {
            balances: balances_after(&with_info),
            ledger: with_info.to_vec(),
            ..State::default()
        };
        assert!(
            bad(&check_state(Mix::Bank, &history, &s)).is_empty(),
            "in doubt may be there"
        );
        let lost = State {
            balances: balances_after(&[]),
            ..State::default()
        };
        assert_eq!(
            bad(&check_state(Mix::Bank, &history, &lost)),
            ["acknowledged_transfers_survive"]
        );
        let resurrected = [(1, 0, 1, 5), (2, 0, 1, 5)];
        let s = State {
            balances: balances_after(&resurrected),
            ledger: resurrected.to_vec(),
            ..State::default()
        };
        assert_eq!(
            bad(&check_state(Mix::Bank, &history, &s)),
            ["acknowledged_transfers_survive"]
        );
        // Half a transfer: its ledger row without its balance change.
        let s = State {
            balances: balances_after(&[]),
            ledger: good.to_vec(),
            ..State::default()
        };
        assert_eq!(
            bad(&check_state(Mix::Bank, &history, &s)),
            ["ledger_explains_every_balance"]
        );
    }

    #[test]
    fn checker_flags_counters_outside_acknowledged_plus_in_doubt() {
        let history = [
            ev(0, Op::Add { counter: 0 }, Outcome::Ok),
            ev(1, Op::Add { counter: 0 }, Outcome::Info("lost".into())),
            ev(2, Op::Add { counter: 0 }, Outcome::Fail(1205)),
        ];
        let at = |n| State {
            balances: balances_after(&[]),
            counters: vec![(0, n)],
            ..State::default()
        };
        for n in [1, 2] {
            assert!(bad(&check_state(Mix::Bank, &history, &at(n))).is_empty());
        }
        for n in [0, 3] {
            assert_eq!(
                bad(&check_state(Mix::Bank, &history, &at(n))),
                ["counters_count_acknowledged_increments"]
            );
        }
    }

    #[test]
    fn checker_flags_lost_updates_dirty_and_unrepeatable_reads() {
        let inc = |p, read| {
            let op = Op::Increment {
                counter: 2,
                read: Some(read),
            };
            ev(p, op, Outcome::Ok)
        };
        let total = balances_after(&[]);
        let history = [
            inc(0, 7),
            inc(1, 8),
            ev(
                2,
                Op::ReadBalances {
                    first: total.clone(),
                    second: total.clone(),
                },
                Outcome::Ok,
            ),
        ];
        assert!(bad(&check_reads(Mix::Bank, &history)).is_empty());
        assert_eq!(
            bad(&check_reads(Mix::Bank, &[inc(0, 7), inc(1, 7)])),
            ["no_lost_update_of_a_locked_counter"]
        );
        let mut dirty = total.clone();
        dirty[3].1 += MARKER;
        dirty[4].1 -= MARKER;
        let read = Op::ReadBalances {
            first: dirty.clone(),
            second: dirty,
        };
        assert_eq!(
            bad(&check_reads(Mix::Bank, &[ev(0, read, Outcome::Ok)])),
            ["no_read_sees_a_rolled_back_write"]
        );
        let mut moved = total.clone();
        moved[0].1 -= 5;
        moved[1].1 += 5;
        let read = Op::ReadBalances {
            first: total,
            second: moved,
        };
        assert_eq!(
            bad(&check_reads(Mix::Bank, &[ev(0, read, Outcome::Ok)])),
            ["reads_repeat_within_a_transaction"]
        );
        let failed = transfer(9, Outcome::Fail(1213));
        let read = Op::ReadLedger {
            lo: 0,
            hi: 10,
            first: vec![9],
            second: vec![9],
        };
        assert_eq!(
            bad(&check_reads(Mix::Bank, &[failed, ev(1, read, Outcome::Ok)])),
            ["no_read_sees_a_rolled_back_write"]
        );
        let sum_off = Op::ReadBalances {
            first: balances_after(&[])[1..].to_vec(),
            second: balances_after(&[])[1..].to_vec(),
        };
        assert_eq!(
            bad(&check_reads(Mix::Bank, &[ev(0, sum_off, Outcome::Ok)])),
            ["balances_sum_to_the_total_in_every_read"]
        );
    }

    #[test]
    fn checker_flags_duplicate_unique_values() {
        let read = |values: Vec<i64>| Op::ReadUnique {
            lo: 0,
            hi: 9,
            values,
        };
        assert!(bad(&check_reads(
            Mix::Unique,
            &[ev(0, read(vec![1, 2]), Outcome::Ok)]
        ))
        .is_empty());
        assert_eq!(
            bad(&check_reads(
                Mix::Unique,
                &[ev(0, read(vec![1, 2, 1]), Outcome::Ok)]
            )),
            ["unique_index_holds_in_every_read"]
        );
        let s = State {
            unique_values: vec![3, 4, 3],
            ..State::default()
        };
        assert_eq!(
            bad(&check_state(Mix::Unique, &[], &s)),
            ["unique_index_holds_after_restart"]
        );
    }
}
