//! The log buffer: a ring of bytes that committing threads copy their
//! records into concurrently, each into the LSN range it reserved.

use std::cell::UnsafeCell;

pub struct LogBuffer {
    bytes: Box<[UnsafeCell<u8>]>,
    size: u64,
}

// SAFETY: threads only touch disjoint byte ranges. A range [start, end) is
// written only by the thread that reserved it, and only after the previous
// lap's bytes at those positions were written to the file (the reservation
// waits for `write_lsn`). It is read by the writer only after it is published
// in recent_written (release/acquire through the link buffer's atomics).
unsafe impl Sync for LogBuffer {}

impl LogBuffer {
    pub fn new(size: usize) -> Self {
        assert!(
            size.is_power_of_two(),
            "log buffer size must be a power of two"
        );
        Self {
            bytes: (0..size).map(|_| UnsafeCell::new(0)).collect(),
            size: size as u64,
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    fn ptr(&self, at: u64) -> *mut u8 {
        // A pointer derived from the whole slice (not from one element), so
        // it may address the bytes after `at` too; UnsafeCell permits writes
        // through a shared reference.
        let base = self.bytes.as_ptr() as *mut u8;
        // SAFETY: at % size < size = the slice's length.
        unsafe { base.add((at % self.size) as usize) }
    }

    /// Copies `src` to the ring at LSN `lsn`. The caller owns that range.
    pub fn copy_in(&self, lsn: u64, src: &[u8]) {
        assert!(src.len() as u64 <= self.size);
        let off = lsn % self.size;
        let first = (self.size - off).min(src.len() as u64) as usize;
        // SAFETY: in bounds (first <= size - off; the rest starts at 0 and is
        // shorter than size); the range is exclusively ours (see `Sync`).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr(lsn), first);
            std::ptr::copy_nonoverlapping(src[first..].as_ptr(), self.ptr(0), src.len() - first);
        }
    }

    /// Copies the ring's bytes at LSN `lsn` to `dst`. The range must be
    /// published and not yet reusable.
    pub fn copy_out(&self, lsn: u64, dst: &mut [u8]) {
        assert!(dst.len() as u64 <= self.size);
        let off = lsn % self.size;
        let first = (self.size - off).min(dst.len() as u64) as usize;
        let rest = dst.len() - first;
        // SAFETY: as in copy_in; nobody writes a published range.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr(lsn), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(self.ptr(0), dst[first..].as_mut_ptr(), rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_around() {
        let b = LogBuffer::new(16);
        b.copy_in(12, b"abcdefgh");
        let mut out = [0u8; 8];
        b.copy_out(28, &mut out);
        assert_eq!(&out, b"abcdefgh");
    }
}
