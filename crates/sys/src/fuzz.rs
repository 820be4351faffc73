//! A small seeded fuzzer for `cargo test` (docs/design.md, "Fuzzing").
//!
//! A target is a function over `&[u8]`. [`fuzz_target`] runs it on every
//! file of a corpus directory, then on mutations of them, each input inside
//! `catch_unwind` and under a time bound, and fails the calling test with
//! the seed, the input (hex) and the path of a crash file written for it.
//! No coverage feedback: the corpus (valid encodings made by the real
//! encoders) is what steers the mutations towards deep code.
//!
//! Environment: `MILLRACE_FUZZ_ITERS` (mutated inputs per target),
//! `MILLRACE_FUZZ_SECS` (run each target this long instead), `MILLRACE_FUZZ_SEED`,
//! `MILLRACE_FUZZ_HANG_MS` (per-input bound), `MILLRACE_FUZZ_KEEP_GOING=1`
//! (collect every distinct failure instead of stopping at the first),
//! `MILLRACE_FUZZ_CRASH_DIR` (default: the temp dir), `MILLRACE_FUZZ_TRACE=1`
//! (write each input to `<crash dir>/<target>/current` before running it: a
//! stack overflow aborts the process), `MILLRACE_FUZZ_WRITE_SEEDS=1`
//! (tests rewrite their seed corpus through [`write_seeds`]).

