//! The benchmarks behind `millrace bench`: one subcommand per layer, each
//! printing a readable table or, with `--json`, one flat JSON object per run
//! for the scripts in bench/ to collect.

mod btree;
mod log;
mod trx;

use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use millrace_redo::WriterThreads;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Commits against the redo log alone: latency, group commit, CPU.
    Log(log::LogArgs),
    /// A sysbench-like mix on a table of two B+tree indexes: throughput,
    /// latency, page I/O, against a BTreeMap under a mutex.
    Btree(btree::BtreeArgs),
    /// sysbench-like transactions through the transactional engine:
    /// throughput, latency, history length and purge, against the bare
    /// B+tree.
    Trx(trx::TrxArgs),
}

/// Runs one benchmark; the error is a message for the user.
pub fn run(command: BenchCommand) -> Result<(), String> {
    match command {
        BenchCommand::Log(args) => log::run(&args),
        BenchCommand::Btree(args) => btree::run(&args),
        BenchCommand::Trx(args) => trx::run(&args),
    }
}

/// The start of every run that is not measured: threads still starting, the
/// CPU budget's first refresh, the first lap of the log buffer.
const WARMUP: Duration = Duration::from_millis(500);
/// The largest latency the histograms track exactly; longer ones count as
/// this. Fixed bounds, because a clamped record never resizes a histogram.
const HIGHEST_TRACKED_US: u64 = 600_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_TRACKED_US, 3)
        .expect("the bounds and precision are valid")
}

/// The warm-up end and the deadline, computed by every thread right after
/// the start barrier (they differ by microseconds).
struct Window {
    warmup_end: Instant,
    end: Instant,
}

impl Window {
    fn starting_now(seconds: f64) -> Self {
        let start = Instant::now();
        Self {
            warmup_end: start + WARMUP,
            end: start + Duration::from_secs_f64(seconds),
        }
    }
}

/// `--seconds` must leave something after the warm-up.
fn validate_seconds(seconds: f64) -> Result<(), String> {
    if !seconds.is_finite() || seconds <= WARMUP.as_secs_f64() {
        return Err(format!(
            "--seconds must be more than the {} s warm-up, not {seconds}",
            WARMUP.as_secs_f64()
        ));
    }
    Ok(())
}

/// A fresh directory for this run (millrace-bench-<name>-<pid>) under `dir`
/// (or the current directory), so that a run never reuses another's files.
fn create_run_dir(dir: Option<&Path>, name: &str) -> Result<PathBuf, String> {
    let base = match dir {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(format!(
                    "--dir {}: not an existing directory",
                    dir.display()
                ));
            }
            dir.to_path_buf()
        }
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    let run_dir = base.join(format!("millrace-bench-{name}-{}", std::process::id()));
    fs::create_dir(&run_dir).map_err(|e| format!("cannot create {}: {e}", run_dir.display()))?;
    Ok(run_dir)
}

/// At the end of a run: keeps its directory with `--keep`, removes it
/// otherwise (a failure to remove is only logged).
fn finish_run_dir(run_dir: &Path, keep: bool) {
    if keep {
        eprintln!("kept {}", run_dir.display());
    } else if let Err(e) = fs::remove_dir_all(run_dir) {
        tracing::warn!(dir = %run_dir.display(), error = %e, "could not remove the run directory");
    }
}

/// A value of a result field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Uint(u64),
    /// Non-finite values (a ratio over zero) are written as null.
    Float(f64),
    Bool(bool),
    Str(String),
    Null,
}

impl Value {
    fn to_json(&self) -> String {
        match self {
            Value::Uint(v) => v.to_string(),
            Value::Float(v) => json_float(*v),
            Value::Bool(v) => v.to_string(),
            Value::Str(v) => json_string(v),
            Value::Null => "null".into(),
        }
    }

    /// How the readable table shows it: like JSON, strings unquoted.
    pub fn to_text(&self) -> String {
        match self {
            Value::Str(v) => v.clone(),
            Value::Null => "-".into(),
            v => v.to_json(),
        }
    }
}

