/*!
RapidMRC: an L2 miss-rate curve from a short window of L1-miss addresses (Azimi, Tam, Soares and
Stumm, SIGOPS OSR 2009, section 3.2.2: "We record the data address upon L1 data cache miss events
to create a trace of nearly all L2 cache accesses over a short period of time. This trace is then
fed into Mattson's stack algorithm to produce the L2 MRC"; the method is Tam et al.'s RapidMRC,
ASPLOS 2009).

Here the L1 is simulated (the simulator's LRU `Cache` of the given geometry) and every L1 miss is
an L2 access. A *window* of `window` consecutive L1 misses, after skipping `start` of them, is fed
to an exact LRU stack; its first `warmup` misses only fill the stack (so lines already in use
before the window are not counted as cold), the rest are counted. The window's curve is compared
with the exact curve of the *whole* L1-miss stream, which is what the window tries to predict:
the mean absolute error over the reported sizes is returned with it. Sizes are fully associative
L2 sizes in lines, as the paper's stack is.

State: the L1, the window's stack (O(lines in the window)) and the whole stream's stack
(O(distinct lines)); the trace is never held.
*/
use serde::{Deserialize, Serialize};

use super::mrc::{log_sizes, Units, DEFAULT_POINTS};
use super::stack::{DistanceHistogram, LruStack};
use crate::cache::{Cache, LineMeta, Lookup, ReplacementKind};
use crate::error::ConfigError;
use crate::geometry::CacheGeometry;

fn default_line() -> u64 {
    64
}

/// The L1 and the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RapidMrcOptions {
    #[serde(default = "default_line")]
    pub line_size: u64,
    /// L1 size in bytes and associativity (LRU).
    pub l1_size: u64,
    pub l1_ways: u32,
    /// L1 misses skipped before the window starts.
    #[serde(default)]
    pub start: u64,
    /// L1 misses in the window (warm-up included).
    pub window: u64,
    /// The window's first misses that only fill the stack.
    #[serde(default)]
    pub warmup: u64,
    /// Report at this many log-spaced L2 sizes (default 1000).
    #[serde(default)]
    pub points: Option<usize>,
}

/// Window and whole-stream stacks behind a simulated L1.
#[derive(Debug, Clone)]
pub struct RapidMrc {
    options: RapidMrcOptions,
    units: Units,
    l1: Cache,
    references: u64,
    l1_misses: u64,
    window: MissWindow,
    whole: LruStack,
    buf: Vec<u64>,
    misses: Vec<u64>,
}

/// The window's curve and the whole stream's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RapidMrcResult {
    pub references: u64,
    pub l1_misses: u64,
    /// L1 misses counted in the window (after its warm-up).
    pub window_counted: u64,
    pub sizes: Vec<u64>,
    /// The window's L2 miss rate at each size.
    pub miss_rate: Vec<f64>,
    /// The exact L2 miss rate of the whole L1-miss stream.
    pub exact_miss_rate: Vec<f64>,
    /// Mean absolute difference between the two over `sizes`.
    pub mae: f64,
}

impl RapidMrc {
    pub fn new(options: RapidMrcOptions) -> Result<Self, ConfigError> {
        let units = Units::new(options.line_size, "line_size")?;
        let geom = CacheGeometry::new(
            options.l1_size,
            options.l1_ways,
            options.line_size as u32,
            4096,
        )
        .map_err(|e| ConfigError::new(format!("l1_{}", e.field), e.message))?;
        let l1 = Cache::new(geom, ReplacementKind::Lru, 0)
            .map_err(|e| ConfigError::new(format!("l1_{}", e.field), e.message))?;
        if options.window == 0 {
            return Err(ConfigError::new(
                "window",
                "0 is not allowed: the window holds at least one L1 miss",
            ));
        }
        if options.warmup >= options.window {
            return Err(ConfigError::new(
                "warmup",
                format!(
                    "{} is not allowed: the warm-up must be shorter than the window ({} misses)",
                    options.warmup, options.window
                ),
            ));
        }
        if options.points == Some(0) {
            return Err(ConfigError::new(
                "points",
                "0 is not allowed: give at least 1 point",
            ));
        }
        let window = MissWindow::new(options.window, options.warmup);
        Ok(RapidMrc {
            options,
            units,
            l1,
            references: 0,
            l1_misses: 0,
            window,
            whole: LruStack::new(),
            buf: Vec::new(),
            misses: Vec::new(),
        })
    }

    pub fn units(&self) -> Units {
        self.units
    }

