/*!
Cache and page geometry: how a physical address picks a cache set, and what a page *color*
(a *bin* in Kessler and Hill's terms, thesis section 3.2) is.

Contract:
- `sets = size / (ways * line)` for any positive integer count. Real caches with non-power-of-two
  set counts exist (a 48 KiB 12-way L1 has 64 sets, but LLC slices of 1.5 or 2.5 MiB do not);
  DineroIV and cachegrind cannot model those, cachecolor can. Powers of two take a mask fast path,
  others a strength-reduced modulo; both give `set = line mod sets` within a slice.
- Colors (COLORIS section 2): `colors = size / (ways * page)`, at least 1. The color of a frame is
  `pfn mod colors`: the set-index bits above the page offset. With slices, each slice is colored
  as a cache of its own (COLORIS section 2, "Limitations"), so colors are per slice.
- Slices: `slices` equal parts; the slice of a line is chosen either by `modulo` (consecutive
  `sets_per_slice`-line chunks go to consecutive slices) or by an XOR hash, where slice bit k is
  the parity of `addr & mask[k]` (the shape of Intel's complex addressing). The global set number
  is `slice * sets_per_slice + (line mod sets_per_slice)`.
*/
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use strength_reduce::StrengthReducedU64;

/// How the slice of a sliced cache is chosen from a physical address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum SliceHash {
    /// `slice = (line / sets_per_slice) mod slices`.
    #[default]
    Modulo,
    /// Slice bit k = parity(addr & masks[k]); `slices` must equal `2^masks.len()`.
    Xor { masks: Vec<u64> },
}

#[derive(Debug, Clone, Copy)]
enum SetIndex {
    /// `sets_per_slice` is a power of two: `line & mask`.
    Mask(u64),
    /// Any other count.
    Modulo(StrengthReducedU64),
}

/// Validated geometry of one cache (or one level's instance).
#[derive(Debug, Clone)]
pub struct CacheGeometry {
    size: u64,
    ways: u32,
    line_size: u32,
    line_shift: u32,
    page_size: u64,
    sets: u64,
    slices: u32,
    sets_per_slice: u64,
    slice_hash: SliceHash,
    index: SetIndex,
    slice_div: StrengthReducedU64,
}

fn is_pow2(x: u64) -> bool {
    x != 0 && x & (x - 1) == 0
}

impl CacheGeometry {
    /// An unsliced cache.
    pub fn new(size: u64, ways: u32, line_size: u32, page_size: u64) -> Result<Self, ConfigError> {
        Self::sliced(size, ways, line_size, page_size, 1, SliceHash::Modulo)
    }

