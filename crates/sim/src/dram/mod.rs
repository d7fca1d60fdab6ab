/*!
The memory controller of a chip: channels with a peak bandwidth shared by every core of the
chip, and the queueing that makes a read's latency grow with the load.

`[machine.memory]` in a system config:

```toml
[machine.memory]
model = "queued"       # "queued" (the default): bandwidth and queueing (below); "fixed":
                       # every read costs timing.dram_latency whatever the load (an ideal bus)
channels = 3           # independent channels, each moving one line at a time
channel_gbps = 8.533   # peak GB/s of one channel (DDR3-1066: 1066 MT/s x 8 bytes)
core_ghz = 2.13        # the cores' clock: turns GB/s into bytes per cycle
```

**The model: a reservation calendar per chip.** Time is cut into slots of one line's transfer
time on one channel (`line / channel bytes per cycle`); a slot holds `channels` lines. Every
line moved between the chip and memory (a demand or prefetch read, a write-back) takes the
first slot at or after the moment it is issued that still has a free channel. A read's queueing
delay is the start of its slot minus the moment it was issued; `timing.dram_latency` stays the
unloaded latency, so a read costs `dram_latency + delay`. The delay is a stall of its own
(`bandwidth` in the stall breakdown): divided by `mlp` as the DRAM stall is, in full for a page
walk's read (walks are serial). Writes take slots (bandwidth) and stall nothing.

Why a calendar and not a busy-until timeline or a formula, for this engine: the system engine
runs the core with the smallest clock one burst (up to 64 records) at a time, so the requests
reach the controller in time order only up to a burst: a core that just ran a burst is ahead of
the next core by up to that burst's length. One busy-until time per channel would make the next
core's earlier request wait behind the later ones of the burst before it (a delay that is an
artefact of the interleaving); a calendar lets an earlier request take an earlier free slot.
A closed formula from the last epoch's utilization (M/D/c waiting time at utilization rho)
would cap nothing: with every core's demand above the peak the formula's latency lags a
window behind the load and the achieved bandwidth can pass the peak. The calendar never moves
more than `channels` lines per slot, so the achieved bandwidth saturates at the peak by
construction; below it, requests arriving at random find slots taken by others and wait as in
an M/D/c queue (`queued_reads_wait_as_an_md1_queue` checks the mean wait against
Pollaczek-Khinchine).

Within a batched burst each access is issued at the clock its record would have started at one
record at a time (the batch's start plus every earlier record's instructions, latency and
queueing delay), with its own traffic: the same times as records one at a time
(`System::queue_batch`).

Not modelled: row-buffer locality (open-page hits and conflicts, bank parallelism), refresh,
read/write turnaround, and the real controllers' gap between the theoretical peak and what they
sustain (about 70-85% of it on DDR2/DDR3 parts, STREAM figures): the calendar saturates at the
configured peak. Give `channel_gbps` a sustained figure to model the gap.
*/
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// How memory latency is modelled (`[machine.memory] model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DramModel {
    /// Every read costs `timing.dram_latency`; no bandwidth limit (an ideal bus;
    /// name it to compare with the ideal bus).
    Fixed,
    /// Channels with a peak bandwidth and a queue (the module comment): the default.
    #[default]
    Queued,
}

fn d_channels() -> u32 {
    2
}
fn d_channel_gbps() -> f64 {
    // DDR3-1333: 1333 MT/s x 8 bytes (JEDEC JESD79-3), a common part of the papers' era.
    10.667
}
fn d_core_ghz() -> f64 {
    2.5
}

/// `[machine.memory]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramConfig {
    #[serde(default)]
    pub model: DramModel,
    #[serde(default = "d_channels")]
    pub channels: u32,
    /// Peak bandwidth of one channel, GB/s (10^9 bytes per second).
    #[serde(default = "d_channel_gbps")]
    pub channel_gbps: f64,
    /// Core clock, GHz.
    #[serde(default = "d_core_ghz")]
    pub core_ghz: f64,
}

impl Default for DramConfig {
    fn default() -> Self {
        DramConfig {
            model: DramModel::default(),
            channels: d_channels(),
            channel_gbps: d_channel_gbps(),
            core_ghz: d_core_ghz(),
        }
    }
}

impl DramConfig {
    /// Field names are relative to `[machine.memory]` (the caller prefixes `machine.`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=64).contains(&self.channels) {
            return Err(ConfigError::new(
                "memory.channels",
                format!("{}: allowed 1 <= channels <= 64", self.channels),
            ));
        }
        if !(self.channel_gbps > 0.0 && self.channel_gbps <= 1000.0) {
            return Err(ConfigError::new(
                "memory.channel_gbps",
                format!(
                    "{}: a channel's peak bandwidth must be > 0 and <= 1000 GB/s",
                    self.channel_gbps
                ),
            ));
        }
        if !(self.core_ghz > 0.0 && self.core_ghz <= 100.0) {
            return Err(ConfigError::new(
                "memory.core_ghz",
                format!("{}: allowed 0 < core_ghz <= 100", self.core_ghz),
            ));
        }
        Ok(())
    }

    /// Peak bytes per core cycle over all channels.
    pub fn peak_bytes_per_cycle(&self) -> f64 {
        self.channels as f64 * self.channel_gbps / self.core_ghz
    }
}

