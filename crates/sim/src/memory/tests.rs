use super::*;
use crate::rng::SplitMix64;

const PAGE: u64 = 4096;

fn memory(kind: AllocatorKind, frames: u64, colors: u64) -> PhysicalMemory {
    let cfg = MemoryConfig {
        ram: Size(frames * PAGE),
        allocator: kind,
        pool_cap: 4,
        pcp_batch: 3,
        seed: 7,
        ..MemoryConfig::default()
    };
    PhysicalMemory::new(&cfg, PAGE, colors, 2).unwrap()
}

/// A fault of address space `asid` on virtual page `vpn`, on CPU 0.
fn request(allowed: &ColorSet, asid: u32, vpn: u64) -> AllocRequest<'_> {
    AllocRequest {
        allowed,
        cpu: 0,
        asid,
        vpn,
    }
}

const COLORED: [AllocatorKind; 5] = [
    AllocatorKind::Random,
    AllocatorKind::Sequential,
    AllocatorKind::BinHopping,
    AllocatorKind::ColorPool,
    AllocatorKind::Contiguous,
];

/// Random allocations (random color subsets, address spaces, CPUs) and frees until memory
/// runs out and beyond: every frame honours its colors, nothing is owned twice or leaks, and
/// an allocation fails only when no free frame of an allowed color exists.
fn churn(kind: AllocatorKind, frames: u64, colors: u64, seed: u64) {
    let mut m = memory(kind, frames, colors);
    let mut g = SplitMix64::new(seed);
    let mut held: Vec<(Pfn, u32)> = Vec::new();
    for step in 0..4 * frames {
        if g.below(3) > 0 || held.is_empty() {
            let allowed = if kind == AllocatorKind::Buddy || g.below(4) == 0 {
                ColorSet::all(colors)
            } else {
                let a = g.below(colors);
                let b = g.below(colors);
                ColorSet::range(colors, a.min(b), a.max(b) + 1).unwrap()
            };
            let asid = g.below(3) as u32;
            let req = AllocRequest {
                allowed: &allowed,
                cpu: g.below(2) as usize,
                asid,
                vpn: step,
            };
            match m.alloc(&req, Owner::Space(asid)) {
                Ok(pfn) => {
                    if m.allocator.places_by_color() {
                        assert!(allowed.contains(m.color_of(pfn)), "{kind:?}: color");
                    }
                    assert_eq!(m.owner(pfn), Owner::Space(asid));
                    held.push((pfn, asid));
                }
                Err(MemoryError::OutOfFrames { .. }) => {
                    let free_allowed = (0..frames)
                        .filter(|&p| m.owner(p) == Owner::Free && allowed.contains(p % colors))
                        .count();
                    assert_eq!(free_allowed, 0, "{kind:?} failed with frames free");
                }
                Err(e) => panic!("{kind:?}: {e}"),
            }
        } else {
            let (pfn, _) = held.swap_remove(g.below(held.len() as u64) as usize);
            m.free(pfn, g.below(2) as usize);
        }
        if step % 17 == 0 {
            let bad = m.check_invariants();
            assert!(bad.is_empty(), "{kind:?}: {bad:?}");
        }
    }
    for (pfn, _) in held.drain(..) {
        m.free(pfn, 0);
    }
    assert_eq!(m.free_frames(), frames);
    let bad = m.check_invariants();
    assert!(bad.is_empty(), "{kind:?}: {bad:?}");
}

#[test]
fn every_allocator_keeps_ownership_exact_under_churn() {
    for seed in 0..4 {
        churn(AllocatorKind::Buddy, 300, 8, seed);
        for kind in COLORED {
            churn(kind, 300, 8, seed);
            churn(kind, 97, 16, seed); // frames not a multiple of colors
        }
    }
}

