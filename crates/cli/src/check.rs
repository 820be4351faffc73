//! `millrace check`: the integrity check of a data directory. Opens the
//! store (running crash recovery if it was not shut down cleanly), reads
//! every page of every tablespace (verifying checksums and ids), checks
//! every registered B+tree index, and shuts the store down cleanly.

use clap::Args;
use millrace_btree::check_store;
use millrace_buf::store::store_exists;
use millrace_buf::{PageStore, StoreConfig};
use millrace_io::{FsStorage, Storage};
use millrace_metrics::Registry;
use millrace_sys::cpu::{CpuBudget, CpuProbe};
use std::path::PathBuf;
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
    let mut cfg = StoreConfig::default();
    if !store_exists(&*storage, &cfg.log) {
        return Err(format!("{} holds no millrace store", args.dir.display()));
    }
    cfg.buf.pool_bytes = args.buffer_pool_mb << 20;
    cfg.cleaner = true;
    let t0 = Instant::now();
    let cpu = CpuBudget::start(CpuProbe::system(), Duration::from_secs(1));
    let (store, recovery) = PageStore::open(storage, cfg, cpu, &Registry::new())
        .map_err(|e| format!("opening {}: {e}", args.dir.display()))?;
    if let Some(r) = recovery {
        println!(
            "recovery: {} redo records from LSN {} to {} ({})",
            r.records, r.checkpoint_lsn, r.end_lsn, r.stop_reason
        );
    }
    let reports = check_store(&store).map_err(|e| format!("CORRUPT: {e}"))?;
    let mut indexes = 0;
    for sp in &reports {
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
    store
        .shutdown()
        .map_err(|e| format!("shutting down: {e}"))?;
    println!(
        "OK: {} tablespaces, {indexes} indexes checked in {:.1} s",
        reports.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
