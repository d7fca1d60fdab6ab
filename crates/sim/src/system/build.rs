/*!
Building a `System` from its config (`System::new`, `System::with_policy`): the config was
parsed strictly and presets resolved before (`presets`, the "parse" step; serde with
`deny_unknown_fields`); here every cross-field rule is checked with the field named in the
error (chips, levels, timing, scheduler, PMU and sampling, each process's colors, pins,
huge-page ranges and thread sources: the "check" step), then the machine, its memory, policy,
cores and processes are built (the "build" step; ripgrep's lowargs/hiargs shape). Processes
starting at cycle 0 are created here, the others queued for `run` (`start_process`).
*/
use super::*;

impl System {
    /// The system `config` describes, under the policy its `[policy]` names.
    pub fn new(config: &SystemConfig) -> Result<System, Error> {
        Self::build(config, None)
    }

    /// The system `config` describes, under a policy of the caller's (a policy written outside
    /// this crate, or a test's).
    pub fn with_policy(config: &SystemConfig, policy: Box<dyn Policy>) -> Result<System, Error> {
        Self::build(config, Some(policy))
    }

    pub(super) fn build(
        config: &SystemConfig,
        policy: Option<Box<dyn Policy>>,
    ) -> Result<System, Error> {
        let m = &config.machine;
        if !(1..=32).contains(&m.chips) {
            return Err(ConfigError::new(
                "machine.chips",
                format!("{}: allowed 1..=32 chips", m.chips),
            )
            .into());
        }
        let hierarchy = Hierarchy::new(&m.hierarchy)
            .map_err(|e| ConfigError::new(format!("machine.hierarchy.{}", e.field), e.message))?;
        let hc = hierarchy.config().clone();
        if hc.levels.len() > MAX_LEVELS {
            return Err(ConfigError::new(
                "machine.hierarchy.levels",
                format!(
                    "{} levels: a system models at most {MAX_LEVELS}",
                    hc.levels.len()
                ),
            )
            .into());
        }
        let per_chip = hc.cores as usize;
        let cores = per_chip * m.chips as usize;
        let page_size = hc.page_size.0;
        let llc = hc.levels.len() - 1;
        let colors = hierarchy.cache(llc, 0).geometry().colors();
        let timing = Timing::new(&m.timing, hc.levels.len())
            .map_err(|e| ConfigError::new(format!("machine.{}", e.field), e.message))?;
        m.memory
            .validate()
            .map_err(|e| ConfigError::new(format!("machine.{}", e.field), e.message))?;
        // One controller per chip when the queued model is on (`crate::dram`).
        let controllers = match m.memory.model {
            crate::dram::DramModel::Fixed => Vec::new(),
            crate::dram::DramModel::Queued => (0..m.chips)
                .map(|_| crate::dram::Controller::new(&m.memory, hc.line_size as u64))
                .collect(),
        };
        if m.chips > 1 && m.timing.remote_latency == 0 {
            return Err(ConfigError::new(
                "machine.timing.remote_latency",
                "a machine of several chips needs the latency of a read served by another chip's cache",
            )
            .into());
        }
        AddressSpace::validate(&m.mmu)?;
        crate::limits::check_system_memory(config, crate::limits::hierarchy_state(&hc), page_size)?;
        let memory = PhysicalMemory::new(&config.memory, page_size, colors, cores)?;
        let policy = match policy {
            Some(p) => p,
            None => {
                let g = hierarchy.cache(llc, 0).geometry();
                let (pmu_counters, pmu_events) = policy::MachineInfo::pmu_of(&config.pmu);
                let machine = policy::MachineInfo {
                    cores,
                    chips: m.chips as usize,
                    colors,
                    llc_size: g.size(),
                    llc_ways: g.ways(),
                    line_size: hc.line_size as u64,
                    page_size,
                    inner_colors: policy::MachineInfo::inner_colors_of(&hierarchy),
                    llc_miss_penalty: policy::MachineInfo::llc_miss_penalty_of(&m.timing),
                    page_move_cycles: policy::MachineInfo::page_move_cycles_of(
                        &m.timing, &m.memory, page_size,
                    ),
                    pmu_counters,
                    pmu_events,
                };
                policy::build(&config.policy, &machine)?
            }
        };
        let names: Vec<String> = config.processes.iter().map(|p| p.name.clone()).collect();
        policy.check_processes(&names)?;
        let s = &config.scheduler;
        if s.time_slice == 0 || s.tick == 0 {
            return Err(ConfigError::new(
                "scheduler",
                "time_slice and tick must be at least 1 cycle",
            )
            .into());
        }
        let pmu = &config.pmu;
        if pmu.mux_interval == 0 {
            return Err(ConfigError::new("pmu.mux_interval", "must be at least 1 cycle").into());
        }
        let (counters, realistic) = realistic_counters(pmu, policy.as_ref(), cores, config)?;
        let sampler = match &pmu.sampling {
            Some(sc) => {
                if !sc.event.has_data_address() {
                    return Err(ConfigError::new(
                        "pmu.sampling.event",
                        format!(
                            "`{}` has no data address to sample; sample one of l1d-accesses, l1d-misses, l2-accesses, l2-misses, llc-accesses, llc-misses, tlb-misses, remote-cache-accesses, memory-references",
                            sc.event.name()
                        ),
                    )
                    .into());
                }
                let max = page_size / hc.line_size as u64;
                if sc.pollute_l1_lines as u64 > max {
                    return Err(ConfigError::new(
                        "pmu.sampling.pollute_l1_lines",
                        format!(
                            "{}: the handler's data is one page, at most {max} lines",
                            sc.pollute_l1_lines
                        ),
                    )
                    .into());
                }
                Some(Sampler::new(sc.clone())?)
            }
            None => None,
        };
        let mut paths = [Vec::new(), Vec::new()];
        for (i, l) in hc.levels.iter().enumerate() {
            if l.serves != Serves::Instruction {
                paths[0].push(i as u8);
            }
            if l.serves != Serves::Data {
                paths[1].push(i as u8);
            }
        }
        let data = &paths[0];
        let event_levels = EventLevels {
            l1d: data.first().map_or(0, |&l| l as usize),
            l2: (data.len() > 2).then(|| data[1] as usize),
            llc,
        };
        let tlb = |c: &TlbConfig, name: &str| {
            Tlb::new(c).map_err(|e| ConfigError::new(format!("machine.tlb.{name}"), e.message))
        };
        let mut core_list = Vec::with_capacity(cores);
        for c in 0..cores {
            core_list.push(Core {
                chip: c / per_chip,
                local: (c % per_chip) as u32,
                clock_milli: 0,
                current: None,
                slice_end: 0,
                queue: VecDeque::new(),
                tlbs: [
                    tlb(&m.tlb.l1d, "l1d")?,
                    tlb(&m.tlb.l1i, "l1i")?,
                    tlb(&m.tlb.l2, "l2")?,
                ],
                tally: Tally::default(),
                burst_start: Tally::default(),
                saved: None,
                idle_kernel_milli: 0,
                idle_milli: 0,
                counters: counters.clone(),
                observed: EventCounts::default(),
                observed_at: 0,
                next_mux: pmu.mux_interval * 1000,
                sampler: sampler.clone(),
                samples: 0,
                context_switches: 0,
                tlb_l1_misses: 0,
                tlb_l2_misses: 0,
                handler_data: None,
            });
        }
        if config.processes.is_empty() {
            return Err(
                ConfigError::new("processes", "a system needs at least one [[processes]]").into(),
            );
        }
        let mut sys = System {
            chips: (0..m.chips).map(|_| hierarchy.clone()).collect(),
            coherence: Coherence::new(hc.line_size),
            controllers,
            memory,
            timing,
            policy_name: policy.name(),
            control: config.policy.control.then(report::ControlStats::default),
            policy: Some(policy),
            cores: core_list,
            processes: Vec::new(),
            threads: Vec::new(),
            page_shift: page_size.trailing_zeros(),
            line_size: hc.line_size as u64,
            level_names: hc.levels.iter().map(|l| l.name.clone()).collect(),
            paths,
            event_levels,
            slice_milli: s.time_slice * 1000,
            tick_milli: s.tick * 1000,
            next_tick: s.tick * 1000,
            mux_milli: pmu.mux_interval * 1000,
            balance: s.balance,
            pending: Vec::new(),
            intervals: report::Series::default(),
            violations: Vec::new(),
            batching: true,
            samples_due: Vec::new(),
            batch: batch::Batch::default(),
            arrivals: VecDeque::new(),
            mmu: m.mmu.clone(),
            next_core: 0,
            config: config.clone(),
            realistic,
            page_llc: None,
        };
        for (pid, p) in config.processes.iter().enumerate() {
            sys.add_process(pid, p)?;
        }
        let mut later: Vec<usize> = (0..sys.processes.len())
            .filter(|&pid| sys.processes[pid].arrival.is_some())
            .collect();
        later.sort_by_key(|&pid| (sys.processes[pid].start, pid));
        sys.arrivals = later.into();
        Ok(sys)
    }

