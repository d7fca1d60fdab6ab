/*!
The scheduler: the main loop (`run`: the core with the smallest clock runs a burst, ticks and
process arrivals fire in time order), idle balancing, delivery of scheduler events to the policy,
the policy-hook trampoline (`run_hook`: the policy is taken out and gets the rest of the system
as its `Kernel`), and thread and process exit (frames freed, TLBs flushed, the policy told).
*/
use super::*;

impl System {
    /// Run every thread to its end.
    pub fn run(&mut self) -> Result<(), Error> {
        self.run_observed(|_| true).map(|_| ())
    }

    /// Run every thread to its end, calling `on_tick` once per scheduler tick with how far the
    /// threads' sources have got (records summed; a total only when every thread knows its
    /// own). When it returns false the run stops there and returns `Ok(false)` (the system is
    /// then mid-run: its report is partial). The hook is how a front end shows progress and
    /// honours Ctrl-C; it never changes the simulation.
    pub fn run_observed(
        &mut self,
        on_tick: impl FnMut(crate::trace::Progress) -> bool,
    ) -> Result<bool, Error> {
        self.run_watched(on_tick, || true)
    }

    /// `run_observed`, and `keep_going` is asked once per block of work (`limits::StopCheck`:
    /// 1,024 bursts of at most 64 records, or ticks): false stops the run as `on_tick`'s does.
    /// How soon a front end stops a run then depends on neither the tick length nor the load.
    pub fn run_watched(
        &mut self,
        mut on_tick: impl FnMut(crate::trace::Progress) -> bool,
        mut keep_going: impl FnMut() -> bool,
    ) -> Result<bool, Error> {
        let mut work = crate::limits::StopCheck::default();
        let mut seen_tick = self.next_tick;
        loop {
            if self.next_tick != seen_tick {
                seen_tick = self.next_tick;
                let mut p = crate::trace::Progress {
                    total_bytes: Some(0),
                    total_records: Some(0),
                    ..Default::default()
                };
                for t in &self.threads {
                    let q = t.source.progress();
                    p.records += q.records;
                    p.bytes += q.bytes;
                    p.total_bytes = p.total_bytes.zip(q.total_bytes).map(|(a, b)| a + b);
                    p.total_records = p.total_records.zip(q.total_records).map(|(a, b)| a + b);
                }
                if !on_tick(p) {
                    return Ok(false);
                }
            }
            if self.balance {
                self.balance_idle_cores();
            }
            let next = (0..self.cores.len())
                .filter(|&c| self.cores[c].current.is_some() || !self.cores[c].queue.is_empty())
                .min_by_key(|&c| (self.cores[c].clock_milli, c));
            // A process whose start the busy cores have all reached (or that nothing else
            // precedes) starts now.
            if let Some(&pid) = self.arrivals.front() {
                let start = self.processes[pid].start * 1000;
                if next.is_none_or(|c| self.cores[c].clock_milli >= start) {
                    // Ticks before its start do not see it (with every core idle, none fired).
                    while self.next_tick <= start {
                        let at = self.next_tick;
                        self.tick(Some(next.unwrap_or(0)), at);
                        self.next_tick += self.tick_milli;
                        if work.due() && !keep_going() {
                            return Ok(false);
                        }
                    }
                    self.arrivals.pop_front();
                    self.start_process(pid)?;
                    continue;
                }
            }
            let Some(core) = next else {
                // The last interval, cut where the run ended.
                let end = self.cores.iter().map(|c| c.clock_milli).max().unwrap_or(0);
                if end > self.next_tick - self.tick_milli {
                    self.tick(None, end);
                }
                return Ok(true);
            };
            while self.cores[core].clock_milli >= self.next_tick {
                let at = self.next_tick;
                self.tick(Some(core), at);
                self.next_tick += self.tick_milli;
                if work.due() && !keep_going() {
                    return Ok(false);
                }
            }
            let c = &self.cores[core];
            if c.current.is_none() && c.queue.is_empty() {
                continue; // the tick's policy moved its work elsewhere
            }
            self.run_burst(core)?;
            self.deliver_events();
            if work.due() && !keep_going() {
                return Ok(false);
            }
        }
    }

    /// Give each idle core a waiting, unpinned thread from the core with the longest queue;
    /// the idle core's clock moves on to the moment it takes it.
    pub(super) fn balance_idle_cores(&mut self) {
        for idle in 0..self.cores.len() {
            if self.cores[idle].current.is_some() || !self.cores[idle].queue.is_empty() {
                continue;
            }
            let busiest = (0..self.cores.len())
                .filter(|&c| self.cores[c].queue.iter().any(|&t| !self.threads[t].pinned))
                .max_by_key(|&c| (self.cores[c].queue.len(), std::cmp::Reverse(c)));
            let Some(from) = busiest else { return };
            let pos = self.cores[from]
                .queue
                .iter()
                .rposition(|&t| !self.threads[t].pinned)
                .expect("filtered");
            let tid = self.cores[from].queue.remove(pos).expect("in range");
            let now = self.cores[from].clock_milli;
            let c = &mut self.cores[idle];
            if c.clock_milli < now {
                c.idle_milli += now - c.clock_milli;
                c.clock_milli = now;
            }
            c.queue.push_back(tid);
            self.threads[tid].core = idle;
            self.pending.push(SchedEvent::Migrated {
                tid,
                from,
                to: idle,
            });
        }
    }

    pub(super) fn deliver_events(&mut self) {
        let mut rounds = 0;
        while !self.pending.is_empty() && rounds < 16 {
            rounds += 1;
            for e in std::mem::take(&mut self.pending) {
                let core = match e {
                    SchedEvent::Switch { core, .. } => core,
                    SchedEvent::Migrated { to, .. } => to,
                    SchedEvent::Exited { tid } => self.threads[tid].core,
                };
                self.run_hook(core, |p, k| p.scheduled(k, &e));
            }
        }
    }

    /// Run a policy hook on `core` with the rest of the system as its kernel.
    pub(super) fn run_hook(
        &mut self,
        core: usize,
        f: impl FnOnce(&mut dyn Policy, &mut dyn policy::Kernel),
    ) {
        let mut p = self.policy.take().expect("policy hooks do not nest");
        f(p.as_mut(), &mut kernel::Ctx { sys: self, core });
        self.policy = Some(p);
    }

    pub(super) fn thread_exited(&mut self, tid: usize) {
        self.pending.push(SchedEvent::Exited { tid });
        let pid = self.threads[tid].pid;
        let p = &mut self.processes[pid];
        p.threads_left -= 1;
        if p.threads_left == 0 {
            self.check_contents(pid);
            if let Some(space) = self.processes[pid].space.take() {
                space.destroy(&mut self.memory);
            }
            for c in &mut self.cores {
                for t in &mut c.tlbs {
                    t.flush_asid(pid as u32);
                }
            }
            self.policy
                .as_mut()
                .expect("policy present")
                .process_exited(pid);
        }
    }
}
