//! The table directory (page 2 of the system space): every table's
//! tablespace, clustered index and secondary indexes with their keys; and
//! a table as the engine holds it open.
//!
//! Page layout, after the common header: 32..40 magic "MLRCTABS", 40..42
//! count, 44.. entries [u16 length][entry]: table id u32, space u32,
//! clustered root u32 and index id u64, secondaries u8, per secondary:
//! root u32, index id u64, key ranges u8, per range: value offset u16,
//! length u16 (a `KeyPart` as `KeyPart::to_pair` gives it).

use crate::error::TrxError;
use crate::keys::{KeyPart, SecondaryDef};
use millrace_btree::{Index, IndexDef};
use millrace_buf::page::u16_at;
use millrace_buf::{LatchMode, PageId, PageStore};

pub const TABLES_PAGE: u32 = 2;
pub(crate) const TAB_MAGIC: &[u8; 8] = b"MLRCTABS";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub id: u32,
    pub space: u32,
    pub clustered: IndexDef,
    pub secondaries: Vec<SecondaryDef>,
}

/// An open table: its definition and its indexes.
pub(crate) struct Table {
    pub(crate) def: TableDef,
    pub(crate) clustered: Index,
    pub(crate) secondaries: Vec<(Index, SecondaryDef)>,
}

impl Table {
    pub(crate) fn open(def: TableDef) -> Table {
        Table {
            clustered: Index::open(def.clustered),
            secondaries: def
                .secondaries
                .iter()
                .map(|s| (Index::open(s.index), s.clone()))
                .collect(),
            def,
        }
    }
}

fn encode_table(t: &TableDef) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&t.id.to_le_bytes());
    b.extend_from_slice(&t.space.to_le_bytes());
    b.extend_from_slice(&t.clustered.root.to_le_bytes());
    b.extend_from_slice(&t.clustered.id.to_le_bytes());
    b.push(t.secondaries.len() as u8);
    for s in &t.secondaries {
        b.extend_from_slice(&s.index.root.to_le_bytes());
        b.extend_from_slice(&s.index.id.to_le_bytes());
        b.push(s.key.len() as u8);
        for part in &s.key {
            let (o, l) = part.to_pair();
            b.extend_from_slice(&o.to_le_bytes());
            b.extend_from_slice(&l.to_le_bytes());
        }
    }
    b
}

fn decode_table(b: &[u8]) -> Option<TableDef> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = b.get(at..at + n)?;
        at += n;
        Some(s)
    };
    let id = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let space_id = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let root = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let index_id = u64::from_le_bytes(take(8)?.try_into().ok()?);
    let n_sec = take(1)?[0] as usize;
    let mut secondaries = Vec::new();
    for _ in 0..n_sec {
        let root = u32::from_le_bytes(take(4)?.try_into().ok()?);
        let sid = u64::from_le_bytes(take(8)?.try_into().ok()?);
        let n = take(1)?[0] as usize;
        let mut key = Vec::new();
        for _ in 0..n {
            let o = u16::from_le_bytes(take(2)?.try_into().ok()?);
            let l = u16::from_le_bytes(take(2)?.try_into().ok()?);
            key.push(KeyPart::from_pair((o, l)));
        }
        secondaries.push(SecondaryDef {
            index: IndexDef {
                space: space_id,
                root,
                id: sid,
                sys_fields: false,
            },
            key,
        });
    }
    Some(TableDef {
        id,
        space: space_id,
        clustered: IndexDef {
            space: space_id,
            root,
            id: index_id,
            sys_fields: true,
        },
        secondaries,
    })
}

pub fn read_tables(store: &PageStore) -> Result<Vec<TableDef>, TrxError> {
    let mut mtr = store.mtr()?;
    let r = mtr.get(PageId::new(0, TABLES_PAGE), LatchMode::Shared)?;
    let p = mtr.page(r);
    if &p[32..40] != TAB_MAGIC {
        return Err(TrxError::Corrupt("table directory page is damaged".into()));
    }
    let n = u16_at(p, 40) as usize;
    let mut at = 44;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = p
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
        let entry = len.and_then(|l| p.get(at + 2..at + 2 + l));
        let t = entry
            .and_then(decode_table)
            .ok_or_else(|| TrxError::Corrupt("table directory entry is damaged".into()))?;
        at += 2 + len.unwrap_or(0);
        out.push(t);
    }
    Ok(out)
}

