//! Framing: a packet is a 3-byte little-endian payload length, a 1-byte
//! sequence number and the payload. A payload of 0xFF_FFFF bytes or more
//! travels as several packets: every full one (exactly 0xFF_FFFF bytes) is
//! followed by another, the last one shorter (possibly empty).
//!
//! Reading is bounded: a message whose payload would exceed the caller's
//! limit (max_allowed_packet, or a small limit before authentication) is an
//! error as soon as a header says so, before its bytes are read. The reader
//! keeps one reusable buffer; several packets that arrive in one read are
//! all kept and handed out in order.
//!
//! Also here: the payload cursor `Reader` (every read checked against what
//! is left, errors instead of panics) and the little-endian and
//! length-encoded writers the other modules encode with.

use std::fmt;
use std::io::{self, Read, Write};

/// A payload that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// The payload ended inside the named field.
    Truncated(&'static str),
    /// The named field holds a value the protocol does not allow.
    Malformed(&'static str),
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Truncated(what) => write!(f, "packet ends inside {what}"),
            ProtocolError::Malformed(what) => write!(f, "malformed {what}"),
        }
    }
}

/// The largest payload one packet carries; a payload this long or longer
/// continues in the next packet.
pub const MAX_PACKET_PAYLOAD: usize = 0xFF_FFFF;

/// Bytes asked of the socket per read (the buffer grows only for larger
/// packets, up to the caller's limit).
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Why reading a message failed.
#[derive(Debug)]
pub enum ReadError {
    /// The socket failed, timed out, or closed (`UnexpectedEof`).
    Io(io::Error),
    /// The message is larger than the limit the caller gave.
    TooLarge,
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Reads whole messages (packets reassembled) from a byte stream.
pub struct PacketReader {
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl Default for PacketReader {
    fn default() -> Self {
        Self::new()
    }
}

impl PacketReader {
    pub fn new() -> Self {
        PacketReader {
            buf: vec![0; READ_CHUNK_BYTES],
            start: 0,
            end: 0,
        }
    }

    /// Reads the next message into `out` (cleared first), at most
    /// `limit_bytes` of payload. Returns the sequence number of its last
    /// packet.
    pub fn read_message(
        &mut self,
        src: &mut impl Read,
        out: &mut Vec<u8>,
        limit_bytes: usize,
    ) -> Result<u8, ReadError> {
        out.clear();
        // Bounded: every turn adds MAX_PACKET_PAYLOAD bytes to `out`, and
        // `out` may not outgrow `limit_bytes`.
        loop {
            self.fill(src, 4)?;
            let h = &self.buf[self.start..self.start + 4];
            let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
            let seq = h[3];
            if out.len() + len > limit_bytes {
                return Err(ReadError::TooLarge);
            }
            self.start += 4;
            self.fill(src, len)?;
            out.extend_from_slice(&self.buf[self.start..self.start + len]);
            self.start += len;
            if len < MAX_PACKET_PAYLOAD {
                return Ok(seq);
            }
        }
    }

    /// Whether bytes of a next message have already been read.
    pub fn has_buffered(&self) -> bool {
        self.start < self.end
    }

    /// Makes at least `need` unread bytes available.
    fn fill(&mut self, src: &mut impl Read, need: usize) -> io::Result<()> {
        if self.end - self.start >= need {
            return Ok(());
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        while self.end < need {
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() + READ_CHUNK_BYTES, 0);
            }
            match src.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // A large message is done with: give its memory back.
        if self.buf.len() > 4 * READ_CHUNK_BYTES && need <= READ_CHUNK_BYTES {
            self.buf.truncate(self.end.max(READ_CHUNK_BYTES));
            self.buf.shrink_to(self.end.max(READ_CHUNK_BYTES));
        }
        Ok(())
    }
}

/// Output of one connection: packets are encoded into one buffer and sent
/// with one write per reply (or when the buffer passes `FLUSH_BYTES`
/// between packets, so a large result streams out in pieces).
pub struct PacketWriter {
    out: Vec<u8>,
    /// Where the payload of the packet being built starts (its header is
    /// the 4 bytes before it).
    open: Option<usize>,
    /// The sequence number of the next packet.
    pub seq: u8,
}

/// See `PacketWriter`.
pub const FLUSH_BYTES: usize = 64 * 1024;

impl Default for PacketWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl PacketWriter {
    pub fn new() -> Self {
        PacketWriter {
            out: Vec::with_capacity(FLUSH_BYTES),
            open: None,
            seq: 0,
        }
    }