use crate::rng::SplitMix64;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How one target runs; [`Options::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// Mutated inputs after the corpus, unless the environment says otherwise.
    pub iters: u64,
    /// The run stops early after this long (the CI budget), whatever `iters`.
    pub max_time: Duration,
    /// An input running longer than this is a hang.
    pub hang_limit: Duration,
    /// Mutations never grow an input past this many bytes.
    pub max_len: usize,
    /// Tokens inserted or overwritten whole (SQL keywords, magic numbers).
    pub dictionary: Vec<Vec<u8>>,
    /// Stack of the thread the target runs on.
    pub stack_bytes: usize,
    /// Offsets where headers live: a quarter of the byte-level edits land
    /// within 64 bytes after one of them instead of anywhere.
    pub focus: Vec<usize>,
}

impl Options {
    pub fn new(iters: u64) -> Self {
        Self {
            iters,
            max_time: Duration::from_secs(12),
            hang_limit: Duration::from_secs(1),
            max_len: 1 << 16,
            dictionary: Vec::new(),
            stack_bytes: 8 << 20,
            focus: Vec::new(),
        }
    }

    pub fn focus(mut self, offsets: &[usize]) -> Self {
        self.focus = offsets.to_vec();
        self
    }

    pub fn dictionary<S: AsRef<[u8]>>(mut self, tokens: &[S]) -> Self {
        self.dictionary = tokens.iter().map(|t| t.as_ref().to_vec()).collect();
        self
    }
}

/// What a run did (for the caller's own report).
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub inputs: u64,
    pub elapsed: Duration,
    pub seed: u64,
}

/// `fuzz/corpus/<target>` of the repository, from a crate's manifest dir.
pub fn corpus_dir(manifest_dir: &str, target: &str) -> PathBuf {
    Path::new(manifest_dir)
        .join("../../fuzz/corpus")
        .join(target)
}

/// Writes seed files into `dir` when `MILLRACE_FUZZ_WRITE_SEEDS=1`; seeds
/// come from the real encoders, so this is how the corpus is regenerated
/// after a format change. Files not named here (regression inputs) stay.
pub fn write_seeds(dir: &Path, seeds: &[(&str, Vec<u8>)]) {
    if std::env::var("MILLRACE_FUZZ_WRITE_SEEDS").as_deref() != Ok("1") {
        return;
    }
    std::fs::create_dir_all(dir).expect("creating the corpus directory");
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("writing a seed");
    }
}

/// Runs `target` on the corpus in `corpus_dir` and then on `iters` mutations
/// of it (see the module's environment variables); panics with a report on
/// the first input that panics or hangs.
pub fn fuzz_target<F>(name: &str, corpus_dir: &Path, iters: u64, target: F) -> Stats
where
    F: FnMut(&[u8]) + Send + 'static,
{
    fuzz_target_with(name, corpus_dir, Options::new(iters), target)
}

fn env_u64(key: &str) -> Option<u64> {
    let v = std::env::var(key).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// FNV-1a: a stable name for an input (crash files) and a seed per target.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn hex(bytes: &[u8], max: usize) -> String {
    let mut s: String = bytes[..bytes.len().min(max)]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if bytes.len() > max {
        s.push_str(&format!("... ({} more bytes)", bytes.len() - max));
    }
    s
}

struct Shared {
    /// The input now running and when it started (ns since `t0`).
    current: Mutex<Vec<u8>>,
    started_ns: AtomicU64,
    running: AtomicBool,
    done: AtomicBool,
    failures: Mutex<Vec<String>>,
    inputs: AtomicU64,
}

pub fn fuzz_target_with<F>(name: &str, corpus_dir: &Path, opts: Options, mut target: F) -> Stats
where
    F: FnMut(&[u8]) + Send + 'static,
{
    let corpus = load_corpus(corpus_dir);
    let corpus_len = corpus.len();
    let seed = env_u64("MILLRACE_FUZZ_SEED").unwrap_or_else(|| fnv(name.as_bytes()));
    let secs = env_u64("MILLRACE_FUZZ_SECS");
    let iters = if secs.is_some() {
        u64::MAX
    } else {
        env_u64("MILLRACE_FUZZ_ITERS").unwrap_or(opts.iters)
    };
    let max_time = secs.map_or(opts.max_time, Duration::from_secs);
    let hang_limit =
        env_u64("MILLRACE_FUZZ_HANG_MS").map_or(opts.hang_limit, Duration::from_millis);
    let keep_going = std::env::var("MILLRACE_FUZZ_KEEP_GOING").as_deref() == Ok("1");
    let crash_dir = std::env::var_os("MILLRACE_FUZZ_CRASH_DIR")
        .map_or_else(|| std::env::temp_dir().join("millrace-fuzz"), PathBuf::from)
        .join(name);

    let shared = Arc::new(Shared {
        current: Mutex::new(Vec::new()),
        started_ns: AtomicU64::new(0),
        running: AtomicBool::new(false),
        done: AtomicBool::new(false),
        failures: Mutex::new(Vec::new()),
        inputs: AtomicU64::new(0),
    });
    let t0 = Instant::now();
    let report = {
        let (name, crash_dir) = (name.to_string(), crash_dir.clone());
        move |kind: &str, what: &str, input: &[u8], origin: &str| -> String {
            let path = crash_dir.join(format!("crash-{:016x}", fnv(input)));
            let saved = std::fs::create_dir_all(&crash_dir)
                .and_then(|_| std::fs::write(&path, input))
                .map_or_else(
                    |e| format!("(not saved: {e})"),
                    |_| path.display().to_string(),
                );
            format!(
                "fuzz target {name}: {kind}: {what}\n  seed {seed:#x}, input {origin}, {} bytes, \
                 saved to {saved}\n  (once fixed, copy it into fuzz/corpus/{name}/ as a regression input)\n  \
                 hex: {}",
                input.len(),
                hex(input, 512)
            )
        }
    };

    let worker = {
        let shared = shared.clone();
        let report = report.clone();
        let dictionary = opts.dictionary.clone();
        let max_len = opts.max_len;
        let focus = opts.focus.clone();
        let trace = (std::env::var("MILLRACE_FUZZ_TRACE").as_deref() == Ok("1")).then(|| {
            let _ = std::fs::create_dir_all(&crash_dir);
            crash_dir.join("current")
        });
        let deadline = t0 + max_time;
        std::thread::Builder::new()
            .name(format!("fuzz-{name}"))
            .stack_size(opts.stack_bytes)
            .spawn(move || {
                let mut mutator = Mutator::new(seed, dictionary, max_len);
                mutator.focus = focus;
                let mut seen = std::collections::HashSet::new();
                let mut run_one = |input: &[u8], origin: &str| -> bool {
                    if let Some(path) = &trace {
                        // A stack overflow aborts the process: the last
                        // input written here is the one that did it.
                        let _ = std::fs::write(path, input);
                    }
                    *shared.current.lock().unwrap_or_else(|e| e.into_inner()) = input.to_vec();
                    shared
                        .started_ns
                        .store(t0.elapsed().as_nanos() as u64, Ordering::Release);
                    shared.running.store(true, Ordering::Release);
                    let start = Instant::now();
                    let result = catch_unwind(AssertUnwindSafe(|| target(input)));
                    let took = start.elapsed();
                    shared.running.store(false, Ordering::Release);
                    shared.inputs.fetch_add(1, Ordering::Relaxed);
                    let (kind, what) = match result {
                        Err(payload) => {
                            let msg = payload
                                .downcast_ref::<&str>()
                                .map(|s| s.to_string())
                                .or_else(|| payload.downcast_ref::<String>().cloned())
                                .unwrap_or_else(|| "(non-string panic)".into());
                            ("panic", msg)
                        }
                        Ok(()) if took > hang_limit => (
                            "hang",
                            format!("took {took:?}, the bound is {hang_limit:?}"),
                        ),
                        Ok(()) => return true,
                    };
                    // One report per kind of failure: the message without
                    // its numbers (positions, lengths, durations).
                    let key: String = format!("{kind} {what}")
                        .chars()
                        .filter(|c| !c.is_ascii_digit())
                        .take(80)
                        .collect();
                    if seen.insert(key) {
                        let f = report(kind, &what, input, origin);
                        shared
                            .failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(f);
                    }
                    keep_going
                };
                let mut go = true;
                for (file, bytes) in &corpus {
                    go = run_one(bytes, &format!("corpus file {file}"));
                    if !go {
                        break;
                    }
                }
                let mut i = 0u64;
                while go && i < iters && Instant::now() < deadline {
                    let base = mutator.rng.below(corpus.len() as u64) as usize;
                    let input = mutator.mutate(&corpus[base].1, &corpus);
                    go = run_one(&input, &format!("#{i}, a mutation of {}", corpus[base].0));
                    i += 1;
                }
                shared.done.store(true, Ordering::Release);
            })
            .expect("spawning the fuzz thread")
    };

    // The watchdog: a hang may never return, so it is caught from here; the
    // stuck thread is left behind (the test fails anyway).
    while !shared.done.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(10));
        if shared.running.load(Ordering::Acquire) {
            let started = Duration::from_nanos(shared.started_ns.load(Ordering::Acquire));
            let running_for = t0.elapsed().saturating_sub(started);
            if running_for > hang_limit * 4 && shared.running.load(Ordering::Acquire) {
                let input = shared
                    .current
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                panic!(
                    "{}",
                    report(
                        "hang",
                        &format!("still running after {running_for:?}"),
                        &input,
                        "(the one running)"
                    )
                );
            }
        }
    }
    let _ = worker.join();
    let stats = Stats {
        inputs: shared.inputs.load(Ordering::Relaxed),
        elapsed: t0.elapsed(),
        seed,
    };
    eprintln!(
        "fuzz {name}: {} inputs ({} from the corpus) in {:.1?}, {:.0}/s, seed {seed:#x}",
        stats.inputs,
        corpus_len,
        stats.elapsed,
        stats.inputs as f64 / stats.elapsed.as_secs_f64().max(1e-9)
    );
    let failures = std::mem::take(&mut *shared.failures.lock().unwrap_or_else(|e| e.into_inner()));
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    stats
}

fn load_corpus(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("fuzz corpus {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| {
            let bytes = std::fs::read(e.path()).expect("reading a corpus file");
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "fuzz corpus {} is empty (MILLRACE_FUZZ_WRITE_SEEDS=1 writes the seeds)",
        dir.display()
    );
    files
}

/// Values that sit on boundaries decoders get wrong: zero, one, sign bits,
/// all ones, lengths around page and block sizes, huge values that are
/// still block-aligned (so they pass alignment checks and reach arithmetic).
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xfffe,
    0xffff,
    0x1_0000,
    4095,
    4096,
    16383,
    16384,
    32768,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    1 << 63,
    i64::MAX as u64,
    u64::MAX - 4095,
    u64::MAX - 1,
    u64::MAX,
];

/// The mutation engine: stacked byte-level and token-level edits, all drawn
/// from one seeded generator so that a run is reproducible from its seed.
pub struct Mutator {
    pub rng: SplitMix64,
    dictionary: Vec<Vec<u8>>,
    max_len: usize,
    /// See [`Options::focus`].
    pub focus: Vec<usize>,
}

impl Mutator {
    pub fn new(seed: u64, dictionary: Vec<Vec<u8>>, max_len: usize) -> Self {
        Self {
            rng: SplitMix64::new(seed),
            dictionary,
            max_len: max_len.max(1),
            focus: Vec::new(),
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        self.rng.below(n.max(1) as u64) as usize
    }

    /// A position in `0..n`, near a focus offset a quarter of the time.
    fn pos(&mut self, n: usize) -> usize {
        if !self.focus.is_empty() && self.rng.chance(1, 4) {
            let i = self.pick(self.focus.len());
            let f = self.focus[i] + self.pick(64);
            if f < n {
                return f;
            }
        }
        self.pick(n)
    }

    /// A random chunk of `b`: (start, len), len >= 1 unless `b` is empty.
    fn chunk(&mut self, b: &[u8], max: usize) -> (usize, usize) {
        if b.is_empty() {
            return (0, 0);
        }
        let start = self.pick(b.len());
        let len = 1 + self.pick((b.len() - start).min(max));
        (start, len)
    }

    /// 1, 2, 4 or 8 edits of `base`; `corpus` feeds splices.
    pub fn mutate(&mut self, base: &[u8], corpus: &[(String, Vec<u8>)]) -> Vec<u8> {
        let mut b = base.to_vec();
        for _ in 0..1 << self.rng.below(4) {
            self.edit(&mut b, corpus);
        }
        b.truncate(self.max_len);
        b
    }

    fn edit(&mut self, b: &mut Vec<u8>, corpus: &[(String, Vec<u8>)]) {
        let ops = if self.dictionary.is_empty() { 10 } else { 13 };
        match self.rng.below(ops) {
            0 if !b.is_empty() => {
                let i = self.pos(b.len());
                b[i] ^= 1 << self.rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = self.pos(b.len());
                b[i] = self.rng.next_u64() as u8;
            }
            2 => {
                let at = self.pick(b.len() + 1);
                let n = 1 + self.pick(8);
                let mut bytes = vec![0u8; n];
                self.rng.fill(&mut bytes);
                b.splice(at..at, bytes);
            }
            3 if !b.is_empty() => {
                let (start, len) = self.chunk(b, 16);
                b.drain(start..start + len);
            }
            4 => {
                // An interesting integer, 1/2/4/8 bytes, either byte order.
                let v = if self.rng.chance(1, 4) {
                    (b.len() as u64)
                        .wrapping_add(self.rng.below(3))
                        .wrapping_sub(1)
                } else {
                    INTERESTING[self.pick(INTERESTING.len())]
                };
                let width = 1 << self.rng.below(4);
                let bytes = if self.rng.chance(1, 4) {
                    v.to_be_bytes()[8 - width..].to_vec()
                } else {
                    v.to_le_bytes()[..width].to_vec()
                };
                // Fields sit at aligned offsets half the time.
                let mut at = self.pos(b.len() + 1);
                if self.rng.chance(1, 2) {
                    at -= at % width;
                }
                self.overwrite_at(b, at, &bytes);
            }
            5 if !b.is_empty() => {
                // Small arithmetic on a u8/u16/u32 (lengths off by a few).
                let width = 1usize << self.rng.below(3);
                let at = self.pos(b.len().saturating_sub(width - 1).max(1));
                let end = (at + width).min(b.len());
                let mut v = [0u8; 8];
                v[..end - at].copy_from_slice(&b[at..end]);
                let delta = 1 + self.rng.below(16);
                let n = if self.rng.chance(1, 2) {
                    u64::from_le_bytes(v).wrapping_add(delta)
                } else {
                    u64::from_le_bytes(v).wrapping_sub(delta)
                };
                b[at..end].copy_from_slice(&n.to_le_bytes()[..end - at]);
            }
            6 => {
                // Splice: a chunk of another corpus entry, inserted or laid over.
                let other = &corpus[self.pick(corpus.len())].1;
                let (start, len) = self.chunk(other, 256);
                let piece = other[start..start + len].to_vec();
                if self.rng.chance(1, 2) {
                    let at = self.pick(b.len() + 1);
                    b.splice(at..at, piece);
                } else {
                    self.overwrite(b, &piece);
                }
            }
            7 if !b.is_empty() => {
                // Repeat a chunk: long chains and deep nesting from one piece.
                let (start, len) = self.chunk(b, 16);
                let piece = b[start..start + len].to_vec();
                let times = if self.rng.chance(1, 8) {
                    64 + self.pick(2000)
                } else {
                    1 + self.pick(16)
                };
                let room = self.max_len.saturating_sub(b.len()) / len;
                let at = start + len;
                b.splice(at..at, piece.repeat(times.min(room)));
            }
            8 if !b.is_empty() => {
                // Copy a chunk of the input over another place in it.
                let (start, len) = self.chunk(b, 64);
                let piece = b[start..start + len].to_vec();
                self.overwrite(b, &piece);
            }
            9 if !b.is_empty() => {
                let at = self.pick(b.len());
                b.truncate(at);
            }
            10..=12 => {
                let t = self.pick(self.dictionary.len());
                let token = self.dictionary[t].clone();
                if self.rng.chance(2, 3) {
                    let at = self.pick(b.len() + 1);
                    b.splice(at..at, token);
                } else {
                    self.overwrite(b, &token);
                }
            }
            _ => {
                let mut bytes = vec![0u8; 1 + self.pick(4)];
                self.rng.fill(&mut bytes);
                b.extend_from_slice(&bytes);
            }
        }
    }

    /// Lays `piece` over `b` at a random place, growing `b` if it runs off the end.
    fn overwrite(&mut self, b: &mut Vec<u8>, piece: &[u8]) {
        let at = self.pos(b.len() + 1);
        self.overwrite_at(b, at, piece);
    }

    fn overwrite_at(&mut self, b: &mut Vec<u8>, at: usize, piece: &[u8]) {
        if at + piece.len() > b.len() {
            b.resize(at + piece.len(), 0);
        }
        b[at..at + piece.len()].copy_from_slice(piece);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<(String, Vec<u8>)> {
        vec![("a".into(), b"SELECT 1".to_vec()), ("b".into(), vec![])]
    }

    #[test]
    fn mutations_are_reproducible_and_bounded() {
        let run = |seed| {
            let mut m = Mutator::new(seed, vec![b"OR".to_vec()], 100);
            (0..2000)
                .map(|i| m.mutate(&corpus()[i % 2].1, &corpus()))
                .collect::<Vec<_>>()
        };
        let a = run(5);
        assert_eq!(a, run(5));
        assert_ne!(a, run(6));
        assert!(a.iter().all(|x| x.len() <= 100));
        assert!(a.iter().any(|x| x.windows(2).any(|w| w == b"OR")));
        assert!(a.iter().filter(|x| x.as_slice() != b"SELECT 1").count() > 1500);
    }

    fn temp_corpus(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("millrace-fuzz-self-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x"), b"abcdef").unwrap();
        dir
    }

    #[test]
    fn a_panicking_input_fails_with_its_bytes() {
        let dir = temp_corpus("panic");
        let err = catch_unwind(|| {
            fuzz_target("self-panic", &dir, 5000, |input: &[u8]| {
                if input.len() > 8 {
                    panic!("too long");
                }
            })
        })
        .expect_err("the harness must fail the test");
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("panic: too long") && msg.contains("hex: "),
            "{msg}"
        );
    }

    #[test]
    fn a_hanging_input_fails() {
        let dir = temp_corpus("hang");
        let err = catch_unwind(|| {
            let mut opts = Options::new(10);
            opts.hang_limit = Duration::from_millis(50);
            fuzz_target_with("self-hang", &dir, opts, |input: &[u8]| {
                if input == b"abcdef" {
                    std::thread::sleep(Duration::from_millis(400));
                }
            })
        })
        .expect_err("the harness must fail the test");
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(msg.contains("hang"), "{msg}");
    }

    #[test]
    fn a_clean_target_passes() {
        let dir = temp_corpus("clean");
        let stats = fuzz_target("self-clean", &dir, 300, |_: &[u8]| {});
        assert!(stats.inputs >= 1, "the corpus file runs at least");
    }
}
