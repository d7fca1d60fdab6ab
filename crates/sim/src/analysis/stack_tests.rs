//! Tests of `stack.rs` (moved out of it unchanged).
use super::*;
use crate::rng::SplitMix64;

/// Move-to-front list: the definition of the stack distance.
fn naive(lines: &[u64]) -> Vec<Option<u32>> {
    let mut stack: Vec<u64> = Vec::new();
    lines
        .iter()
        .map(|&l| {
            let d = stack.iter().position(|&x| x == l).map(|p| {
                stack.remove(p);
                p as u32 + 1
            });
            stack.insert(0, l);
            d
        })
        .collect()
}

/// The first position where two distance sequences differ (for readable failures).
fn first_diff(
    got: &[Option<u32>],
    want: &[Option<u32>],
) -> Option<(usize, Option<u32>, Option<u32>)> {
    assert_eq!(got.len(), want.len());
    (0..got.len())
        .find(|&i| got[i] != want[i])
        .map(|i| (i, got[i], want[i]))
}

#[test]
fn small_example_by_hand() {
    // a b c a b b d a: the second a has b, c above it (distance 3); the last has d, b.
    let t = [1u64, 2, 3, 1, 2, 2, 4, 1];
    let mut s = LruStack::new();
    let got: Vec<_> = t.iter().map(|&l| s.access(l)).collect();
    assert_eq!(
        got,
        vec![None, None, None, Some(3), Some(3), Some(1), None, Some(3)]
    );
}

#[test]
fn matches_move_to_front_through_compactions_and_growth() {
    // Enough references to compact the axis many times and grow the table.
    for (seed, footprint) in [(1u64, 50u64), (2, 3000), (3, 70_000)] {
        let mut g = SplitMix64::new(seed);
        let t: Vec<u64> = (0..60_000)
            .map(|i| {
                if i % 3 == 0 {
                    g.below(footprint)
                } else {
                    (i as u64 * 7) % (footprint / 2 + 1)
                }
            })
            .collect();
        let want = naive(&t);
        let mut s = LruStack::new();
        let got: Vec<_> = t.iter().map(|&l| s.access(l)).collect();
        assert_eq!(first_diff(&got, &want), None, "seed {seed}");
    }
}

#[test]
fn removal_forgets_a_line() {
    let mut s = LruStack::new();
    for l in [1u64, 2, 3] {
        s.access(l);
    }
    s.remove(2);
    assert_eq!(s.access(1), Some(2)); // 3 above it, 2 forgotten
    assert_eq!(s.access(2), None);
    assert_eq!(s.distinct(), 3);
}

#[test]
fn table_removal_keeps_every_other_line_findable() {
    let mut t = LineTable::new();
    let mut g = SplitMix64::new(5);
    let mut lines: Vec<u64> = (0..3000).map(|_| g.below(1 << 40)).collect();
    lines.sort_unstable();
    lines.dedup();
    for &l in &lines {
        let (i, found) = t.find_or_insert(l);
        assert!(!found);
        t.get_mut(i).slot = l as u32;
        t.grow_if_needed(|_, _| {});
    }
    for &l in lines.iter().step_by(3) {
        let i = t.find(l).unwrap();
        t.remove_at(i, |_, _| {});
    }
    for (k, &l) in lines.iter().enumerate() {
        match t.find(l) {
            Some(i) => {
                assert!(k % 3 != 0, "line {l} was removed");
                assert_eq!(t.get(i).slot, l as u32);
            }
            None => assert!(k % 3 == 0, "line {l} was lost"),
        }
    }
    assert_eq!(t.len(), lines.len() - lines.len().div_ceil(3));
}

#[test]
fn histogram_gives_misses_at_every_size() {
    let h = DistanceHistogram {
        counts: vec![0, 5, 0, 2, 1],
        cold: 3,
    };
    assert_eq!(h.references(), 11);
    assert_eq!(h.miss_counts(), vec![11, 6, 6, 4, 3]);
    assert_eq!(h.misses(0), 11);
    assert_eq!(h.misses(2), 6);
    assert_eq!(h.misses(100), 3);
    assert_eq!(h.miss_rates(&[1, 4]), vec![6.0 / 11.0, 3.0 / 11.0]);
}

#[test]
fn per_set_distances_are_the_distances_within_each_set() {
    let mut g = SplitMix64::new(9);
    let t: Vec<u64> = (0..40_000).map(|_| g.below(900)).collect();
    for sets in [1u64, 4, 7] {
        let mut ss = SetStacks::new(sets, 8).unwrap();
        let got: Vec<_> = t.iter().map(|&l| ss.access(l)).collect();
        for s in 0..sets {
            let idx: Vec<usize> = (0..t.len()).filter(|&i| t[i] % sets == s).collect();
            let sub: Vec<u64> = idx.iter().map(|&i| t[i]).collect();
            let want = naive(&sub);
            let mine: Vec<_> = idx.iter().map(|&i| got[i]).collect();
            assert_eq!(first_diff(&mine, &want), None, "sets {sets} set {s}");
        }
    }
}

#[test]
fn state_does_not_grow_with_the_trace() {
    // 100 K references over 5,000 lines, then 2 M more over the same lines: the stack's
    // state (and the per-set stacks') is bounded by the distinct lines, not the references.
    let mut g = SplitMix64::new(1);
    let mut chunk = || -> Vec<u64> { (0..100_000).map(|_| g.below(5000)).collect() };
    let mut s = LruStack::new();
    let mut ss = SetStacks::new(64, 8).unwrap();
    let first = chunk();
    s.run(&first);
    ss.run(&first);
    let (one, per_set) = (s.state_bytes(), ss.state_bytes());
    for _ in 0..20 {
        let c = chunk();
        s.run(&c);
        ss.run(&c);
    }
    assert_eq!(s.histogram().references(), 2_100_000);
    assert!(s.state_bytes() <= one, "{} > {one}", s.state_bytes());
    assert!(
        ss.state_bytes() <= per_set * 2,
        "{} > 2 x {per_set}",
        ss.state_bytes()
    );
    assert!(one < 5000 * 200, "{one} bytes for 5,000 lines");
}

#[test]
fn bad_set_profiles_are_named() {
    assert_eq!(SetStacks::new(0, 4).unwrap_err().field, "sets");
    assert_eq!(SetStacks::new(4, 0).unwrap_err().field, "max_ways");
    let e = SetStacks::new(1 << 26, 64).unwrap_err();
    assert!(e.message.contains("lower max_ways"), "{}", e.message);
}