    /// Check process `pid`'s config and open its threads' sources; create it now if it starts
    /// at cycle 0 (in config order, as every process did before `start` existed), else leave
    /// it for `run` to create at its start.
    pub(super) fn add_process(&mut self, pid: usize, p: &ProcessConfig) -> Result<(), Error> {
        let cores = self.cores.len();
        let colors = self.memory.colors();
        let field = |k: &str| format!("processes[{pid}].{k}");
        if p.threads.is_empty() {
            return Err(
                ConfigError::new(field("threads"), "a process needs at least one thread").into(),
            );
        }
        let colors_set = match &p.colors {
            Some(ranges) => {
                let mut set = ColorSet::empty(colors);
                for &[a, b] in ranges {
                    if a >= b || b > colors {
                        return Err(ConfigError::new(
                            field("colors"),
                            format!("range [{a}, {b}) is not within this LLC's colors 0..{colors}"),
                        )
                        .into());
                    }
                    for c in a..b {
                        set.insert(c);
                    }
                }
                Some(set)
            }
            None => None,
        };
        if let Some(pin) = &p.pin {
            if pin.is_empty() || pin.iter().any(|&c| c >= cores) {
                return Err(ConfigError::new(
                    field("pin"),
                    format!("{pin:?}: pinned cores must be within 0..{cores}"),
                )
                .into());
            }
        }
        let huge_bytes = ENTRIES << self.page_shift;
        let mut huge = Vec::new();
        for &[a, b] in p.huge_pages.iter().flatten() {
            if a >= b || a % huge_bytes != 0 || b % huge_bytes != 0 {
                return Err(ConfigError::new(
                    field("huge_pages"),
                    format!(
                        "[{a:#x}, {b:#x}): a huge-page range must be non-empty and start and end on a multiple of {huge_bytes:#x} bytes"
                    ),
                )
                .into());
            }
            huge.push((a >> self.page_shift, b >> self.page_shift));
        }
        let mut sources = Vec::with_capacity(p.threads.len());
        for (t, tc) in p.threads.iter().enumerate() {
            let (source, icount_floor): (Box<dyn RecordSource + Send>, u64) = match (
                &tc.workload,
                &tc.trace,
            ) {
                (Some(_), None) if tc.trace_threads.is_some() => {
                    return Err(ConfigError::new(
                        format!("processes[{pid}].threads[{t}].trace_threads"),
                        "applies to a thread fed by a `trace`, not a `workload`",
                    )
                    .into())
                }
                (Some(w), None) => (
                    Box::new(Workload::new(w).map_err(|e| {
                        ConfigError::new(
                            format!("processes[{pid}].threads[{t}].workload.{}", e.field),
                            e.message,
                        )
                    })?),
                    w.instruction_floor(),
                ),
                (None, Some(path)) => {
                    let format = Format::parse(&tc.format)?;
                    let mut source = trace::open(path, format)?;
                    if let Some(keep) = &tc.trace_threads {
                        if keep.is_empty() {
                            return Err(ConfigError::new(
                                    format!("processes[{pid}].threads[{t}].trace_threads"),
                                    "an empty list keeps no record: name the trace threads to run, or leave it out for all",
                                )
                                .into());
                        }
                        source = Box::new(thread_filter::ThreadFilter::new(source, keep));
                    }
                    (source, trace_instruction_floor(path, format)?)
                }
                _ => {
                    return Err(ConfigError::new(
                        format!("processes[{pid}].threads[{t}]"),
                        "give exactly one of `workload` or `trace`",
                    )
                    .into())
                }
            };
            // Addresses the page tables cannot translate are bad input (address_check.rs).
            let what = match &tc.trace {
                Some(path) => format!("processes[{pid}].threads[{t}] (trace {})", path.display()),
                None => format!("processes[{pid}].threads[{t}] (workload)"),
            };
            let source: Box<dyn RecordSource + Send> = Box::new(address_check::AddressCheck::new(
                source,
                what,
                self.page_shift,
                self.mmu.levels,
            ));
            sources.push((source, icount_floor));
        }
        self.processes.push(Process {
            name: p.name.clone(),
            space: None,
            threads_left: 0,
            threads: Vec::new(),
            frames: 0,
            huge_pages: 0,
            recolors: 0,
            lazy_recolors: 0,
            pages_per_color: vec![0; colors as usize],
            kernel: [[0; 2]; PATHS],
            huge,
            last_tick: EventCounts::default(),
            start: p.start,
            arrival: Some(Arrival {
                colors: colors_set,
                pin: p.pin.clone(),
                sources,
            }),
        });
        if p.start == 0 {
            self.start_process(pid)?;
        }
        Ok(())
    }

