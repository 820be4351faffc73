//! How a secondary key comes from a row value: key parts (byte ranges or
//! segments of the value) and the segment format that rows with
//! variable-length columns (SQL) use to carry their secondary keys.

use millrace_btree::IndexDef;

/// One part of a secondary key, taken from the row value; a key is its
/// parts concatenated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// Bytes `offset..offset + len` of the value (rows too short give short
    /// parts). `offset` must be below `SEGMENT`, which marks a segment on
    /// disk; `Engine::create_table` refuses it.
    Bytes { offset: u16, len: u16 },
    /// Segment `i` of a value that starts with length-prefixed segments
    /// (`encode_segments`).
    Segment(u16),
}

/// The offset that marks a key part as a segment number in the table
/// directory's (offset, length) pairs.
pub const SEGMENT: u16 = u16::MAX;

impl KeyPart {
    /// The part as the table directory stores it: (offset, length), or
    /// (`SEGMENT`, segment number).
    pub(crate) fn to_pair(self) -> (u16, u16) {
        match self {
            Self::Bytes { offset, len } => (offset, len),
            Self::Segment(i) => (SEGMENT, i),
        }
    }

    /// The inverse of `to_pair`.
    pub(crate) fn from_pair((offset, len): (u16, u16)) -> Self {
        if offset == SEGMENT {
            Self::Segment(len)
        } else {
            Self::Bytes { offset, len }
        }
    }
}

/// A secondary index: its tree and how its key comes from a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryDef {
    pub index: IndexDef,
    /// The secondary key is these parts of the row value, concatenated.
    pub key: Vec<KeyPart>,
}

/// A row value that starts with `segments` (each [u16 length][bytes]), then
/// `payload`. Segments longer than u16::MAX bytes are not representable.
pub fn encode_segments(segments: &[&[u8]], payload: &[u8]) -> Vec<u8> {
    let mut v =
        Vec::with_capacity(segments.iter().map(|s| 2 + s.len()).sum::<usize>() + payload.len());
    for s in segments {
        assert!(
            s.len() <= u16::MAX as usize,
            "a key segment longer than 65535 bytes"
        );
        v.extend_from_slice(&(s.len() as u16).to_le_bytes());
        v.extend_from_slice(s);
    }
    v.extend_from_slice(payload);
    v
}

/// Splits a value made by `encode_segments` with `n` segments; None if the
/// bytes do not hold them (hostile input gives None, not a panic).
pub fn split_segments(value: &[u8], n: usize) -> Option<(Vec<&[u8]>, &[u8])> {
    let mut at = 0usize;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = u16::from_le_bytes(value.get(at..at + 2)?.try_into().ok()?) as usize;
        out.push(value.get(at + 2..at + 2 + len)?);
        at += 2 + len;
    }
    Some((out, &value[at..]))
}

impl SecondaryDef {
    /// A key made of segments `ids` of the row value.
    pub fn segments(index: IndexDef, ids: &[u16]) -> Self {
        Self {
            index,
            key: ids.iter().map(|&i| KeyPart::Segment(i)).collect(),
        }
    }

    pub fn key_of(&self, value: &[u8]) -> Vec<u8> {
        let mut k = Vec::new();
        for &part in &self.key {
            match part {
                KeyPart::Segment(i) => {
                    // Malformed values give the same (empty) part every
                    // time, so inserts, updates, rollback and purge always
                    // agree.
                    if let Some((segs, _)) = split_segments(value, i as usize + 1) {
                        k.extend_from_slice(segs[i as usize]);
                    }
                }
                KeyPart::Bytes { offset, len } => {
                    let (a, b) = (offset as usize, offset as usize + len as usize);
                    if a < value.len() {
                        k.extend_from_slice(&value[a..b.min(value.len())]);
                    }
                }
            }
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_keep_their_directory_pairs() {
        for pair in [(0, 4), (7, 0), (SEGMENT - 1, 3), (SEGMENT, 0), (SEGMENT, 9)] {
            assert_eq!(KeyPart::from_pair(pair).to_pair(), pair);
        }
        assert_eq!(KeyPart::from_pair((SEGMENT, 2)), KeyPart::Segment(2));
    }
}
