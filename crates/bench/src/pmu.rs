//! The PMU provider (thesis 4.2.4), on Linux `perf_event_open`.
//!
//! Counting is user-only (`exclude_kernel`, `exclude_hv`), as the thesis configures its PMU
//! ("PMUs are always configured to only measure userspace cycles"), and counters are enabled
//! and disabled just outside the measured loop. Events are opened in small groups (a level's
//! accesses with its misses, cycles with instructions) so the ratios inside a group come from
//! the same time slices; groups are multiplexed by the kernel when the PMU has too few
//! counters, which is detected from `time_enabled` / `time_running` and scaled
//! (`value * enabled / running`), and reported (`multiplexed`, `running_fraction`).
//!
//! Every event is first probed on its own. An event the kernel or the CPU does not provide
//! (ENOENT, EOPNOTSUPP, EINVAL: in KVM guests without a virtual PMU every hardware event fails
//! with ENOENT) is reported "not supported" and never as a count of 0; EACCES / EPERM is
//! reported as a `perf_event_paranoid` problem with the fix. Software events (task clock, page
//! faults) are always attempted; the engine's own timing never depends on the PMU.
//!
//! Why raw `perf_event_open` through `libc` and not a perf crate: the provider needs the errno
//! of each event's own open (to tell "not supported" from "not permitted") and group reads
//! with `time_enabled` / `time_running`; that is ~150 lines on the syscall, no extra dependency
//! (the build machines have no registry cache for perf-event2 / perf-event-open).
//! perf has no generic L2 event, so L2 accesses and misses are raw, CPU-specific codes
//! (`l2_events`, from the vendors' event tables as perf ships them): AMD family 17h and later
//! (Zen: `l2_cache_req_stat`, event 0x64, umask 0xff for every core-to-L2 request, 0x09 for the
//! instruction- and data-cache misses in L2), Intel family 6 (`L2_RQSTS.REFERENCES` / `.MISS`,
//! event 0x24, umasks 0xff / 0x3f, Skylake and later) and arm64 (the architected `L2D_CACHE` /
//! `L2D_CACHE_REFILL`, 0x16 / 0x17). Another CPU gets "not supported: no L2 event known".

use serde::Serialize;

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_HW_CACHE: u32 = 3;
const PERF_TYPE_RAW: u32 = 4;
const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
const FORMAT_GROUP: u64 = 8;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_RESET: libc::c_ulong = 0x2403;
const IOC_FLAG_GROUP: libc::c_ulong = 1;

/// `struct perf_event_attr` up to `config2` (PERF_ATTR_SIZE_VER1, 72 bytes): the kernel takes
/// older sizes and zero-fills the rest.
#[repr(C)]
#[derive(Default)]
struct Attr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
}

const FLAG_DISABLED: u64 = 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

const fn hw_cache(id: u64, miss: bool) -> u64 {
    id | ((miss as u64) << 16)
}

/// One event the provider knows.
#[derive(Debug, Clone, Copy)]
pub struct EventSpec {
    pub name: &'static str,
    type_: u32,
    config: u64,
    /// Events of one group are scheduled together.
    pub group: &'static str,
}