/// Named results in order: one flat JSON object, written by hand (the
/// results are only numbers, booleans and short strings, which does not
/// justify a serialisation crate), or the rows of a table.
#[derive(Default)]
pub struct Fields {
    fields: Vec<(&'static str, Value)>,
}

impl Fields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, key: &'static str, value: Value) {
        self.fields.push((key, value));
    }

    pub fn uint(&mut self, key: &'static str, value: u64) {
        self.push(key, Value::Uint(value));
    }

    pub fn float(&mut self, key: &'static str, value: f64) {
        self.push(key, Value::Float(value));
    }

    pub fn opt_float(&mut self, key: &'static str, value: Option<f64>) {
        self.push(key, value.map_or(Value::Null, Value::Float));
    }

    pub fn bool(&mut self, key: &'static str, value: bool) {
        self.push(key, Value::Bool(value));
    }

    pub fn string(&mut self, key: &'static str, value: &str) {
        self.push(key, Value::Str(value.into()));
    }

    pub fn extend(&mut self, other: Fields) {
        self.fields.extend(other.fields);
    }

    pub fn iter(&self) -> impl Iterator<Item = &(&'static str, Value)> {
        self.fields.iter()
    }

    /// The fields as one JSON object on one line.
    pub fn to_json_line(&self) -> String {
        let body: Vec<String> = self
            .fields
            .iter()
            .map(|(key, value)| format!("{}:{}", json_string(key), value.to_json()))
            .collect();
        format!("{{{}}}", body.join(","))
    }
}

/// Rounded so the lines stay short: two decimals for large values, six for
/// small ones (shares and ratios), trailing zeros dropped.
fn json_float(value: f64) -> String {
    if !value.is_finite() {
        return "null".into();
    }
    let text = if value.abs() >= 100.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.6}")
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "" | "-" | "-0" => "0".into(),
        t => t.into(),
    }
}

fn json_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_flat_object() {
        let mut j = Fields::new();
        j.uint("commits", 12);
        j.float("ratio", 1.25);
        j.float("rate", 12345.678);
        j.float("nan", f64::NAN);
        j.opt_float("none", None);
        j.bool("on", true);
        j.string("name", "a\"b");
        assert_eq!(
            j.to_json_line(),
            r#"{"commits":12,"ratio":1.25,"rate":12345.68,"nan":null,"none":null,"on":true,"name":"a\"b"}"#
        );
    }

    #[test]
    fn floats_are_trimmed() {
        assert_eq!(json_float(0.0), "0");
        assert_eq!(json_float(3.0), "3");
        assert_eq!(json_float(0.000123), "0.000123");
        assert_eq!(json_float(-0.0000001), "0");
    }
}

/// Flags every benchmark has: where it runs, whether its directory stays,
/// and how it reports.
#[derive(Args, Debug)]
pub struct RunOutput {
    /// Where to create the run's directory (millrace-bench-<name>-<pid>);
    /// the current directory by default.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the run's directory instead of removing it at the end.
    #[arg(long)]
    pub keep: bool,
    /// Print one JSON object on one line instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl RunOutput {
    /// Runs a benchmark body in a fresh run directory (removed afterwards
    /// unless --keep), then prints its report as one JSON line or a table.
    pub fn run<R>(
        &self,
        name: &str,
        body: impl FnOnce(&Path) -> Result<R, String>,
        fields: impl Fn(&R) -> Fields,
        table: impl Fn(&R),
    ) -> Result<(), String> {
        let run_dir = create_run_dir(self.dir.as_deref(), name)?;
        let result = body(&run_dir);
        finish_run_dir(&run_dir, self.keep);
        let report = result?;
        if self.json {
            println!("{}", fields(&report).to_json_line());
        } else {
            table(&report);
        }
        Ok(())
    }
}

/// `--log-writer-threads auto|on|off`.
pub fn parse_writer_threads(s: &str) -> Result<WriterThreads, String> {
    s.parse()
}
