use super::*;
use crate::rng::SplitMix64;

fn config(channels: u32, channel_gbps: f64, core_ghz: f64) -> DramConfig {
    DramConfig {
        model: DramModel::Queued,
        channels,
        channel_gbps,
        core_ghz,
    }
}

/// Exponential inter-arrival times (Poisson arrivals) of mean `mean_milli`.
fn exp(rng: &mut SplitMix64, mean_milli: f64) -> u64 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-(1.0 - u).ln() * mean_milli).round() as u64
}

#[test]
fn queued_reads_wait_as_an_md1_queue() {
    // One channel, 64-byte lines at 6.4 bytes per cycle: a 10-cycle slot.
    let c = config(1, 6.4, 1.0);
    for rho in [0.3, 0.6, 0.8, 0.9] {
        let mut m = Controller::new(&c, 64);
        let s = m.slot_milli() as f64;
        assert_eq!(s, 10_000.0);
        let mut rng = SplitMix64::new(42);
        let (mut t, mut sum, n) = (0u64, 0u64, 200_000);
        // The same arrivals through a FIFO server (start = max(arrival, previous finish)):
        // brute force, and Pollaczek-Khinchine's Wq = rho s / (2 (1 - rho)) for it.
        let (mut finish, mut fifo) = (0u64, 0u64);
        for _ in 0..n {
            t += exp(&mut rng, s / rho);
            sum += m.read(t);
            let start = t.max(finish);
            fifo += start - t;
            finish = start + s as u64;
        }
        let mean = sum as f64 / n as f64 / s;
        let fifo = fifo as f64 / n as f64 / s;
        let pk = rho / (2.0 * (1.0 - rho));
        eprintln!("rho {rho}: calendar {mean:.3} slots, FIFO {fifo:.3}, P-K {pk:.3}");
        assert!((fifo - pk).abs() < 0.1 * pk + 0.02, "{fifo} vs {pk}");
        // The calendar serves whole slots: a request waits for the next slot boundary at
        // most half a slot less than a FIFO server on average (it never waits for the part
        // of a slot already past).
        assert!(
            mean <= fifo && fifo - mean < 0.5 + 0.05 * pk,
            "{mean} vs {fifo}"
        );
    }
}

#[test]
fn achieved_bandwidth_never_passes_the_peak() {
    // Three channels, a 10-cycle slot: 0.3 lines per cycle. Open loop, a line issued every
    // cycle (more than three times the peak): line i takes slot floor(i / 3), so it waits
    // exactly 10 floor(i / 3) - i cycles (D/D/3), and the lines go out at the peak.
    let c = config(3, 6.4, 1.0);
    let mut m = Controller::new(&c, 64);
    for i in 0..30_000u64 {
        assert_eq!(
            m.read(i * 1000),
            (10 * (i / 3)).saturating_sub(i) * 1000,
            "line {i}"
        );
    }
    // Ten requesters in bursts of 64 lines, the one with the smallest clock next (the engine's
    // order), each stalling for its lines' delays overlapped 10 at a time: never more than
    // three lines in a slot.
    let mut m = Controller::new(&c, 64);
    let mut clocks = [0u64; 10];
    let mut per_slot = std::collections::HashMap::new();
    for _ in 0..2_000 {
        let core = (0..10).min_by_key(|&i| (clocks[i], i)).unwrap();
        let mut delay = 0;
        for j in 0..64 {
            let at = clocks[core] + j * 20_000;
            let d = m.read(at);
            *per_slot.entry((at + d) / m.slot_milli()).or_insert(0u32) += 1;
            delay += d;
        }
        clocks[core] += 64 * 20_000 + delay / 10;
    }
    assert_eq!(per_slot.values().sum::<u32>(), 128_000);
    assert!(per_slot.values().all(|&n| n <= 3));
}

#[test]
fn an_earlier_request_takes_an_earlier_free_slot() {
    // The interleaving: core A runs a burst from t = 1000 slots, then core B (clock at slot
    // 10) issues. A single busy-until per channel would make B wait behind A's burst.
    let c = config(1, 6.4, 1.0);
    let mut m = Controller::new(&c, 64);
    for j in 0..50 {
        assert_eq!(m.read((1000 + j) * 10_000), 0);
    }
    assert_eq!(m.read(10 * 10_000), 0);
    // Within A's full run: the first free slot after it.
    assert_eq!(m.read(1020 * 10_000), 30 * 10_000);
    // Writes take slots too.
    m.background(2000 * 10_000, 0, 2);
    assert_eq!(m.read(2000 * 10_000), 2 * 10_000);
    assert_eq!(
        (m.stats.reads, m.stats.writes, m.stats.demand_reads),
        (53, 2, 53)
    );
}

#[test]
fn bad_memory_configs_name_the_field() {
    for (c, field) in [
        (config(0, 8.0, 2.0), "memory.channels"),
        (config(2, 0.0, 2.0), "memory.channel_gbps"),
        (config(2, f64::NAN, 2.0), "memory.channel_gbps"),
        (config(2, 8.0, 0.0), "memory.core_ghz"),
    ] {
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, field, "{e}");
    }
    config(2, 8.0, 2.0).validate().unwrap();
}