    /// Starts a packet; its payload is written to the returned buffer and
    /// the packet closed with `end`.
    pub fn begin(&mut self) -> &mut Vec<u8> {
        debug_assert!(self.open.is_none(), "packet begun twice");
        self.out.extend_from_slice(&[0, 0, 0, 0]);
        self.open = Some(self.out.len());
        &mut self.out
    }

    /// Closes the packet begun last: fills in its header (splitting a
    /// payload of MAX_PACKET_PAYLOAD bytes or more into several packets).
    pub fn end(&mut self) {
        let Some(at) = self.open.take() else {
            debug_assert!(false, "end without begin");
            return;
        };
        let len = self.out.len() - at;
        if len < MAX_PACKET_PAYLOAD {
            self.header(at - 4, len);
            return;
        }
        // Rare: re-frame the payload into full packets plus a short one.
        let payload = self.out.split_off(at);
        self.out.truncate(at - 4);
        let mut rest = &payload[..];
        loop {
            let n = rest.len().min(MAX_PACKET_PAYLOAD);
            let h = self.out.len();
            self.out.extend_from_slice(&[0, 0, 0, 0]);
            self.header(h, n);
            self.out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if n < MAX_PACKET_PAYLOAD {
                break;
            }
        }
    }

    fn header(&mut self, at: usize, len: usize) {
        debug_assert!(len < 1 << 24);
        self.out[at] = len as u8;
        self.out[at + 1] = (len >> 8) as u8;
        self.out[at + 2] = (len >> 16) as u8;
        self.out[at + 3] = self.seq;
        self.seq = self.seq.wrapping_add(1);
    }

    /// One whole packet.
    pub fn packet(&mut self, payload: &[u8]) {
        self.begin().extend_from_slice(payload);
        self.end();
    }

    /// Sends what is buffered if it passed `FLUSH_BYTES` (between packets).
    pub fn maybe_flush(&mut self, dst: &mut impl Write) -> io::Result<()> {
        if self.out.len() >= FLUSH_BYTES {
            self.flush(dst)?;
        }
        Ok(())
    }

    /// Sends everything buffered.
    pub fn flush(&mut self, dst: &mut impl Write) -> io::Result<()> {
        debug_assert!(self.open.is_none(), "flush inside a packet");
        if !self.out.is_empty() {
            dst.write_all(&self.out)?;
            self.out.clear();
            if self.out.capacity() > 4 * FLUSH_BYTES {
                self.out.shrink_to(FLUSH_BYTES);
            }
        }
        Ok(())
    }

    /// Drops what is buffered (a connection being closed).
    pub fn discard(&mut self) {
        self.out.clear();
        self.open = None;
    }
}

// ---------------------------------------------------------------------------
// Encoding helpers

/// A length-encoded integer.
pub fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    if n < 251 {
        out.push(n as u8);
    } else if n < 1 << 16 {
        out.push(0xfc);
        out.extend_from_slice(&(n as u16).to_le_bytes());
    } else if n < 1 << 24 {
        out.push(0xfd);
        out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
    } else {
        out.push(0xfe);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

/// A length-encoded string.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc_int(out, b.len() as u64);
    out.extend_from_slice(b);
}

// ---------------------------------------------------------------------------
// Decoding: a cursor over a payload

/// Reads a payload front to back; every read is checked against what is
/// left.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The bytes not read yet (and reads them all).
    pub fn rest(&mut self) -> &'a [u8] {
        let r = &self.bytes[self.pos..];
        self.pos = self.bytes.len();
        r
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        if n > self.remaining() {
            return Err(ProtocolError::Truncated(what));
        }
        let r = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(r)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, ProtocolError> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, ProtocolError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-encoded integer (0xfb, NULL, and 0xff are errors here).
    pub fn lenenc_int(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        match self.u8(what)? {
            n @ 0..=0xfa => Ok(u64::from(n)),
            0xfc => Ok(u64::from(self.u16(what)?)),
            0xfd => {
                let b = self.take(3, what)?;
                Ok(u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16)
            }
            0xfe => self.u64(what),
            _ => Err(ProtocolError::Malformed(what)),
        }
    }

    /// A length-encoded string; its length is checked against the payload.
    pub fn lenenc_bytes(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        let n = self.lenenc_int(what)?;
        let n = usize::try_from(n).map_err(|_| ProtocolError::Truncated(what))?;
        self.take(n, what)
    }

