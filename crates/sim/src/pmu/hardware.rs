/*!
The counters each preset's processor has: how many programmable counters a
core (hardware thread) has, and which events its fixed-function counters count. None of the
papers gives these numbers; each comes from the vendor's documentation, cited per entry. A
realistic PMU (`[pmu] ideal = false`) on a preset machine takes them unless the config gives
`pmu.counters` / `pmu.fixed` itself; the ideal PMU keeps the config's values (or the defaults).
*/
use super::Event;

/// The counters of one preset's processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmuHardware {
    pub preset: &'static str,
    /// Programmable counters per core (per hardware thread with SMT on).
    pub counters: usize,
    /// Events counted by fixed-function counters (never multiplexed).
    pub fixed: &'static [Event],
}

const CYCLES_INSTRUCTIONS: &[Event] = &[Event::Cycles, Event::Instructions];

pub const HARDWARE: &[PmuHardware] = &[
    // PowerPC 970FX User's Manual (IBM, 2006), chapter 10 "Performance Monitor": eight
    // programmable counters PMC1-PMC8, no fixed-function ones.
    PmuHardware {
        preset: "ppc970fx",
        counters: 8,
        fixed: &[],
    },
    // POWER5: six counters, PMC1-PMC4 programmable, PMC5 counting completed instructions and
    // PMC6 run cycles (Sinharoy et al., "POWER5 system microarchitecture", IBM J. Res. Dev.
    // 49(4/5), 2005, performance monitoring; the Linux perf POWER5 PMU driver's constraints).
    PmuHardware {
        preset: "power5",
        counters: 4,
        fixed: CYCLES_INSTRUCTIONS,
    },
    // Nehalem (Xeon E5506, Core i7-720QM): architectural performance monitoring version 3, four
    // general-purpose counters per thread and three fixed counters (instructions retired, core
    // cycles, reference cycles; the last is not an event here). Intel SDM volume 3B, "Performance
    // Monitoring for Processors Based on Intel Microarchitecture Code Name Nehalem".
    PmuHardware {
        preset: "xeon-e5506",
        counters: 4,
        fixed: CYCLES_INSTRUCTIONS,
    },
    PmuHardware {
        preset: "core-i7-720qm",
        counters: 4,
        fixed: CYCLES_INSTRUCTIONS,
    },
    // Sandy Bridge (Core i3-2100, Hyper-Threading on): four general-purpose counters per thread
    // (eight per core with HT off) and the three fixed counters. Intel SDM volume 3B, "Performance
    // Monitoring for Intel Core Processors Based on Sandy Bridge Microarchitecture".
    PmuHardware {
        preset: "core-i3-2100",
        counters: 4,
        fixed: CYCLES_INSTRUCTIONS,
    },
    // AMD family 10h (Opteron 2427, Istanbul): four performance counters PERF_CTR0-3, no fixed
    // ones. AMD BIOS and Kernel Developer's Guide for family 10h, section 2.16 / MSRC001_000[4:7].
    PmuHardware {
        preset: "opteron-2427",
        counters: 4,
        fixed: &[],
    },
    // POWER7: six counters, PMC1-PMC4 programmable, PMC5 instructions and PMC6 cycles (Power ISA
    // 2.06 Book III-S performance monitor; the Linux perf POWER7 PMU driver).
    PmuHardware {
        preset: "power7-740",
        counters: 4,
        fixed: CYCLES_INSTRUCTIONS,
    },
];

/// The counters of preset `name`, if it is one.
pub fn for_preset(name: &str) -> Option<&'static PmuHardware> {
    HARDWARE.iter().find(|h| h.preset == name)
}

/// Give a parsed system config (before deserialisation) the preset's counters where its `[pmu]`
/// table is silent, when the PMU is realistic (`ideal` false, given or by default).
pub fn apply_preset(doc: &mut serde_json::Value, preset: &str, ideal_default: bool) {
    let Some(hw) = for_preset(preset) else {
        return;
    };
    let Some(root) = doc.as_object_mut() else {
        return;
    };
    let pmu = root
        .entry("pmu")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    let Some(pmu) = pmu.as_object_mut() else {
        return; // not a table: deserialisation names the field
    };
    let ideal = pmu
        .get("ideal")
        .and_then(|v| v.as_bool())
        .unwrap_or(ideal_default);
    if ideal {
        return;
    }
    pmu.entry("counters").or_insert(hw.counters.into());
    pmu.entry("fixed").or_insert_with(|| {
        serde_json::Value::Array(hw.fixed.iter().map(|e| e.name().into()).collect())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_has_its_counters() {
        for p in crate::system::presets::PRESETS {
            let hw = for_preset(p.name).unwrap_or_else(|| panic!("{} has no PMU entry", p.name));
            assert!(hw.counters >= 4, "{}", p.name);
        }
    }
}