/// Appends a table to the directory, in the caller's mini-transaction so
/// that the table's creation is atomic.
pub fn add_table(mtr: &mut millrace_buf::Mtr<'_>, t: &TableDef) -> Result<(), TrxError> {
    let r = mtr.get(PageId::new(0, TABLES_PAGE), LatchMode::Exclusive)?;
    let p = mtr.page(r);
    let n = u16_at(p, 40) as usize;
    let mut at = 44;
    for _ in 0..n {
        at += 2 + u16_at(p, at) as usize;
    }
    let e = encode_table(t);
    if at + 2 + e.len() > p.len() {
        return Err(TrxError::Full("the table directory page is full".into()));
    }
    let mut framed = (e.len() as u16).to_le_bytes().to_vec();
    framed.extend_from_slice(&e);
    mtr.write(r, at, &framed);
    mtr.write(r, 40, &((n + 1) as u16).to_le_bytes());
    Ok(())
}

/// Removes table `id` from the directory, in the caller's mini-transaction;
/// false if it is not there. The entries after it move up, so the directory
/// stays a packed list.
pub fn remove_table(mtr: &mut millrace_buf::Mtr<'_>, id: u32) -> Result<bool, TrxError> {
    let r = mtr.get(PageId::new(0, TABLES_PAGE), LatchMode::Exclusive)?;
    let p = mtr.page(r);
    let n = u16_at(p, 40) as usize;
    let mut at = 44;
    let mut found = None;
    for _ in 0..n {
        let len = u16_at(p, at) as usize;
        let entry_id = p
            .get(at + 2..at + 6)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if entry_id == Some(id) && found.is_none() {
            found = Some((at, 2 + len));
        }
        at += 2 + len;
    }
    let Some((start, len)) = found else {
        return Ok(false);
    };
    let end = at;
    if end > p.len() {
        return Err(TrxError::Corrupt("table directory entry is damaged".into()));
    }
    let tail = p[start + len..end].to_vec();
    mtr.write(r, start, &tail);
    mtr.write(r, 40, &((n - 1) as u16).to_le_bytes());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(root: u32, id: u64, sys_fields: bool) -> IndexDef {
        IndexDef {
            space: 7,
            root,
            id,
            sys_fields,
        }
    }

    /// The directory keeps the (offset, length) pairs it had before key
    /// parts had a type: a byte range as itself, a segment as (SEGMENT, i).
    #[test]
    fn entries_keep_their_bytes() {
        let t = TableDef {
            id: 7,
            space: 7,
            clustered: index(3, 10, true),
            secondaries: vec![
                SecondaryDef {
                    index: index(4, 11, false),
                    key: vec![KeyPart::Bytes { offset: 2, len: 5 }],
                },
                SecondaryDef {
                    index: index(5, 12, false),
                    key: vec![KeyPart::Segment(1), KeyPart::Segment(0)],
                },
            ],
        };
        let mut want = Vec::new();
        want.extend_from_slice(&7u32.to_le_bytes());
        want.extend_from_slice(&7u32.to_le_bytes());
        want.extend_from_slice(&3u32.to_le_bytes());
        want.extend_from_slice(&10u64.to_le_bytes());
        want.push(2);
        want.extend_from_slice(&4u32.to_le_bytes());
        want.extend_from_slice(&11u64.to_le_bytes());
        want.push(1);
        want.extend_from_slice(&[2, 0, 5, 0]);
        want.extend_from_slice(&5u32.to_le_bytes());
        want.extend_from_slice(&12u64.to_le_bytes());
        want.push(2);
        want.extend_from_slice(&[0xff, 0xff, 1, 0, 0xff, 0xff, 0, 0]);
        assert_eq!(encode_table(&t), want);
        assert_eq!(decode_table(&want), Some(t));
    }
}
