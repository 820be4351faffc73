//! Shared pieces of the redo tests: self-describing payloads and log set-up.
#![allow(dead_code)]

use millrace_io::Storage;
use millrace_metrics::Registry;
use millrace_redo::{Durability, Log, LogConfig, LogError, Record, WriterThreads};
use millrace_sys::cpu::{CpuBudget, CpuSnapshot};
use millrace_sys::rng::SplitMix64;
use std::sync::Arc;

/// A payload that names its writer and sequence number and whose bytes are
/// derived from them, so a recovered record can be checked on its own.
pub fn payload(thread: u32, seq: u32, len: usize) -> Vec<u8> {
    assert!(len >= 12);
    let mut p = Vec::with_capacity(len);
    p.extend_from_slice(&thread.to_le_bytes());
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend_from_slice(&(len as u32).to_le_bytes());
    let mut rng = SplitMix64::new(((thread as u64) << 32) | seq as u64);
    let mut rest = vec![0u8; len - 12];
    rng.fill(&mut rest);
    p.extend_from_slice(&rest);
    p
}

/// (thread, seq) of a payload made by `payload`, if it is intact.
pub fn check_payload(p: &[u8]) -> Option<(u32, u32)> {
    if p.len() < 12 {
        return None;
    }
    let thread = u32::from_le_bytes(p[0..4].try_into().unwrap());
    let seq = u32::from_le_bytes(p[4..8].try_into().unwrap());
    let len = u32::from_le_bytes(p[8..12].try_into().unwrap()) as usize;
    (len == p.len() && payload(thread, seq, len) == p).then_some((thread, seq))
}

pub fn config(capacity: u64, writers: WriterThreads, level: Durability) -> LogConfig {
    LogConfig {
        capacity_bytes: capacity,
        buffer_bytes: 16 << 10,
        recent_written_bytes: 512,
        recent_closed_bytes: 512,
        writer_threads: writers,
        durability: level,
        write_chunk_bytes: 8 << 10,
        ..LogConfig::default()
    }
}

pub fn cpu() -> Arc<CpuBudget> {
    CpuBudget::fixed(CpuSnapshot::unconstrained(2))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    pub start: u64,
    pub end: u64,
    pub payload: Vec<u8>,
}

pub fn open(
    storage: &dyn Storage,
    cfg: LogConfig,
) -> Result<(Log, millrace_redo::RecoveryReport, Vec<Recovered>), LogError> {
    let mut got = Vec::new();
    let (log, report) = Log::open(storage, cfg, cpu(), &Registry::new(), &mut |r: Record| {
        got.push(Recovered {
            start: r.start_lsn,
            end: r.end_lsn,
            payload: r.payload.to_vec(),
        });
        Ok(())
    })?;
    Ok((log, report, got))
}

/// Recovered records follow each other, separated only by epoch-start
/// records (24 bytes each, no payload), from the checkpoint to the end.
pub fn assert_contiguous(report: &millrace_redo::RecoveryReport, recs: &[Recovered]) {
    let mut at = report.checkpoint_lsn;
    for r in recs {
        assert!(r.start >= at, "record at {} overlaps {}", r.start, at);
        assert_eq!(
            (r.start - at) % 24,
            0,
            "gap before {} is not epoch records",
            r.start
        );
        assert_eq!(r.end - r.start, 24 + r.payload.len() as u64);
        at = r.end;
    }
    assert!(report.end_lsn >= at);
    assert_eq!((report.end_lsn - at) % 24, 0);
}
