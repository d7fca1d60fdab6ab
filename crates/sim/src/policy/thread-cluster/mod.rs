/*!
`thread-cluster`: sharing-aware thread placement (Azimi et al., case study 3, section 5; the
full method is Tam et al., EuroSys 2007, the paper's reference [36]). Four phases (5.2):

1. **Stall breakdown** (2.1, 5.2): at every tick, for each process with several threads, the
   share of its stall cycles due to remote cache accesses (its virtualised `stall-remote` over
   the sum of its stall counters: L2, LLC, DRAM, remote, TLB) in the last interval. Above
   `stall_threshold` the remote stalls are significant and detection starts. (The paper gives no
   number; its example, VolanoMark, has about 7% of its stall cycles from remote accesses and
   was clustered, so the default is 5%.)
2. **Sharing detection** (5.2.1): the sampler of every core takes one in `N` remote cache
   accesses; each sample's data address goes to the *shMap* of the thread that made it: 256
   8-bit saturating counters, one per 128-byte region (the coherence unit of the paper's
   machine). Regions are mapped to entries by a hash; *spatial sampling* keeps aliasing out: a
   global filter of the same 256 entries records which region each entry monitors, claimed by
   the first remote access that hashes to a free entry (so only regions with at least one
   remote access are selected, "somewhat randomly" by the hash); an access to a region that
   hashes to an entry held by another region is not counted. `N` is adjusted at every tick
   from the measured frequency of remote accesses so that each core delivers about
   `samples_per_tick` samples (5.2.1: "the value of N is further adjusted by taking two factors
   into account: (i) the frequency of remote cache accesses ... and (ii) the runtime
   overhead"), within `1..=max_period`. Detection lasts until `detect_samples` samples were
   recorded in shMaps (samples on regions outside the filter do not count) or `detect_ticks`
   ticks passed.
3. **Clustering**: threads whose shMaps are similar go into one cluster. Similarity is the
   cosine of two shMap vectors (their dot product, as [36], normalised so the threshold does
   not depend on how long detection ran); one pass in thread order: a thread joins the first
   cluster whose summed shMap it resembles by at least `similarity`, or starts a new one.
   Threads with no sampled sharing stay unclustered. Threads that share nothing have no
   monitored region in common (cosine 0); short detections give sparse shMaps whose cosine
   stays well below 1 even for threads sharing everything, hence the default of 0.2.
4. **Migration**: clusters, largest first, are placed on the chip with the most free room (each
   chip holds at most its share of the live threads, rounded up), preferring the chip that
   already runs most of the cluster; unclustered threads fill what is left, staying where they
   are if there is room. Inside a chip, threads keep their core when it has room, else go to
   the chip's least-loaded core. Each move is a `migrate` (its cost charged).

After a migration, detection is not started again for `cooldown_ticks` ticks; shMaps start
empty at each detection.

The paper's POWER5 cannot give the address of a remote access directly; it records L1-miss
addresses continuously and takes the last one when the remote-access counter overflows (an
approximation). Here the sampler delivers the remote access's own address and data source, as
the PMU extension the paper asks for in 6.1.2 would.

Report (`policy_report`): the detections (time, process, remote-stall share), the clusters
(threads per cluster, with their shMap occupancy), the migrations, the sampling period used.
*/
use super::{Kernel, MachineInfo, Placement, Policy, ProcessInfo, Tick};
use crate::error::ConfigError;
use crate::memory::ColorSet;
use crate::pmu::{DataSource, Event, Sample, SamplingConfig};
use crate::rng::mix64;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

mod report;
pub use report::{Clustering, Detection, Migration, ThreadClusterReport};

/// shMap entries (5.2.1: "each vector is given only 256 of these counters").
pub const SHMAP_ENTRIES: usize = 256;
/// Region size in bytes (5.2.1: "a region size of 128 bytes, which is the unit of cache
/// coherence in our system").
pub const REGION_BYTES: u64 = 128;

/// `[policy.thread-cluster]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThreadClusterConfig {
    /// Share of a process's stall cycles from remote accesses above which detection starts.
    pub stall_threshold: f64,
    /// Target samples per core per tick while detecting (sets N).
    pub samples_per_tick: u64,
    /// Largest N (one in N remote accesses sampled).
    pub max_period: u64,
    /// Samples recorded in shMaps that end detection.
    pub detect_samples: u64,
    /// Ticks that end detection (if fewer samples came).
    pub detect_ticks: u32,
    /// Cosine similarity of shMaps for two threads to share a cluster.
    pub similarity: f64,
    /// Cycles each sampling interrupt costs.
    pub sample_cost_cycles: u64,
    /// Ticks after a migration before detection may start again.
    pub cooldown_ticks: u32,
}

