//! Virtual page -> physical frame numbers from `/proc/self/pagemap` (thesis 4.2.2: "Procfs
//! exports /proc/pagemap, which allows userspace applications to query ... a virtual page's
//! physical frame number").
//!
//! Each 8-byte entry: bit 63 present, bit 62 swapped, bits 0-54 the PFN. Since Linux 4.0 the
//! PFN reads as 0 without CAP_SYS_ADMIN: this reader then reports the frames as hidden rather
//! than returning zeros as if they were frames. Inside a VM the PFN is a guest-physical frame.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::Error;

const PFN_MASK: u64 = (1 << 55) - 1;
const PRESENT: u64 = 1 << 63;

/// The frames of `pages` consecutive pages of `page_size` bytes from `addr` (which must be
/// touched first so they are present). `Ok(None)` for an entry not present. Frames are in
/// 4 KiB units (the kernel's), also for huge pages (the head frame + offset).
pub fn frames(addr: usize, pages: usize, page_size: usize) -> Result<Vec<Option<u64>>, Error> {
    let f = File::open("/proc/self/pagemap")
        .map_err(|e| Error::Unsupported(format!("cannot open /proc/self/pagemap: {e}")))?;
    frames_from(&f, addr, pages, page_size)
}

fn frames_from(
    f: &File,
    addr: usize,
    pages: usize,
    page_size: usize,
) -> Result<Vec<Option<u64>>, Error> {
    let base_vpn = (addr / 4096) as u64;
    let step = (page_size / 4096).max(1) as u64;
    let mut out = Vec::with_capacity(pages);
    let mut buf = vec![0u8; 8];
    for i in 0..pages as u64 {
        let vpn = base_vpn + i * step;
        f.read_exact_at(&mut buf, vpn * 8)
            .map_err(|e| Error::Unsupported(format!("cannot read /proc/self/pagemap: {e}")))?;
        let e = u64::from_le_bytes(buf[..8].try_into().unwrap());
        out.push(if e & PRESENT != 0 {
            Some(e & PFN_MASK)
        } else {
            None
        });
    }
    Ok(out)
}

/// Frames with the "hidden" case made an error: every present page reading PFN 0 means the
/// kernel hides frame numbers from this process (not root / no CAP_SYS_ADMIN).
pub fn visible_frames(addr: usize, pages: usize, page_size: usize) -> Result<Vec<u64>, Error> {
    let fr = frames(addr, pages, page_size)?;
    let mut out = Vec::with_capacity(fr.len());
    for (i, f) in fr.iter().enumerate() {
        match f {
            None => {
                return Err(Error::Unsupported(format!(
                    "page {i} of the buffer is not present in /proc/self/pagemap (not touched or swapped out)"
                )))
            }
            Some(p) => out.push(*p),
        }
    }
    if !out.is_empty() && out.iter().all(|&p| p == 0) {
        return Err(Error::Unsupported(PFN_HIDDEN.to_string()));
    }
    Ok(out)
}

/// The message for a kernel that hides frame numbers.
pub const PFN_HIDDEN: &str = "physical frame numbers are hidden: /proc/self/pagemap reads PFN 0 \
     (Linux hides them without CAP_SYS_ADMIN; run as root)";

/// Whether this process can see frame numbers (touches one page to find out).
pub fn pfns_visible() -> bool {
    let mut v = vec![1u8; 4096 * 2];
    let p = v.as_mut_ptr() as usize;
    let a = (p + 4095) & !4095;
    // SAFETY: a is inside v, which is alive.
    unsafe { std::ptr::write_volatile(a as *mut u8, 2) };
    let r = visible_frames(a, 1, 4096).is_ok();
    drop(v);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_of_touched_pages_are_present() {
        let mut v = vec![0u8; 4096 * 9];
        let a = (v.as_mut_ptr() as usize + 4095) & !4095;
        for i in 0..8 {
            unsafe { std::ptr::write_volatile((a + i * 4096) as *mut u8, 1) };
        }
        let f = frames(a, 8, 4096).unwrap();
        assert!(f.iter().all(|x| x.is_some()));
        if pfns_visible() {
            let vf = visible_frames(a, 8, 4096).unwrap();
            assert!(vf.iter().all(|&p| p != 0));
        } else {
            assert!(visible_frames(a, 8, 4096)
                .unwrap_err()
                .to_string()
                .contains("hidden"));
        }
    }
}
