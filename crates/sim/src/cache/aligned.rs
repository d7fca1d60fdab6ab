/*!
Simulated-cache state laid out from a host cache-line boundary.

A 16-way set's tags are 128 bytes and its metadata 64: aligned, they are exactly two host lines
and one; at the 16-byte alignment the allocator gives, they straddle three and two. On a
simulated LLC whose state does not fit the host's caches every reference pays for each host
line it touches, so alignment alone removes a third of them (docs/PERFORMANCE.md).

Large buffers (at least `HUGE_PAGE` bytes) start on a 2 MiB boundary instead and ask Linux for
transparent huge pages (`madvise(MADV_HUGEPAGE)`, which works in THP's default `madvise`
mode): a simulated LLC's state touched at random spans thousands of 4 KiB pages, and in a VM
each host TLB miss is a two-dimensional page walk. Where the advice is refused the buffer
simply stays on small pages.

The buffer is a `Vec` over-allocated by one alignment unit, and the slice starts at the first
aligned element; the only `unsafe` is the `madvise` call. A clone re-derives the offset for its
own allocation.
*/
use std::ops::{Deref, DerefMut};

const HOST_LINE: usize = 64;
const HUGE_PAGE: usize = 2 << 20;

#[derive(Debug)]
pub struct Aligned<T> {
    buf: Vec<T>,
    start: usize,
    len: usize,
    pad: usize,
}

impl<T: Copy> Aligned<T> {
    /// `len` copies of `value`, then `pad` more that belong to no set (they let a fixed-width
    /// scan read past the last set without leaving the allocation).
    pub fn new(value: T, len: usize, pad: usize) -> Self {
        Self::try_new(value, len, pad).unwrap_or_else(|_| {
            panic!(
                "cannot allocate {} bytes",
                len.saturating_mul(std::mem::size_of::<T>())
            )
        })
    }

    /// [`Aligned::new`] that returns an error instead of aborting when the memory cannot be had
    /// (sizes that come from a config).
    pub fn try_new(
        value: T,
        len: usize,
        pad: usize,
    ) -> Result<Self, std::collections::TryReserveError> {
        let size = std::mem::size_of::<T>().max(1);
        let align = alignment(len + pad, size);
        let total = len + pad + align.div_ceil(size);
        let mut buf: Vec<T> = Vec::new();
        buf.try_reserve_exact(total)?;
        let start = aligned_start(buf.as_ptr(), align);
        if align == HUGE_PAGE {
            advise_huge_pages(
                buf.as_ptr().wrapping_add(start) as usize,
                (len + pad) * size,
            );
        }
        // Filled only after the advice, so the first touch of each 2 MiB range can be a huge page.
        buf.resize(total, value);
        Ok(Aligned {
            buf,
            start,
            len,
            pad,
        })
    }

    /// A read-only pointer to the first element whose provenance also covers the padding
    /// after the last one, which fixed-width scans may read.
    #[inline(always)]
    pub fn padded_ptr(&self) -> *const T {
        self.buf.as_ptr().wrapping_add(self.start)
    }

    /// A pointer to the first element whose provenance also covers the padding after the
    /// last one, which fixed-width scans may read.
    #[inline(always)]
    pub fn padded_mut_ptr(&mut self) -> *mut T {
        self.buf[self.start..self.start + self.len + self.pad].as_mut_ptr()
    }
}

/// Host-line alignment, or huge-page alignment for buffers that span at least one huge page.
fn alignment(elements: usize, size: usize) -> usize {
    if elements.saturating_mul(size) >= HUGE_PAGE {
        HUGE_PAGE
    } else {
        HOST_LINE
    }
}

/// Index of the first element of the allocation at `buf` at an `align`-byte boundary.
fn aligned_start<T>(buf: *const T, align: usize) -> usize {
    let size = std::mem::size_of::<T>().max(1);
    let misalign = buf as usize % align;
    let gap = (align - misalign) % align;
    if gap.is_multiple_of(size) {
        gap / size
    } else {
        0 // cannot align exactly (element size does not divide the gap): correctness is unaffected
    }
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(addr: usize, bytes: usize) {
    let page = 4096;
    let start = addr.next_multiple_of(page);
    let end = (addr + bytes) / page * page;
    if end > start {
        // SAFETY: the range lies inside an allocation this buffer owns; MADV_HUGEPAGE changes
        // only how the kernel backs it, never its contents. A refusal (THP disabled) is fine.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_addr: usize, _bytes: usize) {}

impl<T: Copy> Clone for Aligned<T> {
    fn clone(&self) -> Self {
        let size = std::mem::size_of::<T>().max(1);
        let mut buf = self.buf.clone();
        let start = aligned_start(buf.as_ptr(), alignment(self.len + self.pad, size));
        // The new allocation may sit at another offset from a host line: move the elements
        // and the padding after them to its aligned start.
        buf.copy_within(self.start..self.start + self.len + self.pad, start);
        Aligned {
            buf,
            start,
            len: self.len,
            pad: self.pad,
        }
    }
}

impl<T> Deref for Aligned<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        debug_assert!(self.start + self.len + self.pad <= self.buf.len());
        // SAFETY: `try_new` and `clone` make `buf` hold `start + len + pad` elements (and never
        // shrink it). Unchecked: every simulated cache lookup goes through here, and the
        // range check cost about 2% of a whole-system run's host instructions (callgrind,
        // docs/PERFORMANCE.md).
        unsafe { self.buf.get_unchecked(self.start..self.start + self.len) }
    }
}

impl<T> DerefMut for Aligned<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        debug_assert!(self.start + self.len + self.pad <= self.buf.len());
        // SAFETY: as `deref`.
        unsafe {
            self.buf
                .get_unchecked_mut(self.start..self.start + self.len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_host_line_and_clones_keep_contents() {
        for len in [1usize, 7, 100, 4096] {
            let mut a = Aligned::new(u64::MAX, len, 16);
            assert_eq!(a.as_ptr() as usize % HOST_LINE, 0);
            assert_eq!(a.len(), len);
            for (i, x) in a.iter_mut().enumerate() {
                *x = i as u64;
            }
            let b = a.clone();
            assert_eq!(b.as_ptr() as usize % HOST_LINE, 0);
            assert_eq!(&a[..], &b[..]);
        }
    }

    #[test]
    fn large_buffers_start_on_a_huge_page_boundary() {
        let mut a = Aligned::new(7u64, (3 << 20) / 8, 16);
        assert_eq!(a.as_ptr() as usize % HUGE_PAGE, 0);
        a[12345] = 1;
        let b = a.clone();
        assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(&a[..], &b[..]);
        assert!(b.iter().filter(|&&x| x == 7).count() == b.len() - 1);
        // The padding keeps the fill value through the clone's move to its own boundary.
        let mut b = b;
        let p = b.padded_mut_ptr();
        // SAFETY: the 16 padding elements follow the slice inside the allocation.
        assert_eq!(unsafe { *p.add(b.len() + 15) }, 7);
    }
}
