//! The concurrency checker: a Jepsen-style test in miniature against the
//! built `millrace serve` (docs/design.md, "The concurrency checker").
//!
//! Many clients run a seeded mix of operations; each round ends with a
//! SIGKILL of the server at a seeded moment, and the next round restarts
//! it on the same data directory. Every operation goes into a history
//! (history.rs: invocation, completion, Ok / Fail / Info); the checkers
//! (checks.rs) judge the reads in it, and the state read after every
//! restart against the writes in it. The schedule (operations, their
//! arguments, pauses, kill times) is a function of the seed; thread
//! interleavings are not.
//!
//! Environment: MILLRACE_JEPSEN_SECS (load seconds per test; default 20
//! for the bank mix, 10 for the unique mix), MILLRACE_JEPSEN_ROUNDS (kill
//! rounds, default 3), MILLRACE_JEPSEN_CLIENTS (default 8),
//! MILLRACE_JEPSEN_SEED (default 11), MILLRACE_JEPSEN_FLUSH_LEVEL (the
//! server's flush_log_at_trx_commit, default 1; 0 shows the checkers
//! catching acknowledged commits lost by a kill). Run with `--nocapture` to
//! see the figures.

#[path = "../common/mod.rs"]
mod common;

mod checks;
mod history;
mod workload;

use checks::{check_reads, check_state, read_state, Verdict};
use common::client::Client;
use common::{temp_dir, Server, PASSWORD};
use history::{tally, Event, Op, Outcome};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::{invoke, pick, schema, Mix, Rng, EXPECTED_ERRORS, MAX_PROCESSES};

/// Longer than the server's lock wait timeout (config below), so a
/// client only times out when the server is stuck.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const LOCK_WAIT_TIMEOUT_S: u64 = 2;

struct Config {
    seed: u64,
    rounds: usize,
    load: Duration,
    clients: usize,
    flush_level: u8,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} does not parse")),
        Err(_) => default,
    }
}

impl Config {
    fn from_env(default_secs: f64) -> Config {
        let cfg = Config {
            seed: env_or("MILLRACE_JEPSEN_SEED", 11),
            rounds: env_or("MILLRACE_JEPSEN_ROUNDS", 3),
            load: Duration::from_secs_f64(env_or("MILLRACE_JEPSEN_SECS", default_secs)),
            clients: env_or("MILLRACE_JEPSEN_CLIENTS", 8),
            flush_level: env_or("MILLRACE_JEPSEN_FLUSH_LEVEL", 1),
        };
        assert!(cfg.rounds >= 1, "MILLRACE_JEPSEN_ROUNDS must be at least 1");
        assert!(
            (1..=MAX_PROCESSES as usize).contains(&cfg.clients),
            "MILLRACE_JEPSEN_CLIENTS must be within 1..={MAX_PROCESSES}"
        );
        cfg
    }
}

/// What one client thread brings back from a round.
struct ClientLog {
    events: Vec<Event>,
    unexpected: Vec<String>,
}

