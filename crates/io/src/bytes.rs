//! A bounded reader over bytes that came from disk or the network, for the
//! decoders above this crate (redo ops, undo records, rows, the catalog).
//! Every read checks the bounds first, so a decoder built on it turns short
//! or damaged input into an error, never a slice panic. It knows nothing of
//! what the bytes mean; integers are little-endian, as in every millrace
//! format.

use std::fmt;

/// Input ended before a read: `wanted` bytes at offset `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated {
    pub at: usize,
    pub wanted: usize,
}

impl fmt::Display for Truncated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "truncated: {} bytes wanted at byte {}",
            self.wanted, self.at
        )
    }
}

impl std::error::Error for Truncated {}

/// Decoders that report errors as text get `?` on reads for free.
impl From<Truncated> for String {
    fn from(t: Truncated) -> String {
        t.to_string()
    }
}

#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ByteReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        ByteReader { bytes, at: 0 }
    }

    /// The offset of the next read.
    pub fn position(&self) -> usize {
        self.at
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let truncated = Truncated {
            at: self.at,
            wanted: n,
        };
        let end = self.at.checked_add(n).ok_or(truncated)?;
        let s = self.bytes.get(self.at..end).ok_or(truncated)?;
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }

    pub fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, Truncated> {
        self.array().map(u16::from_le_bytes)
    }

    pub fn u32(&mut self) -> Result<u32, Truncated> {
        self.array().map(u32::from_le_bytes)
    }

    pub fn u64(&mut self) -> Result<u64, Truncated> {
        self.array().map(u64::from_le_bytes)
    }

    pub fn i128(&mut self) -> Result<i128, Truncated> {
        self.array().map(i128::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_stops_at_the_end() {
        let b = [1, 2, 0, 3, 0, 0, 0, 9];
        let mut r = ByteReader::new(&b);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(2));
        assert_eq!(r.u32(), Ok(3));
        assert_eq!(r.position(), 7);
        assert_eq!(r.u16(), Err(Truncated { at: 7, wanted: 2 }));
        assert_eq!(r.position(), 7, "a failed read consumes nothing");
        assert_eq!(
            r.take(usize::MAX),
            Err(Truncated {
                at: 7,
                wanted: usize::MAX
            })
        );
        assert_eq!(r.take(1), Ok(&[9][..]));
        assert!(r.is_empty());
        assert_eq!(r.u64(), Err(Truncated { at: 8, wanted: 8 }));
        let s: String = Truncated { at: 8, wanted: 8 }.into();
        assert!(s.contains("byte 8"), "{s}");
    }
}
