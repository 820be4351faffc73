#![allow(dead_code)]
use millrace_io::{SimStorage, Storage};
use millrace_metrics::Registry;
use millrace_redo::{Durability, LogConfig, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_trx::{Engine, TrxConfig};
use std::sync::Arc;

pub fn cfg() -> TrxConfig {
    let mut c = TrxConfig::default();
    c.store.buf.page_size = 4096;
    c.store.buf.pool_bytes = 4 << 20;
    c.store.log = LogConfig {
        capacity_bytes: 8 << 20,
        buffer_bytes: 256 << 10,
        writer_threads: WriterThreads::Off,
        durability: Durability::Flush,
        ..LogConfig::default()
    };
    c.undo_spaces = Some(2);
    c.rsegs = Some(4);
    c.lock_wait_timeout_ms = 2000;
    c
}

pub fn open_with(s: &SimStorage, c: TrxConfig) -> Arc<Engine> {
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let cpu = CpuBudget::fixed(CpuSnapshot::unconstrained(2));
    Engine::open(storage, c, cpu, Registry::new()).expect("engine open")
}

pub fn open(s: &SimStorage) -> Arc<Engine> {
    open_with(s, cfg())
}

pub fn k(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}
