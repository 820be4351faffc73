//! Engine-wide pages of the transaction layer in the system space:
//! page 1, the trx system page (persistent counters and the rollback
//! segment directory), and page 2, the table directory.
//!
//! Trx system page, after the common header:
//!   32..40 magic "MLRCTRXS"  40..48 transaction id limit  48..56 serial
//!   number limit  56..58 rollback segments  58..60 undo spaces
//!   60..   (space u32, header page u32) per rollback segment
//! Ids and numbers are handed out in blocks: the page records a limit
//! above every value used, rewritten before the first value past it is
//! used, so after a crash counting resumes at the limit.
//! Table directory: 32..40 magic "MLRCTABS", 40..42 count, 44.. entries
//! [u16 length][entry]: table id u32, space u32, clustered root u32 and
//! index id u64, secondaries u8, per secondary: root u32, index id u64,
//! key ranges u8, per range: value offset u16, length u16.

use crate::TrxError;
use millrace_btree::IndexDef;
use millrace_buf::page::{u16_at, u32_at, u64_at};
use millrace_buf::{page_type, space, LatchMode, PageId, PageStore};

pub const TRX_SYS_PAGE: u32 = 1;
pub const TABLES_PAGE: u32 = 2;
const TRX_MAGIC: &[u8; 8] = b"MLRCTRXS";
const TAB_MAGIC: &[u8; 8] = b"MLRCTABS";
const T_ID_LIMIT: usize = 40;
const T_NO_LIMIT: usize = 48;
const T_N_RSEGS: usize = 56;
const T_N_UNDO: usize = 58;
const T_RSEGS: usize = 60;

/// A secondary index: its tree and how its key comes from a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryDef {
    pub index: IndexDef,
    /// The secondary key is these parts of the row value, concatenated:
    /// `(offset, length)` is a byte range (rows too short give short keys);
    /// `(SEGMENT, i)` is segment `i` of a value that starts with
    /// length-prefixed segments (`encode_segments`): how rows with
    /// variable-length columns (SQL) carry their secondary keys.
    pub key: Vec<(u16, u16)>,
}

/// The offset that marks a key part as a segment number (see SecondaryDef).
pub const SEGMENT: u16 = u16::MAX;

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
            key: ids.iter().map(|&i| (SEGMENT, i)).collect(),
        }
    }

    pub fn key_of(&self, value: &[u8]) -> Vec<u8> {
        let mut k = Vec::new();
        for &(off, len) in &self.key {
            if off == SEGMENT {
                // Malformed values give the same (empty) part every time, so
                // inserts, updates, rollback and purge always agree.
                if let Some((segs, _)) = split_segments(value, len as usize + 1) {
                    k.extend_from_slice(segs[len as usize]);
                }
                continue;
            }
            let (a, b) = (off as usize, off as usize + len as usize);
            if a < value.len() {
                k.extend_from_slice(&value[a..b.min(value.len())]);
            }
        }
        k
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub id: u32,
    pub space: u32,
    pub clustered: IndexDef,
    pub secondaries: Vec<SecondaryDef>,
}

pub struct TrxSysPage {
    pub id_limit: u64,
    pub no_limit: u64,
    pub rsegs: Vec<(u32, u32)>,
    pub undo_spaces: u16,
}

/// Whether the store already has the transaction layer's pages.
pub fn initialised(store: &PageStore) -> Result<bool, TrxError> {
    let mut mtr = store.mtr()?;
    let (size, _) = space::space_size(&mut mtr, space::SYSTEM_SPACE)?;
    if size <= TABLES_PAGE {
        return Ok(false);
    }
    let r = mtr.get(PageId::new(0, TRX_SYS_PAGE), LatchMode::Shared)?;
    if &mtr.page(r)[32..40] != TRX_MAGIC {
        return Err(TrxError::Corrupt(
            "system space page 1 is not the trx system page".into(),
        ));
    }
    Ok(true)
}

/// Creates pages 1 and 2 of the system space (a fresh store).
pub fn init(store: &PageStore) -> Result<(), TrxError> {
    let mut mtr = store.mtr()?;
    let a = space::allocate_page(&mut mtr, 0, page_type::OTHER)?;
    let b = space::allocate_page(&mut mtr, 0, page_type::OTHER)?;
    if (mtr.id(a).page, mtr.id(b).page) != (TRX_SYS_PAGE, TABLES_PAGE) {
        return Err(TrxError::Corrupt(
            "the system space already had pages: not a fresh store".into(),
        ));
    }
    mtr.write(a, 32, TRX_MAGIC);
    mtr.write(b, 32, TAB_MAGIC);
    mtr.commit()?;
    Ok(())
}

pub fn read_trx_sys(store: &PageStore) -> Result<TrxSysPage, TrxError> {
    let mut mtr = store.mtr()?;
    let r = mtr.get(PageId::new(0, TRX_SYS_PAGE), LatchMode::Shared)?;
    let p = mtr.page(r);
    let n = u16_at(p, T_N_RSEGS) as usize;
    if T_RSEGS + n * 8 > p.len() {
        return Err(TrxError::Corrupt(
            "trx system page: too many rollback segments".into(),
        ));
    }
    Ok(TrxSysPage {
        id_limit: u64_at(p, T_ID_LIMIT),
        no_limit: u64_at(p, T_NO_LIMIT),
        rsegs: (0..n)
            .map(|i| (u32_at(p, T_RSEGS + i * 8), u32_at(p, T_RSEGS + i * 8 + 4)))
            .collect(),
        undo_spaces: u16_at(p, T_N_UNDO),
    })
}

pub fn max_rsegs(page_size: usize) -> usize {
    (page_size - T_RSEGS) / 8
}

pub fn write_rsegs(
    store: &PageStore,
    rsegs: &[(u32, u32)],
    undo_spaces: u16,
) -> Result<(), TrxError> {
    let mut mtr = store.mtr()?;
    let r = mtr.get(PageId::new(0, TRX_SYS_PAGE), LatchMode::Exclusive)?;
    let mut b = Vec::with_capacity(rsegs.len() * 8);
    for &(s, p) in rsegs {
        b.extend_from_slice(&s.to_le_bytes());
        b.extend_from_slice(&p.to_le_bytes());
    }
    mtr.write(r, T_RSEGS, &b);
    mtr.write(r, T_N_RSEGS, &(rsegs.len() as u16).to_le_bytes());
    mtr.write(r, T_N_UNDO, &undo_spaces.to_le_bytes());
    mtr.commit()?;
    Ok(())
}

/// Records new limits for ids and serial numbers; returns the end LSN.
pub fn write_limits(
    store: &PageStore,
    id_limit: u64,
    no_limit: u64,
) -> Result<Option<u64>, TrxError> {
    let mut mtr = store.mtr()?;
    let r = mtr.get(PageId::new(0, TRX_SYS_PAGE), LatchMode::Exclusive)?;
    mtr.write(r, T_ID_LIMIT, &id_limit.to_le_bytes());
    mtr.write(r, T_NO_LIMIT, &no_limit.to_le_bytes());
    Ok(mtr.commit()?)
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
        for &(o, l) in &s.key {
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
            key.push((o, l));
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
