//! Parameter types of prepared statements, kept per statement.
//!
//! A client sends the types of a statement's parameters with its first
//! COM_STMT_EXECUTE only (new-params-bound flag 1); later executes send flag
//! 0 and no types. opensrv-mysql 0.7 keeps the types but, on flag 0, does
//! not step over the flag byte, so every value after it is read one byte
//! off (sysbench's second execute of an INSERT gets its strings shifted).
//! This reader sits under opensrv: it remembers each statement's types and
//! rewrites a flag-0 execute into the flag-1 form with those types, which
//! opensrv parses correctly. Packets other than COM_STMT_EXECUTE pass
//! through unchanged.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

const COM_STMT_EXECUTE: u8 = 0x17;
/// Packets this large or larger are split by the protocol; executes that
/// big are passed through untouched.
const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// Statement id -> (parameter count, types of the last execute that sent
/// them). The shim records the count at prepare and forgets at close.
#[derive(Default)]
pub struct StmtTypes {
    stmts: HashMap<u32, (u16, Option<Vec<u8>>)>,
}

impl StmtTypes {
    pub fn prepared(&mut self, id: u32, params: u16) {
        self.stmts.insert(id, (params, None));
    }

    pub fn closed(&mut self, id: u32) {
        self.stmts.remove(&id);
    }

    /// Rewrites one command payload if it is an execute without types.
    fn fix(&mut self, payload: &mut Vec<u8>) {
        if payload.first() != Some(&COM_STMT_EXECUTE) || payload.len() < 10 {
            return;
        }
        let id = u32::from_le_bytes([payload[1], payload[2], payload[3], payload[4]]);
        let Some((n, types)) = self.stmts.get_mut(&id) else {
            return;
        };
        let n = usize::from(*n);
        if n == 0 {
            return;
        }
        // command(1) id(4) flags(1) iterations(4) null-bitmap flag [types]
        let flag_at = 10 + n.div_ceil(8);
        match payload.get(flag_at) {
            Some(1) => {
                if let Some(t) = payload.get(flag_at + 1..flag_at + 1 + 2 * n) {
                    *types = Some(t.to_vec());
                }
            }
            Some(0) => {
                if let Some(t) = types {
                    payload[flag_at] = 1;
                    payload.splice(flag_at + 1..flag_at + 1, t.iter().copied());
                }
            }
            _ => {}
        }
    }
}

pub struct TypedReader<R> {
    inner: R,
    types: Arc<Mutex<StmtTypes>>,
    /// Bytes read from the client, not yet a whole packet.
    pending: Vec<u8>,
    /// Packets ready for opensrv.
    ready: Vec<u8>,
    ready_at: usize,
    eof: bool,
}

impl<R> TypedReader<R> {
    pub fn new(inner: R, types: Arc<Mutex<StmtTypes>>) -> Self {
        TypedReader {
            inner,
            types,
            pending: Vec::new(),
            ready: Vec::new(),
            ready_at: 0,
            eof: false,
        }
    }

    /// Moves the whole packets of `pending` to `ready`, fixing executes.
    fn frame(&mut self) {
        loop {
            if self.pending.len() < 4 {
                return;
            }
            let len = usize::from(self.pending[0])
                | usize::from(self.pending[1]) << 8
                | usize::from(self.pending[2]) << 16;
            let seq = self.pending[3];
            if self.pending.len() < 4 + len {
                return;
            }
            let mut payload: Vec<u8> = self.pending[4..4 + len].to_vec();
            self.pending.drain(..4 + len);
            if seq == 0 && len < MAX_PAYLOAD {
                self.types.lock().expect("poisoned").fix(&mut payload);
            }
            if payload.len() >= MAX_PAYLOAD {
                // Grown past one packet by the types: leave it as it came
                // (a statement with so many parameters is not realistic).
                payload.truncate(len);
            }
            let l = payload.len();
            self.ready
                .extend_from_slice(&[l as u8, (l >> 8) as u8, (l >> 16) as u8, seq]);
            self.ready.extend_from_slice(&payload);
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TypedReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            if me.ready_at < me.ready.len() {
                let n = buf.remaining().min(me.ready.len() - me.ready_at);
                buf.put_slice(&me.ready[me.ready_at..me.ready_at + n]);
                me.ready_at += n;
                if me.ready_at == me.ready.len() {
                    me.ready.clear();
                    me.ready_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if me.eof {
                // A partial packet at EOF goes through as it is.
                if !me.pending.is_empty() {
                    me.ready.append(&mut me.pending);
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16384];
            let mut rb = ReadBuf::new(&mut chunk);
            match Pin::new(&mut me.inner).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    if rb.filled().is_empty() {
                        me.eof = true;
                    } else {
                        me.pending.extend_from_slice(rb.filled());
                        me.frame();
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execute(id: u32, flag: u8, types: &[u8], values: &[u8]) -> Vec<u8> {
        let mut p = vec![COM_STMT_EXECUTE];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&[0, 1, 0, 0, 0]);
        p.push(0); // null bitmap of 2 parameters
        p.push(flag);
        p.extend_from_slice(types);
        p.extend_from_slice(values);
        p
    }

    #[test]
    fn a_typeless_execute_gets_the_last_types() {
        let mut t = StmtTypes::default();
        t.prepared(3, 2);
        let types = [0xfe, 0, 0x03, 0];
        let mut first = execute(3, 1, &types, b"\x01a\x05\x00\x00\x00");
        let want_first = first.clone();
        t.fix(&mut first);
        assert_eq!(first, want_first);
        let mut second = execute(3, 0, &[], b"\x01b\x06\x00\x00\x00");
        t.fix(&mut second);
        assert_eq!(second, execute(3, 1, &types, b"\x01b\x06\x00\x00\x00"));
        // Unknown statements and other commands pass untouched.
        let mut other = execute(9, 0, &[], b"x");
        let before = other.clone();
        t.fix(&mut other);
        assert_eq!(other, before);
        t.closed(3);
        let mut after_close = execute(3, 0, &[], b"y");
        let before = after_close.clone();
        t.fix(&mut after_close);
        assert_eq!(after_close, before);
    }
}
