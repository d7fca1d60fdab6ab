/*!
Miss-rate curves of traces: what one reference is, which method computes the curve, at which
cache sizes it is reported, and the result the Python API and `cachecolor mrc` return.

- **Units.** A curve counts cache lines (`unit_bytes` = the line size) or pages (`unit_bytes` =
  the page size). A record that spans `k` units is `k` references, one per unit, as the
  simulator splits accesses (DESIGN.md, "Semantics to keep fixed"). Every record kind counts
  (loads, stores, instruction fetches): filter the trace first for a data-only curve.
- **Methods.** `exact`: Mattson's stack algorithm (`stack::LruStack`), the fully associative
  LRU miss rate at every size. `shards`: spatially sampled (`shards.rs`), fixed rate or fixed
  size, with SHARDS_adj by default and several salts for a band. `aet`: the AET model fed by
  randomly sampled references (`aet.rs`).
- **Sizes.** A curve is reported at given sizes, at `points` sizes spaced evenly in log scale
  from 1 to the (estimated) number of distinct units (beyond it nothing changes), or at every
  size `1..=distinct` (`all_sizes`, exact only).
- **Errors.** Options are checked before any reference is read (`ConfigError` naming the option
  and what is allowed); an empty trace is an error at `finish` (no curve to report).

Memory is the profiler's state (O(distinct units) for exact, O(sample) for the approximations)
plus one block of units; the trace itself is never held.
*/
use serde::{Deserialize, Serialize};

use super::aet::Aet;
use super::shards::{Shards, ShardsMode};
use super::stack::{DistanceHistogram, LruStack, SetStacks};
use crate::error::ConfigError;
use crate::trace::Record;

/// Default points of a log-spaced size grid.
pub const DEFAULT_POINTS: usize = 1000;

/// Most salts (independent SHARDS runs) in one pass.
pub const MAX_SALTS: u32 = 64;

/// How addresses become the units a curve counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    shift: u32,
}

impl Units {
    /// Units of `bytes` bytes (a power of two from 2 B to 1 GiB); `field` names the option in
    /// errors.
    pub fn new(bytes: u64, field: &str) -> Result<Units, ConfigError> {
        if !(2..=1 << 30).contains(&bytes) || !bytes.is_power_of_two() {
            return Err(ConfigError::new(
                field,
                format!(
                    "{bytes} is not allowed: the unit must be a power of two from 2 B to 1 GiB \
                     (e.g. 64 for lines, 4096 for pages)"
                ),
            ));
        }
        Ok(Units {
            shift: bytes.trailing_zeros(),
        })
    }

    pub fn bytes(self) -> u64 {
        1 << self.shift
    }

    /// Append the units `addr .. addr + size` touches (at least one).
    #[inline(always)]
    pub fn push(self, addr: u64, size: u16, out: &mut Vec<u64>) {
        let first = addr >> self.shift;
        let last = addr.saturating_add(size.max(1) as u64 - 1) >> self.shift;
        out.push(first);
        let mut u = first;
        while u < last {
            u += 1;
            out.push(u);
        }
    }

    /// Append the units of `records`.
    pub fn records(self, records: &[Record], out: &mut Vec<u64>) {
        out.reserve(records.len());
        for r in records {
            self.push(r.addr, r.size, out);
        }
    }

    /// Append the units of address / size columns (`sizes` empty: 1 byte each).
    pub fn columns(self, addrs: &[u64], sizes: &[u16], out: &mut Vec<u64>) {
        out.reserve(addrs.len());
        if sizes.is_empty() {
            out.extend(addrs.iter().map(|&a| a >> self.shift));
        } else {
            for (&a, &s) in addrs.iter().zip(sizes) {
                self.push(a, s, out);
            }
        }
    }
}

/// Which algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MethodName {
    #[default]
    Exact,
    Shards,
    Aet,
}

impl MethodName {
    pub fn name(self) -> &'static str {
        match self {
            MethodName::Exact => "exact",
            MethodName::Shards => "shards",
            MethodName::Aet => "aet",
        }
    }
}

fn default_unit() -> u64 {
    64
}
fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}

