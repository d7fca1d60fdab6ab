/*!
PMU glue and ticks: the multiplexed counters see what each core counted (`observe`, rotation
every `mux_interval`), the periodic tick (counters read, the time series recorded, the policy's
`tick` hook run), and data-address sampling (`maybe_sample`: whether the sampled event occurred
on an access, the interrupt's cost, the handler's own L1 pollution, the sample queued for the
policy once the record is counted).
*/
use super::*;

impl System {
    /// The multiplexing timer: the counters see what the core counted, and rotate when due.
    pub(super) fn rotate_counters(&mut self, core: usize) {
        let c = &mut self.cores[core];
        if c.clock_milli < c.next_mux {
            return;
        }
        self.observe(core);
        let c = &mut self.cores[core];
        while c.clock_milli >= c.next_mux {
            c.counters.rotate();
            c.next_mux += self.mux_milli;
        }
    }

    /// Feed the core's counters everything counted since they last looked.
    pub(super) fn observe(&mut self, core: usize) {
        let events = self.event_levels.events(&self.cores[core].tally);
        let c = &mut self.cores[core];
        let delta = events.since(&c.observed);
        let cycles = (c.clock_milli - c.observed_at) / 1000;
        match (&mut self.realistic, c.current) {
            // The thread that ran since the last look gets what the counters counted.
            (Some(r), Some(t)) => c.counters.observe_for(&delta, cycles, Some(r.thread(t))),
            _ => c.counters.observe(&delta, cycles),
        }
        c.observed = events;
        c.observed_at += cycles * 1000;
    }

    /// The periodic tick at `at` milli-cycles: counters read, time series recorded, policy run
    /// on `core` (none at the end of the run).
    pub(super) fn tick(&mut self, core: Option<usize>, at: u64) {
        for c in 0..self.cores.len() {
            self.save_counts(c);
            self.observe(c);
        }
        let prev = self.intervals.points.last().map_or(0, |i| i.time * 1000);
        let mut processes = Vec::with_capacity(self.processes.len());
        let mut series = Vec::with_capacity(self.processes.len());
        for pid in 0..self.processes.len() {
            let t = self.process_tally(pid);
            let total = self.event_levels.events(&t);
            let p = &mut self.processes[pid];
            let interval = total.since(&p.last_tick);
            p.last_tick = total;
            // What the policy reads: the exact counts, or the OS's estimate from its threads'
            // virtual counters (the time series above stays exact: it is the report's truth).
            let (seen_total, seen_interval, readings) = match &mut self.realistic {
                None => (total, interval, Vec::new()),
                Some(r) => {
                    let readings = r.readings(&p.threads);
                    (r.estimate(&p.threads), r.interval(pid, &readings), readings)
                }
            };
            let ins = interval.get(Event::Instructions);
            let cycles = interval.get(Event::Cycles);
            series.push(IntervalProcess {
                name: p.name.clone(),
                instructions: ins,
                cycles: cycles as f64,
                ipc: ratio(ins, cycles),
                llc_misses: interval.get(Event::LlcMisses),
                llc_mpki: per_kilo(interval.get(Event::LlcMisses), ins),
                frames: p.space.as_ref().map_or(0, |s| s.mapped_pages()),
            });
            if p.arrival.is_some() {
                continue; // not started: the policy has not heard of it yet
            }
            processes.push(ProcessCounts {
                pid,
                alive: p.threads_left > 0,
                total: seen_total,
                interval: seen_interval,
                readings,
            });
        }
        self.intervals.push(Interval {
            time: at / 1000,
            processes: series,
        });
        if let Some(core) = core {
            let tick = Tick {
                now: at / 1000,
                interval: (at - prev) / 1000,
                cores: self.cores.iter().map(|c| c.counters.read()).collect(),
                processes,
            };
            self.run_hook(core, |p, k| p.tick(k, &tick));
        }
    }

    pub(super) fn process_tally(&self, pid: usize) -> Tally {
        let mut t = Tally::default();
        for &tid in &self.processes[pid].threads {
            t.add(&self.threads[tid].tally);
        }
        t
    }

