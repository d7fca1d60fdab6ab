/*!
Tests of the workload generators: the ANCHORS.md reference traces bit for bit (and their L1 hit
counts through a tiny LRU model), determinism, bounds, pattern shapes, store fractions, phases,
serde round trips and validation messages. `workload_speed` (ignored) measures generation rates:
`cargo test -p cachecolor-sim --release workload_speed -- --ignored --nocapture`.
*/
use super::*;
use crate::config::{from_json, from_toml};
use crate::trace::collect;

const MIB: u64 = 1 << 20;

fn records(spec: &WorkloadSpec) -> Vec<Record> {
    collect(&mut Workload::new(spec).unwrap()).unwrap()
}

fn addrs(spec: &WorkloadSpec) -> Vec<u64> {
    records(spec).iter().map(|r| r.addr).collect()
}

/// splitmix64 written out from ANCHORS.md's definition, independent of `crate::rng`:
/// output i uses state = seed + (i + 1) * 0x9E3779B97F4A7C15, then the 30/27/31 finaliser.
fn anchors_splitmix(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 48 KiB 12-way 64 B-line true-LRU cache (ANCHORS' L1), loads only: returns hits.
fn l1_hits(trace: &[u64]) -> u64 {
    const SETS: usize = 64;
    const WAYS: usize = 12;
    let mut sets: Vec<Vec<u64>> = (0..SETS).map(|_| Vec::with_capacity(WAYS)).collect();
    let mut hits = 0;
    for &a in trace {
        let line = a >> 6;
        let set = &mut sets[(line % SETS as u64) as usize];
        if let Some(pos) = set.iter().position(|&l| l == line) {
            hits += 1;
            set.remove(pos);
        } else if set.len() == WAYS {
            set.remove(0);
        }
        set.push(line);
    }
    hits
}

#[test]
fn uniform_first_outputs_match_direct_computation() {
    let spec = WorkloadSpec::single(Pattern::Uniform, Size(64 * MIB), 16, 1);
    let mut g = SplitMix64::new(1);
    let expect: Vec<u64> = (0..16)
        .map(|_| 0x2_0000_0000 + 8 * (g.next_u64() >> 41))
        .collect();
    assert_eq!(addrs(&spec), expect);
    // Non-power-of-two slot counts use Lemire's multiply-shift.
    let spec = WorkloadSpec::single(Pattern::Uniform, Size(3 * MIB), 16, 1);
    let mut g = SplitMix64::new(1);
    let slots = 3 * MIB / 8;
    let expect: Vec<u64> = (0..16)
        .map(|_| 0x2_0000_0000 + 8 * ((g.next_u64() as u128 * slots as u128) >> 64) as u64)
        .collect();
    assert_eq!(addrs(&spec), expect);
}

#[test]
fn anchors_uniform_traces_are_exact() {
    // ANCHORS.md: uniform over 64 MiB (seed 1, slot = z >> 41) and over 4 MiB (seed 2,
    // slot = z >> 45), 5 M 8-byte loads from base 0x200000000.
    for (footprint, seed, shift, l1_expected) in
        [(64 * MIB, 1, 41, 3_716), (4 * MIB, 2, 45, 58_465)]
    {
        let spec = WorkloadSpec::single(Pattern::Uniform, Size(footprint), 5_000_000, seed);
        let recs = records(&spec);
        assert_eq!(recs.len(), 5_000_000);
        for (i, r) in recs.iter().enumerate() {
            let want = 0x2_0000_0000 + 8 * (anchors_splitmix(seed, i as u64) >> shift);
            assert_eq!(r.addr, want, "seed {seed}, record {i}");
            assert_eq!(
                (r.kind, r.size, r.thread, r.privileged),
                (Kind::Load, 8, 0, false)
            );
        }
        // The ANCHORS L1 (48K/12, LRU) hit count on this trace.
        let a: Vec<u64> = recs.iter().map(|r| r.addr).collect();
        assert_eq!(l1_hits(&a), l1_expected, "seed {seed}");
    }
}

#[test]
fn anchors_sequential_trace_is_exact() {
    // addr = base + 8 i over 5 M references: 40 MB, inside a 64 MiB footprint (no wrap).
    let spec = WorkloadSpec::single(Pattern::Sequential, Size(64 * MIB), 5_000_000, 0);
    let a = addrs(&spec);
    assert!(a
        .iter()
        .enumerate()
        .all(|(i, &x)| x == 0x2_0000_0000 + 8 * i as u64));
    assert_eq!(l1_hits(&a), 4_375_000);
}

#[test]
fn determinism_and_seed_sensitivity() {
    let patterns = [
        Pattern::Uniform,
        Pattern::Zipf { alpha: 0.9 },
        Pattern::Harmonic,
        Pattern::PointerChain,
    ];
    for p in patterns {
        let mut spec = WorkloadSpec::single(p.clone(), Size(MIB), 10_000, 42);
        spec.phases[0].store_fraction = if p == Pattern::PointerChain { 0.0 } else { 0.5 };
        let a = records(&spec);
        assert_eq!(a, records(&spec), "{}: same seed, same stream", p.name());
        spec.seed = 43;
        assert_ne!(
            a,
            records(&spec),
            "{}: another seed, another stream",
            p.name()
        );
    }
}

#[test]
fn every_address_within_footprint() {
    let base = 0x7000_0000_1000;
    for p in [
        Pattern::Uniform,
        Pattern::Sequential,
        Pattern::Strided { stride: Size(4096) },
        Pattern::Zipf { alpha: 0.7 },
        Pattern::Zipf { alpha: 3.0 },
        Pattern::Harmonic,
        Pattern::PointerChain,
    ] {
        // A footprint that is not a multiple of the element size or a line.
        for (footprint, size) in [(100_000u64, 12u16), (1 << 16, 8), (64, 64)] {
            if matches!(p, Pattern::Strided { .. }) && footprint < 4096 {
                continue;
            }
            let mut spec = WorkloadSpec::single(p.clone(), Size(footprint), 50_000, 7);
            spec.phases[0].base = base;
            spec.phases[0].size = if matches!(p, Pattern::Strided { .. }) {
                8
            } else {
                size
            };
            for r in records(&spec) {
                assert!(
                    r.addr >= base && r.addr + r.size as u64 <= base + footprint,
                    "{}: {:#x} (+{}) outside [{base:#x}, +{footprint})",
                    p.name(),
                    r.addr,
                    r.size
                );
            }
        }
    }
}

#[test]
fn sequential_wraps_at_the_footprint() {
    let spec = WorkloadSpec::single(Pattern::Sequential, Size(80), 25, 0);
    let a = addrs(&spec);
    let want: Vec<u64> = (0..25u64).map(|i| 0x2_0000_0000 + 8 * (i % 10)).collect();
    assert_eq!(a, want);
}

#[test]
fn strided_rotates_and_covers_every_slot() {
    // 4 KiB of 8-byte slots with a 64-byte stride: 8 passes of 64 references.
    let spec = WorkloadSpec::single(Pattern::Strided { stride: Size(64) }, Size(4096), 1024, 0);
    let off: Vec<u64> = addrs(&spec).iter().map(|a| a - 0x2_0000_0000).collect();
    assert_eq!(&off[..3], &[0, 64, 128]);
    assert_eq!(off[63], 4032);
    assert_eq!(
        &off[64..66],
        &[8, 72],
        "the second pass starts one element on"
    );
    let mut first: Vec<u64> = off[..512].to_vec();
    first.sort_unstable();
    assert_eq!(
        first,
        (0..512).map(|i| 8 * i).collect::<Vec<_>>(),
        "one cycle covers all slots"
    );
    assert_eq!(&off[512..1024], &off[..512], "then it starts over");

    // Slots not divisible by the step: 10 slots, step 3 -> passes 0,3,6,9 | 1,4,7 | 2,5,8.
    let spec = WorkloadSpec::single(Pattern::Strided { stride: Size(24) }, Size(80), 12, 0);
    let slots: Vec<u64> = addrs(&spec)
        .iter()
        .map(|a| (a - 0x2_0000_0000) / 8)
        .collect();
    assert_eq!(slots, vec![0, 3, 6, 9, 1, 4, 7, 2, 5, 8, 0, 3]);
}

#[test]
fn pointer_chain_visits_every_line_once_per_cycle() {
    let lines = 1024u64;
    let spec = WorkloadSpec::single(Pattern::PointerChain, Size(lines * 64), 3 * lines, 5);
    let recs = records(&spec);
    assert!(recs
        .iter()
        .all(|r| r.kind == Kind::Load && (r.addr - 0x2_0000_0000) % 64 == 0));
    let l: Vec<u64> = recs.iter().map(|r| (r.addr - 0x2_0000_0000) / 64).collect();
    assert_eq!(l[0], 0, "the chain starts at line 0");
    for cycle in l.chunks(lines as usize) {
        let mut c = cycle.to_vec();
        c.sort_unstable();
        assert_eq!(c, (0..lines).collect::<Vec<_>>());
    }
    assert_eq!(
        &l[..lines as usize],
        &l[lines as usize..2 * lines as usize],
        "same chain each cycle"
    );
    // Not the identity walk: the chain is random.
    assert!(l.windows(2).filter(|w| w[1] == w[0] + 1).count() < 20);
}

#[test]
fn store_fraction_is_near_target() {
    let n = 1_000_000u64;
    for (p, pattern) in [
        (0.3, Pattern::Uniform),
        (0.05, Pattern::Sequential),
        (0.9, Pattern::Harmonic),
    ] {
        let mut spec = WorkloadSpec::single(pattern, Size(MIB), n, 3);
        spec.phases[0].store_fraction = p;
        let stores = records(&spec)
            .iter()
            .filter(|r| r.kind == Kind::Store)
            .count() as f64;
        // Binomial(n, p): within 5 standard deviations.
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (stores - n as f64 * p).abs() < 5.0 * sd,
            "p {p}: {stores} stores"
        );
    }
    for (p, kind) in [(0.0, Kind::Load), (1.0, Kind::Store)] {
        let mut spec = WorkloadSpec::single(Pattern::Uniform, Size(64 * MIB), 1000, 1);
        spec.phases[0].store_fraction = p;
        let recs = records(&spec);
        assert!(recs.iter().all(|r| r.kind == kind));
        // No coin is drawn at 0 or 1: the addresses are the plain uniform stream.
        let mut g = SplitMix64::new(1);
        assert!(recs
            .iter()
            .all(|r| r.addr == 0x2_0000_0000 + 8 * (g.next_u64() >> 41)));
    }
}

#[test]
fn zipf_hot_data_is_contiguous_from_base() {
    // With identity rank-to-slot mapping the hottest slots are the first ones.
    let spec = WorkloadSpec::single(Pattern::Zipf { alpha: 1.2 }, Size(MIB), 200_000, 8);
    let slots = MIB / 8;
    let mut counts = vec![0u32; slots as usize];
    for a in addrs(&spec) {
        counts[((a - 0x2_0000_0000) / 8) as usize] += 1;
    }
    assert!(counts[0] > counts[1] && counts[1] > counts[2] && counts[2] > counts[9]);
    // P(rank 1) for alpha 1.2 over 2^17 slots.
    let p1 = zipf::probabilities(slots, 1.2)[0];
    let sd = (200_000.0 * p1 * (1.0 - p1)).sqrt();
    assert!((counts[0] as f64 - 200_000.0 * p1).abs() < 5.0 * sd);
}

#[test]
fn harmonic_follows_one_over_rank_scattered() {
    let n = 4096u64;
    let draws = 400_000u64;
    let spec = WorkloadSpec::single(Pattern::Harmonic, Size(n * 8), draws, 21);
    let mut counts = vec![0u64; n as usize];
    for a in addrs(&spec) {
        counts[((a - 0x2_0000_0000) / 8) as usize] += 1;
    }
    // The hottest slot is not slot 0 (scattered), yet frequencies sorted descending follow
    // (1/r)/H_n at the head.
    let hottest = (0..n as usize).max_by_key(|&i| counts[i]).unwrap();
    assert_ne!(hottest, 0);
    let mut sorted = counts.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let p = zipf::probabilities(n, 1.0);
    for r in 0..3 {
        let e = p[r] * draws as f64;
        let sd = (draws as f64 * p[r] * (1.0 - p[r])).sqrt();
        assert!(
            (sorted[r] as f64 - e).abs() < 5.0 * sd,
            "rank {}: {} vs {e:.0}",
            r + 1,
            sorted[r]
        );
    }
    // The layout is fixed by the seed: the same slot is hottest in a second run.
    let again = addrs(&spec);
    assert_eq!(
        again
            .iter()
            .filter(|&&a| a == 0x2_0000_0000 + 8 * hottest as u64)
            .count() as u64,
        counts[hottest]
    );
}

#[test]
fn phases_concatenate_and_the_stream_continues() {
    let seq = PhaseSpec::new(Pattern::Sequential, Size(1024), 100);
    let uni = PhaseSpec::new(Pattern::Uniform, Size(64 * MIB), 100);
    let spec = WorkloadSpec {
        seed: 9,
        phases: vec![seq.clone(), uni.clone()],
        repeat: 1,
    };
    let a = addrs(&spec);
    assert_eq!(a.len(), 200);
    assert_eq!(
        a[..100],
        addrs(&WorkloadSpec {
            seed: 9,
            phases: vec![seq.clone()],
            repeat: 1
        })[..]
    );
    // Sequential draws nothing, so the uniform phase sees the stream from its start.
    assert_eq!(
        a[100..],
        addrs(&WorkloadSpec {
            seed: 9,
            phases: vec![uni.clone()],
            repeat: 1
        })[..]
    );
    // Two uniform phases = one twice as long (the stream continues).
    let two = WorkloadSpec {
        seed: 9,
        phases: vec![uni.clone(), uni.clone()],
        repeat: 1,
    };
    let long = WorkloadSpec::single(Pattern::Uniform, Size(64 * MIB), 200, 9);
    assert_eq!(addrs(&two), addrs(&long));
    // repeat = 3 of [uniform] = uniform x 3 references; sequential restarts each run.
    let rep = WorkloadSpec {
        seed: 9,
        phases: vec![uni.clone()],
        repeat: 3,
    };
    let long = WorkloadSpec::single(Pattern::Uniform, Size(64 * MIB), 300, 9);
    assert_eq!(addrs(&rep), addrs(&long));
    let rep = WorkloadSpec {
        seed: 9,
        phases: vec![seq.clone()],
        repeat: 2,
    };
    let a = addrs(&rep);
    assert_eq!(a[..100], a[100..]);
    // Thread and icount are per phase.
    let mut p2 = seq.clone();
    p2.thread = 3;
    p2.icount = 7;
    let spec = WorkloadSpec {
        seed: 0,
        phases: vec![seq, p2],
        repeat: 1,
    };
    let r = records(&spec);
    assert_eq!((r[99].thread, r[99].icount), (0, 0));
    assert_eq!((r[100].thread, r[100].icount), (3, 7));
}

#[test]
fn workload_is_a_sendable_source() {
    fn boxed<S: RecordSource + Send + 'static>(s: S) -> Box<dyn RecordSource + Send> {
        Box::new(s)
    }
    let spec = WorkloadSpec::single(Pattern::Uniform, Size(MIB), 10, 1);
    let mut b = boxed(Workload::new(&spec).unwrap());
    assert_eq!(collect(&mut b).unwrap().len(), 10);
}