/// What to compute; the Python API passes these as a dict (unknown keys are errors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MrcOptions {
    /// Bytes per unit: the line size, or the page size for a page-granularity curve.
    #[serde(default = "default_unit")]
    pub unit_bytes: u64,
    #[serde(default)]
    pub method: MethodName,
    /// SHARDS: fixed sampling rate in (0, 1]. AET: reference sampling rate in (0, 1].
    #[serde(default)]
    pub rate: Option<f64>,
    /// SHARDS: fixed-size variant tracking at most this many sampled lines.
    #[serde(default)]
    pub max_lines: Option<u64>,
    /// SHARDS: independent runs with salts `seed .. seed + salts` (a band when > 1).
    #[serde(default = "one")]
    pub salts: u32,
    /// SHARDS: apply SHARDS_adj.
    #[serde(default = "yes")]
    pub adjust: bool,
    /// First SHARDS salt; AET's sampling seed.
    #[serde(default)]
    pub seed: u64,
    /// Report at these sizes (units)...
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    /// ... or at this many log-spaced sizes (default 1000) ...
    #[serde(default)]
    pub points: Option<usize>,
    /// ... or at every size (exact only).
    #[serde(default)]
    pub all_sizes: bool,
}

impl Default for MrcOptions {
    fn default() -> Self {
        MrcOptions {
            unit_bytes: default_unit(),
            method: MethodName::Exact,
            rate: None,
            max_lines: None,
            salts: 1,
            adjust: true,
            seed: 0,
            sizes: None,
            points: None,
            all_sizes: false,
        }
    }
}

impl MrcOptions {
    /// Check every option and the rules between them.
    pub fn validate(&self) -> Result<(), ConfigError> {
        Units::new(self.unit_bytes, "unit_bytes")?;
        let m = self.method.name();
        match self.method {
            MethodName::Exact => {
                for (set, field) in [
                    (self.rate.is_some(), "rate"),
                    (self.max_lines.is_some(), "max_lines"),
                ] {
                    if set {
                        return Err(ConfigError::new(
                            field,
                            format!("the exact method takes no {field}: choose method \"shards\" or \"aet\" to sample"),
                        ));
                    }
                }
            }
            MethodName::Shards => match (self.rate, self.max_lines) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError::new(
                        "max_lines",
                        "give SHARDS either a fixed rate or a fixed size (max_lines), not both",
                    ))
                }
                (None, None) => return Err(ConfigError::new(
                    "rate",
                    "SHARDS needs a sampling rate in (0, 1] (e.g. 0.01) or max_lines (fixed size)",
                )),
                (Some(r), None) => ShardsMode::FixedRate(r).validate()?,
                (None, Some(n)) => ShardsMode::FixedSize(n).validate()?,
            },
            MethodName::Aet => {
                if self.max_lines.is_some() {
                    return Err(ConfigError::new(
                        "max_lines",
                        "only SHARDS has a fixed-size variant; AET takes a reference sampling rate",
                    ));
                }
                let r = self.rate.ok_or_else(|| {
                    ConfigError::new(
                        "rate",
                        "AET needs a reference sampling rate in (0, 1] (e.g. 0.01)",
                    )
                })?;
                super::aet::validate_rate(r)?;
            }
        }
        if self.salts == 0 || self.salts > MAX_SALTS {
            return Err(ConfigError::new(
                "salts",
                format!(
                    "{} is not allowed: give 1 to {MAX_SALTS} salts (independent SHARDS samples)",
                    self.salts
                ),
            ));
        }
        if self.salts > 1 && self.method != MethodName::Shards {
            return Err(ConfigError::new(
                "salts",
                format!("salts apply to SHARDS only, not to the {m} method"),
            ));
        }
        let given = [self.sizes.is_some(), self.points.is_some(), self.all_sizes];
        if given.iter().filter(|&&g| g).count() > 1 {
            return Err(ConfigError::new(
                "sizes",
                "give at most one of sizes, points and all_sizes",
            ));
        }
        if self.points == Some(0) {
            return Err(ConfigError::new(
                "points",
                "0 is not allowed: give at least 1 point",
            ));
        }
        if self.all_sizes && self.method != MethodName::Exact {
            return Err(ConfigError::new(
                "all_sizes",
                format!(
                    "every size is for the exact method; the {m} curve is an estimate: use points"
                ),
            ));
        }
        Ok(())
    }
}