    pub fn feed_records(&mut self, records: &[crate::trace::Record]) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        self.units.records(records, &mut buf);
        self.feed_units(&buf);
        self.buf = buf;
    }

    pub fn feed_columns(&mut self, addrs: &[u64], sizes: &[u16]) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        self.units.columns(addrs, sizes, &mut buf);
        self.feed_units(&buf);
        self.buf = buf;
    }

    /// Feed line numbers (the L1's references).
    pub fn feed_units(&mut self, lines: &[u64]) {
        self.references += lines.len() as u64;
        let mut misses = std::mem::take(&mut self.misses);
        misses.clear();
        for &line in lines {
            match self.l1.lookup(line) {
                Lookup::Hit(slot) => self.l1.touch(slot),
                Lookup::Miss(m) => {
                    self.l1.fill_at(m, line, LineMeta::default());
                    misses.push(line);
                }
            }
        }
        self.whole.run(&misses);
        let begin = self.options.start;
        for &line in &misses {
            let k = self.l1_misses;
            self.l1_misses += 1;
            if k >= begin {
                self.window.feed(line);
            }
        }
        self.misses = misses;
    }

    /// The curves. Errors when the window saw no counted miss.
    pub fn finish(&self) -> Result<RapidMrcResult, ConfigError> {
        let counted = self.window.histogram().references();
        if counted == 0 {
            return Err(ConfigError::new(
                "window",
                format!(
                    "the window counted no L1 miss: the trace has {} L1 misses, fewer than start + warmup = {}",
                    self.l1_misses,
                    self.options.start.saturating_add(self.options.warmup)
                ),
            ));
        }
        let whole = self.whole.histogram();
        let sizes = log_sizes(
            whole.distinct(),
            self.options.points.unwrap_or(DEFAULT_POINTS),
        );
        let miss_rate = self.window.histogram().miss_rates(&sizes);
        let exact_miss_rate = whole.miss_rates(&sizes);
        let mae = miss_rate
            .iter()
            .zip(&exact_miss_rate)
            .map(|(a, b)| (a - b).abs())
            .sum::<f64>()
            / sizes.len() as f64;
        Ok(RapidMrcResult {
            references: self.references,
            l1_misses: self.l1_misses,
            window_counted: counted,
            sizes,
            miss_rate,
            exact_miss_rate,
            mae,
        })
    }
}

/// A window of L1-miss line numbers as an OS collects it online (the `mrc-partition` policy,
/// Azimi et al. 3.2.2): the first `warmup` lines only fill the exact LRU stack, the next
/// `window - warmup` are counted into the distance histogram; lines after the window are
/// ignored. The same window `RapidMrc` keeps behind its simulated L1.
#[derive(Debug, Clone)]
pub struct MissWindow {
    window: u64,
    warmup: u64,
    seen: u64,
    stack: LruStack,
    counts: DistanceHistogram,
    /// `censored[d]`: counted lines not yet in the stack when the stack held `d` lines. Such a
    /// line's distance is more than `d` (every line in the stack was used since its last use),
    /// but by how much the window cannot tell: a miss at every size up to `d`, unknown above.
    censored: Vec<u64>,
}

impl MissWindow {
    /// `window` lines in all, the first `warmup` of them only filling the stack
    /// (`warmup < window`; checked by the caller's config).
    pub fn new(window: u64, warmup: u64) -> Self {
        MissWindow {
            window,
            warmup,
            seen: 0,
            stack: LruStack::new(),
            counts: DistanceHistogram {
                counts: vec![0],
                cold: 0,
            },
            censored: Vec::new(),
        }
    }

    /// One L1 miss (a line number). Returns whether the window is now complete.
    pub fn feed(&mut self, line: u64) -> bool {
        if self.seen >= self.window {
            return true;
        }
        let k = self.seen;
        self.seen += 1;
        let depth = self.stack.distinct() as usize;
        let d = self.stack.access(line);
        if k >= self.warmup {
            self.counts.add(d);
            if d.is_none() {
                if self.censored.len() <= depth {
                    self.censored.resize(depth + 1, 0);
                }
                self.censored[depth] += 1;
            }
        }
        self.seen >= self.window
    }

    /// Lines the window takes in all (warm-up included).
    pub fn size(&self) -> u64 {
        self.window
    }

