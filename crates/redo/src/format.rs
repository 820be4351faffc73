//! Byte-level formats of the redo log file (docs/design.md, "Redo log file").
//! Every decoder here treats its input as hostile: any bad byte gives `None`
//! or an error, never a panic.
//!
//! File layout (block = 4096 bytes):
//!   block 0: file header; block 1, 2: checkpoint slots (written alternately);
//!   from block 3: the data region, `capacity` bytes, circular. The byte of
//!   LSN `l` lives at `DATA_OFFSET + l % capacity`.

pub const BLOCK: u64 = 4096;
pub const DATA_OFFSET: u64 = 3 * BLOCK;
pub const FORMAT_VERSION: u16 = 1;
/// The first LSN of a new log. Non-zero so that 0 can mean "none".
pub const START_LSN: u64 = BLOCK;
/// The largest data region a log may have (1 TiB). A header naming more is
/// corrupt; the bound keeps `DATA_OFFSET + capacity` and LSN sums far from
/// overflow.
pub const MAX_CAPACITY: u64 = 1 << 40;
/// The largest LSN a checkpoint may name: 2^62 bytes of log is centuries at
/// any write rate, so a larger one is corruption, and `lsn + capacity`
/// cannot overflow below it.
pub const MAX_LSN: u64 = 1 << 62;

const FILE_MAGIC: &[u8; 8] = b"MLRCREDO";
const CKPT_MAGIC: &[u8; 8] = b"MLRCCKPT";

/// The most log bytes that may be written but not yet made durable at any
/// moment: the writer syncs before a write would pass `flushed_lsn` by more.
/// A crash can therefore tear or drop only writes within this window of the
/// durable end, which is what lets recovery tell a torn tail from damage in
/// the middle of the durable log (docs/design.md, "Faults: what the engine
/// does when storage fails"). Derived from the capacity alone, so recovery
/// knows it from the file header.
pub fn unsynced_window_bytes(capacity: u64) -> u64 {
    align_down(capacity / 8).max(BLOCK)
}

pub fn align_down(x: u64) -> u64 {
    x & !(BLOCK - 1)
}
pub fn align_up(x: u64) -> u64 {
    align_down(x + BLOCK - 1)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Block 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub capacity: u64,
}

impl FileHeader {
    pub const LEN: usize = 36;

    pub fn encode(&self, block: &mut [u8]) {
        block[..BLOCK as usize].fill(0);
        block[0..8].copy_from_slice(FILE_MAGIC);
        block[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        block[12..16].copy_from_slice(&(BLOCK as u32).to_le_bytes());
        block[16..24].copy_from_slice(&self.capacity.to_le_bytes());
        let crc = crc32c::crc32c(&block[0..32]);
        block[32..36].copy_from_slice(&crc.to_le_bytes());
    }

    pub fn decode(block: &[u8]) -> Result<Self, String> {
        if block.len() < Self::LEN || &block[0..8] != FILE_MAGIC {
            return Err("not a millrace redo log (bad magic)".into());
        }
        if crc32c::crc32c(&block[0..32]) != u32_at(block, 32) {
            return Err("redo log file header checksum mismatch".into());
        }
        let version = u16_at(block, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "redo log format version {version}, this build reads {FORMAT_VERSION}"
            ));
        }
        if u32_at(block, 12) as u64 != BLOCK {
            return Err("redo log block size differs from this build's".into());
        }
        let capacity = u64_at(block, 16);
        if !(4 * BLOCK..=MAX_CAPACITY).contains(&capacity) || capacity % BLOCK != 0 {
            return Err(format!("redo log capacity {capacity} is invalid"));
        }
        Ok(Self { capacity })
    }
}

/// Blocks 1 and 2. The valid slot with the larger `number` is the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Increases by one per checkpoint; slot = number % 2.
    pub number: u64,
    /// Recovery starts here: every page change before it is on disk.
    pub lsn: u64,
    /// The epoch of the record at `lsn` (see `RecordHeader::epoch`).
    pub epoch: u32,
}

impl Checkpoint {
    pub const LEN: usize = 36;

    pub fn slot_offset(number: u64) -> u64 {
        BLOCK * (1 + number % 2)
    }

    pub fn encode(&self, block: &mut [u8]) {
        block[..BLOCK as usize].fill(0);
        block[0..8].copy_from_slice(CKPT_MAGIC);
        block[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        block[12..16].copy_from_slice(&self.epoch.to_le_bytes());
        block[16..24].copy_from_slice(&self.number.to_le_bytes());
        block[24..32].copy_from_slice(&self.lsn.to_le_bytes());
        let crc = crc32c::crc32c(&block[0..32]);
        block[32..36].copy_from_slice(&crc.to_le_bytes());
    }

    /// `None` for an empty, torn or foreign slot.
    pub fn decode(block: &[u8]) -> Option<Self> {
        if block.len() < Self::LEN || &block[0..8] != CKPT_MAGIC {
            return None;
        }
        if crc32c::crc32c(&block[0..32]) != u32_at(block, 32) || u16_at(block, 8) != FORMAT_VERSION
        {
            return None;
        }
        let cp = Self {
            epoch: u32_at(block, 12),
            number: u64_at(block, 16),
            lsn: u64_at(block, 24),
        };
        (START_LSN..=MAX_LSN).contains(&cp.lsn).then_some(cp)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// A mini-transaction's changes: the payload goes to the applier.
    Data = 1,
    /// First record written after every open: starts a new epoch so that
    /// bytes left from before a crash can never be read as new records.
    EpochStart = 2,
}

/// 24 bytes before every record's payload.
///   0..4   crc32c of bytes 4..24 and the payload
///   4..8   payload length
///   8..16  LSN of the record's first byte (must equal its position)
///   16..20 epoch (non-decreasing along the log)
///   20     kind
///   21..24 zero
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub len: u32,
    pub lsn: u64,
    pub epoch: u32,
    pub kind: RecordKind,
}

impl RecordHeader {
    pub const LEN: usize = 24;