    /// Count an occurrence of the sampled event, and take the sample when it is due.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn maybe_sample(
        &mut self,
        core: usize,
        tid: usize,
        vaddr: u64,
        paddr: u64,
        kind: Kind,
        served: u8,
        remote: bool,
        tlb_missed: bool,
    ) {
        let path = &self.paths[0];
        let depth = depth_on_path(path, served);
        let reached = |level: Option<usize>| {
            level.is_some_and(|l| index_on_path(path, l).is_some_and(|d| depth >= d))
        };
        let missed = |level: Option<usize>| {
            level.is_some_and(|l| index_on_path(path, l).is_some_and(|d| depth > d))
        };
        let el = self.event_levels;
        let c = &mut self.cores[core];
        let sampler = c.sampler.as_mut().expect("checked");
        let event = sampler.config.event;
        let occurred = match event {
            Event::L1dAccesses | Event::MemoryReferences => true,
            Event::L1dMisses => missed(Some(el.l1d)),
            Event::L2Accesses => reached(el.l2),
            Event::L2Misses => missed(el.l2),
            Event::LlcAccesses => reached(Some(el.llc)),
            Event::LlcMisses => missed(Some(el.llc)),
            Event::TlbMisses => tlb_missed,
            Event::RemoteCacheAccesses => remote,
            _ => false,
        };
        let source = if remote {
            DataSource::Remote
        } else if served == SERVED_BY_MEMORY {
            DataSource::Memory
        } else {
            DataSource::Level(served)
        };
        let taken = match &mut self.realistic {
            None => (occurred && sampler.occurrence()).then_some(Candidate {
                vaddr,
                paddr,
                write: kind.is_write(),
                source,
            }),
            Some(r) => {
                // POWER5's SDAR follows L1D misses when remote accesses are sampled (Azimi
                // section 5.2.1); otherwise the sampled event's own references.
                let matches_sdar = if event == Event::RemoteCacheAccesses {
                    missed(Some(el.l1d))
                } else {
                    occurred
                };
                if !occurred && !matches_sdar {
                    return;
                }
                let this = Candidate {
                    vaddr,
                    paddr,
                    write: kind.is_write(),
                    source,
                };
                r.hardware[core]
                    .reference(sampler, occurred, matches_sdar, this)
                    .map(|mut s| {
                        if event == Event::RemoteCacheAccesses {
                            // Software knows the remote counter overflowed, not where the
                            // SDAR's reference came from.
                            s.source = DataSource::Remote;
                        }
                        s
                    })
            }
        };
        let Some(taken) = taken else {
            return;
        };
        let sampler = self.cores[core].sampler.as_ref().expect("checked");
        let cost = sampler.config.cost_cycles;
        let pollute = sampler.config.pollute_l1_lines;
        let pid = self.threads[tid].pid;
        self.cores[core].samples += 1;
        self.charge_kernel(core, KernelPath::Interrupt, cost, Some(pid));
        if pollute > 0 {
            self.run_handler(core, pollute);
        }
        let sample = Sample {
            core: core as u32,
            thread: tid as u32,
            pid: pid as u32,
            write: taken.write,
            vaddr: taken.vaddr,
            paddr: taken.paddr,
            source: taken.source,
            cycle: self.cores[core].clock_milli / 1000,
        };
        // The policy sees it once the record is fully counted (`run_burst`): a hook that
        // migrates the running thread must not cut a record in two.
        self.samples_due.push(sample);
    }

    /// The sample handler touches `lines` lines of its own data, evicting the program's lines
    /// from L1 as a real handler does (ROCS section 3.1).
    pub(super) fn run_handler(&mut self, core: usize, lines: u32) {
        let base = match self.cores[core].handler_data {
            Some(b) => b,
            None => {
                // One page of kernel data per core, taken at the handler's first run.
                let all = ColorSet::all(self.memory.colors());
                let req = AllocRequest {
                    allowed: &all,
                    cpu: core,
                    asid: u32::MAX,
                    vpn: 0,
                };
                match self.memory.alloc(&req, Owner::Kernel) {
                    Ok(pfn) => {
                        let b = pfn << self.page_shift;
                        self.cores[core].handler_data = Some(b);
                        b
                    }
                    Err(_) => return, // no memory left: the handler's data stays cached elsewhere
                }
            }
        };
        for i in 0..lines as u64 {
            let rec = Record {
                addr: base + i * self.line_size,
                thread: self.cores[core].local,
                icount: 0,
                size: 8,
                kind: Kind::Load,
                privileged: true,
                syscall: 0,
            };
            self.access(core, &rec);
        }
    }
}

/// How far down `path` (a core's levels, nearest first) an access went: the index of the level
/// that `served` it, the path's length when memory did. The sampler and the per-page LLC profile
/// decide "reached" and "missed" a level from it.
pub(super) fn depth_on_path(path: &[u8], served: u8) -> usize {
    path.iter().position(|&l| l == served).unwrap_or(path.len())
}

/// The index of cache level `level` on `path`, if the path goes through it.
pub(super) fn index_on_path(path: &[u8], level: usize) -> Option<usize> {
    path.iter().position(|&l| l as usize == level)
}