fn connect(addr: SocketAddr) -> Client {
    Client::connect(addr, "root", PASSWORD, CLIENT_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

#[allow(clippy::too_many_arguments)]
fn client(
    addr: SocketAddr,
    mix: Mix,
    seed: u64,
    round: usize,
    rounds: usize,
    process: usize,
    t0: Instant,
    stop: Arc<AtomicBool>,
    killed: Arc<AtomicBool>,
) -> ClientLog {
    let mut log = ClientLog {
        events: Vec::new(),
        unexpected: Vec::new(),
    };
    let mut rng = Rng::new(seed);
    let mut c = match Client::connect(addr, "root", PASSWORD, CLIENT_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            if !killed.load(Ordering::SeqCst) {
                log.unexpected
                    .push(format!("process {process} round {round}: connect: {e}"));
            }
            return log;
        }
    };
    let mut seq = 0;
    while !stop.load(Ordering::SeqCst) {
        let op = pick(mix, &mut rng, round, process, seq, rounds);
        let hold = Duration::from_millis(rng.below(4));
        seq += 1;
        let invoked = t0.elapsed();
        let (op, outcome) = invoke(&mut c, op, hold);
        let broken = c.is_broken();
        let surprise = match &outcome {
            Outcome::Fail(0) if !broken => Some("a malformed result".to_string()),
            Outcome::Fail(code) if *code != 0 && !EXPECTED_ERRORS.contains(code) => {
                Some(format!("error {code}"))
            }
            Outcome::Info(why) if !broken => Some(why.clone()),
            _ => None,
        };
        if let Some(what) = surprise {
            log.unexpected
                .push(format!("process {process} round {round}: {what} in {op:?}"));
        }
        log.events.push(Event {
            process,
            round,
            invoked,
            completed: t0.elapsed(),
            op,
            outcome,
        });
        if broken {
            if !killed.load(Ordering::SeqCst) {
                log.unexpected.push(format!(
                    "process {process} round {round}: connection lost while the server was up"
                ));
            }
            break;
        }
    }
    log
}

/// The whole run's record.
struct Run {
    mix: Mix,
    seed: u64,
    history: Vec<Event>,
    unexpected: Vec<String>,
    /// Check name -> violations, from every restart and the final reads.
    violations: BTreeMap<&'static str, Vec<String>>,
    load: Duration,
    rounds: usize,
}

impl Run {
    fn add(&mut self, when: &str, verdicts: Vec<Verdict>) {
        for (name, found) in verdicts {
            let list = self.violations.entry(name).or_default();
            list.extend(found.into_iter().map(|v| format!("{when}: {v}")));
        }
    }

    /// The figures, on stderr (shown with --nocapture or on failure).
    fn report(&self) {
        eprintln!(
            "jepsen {:?}: seed {}, {} rounds (each ended by SIGKILL), {:.1} s of load, {} ops, {:.0} ops/s",
            self.mix,
            self.seed,
            self.rounds,
            self.load.as_secs_f64(),
            self.history.len(),
            self.history.len() as f64 / self.load.as_secs_f64().max(0.001)
        );
        let mut kinds: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
        for e in &self.history {
            kinds.entry(kind(&e.op)).or_default().push(e);
        }
        for (k, events) in &kinds {
            let t = tally(events.iter().copied());
            let mut codes: BTreeMap<u16, usize> = BTreeMap::new();
            for e in events {
                if let Outcome::Fail(code) = e.outcome {
                    *codes.entry(code).or_default() += 1;
                }
            }
            let mut ms: Vec<f64> = events
                .iter()
                .map(|e| (e.completed - e.invoked).as_secs_f64() * 1e3)
                .collect();
            ms.sort_by(f64::total_cmp);
            eprintln!(
                "  {k:<14} ok {:>7}  fail {:>6} {codes:?}  info (in doubt) {:>4}  latency ms p50 {:.1} max {:.1}",
                t.ok,
                t.fail,
                t.info,
                ms[ms.len() / 2],
                ms[ms.len() - 1]
            );
        }
        for (name, found) in &self.violations {
            eprintln!("  check {name}: {} violations", found.len());
        }
        eprintln!("  unexpected errors: {}", self.unexpected.len());
    }

    /// Fails with every violation of the named checks (or of all when
    /// `names` is empty), and with every unexpected error.
    fn assert_clean(&self) {
        let mut lines = Vec::new();
        for (name, found) in &self.violations {
            for v in found.iter().take(20) {
                lines.push(format!("{name}: {v}"));
            }
            if found.len() > 20 {
                lines.push(format!("{name}: ... {} more", found.len() - 20));
            }
        }
        lines.extend(
            self.unexpected
                .iter()
                .take(20)
                .map(|u| format!("unexpected: {u}")),
        );
        assert!(
            lines.is_empty(),
            "jepsen {:?} found problems (seed {}: rerun with MILLRACE_JEPSEN_SEED={}):\n{}",
            self.mix,
            self.seed,
            self.seed,
            lines.join("\n")
        );
    }
}

fn kind(op: &Op) -> &'static str {
    match op {
        Op::Transfer { .. } => "transfer",
        Op::Increment { .. } => "increment",
        Op::Add { .. } => "add",
        Op::Marker { .. } => "marker",
        Op::ReadBalances { .. } => "read_balances",
        Op::ReadLedger { .. } => "read_ledger",
        Op::InsertUnique { held: true, .. } => "insert_held",
        Op::InsertUnique { held: false, .. } => "insert",
        Op::DeleteUnique { .. } => "delete",
        Op::ReadUnique { .. } => "read_unique",
    }
}

