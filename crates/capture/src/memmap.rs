/*!
The traced process's memory map as trace metadata (issue 22, attribution; docs/trace-format.md
"Memory map").

The QEMU plugin (`maps=PATH`, qemu-plugin/cachecolor_trace.c) logs the host's
`/proc/self/maps` as diffs: event 0 at install (QEMU's own mappings, before the guest is
loaded), event 1 at the first translated block (the guest's program, loader and stack), then one
event after each successful `mmap`, `munmap`, `mremap`, `mprotect`, `brk`, `shmat`, `shmdt` and
`clone` that changed the map, each marked in the calling thread's stream by a MAPS record. The
decoder turns each mark into the index of the trace record it falls before, and [`build`] turns
the log into one JSON object: every guest mapping with the span of records during which it
existed.

Which mappings are the guest's: user-mode QEMU for a 64-bit guest on a 64-bit host runs with
guest_base 0, so guest and host addresses are one address space and the host's map holds both.
QEMU's own mappings are those of event 0 and anything new at or above the lowest of them (the
host kernel places QEMU's later mappings, its heap and thread stacks, there, top-down), plus
the pseudo-mappings (`[heap]`, `[stack]`, `[vdso]`, `[vvar]`, `[vsyscall]`, which are the host
process's: QEMU emulates the guest's heap and stack with anonymous mappings). The guest's are the
rest: QEMU places them from 0x4000000000 (its `TASK_UNMAPPED_BASE`) upward, or at the fixed
address of a non-PIE program. The program's own file must be among event 1's mappings; if it is
not (a QEMU that moved the guest), no map is kept.
*/
use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

/// Version of the `memory_map` metadata object (docs/trace-format.md).
pub const MEMORY_MAP_VERSION: u64 = 1;

/// Budget for the map's JSON within the header's 1 MiB of metadata.
const MAP_BYTES_BUDGET: usize = 768 << 10;

/// One line of `/proc/self/maps`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Line {
    start: u64,
    end: u64,
    perms: String,
    offset: u64,
    path: String,
}

fn parse_line(s: &str) -> Option<Line> {
    // start-end perms offset dev inode [path]
    let mut it = s.splitn(6, ' ');
    let range = it.next()?;
    let perms = it.next()?.to_string();
    let offset = u64::from_str_radix(it.next()?, 16).ok()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    let path = it.next().unwrap_or("").trim().to_string();
    let (a, b) = range.split_once('-')?;
    Some(Line {
        start: u64::from_str_radix(a, 16).ok()?,
        end: u64::from_str_radix(b, 16).ok()?,
        perms,
        offset,
        path,
    })
}

