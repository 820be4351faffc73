//! Direct I/O alignment: the alignment `O_DIRECT` demands, the aligned
//! buffer that meets it, and the check both backends apply.

use std::alloc::{self, Layout};
use std::fmt;
use std::io;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The alignment `O_DIRECT` files demand of buffer addresses, lengths and offsets. 4096 rather
/// than the device's logical block size (often 512) because it satisfies both 512- and
/// 4096-byte devices and matches the page size, so callers need no per-device probing.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// A heap buffer whose address is aligned (for O_DIRECT). Deref/DerefMut to [u8]; zero-initialised; Send + Sync.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation, exactly like a Vec<u8>; shared access only
// hands out `&[u8]`, and mutation needs `&mut self`.
unsafe impl Send for AlignedBuf {}
// SAFETY: see above; `&AlignedBuf` only gives read access.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zero-filled buffer of `len` bytes whose address is a multiple of `align`.
    ///
    /// # Panics
    /// If `align` is not a power of two or `len` rounded up to `align` overflows `isize`:
    /// both are programming errors, like asking a `Vec` for an impossible capacity.
    pub fn zeroed(len: usize, align: usize) -> Self {
        assert!(
            align.is_power_of_two(),
            "AlignedBuf alignment must be a power of two, got {align}"
        );
        if len == 0 {
            // The allocator may not be asked for zero bytes; a dangling but aligned pointer is
            // what Vec uses too, and it is never dereferenced for a zero-length slice.
            let ptr = NonNull::new(align as *mut u8).expect("a power of two is non-zero");
            return Self { ptr, len, align };
        }
        let layout = Self::layout(len, align);
        // SAFETY: layout has a non-zero size (len > 0).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Self { ptr, len, align }
    }

    /// The alignment the buffer was created with (its address is a multiple of it).
    pub fn align(&self) -> usize {
        self.align
    }

    fn layout(len: usize, align: usize) -> Layout {
        Layout::from_size_align(len, align).unwrap_or_else(|e| {
            panic!("AlignedBuf of {len} bytes aligned to {align} is not allocatable: {e}")
        })
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout, and not freed before.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len, self.align)) }
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes (zeroed at allocation) for as long as
        // self lives, or dangling-but-aligned with len == 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut copy = Self::zeroed(self.len, self.align);
        copy.copy_from_slice(self);
        copy
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The contents are usually a 4 KiB page or more; printing them helps nobody.
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.align)
            .finish()
    }
}

/// Checks the `O_DIRECT` contract: buffer address, length and file offset all multiples of
/// `align`. Shared by the real backend (where the kernel would answer a bare EINVAL) and the
/// simulated one (which has no kernel to complain), so both fail the same clear way.
pub(crate) fn check_aligned(addr: usize, len: usize, offset: u64, align: usize) -> io::Result<()> {
    if align <= 1 {
        return Ok(());
    }
    // align is a power of two (AlignedBuf, DIRECT_IO_ALIGN, SimStorage all insist), so a
    // mask test is exact.
    let mask = align as u64 - 1;
    if (addr as u64 | len as u64 | offset) & mask == 0 {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "misaligned direct I/O: buffer address {addr:#x}, length {len}, offset {offset} \
                 must all be multiples of {align}"
            ),
        ))
    }
}