    /// Create process `pid` (at its start): the policy places it, it gets its address space,
    /// and its threads join their cores' run queues. An idle core that takes one of its threads
    /// waits (idle) until the start.
    pub(super) fn start_process(&mut self, pid: usize) -> Result<(), Error> {
        let a = self.processes[pid].arrival.take().expect("started once");
        let placement = self
            .policy
            .as_mut()
            .expect("policy present")
            .process_created(&ProcessInfo {
                pid,
                name: self.processes[pid].name.clone(),
                colors: a.colors,
                pinned: a.pin.clone(),
                threads: a.sources.len(),
            });
        let pin = placement.pin.or(a.pin);
        let page_size = 1u64 << self.page_shift;
        let space =
            AddressSpace::new(pid as u32, &self.mmu, &mut self.memory, page_size).map_err(|e| {
                ConfigError::new("memory.ram", format!("no frame for page tables: {e}"))
            })?;
        let start_milli = self.processes[pid].start * 1000;
        let cores = self.cores.len();
        let mut tids = Vec::with_capacity(a.sources.len());
        for (t, (source, icount_floor)) in a.sources.into_iter().enumerate() {
            let core = match &pin {
                Some(pin) => pin[t % pin.len()],
                None => {
                    let c = self.next_core % cores;
                    self.next_core += 1;
                    c
                }
            };
            let c = &mut self.cores[core];
            if c.current.is_none() && c.queue.is_empty() && c.clock_milli < start_milli {
                c.idle_milli += start_milli - c.clock_milli;
                c.clock_milli = start_milli;
            }
            let tid = self.threads.len();
            c.queue.push_back(tid);
            tids.push(tid);
            self.threads.push(Thread {
                pid,
                source,
                buf: Vec::new(),
                pos: 0,
                done: false,
                core,
                pinned: pin.is_some(),
                tally: Tally::default(),
                icount_floor,
            });
        }
        let p = &mut self.processes[pid];
        p.space = Some(space);
        p.threads_left = tids.len();
        p.threads = tids;
        Ok(())
    }
}

