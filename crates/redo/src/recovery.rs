//! The recovery scan: from the checkpoint to the last complete, valid record.
//! It stops cleanly at the first record that is torn, garbage, left from an
//! earlier lap or an earlier epoch, and hands every record before it, in LSN
//! order, to the caller's applier.
//!
//! A bad record is the end of the log only if it can be a torn tail. The
//! writer never lets written-but-unsynced bytes pass the durable end by more
//! than `unsynced_window_bytes` (format.rs), so every record written after
//! the crash's durable end ends before `durable end + window`. If a valid
//! record of the current epoch ends at or past `bad record's end + window`,
//! the bad record was durable before that record was written: it is damage
//! in the middle of the durable log, and the scan refuses (`Corrupt`) rather
//! than drop the acknowledged commits after it (docs/design.md, "Faults:
//! what the engine does when storage fails").

use crate::error::LogError;
use crate::format::{
    align_down, align_up, unsynced_window_bytes, RecordHeader, RecordKind, BLOCK, DATA_OFFSET,
};
use millrace_io::{AlignedBuf, StorageFile};

/// One recovered record.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub start_lsn: u64,
    pub end_lsn: u64,
    pub payload: &'a [u8],
}

/// What the scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub checkpoint_lsn: u64,
    /// LSN after the last valid record: new records start here.
    pub end_lsn: u64,
    /// Data records handed to the applier.
    pub records: u64,
    pub payload_bytes: u64,
    /// Why the scan stopped at `end_lsn`.
    pub stop_reason: String,
    /// Epoch of the new records written from `end_lsn` on.
    pub new_epoch: u32,
}

pub(crate) struct ScanEnd {
    pub end_lsn: u64,
    pub records: u64,
    pub payload_bytes: u64,
    pub max_epoch: u32,
    /// (LSN, epoch) of every epoch-start record found.
    pub eras: Vec<(u64, u32)>,
    pub stop_reason: String,
}

/// Reads LSN ranges of the circular data region through a window.
struct Reader<'f> {
    file: &'f dyn StorageFile,
    capacity: u64,
    window: AlignedBuf,
    window_lsn: u64,
    window_len: usize,
}

impl<'f> Reader<'f> {
    const WINDOW: usize = 1 << 20;

    fn new(file: &'f dyn StorageFile, capacity: u64) -> Self {
        Self {
            file,
            capacity,
            window: AlignedBuf::zeroed(Self::WINDOW, BLOCK as usize),
            window_lsn: 0,
            window_len: 0,
        }
    }

    fn get(&mut self, lsn: u64, len: usize) -> Result<&[u8], LogError> {
        let end = lsn + len as u64;
        let have = lsn >= self.window_lsn && end <= self.window_lsn + self.window_len as u64;
        if !have {
            let from = align_down(lsn);
            let want = (align_up(end) - from).max(Self::WINDOW as u64) as usize;
            if want > self.window.len() {
                self.window = AlignedBuf::zeroed(want, BLOCK as usize);
            }
            let mut done = 0usize;
            while done < want {
                let pos = (from + done as u64) % self.capacity;
                let n = ((self.capacity - pos) as usize).min(want - done);
                self.file
                    .read_exact_at(&mut self.window[done..done + n], DATA_OFFSET + pos)
                    .map_err(|e| LogError::Io(format!("reading the redo log: {e}")))?;
                done += n;
            }
            self.window_lsn = from;
            self.window_len = want;
        }
        let at = (lsn - self.window_lsn) as usize;
        Ok(&self.window[at..at + len])
    }
}