/// Runs `cfg.rounds` rounds of `mix`, each ended by SIGKILL, checking the
/// state after every restart; then the reads, a clean stop and the offline
/// check of the data directory.
fn run(name: &str, mix: Mix, cfg: &Config) -> Run {
    let dir = temp_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let config = dir.join("millrace.toml");
    std::fs::write(
        &config,
        format!(
            "[engine]\nlock_wait_timeout_s = {LOCK_WAIT_TIMEOUT_S}\n\
             flush_log_at_trx_commit = {}\n",
            cfg.flush_level
        ),
    )
    .unwrap();
    let extra = ["--config", config.to_str().unwrap()];
    let mut run = Run {
        mix,
        seed: cfg.seed,
        history: Vec::new(),
        unexpected: Vec::new(),
        violations: BTreeMap::new(),
        load: Duration::ZERO,
        rounds: cfg.rounds,
    };
    let mut schedule = Rng::new(cfg.seed);
    let t0 = Instant::now();
    let round_len = cfg.load / cfg.rounds as u32;
    for round in 0..cfg.rounds {
        let server = Server::start(&data, &extra);
        let mut admin = connect(server.addr);
        if round == 0 {
            for sql in schema(mix) {
                admin.exec(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        } else {
            let state = read_state(&mut admin, mix).expect("read the state after a restart");
            run.add(
                &format!("after restart {round}"),
                check_state(mix, &run.history, &state),
            );
        }
        drop(admin);
        // The kill comes at a seeded moment in the last 40% of the round.
        let kill_after = round_len.mul_f64(0.6 + 0.4 * schedule.below(1000) as f64 / 1000.0);
        let stop = Arc::new(AtomicBool::new(false));
        let killed = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..cfg.clients)
            .map(|process| {
                let seed = schedule.next_u64();
                let (stop, killed) = (stop.clone(), killed.clone());
                let (addr, rounds) = (server.addr, cfg.rounds);
                std::thread::spawn(move || {
                    client(addr, mix, seed, round, rounds, process, t0, stop, killed)
                })
            })
            .collect();
        let started = Instant::now();
        std::thread::sleep(kill_after);
        killed.store(true, Ordering::SeqCst);
        server.signal(libc::SIGKILL);
        drop(server); // waits for the exit
        stop.store(true, Ordering::SeqCst);
        run.load += started.elapsed();
        for t in threads {
            let log = t.join().expect("a client thread panicked");
            run.history.extend(log.events);
            run.unexpected.extend(log.unexpected);
        }
    }
    let server = Server::start(&data, &extra);
    let mut admin = connect(server.addr);
    let state = read_state(&mut admin, mix).expect("read the final state");
    run.add("final", check_state(mix, &run.history, &state));
    run.add("during the run", check_reads(mix, &run.history));
    drop(admin);
    let (status, _) = server.stop();
    assert!(status.success(), "clean stop: {status:?}");
    offline_check(&data);
    let _ = std::fs::remove_dir_all(&dir);
    run.report();
    run
}

/// `millrace check` on the cleanly stopped data directory.
fn offline_check(data: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_millrace"))
        .arg("check")
        .arg("--dir")
        .arg(data)
        .output()
        .expect("run millrace check");
    assert!(
        out.status.success(),
        "millrace check failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Transfers (with a ledger row each), counters incremented under FOR
/// UPDATE and with n = n + 1, rollback markers, and reads of all balances
/// and of ledger ranges, twice each per transaction; SIGKILL rounds.
#[test]
fn jepsen_bank_transfers_counters_and_reads_survive_kill9() {
    let run = run("jepsen-bank", Mix::Bank, &Config::from_env(20.0));
    let ok_transfers = run
        .history
        .iter()
        .filter(|e| matches!(e.op, Op::Transfer { .. }) && e.outcome == Outcome::Ok)
        .count();
    assert!(
        ok_transfers > 0,
        "no transfer was acknowledged: the run proved nothing"
    );
    run.assert_clean();
}

/// Inserts (autocommit, and in transactions held open a moment) and
/// deletes of a small domain of values under a UNIQUE index, with range
/// reads through the index; SIGKILL rounds. No value may ever be there
/// twice.
#[test]
fn jepsen_unique_index_holds_under_concurrent_inserts_and_kill9() {
    let run = run("jepsen-unique", Mix::Unique, &Config::from_env(10.0));
    let ok_inserts = run
        .history
        .iter()
        .filter(|e| matches!(e.op, Op::InsertUnique { .. }) && e.outcome == Outcome::Ok)
        .count();
    assert!(
        ok_inserts > 0,
        "no insert was acknowledged: the run proved nothing"
    );
    run.assert_clean();
}