/// Slots the calendar remembers: a request is never more than this many slots away from the
/// newest one taken (a burst's length plus the queue; about 650 k cycles at 10 cycles a slot).
const RING: usize = 1 << 16;

/// What a controller counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DramStats {
    /// Lines read (demand and prefetch) and written.
    pub reads: u64,
    pub writes: u64,
    /// Demand reads that were charged a queueing delay, and the delays summed (milli-cycles).
    pub demand_reads: u64,
    pub queue_milli: u64,
}

/// One chip's memory controller (the module comment).
#[derive(Debug, Clone)]
pub struct Controller {
    /// One line's transfer time on one channel, milli-cycles (at least 1).
    slot_milli: u64,
    channels: u32,
    /// Per slot number modulo `RING`: the slot number it holds and the lines taken in it.
    ring: Vec<(u64, u32)>,
    /// Slots `[full_from, full_to)` are all full: a request landing there skips to the end.
    full_from: u64,
    full_to: u64,
    pub stats: DramStats,
}

impl Controller {
    /// A queued controller for lines of `line_bytes` (a validated config).
    pub fn new(config: &DramConfig, line_bytes: u64) -> Controller {
        let per_channel = config.channel_gbps / config.core_ghz; // bytes per cycle
        let slot_milli = ((line_bytes as f64 * 1000.0 / per_channel).round() as u64).max(1);
        Controller {
            slot_milli,
            channels: config.channels,
            ring: vec![(u64::MAX, 0); RING],
            full_from: 0,
            full_to: 0,
            stats: DramStats::default(),
        }
    }

    /// One line's transfer time on one channel, milli-cycles.
    pub fn slot_milli(&self) -> u64 {
        self.slot_milli
    }

    /// Take a slot for one line issued at `at` (milli-cycles); returns the queueing delay.
    #[inline]
    fn take(&mut self, at: u64) -> u64 {
        let mut k = at / self.slot_milli;
        if (self.full_from..self.full_to).contains(&k) {
            k = self.full_to;
        }
        loop {
            let e = &mut self.ring[k as usize & (RING - 1)];
            if e.0 != k {
                if e.0 != u64::MAX && e.0 > k {
                    // More than RING slots behind the newest taken: cannot happen while clocks
                    // stay within a burst of each other; served without a delay.
                    debug_assert!(false, "calendar request {k} behind slot {}", e.0);
                    return 0;
                }
                *e = (k, 0);
            }
            if e.1 < self.channels {
                e.1 += 1;
                if e.1 == self.channels {
                    self.mark_full(k);
                }
                break;
            }
            k += 1;
        }
        (k * self.slot_milli).saturating_sub(at)
    }

    /// Slot `k` just filled: grow the known full run when it touches it.
    #[inline]
    fn mark_full(&mut self, k: u64) {
        if k == self.full_to {
            self.full_to += 1;
            // Slots beyond it may have filled before (taken by later requests).
            while {
                let e = self.ring[self.full_to as usize & (RING - 1)];
                e.0 == self.full_to && e.1 >= self.channels
            } {
                self.full_to += 1;
            }
        } else if k + 1 == self.full_from {
            self.full_from = k;
        } else if k > self.full_to {
            self.full_from = k;
            self.full_to = k + 1;
        }
    }

    /// A demand read of one line issued at `at`: its queueing delay in milli-cycles.
    #[inline]
    pub fn read(&mut self, at: u64) -> u64 {
        let d = self.take(at);
        self.stats.reads += 1;
        self.stats.demand_reads += 1;
        self.stats.queue_milli += d;
        d
    }

    /// Lines moved without a core waiting on them (write-backs, prefetch reads) at `at`.
    #[inline]
    pub fn background(&mut self, at: u64, reads: u64, writes: u64) {
        for _ in 0..reads + writes {
            self.take(at);
        }
        self.stats.reads += reads;
        self.stats.writes += writes;
    }

    /// Write-backs of `lines` lines issued at `at` that the issuing core waits for (the
    /// kernel clearing a page): the queueing delay of the last, milli-cycles.
    #[inline]
    pub fn write_backs(&mut self, at: u64, lines: u64) -> u64 {
        let mut delay = 0;
        for _ in 0..lines {
            delay = delay.max(self.take(at));
        }
        self.stats.writes += lines;
        delay
    }
}

#[cfg(test)]
mod tests;