#[test]
fn blocks_are_full_across_phases_and_progress_counts() {
    let p = PhaseSpec::new(Pattern::Uniform, Size(MIB), 50_000);
    let spec = WorkloadSpec {
        seed: 1,
        phases: vec![p.clone(), p],
        repeat: 2,
    };
    let mut w = Workload::new(&spec).unwrap();
    assert_eq!(w.total_records(), 200_000);
    assert_eq!(w.progress().total_records, Some(200_000));
    let mut buf = Vec::new();
    let mut sizes = Vec::new();
    while w.next_block(&mut buf).unwrap() {
        sizes.push(buf.len());
        assert_eq!(w.progress().records, sizes.iter().sum::<usize>() as u64);
    }
    assert!(buf.is_empty());
    assert_eq!(
        sizes,
        vec![
            BLOCK_RECORDS,
            BLOCK_RECORDS,
            BLOCK_RECORDS,
            200_000 - 3 * BLOCK_RECORDS
        ]
    );
    assert!(!w.next_block(&mut buf).unwrap(), "stays exhausted");
}

const TOML_SPEC: &str = r#"
seed = 7
repeat = 2

[[phases]]
pattern = "zipf"
alpha = 0.9
footprint = "64MiB"
references = 1000
store_fraction = 0.25

[[phases]]
pattern = "strided"
stride = "4KiB"
footprint = "1MiB"
references = 500
base = 0x300000000
size = 4
thread = 1
icount = 3