#[test]
fn fresh_buddy_splits_and_merges_back() {
    let mut b = Buddy::new(1 << 12, 1, 31);
    let before = b.free_blocks();
    assert_eq!(
        before[MAX_ORDER_USIZE], 4,
        "4096 frames = four order-10 blocks"
    );
    let blocks: Vec<Pfn> = (0..100).map(|_| b.alloc_order(0).unwrap()).collect();
    assert_eq!(
        blocks,
        (0..100).collect::<Vec<_>>(),
        "a fresh system hands out frames in order"
    );
    for &p in blocks.iter().rev() {
        b.free_order(p, 0);
    }
    assert_eq!(
        b.free_blocks(),
        before,
        "frees merge back into the original blocks"
    );
}
const MAX_ORDER_USIZE: usize = buddy::MAX_ORDER as usize;

/// Colors of `n` consecutive page faults of one process, as a histogram, and how many pages
/// beyond an even spread land in already-full bins (the thesis's "misplaced pages", Figure
/// 3.3: sum over bins of max(0, count - ceil(n / colors))).
fn misplaced(m: &mut PhysicalMemory, n: u64) -> u64 {
    let colors = m.colors();
    let all = ColorSet::all(colors);
    let mut hist = vec![0u64; colors as usize];
    for v in 0..n {
        let req = request(&all, 1, v);
        let pfn = m.alloc(&req, Owner::Space(1)).unwrap();
        hist[m.color_of(pfn) as usize] += 1;
    }
    let even = n.div_ceil(colors);
    hist.iter().map(|&h| h.saturating_sub(even)).sum()
}

#[test]
fn aged_buddy_places_pages_like_random_and_a_fresh_one_like_contiguous() {
    let (frames, colors, n) = (1 << 16, 64u64, 64 * 8);
    let cfg = |kind, aged| MemoryConfig {
        ram: Size(frames * PAGE),
        allocator: kind,
        aged,
        seed: 3,
        ..MemoryConfig::default()
    };
    let mut fresh =
        PhysicalMemory::new(&cfg(AllocatorKind::Buddy, false), PAGE, colors, 1).unwrap();
    let mut aged = PhysicalMemory::new(&cfg(AllocatorKind::Buddy, true), PAGE, colors, 1).unwrap();
    let mut random =
        PhysicalMemory::new(&cfg(AllocatorKind::Random, false), PAGE, colors, 1).unwrap();
    let mut contiguous =
        PhysicalMemory::new(&cfg(AllocatorKind::Contiguous, false), PAGE, colors, 1).unwrap();
    assert!(aged.check_invariants().is_empty());
    assert_eq!(
        misplaced(&mut fresh, n),
        0,
        "fresh buddy: physically contiguous"
    );
    assert_eq!(misplaced(&mut contiguous, n), 0);
    let (a, r) = (misplaced(&mut aged, n), misplaced(&mut random, n));
    eprintln!("misplaced pages of {n}: aged buddy {a}, random {r}");
    // 512 pages over 64 bins of 8: a uniform placement misplaces about 72 pages (64 bins x
    // E[max(0, X - 8)], X ~ Binomial(512, 1/64): the thesis's eq. 3.1 model); an aged buddy
    // is of the same order, as Figure 3.3 found for Linux.
    assert!(r > 30 && a > 30, "random {r}, aged {a}");
    assert!(a * 2 > r && a < r * 2, "aged {a} vs random {r}");
}

