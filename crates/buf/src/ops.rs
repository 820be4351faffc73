//! The page changes a mini-transaction logs: the payload of one redo record
//! is a sequence of these ops (docs/design.md, "Redo ops"). Decoding treats
//! the bytes as hostile: bad input is an error, never a panic.
//!
//!   1 WRITE        space u32, page u32, offset u16, len u16, bytes[len]
//!   2 MOVE         space u32, page u32, src u16, dst u16, len u16 (memmove)
//!   3 INIT         space u32, page u32, type u16: zero the page, set its header
//!   4 CREATE_SPACE space u32: the space's file exists from here on

use crate::page::PageId;
use millrace_io::bytes::ByteReader;

pub const OP_WRITE: u8 = 1;
pub const OP_MOVE: u8 = 2;
pub const OP_INIT: u8 = 3;
pub const OP_CREATE_SPACE: u8 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<'a> {
    Write {
        id: PageId,
        offset: usize,
        data: &'a [u8],
    },
    Move {
        id: PageId,
        src: usize,
        dst: usize,
        len: usize,
    },
    Init {
        id: PageId,
        page_type: u16,
    },
    CreateSpace {
        space: u32,
    },
}

fn put_id(out: &mut Vec<u8>, id: PageId) {
    out.extend_from_slice(&id.space.to_le_bytes());
    out.extend_from_slice(&id.page.to_le_bytes());
}

pub fn encode_write(out: &mut Vec<u8>, id: PageId, offset: usize, data: &[u8]) {
    debug_assert!(offset <= u16::MAX as usize && data.len() <= u16::MAX as usize);
    out.push(OP_WRITE);
    put_id(out, id);
    out.extend_from_slice(&(offset as u16).to_le_bytes());
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
    out.extend_from_slice(data);
}

pub fn encode_move(out: &mut Vec<u8>, id: PageId, src: usize, dst: usize, len: usize) {
    out.push(OP_MOVE);
    put_id(out, id);
    for v in [src, dst, len] {
        debug_assert!(v <= u16::MAX as usize);
        out.extend_from_slice(&(v as u16).to_le_bytes());
    }
}

pub fn encode_init(out: &mut Vec<u8>, id: PageId, page_type: u16) {
    out.push(OP_INIT);
    put_id(out, id);
    out.extend_from_slice(&page_type.to_le_bytes());
}

pub fn encode_create_space(out: &mut Vec<u8>, space: u32) {
    out.push(OP_CREATE_SPACE);
    out.extend_from_slice(&space.to_le_bytes());
}

/// Iterates the ops of one record; stops with an error at the first bad op.
pub struct OpReader<'a> {
    r: ByteReader<'a>,
}

impl<'a> OpReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            r: ByteReader::new(buf),
        }
    }

    fn op(&mut self, kind: u8) -> Result<Op<'a>, String> {
        let r = &mut self.r;
        let id = |r: &mut ByteReader<'a>| -> Result<PageId, String> {
            Ok(PageId::new(r.u32()?, r.u32()?))
        };
        Ok(match kind {
            OP_WRITE => {
                let id = id(r)?;
                let offset = r.u16()? as usize;
                let len = r.u16()? as usize;
                Op::Write {
                    id,
                    offset,
                    data: r.take(len)?,
                }
            }
            OP_MOVE => Op::Move {
                id: id(r)?,
                src: r.u16()? as usize,
                dst: r.u16()? as usize,
                len: r.u16()? as usize,
            },
            OP_INIT => Op::Init {
                id: id(r)?,
                page_type: r.u16()?,
            },
            OP_CREATE_SPACE => Op::CreateSpace { space: r.u32()? },
            k => return Err(format!("unknown redo op kind {k}")),
        })
    }
}

impl<'a> Iterator for OpReader<'a> {
    type Item = Result<Op<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        let kind = self.r.u8().ok()?;
        let at = self.r.position() - 1;
        let op = self
            .op(kind)
            .map_err(|e| format!("redo op at byte {at}: {e}"));
        if op.is_err() {
            // Nothing after a bad op can be trusted.
            let rest = self.r.remaining();
            let _ = self.r.take(rest);
        }
        Some(op)
    }
}

/// Applies one page op to a page image; checks bounds against the page
/// size (hostile input).
pub fn apply(op: &Op<'_>, page: &mut [u8]) -> Result<(), String> {
    let size = page.len();
    match *op {
        Op::Write { offset, data, id } => {
            if offset + data.len() > size {
                return Err(format!("redo write past page {id} end"));
            }
            page[offset..offset + data.len()].copy_from_slice(data);
        }
        Op::Move { src, dst, len, id } => {
            if src + len > size || dst + len > size {
                return Err(format!("redo move past page {id} end"));
            }
            page.copy_within(src..src + len, dst);
        }
        Op::Init { id, page_type } => crate::page::init_header(page, id, page_type),
        Op::CreateSpace { .. } => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use millrace_sys::rng::SplitMix64;

    #[test]
    fn round_trip_and_hostile_bytes() {
        let id = PageId::new(3, 9);
        let mut buf = Vec::new();
        encode_init(&mut buf, id, 7);
        encode_write(&mut buf, id, 100, b"abc");
        encode_move(&mut buf, id, 100, 200, 3);
        encode_create_space(&mut buf, 5);
        let ops: Vec<_> = OpReader::new(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(ops.len(), 4);
        let mut page = vec![0u8; 4096];
        for op in &ops {
            apply(op, &mut page).unwrap();
        }
        assert_eq!(&page[200..203], b"abc");
        let mut rng = SplitMix64::new(1);
        for _ in 0..20_000 {
            let mut junk = vec![0u8; rng.below(64) as usize];
            rng.fill(&mut junk);
            if !junk.is_empty() {
                junk[0] = 1 + rng.below(5) as u8;
            }
            for op in OpReader::new(&junk).flatten() {
                let _ = apply(&op, &mut page);
            }
        }
    }
}
