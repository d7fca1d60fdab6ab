//! Buffer allocators (thesis 4.2.2): the memory the chain lives in.
//!
//! - `naive`: one anonymous `mmap` of 4 KiB pages (what `malloc` does for a large buffer; THP is
//!   switched off for it with `MADV_NOHUGEPAGE` so it stays a 4 KiB-page buffer whatever the
//!   system's THP mode).
//! - `contiguous`: Algorithm 4.2.2, "cache-aware" allocation: a large pool, its frames read from
//!   `/proc/self/pagemap`, pages picked so that consecutive buffer pages cover consecutive bins
//!   (`PFN mod bins == current_cache_index`, the index advancing by one per page).
//! - `thp`: transparent huge pages (`madvise(MADV_HUGEPAGE)` on a 2 MiB-aligned region).
//! - `hugetlb`: `mmap(MAP_HUGETLB)` from the hugetlbfs pool; with `reserve` it raises
//!   `/proc/sys/vm/nr_hugepages` by what it lacks and restores the old value when the buffer is
//!   dropped (every exit path that unwinds: errors, Ctrl-C through the Python layer).
//! - `hugetlb-contiguous`: Algorithm 4.2.2 with PAGE_SIZE = the huge page size (thesis: "identical
//!   ... with the exception of a larger PAGE_SIZE variable").
//!
//! Every buffer reports the bin distribution it achieved (pages per bin of the target cache level,
//! when frame numbers are visible) next to the binomial model of thesis 3.2
//! (`cachecolor_sim::analysis::bins`).

use std::fmt;

use cachecolor_sim::analysis::bins::{expected_conflicts, realised_conflicts};
use serde::Serialize;

use crate::{pagemap, Error};

pub const SMALL_PAGE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferKind {
    Naive,
    Contiguous,
    Thp,
    Hugetlb,
    HugetlbContiguous,
}

impl BufferKind {
    pub const ALL: [BufferKind; 5] = [
        BufferKind::Naive,
        BufferKind::Contiguous,
        BufferKind::Thp,
        BufferKind::Hugetlb,
        BufferKind::HugetlbContiguous,
    ];
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Naive => "naive",
            BufferKind::Contiguous => "contiguous",
            BufferKind::Thp => "thp",
            BufferKind::Hugetlb => "hugetlb",
            BufferKind::HugetlbContiguous => "hugetlb-contiguous",
        }
    }
    pub fn parse(s: &str) -> Result<BufferKind, Error> {
        BufferKind::ALL.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
            Error::BadInput(format!(
                "buffer: unknown allocator {s:?}; allowed: naive, contiguous, thp, hugetlb, hugetlb-contiguous"
            ))
        })
    }
}

impl fmt::Display for BufferKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The cache level whose bins (colors) the allocator targets and reports on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinGeometry {
    pub cache_size: u64,
    pub ways: u64,
}

impl BinGeometry {
    /// Bins (page colors) for pages of `page_size`: C / (A P), at least 1 (eq. 5.1).
    pub fn bins(&self, page_size: usize) -> u64 {
        (self.cache_size / (self.ways * page_size as u64)).max(1)
    }
}

/// Options of an allocation.
#[derive(Debug, Clone, Copy)]
pub struct AllocOptions {
    /// hugetlb kinds: raise nr_hugepages by what is missing (and restore it on drop).
    pub reserve_hugepages: bool,
}

/// What the allocator achieved, against the binomial model.
#[derive(Debug, Clone, Serialize)]
pub struct BinReport {
    pub page_size: usize,
    pub bins: u64,
    pub ways: u64,
    pub pages: u64,
    /// Pages of the buffer in each bin (index = PFN mod bins); None when frames are hidden.
    pub pages_per_bin: Option<Vec<u64>>,
    /// Pages beyond the ways in each bin, summed (thesis eq. 3.2's K, realised).
    pub realised_conflicts: Option<u64>,
    /// The binomial model's expected K for uniformly random frames, its SD and the minimum.
    pub model_k_avg: f64,
    pub model_k_sd: f64,
    pub model_k_min: f64,
    /// Why pages_per_bin is missing, if it is.
    pub note: Option<String>,
}