/// A distinct mapping, its kind and every span of records it existed in.
type Entry = (Line, &'static str, Vec<(u64, Option<u64>)>);

/// A guest mapping and the records during which it existed: `[from, to)`, `to` None = to the
/// end of the trace.
#[derive(Debug, Clone)]
struct Life {
    line: Line,
    from: u64,
    to: Option<u64>,
}

/// The `memory_map` metadata object from the plugin's log `text`, the MAPS marks (`event ->
/// index of the first record after it`), the trace's record count and the program's path
/// (resolved, as QEMU was given it). None when the log shows no guest program.
pub(crate) fn build(
    text: &str,
    marks: &HashMap<u64, u64>,
    records: u64,
    program: &std::path::Path,
) -> Option<Value> {
    let mut live: BTreeMap<u64, (Line, u64)> = BTreeMap::new();
    let mut done: Vec<Life> = Vec::new();
    let mut host_floor = u64::MAX;
    let mut event: u64 = 0;
    let mut at: u64 = 0;
    let mut heap: Option<(u64, u64)> = None;
    let mut stacks: Vec<(u64, u64)> = Vec::new(); // (stack pointer, record) from clone
    let mut events = 0u64;
    let is_host_name =
        |p: &str| matches!(p, "[heap]" | "[stack]" | "[vdso]" | "[vvar]" | "[vsyscall]");
    for raw in text.lines() {
        if let Some(h) = raw.strip_prefix("@ ") {
            let f: Vec<&str> = h.split(' ').collect();
            if f.len() < 4 {
                return None;
            }
            event = f[0].parse().ok()?;
            events += 1;
            at = marks.get(&event).copied().unwrap_or(at).min(records);
            let ret: i64 = f[2].parse().unwrap_or(0);
            match f[1] {
                "brk" => {
                    let b = ret as u64;
                    heap = Some(match heap {
                        None => (b, b),
                        Some((lo, hi)) => (lo.min(b), hi.max(b)),
                    });
                }
                "clone" => {
                    if let Ok(sp) = u64::from_str_radix(f[3], 16) {
                        if sp != 0 {
                            stacks.push((sp, at));
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        let (sign, rest) = raw.split_at(raw.len().min(1));
        let Some(line) = parse_line(rest) else {
            continue;
        };
        if event == 0 {
            host_floor = host_floor.min(line.start);
            continue;
        }
        match sign {
            "+" => {
                if line.start >= host_floor || is_host_name(&line.path) {
                    continue;
                }
                live.insert(line.start, (line, at));
            }
            "-" => {
                if let Some((l, from)) = live.remove(&line.start) {
                    if l == line {
                        done.push(Life {
                            line: l,
                            from,
                            to: Some(at),
                        });
                    } else {
                        live.insert(l.start, (l, from));
                    }
                }
            }
            _ => {}
        }
    }
    let prog = program.to_string_lossy();
    let has_program = done
        .iter()
        .map(|l| &l.line)
        .chain(live.values().map(|(l, _)| l))
        .any(|l| l.path == prog);
    if !has_program {
        return None;
    }
    let mut lives: Vec<Life> = done;
    lives.extend(live.into_values().map(|(line, from)| Life {
        line,
        from,
        to: None,
    }));
    lives.sort_by_key(|l| (l.line.start, l.from));

    // The main thread's stack: the anonymous read-write mapping QEMU put right above a one-page
    // guard (`---p`) before the program ran (linux-user's setup_arg_pages).
    let initial: Vec<&Line> = lives
        .iter()
        .filter(|l| l.from == 0)
        .map(|l| &l.line)
        .collect();
    let main_stack: Option<u64> = initial.windows(2).find_map(|w| {
        (w[0].perms.starts_with("---")
            && w[0].path.is_empty()
            && w[0].end == w[1].start
            && w[1].path.is_empty()
            && w[1].perms.starts_with("rw"))
        .then_some(w[1].start)
    });
    let kind_of = |l: &Life| -> &'static str {
        let line = &l.line;
        if !line.path.is_empty() {
            return if line.path.starts_with('/') {
                "file"
            } else {
                "special"
            };
        }
        if l.from == 0 && main_stack == Some(line.start) {
            return "stack";
        }
        if let Some((lo, hi)) = heap {
            if line.start < hi.max(lo + 1) && line.end > lo {
                return "heap";
            }
        }
        if stacks.iter().any(|&(sp, r)| {
            sp > line.start && sp <= line.end && l.from <= r && l.to.is_none_or(|t| t > r)
        }) {
            return "thread stack";
        }
        "anon"
    };
    // One entry per distinct mapping, with every span of records it existed in (a program that
    // maps and unmaps the same region repeatedly gives one entry, not thousands).
    let mut entries: Vec<Entry> = Vec::new();
    let mut index: HashMap<(Line, &'static str), usize> = HashMap::new();
    for l in &lives {
        let k = kind_of(l);
        let key = (l.line.clone(), k);
        let i = *index.entry(key).or_insert_with(|| {
            entries.push((l.line.clone(), k, Vec::new()));
            entries.len() - 1
        });
        entries[i].2.push((l.from, l.to));
    }
    let to_json = |spans_only: bool, entries: &[Entry]| {
        let maps: Vec<Value> = entries
            .iter()
            .map(|(l, k, spans)| {
                let spans: Vec<Value> = if spans_only {
                    let from = spans.iter().map(|s| s.0).min().unwrap_or(0);
                    let to = if spans.iter().any(|s| s.1.is_none()) {
                        None
                    } else {
                        spans.iter().filter_map(|s| s.1).max()
                    };
                    vec![json!([from, to])]
                } else {
                    spans.iter().map(|&(f, t)| json!([f, t])).collect()
                };
                json!({
                    "start": l.start, "end": l.end, "perms": l.perms, "offset": l.offset,
                    "path": l.path, "kind": k, "live": spans,
                })
            })
            .collect();
        maps
    };
    let mut maps = to_json(false, &entries);
    let mut spans_only = false;
    let mut truncated = false;
    let size = |m: &[Value]| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0);
    if size(&maps) > MAP_BYTES_BUDGET {
        spans_only = true;
        maps = to_json(true, &entries);
        while size(&maps) > MAP_BYTES_BUDGET {
            truncated = true;
            let keep = maps.len() * 3 / 4;
            maps.truncate(keep);
        }
    }
    Some(json!({
        "version": MEMORY_MAP_VERSION,
        "source": "qemu user mode: the host's /proc/self/maps before the program runs and after \
                   each mmap, munmap, mremap, mprotect, brk, shmat, shmdt and clone (guest_base \
                   0: guest addresses are host addresses); perms are QEMU's host protections \
                   (guest code shows no x)",
        "events": events,
        "heap": heap.map(|(lo, hi)| json!([lo, hi])),
        "mappings": maps,
        "spans_only": spans_only,
        "truncated": truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
@ 0 install 0 0
+5555000000-5555001000 r--p 00000000 fe:00 1 /usr/bin/qemu-x86_64
+7f0000000000-7f0000001000 rw-p 00000000 00:00 0
@ 1 start 0 0
+4000000000-4000003000 r--p 00000000 fe:00 9 /tmp/prog
+4000003000-4000004000 rw-p 00002000 fe:00 9 /tmp/prog
+4002005000-4002006000 ---p 00000000 00:00 0
+4002006000-4002806000 rw-p 00000000 00:00 0
+7f1000000000-7f1000100000 rwxp 00000000 00:00 0
@ 2 brk 274877923328 0
@ 3 mmap 274920099840 0
+4002900000-4002a00000 rw-p 00000000 00:00 0
@ 4 munmap 0 0
-4002900000-4002a00000 rw-p 00000000 00:00 0
@ 5 mmap 274920099840 0
+4002900000-4002a00000 rw-p 00000000 00:00 0
@ 6 brk 274878058496 0
+4000004000-4000025000 rw-p 00000000 00:00 0
";

    #[test]
    fn guest_mappings_with_their_record_spans() {
        let marks: HashMap<u64, u64> = [(2, 10), (3, 20), (4, 30), (5, 40), (6, 50)].into();
        let v = build(LOG, &marks, 100, std::path::Path::new("/tmp/prog")).unwrap();
        let maps = v["mappings"].as_array().unwrap();
        // QEMU's own (install-time, and anything at or above the lowest of them) are left out.
        assert!(maps
            .iter()
            .all(|m| m["start"].as_u64().unwrap() < 0x5555000000));
        let by_start = |s: u64| maps.iter().find(|m| m["start"] == s).unwrap();
        assert_eq!(by_start(0x4000000000)["kind"], "file");
        assert_eq!(by_start(0x4000000000)["live"], json!([[0, null]]));
        assert_eq!(by_start(0x4002006000)["kind"], "stack");
        assert_eq!(by_start(0x4000004000)["kind"], "heap");
        assert_eq!(by_start(0x4000004000)["live"], json!([[50, null]]));
        // mapped, unmapped, mapped again: one entry, two spans
        assert_eq!(
            by_start(0x4002900000)["live"],
            json!([[20, 30], [40, null]])
        );
        assert_eq!(v["heap"], json!([0x4000004000u64, 0x4000025000u64]));
        assert_eq!(v["version"], MEMORY_MAP_VERSION);
    }

    #[test]
    fn no_map_when_the_program_is_not_among_the_guest_mappings() {
        assert!(build(LOG, &HashMap::new(), 0, std::path::Path::new("/other")).is_none());
    }
}