    /// A cache split into `slices` equal slices selected by `slice_hash`.
    pub fn sliced(
        size: u64,
        ways: u32,
        line_size: u32,
        page_size: u64,
        slices: u32,
        slice_hash: SliceHash,
    ) -> Result<Self, ConfigError> {
        if line_size == 0 || !is_pow2(line_size as u64) {
            return Err(ConfigError::new(
                "line_size",
                format!(
                    "{line_size} is not allowed: the line size must be a power of two (e.g. 64)"
                ),
            ));
        }
        if page_size == 0 || !is_pow2(page_size) {
            return Err(ConfigError::new(
                "page_size",
                format!(
                    "{page_size} is not allowed: the page size must be a power of two (e.g. 4096)"
                ),
            ));
        }
        if line_size as u64 > page_size {
            return Err(ConfigError::new(
                "line_size",
                format!("a line of {line_size} B is larger than a page of {page_size} B; lines must fit in a page"),
            ));
        }
        if ways == 0 {
            return Err(ConfigError::new("ways", "must be at least 1"));
        }
        if size == 0 {
            return Err(ConfigError::new("size", "must be positive"));
        }
        if slices == 0 {
            return Err(ConfigError::new("slices", "must be at least 1"));
        }
        let way_bytes = ways as u64 * line_size as u64;
        if !size.is_multiple_of(way_bytes) {
            return Err(ConfigError::new(
                "size",
                format!(
                    "{size} B is not a multiple of ways x line size = {ways} x {line_size} = {way_bytes} B, so the sets would not be whole"
                ),
            ));
        }
        let sets = size / way_bytes;
        if !sets.is_multiple_of(slices as u64) {
            return Err(ConfigError::new(
                "slices",
                format!("{sets} sets cannot be split evenly into {slices} slices"),
            ));
        }
        if let SliceHash::Xor { masks } = &slice_hash {
            if masks.len() >= 32 || (1u64 << masks.len()) != slices as u64 {
                return Err(ConfigError::new(
                    "slice_hash.masks",
                    format!(
                        "{} masks select 2^{} slices but the cache has {slices}; give log2(slices) masks",
                        masks.len(),
                        masks.len()
                    ),
                ));
            }
        }
        let sets_per_slice = sets / slices as u64;
        let index = if is_pow2(sets_per_slice) {
            SetIndex::Mask(sets_per_slice - 1)
        } else {
            SetIndex::Modulo(StrengthReducedU64::new(sets_per_slice))
        };
        Ok(CacheGeometry {
            size,
            ways,
            line_size,
            line_shift: line_size.trailing_zeros(),
            page_size,
            sets,
            slices,
            sets_per_slice,
            slice_hash,
            index,
            slice_div: StrengthReducedU64::new(sets_per_slice),
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn ways(&self) -> u32 {
        self.ways
    }
    pub fn line_size(&self) -> u32 {
        self.line_size
    }
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }
    pub fn page_size(&self) -> u64 {
        self.page_size
    }
    /// Total sets over all slices.
    pub fn sets(&self) -> u64 {
        self.sets
    }
    pub fn slices(&self) -> u32 {
        self.slices
    }
    pub fn sets_per_slice(&self) -> u64 {
        self.sets_per_slice
    }
    pub fn slice_hash(&self) -> &SliceHash {
        &self.slice_hash
    }
    /// True when the set index is a plain mask of the line number (power-of-two sets, one slice).
    pub fn is_pow2(&self) -> bool {
        matches!(self.index, SetIndex::Mask(_)) && self.slices == 1
    }

    /// Line number of a byte address.
    #[inline]
    pub fn line_of(&self, addr: u64) -> u64 {
        addr >> self.line_shift
    }

    /// Slice that holds a line.
    #[inline]
    pub fn slice_of_line(&self, line: u64) -> u64 {
        if self.slices == 1 {
            return 0;
        }
        match &self.slice_hash {
            SliceHash::Modulo => (line / self.slice_div) % self.slices as u64,
            SliceHash::Xor { masks } => {
                let addr = line << self.line_shift;
                let mut s = 0u64;
                for (k, m) in masks.iter().enumerate() {
                    s |= (((addr & m).count_ones() & 1) as u64) << k;
                }
                s
            }
        }
    }

    /// Global set number (0..sets) of a line.
    #[inline]
    pub fn set_of_line(&self, line: u64) -> u64 {
        let within = match self.index {
            SetIndex::Mask(m) => line & m,
            SetIndex::Modulo(d) => line % d,
        };
        if self.slices == 1 {
            within
        } else {
            self.slice_of_line(line) * self.sets_per_slice + within
        }
    }

    /// Global set number of a byte address.
    #[inline]
    pub fn set_of(&self, addr: u64) -> u64 {
        self.set_of_line(self.line_of(addr))
    }

    /// Lines per page.
    pub fn lines_per_page(&self) -> u64 {
        self.page_size >> self.line_shift
    }

    /// Page colors per slice: `size / (ways * page)` per slice, at least 1 (COLORIS eq. 1).
    pub fn colors(&self) -> u64 {
        (self.sets_per_slice / self.lines_per_page()).max(1)
    }

    /// Color (bin) of a physical frame: the set-index bits above the page offset.
    #[inline]
    pub fn color_of_frame(&self, pfn: u64) -> u64 {
        pfn % self.colors()
    }

    /// Color of a physical address.
    #[inline]
    pub fn color_of_addr(&self, paddr: u64) -> u64 {
        self.color_of_frame(paddr / self.page_size)
    }

    /// Frames of one color that fit in a slice without conflict (its associativity in pages).
    pub fn frames_per_color(&self) -> u64 {
        self.ways as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colors_follow_coloris_equation() {
        // COLORIS section 2: colors = size / (ways * page).
        let g = CacheGeometry::new(8 << 20, 16, 64, 4096).unwrap();
        assert_eq!(g.colors(), 128);
        let l1 = CacheGeometry::new(32 << 10, 8, 64, 4096).unwrap();
        assert_eq!(l1.colors(), 1, "a VIPT-sized L1 has one color");
        assert_eq!(g.color_of_frame(129), 1);
        assert_eq!(g.color_of_addr(129 * 4096 + 100), 1);
    }

    #[test]
    fn non_power_of_two_sets_index_by_modulo() {
        // 48 KiB 12-way: 64 sets (power of two); 1.5 MiB 12-way: 2048 sets; 2.5 MiB 20-way: 2048;
        // 3 MiB 16-way: 3072 sets (not a power of two).
        let g = CacheGeometry::new(3 << 20, 16, 64, 4096).unwrap();
        assert_eq!(g.sets(), 3072);
        assert!(!g.is_pow2());
        for line in [0u64, 1, 3071, 3072, 3073, 1 << 40, u64::MAX >> 6] {
            assert_eq!(g.set_of_line(line), line % 3072);
        }
        let p = CacheGeometry::new(48 << 10, 12, 64, 4096).unwrap();
        assert!(p.is_pow2());
        assert_eq!(p.set_of(0x1234_5678), (0x1234_5678u64 >> 6) % 64);
    }

    #[test]
    fn slices_are_colored_separately() {
        let g = CacheGeometry::sliced(8 << 20, 16, 64, 4096, 4, SliceHash::Modulo).unwrap();
        assert_eq!(g.sets_per_slice(), 2048);
        assert_eq!(g.colors(), 32);
        assert_eq!(g.set_of_line(2048), 2048);
        assert_eq!(g.set_of_line(2048 * 4), 0);
        let x = CacheGeometry::sliced(
            8 << 20,
            16,
            64,
            4096,
            2,
            SliceHash::Xor {
                masks: vec![1 << 17 | 1 << 20],
            },
        )
        .unwrap();
        assert_eq!(x.slice_of_line(0), 0);
        assert_eq!(x.slice_of_line((1 << 17) >> 6), 1);
        assert_eq!(x.slice_of_line(((1 << 17) | (1 << 20)) >> 6), 0);
        for line in 0..10_000u64 {
            assert!(x.set_of_line(line) < x.sets());
        }
    }

    #[test]
    fn impossible_geometries_are_rejected_with_the_field() {
        let cases = [
            (CacheGeometry::new(32 << 10, 0, 64, 4096), "ways"),
            (CacheGeometry::new(32 << 10, 8, 48, 4096), "line_size"),
            (CacheGeometry::new(32 << 10, 8, 8192, 4096), "line_size"),
            (CacheGeometry::new(1000, 8, 64, 4096), "size"),
            (CacheGeometry::new(0, 8, 64, 4096), "size"),
            (CacheGeometry::new(32 << 10, 8, 64, 3000), "page_size"),
            (
                CacheGeometry::sliced(32 << 10, 8, 64, 4096, 3, SliceHash::Modulo),
                "slices",
            ),
            (
                CacheGeometry::sliced(32 << 10, 8, 64, 4096, 4, SliceHash::Xor { masks: vec![1] }),
                "slice_hash.masks",
            ),
        ];
        for (r, field) in cases {
            let e = r.unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(!e.message.is_empty());
        }
    }
}