/// The cores' counters: as configured under the ideal PMU (today's oracle, bit for bit); under
/// a realistic one, the fixed events on fixed counters and `pmu.events` with the policy's own
/// (`Policy::counter_events`) on the programmable ones, with the state the realistic PMU keeps.
fn realistic_counters(
    pmu: &PmuConfig,
    policy: &dyn Policy,
    cores: usize,
    config: &SystemConfig,
) -> Result<(CounterSet, Option<RealisticPmu>), ConfigError> {
    let mut programmable: Vec<Event> = Vec::new();
    let wanted = if pmu.ideal {
        pmu.events.clone()
    } else {
        pmu.events
            .iter()
            .copied()
            .chain(policy.counter_events())
            .collect()
    };
    for e in wanted {
        let fixed = !pmu.ideal && pmu.fixed.contains(&e);
        if !fixed && (pmu.ideal || !programmable.contains(&e)) {
            programmable.push(e);
        }
    }
    if !pmu.multiplex && programmable.len() > pmu.counters {
        let names: Vec<String> = programmable.iter().map(|e| e.name()).collect();
        return Err(ConfigError::new(
            "pmu.events",
            format!(
                "{} events need programmable counters ({}; the policy's own included) but \
                 pmu.counters = {} and pmu.multiplex = false: allow multiplexing, raise \
                 pmu.counters, or ask for at most {} events",
                programmable.len(),
                names.join(", "),
                pmu.counters,
                pmu.counters
            ),
        ));
    }
    if pmu.ideal {
        return Ok((CounterSet::new(pmu.counters, &programmable)?, None));
    }
    let mut fixed: Vec<Event> = Vec::new();
    for &e in &pmu.fixed {
        if fixed.contains(&e) {
            return Err(ConfigError::new(
                "pmu.fixed",
                format!("`{}` is given twice", e.name()),
            ));
        }
        fixed.push(e);
    }
    let counters = CounterSet::with_fixed(pmu.counters, &fixed, &programmable)?;
    let hardware = (0..cores)
        .map(|c| {
            // The sampling randomness is the config's seed's, one stream per core.
            let seed = crate::rng::mix64(config.memory.seed ^ 0x504d_5500_0000_0000 ^ c as u64);
            SamplingHardware::new(pmu.sample_mode, pmu.skid, pmu.in_flight, seed)
        })
        .collect();
    let realistic = RealisticPmu {
        events: counters.events().to_vec(),
        threads: Vec::new(),
        hardware,
        last_readings: Vec::new(),
    };
    Ok((counters, Some(realistic)))
}

/// Instructions a trace's record counts at least: 0 when the trace carries instruction counts (a
/// non-zero `icount` in its first block: its `icount` is then exact, a data record right after its
/// instruction's fetch counts none), 1 when it carries none (an address-only trace, a din or lackey
/// file without instruction lines: it says nothing about instructions, and counting none would make
/// every IPC zero).
fn trace_instruction_floor(path: &std::path::Path, format: Format) -> Result<u64, Error> {
    let mut first = trace::open(path, format)?;
    let mut buf = Vec::new();
    first.next_block(&mut buf)?;
    let counted = buf.iter().any(|r| r.icount > 0);
    Ok(if counted || buf.is_empty() { 0 } else { 1 })
}