/// `points` sizes from 1 to `upper` spaced evenly in log scale (every size when `upper <=
/// points`), increasing, without repeats, ending at `upper`.
pub fn log_sizes(upper: u64, points: usize) -> Vec<u64> {
    let upper = upper.max(1);
    if upper <= points as u64 {
        return (1..=upper).collect();
    }
    let mut out: Vec<u64> = Vec::with_capacity(points);
    let top = (upper as f64).ln();
    for i in 0..points {
        let x = if points == 1 {
            upper
        } else {
            ((top * i as f64 / (points - 1) as f64).exp().round() as u64).clamp(1, upper)
        };
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    if out.last() != Some(&upper) {
        out.push(upper);
    }
    out
}

/// The running state of one curve.
#[derive(Debug, Clone)]
enum Engine {
    Exact(Box<LruStack>),
    Shards(Vec<Shards>),
    Aet(Box<Aet>),
}

/// Feeds records (or columns) to the chosen method and reports the curve.
#[derive(Debug, Clone)]
pub struct MrcProfiler {
    options: MrcOptions,
    units: Units,
    engine: Engine,
    references: u64,
    instructions: u64,
    buf: Vec<u64>,
}

/// A finished curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MrcResult {
    pub method: &'static str,
    /// Bytes per unit (line or page).
    pub unit_bytes: u64,
    /// Unit references (a record spanning two units counts twice).
    pub references: u64,
    /// Instructions (sum of the records' instruction-count deltas; 0 if the trace has none).
    pub instructions: u64,
    /// Distinct units (exact), or the method's estimate.
    pub distinct: f64,
    pub distinct_exact: bool,
    /// The sampling rate (SHARDS: the final one; AET: the reference sampling rate).
    pub rate: Option<f64>,
    pub max_lines: Option<u64>,
    pub salts: u32,
    pub adjusted: bool,
    pub seed: u64,
    /// Sizes below this are estimated from too few samples (SHARDS: 50 / R); 1 when exact.
    pub reliable_from: u64,
    pub sizes: Vec<u64>,
    /// Fully associative LRU miss rate at each size.
    pub miss_rate: Vec<f64>,
    /// Several salts: the lowest and highest estimate at each size.
    pub band_low: Option<Vec<f64>>,
    pub band_high: Option<Vec<f64>>,
    /// Bytes of profiler state at the end.
    pub state_bytes: usize,
    /// Exact only: the stack-distance histogram (not serialised; the glue passes it as an array).
    #[serde(skip)]
    pub histogram: Option<DistanceHistogram>,
}

impl MrcProfiler {
    pub fn new(options: MrcOptions) -> Result<Self, ConfigError> {
        options.validate()?;
        let units = Units::new(options.unit_bytes, "unit_bytes")?;
        let engine = match options.method {
            MethodName::Exact => Engine::Exact(Box::default()),
            MethodName::Shards => {
                let mode = match (options.rate, options.max_lines) {
                    (Some(r), _) => ShardsMode::FixedRate(r),
                    (None, Some(n)) => ShardsMode::FixedSize(n),
                    (None, None) => unreachable!("validated"),
                };
                Engine::Shards(
                    (0..options.salts as u64)
                        .map(|k| Shards::new(mode, options.seed.wrapping_add(k)))
                        .collect::<Result<_, _>>()?,
                )
            }
            MethodName::Aet => Engine::Aet(Box::new(Aet::new(
                options.rate.expect("validated"),
                options.seed,
            )?)),
        };
        Ok(MrcProfiler {
            options,
            units,
            engine,
            references: 0,
            instructions: 0,
            buf: Vec::new(),
        })
    }

    pub fn units(&self) -> Units {
        self.units
    }

    /// Unit references so far.
    pub fn references(&self) -> u64 {
        self.references
    }