    /// A NUL-terminated string (without its NUL); a string that runs to the
    /// end of the payload without one is an error.
    pub fn nul_str(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        let rest = &self.bytes[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(ProtocolError::Truncated(what))?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }

    /// A NUL-terminated string, or the rest of the payload when it has no
    /// NUL (clients differ on the last field of some packets).
    pub fn nul_str_or_rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.pos..];
        match rest.iter().position(|&b| b == 0) {
            Some(n) => {
                self.pos += n + 1;
                &rest[..n]
            }
            None => self.rest(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that hands out its bytes in pieces of the given sizes.
    struct Chunks(Vec<Vec<u8>>);

    impl Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let c = &mut self.0[0];
            let n = c.len().min(buf.len());
            buf[..n].copy_from_slice(&c[..n]);
            c.drain(..n);
            if c.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    fn frame(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut w = PacketWriter::new();
        w.seq = seq;
        w.packet(payload);
        let mut out = Vec::new();
        w.flush(&mut out).unwrap();
        out
    }

    #[test]
    fn several_packets_in_one_read_are_all_returned_in_order() {
        let mut bytes = frame(0, &[0x19, 1, 0, 0, 0]);
        bytes.extend(frame(0, b"\x03SELECT 1"));
        bytes.extend(frame(0, b"\x0e"));
        let mut src = Chunks(vec![bytes]);
        let mut r = PacketReader::new();
        let mut out = Vec::new();
        r.read_message(&mut src, &mut out, 1 << 20).unwrap();
        assert_eq!(out, [0x19, 1, 0, 0, 0]);
        assert!(r.has_buffered());
        r.read_message(&mut src, &mut out, 1 << 20).unwrap();
        assert_eq!(out, b"\x03SELECT 1");
        r.read_message(&mut src, &mut out, 1 << 20).unwrap();
        assert_eq!(out, b"\x0e");
        assert!(matches!(
            r.read_message(&mut src, &mut out, 1 << 20),
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof
        ));
    }

    #[test]
    fn large_payloads_are_split_and_reassembled_within_the_limit() {
        let payload: Vec<u8> = (0..MAX_PACKET_PAYLOAD * 2 + 10).map(|i| i as u8).collect();
        let bytes = frame(3, &payload);
        assert_eq!(bytes.len(), payload.len() + 12);
        // One byte at a time for the headers' sake, then the rest.
        let mut src = Chunks(vec![bytes[..3].to_vec(), bytes[3..].to_vec()]);
        let mut r = PacketReader::new();
        let mut out = Vec::new();
        let seq = r.read_message(&mut src, &mut out, payload.len()).unwrap();
        assert_eq!(seq, 5);
        assert!(out == payload);
        // Exactly MAX_PACKET_PAYLOAD: an empty packet follows.
        let bytes = frame(0, &vec![7; MAX_PACKET_PAYLOAD]);
        assert_eq!(bytes.len(), MAX_PACKET_PAYLOAD + 8);
        let mut src = Chunks(vec![bytes.clone()]);
        r.read_message(&mut src, &mut out, 1 << 25).unwrap();
        assert_eq!(out.len(), MAX_PACKET_PAYLOAD);
        // Over the limit: refused at the header.
        let mut src = Chunks(vec![bytes[..4].to_vec()]);
        assert!(matches!(
            r.read_message(&mut src, &mut out, 1000),
            Err(ReadError::TooLarge)
        ));
    }

    #[test]
    fn lenenc_round_trip_and_bounds() {
        for n in [
            0u64,
            250,
            251,
            65535,
            65536,
            (1 << 24) - 1,
            1 << 24,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_lenenc_int(&mut b, n);
            assert_eq!(Reader::new(&b).lenenc_int("n").unwrap(), n);
        }
        assert!(Reader::new(&[0xfb]).lenenc_int("n").is_err());
        assert!(Reader::new(&[0xfc, 1]).lenenc_int("n").is_err());
        assert!(Reader::new(&[0x05, b'a']).lenenc_bytes("s").is_err());
        let huge = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(Reader::new(&huge).lenenc_bytes("s").is_err());
        assert!(Reader::new(b"abc").nul_str("s").is_err());
        assert_eq!(Reader::new(b"abc").nul_str_or_rest(), b"abc");
    }
}
