//! Where a run happens and how it reports: its fresh run directory
//! (`--dir`, `--keep`) and its output, one JSON line (`--json`) or a
//! readable table.

use crate::fields::{Fields, Value};
use clap::Args;
use millrace_sys::cpu::CpuSnapshot;
use std::fs;
use std::path::{Path, PathBuf};

/// A fresh directory for this run (millrace-bench-<name>-<pid>) under `dir`
/// (or the current directory), so that a run never reuses another's files.
pub(crate) fn create_run_dir(dir: Option<&Path>, name: &str) -> Result<PathBuf, String> {
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
pub(crate) fn finish_run_dir(run_dir: &Path, keep: bool) {
    if keep {
        eprintln!("kept {}", run_dir.display());
    } else if let Err(e) = fs::remove_dir_all(run_dir) {
        tracing::warn!(dir = %run_dir.display(), error = %e, "could not remove the run directory");
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

/// The readable table's first line: the CPUs the run had.
pub(crate) fn print_machine(machine: &CpuSnapshot) {
    let quota = machine
        .quota_cpus
        .map_or("no quota".to_string(), |q| format!("quota {q} CPUs"));
    println!(
        "machine: {} effective CPUs ({} in the affinity mask, {quota})",
        machine.effective_cpus, machine.affinity_cpus
    );
}

/// The readable table's `settings: key=value ...` line.
pub(crate) fn print_settings<'a>(settings: impl IntoIterator<Item = &'a (&'static str, Value)>) {
    let settings: Vec<String> = settings
        .into_iter()
        .map(|(k, v)| format!("{k}={}", v.to_text()))
        .collect();
    println!("settings: {}", settings.join(" "));
}

/// The readable table's `metric | value` rows.
pub(crate) fn print_metrics(results: &Fields) {
    let width = results.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!("{:<width$} | value", "metric");
    println!("{}-|------", "-".repeat(width));
    for (key, value) in results.iter() {
        println!("{key:<width$} | {}", value.to_text());
    }
}