    /// Feed a block of records.
    pub fn feed_records(&mut self, records: &[Record]) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        self.units.records(records, &mut buf);
        self.instructions += records.iter().map(|r| r.icount as u64).sum::<u64>();
        self.feed_units(&buf);
        self.buf = buf;
    }

    /// Feed a block of address / size columns (`sizes` empty: 1 byte each) with optional
    /// instruction counts.
    pub fn feed_columns(&mut self, addrs: &[u64], sizes: &[u16], icounts: &[u32]) {
        if sizes.is_empty() {
            if let Engine::Shards(v) = &mut self.engine {
                // 1-byte references: SHARDS filters the addresses directly.
                self.references += addrs.len() as u64;
                self.instructions += icounts.iter().map(|&i| i as u64).sum::<u64>();
                let shift = self.units.bytes().trailing_zeros();
                v.iter_mut().for_each(|s| s.run_addresses(addrs, shift));
                return;
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        self.units.columns(addrs, sizes, &mut buf);
        self.instructions += icounts.iter().map(|&i| i as u64).sum::<u64>();
        self.feed_units(&buf);
        self.buf = buf;
    }

    /// Feed unit numbers directly (lines or pages already computed).
    pub fn feed_units(&mut self, units: &[u64]) {
        self.references += units.len() as u64;
        match &mut self.engine {
            Engine::Exact(s) => s.run(units),
            Engine::Shards(v) => v.iter_mut().for_each(|s| s.run(units)),
            Engine::Aet(a) => a.run(units),
        }
    }

    /// The curve so far. Errors if nothing was fed.
    pub fn finish(&self) -> Result<MrcResult, ConfigError> {
        if self.references == 0 {
            return Err(ConfigError::new(
                "trace",
                "the trace has no references: a miss-rate curve needs at least one",
            ));
        }
        let o = &self.options;
        let points = o.points.unwrap_or(DEFAULT_POINTS);
        let grid = |upper: u64| -> Vec<u64> {
            match &o.sizes {
                Some(s) => s.clone(),
                None if o.all_sizes => (1..=upper.max(1)).collect(),
                None => log_sizes(upper, points),
            }
        };
        let mut r = MrcResult {
            method: o.method.name(),
            unit_bytes: self.units.bytes(),
            references: self.references,
            instructions: self.instructions,
            distinct: 0.0,
            distinct_exact: false,
            rate: None,
            max_lines: o.max_lines,
            salts: o.salts,
            adjusted: o.adjust && o.method == MethodName::Shards,
            seed: o.seed,
            reliable_from: 1,
            sizes: Vec::new(),
            miss_rate: Vec::new(),
            band_low: None,
            band_high: None,
            state_bytes: 0,
            histogram: None,
        };
        match &self.engine {
            Engine::Exact(s) => {
                let h = s.histogram();
                r.distinct = h.distinct() as f64;
                r.distinct_exact = true;
                r.sizes = grid(h.distinct());
                r.miss_rate = h.miss_rates(&r.sizes);
                r.state_bytes = s.state_bytes();
                r.histogram = Some(h);
            }
            Engine::Shards(v) => {
                let n = v.len() as f64;
                // The fixed rate as given; a fixed-size run's final rate (mean over salts).
                r.rate = Some(
                    o.rate
                        .unwrap_or_else(|| v.iter().map(Shards::rate).sum::<f64>() / n),
                );
                r.distinct = v.iter().map(Shards::distinct_estimate).sum::<f64>() / n;
                r.reliable_from = v.iter().map(Shards::reliable_from).max().unwrap_or(1);
                r.sizes = grid(r.distinct.round() as u64);
                let curves: Vec<Vec<f64>> =
                    v.iter().map(|s| s.miss_rates(&r.sizes, o.adjust)).collect();
                r.miss_rate = (0..r.sizes.len())
                    .map(|i| curves.iter().map(|c| c[i]).sum::<f64>() / n)
                    .collect();
                if v.len() > 1 {
                    let fold = |f: fn(f64, f64) -> f64, init: f64| -> Vec<f64> {
                        (0..r.sizes.len())
                            .map(|i| curves.iter().map(|c| c[i]).fold(init, f))
                            .collect()
                    };
                    r.band_low = Some(fold(f64::min, f64::INFINITY));
                    r.band_high = Some(fold(f64::max, f64::NEG_INFINITY));
                }
                r.state_bytes = v.iter().map(Shards::state_bytes).sum();
            }
            Engine::Aet(a) => {
                r.rate = Some(a.rate());
                r.distinct = a.distinct_estimate();
                r.reliable_from = 1;
                r.sizes = grid(r.distinct.round() as u64);
                r.miss_rate = a.miss_rates(&r.sizes);
                r.state_bytes = a.state_bytes();
            }
        }
        Ok(r)
    }
}

// ---------------------------------------------------------------------------------------------
// Per-set profiles of traces.

/// What a per-set stack distance profile covers (thesis 5.3): `sets` sets (set = line mod sets)
/// of `line_size`-byte lines, associativities `1..=max_ways`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetProfileOptions {
    #[serde(default = "default_unit")]
    pub line_size: u64,
    pub sets: u64,
    pub max_ways: u32,
    /// Translate each line through a page placement first (thesis 5.3.1: the physically aware
    /// profile); without it the trace's addresses index the sets directly (the naive profile,
    /// as if every page were physically contiguous).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<super::placement::PlacementSpec>,
}

