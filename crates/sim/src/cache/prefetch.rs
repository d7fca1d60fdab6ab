/*!
Hardware prefetchers attached to a cache level. They observe that level's demand misses and
first hits on lines they prefetched (tagged prefetching, Smith 1982: without it a stream
detector loses the stream as soon as its prefetches start to hit) and propose lines to bring in; the hierarchy fetches them (counted as prefetch traffic, never as
demand accesses) and marks them prefetched, so a later demand hit counts as a useful prefetch.
They can be switched off and on while a simulation runs: ROCS (section 4) turns the prefetcher
off while it profiles, because prefetch-induced fills blur the per-page miss counts.

- `next-line`: on a trigger at line L, prefetch L+1 .. L+degree.
- `stride`: a single-stream detector over the level's trigger stream (no PC is available in a
  memory trace): when two successive triggers are `s` lines apart, and the previous pair was
  too, prefetch L+s .. L+degree*s.
*/
crate::registry! {
    /// The prefetchers a cache level can have (config key `prefetcher`): the registry
    /// (`crate::registry`), one line per prefetcher.
    #[derive(Default)]
    pub enum PrefetcherKind (field = "prefetcher", what = "prefetcher", plural = "prefetchers") {
        #[default]
        None = "none",
        NextLine = "next-line",
        Stride = "stride",
    }
}

/// At most this many lines per trigger.
pub const MAX_DEGREE: u32 = 16;

#[derive(Debug, Clone)]
pub struct Prefetcher {
    kind: PrefetcherKind,
    degree: u32,
    last_line: u64,
    last_stride: i64,
}

impl Prefetcher {
    pub fn new(kind: PrefetcherKind, degree: u32) -> Self {
        Prefetcher {
            kind,
            degree: degree.clamp(1, MAX_DEGREE),
            last_line: u64::MAX,
            last_stride: 0,
        }
    }

    pub fn kind(&self) -> PrefetcherKind {
        self.kind
    }

    /// Lines to prefetch after a demand miss to `line`, written into `out`; returns how many.
    #[inline]
    pub fn on_miss(&mut self, line: u64, out: &mut [u64; MAX_DEGREE as usize]) -> usize {
        match self.kind {
            PrefetcherKind::None => 0,
            PrefetcherKind::NextLine => {
                for (i, o) in out.iter_mut().take(self.degree as usize).enumerate() {
                    *o = line.wrapping_add(i as u64 + 1);
                }
                self.degree as usize
            }
            PrefetcherKind::Stride => {
                let stride = if self.last_line == u64::MAX {
                    0
                } else {
                    line.wrapping_sub(self.last_line) as i64
                };
                let confirmed = stride != 0 && stride == self.last_stride;
                self.last_stride = stride;
                self.last_line = line;
                if !confirmed {
                    return 0;
                }
                for (i, o) in out.iter_mut().take(self.degree as usize).enumerate() {
                    *o = line.wrapping_add((stride * (i as i64 + 1)) as u64);
                }
                self.degree as usize
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stride_needs_two_equal_strides() {
        let mut p = Prefetcher::new(PrefetcherKind::Stride, 2);
        let mut out = [0; MAX_DEGREE as usize];
        assert_eq!(p.on_miss(100, &mut out), 0);
        assert_eq!(p.on_miss(104, &mut out), 0);
        assert_eq!(p.on_miss(108, &mut out), 2);
        assert_eq!(&out[..2], &[112, 116]);
        assert_eq!(p.on_miss(50, &mut out), 0);
    }

    #[test]
    fn next_line_prefetches_the_following_lines() {
        let mut p = Prefetcher::new(PrefetcherKind::NextLine, 1);
        let mut out = [0; MAX_DEGREE as usize];
        assert_eq!(p.on_miss(7, &mut out), 1);
        assert_eq!(out[0], 8);
    }
}