pub const EVENTS: [EventSpec; 12] = [
    EventSpec {
        name: "cycles",
        type_: PERF_TYPE_HARDWARE,
        config: 0,
        group: "core",
    },
    EventSpec {
        name: "instructions",
        type_: PERF_TYPE_HARDWARE,
        config: 1,
        group: "core",
    },
    EventSpec {
        name: "l1d-loads",
        type_: PERF_TYPE_HW_CACHE,
        config: hw_cache(0, false),
        group: "l1d",
    },
    EventSpec {
        name: "l1d-load-misses",
        type_: PERF_TYPE_HW_CACHE,
        config: hw_cache(0, true),
        group: "l1d",
    },
    EventSpec {
        name: "llc-loads",
        type_: PERF_TYPE_HW_CACHE,
        config: hw_cache(2, false),
        group: "llc",
    },
    EventSpec {
        name: "llc-load-misses",
        type_: PERF_TYPE_HW_CACHE,
        config: hw_cache(2, true),
        group: "llc",
    },
    EventSpec {
        name: "cache-references",
        type_: PERF_TYPE_HARDWARE,
        config: 2,
        group: "cache",
    },
    EventSpec {
        name: "cache-misses",
        type_: PERF_TYPE_HARDWARE,
        config: 3,
        group: "cache",
    },
    EventSpec {
        name: "dtlb-loads",
        type_: PERF_TYPE_HW_CACHE,
        config: hw_cache(3, false),
        group: "tlb",
    },
    EventSpec {
        name: "dtlb-load-misses",
        type_: PERF_TYPE_HW_CACHE,
        config: hw_cache(3, true),
        group: "tlb",
    },
    EventSpec {
        name: "task-clock",
        type_: PERF_TYPE_SOFTWARE,
        config: 1,
        group: "sw",
    },
    EventSpec {
        name: "page-faults",
        type_: PERF_TYPE_SOFTWARE,
        config: 2,
        group: "sw",
    },
];

/// The raw L2 access and miss events of a CPU (see the module comment), or None when none is
/// known. `vendor` is /proc/cpuinfo's `vendor_id` (empty on arm64), `family` its `cpu family`.
pub fn l2_events(arch: &str, vendor: &str, family: u32) -> Option<[EventSpec; 2]> {
    let raw = |name, config| EventSpec {
        name,
        type_: PERF_TYPE_RAW,
        config,
        group: "l2",
    };
    let (accesses, misses) = match (arch, vendor) {
        ("x86_64", "AuthenticAMD") if family >= 0x17 => (0xff64, 0x0964),
        ("x86_64", "GenuineIntel") if family == 6 => (0xff24, 0x3f24),
        ("aarch64", _) => (0x16, 0x17),
        _ => return None,
    };
    Some([raw("l2-accesses", accesses), raw("l2-misses", misses)])
}

/// `vendor_id` and `cpu family` of /proc/cpuinfo (empty and 0 where it has none, as on arm64).
fn cpu_id() -> (String, u32) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let family = field("cpu family")
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    (field("vendor_id").unwrap_or_default(), family)
}

/// Every event this machine is asked for: the generic ones and, where known, the raw L2 pair.
pub fn events() -> Vec<EventSpec> {
    let (vendor, family) = cpu_id();
    let mut v = EVENTS.to_vec();
    if let Some(l2) = l2_events(std::env::consts::ARCH, &vendor, family) {
        v.extend(l2);
    }
    v
}

/// The outcome of probing one event on its own.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventStatus {
    pub name: String,
    /// "supported", "not supported" or "no permission".
    pub status: String,
    pub detail: Option<String>,
}

fn open(spec: &EventSpec, group_fd: i32) -> Result<i32, std::io::Error> {
    let mut a = Attr {
        type_: spec.type_,
        size: std::mem::size_of::<Attr>() as u32,
        config: spec.config,
        ..Default::default()
    };
    a.read_format = FORMAT_GROUP | FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING;
    a.flags = if group_fd < 0 { FLAG_DISABLED } else { 0 };
    if spec.type_ != PERF_TYPE_SOFTWARE {
        a.flags |= FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV;
    }
    // SAFETY: attr is a valid perf_event_attr prefix; pid 0 = this thread, cpu -1 = any.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &a as *const Attr,
            0,
            -1,
            group_fd,
            0u64,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd as i32)
}

fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Classify an open error.
pub fn classify(name: &str, err: &std::io::Error) -> EventStatus {
    let code = err.raw_os_error().unwrap_or(0);
    let (status, detail) = match code {
        libc::EACCES | libc::EPERM => (
            "no permission",
            format!(
                "perf_event_open: {err} (kernel.perf_event_paranoid = {}); allow user-space counting with \
                 'sudo sysctl kernel.perf_event_paranoid=2' or lower (1 for CPU-wide), or run as root",
                paranoid().map_or("?".into(), |p| p.to_string())
            ),
        ),
        libc::ENOENT | libc::EOPNOTSUPP | libc::EINVAL | libc::ENODEV => {
            ("not supported", format!("perf_event_open: {err} (this CPU / hypervisor does not provide the event)"))
        }
        libc::ENOSYS => ("not supported", "perf_event_open is not available in this kernel".into()),
        _ => ("not supported", format!("perf_event_open: {err}")),
    };
    EventStatus {
        name: name.to_string(),
        status: status.into(),
        detail: Some(detail),
    }
}

/// Probe every event on its own (open, close). On a CPU with no known L2 event, "l2-accesses"
/// and "l2-misses" are reported not supported with that reason.
pub fn probe_events() -> Vec<EventStatus> {
    let events = events();
    let mut out: Vec<EventStatus> = events
        .iter()
        .map(|e| match open(e, -1) {
            Ok(fd) => {
                // SAFETY: fd from perf_event_open.
                unsafe { libc::close(fd) };
                EventStatus {
                    name: e.name.into(),
                    status: "supported".into(),
                    detail: None,
                }
            }
            Err(err) => classify(e.name, &err),
        })
        .collect();
    if !events.iter().any(|e| e.group == "l2") {
        let (vendor, family) = cpu_id();
        for name in ["l2-accesses", "l2-misses"] {
            out.push(EventStatus {
                name: name.into(),
                status: "not supported".into(),
                detail: Some(format!(
                    "no L2 event known for this CPU ({} {vendor:?} family {family:#x}); perf has no generic one",
                    std::env::consts::ARCH
                )),
            });
        }
    }
    out
}

struct Group {
    leader: i32,
    members: Vec<(&'static str, i32)>,
}

/// Open counters for the calling thread.
pub struct Counters {
    groups: Vec<Group>,
    pub statuses: Vec<EventStatus>,
}

/// One event's reading over a measured interval.
#[derive(Debug, Clone, Serialize)]
pub struct Reading {
    pub name: String,
    /// The count scaled for multiplexing (raw * enabled / running); None if it never ran.
    pub value: Option<f64>,
    pub raw: u64,
    pub multiplexed: bool,
    pub running_fraction: f64,
}

impl Counters {
    /// Open every event the probe found supported, grouped by `EventSpec::group`; an event
    /// that opens alone but not in its group gets a group of its own.
    pub fn open(statuses: &[EventStatus]) -> Counters {
        let mut groups: Vec<Group> = Vec::new();
        let mut statuses = statuses.to_vec();
        let events = events();
        let mut names: Vec<&str> = events.iter().map(|e| e.group).collect();
        names.dedup();
        for g in names {
            let mut cur: Option<Group> = None;
            for e in events.iter().filter(|e| e.group == g) {
                let Some(st) = statuses.iter_mut().find(|s| s.name == e.name) else {
                    continue;
                };
                if st.status != "supported" {
                    continue;
                }
                let leader = cur.as_ref().map_or(-1, |c| c.leader);
                match open(e, leader) {
                    Ok(fd) => match cur.as_mut() {
                        Some(c) => c.members.push((e.name, fd)),
                        None => {
                            cur = Some(Group {
                                leader: fd,
                                members: vec![(e.name, fd)],
                            })
                        }
                    },
                    Err(_) => match open(e, -1) {
                        Ok(fd) => groups.push(Group {
                            leader: fd,
                            members: vec![(e.name, fd)],
                        }),
                        Err(err) => *st = classify(e.name, &err),
                    },
                }
            }
            if let Some(c) = cur {
                groups.push(c);
            }
        }
        Counters { groups, statuses }
    }

    pub fn enable(&self) {
        for g in &self.groups {
            // SAFETY: ioctl on our perf fds.
            unsafe {
                libc::ioctl(g.leader, IOC_RESET, IOC_FLAG_GROUP);
                libc::ioctl(g.leader, IOC_ENABLE, IOC_FLAG_GROUP);
            }
        }
    }

