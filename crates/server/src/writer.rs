//! The connection's output stream: buffered, and swapping opensrv's ERR
//! packet for a refused client's own (see `ErrSwapWriter`).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;

/// Output is gathered here and written when it reaches this size or when
/// opensrv flushes, which it does once at the end of every reply: a result
/// set of a hundred rows then costs one send, not one per packet.
pub(crate) const OUT_BUFFER_BYTES: usize = 64 * 1024;

/// The connection's output stream, buffered (see `OUT_BUFFER_BYTES`).
///
/// It also swaps error packets: opensrv answers a failed authentication
/// with its own error (ER_ACCESS_DENIED_NO_PASSWORD_ERROR, "Authenticate
/// failed ..."); MySQL clients and tools expect ER_ACCESS_DENIED_ERROR
/// "Access denied ..." (or ER_CON_COUNT_ERROR over the connection limit). When the shim refuses a client it stores the ERR payload to send
/// instead; this writer then swallows opensrv's packet and, at the flush
/// that follows it, writes the stored payload under the same sequence
/// number.
pub(crate) struct ErrSwapWriter<W> {
    inner: W,
    swap: Arc<Mutex<Option<Vec<u8>>>>,
    captured: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
}

impl<W: AsyncWrite + Unpin> ErrSwapWriter<W> {
    /// Writes to `inner`; a payload put in `swap` replaces the next ERR
    /// packet opensrv writes.
    pub(crate) fn new(inner: W, swap: Arc<Mutex<Option<Vec<u8>>>>) -> Self {
        Self {
            inner,
            swap,
            captured: Vec::new(),
            out: Vec::with_capacity(OUT_BUFFER_BYTES),
            out_pos: 0,
        }
    }

    fn poll_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.out_pos < self.out.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.out[self.out_pos..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.out_pos += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.out.clear();
        self.out_pos = 0;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for ErrSwapWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if this.swap.lock().expect("poisoned").is_some() {
            for b in bufs {
                this.captured.extend_from_slice(b);
            }
            return Poll::Ready(Ok(len));
        }
        // Bounded: a full buffer is drained before more is taken.
        if this.out.len() - this.out_pos >= OUT_BUFFER_BYTES {
            match this.poll_out(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other.map_ok(|()| 0),
            }
        }
        for b in bufs {
            this.out.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.captured.is_empty() {
            if let Some(payload) = this.swap.lock().expect("poisoned").take() {
                let seq = this.captured.get(3).copied().unwrap_or(2);
                let len = (payload.len() as u32).to_le_bytes();
                this.out.extend_from_slice(&len[..3]);
                this.out.push(seq);
                this.out.extend_from_slice(&payload);
            }
            this.captured.clear();
        }
        match this.poll_out(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_out(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}