#[test]
fn color_pool_round_robins_over_a_process_colors_and_caps_its_lists() {
    let colors = 8;
    let mut m = memory(AllocatorKind::ColorPool, 256, colors);
    let allowed = ColorSet::of(colors, [1, 3, 6]).unwrap();
    let mut got = Vec::new();
    let mut pfns = Vec::new();
    for v in 0..9 {
        let req = request(&allowed, 5, v);
        let pfn = m.alloc(&req, Owner::Space(5)).unwrap();
        got.push(m.color_of(pfn));
        pfns.push(pfn);
    }
    assert_eq!(got, [1, 3, 6, 1, 3, 6, 1, 3, 6]);
    for p in pfns {
        m.free(p, 0);
    }
    assert!(m.check_invariants().is_empty());

    // Frees beyond the per-list cap go back to the buddy system.
    let mut pool = ColorPool::new(Buddy::new(256, 1, 31), colors, 4, None);
    let one = ColorSet::of(colors, [1]).unwrap();
    let req = request(&one, 0, 0);
    let taken: Vec<Pfn> = (0..12).map(|_| pool.alloc(&req).unwrap()).collect();
    assert!(taken.iter().all(|p| p % colors == 1));
    assert_eq!(pool.pooled(1), 0);
    for p in taken {
        pool.free(p, 0);
    }
    assert_eq!(pool.pooled(1), 4, "a list keeps at most `cap` frames");
    assert_eq!(
        pool.free_frames().len(),
        256,
        "the rest went back to the buddy system"
    );
}

#[test]
fn bin_hopping_and_contiguous_walk_the_colors() {
    let colors = 4;
    for (kind, want) in [
        (AllocatorKind::BinHopping, vec![0, 2, 3, 0, 2, 3]),
        (AllocatorKind::Contiguous, vec![2, 3, 0, 2, 3, 0]),
    ] {
        let mut m = memory(kind, 64, colors);
        let allowed = ColorSet::of(colors, [0, 2, 3]).unwrap();
        let got: Vec<u64> = (0..6)
            .map(|v| {
                let req = AllocRequest {
                    allowed: &allowed,
                    cpu: 0,
                    asid: 1,
                    vpn: v + 1, // contiguous: page v takes the (v mod 3)-th allowed color
                };
                let pfn = m.alloc(&req, Owner::Space(1)).unwrap();
                m.color_of(pfn)
            })
            .collect();
        assert_eq!(got, want, "{kind:?}");
    }
}