/// Feeds records (or columns) to per-set stacks.
#[derive(Debug)]
pub struct SetProfiler {
    options: SetProfileOptions,
    units: Units,
    stacks: SetStacks,
    references: u64,
    buf: Vec<u64>,
    translator: Option<super::placement::PageTranslator>,
    physical: Vec<u64>,
    /// The first translation error (an unmapped page): reported by `finish`.
    error: Option<ConfigError>,
}

/// A finished per-set profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetProfileResult {
    pub line_size: u64,
    pub sets: u64,
    pub max_ways: u32,
    pub references: u64,
    pub distinct: u64,
    /// `sets x (max_ways + 1)` counters, row-major: references of set `s` at per-set distance
    /// `d` in column `d - 1`, the last column the references beyond `max_ways` or first.
    #[serde(skip)]
    pub per_set: Vec<u64>,
    /// Every per-set distance pooled (`counts[d]`, `cold`): the access-weighted average
    /// profile times the references, at every associativity.
    #[serde(skip)]
    pub pooled: DistanceHistogram,
    /// The placement the lines went through, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<super::placement::PlacementSummary>,
}

impl SetProfiler {
    pub fn new(options: SetProfileOptions) -> Result<Self, ConfigError> {
        let units = Units::new(options.line_size, "line_size")?;
        let stacks = SetStacks::new(options.sets, options.max_ways)?;
        let translator = match &options.placement {
            Some(spec) => {
                // Bins of one page: the colors of a cache with these sets and lines (thesis 5.1).
                // A page smaller than a way must divide it, or pages have no consistent color;
                // a page of a way or more covers every set: one bin.
                let way = options.sets * options.line_size;
                let page = spec.page_size();
                if page.is_power_of_two() && page < way && !way.is_multiple_of(page) {
                    return Err(ConfigError::new(
                        "placement.page_size",
                        format!(
                            "{page} B pages do not divide one way of the cache ({} sets x {} B = {way} B): \
                             pages would have no consistent color",
                            options.sets, options.line_size
                        ),
                    ));
                }
                let colors = (way / page).max(1);
                Some(super::placement::PageTranslator::new(
                    spec,
                    options.line_size,
                    colors,
                )?)
            }
            None => None,
        };
        Ok(SetProfiler {
            options,
            units,
            stacks,
            references: 0,
            buf: Vec::new(),
            translator,
            physical: Vec::new(),
            error: None,
        })
    }

    pub fn references(&self) -> u64 {
        self.references
    }

