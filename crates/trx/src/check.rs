//! The offline integrity check of a data directory, for `millrace check`:
//! opens the page store (running crash recovery if it was not shut down
//! cleanly), reads every page of every tablespace (checksums and ids),
//! checks every registered B+tree index and shuts the store down cleanly.
//! It opens the store only, not the engine: undo and purge are not
//! started, so the check changes nothing but what recovery must.

use millrace_btree::check_store;
pub use millrace_btree::{CheckReport, SpaceReport};
use millrace_buf::store::store_exists;
use millrace_buf::{PageStore, StoreConfig};
use millrace_io::Storage;
use millrace_metrics::Registry;
use millrace_sys::cpu::CpuBudget;
use std::sync::Arc;

/// What the check found.
pub struct DataDirReport {
    /// "N redo records from LSN a to b (why it stopped)" when the store was
    /// not shut down cleanly and recovery ran.
    pub recovery: Option<String>,
    pub spaces: Vec<SpaceReport>,
}

/// Checks the store in `storage` with a buffer pool of `pool_bytes`.
/// An error says what is wrong; a damaged page or index is "CORRUPT: ...".
pub fn check_data_dir(
    storage: Arc<dyn Storage>,
    pool_bytes: usize,
    cpu: Arc<CpuBudget>,
) -> Result<DataDirReport, String> {
    let mut cfg = StoreConfig::default();
    if !store_exists(&*storage, &cfg.log) {
        return Err("it holds no millrace store".into());
    }
    cfg.buf.pool_bytes = pool_bytes;
    cfg.cleaner = true;
    let (store, recovery) = PageStore::open(storage, cfg, cpu, &Registry::new())
        .map_err(|e| format!("opening: {e}"))?;
    let recovery = recovery.map(|r| {
        format!(
            "{} redo records from LSN {} to {} ({})",
            r.records, r.checkpoint_lsn, r.end_lsn, r.stop_reason
        )
    });
    let spaces = check_store(&store).map_err(|e| format!("CORRUPT: {e}"));
    store
        .shutdown()
        .map_err(|e| format!("shutting down: {e}"))?;
    Ok(DataDirReport {
        recovery,
        spaces: spaces?,
    })
}