    /// Encodes the header; the checksum covers `payload` too.
    pub fn encode(&self, payload: &[u8]) -> [u8; Self::LEN] {
        debug_assert_eq!(payload.len(), self.len as usize);
        let mut h = [0u8; Self::LEN];
        h[4..8].copy_from_slice(&self.len.to_le_bytes());
        h[8..16].copy_from_slice(&self.lsn.to_le_bytes());
        h[16..20].copy_from_slice(&self.epoch.to_le_bytes());
        h[20] = self.kind as u8;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&h[4..]), payload);
        h[0..4].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes the fixed fields; the checksum is checked by `verify` once the
    /// payload is read. `max_len` bounds the payload length.
    pub fn decode(h: &[u8], max_len: u32) -> Option<Self> {
        if h.len() < Self::LEN || h[21..24] != [0, 0, 0] {
            return None;
        }
        let kind = match h[20] {
            1 => RecordKind::Data,
            2 => RecordKind::EpochStart,
            _ => return None,
        };
        let len = u32_at(h, 4);
        if len > max_len {
            return None;
        }
        Some(Self {
            len,
            lsn: u64_at(h, 8),
            epoch: u32_at(h, 16),
            kind,
        })
    }

    pub fn verify(h: &[u8], payload: &[u8]) -> bool {
        h.len() >= Self::LEN && {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&h[4..Self::LEN]), payload);
            crc == u32_at(h, 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_sys::rng::SplitMix64;

    #[test]
    fn headers_round_trip() {
        let mut b = vec![0u8; BLOCK as usize];
        let fh = FileHeader { capacity: 1 << 20 };
        fh.encode(&mut b);
        assert_eq!(FileHeader::decode(&b), Ok(fh));
        let cp = Checkpoint {
            number: 7,
            lsn: 123_456,
            epoch: 3,
        };
        cp.encode(&mut b);
        assert_eq!(Checkpoint::decode(&b), Some(cp));
        let rh = RecordHeader {
            len: 5,
            lsn: 99_999,
            epoch: 2,
            kind: RecordKind::Data,
        };
        let h = rh.encode(b"hello");
        assert_eq!(RecordHeader::decode(&h, 100), Some(rh));
        assert!(RecordHeader::verify(&h, b"hello"));
        assert!(!RecordHeader::verify(&h, b"hellp"));
        assert_eq!(RecordHeader::decode(&h, 4), None, "length bound");
    }

    /// Found by fuzzing (fuzz/corpus/redo_log/crash-*-overflow): a valid
    /// header naming a huge capacity, or a checkpoint naming a huge LSN, made
    /// `Log::open` overflow `DATA_OFFSET + capacity` / `lsn + capacity`.
    #[test]
    fn huge_capacity_or_checkpoint_lsn_is_corrupt() {
        let mut b = vec![0u8; BLOCK as usize];
        for capacity in [MAX_CAPACITY + BLOCK, u64::MAX - (BLOCK - 1)] {
            FileHeader { capacity }.encode(&mut b);
            assert!(FileHeader::decode(&b).is_err(), "capacity {capacity}");
        }
        FileHeader {
            capacity: MAX_CAPACITY,
        }
        .encode(&mut b);
        assert!(FileHeader::decode(&b).is_ok());
        for (lsn, ok) in [(MAX_LSN, true), (MAX_LSN + 1, false), (u64::MAX, false)] {
            let cp = Checkpoint {
                number: 1,
                lsn,
                epoch: 1,
            };
            cp.encode(&mut b);
            assert_eq!(Checkpoint::decode(&b).is_some(), ok, "lsn {lsn}");
        }
    }

    /// Random bytes and single-bit corruptions never panic and are never
    /// accepted where a checksum covers them.
    #[test]
    fn hostile_bytes_never_panic() {
        let mut rng = SplitMix64::new(42);
        let mut b = vec![0u8; BLOCK as usize];
        for _ in 0..20_000 {
            rng.fill(&mut b);
            let _ = FileHeader::decode(&b);
            let _ = Checkpoint::decode(&b);
            if let Some(h) = RecordHeader::decode(&b[..24], 1 << 20) {
                let end = (24 + h.len as usize).min(b.len());
                let _ = RecordHeader::verify(&b[..24], &b[24..end]);
            }
            let cut = rng.below(40) as usize;
            let _ = FileHeader::decode(&b[..cut]);
            let _ = Checkpoint::decode(&b[..cut]);
            let _ = RecordHeader::decode(&b[..cut.min(24)], 100);
        }
        let cp = Checkpoint {
            number: 1,
            lsn: START_LSN,
            epoch: 1,
        };
        for bit in 0..(Checkpoint::LEN * 8) {
            cp.encode(&mut b);
            b[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(Checkpoint::decode(&b), None, "bit {bit}");
        }
        let rh = RecordHeader {
            len: 3,
            lsn: START_LSN,
            epoch: 1,
            kind: RecordKind::Data,
        };
        for bit in 0..((24 + 3) * 8) {
            let mut rec = rh.encode(b"abc").to_vec();
            rec.extend_from_slice(b"abc");
            rec[bit / 8] ^= 1 << (bit % 8);
            let ok = RecordHeader::decode(&rec[..24], 100) == Some(rh)
                && RecordHeader::verify(&rec[..24], &rec[24..27]);
            assert!(!ok, "bit {bit} flip accepted");
        }
    }
}