    pub fn feed_records(&mut self, records: &[Record]) {
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

    pub fn feed_units(&mut self, lines: &[u64]) {
        if self.error.is_some() {
            return;
        }
        if let Some(t) = &mut self.translator {
            let mut physical = std::mem::take(&mut self.physical);
            physical.clear();
            physical.extend_from_slice(lines);
            if let Err(e) = t.translate(&mut physical) {
                self.error = Some(e);
                return;
            }
            self.references += lines.len() as u64;
            self.stacks.run(&physical);
            self.physical = physical;
            return;
        }
        self.references += lines.len() as u64;
        self.stacks.run(lines);
    }

    /// The profile. Errors if nothing was fed, or if a line could not be translated.
    pub fn finish(&self) -> Result<SetProfileResult, ConfigError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.references == 0 {
            return Err(ConfigError::new(
                "trace",
                "the trace has no references: a stack distance profile needs at least one",
            ));
        }
        let pooled = self.stacks.pooled();
        Ok(SetProfileResult {
            line_size: self.options.line_size,
            sets: self.options.sets,
            max_ways: self.options.max_ways,
            references: self.references,
            distinct: pooled.distinct(),
            per_set: self.stacks.per_set_counts().to_vec(),
            pooled,
            placement: self.translator.as_ref().map(|t| t.summary()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_split_spanning_records() {
        let u = Units::new(64, "line_size").unwrap();
        let mut out = Vec::new();
        u.push(60, 8, &mut out); // bytes 60..67: lines 0 and 1
        u.push(128, 1, &mut out);
        u.push(0, 200, &mut out); // lines 0..=3
        u.push(u64::MAX - 3, 8, &mut out); // saturates at the top of the address space
        assert_eq!(out, vec![0, 1, 2, 0, 1, 2, 3, u64::MAX >> 6]);
        let mut c = Vec::new();
        u.columns(&[60, 4096], &[8, 1], &mut c);
        assert_eq!(c, vec![0, 1, 64]);
        for bad in [0u64, 1, 48, 1 << 31] {
            let e = Units::new(bad, "line_size").unwrap_err();
            assert_eq!(e.field, "line_size");
            assert!(e.message.contains("power of two"), "{}", e.message);
        }
    }

    #[test]
    fn log_sizes_cover_the_range() {
        assert_eq!(log_sizes(5, 10), vec![1, 2, 3, 4, 5]);
        let g = log_sizes(1_000_000, 100);
        assert_eq!((g[0], *g.last().unwrap()), (1, 1_000_000));
        assert!(g.windows(2).all(|w| w[0] < w[1]));
        assert!(g.len() > 80 && g.len() <= 100, "{}", g.len());
        assert_eq!(log_sizes(1000, 1), vec![1000]);
    }

    #[test]
    fn options_are_checked_with_named_fields() {
        let bad = |o: MrcOptions, field: &str, text: &str| {
            let e = MrcProfiler::new(o).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(text), "{e}");
        };
        let shards = |rate: Option<f64>, max_lines: Option<u64>| MrcOptions {
            method: MethodName::Shards,
            rate,
            max_lines,
            ..MrcOptions::default()
        };
        bad(shards(Some(0.0), None), "rate", "(0, 1]");
        bad(shards(Some(-1.0), None), "rate", "(0, 1]");
        bad(shards(Some(1.5), None), "rate", "(0, 1]");
        bad(shards(None, None), "rate", "needs a sampling rate");
        bad(shards(Some(0.1), Some(10)), "max_lines", "not both");
        bad(shards(None, Some(0)), "max_lines", "1 to 2^32");
        bad(
            MrcOptions {
                rate: Some(0.1),
                ..MrcOptions::default()
            },
            "rate",
            "exact method takes no rate",
        );
        bad(
            MrcOptions {
                unit_bytes: 100,
                ..MrcOptions::default()
            },
            "unit_bytes",
            "power of two",
        );
        bad(
            MrcOptions {
                salts: 3,
                ..MrcOptions::default()
            },
            "salts",
            "SHARDS only",
        );
        bad(
            MrcOptions {
                all_sizes: true,
                ..shards(Some(0.1), None)
            },
            "all_sizes",
            "estimate",
        );
        bad(
            MrcOptions {
                method: MethodName::Aet,
                ..MrcOptions::default()
            },
            "rate",
            "AET needs",
        );
        let empty = MrcProfiler::new(MrcOptions::default()).unwrap();
        let e = empty.finish().unwrap_err();
        assert!(e.message.contains("no references"), "{e}");
    }

    #[test]
    fn exact_curve_of_a_small_trace() {
        let mut p = MrcProfiler::new(MrcOptions {
            unit_bytes: 64,
            all_sizes: true,
            ..MrcOptions::default()
        })
        .unwrap();
        // Lines 0 1 2 0 1 2 (addresses 64 apart), then a record spanning lines 0 and 1.
        let recs: Vec<Record> = [0u64, 64, 128, 0, 64, 128]
            .iter()
            .map(|&a| Record::load(a))
            .chain([Record::new(crate::trace::Kind::Load, 60, 8)])
            .collect();
        p.feed_records(&recs);
        let r = p.finish().unwrap();
        assert_eq!(r.references, 8);
        assert_eq!(r.distinct, 3.0);
        assert_eq!(r.sizes, vec![1, 2, 3]);
        // Distances: 3 cold, then 3, 3, 3, then line 0 at 3 and line 1 at 3.
        assert_eq!(r.miss_rate, vec![1.0, 1.0, 3.0 / 8.0]);
    }
}