/// Scans from `checkpoint_lsn` (whose record has epoch `floor_epoch` or
/// later). Records must sit at their own LSN, pass their checksum, and carry
/// non-decreasing epochs; the scan never reads past one lap from the
/// checkpoint.
pub(crate) fn scan(
    file: &dyn StorageFile,
    capacity: u64,
    checkpoint_lsn: u64,
    floor_epoch: u32,
    max_payload: u32,
    applier: &mut dyn FnMut(Record<'_>) -> Result<(), String>,
) -> Result<ScanEnd, LogError> {
    let mut reader = Reader::new(file, capacity);
    let limit = checkpoint_lsn + capacity;
    let mut lsn = checkpoint_lsn;
    let mut epoch = floor_epoch;
    let mut out = ScanEnd {
        end_lsn: lsn,
        records: 0,
        payload_bytes: 0,
        max_epoch: floor_epoch,
        eras: Vec::new(),
        stop_reason: String::new(),
    };
    let mut next_progress = checkpoint_lsn + (64 << 20);
    let hdr = RecordHeader::LEN as u64;
    // Where the bad record (if the scan stops at one) ends at most.
    let mut bad_end: Option<u64> = None;
    let stop = loop {
        if lsn + hdr > limit {
            break "one full lap after the checkpoint".to_string();
        }
        let head: [u8; RecordHeader::LEN] = reader
            .get(lsn, RecordHeader::LEN)?
            .try_into()
            .expect("exact length");
        let Some(h) = RecordHeader::decode(&head, max_payload) else {
            bad_end = Some(lsn + hdr);
            break format!("no record header at LSN {lsn}");
        };
        let end = lsn + hdr + h.len as u64;
        if end > limit {
            break format!("record at LSN {lsn} would pass one lap");
        }
        if h.lsn != lsn {
            bad_end = Some(lsn + hdr);
            break format!("record at LSN {lsn} names LSN {} (an older lap)", h.lsn);
        }
        if h.epoch < epoch {
            bad_end = Some(end);
            break format!(
                "record at LSN {lsn} has epoch {} < {epoch} (left from before a restart)",
                h.epoch
            );
        }
        let payload = reader.get(lsn + hdr, h.len as usize)?;
        if !RecordHeader::verify(&head, payload) {
            bad_end = Some(end);
            break format!("checksum mismatch at LSN {lsn} (torn or garbage)");
        }
        epoch = h.epoch;
        out.max_epoch = out.max_epoch.max(h.epoch);
        match h.kind {
            RecordKind::EpochStart => out.eras.push((lsn, h.epoch)),
            RecordKind::Data => {
                applier(Record {
                    start_lsn: lsn,
                    end_lsn: end,
                    payload,
                })
                .map_err(LogError::Apply)?;
                out.records += 1;
                out.payload_bytes += h.len as u64;
            }
        }
        lsn = end;
        if lsn >= next_progress {
            tracing::info!(
                scanned_mib = (lsn - checkpoint_lsn) >> 20,
                records = out.records,
                "redo recovery in progress"
            );
            next_progress += 64 << 20;
        }
    };
    if let Some(bad_end) = bad_end {
        let window = unsynced_window_bytes(capacity);
        if let Some((at, end)) = later_valid_record(
            &mut reader,
            lsn,
            bad_end + window,
            limit,
            epoch,
            max_payload,
        )? {
            return Err(LogError::Corrupt(format!(
                "damage in the middle of the durable redo log: {stop}, but a valid record \
                 at LSN {at}..{end} follows it by more than the {window}-byte unsynced window, \
                 so the damaged record was durable; refusing to drop the records after it"
            )));
        }
    }
    out.end_lsn = lsn;
    out.stop_reason = stop;
    Ok(out)
}

/// The first valid record (its LSN and end) of epoch `epoch` or later that
/// starts after `bad` and ends at or past `min_end`, within `limit`.
/// Records after a bad one cannot be found by following lengths, so every
/// byte position is tried; a position is a candidate only if the 8 bytes of
/// its header's LSN field equal it, which rejects almost all at once.
fn later_valid_record(
    reader: &mut Reader<'_>,
    bad: u64,
    min_end: u64,
    limit: u64,
    epoch: u32,
    max_payload: u32,
) -> Result<Option<(u64, u64)>, LogError> {
    let hdr = RecordHeader::LEN as u64;
    if min_end > limit {
        return Ok(None);
    }
    const STEP: u64 = 1 << 16;
    let mut from = bad + 1;
    while from + hdr <= limit {
        let to = (from + STEP).min(limit - hdr + 1);
        let span = reader
            .get(from, (to - from) as usize + hdr as usize)?
            .to_vec();
        for s in from..to {
            let at = (s - from) as usize;
            let lsn_field = u64::from_le_bytes(span[at + 8..at + 16].try_into().expect("8 bytes"));
            if lsn_field != s {
                continue;
            }
            let head: [u8; RecordHeader::LEN] = span[at..at + hdr as usize]
                .try_into()
                .expect("exact length");
            let Some(h) = RecordHeader::decode(&head, max_payload) else {
                continue;
            };
            let end = s + hdr + h.len as u64;
            if h.epoch < epoch || end > limit || end < min_end {
                continue;
            }
            let payload = reader.get(s + hdr, h.len as usize)?;
            if RecordHeader::verify(&head, payload) {
                return Ok(Some((s, end)));
            }
        }
        from = to;
    }
    Ok(None)
}
