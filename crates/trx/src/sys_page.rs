//! The trx system page (page 1 of the system space): the persistent limits
//! of transaction ids and serialisation numbers and the rollback segment
//! directory; and the creation of the transaction layer's pages (this one
//! and the table directory) in a fresh store.
//!
//! Layout, after the common header:
//!   32..40 magic "MLRCTRXS"  40..48 transaction id limit  48..56 serial
//!   number limit  56..58 rollback segments  58..60 undo spaces
//!   60..   (space u32, header page u32) per rollback segment
//! Ids and numbers are handed out in blocks: the page records a limit
//! above every value used, rewritten before the first value past it is
//! used, so after a crash counting resumes at the limit.

use crate::error::TrxError;
use crate::tables::{TABLES_PAGE, TAB_MAGIC};
use millrace_buf::page::{u16_at, u32_at, u64_at};
use millrace_buf::{page_type, space, LatchMode, PageId, PageStore};

pub const TRX_SYS_PAGE: u32 = 1;
const TRX_MAGIC: &[u8; 8] = b"MLRCTRXS";
const T_ID_LIMIT: usize = 40;
const T_NO_LIMIT: usize = 48;
const T_N_RSEGS: usize = 56;
const T_N_UNDO: usize = 58;
const T_RSEGS: usize = 60;

/// The largest id or serial number limit the page may hold: counting that
/// far takes millennia at any rate, so more is damage, and the limit plus
/// the block handed out next (`id_limits::ID_BLOCK`) cannot overflow.
pub const MAX_ID_LIMIT: u64 = 1 << 62;

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
    let (id_limit, no_limit) = (u64_at(p, T_ID_LIMIT), u64_at(p, T_NO_LIMIT));
    if id_limit > MAX_ID_LIMIT || no_limit > MAX_ID_LIMIT {
        return Err(TrxError::Corrupt(format!(
            "trx system page: id limit {id_limit} or serial number limit {no_limit} \
             above {MAX_ID_LIMIT}"
        )));
    }
    Ok(TrxSysPage {
        id_limit,
        no_limit,
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