    /// Lines fed so far (at most `window`).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    pub fn complete(&self) -> bool {
        self.seen >= self.window
    }

    /// Whether the next line fed is counted (past the warm-up, before the end).
    pub fn counting(&self) -> bool {
        self.seen >= self.warmup && self.seen < self.window
    }

    /// The counted lines' stack distances (a line first seen in the window is `cold`: a miss
    /// at every size, the window's cold floor).
    pub fn histogram(&self) -> &DistanceHistogram {
        &self.counts
    }

    /// Miss rate at each of `sizes` (lines) with the window's first sightings as what they are,
    /// right-censored distances: a line not in the stack when the stack held `d` lines has a
    /// distance above `d`, so it is a miss at sizes up to `d` and says nothing about larger
    /// ones. The miss rate at size `s` is `P(distance > s)`, estimated by the product-limit
    /// (Kaplan-Meier) estimator over the distances seen and the censored ones: at each distance
    /// `j`, the reuses at exactly `j` over the counted lines whose distance is known to be at
    /// least `j`. Beyond the deepest the window reached the estimate stays at its last value
    /// (what lies there was not observed; flat over-counts the misses, never under-counts them).
    /// Counting every first sighting as a miss at every size instead (`histogram().miss_rates`)
    /// puts a floor under the curve as high as the share of the window's lines it had not seen
    /// before: for a short window against a large cache, most of the curve.
    pub fn censored_miss_rates(&self, sizes: &[u64]) -> Vec<f64> {
        let total = self.counts.references();
        if total == 0 {
            return vec![0.0; sizes.len()];
        }
        let top = sizes.iter().copied().max().unwrap_or(0) as usize;
        // survival[s] = P(distance > s), s = 0..=top.
        let mut survival = vec![1.0f64; top + 1];
        let mut at_risk = total as f64;
        let mut s = 1.0f64;
        for (j, out) in survival.iter_mut().enumerate().skip(1) {
            // Censored at depth j - 1 (distance > j - 1, unknown from j on) leave the risk set.
            at_risk -= self.censored.get(j - 1).copied().unwrap_or(0) as f64;
            let hits = self.counts.counts.get(j).copied().unwrap_or(0) as f64;
            if at_risk > 0.0 && hits > 0.0 {
                s *= 1.0 - hits / at_risk;
            }
            at_risk -= hits;
            *out = s;
        }
        sizes.iter().map(|&x| survival[x as usize]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::reference::zipf_scan;

    fn options(window: u64, warmup: u64, start: u64) -> RapidMrcOptions {
        RapidMrcOptions {
            line_size: 64,
            l1_size: 32 << 10,
            l1_ways: 8,
            start,
            window,
            warmup,
            points: Some(200),
        }
    }

    #[test]
    fn a_window_of_every_miss_is_the_exact_curve() {
        let t = zipf_scan(200_000, 20_000, 0.9, 2);
        let mut r = RapidMrc::new(options(u64::MAX / 2, 0, 0)).unwrap();
        r.feed_units(&t);
        let res = r.finish().unwrap();
        assert_eq!(res.miss_rate, res.exact_miss_rate);
        assert_eq!(res.mae, 0.0);
        assert_eq!(res.window_counted, res.l1_misses);
        assert!(res.l1_misses < 200_000 && res.l1_misses > 100_000);
    }

    #[test]
    fn a_short_warmed_window_predicts_the_curve_of_a_steady_trace() {
        // A stationary trace: a window of a fifth of the misses, half of it warm-up, is close.
        let t = zipf_scan(400_000, 10_000, 0.9, 3);
        let mut full = RapidMrc::new(options(u64::MAX / 2, 0, 0)).unwrap();
        full.feed_units(&t);
        let misses = full.finish().unwrap().l1_misses;
        let w = misses / 5;
        let mut r = RapidMrc::new(options(w, w / 2, misses / 2)).unwrap();
        r.feed_units(&t);
        let warmed = r.finish().unwrap();
        let mut cold = RapidMrc::new(options(w / 2, 0, misses / 2 + w / 2)).unwrap();
        cold.feed_units(&t);
        let unwarmed = cold.finish().unwrap();
        assert!(warmed.mae < 0.05, "{}", warmed.mae);
        // The same counted misses without the warm-up count every line's first use as a miss.
        assert!(
            unwarmed.mae > warmed.mae,
            "{} vs {}",
            unwarmed.mae,
            warmed.mae
        );
    }

    #[test]
    fn bad_options_are_named() {
        let e = RapidMrc::new(options(0, 0, 0)).unwrap_err();
        assert_eq!(e.field, "window");
        let e = RapidMrc::new(options(10, 10, 0)).unwrap_err();
        assert_eq!(e.field, "warmup");
        let mut o = options(10, 0, 0);
        o.l1_ways = 0;
        assert_eq!(RapidMrc::new(o).unwrap_err().field, "l1_ways");
        let mut r = RapidMrc::new(options(10, 5, 1_000_000)).unwrap();
        r.feed_units(&[1, 2, 3]);
        assert!(r
            .finish()
            .unwrap_err()
            .message
            .contains("fewer than start + warmup"));
    }
}