[[phases]]
pattern = "pointer-chain"
footprint = 65536
references = 10
"#;

#[test]
fn parses_toml_and_round_trips() {
    let spec: WorkloadSpec = from_toml(TOML_SPEC).unwrap();
    assert_eq!(spec.seed, 7);
    assert_eq!(spec.repeat, 2);
    assert_eq!(spec.phases[0].pattern, Pattern::Zipf { alpha: 0.9 });
    assert_eq!(spec.phases[0].footprint, Size(64 * MIB));
    assert_eq!(spec.phases[0].base, DEFAULT_BASE);
    assert_eq!(spec.phases[0].size, 8);
    assert_eq!(
        spec.phases[1].pattern,
        Pattern::Strided { stride: Size(4096) }
    );
    assert_eq!(
        (spec.phases[1].base, spec.phases[1].size),
        (0x3_0000_0000, 4)
    );
    assert_eq!((spec.phases[1].thread, spec.phases[1].icount), (1, 3));
    assert_eq!(spec.phases[2].pattern, Pattern::PointerChain);
    spec.validate().unwrap();
    assert_eq!(Workload::new(&spec).unwrap().total_records(), 2 * 1510);

    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(from_json::<WorkloadSpec>(&json).unwrap(), spec);
    let toml_text = toml::to_string(&spec).unwrap();
    assert_eq!(from_toml::<WorkloadSpec>(&toml_text).unwrap(), spec);

    // Defaults: seed 0, repeat 1.
    let s: WorkloadSpec =
        from_json(r#"{"phases":[{"pattern":"uniform","footprint":"4MiB","references":5}]}"#)
            .unwrap();
    assert_eq!(
        s,
        WorkloadSpec::single(Pattern::Uniform, Size(4 * MIB), 5, 0)
    );
    // Every pattern round-trips.
    for p in [
        Pattern::Uniform,
        Pattern::Sequential,
        Pattern::Strided { stride: Size(64) },
        Pattern::Zipf { alpha: 1.5 },
        Pattern::Harmonic,
        Pattern::PointerChain,
    ] {
        let s = WorkloadSpec::single(p, Size(MIB), 10, 1);
        assert_eq!(
            from_json::<WorkloadSpec>(&serde_json::to_string(&s).unwrap()).unwrap(),
            s
        );
        assert_eq!(
            from_toml::<WorkloadSpec>(&toml::to_string(&s).unwrap()).unwrap(),
            s
        );
    }
}

#[test]
fn the_documented_example_parses() {
    let doc = include_str!("mod.rs");
    let start = doc.find("```toml\n").unwrap() + "```toml\n".len();
    let text = &doc[start..start + doc[start..].find("```").unwrap()];
    let spec: WorkloadSpec = from_toml(text).unwrap();
    assert_eq!(spec.phases.len(), 2);
    assert_eq!(spec.phases[0].references, 5_000_000);
    assert_eq!(spec.phases[0].base, 0x2_0000_0000);
    Workload::new(&spec).unwrap();
}

#[test]
fn parse_errors_name_the_field() {
    let bad = |text: &str| from_toml::<WorkloadSpec>(text).unwrap_err();
    let phase = |extra: &str| {
        format!("[[phases]]\npattern = \"uniform\"\nfootprint = 4096\nreferences = 1\n{extra}")
    };

    let e = bad(&format!("colour = 1\n{}", phase("")));
    assert!(e.to_string().contains("colour"), "{e}");
    let e = bad(&phase("stores = 0.5"));
    assert_eq!(e.field, "phases[0].stores", "{e}");
    assert!(
        e.message.contains("store_fraction"),
        "lists the allowed keys: {e}"
    );
    let e = bad(&phase("alpha = 0.5"));
    assert!(
        e.message.contains("alpha") && e.message.contains("zipf"),
        "{e}"
    );
    let e = bad(&phase("stride = 64"));
    assert!(e.message.contains("stride"), "{e}");
    let e = bad("[[phases]]\npattern = \"zipf\"\nfootprint = 4096\nreferences = 1\n");
    assert!(e.message.contains("needs alpha"), "{e}");
    let e = bad("[[phases]]\npattern = \"strided\"\nfootprint = 4096\nreferences = 1\n");
    assert!(e.message.contains("needs stride"), "{e}");
    let e = bad("[[phases]]\npattern = \"gaussian\"\nfootprint = 4096\nreferences = 1\n");
    assert!(
        e.to_string().contains("pointer-chain"),
        "lists the allowed patterns: {e}"
    );
    let e = bad("[[phases]]\npattern = \"uniform\"\nfootprint = \"4 furlongs\"\nreferences = 1\n");
    assert_eq!(e.field, "phases[0].footprint", "{e}");
}

#[test]
fn validation_names_the_field_and_the_range() {
    let check = |f: &dyn Fn(&mut WorkloadSpec), field: &str, says: &str| {
        let mut spec = WorkloadSpec::single(Pattern::Uniform, Size(4096), 10, 0);
        spec.phases
            .insert(0, PhaseSpec::new(Pattern::Sequential, Size(4096), 1));
        f(&mut spec);
        let e = Workload::new(&spec).unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(
            e.message.contains(says),
            "{field}: `{e}` should say `{says}`"
        );
        assert_eq!(spec.validate().unwrap_err(), e);
    };
    check(
        &|s| s.phases[1].footprint = Size(4),
        "phases[1].footprint",
        "smaller than one element",
    );
    check(
        &|s| s.phases[1].references = 0,
        "phases[1].references",
        "at least 1",
    );
    check(&|s| s.phases[1].size = 0, "phases[1].size", "1..=65535");
    check(
        &|s| s.phases[1].store_fraction = 1.5,
        "phases[1].store_fraction",
        "[0, 1]",
    );
    check(
        &|s| s.phases[1].store_fraction = f64::NAN,
        "phases[1].store_fraction",
        "[0, 1]",
    );
    check(
        &|s| s.phases[1].pattern = Pattern::Zipf { alpha: 0.0 },
        "phases[1].alpha",
        "alpha > 0",
    );
    check(
        &|s| s.phases[1].pattern = Pattern::Zipf { alpha: -1.0 },
        "phases[1].alpha",
        "alpha > 0",
    );
    check(
        &|s| {
            s.phases[1].pattern = Pattern::Zipf {
                alpha: f64::INFINITY,
            }
        },
        "phases[1].alpha",
        "finite",
    );
    check(
        &|s| s.phases[1].pattern = Pattern::Strided { stride: Size(0) },
        "phases[1].stride",
        "positive multiple",
    );
    check(
        &|s| s.phases[1].pattern = Pattern::Strided { stride: Size(8192) },
        "phases[1].stride",
        "at most the footprint",
    );
    check(
        &|s| s.phases[1].pattern = Pattern::Strided { stride: Size(12) },
        "phases[1].stride",
        "multiple of size",
    );
    check(
        &|s| s.phases[1].base = u64::MAX - 100,
        "phases[1].footprint",
        "overflows",
    );
    check(
        &|s| {
            s.phases[1].pattern = Pattern::PointerChain;
            s.phases[1].footprint = Size(32);
        },
        "phases[1].footprint",
        "pointer-chain",
    );
    check(
        &|s| {
            s.phases[1].pattern = Pattern::PointerChain;
            s.phases[1].store_fraction = 0.1;
        },
        "phases[1].store_fraction",
        "must be 0",
    );
    check(
        &|s| {
            s.phases[1].pattern = Pattern::PointerChain;
            s.phases[1].size = 128;
        },
        "phases[1].size",
        "at most 64",
    );
    check(&|s| s.repeat = 0, "repeat", "at least 1");
    check(&|s| s.phases.clear(), "phases", "at least one phase");
    check(
        &|s| {
            s.phases[0].references = u64::MAX;
        },
        "phases",
        "overflows",
    );
}

/// CPU time of this thread in ns (`/proc/thread-self/schedstat`, Linux), so that rates on a
/// shared, loaded machine are not diluted by waiting for a core.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Generation speed per pattern (release build):
/// `cargo test -p cachecolor-sim --release workload_speed -- --ignored --nocapture`.
/// Prints records per second of wall time and of this thread's CPU time.
#[test]
#[ignore]
fn workload_speed() {
    let n = 100_000_000u64;
    let report = |name: &str, wall: f64, cpu: Option<f64>, sum: u64| {
        let cpu = cpu.map_or("n/a".to_string(), |c| format!("{:6.1}", n as f64 / c / 1e6));
        println!(
            "{name:28} {:6.1} M/s wall, {cpu} M/s cpu  (checksum {sum:x})",
            n as f64 / wall / 1e6
        );
    };
    // Baseline: the bare generator filling the same buffer shape.
    {
        let mut g = SplitMix64::new(1);
        let mut buf: Vec<Record> = Vec::with_capacity(BLOCK_RECORDS);
        let (t, c0) = (std::time::Instant::now(), thread_cpu_ns());
        let mut sum = 0u64;
        for _ in 0..n / BLOCK_RECORDS as u64 {
            buf.clear();
            buf.extend((0..BLOCK_RECORDS).map(|_| Record::load(g.next_u64())));
            sum = sum.wrapping_add(buf[buf.len() - 1].addr);
        }
        let cpu = thread_cpu_ns().zip(c0).map(|(a, b)| (a - b) as f64 / 1e9);
        report(
            "baseline: splitmix64 only",
            t.elapsed().as_secs_f64(),
            cpu,
            sum,
        );
    }
    let cases: Vec<(&str, Pattern, u64, f64)> = vec![
        ("uniform 64MiB", Pattern::Uniform, 64 * MIB, 0.0),
        ("uniform 64MiB stores 30%", Pattern::Uniform, 64 * MIB, 0.3),
        ("uniform 3MiB (non-pow2)", Pattern::Uniform, 3 * MIB, 0.0),
        ("sequential 64MiB", Pattern::Sequential, 64 * MIB, 0.0),
        (
            "strided 4KiB 64MiB",
            Pattern::Strided { stride: Size(4096) },
            64 * MIB,
            0.0,
        ),
        (
            "zipf 0.9 64MiB",
            Pattern::Zipf { alpha: 0.9 },
            64 * MIB,
            0.0,
        ),
        (
            "zipf 1.2 64MiB",
            Pattern::Zipf { alpha: 1.2 },
            64 * MIB,
            0.0,
        ),
        ("harmonic 64MiB", Pattern::Harmonic, 64 * MIB, 0.0),
        ("pointer-chain 1MiB", Pattern::PointerChain, MIB, 0.0),
        ("pointer-chain 64MiB", Pattern::PointerChain, 64 * MIB, 0.0),
    ];
    for (name, p, footprint, sf) in cases {
        let mut spec = WorkloadSpec::single(p, Size(footprint), n, 1);
        spec.phases[0].store_fraction = sf;
        let mut w = Workload::new(&spec).unwrap();
        let mut buf = Vec::new();
        let (t, c0) = (std::time::Instant::now(), thread_cpu_ns());
        let mut sum = 0u64;
        while w.next_block(&mut buf).unwrap() {
            sum = sum.wrapping_add(buf[buf.len() - 1].addr);
        }
        let cpu = thread_cpu_ns().zip(c0).map(|(a, b)| (a - b) as f64 / 1e9);
        report(name, t.elapsed().as_secs_f64(), cpu, sum);
    }
}

/// Pins the streams of the randomised patterns, so that a change to a sampler or a layout (which
/// changes every result built on it) is a deliberate one. If intended, paste the printed arrays.
#[test]
fn golden_streams() {
    // Slot numbers (8-byte elements) of the first references over 1 MiB, seed 1.
    let first = |p: Pattern| -> Vec<u64> {
        let spec = WorkloadSpec::single(p, Size(MIB), 8, 1);
        addrs(&spec)
            .iter()
            .map(|a| (a - DEFAULT_BASE) / 8)
            .collect()
    };
    let got = [
        first(Pattern::Zipf { alpha: 0.9 }),
        first(Pattern::Zipf { alpha: 1.2 }),
        first(Pattern::Harmonic),
        first(Pattern::PointerChain),
    ];
    println!("{got:?}");
    let want: [Vec<u64>; 4] = [
        vec![760, 68, 0, 2954, 2957, 52, 7, 1259],
        vec![6, 1, 0, 19, 19, 1, 0, 9],
        vec![80630, 76647, 110002, 27820, 27820, 114146, 78388, 64305],
        vec![0, 1920, 35704, 78032, 56320, 103536, 51856, 131016],
    ];
    assert_eq!(got, want);
}

const MIX_TOML: &str = r#"
seed = 3
[[phases]]
pattern = "mix"
references = 40000
parts = [
  { pattern = "sequential", footprint = "64KiB", base = 0x100000000, weight = 1 },
  { pattern = "uniform", footprint = "16KiB", base = 0x200000000, weight = 3 },
]
"#;

#[test]
fn mix_interleaves_parts_by_weight_each_over_its_own_footprint() {
    let spec: WorkloadSpec = from_toml(MIX_TOML).unwrap();
    let Pattern::Mix { parts } = &spec.phases[0].pattern else {
        panic!("a mix")
    };
    assert_eq!(parts.len(), 2);
    assert_eq!(spec.phases[0].footprint, Size(80 * 1024));
    let a = addrs(&spec);
    assert_eq!(a, addrs(&spec), "deterministic");
    let seq: Vec<u64> = a.iter().copied().filter(|&x| x < 0x2_0000_0000).collect();
    let uni = a.len() - seq.len();
    // Weight 1 : 3, so a quarter of 40,000 (binomial sd ~87).
    assert!((seq.len() as i64 - 10_000).abs() < 400, "{}", seq.len());
    assert!(a
        .iter()
        .filter(|&&x| x >= 0x2_0000_0000)
        .all(|&x| x < 0x2_0000_0000 + 16 * 1024));
    assert_eq!(uni + seq.len(), 40_000);
    // The sequential part walks its own footprint in order, wrapping at 64 KiB.
    for (i, &x) in seq.iter().enumerate() {
        assert_eq!(x, 0x1_0000_0000 + 8 * (i as u64 % 8192));
    }
    // Round trips through JSON and TOML.
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(from_json::<WorkloadSpec>(&json).unwrap(), spec);
    assert_eq!(
        from_toml::<WorkloadSpec>(&toml::to_string(&spec).unwrap()).unwrap(),
        spec
    );
    // A single part spends no draw on the choice: it is the plain pattern.
    let one = r#"seed = 5
[[phases]]
pattern = "mix"
references = 1000
parts = [{ pattern = "uniform", footprint = "16KiB" }]
"#;
    let plain = WorkloadSpec::single(Pattern::Uniform, Size(16 * 1024), 1000, 5);
    assert_eq!(addrs(&from_toml(one).unwrap()), addrs(&plain));
}

#[test]
fn mix_errors_name_the_part_field() {
    let mix = |parts: &str, extra: &str| {
        format!("[[phases]]\npattern = \"mix\"\nreferences = 10\n{extra}parts = [{parts}]\n")
    };
    let check = |text: String, field: &str| {
        let err = match from_toml::<WorkloadSpec>(&text) {
            Err(e) => e.to_string(),
            Ok(s) => s.validate().unwrap_err().to_string(),
        };
        assert!(err.contains(field), "{err} should name {field}");
    };
    check(
        mix(
            r#"{ pattern = "uniform", footprint = 4096, weight = 0 }"#,
            "",
        ),
        "phases[0].parts[0].weight",
    );
    check(
        mix(
            r#"{ pattern = "uniform", footprint = 4096 }, { pattern = "mix", footprint = 4096 }"#,
            "",
        ),
        "parts[1].pattern",
    );
    check(
        mix(
            r#"{ pattern = "strided", footprint = 4096, stride = 100 }"#,
            "",
        ),
        "phases[0].parts[0].stride",
    );
    check(mix("", ""), "phases[0].parts");
    check(
        mix(
            r#"{ pattern = "uniform", footprint = 4096 }"#,
            "footprint = 4096\n",
        ),
        "no alpha, stride or footprint",
    );
    check(
        "[[phases]]\npattern = \"uniform\"\nreferences = 1\n".into(),
        "footprint",
    );
}
