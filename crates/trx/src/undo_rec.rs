//! Roll pointers and undo records (docs/design.md, "Undo").
//!
//! A roll pointer names an undo record: bit 63 says the record is an insert
//! (no older version exists), bits 32..62 the undo page's space, bits 16..31
//! hold nothing, and the page number and in-page offset are packed below:
//!   [63] insert  [48..63) space (15 bits)  [16..48) page  [0..16) offset
//! 0 means "no undo record" (a row written before any undo existed).
//!
//! An undo record holds what rollback and MVCC need to rebuild the previous
//! version of one clustered record. Byte layout (little-endian):
//!   0      kind (1 insert, 2 update of an existing row, 3 delete-mark)
//!   1..9   undo number (position within its transaction)
//!   9..13  table id
//!   13..15 primary key length, then the key
//!   then   previous trx id u64, previous roll pointer u64,
//!          previous delete mark u8, previous value length u32
//!          (u32::MAX: no previous value) and the value,
//!          secondary flags u64 (bit i: secondary index i already held the
//!          new entry, delete-marked, before this change)
//! Decoding treats the bytes as hostile: bad input is an error.

use millrace_io::bytes::ByteReader;

pub const INSERT_FLAG: u64 = 1 << 63;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollPtr {
    pub insert: bool,
    pub space: u32,
    pub page: u32,
    pub offset: u16,
}

impl RollPtr {
    pub fn encode(self) -> u64 {
        debug_assert!(self.space < (1 << 15));
        (if self.insert { INSERT_FLAG } else { 0 })
            | ((self.space as u64 & 0x7FFF) << 48)
            | ((self.page as u64) << 16)
            | self.offset as u64
    }

    /// None for 0 (no undo record).
    pub fn decode(v: u64) -> Option<Self> {
        if v == 0 {
            return None;
        }
        Some(Self {
            insert: v & INSERT_FLAG != 0,
            space: ((v >> 48) & 0x7FFF) as u32,
            page: (v >> 16) as u32,
            offset: v as u16,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum UndoKind {
    /// A new row: rollback removes it; it has no older version.
    Insert = 1,
    /// An existing row (possibly delete-marked) was changed.
    Update = 2,
    /// An existing row was delete-marked.
    DeleteMark = 3,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoRecord {
    pub kind: UndoKind,
    pub undo_no: u64,
    pub table_id: u32,
    pub pk: Vec<u8>,
    pub prev_trx_id: u64,
    pub prev_roll_ptr: u64,
    pub prev_deleted: bool,
    /// The row before the change; None for an insert.
    pub prev_value: Option<Vec<u8>>,
    pub sec_existed: u64,
}

impl UndoRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(
            48 + self.pk.len() + self.prev_value.as_ref().map_or(0, |v| v.len()),
        );
        b.push(self.kind as u8);
        b.extend_from_slice(&self.undo_no.to_le_bytes());
        b.extend_from_slice(&self.table_id.to_le_bytes());
        b.extend_from_slice(&(self.pk.len() as u16).to_le_bytes());
        b.extend_from_slice(&self.pk);
        b.extend_from_slice(&self.prev_trx_id.to_le_bytes());
        b.extend_from_slice(&self.prev_roll_ptr.to_le_bytes());
        b.push(self.prev_deleted as u8);
        match &self.prev_value {
            Some(v) => {
                b.extend_from_slice(&(v.len() as u32).to_le_bytes());
                b.extend_from_slice(v);
            }
            None => b.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
        b.extend_from_slice(&self.sec_existed.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, String> {
        let mut r = ByteReader::new(b);
        let kind = match r.u8()? {
            1 => UndoKind::Insert,
            2 => UndoKind::Update,
            3 => UndoKind::DeleteMark,
            k => return Err(format!("unknown undo record kind {k}")),
        };
        let undo_no = r.u64()?;
        let table_id = r.u32()?;
        let pk_len = r.u16()? as usize;
        let pk = r.take(pk_len)?.to_vec();
        let prev_trx_id = r.u64()?;
        let prev_roll_ptr = r.u64()?;
        let prev_deleted = match r.u8()? {
            0 => false,
            1 => true,
            d => return Err(format!("bad delete flag {d} in an undo record")),
        };
        let vlen = r.u32()?;
        let prev_value = if vlen == u32::MAX {
            None
        } else {
            Some(r.take(vlen as usize)?.to_vec())
        };
        let sec_existed = r.u64()?;
        if !r.is_empty() {
            return Err("trailing bytes after an undo record".into());
        }
        if (kind == UndoKind::Insert) != prev_value.is_none() {
            return Err("undo record: an insert has no previous value, others have one".into());
        }
        Ok(Self {
            kind,
            undo_no,
            table_id,
            pk,
            prev_trx_id,
            prev_roll_ptr,
            prev_deleted,
            prev_value,
            sec_existed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_sys::rng::SplitMix64;

    #[test]
    fn round_trips_and_hostile_bytes() {
        let rp = RollPtr {
            insert: true,
            space: 3,
            page: 77,
            offset: 1234,
        };
        assert_eq!(RollPtr::decode(rp.encode()), Some(rp));
        assert_eq!(RollPtr::decode(0), None);
        let rec = UndoRecord {
            kind: UndoKind::Update,
            undo_no: 5,
            table_id: 9,
            pk: b"key".to_vec(),
            prev_trx_id: 42,
            prev_roll_ptr: rp.encode(),
            prev_deleted: true,
            prev_value: Some(b"old".to_vec()),
            sec_existed: 0b101,
        };
        let b = rec.encode();
        assert_eq!(UndoRecord::decode(&b), Ok(rec));
        for cut in 0..b.len() {
            assert!(UndoRecord::decode(&b[..cut]).is_err());
        }
        let mut rng = SplitMix64::new(3);
        for _ in 0..20_000 {
            let mut junk = vec![0u8; rng.below(80) as usize];
            rng.fill(&mut junk);
            let _ = UndoRecord::decode(&junk);
        }
    }
}
