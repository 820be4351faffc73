//! `millrace check`: the integrity check of a data directory. Opens the
//! store (running crash recovery if it was not shut down cleanly), reads
//! every page of every tablespace (verifying checksums and ids), checks
//! every registered B+tree index, and shuts the store down cleanly; the
//! work is `millrace_trx::check::check_data_dir`, the lines printed are
//! this file's.

use clap::Args;
use millrace_io::{FsStorage, Storage};
use millrace_sys::cpu::{CpuBudget, CpuProbe};
use millrace_trx::check::{check_data_dir, CheckError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The data directory to check.
    #[arg(long, default_value = "millrace-data")]
    dir: PathBuf,
    /// Buffer pool for the check, MiB.
    #[arg(long, default_value_t = 64)]
    buffer_pool_mb: usize,
}

pub fn run(args: CheckArgs) -> Result<(), String> {
    if !args.dir.is_dir() {
        return Err(format!("no data directory at {}", args.dir.display()));
    }
    let storage: Arc<dyn Storage> = Arc::new(
        FsStorage::new(&args.dir, false).map_err(|e| format!("{}: {e}", args.dir.display()))?,
    );
    let t0 = Instant::now();
    let cpu = CpuBudget::start(CpuProbe::system(), Duration::from_secs(1));
    let report = check_data_dir(storage, args.buffer_pool_mb << 20, cpu)
        .map_err(|e| with_dir(&args.dir, e))?;
    if let Some(r) = &report.recovery {
        println!("recovery: {r}");
    }
    let mut indexes = 0;
    for sp in &report.spaces {
        println!(
            "space {}: {} pages ({} free), every checksum verified",
            sp.space, sp.pages, sp.free_pages
        );
        for (id, root, r) in &sp.indexes {
            indexes += 1;
            println!(
                "  index {id} (root page {root}): {} records ({} delete-marked), {} pages ({} leaves), {} levels, {}% full",
                r.records, r.deleted_records, r.pages, r.leaf_pages, r.levels, r.fill_pct
            );
        }
    }
    println!(
        "OK: {} tablespaces, {indexes} indexes checked in {:.1} s",
        report.spaces.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The check's error as `millrace check` words it: the errors about the
/// directory itself name it.
fn with_dir(dir: &Path, e: CheckError) -> String {
    match e {
        CheckError::NoStore => format!("{} holds no millrace store", dir.display()),
        CheckError::Open(why) => format!("opening {}: {why}", dir.display()),
        e => e.to_string(),
    }
}
