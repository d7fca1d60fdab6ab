/*!
The reference trace of ANCHORS.md's miss-rate-curve measurements, built here so that the Rust
tests, the Python API and `benches/mrc.py` (which feeds the same lines to libCacheSim and a numba
kernel) all profile exactly the same references: `refs` line numbers over `lines` lines, each
reference either (coin flip) a zipf(`alpha`) draw over the lines (rank r at line r - 1, the hot
lines contiguous from line 0) or the next line of a cyclic scan over all of them. With 10 M
references over 1 M lines the scan alone touches every line five times, so the trace has exactly
`lines` distinct lines, and its curve has both a smooth zipf part and the scan's cliff at about
`lines`.

One `SplitMix64(seed)` stream: per reference one draw for the coin (top bit), then, for zipf,
the sampler's draws (`workload::zipf`, exact rejection-inversion).
*/
use crate::rng::SplitMix64;
use crate::workload::zipf_sampler;

/// `refs` line numbers: half zipf(`alpha`) over `lines` lines, half a cyclic scan over them.
pub fn zipf_scan(refs: u64, lines: u64, alpha: f64, seed: u64) -> Vec<u64> {
    assert!(lines >= 1 && alpha > 0.0);
    let z = zipf_sampler(lines, alpha);
    let mut g = SplitMix64::new(seed);
    let mut next = 0u64;
    (0..refs)
        .map(|_| {
            if g.next_u64() >> 63 == 0 {
                z.sample(&mut g) - 1
            } else {
                let l = next;
                next = if next + 1 == lines { 0 } else { next + 1 };
                l
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_scan_half_zipf_over_every_line() {
        let t = zipf_scan(200_000, 10_000, 0.9, 3);
        let mut seen = vec![false; 10_000];
        for &l in &t {
            seen[l as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        // The scan visits lines in order; line 0 is also the hottest zipf line.
        let zeros = t.iter().filter(|&&l| l == 0).count() as f64 / t.len() as f64;
        assert!(zeros > 0.02 && zeros < 0.2, "{zeros}");
        assert_eq!(t, zipf_scan(200_000, 10_000, 0.9, 3));
    }
}