#[test]
fn same_seed_same_frames() {
    for aged in [false, true] {
        let run = || {
            let cfg = MemoryConfig {
                ram: Size(4096 * PAGE),
                allocator: if aged {
                    AllocatorKind::Buddy
                } else {
                    AllocatorKind::Random
                },
                aged,
                seed: 11,
                ..MemoryConfig::default()
            };
            let mut m = PhysicalMemory::new(&cfg, PAGE, 32, 1).unwrap();
            let all = ColorSet::all(32);
            (0..200)
                .map(|v| {
                    let req = request(&all, 0, v);
                    m.alloc(&req, Owner::Space(0)).unwrap()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}

#[test]
fn bad_requests_and_configs_are_named() {
    let mut m = memory(AllocatorKind::Buddy, 64, 4);
    let some = ColorSet::of(4, [1]).unwrap();
    let req = request(&some, 0, 0);
    let e = m.alloc(&req, Owner::Space(0)).unwrap_err();
    assert!(
        e.to_string()
            .contains("`buddy` allocator does not place pages by color"),
        "{e}"
    );
    let none = ColorSet::empty(4);
    let req = AllocRequest {
        allowed: &none,
        ..req
    };
    assert_eq!(
        m.alloc(&req, Owner::Space(0)).unwrap_err(),
        MemoryError::NoColors
    );

    let e = ColorSet::of(4, [4]).unwrap_err();
    assert!(e.message.contains("color 4 does not exist") && e.message.contains("0..=3"));

    let mut small = memory(AllocatorKind::Random, 8, 4);
    let all = ColorSet::all(4);
    for v in 0..8 {
        let req = request(&all, 0, v);
        small.alloc(&req, Owner::Space(0)).unwrap();
    }
    let req = request(&all, 0, 9);
    let e = small.alloc(&req, Owner::Space(0)).unwrap_err();
    assert!(e.to_string().starts_with("out of memory"), "{e}");

    let cfg = MemoryConfig {
        ram: Size(4097),
        ..MemoryConfig::default()
    };
    let e = PhysicalMemory::new(&cfg, PAGE, 4, 1).unwrap_err();
    assert_eq!(e.field, "memory.ram");
    let e = serde_json::from_str::<MemoryConfig>(r#"{"allocator": "slab"}"#).unwrap_err();
    assert!(e.to_string().contains("unknown variant `slab`"), "{e}");
    assert!(e.to_string().contains("color-pool"), "{e}");
}

#[test]
fn huge_blocks_are_aligned_owned_and_merge_back() {
    for kind in [AllocatorKind::Buddy, AllocatorKind::ColorPool] {
        let mut m = memory(kind, 4096, 64);
        let all = ColorSet::all(64);
        let small = m.alloc(&request(&all, 1, 0), Owner::Space(1)).unwrap();
        let a = m.alloc_block(9, Owner::Space(1)).unwrap();
        let b = m.alloc_block(9, Owner::Space(2)).unwrap();
        assert_eq!((a % 512, b % 512), (0, 0), "{kind:?}");
        assert!(a.abs_diff(b) >= 512 && !(a..a + 512).contains(&small));
        assert_eq!(m.owner(a + 511), Owner::Space(1));
        assert_eq!(m.free_frames(), 4096 - 1 - 1024);
        assert!(
            m.check_invariants().is_empty(),
            "{:?}",
            m.check_invariants()
        );
        m.stamp(a + 3, 77);
        m.copy_page(a + 3, small);
        assert_eq!(m.content(small), 77);
        m.free_block(a, 9);
        assert_eq!(m.content(a + 3), 0, "a freed frame holds nothing");
        m.free_block(b, 9);
        m.free(small, 0);
        assert_eq!(m.free_frames(), 4096);
        assert!(
            m.check_invariants().is_empty(),
            "{:?}",
            m.check_invariants()
        );
    }
    let mut m = memory(AllocatorKind::Random, 4096, 64);
    let e = m.alloc_block(9, Owner::Space(1)).unwrap_err().to_string();
    assert!(
        e.contains("`random`") && e.contains("buddy or color-pool"),
        "{e}"
    );
    let mut m = memory(AllocatorKind::Buddy, 1024, 64);
    assert!(m.alloc_block(9, Owner::Space(1)).is_ok());
    assert!(m.alloc_block(9, Owner::Space(1)).is_ok());
    let e = m.alloc_block(9, Owner::Space(1)).unwrap_err().to_string();
    assert!(e.contains("no free aligned block of 512 frames"), "{e}");
}

#[test]
fn a_bounded_color_pool_runs_out_of_a_color_while_the_buddy_system_has_frames() {
    // COLORIS section 4: a pool of `pool_size` frames gives each color pool_size / colors.
    let colors = 8;
    let mut pool = ColorPool::new(Buddy::new(256, 1, 31), colors, 64, Some(32));
    let one = ColorSet::of(colors, [3]).unwrap();
    let req = request(&one, 0, 0);
    let taken: Vec<Pfn> = std::iter::from_fn(|| pool.alloc(&req)).collect();
    assert_eq!(taken.len(), 4, "32 frames over 8 colors: 4 of color 3");
    assert!(taken.iter().all(|p| p % colors == 3));
    let other = ColorSet::of(colors, [5]).unwrap();
    assert!(
        pool.alloc(&request(&other, 0, 0)).is_some(),
        "the pool still holds other colors"
    );
    // A free beyond its list's cap goes back to the buddy system, making room to draw again.
    let mut pool = ColorPool::new(Buddy::new(256, 1, 31), colors, 1, Some(16));
    let taken: Vec<Pfn> = std::iter::from_fn(|| pool.alloc(&req)).collect();
    assert_eq!(taken.len(), 2);
    pool.free(taken[0], 0);
    pool.free(taken[1], 0); // beyond the cap of 1: back to the buddy system
    assert_eq!(pool.pooled(3), 1);
    let again: Vec<Pfn> = std::iter::from_fn(|| pool.alloc(&req)).collect();
    assert!(!again.is_empty(), "the pooled frame is used again");
    assert_eq!(
        pool.free_frames().len() + again.len(),
        256,
        "every frame is free or held exactly once"
    );
}
