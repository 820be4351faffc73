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

/// Why a check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// The directory holds no millrace store.
    NoStore,
    /// Opening the store (and recovering it) failed.
    Open(String),
    /// A page or an index is damaged.
    Corrupt(String),
    /// The clean shutdown after the check failed.
    Shutdown(String),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoStore => write!(f, "no millrace store"),
            Self::Open(e) => write!(f, "opening: {e}"),
            Self::Corrupt(e) => write!(f, "CORRUPT: {e}"),
            Self::Shutdown(e) => write!(f, "shutting down: {e}"),
        }
    }
}

/// Checks the store in `storage` with a buffer pool of `pool_bytes`.
pub fn check_data_dir(
    storage: Arc<dyn Storage>,
    pool_bytes: usize,
    cpu: Arc<CpuBudget>,
) -> Result<DataDirReport, CheckError> {
    let mut cfg = StoreConfig::default();
    if !store_exists(&*storage, &cfg.log) {
        return Err(CheckError::NoStore);
    }
    cfg.buf.pool_bytes = pool_bytes;
    cfg.cleaner = true;
    let (store, recovery) = PageStore::open(storage, cfg, cpu, &Registry::new())
        .map_err(|e| CheckError::Open(e.to_string()))?;
    let recovery = recovery.map(|r| {
        format!(
            "{} redo records from LSN {} to {} ({})",
            r.records, r.checkpoint_lsn, r.end_lsn, r.stop_reason
        )
    });
    let spaces = check_store(&store).map_err(|e| CheckError::Corrupt(e.to_string()));
    store
        .shutdown()
        .map_err(|e| CheckError::Shutdown(e.to_string()))?;
    Ok(DataDirReport {
        recovery,
        spaces: spaces?,
    })
}