/// An anonymous mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    fn anon(len: usize, extra_flags: libc::c_int) -> std::io::Result<Mapping> {
        // SAFETY: anonymous private mapping, no file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra_flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: p as *mut u8,
            len,
        })
    }
    fn addr(&self) -> usize {
        self.ptr as usize
    }
    fn advise(&self, off: usize, len: usize, advice: libc::c_int) -> std::io::Result<()> {
        // SAFETY: the range is inside the mapping.
        let r = unsafe { libc::madvise(self.ptr.add(off) as *mut libc::c_void, len, advice) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    /// Write one byte per `step` so every page is present.
    fn touch(&self, off: usize, len: usize, step: usize) {
        let mut o = off;
        while o < off + len {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile(self.ptr.add(o), 0) };
            o += step;
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from mmap.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// A raised `/proc/sys/vm/nr_hugepages`, put back to `old` on drop.
pub struct HugeReservation {
    old: u64,
    path: std::path::PathBuf,
}

impl HugeReservation {
    /// Raise the pool by `extra` pages; fails (restoring the old value) if the kernel gives fewer.
    pub fn grow(extra: u64) -> Result<HugeReservation, Error> {
        Self::grow_at(std::path::Path::new(NR_HUGEPAGES), extra)
    }
    fn grow_at(path: &std::path::Path, extra: u64) -> Result<HugeReservation, Error> {
        let old = read_u64(path)
            .ok_or_else(|| Error::Unsupported(format!("cannot read {}", path.display())))?;
        std::fs::write(path, format!("{}\n", old + extra)).map_err(|e| {
            Error::BadInput(format!(
                "hugetlb: cannot reserve {extra} huge pages by writing {}: {e} (needs root)",
                path.display()
            ))
        })?;
        let guard = HugeReservation {
            old,
            path: path.to_path_buf(),
        };
        let now = read_u64(path).unwrap_or(old);
        if now < old + extra {
            return Err(Error::BadInput(format!(
                "hugetlb: asked the kernel for {extra} more huge pages but it found only {} (memory too \
                 fragmented or too little free); nr_hugepages restored to {old}",
                now.saturating_sub(old)
            )));
        }
        Ok(guard)
    }
    pub fn old_value(&self) -> u64 {
        self.old
    }
}

impl Drop for HugeReservation {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, format!("{}\n", self.old));
    }
}

pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

fn read_u64(p: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// A field of /proc/meminfo in bytes (kB fields) or as a count (HugePages_*).
pub fn meminfo(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    for l in s.lines() {
        if let Some(rest) = l.strip_prefix(field).and_then(|r| r.strip_prefix(':')) {
            let mut it = rest.split_whitespace();
            let v: u64 = it.next()?.parse().ok()?;
            return Some(if it.next() == Some("kB") { v * 1024 } else { v });
        }
    }
    None
}

/// The default huge page size (Hugepagesize in /proc/meminfo), 2 MiB if not found.
pub fn huge_page_size() -> usize {
    meminfo("Hugepagesize").unwrap_or(2 << 20) as usize
}

/// The system's THP mode ("always", "madvise", "never") or None.
pub fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let a = s.find('[')?;
    let b = s[a..].find(']')?;
    Some(s[a + 1..a + b].to_string())
}

fn check_memory(bytes: u64, what: &str) -> Result<(), Error> {
    if let Some(avail) = meminfo("MemAvailable") {
        // Keep 256 MiB (or 1/16) for the rest of the system.
        let margin = (256u64 << 20).max(avail / 16);
        if bytes + margin > avail {
            return Err(Error::BadInput(format!(
                "{what} needs {} MiB but only {} MiB of memory is available (MemAvailable; {} MiB kept free)",
                bytes >> 20,
                avail >> 20,
                margin >> 20
            )));
        }
    }
    Ok(())
}

/// A buffer: the pages the chain may use, in chain order, inside one mapping.
pub struct Buffer {
    pub kind: BufferKind,
    // Field order matters: the mapping is unmapped before the reservation is released.
    map: Mapping,
    _reservation: Option<HugeReservation>,
    pages: Vec<usize>,
    page_size: usize,
    frames: Option<Vec<u64>>,
    frames_note: Option<String>,
    /// Bytes of the region backed by transparent huge pages (thp only; from /proc/self/smaps).
    pub thp_bytes: Option<u64>,
}

impl Buffer {
    /// Allocate `bytes` (rounded up to pages) of kind `kind`; `geom` is the level whose bins the
    /// cache-aware kinds cover.
    pub fn allocate(
        kind: BufferKind,
        bytes: u64,
        geom: BinGeometry,
        opts: AllocOptions,
    ) -> Result<Buffer, Error> {
        if bytes == 0 {
            return Err(Error::BadInput(
                "working set: must be at least one cache line".into(),
            ));
        }
        match kind {
            BufferKind::Naive => Self::naive(bytes),
            BufferKind::Contiguous => Self::contiguous(bytes, geom, SMALL_PAGE, None),
            BufferKind::Thp => Self::thp(bytes),
            BufferKind::Hugetlb | BufferKind::HugetlbContiguous => {
                let hp = huge_page_size();
                let need = bytes.div_ceil(hp as u64);
                // hugetlb-contiguous takes a pool to choose from: twice the pages plus two per bin.
                let pool = if kind == BufferKind::Hugetlb {
                    need
                } else {
                    2 * need + 2 * geom.bins(hp)
                };
                let res = hugetlb_pages(pool, hp, opts.reserve_hugepages)?;
                if kind == BufferKind::Hugetlb {
                    Self::hugetlb(bytes, hp, res)
                } else {
                    Self::contiguous(bytes, geom, hp, Some((pool, res)))
                }
            }
        }
    }

    fn naive(bytes: u64) -> Result<Buffer, Error> {
        let n = bytes.div_ceil(SMALL_PAGE as u64) as usize;
        let len = n * SMALL_PAGE;
        check_memory(len as u64, "the naive buffer")?;
        let map = Mapping::anon(len, 0).map_err(|e| {
            Error::BadInput(format!("naive buffer: mmap of {len} bytes failed: {e}"))
        })?;
        let _ = map.advise(0, len, libc::MADV_NOHUGEPAGE);
        map.touch(0, len, SMALL_PAGE);
        let pages = (0..n).map(|i| map.addr() + i * SMALL_PAGE).collect();
        let mut b = Buffer {
            kind: BufferKind::Naive,
            map,
            _reservation: None,
            pages,
            page_size: SMALL_PAGE,
            frames: None,
            frames_note: None,
            thp_bytes: None,
        };
        b.read_frames();
        Ok(b)
    }

    fn thp(bytes: u64) -> Result<Buffer, Error> {
        match thp_mode().as_deref() {
            Some("never") => {
                return Err(Error::Unsupported(
                    "thp: transparent huge pages are disabled (/sys/kernel/mm/transparent_hugepage/enabled is \
                     'never'); use --buffer hugetlb or enable THP (echo madvise > .../enabled)"
                        .into(),
                ))
            }
            None => return Err(Error::Unsupported("thp: this kernel has no transparent huge pages".into())),
            _ => {}
        }
        let hp = huge_page_size();
        let n = bytes.div_ceil(hp as u64) as usize;
        let len = n * hp;
        check_memory((len + hp) as u64, "the THP buffer")?;
        let map = Mapping::anon(len + hp, 0)
            .map_err(|e| Error::BadInput(format!("thp buffer: mmap failed: {e}")))?;
        let off = (hp - map.addr() % hp) % hp;
        map.advise(off, len, libc::MADV_HUGEPAGE)
            .map_err(|e| Error::Unsupported(format!("thp: madvise(MADV_HUGEPAGE) failed: {e}")))?;
        map.touch(off, len, SMALL_PAGE);
        let pages: Vec<usize> = (0..n).map(|i| map.addr() + off + i * hp).collect();
        let thp_bytes = smaps_anon_huge(map.addr());
        let mut b = Buffer {
            kind: BufferKind::Thp,
            map,
            _reservation: None,
            pages,
            page_size: hp,
            frames: None,
            frames_note: None,
            thp_bytes,
        };
        b.read_frames();
        Ok(b)
    }

    fn hugetlb(bytes: u64, hp: usize, res: Option<HugeReservation>) -> Result<Buffer, Error> {
        let n = bytes.div_ceil(hp as u64) as usize;
        let map = huge_map(n, hp)?;
        map.touch(0, n * hp, hp);
        let pages = (0..n).map(|i| map.addr() + i * hp).collect();
        let mut b = Buffer {
            kind: BufferKind::Hugetlb,
            map,
            _reservation: res,
            pages,
            page_size: hp,
            frames: None,
            frames_note: None,
            thp_bytes: None,
        };
        b.read_frames();
        Ok(b)
    }

    /// Algorithm 4.2.2 over a pool of pages of `page_size` (4 KiB: an anonymous pool; huge: a
    /// hugetlb pool of `huge.0` pages).
    fn contiguous(
        bytes: u64,
        geom: BinGeometry,
        page_size: usize,
        huge: Option<(u64, Option<HugeReservation>)>,
    ) -> Result<Buffer, Error> {
        let need = bytes.div_ceil(page_size as u64) as usize;
        let bins = geom.bins(page_size) as usize;
        let small = huge.is_none();
        let (map, pool, res, kind) = match huge {
            None => {
                // The thesis takes ~512 MB; a pool of twice the buffer plus 16 pages per bin
                // covers every bin with a large margin for a buddy allocator's frames.
                let pool = 2 * need + 16 * bins;
                let len = pool * page_size;
                check_memory(len as u64, "the contiguous allocator's pool")?;
                let map = Mapping::anon(len, 0).map_err(|e| {
                    Error::BadInput(format!("contiguous pool: mmap of {len} bytes failed: {e}"))
                })?;
                let _ = map.advise(0, len, libc::MADV_NOHUGEPAGE);
                map.touch(0, len, page_size);
                (map, pool, None, BufferKind::Contiguous)
            }
            Some((pool, res)) => {
                let map = huge_map(pool as usize, page_size)?;
                map.touch(0, pool as usize * page_size, page_size);
                (map, pool as usize, res, BufferKind::HugetlbContiguous)
            }
        };
        let frames = pagemap::visible_frames(map.addr(), pool, page_size).map_err(|e| {
            Error::Unsupported(format!("{kind}: Algorithm 4.2.2 needs frame numbers: {e}"))
        })?;
        let picked = pick_cache_contiguous(&frames, page_size, bins).ok_or_else(|| {
            Error::Unsupported(format!(
                "{kind}: the pool of {pool} pages does not hold enough pages of every color to cover {need} pages \
                 over {bins} bins (memory too fragmented)"
            ))
        })?;
        let chosen: Vec<usize> = picked.into_iter().take(need).collect();
        if chosen.len() < need {
            return Err(Error::Unsupported(format!(
                "{kind}: found only {} of {need} cache-contiguous pages in a pool of {pool}",
                chosen.len()
            )));
        }
        let mut used = vec![false; pool];
        for &i in &chosen {
            used[i] = true;
        }
        // Return the unused part of the pool (4 KiB pools; hugetlb pages stay in the pool).
        if small {
            let mut i = 0;
            while i < pool {
                if used[i] {
                    i += 1;
                    continue;
                }
                let j = (i..pool).find(|&j| used[j]).unwrap_or(pool);
                let _ = map.advise(i * page_size, (j - i) * page_size, libc::MADV_DONTNEED);
                i = j;
            }
        }
        let pages = chosen.iter().map(|&i| map.addr() + i * page_size).collect();
        let fr = chosen.iter().map(|&i| frames[i]).collect();
        Ok(Buffer {
            kind,
            map,
            _reservation: res,
            pages,
            page_size,
            frames: Some(fr),
            frames_note: None,
            thp_bytes: None,
        })
    }

    fn read_frames(&mut self) {
        let mut fr = Vec::with_capacity(self.pages.len());
        for &p in &self.pages {
            match pagemap::visible_frames(p, 1, self.page_size) {
                Ok(v) => fr.push(v[0]),
                Err(e) => {
                    self.frames_note = Some(e.to_string());
                    return;
                }
            }
        }
        self.frames = Some(fr);
    }

    /// Base address: every chain index is an offset (in 4-byte slots) from it.
    pub fn base(&self) -> *mut u8 {
        self.map.ptr
    }
    pub fn span(&self) -> usize {
        self.map.len
    }
    /// The pages the buffer uses, in the order the chain's logical pages map to.
    pub fn pages(&self) -> &[usize] {
        &self.pages
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }
    pub fn bytes(&self) -> usize {
        self.pages.len() * self.page_size
    }
    /// Frames (4 KiB units) of the pages, when visible.
    pub fn frames(&self) -> Option<&[u64]> {
        self.frames.as_deref()
    }

    /// Pages per bin of `geom` (None when frames are hidden).
    pub fn pages_per_bin(&self, geom: BinGeometry) -> Option<Vec<u64>> {
        let bins = geom.bins(self.page_size);
        self.frames.as_ref().map(|fr| {
            let mut h = vec![0u64; bins as usize];
            for &f in fr {
                h[color_of(f, self.page_size, bins) as usize] += 1;
            }
            h
        })
    }

    /// The realised conflicts K for `geom` (cheap; None when frames are hidden).
    pub fn realised_conflicts(&self, geom: BinGeometry) -> Option<u64> {
        self.pages_per_bin(geom)
            .map(|h| realised_conflicts(&h, geom.ways))
    }

    /// The bin distribution achieved for `geom` and the binomial model's expectation (the
    /// model's exact SD is O(pages²): call it once per working set, not per trial).
    pub fn bin_report(&self, geom: BinGeometry) -> BinReport {
        let bins = geom.bins(self.page_size);
        let pages = self.pages.len() as u64;
        let model = expected_conflicts(pages, bins, geom.ways);
        let per_bin = self.pages_per_bin(geom);
        BinReport {
            page_size: self.page_size,
            bins,
            ways: geom.ways,
            pages,
            realised_conflicts: per_bin.as_ref().map(|h| realised_conflicts(h, geom.ways)),
            pages_per_bin: per_bin,
            model_k_avg: model.k_avg,
            model_k_sd: model.k_sd,
            model_k_min: model.k_min,
            note: self.frames_note.clone(),
        }
    }
}

/// The bin (color) of a frame (4 KiB units) for pages of `page_size`.
pub fn color_of(frame: u64, page_size: usize, bins: u64) -> u64 {
    (frame / (page_size / SMALL_PAGE).max(1) as u64) % bins
}

/// Algorithm 4.2.2's matching: pool indices in buffer order such that buffer page k has color
/// (k mod bins), taking for each color the pool's pages in address order. None if a color runs
/// out before every pool page of the other colors could be used (the caller truncates).
pub fn pick_cache_contiguous(frames: &[u64], page_size: usize, bins: usize) -> Option<Vec<usize>> {
    let mut by_color: Vec<std::collections::VecDeque<usize>> = vec![Default::default(); bins];
    for (i, &f) in frames.iter().enumerate() {
        by_color[color_of(f, page_size, bins as u64) as usize].push_back(i);
    }
    let mut out = Vec::with_capacity(frames.len());
    let mut idx = 0;
    while let Some(i) = by_color[idx].pop_front() {
        out.push(i);
        idx = (idx + 1) % bins;
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

fn huge_map(n: usize, hp: usize) -> Result<Mapping, Error> {
    let len = n * hp;
    Mapping::anon(len, libc::MAP_HUGETLB).map_err(|e| {
        Error::BadInput(format!(
            "hugetlb: mmap(MAP_HUGETLB) of {n} huge pages of {} KiB failed: {e}; free huge pages: {} \
             (reserve with --reserve-hugepages as root, or echo N > {NR_HUGEPAGES})",
            hp >> 10,
            meminfo("HugePages_Free").unwrap_or(0)
        ))
    })
}

/// Make sure `n` huge pages are free: Ok(None) if they are, a reservation if `reserve` and it
/// worked, else a clear error.
fn hugetlb_pages(n: u64, hp: usize, reserve: bool) -> Result<Option<HugeReservation>, Error> {
    let free = meminfo("HugePages_Free").unwrap_or(0);
    if free >= n {
        return Ok(None);
    }
    if !reserve {
        return Err(Error::BadInput(format!(
            "hugetlb: the buffer needs {n} huge pages of {} KiB but hugetlbfs has {free} free \
             (nr_hugepages = {}); reserve them (as root: echo {} > {NR_HUGEPAGES}) or pass --reserve-hugepages",
            hp >> 10,
            read_u64(std::path::Path::new(NR_HUGEPAGES)).unwrap_or(0),
            read_u64(std::path::Path::new(NR_HUGEPAGES)).unwrap_or(0) + n - free
        )));
    }
    check_memory((n - free) * hp as u64, "the huge page reservation")?;
    HugeReservation::grow(n - free).map(Some)
}

/// AnonHugePages of the mapping starting at `start` (from /proc/self/smaps).
pub fn smaps_anon_huge(start: usize) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for l in s.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if !first.ends_with(':') {
            // A mapping header: "start-end perms offset dev inode [path]".
            inside = first
                .split_once('-')
                .and_then(|(a, _)| usize::from_str_radix(a, 16).ok())
                .is_some_and(|a| a == start);
            continue;
        }
        if inside {
            if let Some(v) = l.strip_prefix("AnonHugePages:") {
                return v
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
                    .map(|k| k * 1024);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const L2: BinGeometry = BinGeometry {
        cache_size: 512 << 10,
        ways: 8,
    };

    #[test]
    fn bins_follow_eq_5_1() {
        assert_eq!(L2.bins(4096), 16);
        assert_eq!(
            BinGeometry {
                cache_size: 32 << 10,
                ways: 8
            }
            .bins(4096),
            1
        );
        assert_eq!(
            BinGeometry {
                cache_size: 32 << 20,
                ways: 16
            }
            .bins(4096),
            512
        );
        assert_eq!(
            BinGeometry {
                cache_size: 32 << 20,
                ways: 16
            }
            .bins(2 << 20),
            1
        );
    }

    #[test]
    fn matching_covers_consecutive_bins() {
        // Frames in a scrambled order: colors 0..16 appear in any order in the pool.
        let frames: Vec<u64> = (0..200u64).map(|i| (i * 7919) % 1000 + 5000).collect();
        let picked = pick_cache_contiguous(&frames, 4096, 16).unwrap();
        for (k, &i) in picked.iter().enumerate() {
            assert_eq!(frames[i] % 16, k as u64 % 16, "page {k}");
        }
        // Each pool page at most once.
        let mut s = picked.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), picked.len());
    }

    #[test]
    fn naive_buffer_reports_model_and_touches_pages() {
        let b = Buffer::allocate(
            BufferKind::Naive,
            1 << 20,
            L2,
            AllocOptions {
                reserve_hugepages: false,
            },
        )
        .unwrap();
        assert_eq!(b.pages().len(), 256);
        let r = b.bin_report(L2);
        assert_eq!(r.bins, 16);
        assert!(r.model_k_avg >= r.model_k_min);
        if pagemap::pfns_visible() {
            let h = r.pages_per_bin.unwrap();
            assert_eq!(h.iter().sum::<u64>(), 256);
        } else {
            assert!(r.note.unwrap().contains("hidden"));
        }
    }

    #[test]
    fn contiguous_buffer_has_its_promised_bin_distribution() {
        if !pagemap::pfns_visible() {
            let e = Buffer::allocate(
                BufferKind::Contiguous,
                1 << 20,
                L2,
                AllocOptions {
                    reserve_hugepages: false,
                },
            )
            .err()
            .unwrap();
            assert!(e.to_string().contains("hidden"), "{e}");
            return;
        }
        // 1 MiB = 256 pages over 16 bins: exactly 16 per bin, pages in color order.
        let b = Buffer::allocate(
            BufferKind::Contiguous,
            1 << 20,
            L2,
            AllocOptions {
                reserve_hugepages: false,
            },
        )
        .unwrap();
        let fr = b.frames().unwrap();
        for (k, f) in fr.iter().enumerate() {
            assert_eq!(f % 16, k as u64 % 16);
        }
        let r = b.bin_report(L2);
        assert_eq!(r.pages_per_bin.unwrap(), vec![16; 16]);
        assert_eq!(r.realised_conflicts, Some(256 - 16 * 8));
        assert_eq!(r.realised_conflicts.unwrap() as f64, r.model_k_min);
        // A 3-page buffer: 3 distinct bins, no conflicts.
        let b = Buffer::allocate(
            BufferKind::Contiguous,
            3 * 4096,
            L2,
            AllocOptions {
                reserve_hugepages: false,
            },
        )
        .unwrap();
        assert_eq!(b.bin_report(L2).realised_conflicts, Some(0));
    }

    #[test]
    fn huge_reservation_restores_the_old_value() {
        let d = std::env::temp_dir().join(format!("cc-nrhp-{}", std::process::id()));
        std::fs::write(&d, "3\n").unwrap();
        {
            let g = HugeReservation::grow_at(&d, 5).unwrap();
            assert_eq!(g.old_value(), 3);
            assert_eq!(read_u64(&d), Some(8));
        }
        assert_eq!(read_u64(&d), Some(3));
        std::fs::remove_file(&d).unwrap();
    }

    #[test]
    fn too_large_working_set_is_a_clear_error() {
        let e = Buffer::allocate(
            BufferKind::Naive,
            1 << 50,
            L2,
            AllocOptions {
                reserve_hugepages: false,
            },
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("available"), "{e}");
    }

    #[test]
    fn parse_names() {
        for k in BufferKind::ALL {
            assert_eq!(BufferKind::parse(k.name()).unwrap(), k);
        }
        assert!(BufferKind::parse("malloc")
            .unwrap_err()
            .to_string()
            .contains("allowed"));
    }
}