impl Default for ThreadClusterConfig {
    fn default() -> Self {
        ThreadClusterConfig {
            stall_threshold: 0.05,
            samples_per_tick: 16,
            max_period: 1 << 20,
            detect_samples: 512,
            detect_ticks: 50,
            similarity: 0.2,
            sample_cost_cycles: 2000,
            cooldown_ticks: 10,
        }
    }
}

// Validated in `ThreadCluster::new` (no NaN), so equality is reflexive.
impl Eq for ThreadClusterConfig {}

/// One thread's sharing summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShMap(pub [u8; SHMAP_ENTRIES]);

impl Default for ShMap {
    fn default() -> Self {
        ShMap([0; SHMAP_ENTRIES])
    }
}

impl ShMap {
    pub fn bump(&mut self, entry: usize) {
        self.0[entry] = self.0[entry].saturating_add(1);
    }
    pub fn occupied(&self) -> usize {
        self.0.iter().filter(|&&c| c > 0).count()
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&c| c == 0)
    }
}

/// Cosine similarity of two count vectors (0 if either is empty).
pub fn similarity(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// One pass of clustering (phase 3): `maps` in thread order; returns clusters of indices into
/// `maps`. Empty shMaps are left out.
pub fn cluster(maps: &[&ShMap], threshold: f64) -> Vec<Vec<usize>> {
    let mut clusters: Vec<(Vec<usize>, Vec<f64>)> = Vec::new();
    for (i, m) in maps.iter().enumerate() {
        if m.is_empty() {
            continue;
        }
        let v: Vec<f64> = m.0.iter().map(|&c| c as f64).collect();
        match clusters
            .iter_mut()
            .find(|(_, sum)| similarity(sum, &v) >= threshold)
        {
            Some((members, sum)) => {
                members.push(i);
                for (s, x) in sum.iter_mut().zip(&v) {
                    *s += x;
                }
            }
            None => clusters.push((vec![i], v)),
        }
    }
    clusters.into_iter().map(|(m, _)| m).collect()
}

/// The spatial-sampling filter: which region each shMap entry monitors.
#[derive(Debug, Clone)]
struct Filter([Option<(u32, u64)>; SHMAP_ENTRIES]);

impl Filter {
    /// The entry that counts `(pid, region)`, claiming a free one; None if another region
    /// holds it.
    fn entry(&mut self, pid: u32, region: u64) -> Option<usize> {
        let e = (mix64(region ^ (pid as u64).rotate_left(48)) % SHMAP_ENTRIES as u64) as usize;
        match self.0[e] {
            None => {
                self.0[e] = Some((pid, region));
                Some(e)
            }
            Some(held) if held == (pid, region) => Some(e),
            Some(_) => None,
        }
    }
    fn used(&self) -> usize {
        self.0.iter().filter(|e| e.is_some()).count()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Monitor,
    Detect { since_tick: u32, samples: u64 },
    Cooldown(u32),
}

#[derive(Debug)]
pub struct ThreadCluster {
    config: ThreadClusterConfig,
    machine: MachineInfo,
    all: ColorSet,
    names: BTreeMap<usize, String>,
    phase: Phase,
    period: u64,
    shmaps: BTreeMap<usize, ShMap>,
    filter: Filter,
    collisions: u64,
    detections: Vec<Detection>,
    clusterings: Vec<Clustering>,
    migrations: u64,
}

impl ThreadCluster {
    pub fn new(config: &ThreadClusterConfig, machine: &MachineInfo) -> Result<Self, ConfigError> {
        let f = |k: &str| format!("policy.thread-cluster.{k}");
        let c = config;
        if !(c.stall_threshold.is_finite() && (0.0..1.0).contains(&c.stall_threshold)) {
            return Err(ConfigError::new(
                f("stall_threshold"),
                format!(
                    "{}: a share of stall cycles in [0, 1) (e.g. 0.05)",
                    c.stall_threshold
                ),
            ));
        }
        if !(c.similarity.is_finite() && c.similarity > 0.0 && c.similarity <= 1.0) {
            return Err(ConfigError::new(
                f("similarity"),
                format!("{}: a cosine similarity in (0, 1]", c.similarity),
            ));
        }
        if c.samples_per_tick == 0 {
            return Err(ConfigError::new(
                f("samples_per_tick"),
                "0 is not allowed: at least 1 sample per tick",
            ));
        }
        if c.max_period == 0 {
            return Err(ConfigError::new(
                f("max_period"),
                "0 is not allowed: the sampling period is at least 1",
            ));
        }
        if c.detect_samples == 0 || c.detect_ticks == 0 {
            return Err(ConfigError::new(
                f(if c.detect_samples == 0 {
                    "detect_samples"
                } else {
                    "detect_ticks"
                }),
                "0 is not allowed: detection needs at least one sample and one tick",
            ));
        }
        Ok(ThreadCluster {
            config: config.clone(),
            machine: *machine,
            all: ColorSet::all(machine.colors),
            names: BTreeMap::new(),
            phase: Phase::Monitor,
            period: 1,
            shmaps: BTreeMap::new(),
            filter: Filter([None; SHMAP_ENTRIES]),
            collisions: 0,
            detections: Vec::new(),
            clusterings: Vec::new(),
            migrations: 0,
        })
    }

    fn sampling(&self) -> SamplingConfig {
        SamplingConfig {
            event: Event::RemoteCacheAccesses,
            period: self.period,
            cost_cycles: self.config.sample_cost_cycles,
            pollute_l1_lines: 0,
        }
    }

    /// Phase 4: place the clusters on chips and migrate.
    fn place(&mut self, k: &mut dyn Kernel, clusters: &[Vec<usize>]) -> Vec<Migration> {
        let m = self.machine;
        let chips = m.chips.max(1);
        let per_chip = m.cores_per_chip().max(1);
        let live: Vec<_> = k.threads().into_iter().filter(|t| !t.done).collect();
        let cap = live.len().div_ceil(chips);
        let mut room = vec![cap; chips];
        let mut target: BTreeMap<usize, usize> = BTreeMap::new(); // tid -> chip
        let current: BTreeMap<usize, usize> = live.iter().map(|t| (t.tid, t.core)).collect();
        let mut order: Vec<&Vec<usize>> = clusters.iter().collect();
        order.sort_by_key(|c| std::cmp::Reverse(c.len()));
        for c in order {
            let members: Vec<usize> = c
                .iter()
                .copied()
                .filter(|t| current.contains_key(t))
                .collect();
            if members.is_empty() {
                continue;
            }
            let here = |chip: usize| {
                members
                    .iter()
                    .filter(|t| m.chip_of(current[t]) == chip)
                    .count()
            };
            let chip = (0..chips)
                .filter(|&ch| room[ch] > 0)
                .max_by_key(|&ch| (room[ch].min(members.len()), here(ch), std::cmp::Reverse(ch)))
                .expect("room for every live thread");
            let n = room[chip].min(members.len());
            // Those already on the chip first, then the others in thread order.
            let mut take = members;
            take.sort_by_key(|t| (m.chip_of(current[t]) != chip, *t));
            for &t in &take[..n] {
                target.insert(t, chip);
            }
            room[chip] -= n;
            // The rest spill to the chips with the most room.
            for &t in &take[n..] {
                let ch = (0..chips)
                    .max_by_key(|&c| (room[c], std::cmp::Reverse(c)))
                    .expect("chips");
                target.insert(t, ch);
                room[ch] = room[ch].saturating_sub(1);
            }
        }
        for t in &live {
            if target.contains_key(&t.tid) {
                continue;
            }
            let mine = m.chip_of(t.core);
            let chip = if room[mine] > 0 {
                mine
            } else {
                (0..chips)
                    .max_by_key(|&c| (room[c], std::cmp::Reverse(c)))
                    .expect("chips")
            };
            room[chip] = room[chip].saturating_sub(1);
            target.insert(t.tid, chip);
        }
        // Inside each chip: keep the core if it has room, else the least-loaded core.
        let core_cap = cap.div_ceil(per_chip);
        let mut load = vec![0usize; m.cores];
        let mut moves = Vec::new();
        let mut pending = Vec::new();
        for t in &live {
            let chip = target[&t.tid];
            if m.chip_of(t.core) == chip && load[t.core] < core_cap {
                load[t.core] += 1;
            } else {
                pending.push((t.tid, chip, t.core));
            }
        }
        for (tid, chip, from) in pending {
            let to = (chip * per_chip..(chip + 1) * per_chip)
                .min_by_key(|&c| (load[c], c))
                .expect("cores on the chip");
            load[to] += 1;
            if k.migrate(tid, to).is_ok() {
                self.migrations += 1;
                moves.push(Migration {
                    thread: tid,
                    from,
                    to,
                });
            }
        }
        moves
    }

    fn finish_detection(&mut self, k: &mut dyn Kernel, now: u64) {
        k.set_sampling(None, None);
        let threads = k.threads();
        let tids: Vec<usize> = threads
            .iter()
            .filter(|t| !t.done && self.shmaps.contains_key(&t.tid))
            .map(|t| t.tid)
            .collect();
        let maps: Vec<&ShMap> = tids.iter().map(|t| &self.shmaps[t]).collect();
        let clusters: Vec<Vec<usize>> = cluster(&maps, self.config.similarity)
            .into_iter()
            .map(|c| c.into_iter().map(|i| tids[i]).collect())
            .collect();
        let occupancy: BTreeMap<String, usize> = tids
            .iter()
            .map(|t| (t.to_string(), self.shmaps[t].occupied()))
            .collect();
        let moves = if clusters.iter().any(|c| c.len() > 1) {
            self.place(k, &clusters)
        } else {
            Vec::new()
        };
        self.clusterings.push(Clustering {
            time: now,
            clusters,
            shmap_entries_used: occupancy,
            filter_regions: self.filter.used(),
            collisions: self.collisions,
            migrations: moves,
        });
        self.phase = Phase::Cooldown(self.config.cooldown_ticks);
    }
}

impl Policy for ThreadCluster {
    fn name(&self) -> &'static str {
        "thread-cluster"
    }
    fn counter_events(&self) -> Vec<Event> {
        // The stall breakdown (section 5.2.1's first phase) and the remote accesses for N.
        vec![
            Event::StallL2,
            Event::StallLlc,
            Event::StallDram,
            Event::StallRemote,
            Event::StallTlb,
            Event::RemoteCacheAccesses,
        ]
    }

    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        self.names.insert(p.pid, p.name.clone());
        Placement::default()
    }

    fn allowed_colors(&mut self, _pid: usize, _vpn: u64) -> &ColorSet {
        &self.all
    }

    fn sample(&mut self, _k: &mut dyn Kernel, s: &Sample) {
        let Phase::Detect {
            samples,
            since_tick,
        } = self.phase
        else {
            return;
        };
        if s.source != DataSource::Remote {
            return;
        }
        match self.filter.entry(s.pid, s.vaddr / REGION_BYTES) {
            Some(e) => {
                self.shmaps.entry(s.thread as usize).or_default().bump(e);
                self.phase = Phase::Detect {
                    samples: samples + 1,
                    since_tick,
                };
            }
            None => self.collisions += 1,
        }
    }

    fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        match self.phase {
            Phase::Cooldown(0) => self.phase = Phase::Monitor,
            Phase::Cooldown(n) => {
                self.phase = Phase::Cooldown(n - 1);
                return;
            }
            _ => {}
        }
        if self.machine.chips < 2 {
            return; // one chip: nothing is remote
        }
        match self.phase {
            Phase::Monitor => {
                let threads = k.threads();
                for pc in &t.processes {
                    let live = threads
                        .iter()
                        .filter(|th| th.pid == pc.pid && !th.done)
                        .count();
                    if !pc.alive || live < 2 {
                        continue;
                    }
                    let i = &pc.interval;
                    let stalls: u64 = [
                        Event::StallL2,
                        Event::StallLlc,
                        Event::StallDram,
                        Event::StallRemote,
                        Event::StallTlb,
                    ]
                    .iter()
                    .map(|&e| i.get(e))
                    .sum();
                    if stalls == 0 {
                        continue;
                    }
                    let share = i.get(Event::StallRemote) as f64 / stalls as f64;
                    if share > self.config.stall_threshold {
                        // N from the measured frequency of remote accesses (5.2.1).
                        let remote = i.get(Event::RemoteCacheAccesses);
                        let per_core = remote.div_ceil(self.machine.cores.max(1) as u64);
                        self.period = (per_core / self.config.samples_per_tick)
                            .clamp(1, self.config.max_period);
                        self.detections.push(Detection {
                            time: t.now,
                            process: self.names.get(&pc.pid).cloned(),
                            remote_stall_share: share,
                            period: self.period,
                        });
                        self.shmaps.clear();
                        self.filter = Filter([None; SHMAP_ENTRIES]);
                        self.collisions = 0;
                        self.phase = Phase::Detect {
                            since_tick: 0,
                            samples: 0,
                        };
                        k.set_sampling(None, Some(self.sampling()));
                        break;
                    }
                }
            }
            Phase::Detect {
                since_tick,
                samples,
            } => {
                if samples >= self.config.detect_samples
                    || since_tick + 1 >= self.config.detect_ticks
                {
                    self.finish_detection(k, t.now);
                    return;
                }
                // Re-adjust N to the remote-access rate of the last interval.
                let remote: u64 = t
                    .processes
                    .iter()
                    .map(|p| p.interval.get(Event::RemoteCacheAccesses))
                    .sum();
                let per_core = remote.div_ceil(self.machine.cores.max(1) as u64);
                let period =
                    (per_core / self.config.samples_per_tick).clamp(1, self.config.max_period);
                if period != self.period {
                    self.period = period;
                    k.set_sampling(None, Some(self.sampling()));
                }
                self.phase = Phase::Detect {
                    since_tick: since_tick + 1,
                    samples,
                };
            }
            Phase::Cooldown(_) => {}
        }
    }

    fn report(&self) -> Value {
        serde_json::to_value(ThreadClusterReport {
            shmap_entries: SHMAP_ENTRIES,
            region_bytes: REGION_BYTES,
            detections: self.detections.clone(),
            clusterings: self.clusterings.clone(),
            migrations: self.migrations,
        })
        .expect("plain data")
    }

    fn never_acted(&self) -> Option<String> {
        (self.migrations == 0).then(|| {
            format!(
                "thread-cluster migrated no thread ({} sharing detection(s)); the run is linux's \
                 scheduling{}",
                self.detections.len(),
                if self.detections.is_empty() {
                    ""
                } else {
                    " plus the detection's sampling cost"
                }
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(usize, u8)]) -> ShMap {
        let mut m = ShMap::default();
        for &(e, n) in entries {
            m.0[e] = n;
        }
        m
    }

    #[test]
    fn shmap_counters_saturate_at_255() {
        let mut m = ShMap::default();
        for _ in 0..300 {
            m.bump(7);
        }
        assert_eq!(m.0[7], 255);
        assert_eq!(m.occupied(), 1);
    }

    #[test]
    fn the_filter_keeps_one_region_per_entry() {
        let mut f = Filter([None; SHMAP_ENTRIES]);
        let e = f.entry(0, 42).unwrap();
        assert_eq!(f.entry(0, 42), Some(e));
        // Another region that hashes to the same entry is not counted (spatial sampling).
        let other = (43..100_000u64)
            .find(|&r| (mix64(r) % SHMAP_ENTRIES as u64) as usize == e)
            .unwrap();
        assert_eq!(f.entry(0, other), None);
        // The same region of another address space is another region.
        assert_ne!(f.entry(1, 42), Some(e));
        assert_eq!(f.used(), 1 + usize::from(f.entry(1, 42).is_some()));
    }

    #[test]
    fn threads_sharing_regions_cluster_together() {
        // Threads 0 and 2 share entries 1..10, threads 1 and 3 entries 100..110; thread 4 has
        // no sampled sharing.
        let a: Vec<(usize, u8)> = (1..10).map(|e| (e, 5)).collect();
        let b: Vec<(usize, u8)> = (100..110).map(|e| (e, 3)).collect();
        let maps = [
            map(&a),
            map(&b),
            map(&a[2..]),
            map(&b[1..]),
            ShMap::default(),
        ];
        let refs: Vec<&ShMap> = maps.iter().collect();
        assert_eq!(cluster(&refs, 0.5), vec![vec![0, 2], vec![1, 3]]);
        // A threshold of 1 needs identical directions.
        assert_eq!(cluster(&refs, 1.0).len(), 4);
        assert_eq!(similarity(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert!((similarity(&[2.0, 2.0], &[1.0, 1.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn bad_parameters_are_named() {
        let m = MachineInfo::for_tests(4, 2);
        let bad = |f: fn(&mut ThreadClusterConfig)| {
            let mut c = ThreadClusterConfig::default();
            f(&mut c);
            ThreadCluster::new(&c, &m).unwrap_err().field
        };
        assert_eq!(
            bad(|c| c.stall_threshold = 1.5),
            "policy.thread-cluster.stall_threshold"
        );
        assert_eq!(
            bad(|c| c.stall_threshold = -0.1),
            "policy.thread-cluster.stall_threshold"
        );
        assert_eq!(
            bad(|c| c.similarity = 0.0),
            "policy.thread-cluster.similarity"
        );
        assert_eq!(
            bad(|c| c.samples_per_tick = 0),
            "policy.thread-cluster.samples_per_tick"
        );
        assert_eq!(
            bad(|c| c.max_period = 0),
            "policy.thread-cluster.max_period"
        );
        assert_eq!(
            bad(|c| c.detect_samples = 0),
            "policy.thread-cluster.detect_samples"
        );
        assert_eq!(
            bad(|c| c.detect_ticks = 0),
            "policy.thread-cluster.detect_ticks"
        );
    }
}
