/*!
The traced process's memory map as trace metadata (for attribution; docs/trace-format.md
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
    let mut start_pc: Option<u64> = None;
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
                "start" => start_pc = u64::from_str_radix(f[3], 16).ok(),
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
    let has_program = done
        .iter()
        .map(|l| &l.line)
        .chain(live.values().map(|(l, _)| l))
        .any(|l| is_program(&l.path, program));
    // guest_base 0 (guest addresses are host addresses): the guest's first block lies in one
    // of the mappings it started with
    let first_block_mapped = start_pc.is_some_and(|pc| {
        done.iter()
            .map(|l| (&l.line, l.from))
            .chain(live.values().map(|(l, f)| (l, *f)))
            .any(|(l, from)| from == 0 && l.start <= pc && pc < l.end)
    });
    if !has_program || !first_block_mapped {
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
        // shared anonymous memory (MAP_SHARED|MAP_ANONYMOUS, memfd, System V segments) shows as
        // a deleted file; it is anonymous memory all the same
        let shared_anon = ["/dev/zero", "/memfd:", "/SYSV"]
            .iter()
            .any(|p| line.path.starts_with(p));
        if !line.path.is_empty() && !shared_anon {
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
@ 1 start 0 4002806010
+4002806000-4002837000 r--p 00000000 fe:00 8 /lib/ld.so
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
+4002a00000-4002a01000 rw-s 00000000 00:01 7 /dev/zero (deleted)
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
        assert_eq!(by_start(0x4002a00000)["kind"], "anon");
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

    #[test]
    fn no_map_when_the_first_block_is_outside_every_mapping() {
        // a QEMU that moved the guest (guest_base not 0): its addresses are not the host's
        let moved = LOG.replace("@ 1 start 0 4002806010", "@ 1 start 0 7000");
        let p = std::path::Path::new("/tmp/prog");
        assert!(build(&moved, &HashMap::new(), 0, p).is_none());
        assert!(build(LOG, &HashMap::new(), 0, p).is_some());
    }
}

/// Valgrind's `-v -v` messages about the objects it reads symbols of, noted as lackey's text
/// streams past (the lackey back end's memory map): `--PID-- Reading syms from PATH` then
/// `--PID--    svma 0x..., avma 0x...` (the object's load bias is avma - svma), and
/// `--PID-- Discarding syms at 0x...-0x... in PATH` when it is unmapped. Each is tagged with
/// the number of records (lackey `I`/`L`/`S`/`M` lines) before it. At that verbosity valgrind
/// also prints call-frame summaries without its `--PID--` prefix (lines starting `0x`, e.g.
/// `0x30a: [0]={ 56(r3) { u u ...`), which the lackey parser would take for bad records: they
/// are removed from the stream here.
pub(crate) struct ValgrindObjects<R> {
    inner: R,
    /// The current line so far, when it is one of valgrind's (`--`); record lines are only
    /// counted.
    line: Vec<u8>,
    at_line_start: bool,
    in_message: bool,
    in_blank_or_banner: bool,
    /// What `read` takes from `inner` before filtering.
    raw: Vec<u8>,
    /// Bytes of the current line seen so far and whether it is being dropped (`0x` lines).
    col: usize,
    first: u8,
    dropping: bool,
    records: u64,
    reading: Option<(String, u64)>,
    /// (path, bias, record index loaded at, record index discarded at), shared with whoever
    /// holds a `handle` (the reader that owns this adapter does not give it back).
    objects: std::sync::Arc<std::sync::Mutex<Vec<LoadedObject>>>,
}

/// An object valgrind loaded: path, load bias, records before it, records before its unload.
pub(crate) type LoadedObject = (String, u64, u64, Option<u64>);

impl<R> ValgrindObjects<R> {
    pub(crate) fn new(inner: R) -> Self {
        ValgrindObjects {
            inner,
            line: Vec::new(),
            at_line_start: true,
            in_message: false,
            in_blank_or_banner: false,
            raw: Vec::new(),
            col: 0,
            first: 0,
            dropping: false,
            records: 0,
            reading: None,
            objects: Default::default(),
        }
    }

    /// The objects noted so far (and later), readable after the adapter has been moved away.
    pub(crate) fn handle(&self) -> std::sync::Arc<std::sync::Mutex<Vec<LoadedObject>>> {
        self.objects.clone()
    }

    fn message(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        // "--1234-- Reading syms from /path"
        let body = text
            .trim_start_matches('-')
            .split_once("--")
            .map_or("", |(_, b)| b)
            .trim();
        if let Some(path) = body.strip_prefix("Reading syms from ") {
            self.reading = Some((path.trim().to_string(), self.records));
        } else if let Some(rest) = body.strip_prefix("svma ") {
            // "svma 0x0000001070, avma 0x0000109070"
            let mut it = rest.split(", avma ");
            let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
            if let (Some(s), Some(a), Some((path, at))) = (
                it.next().and_then(hex),
                it.next().and_then(hex),
                self.reading.take(),
            ) {
                self.objects
                    .lock()
                    .unwrap()
                    .push((path, a.wrapping_sub(s), at, None));
            }
        } else if let Some(rest) = body.strip_prefix("Discarding syms at ") {
            if let Some((_, path)) = rest.split_once(" in ") {
                let path = path.split(" (").next().unwrap_or(path).trim();
                let records = self.records;
                if let Some(o) = self
                    .objects
                    .lock()
                    .unwrap()
                    .iter_mut()
                    .rev()
                    .find(|o| o.0 == path && o.3.is_none())
                {
                    o.3 = Some(records);
                }
            }
        }
    }

    /// Note the messages in `input` and copy it to `buf` without valgrind's unprefixed `0x`
    /// lines; returns the bytes written (at most `input.len() + 1`: a `0` held back from the
    /// previous read may come first).
    fn scan(&mut self, input: &[u8], buf: &mut [u8]) -> usize {
        let mut kept = 0;
        for &b in input {
            if self.at_line_start {
                self.at_line_start = false;
                self.in_message = b == b'-';
                self.in_blank_or_banner = b == b'=' || b == b'\n';
                self.col = 0;
                self.first = b;
                self.dropping = false;
                if self.in_message {
                    self.line.clear();
                }
            }
            if self.col == 0 && b == b'0' {
                // held back until the next byte tells whether the line is a `0x` one
                self.col = 1;
                continue;
            }
            if self.col == 1 && self.first == b'0' {
                if b == b'x' {
                    self.dropping = true;
                } else {
                    buf[kept] = b'0';
                    kept += 1;
                }
            }
            self.col += 1;
            if b == b'\n' {
                if self.in_message {
                    self.message();
                } else if !self.in_blank_or_banner && !self.dropping {
                    self.records += 1;
                }
                self.at_line_start = true;
                if self.dropping {
                    continue;
                }
            } else if self.in_message && self.line.len() < 4096 {
                self.line.push(b);
            }
            if !self.dropping {
                buf[kept] = b;
                kept += 1;
            }
        }
        kept
    }
}

impl<R: std::io::Read> std::io::Read for ValgrindObjects<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.len() < 2 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "ValgrindObjects needs a buffer of 2 bytes or more",
            ));
        }
        loop {
            self.raw.resize(buf.len() - 1, 0);
            let n = self.inner.read(&mut self.raw)?;
            if n == 0 {
                return Ok(0);
            }
            let raw = std::mem::take(&mut self.raw);
            let kept = self.scan(&raw[..n], buf);
            self.raw = raw;
            if kept > 0 {
                return Ok(kept);
            }
        }
    }
}

/// `(p_offset, p_vaddr, p_memsz, p_flags)` of each PT_LOAD of a 64-bit little-endian ELF file.
fn elf_loads(path: &str) -> Vec<(u64, u64, u64, u32)> {
    let Ok(data) = std::fs::read(path) else {
        return Vec::new();
    };
    let u16_at = |o: usize| data.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        data.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        data.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 || data[5] != 1 {
        return Vec::new();
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in 0..phnum as usize {
        let o = phoff as usize + i * phentsize as usize;
        if let (Some(1), Some(flags), Some(off), Some(vaddr), Some(memsz)) = (
            u32_at(o),
            u32_at(o + 4),
            u64_at(o + 8),
            u64_at(o + 16),
            u64_at(o + 40),
        ) {
            out.push((off, vaddr, memsz, flags));
        }
    }
    out
}

/// `path` (as the map or valgrind names it, absolute) is the traced program, which the command
/// line may have named relatively (`./prog`): compared as the same file, else as text.
fn is_program(path: &str, program: &std::path::Path) -> bool {
    if path == program.to_string_lossy() {
        return true;
    }
    match (std::fs::canonicalize(path), std::fs::canonicalize(program)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The `memory_map` metadata object of a lackey capture: the mappings of each object valgrind
/// read symbols of (its `PT_LOAD` segments at its load bias), with the records during which it
/// was loaded; valgrind's own tool binary left out. No heap, stacks or anonymous mappings:
/// valgrind says nothing about them at this verbosity.
pub(crate) fn build_from_valgrind(
    objects: &[LoadedObject],
    records: u64,
    program: &std::path::Path,
) -> Option<Value> {
    if !objects.iter().any(|o| is_program(&o.0, program)) {
        return None;
    }
    const PAGE: u64 = 4096;
    let mut maps = Vec::new();
    for (path, bias, from, to) in objects {
        let name = std::path::Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("lackey-") {
            continue; // the tool itself, not the client
        }
        for (off, vaddr, memsz, flags) in elf_loads(path) {
            let lo = bias.wrapping_add(vaddr) & !(PAGE - 1);
            let hi = (bias.wrapping_add(vaddr).wrapping_add(memsz) + PAGE - 1) & !(PAGE - 1);
            let perms = format!(
                "{}{}{}p",
                if flags & 4 != 0 { 'r' } else { '-' },
                if flags & 2 != 0 { 'w' } else { '-' },
                if flags & 1 != 0 { 'x' } else { '-' }
            );
            maps.push(json!({
                "start": lo, "end": hi, "perms": perms, "offset": off & !(PAGE - 1),
                "path": path, "kind": "file",
                "live": [[(*from).min(records), to.map(|t| t.min(records))]],
            }));
        }
    }
    Some(json!({
        "version": MEMORY_MAP_VERSION,
        "source": "valgrind -v -v: the objects whose symbols valgrind read (program, loader, \
                   libraries), each PT_LOAD segment at the object's load bias; no heap, stack \
                   or anonymous mappings",
        "events": objects.len(),
        "heap": null,
        "mappings": maps,
        "spans_only": false,
        "truncated": false,
    }))
}

#[cfg(test)]
mod valgrind_tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn valgrind_messages_are_noted_with_the_records_before_them() {
        let text = "==1== Lackey\n\
                    --1-- Reading syms from /bin/true\n\
                    --1--    svma 0x0000001070, avma 0x0000109070\n\
                    I  04001000,3\n\
                    \x20L 04002000,8\n\
                    --1-- Reading syms from /lib/libc.so.6\n\
                    0x30a: [0]={ 56(r3) { u  u  c-56 }\n\
                    --1--    svma 0x0000026380, avma 0x000486c380\n\
                    I  04001003,3\n\
                    --1-- Discarding syms at 0x486c380-0x49c0000 in /lib/libc.so.6 (have_dinfo 1)\n";
        // in pieces of every small size, as a pipe may deliver them
        for size in 2..16 {
            let mut r = ValgrindObjects::new(text.as_bytes());
            let objects = r.handle();
            let mut sink = Vec::new();
            let mut buf = vec![0u8; size];
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                sink.extend_from_slice(&buf[..n]);
            }
            assert_eq!(
                String::from_utf8(sink).unwrap(),
                text.replace("0x30a: [0]={ 56(r3) { u  u  c-56 }\n", ""),
                "pieces of {size}"
            );
            assert_eq!(
                *objects.lock().unwrap(),
                vec![
                    ("/bin/true".to_string(), 0x108000, 0, None),
                    ("/lib/libc.so.6".to_string(), 0x4846000, 2, Some(3)),
                ]
            );
        }
    }
}