    pub fn disable(&self) {
        for g in &self.groups {
            // SAFETY: as enable.
            unsafe { libc::ioctl(g.leader, IOC_DISABLE, IOC_FLAG_GROUP) };
        }
    }

    /// Read every group: values scaled by time_enabled / time_running.
    pub fn read(&self) -> Vec<Reading> {
        let mut out = Vec::new();
        for g in &self.groups {
            let mut buf = vec![0u64; 3 + g.members.len()];
            // SAFETY: reading into a buffer of the right size.
            let n = unsafe {
                libc::read(
                    g.leader,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len() * 8,
                )
            };
            if n < 24 {
                continue;
            }
            let (enabled, running) = (buf[1], buf[2]);
            for (k, (name, _)) in g.members.iter().enumerate() {
                let raw = buf[3 + k];
                let frac = if enabled > 0 {
                    running as f64 / enabled as f64
                } else {
                    0.0
                };
                out.push(Reading {
                    name: name.to_string(),
                    value: (running > 0).then(|| raw as f64 * enabled as f64 / running as f64),
                    raw,
                    multiplexed: running < enabled,
                    running_fraction: frac,
                });
            }
        }
        out
    }
}

impl Drop for Counters {
    fn drop(&mut self) {
        for g in &self.groups {
            for (_, fd) in &g.members {
                // SAFETY: our fds.
                unsafe { libc::close(*fd) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_events_count_and_unsupported_are_never_zero() {
        let st = probe_events();
        assert_eq!(
            st.len(),
            EVENTS.len() + 2,
            "the generic events and the L2 pair"
        );
        assert!(st.iter().any(|s| s.name == "l2-misses"));
        for s in &st {
            assert!(
                ["supported", "not supported", "no permission"].contains(&s.status.as_str()),
                "{s:?}"
            );
            if s.status != "supported" {
                assert!(s.detail.is_some());
            }
        }
        let c = Counters::open(&st);
        c.enable();
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        c.disable();
        let r = c.read();
        // Only supported events produce readings.
        for x in &r {
            assert!(st
                .iter()
                .any(|s| s.name == x.name && s.status == "supported"));
        }
        if st
            .iter()
            .any(|s| s.name == "task-clock" && s.status == "supported")
        {
            let tc = r.iter().find(|x| x.name == "task-clock").unwrap();
            assert!(tc.value.unwrap() > 0.0);
            let pf = r.iter().find(|x| x.name == "page-faults").unwrap();
            assert!(pf.value.unwrap() >= 1000.0, "{pf:?}");
        }
    }

    #[test]
    fn l2_events_by_cpu() {
        let amd = l2_events("x86_64", "AuthenticAMD", 0x19).unwrap();
        assert_eq!((amd[0].name, amd[0].config), ("l2-accesses", 0xff64));
        assert_eq!((amd[1].name, amd[1].config), ("l2-misses", 0x0964));
        assert!(amd
            .iter()
            .all(|e| e.type_ == PERF_TYPE_RAW && e.group == "l2"));
        let intel = l2_events("x86_64", "GenuineIntel", 6).unwrap();
        assert_eq!([intel[0].config, intel[1].config], [0xff24, 0x3f24]);
        assert_eq!(
            l2_events("aarch64", "", 0).map(|e| [e[0].config, e[1].config]),
            Some([0x16, 0x17])
        );
        // Pre-Zen AMD and unknown vendors: none (reported not supported, never guessed).
        assert!(l2_events("x86_64", "AuthenticAMD", 0x15).is_none());
        assert!(l2_events("x86_64", "HygonGenuine", 0x18).is_none());
        assert!(l2_events("riscv64", "", 0).is_none());
    }

    #[test]
    fn errors_are_classified() {
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        let s = classify("cycles", &e);
        assert_eq!(s.status, "no permission");
        assert!(s.detail.unwrap().contains("perf_event_paranoid"));
        assert_eq!(
            classify("cycles", &std::io::Error::from_raw_os_error(libc::ENOENT)).status,
            "not supported"
        );
    }
}
