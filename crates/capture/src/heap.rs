/*!
Heap objects by allocation site as trace metadata (for attribution; docs/trace-format.md
"Heap objects").

The guest runs with the heap shim preloaded (qemu-plugin/cachecolor_heap.c, QEMU's
`-E LD_PRELOAD=...`): each malloc, calloc, realloc and free is reported by a system call of a
number no kernel has, which the plugin (`heap=on`) turns into HEAP records in the calling
thread's stream, and the decoder into [`HeapCall`]s placed at the index of the first trace
record after the call. [`build`] pairs each allocation with its free into a block (address
range, the span of records it was live) and groups the blocks by allocation site: the return
address in the code that called the allocator (annotate resolves it to function and line).
*/
use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::stream::HeapCall;

/// Version of the `heap_objects` metadata object (docs/trace-format.md).
pub const HEAP_OBJECTS_VERSION: u64 = 1;

/// Budget for the blocks' JSON within the header's 1 MiB of metadata (the memory map has 768
/// KiB of it).
const HEAP_BYTES_BUDGET: usize = 160 << 10;

const OP_LOADED: u8 = 0;
const OP_ALLOC: u8 = 1;
const OP_REALLOC: u8 = 2;
const OP_FREE: u8 = 3;

/// One block: `[start, end)` live over records `[from, to)` (`to` None: to the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    start: u64,
    end: u64,
    from: u64,
    to: Option<u64>,
}

/// The `heap_objects` metadata object from the shim's calls (positions already absolute record
/// indices). `unavailable` is why the shim could not be given to the program (None: it was);
/// a program that never loaded it gets the reason `not_loaded`.
pub(crate) fn build(
    calls: &[(HeapCall, u64)],
    unavailable: Option<&str>,
    not_loaded: &str,
) -> Value {
    let loaded = calls.iter().any(|(c, _)| c.op == OP_LOADED);
    let mut live: HashMap<u64, (u64, u64, u64)> = HashMap::new(); // ptr -> (size, caller, from)
    let mut sites: BTreeMap<u64, Vec<Block>> = BTreeMap::new();
    let mut allocations = 0u64;
    let mut end_block = |live: &mut HashMap<u64, (u64, u64, u64)>, ptr: u64, at: u64| {
        if let Some((size, caller, from)) = live.remove(&ptr) {
            if size > 0 {
                sites.entry(caller).or_default().push(Block {
                    start: ptr,
                    end: ptr.saturating_add(size),
                    from,
                    to: Some(at),
                });
            }
        }
    };
    for &(c, at) in calls {
        match c.op {
            OP_ALLOC | OP_REALLOC => {
                if c.op == OP_REALLOC && c.old != 0 {
                    end_block(&mut live, c.old, at);
                }
                if c.ptr != 0 {
                    // an address handed out again without a free we saw ends the old block
                    end_block(&mut live, c.ptr, at);
                    live.insert(c.ptr, (c.size, c.caller, at));
                    allocations += 1;
                }
            }
            OP_FREE => end_block(&mut live, c.ptr, at),
            _ => {}
        }
    }
    for (ptr, (size, caller, from)) in live {
        if size > 0 {
            sites.entry(caller).or_default().push(Block {
                start: ptr,
                end: ptr.saturating_add(size),
                from,
                to: None,
            });
        }
    }
    for blocks in sites.values_mut() {
        blocks.sort_by_key(|b| (b.start, b.from));
    }
    // merged: Some(gap): the union of the blocks' address ranges, closing gaps up to `gap`
    // bytes, live over the whole trace
    let site_json = |caller: u64, blocks: &[Block], merged: Option<u64>| -> Value {
        let bytes: u64 = blocks.iter().map(|b| b.end - b.start).sum();
        let ranges: Vec<Value> = if let Some(gap) = merged {
            let mut out: Vec<(u64, u64)> = Vec::new();
            for b in blocks {
                match out.last_mut() {
                    Some(last) if b.start <= last.1.saturating_add(gap) => {
                        last.1 = last.1.max(b.end)
                    }
                    _ => out.push((b.start, b.end)),
                }
            }
            out.into_iter()
                .map(|(s, e)| json!([s, e, 0, null]))
                .collect()
        } else {
            blocks
                .iter()
                .map(|b| json!([b.start, b.end, b.from, b.to]))
                .collect()
        };
        json!({"caller": caller, "blocks": blocks.len(), "bytes": bytes, "ranges": ranges})
    };
    let size = |v: &[Value]| serde_json::to_string(v).map(|s| s.len()).unwrap_or(0);
    let mut truncated = false;
    let mut out: Vec<Value> = sites.iter().map(|(&c, b)| site_json(c, b, None)).collect();
    let mut gap = None;
    if size(&out) > HEAP_BYTES_BUDGET {
        // most bytes first, so what has to go is the least
        let mut order: Vec<(&u64, &Vec<Block>)> = sites.iter().collect();
        order.sort_by_key(|(c, b)| {
            let bytes: u64 = b.iter().map(|x| x.end - x.start).sum();
            (std::cmp::Reverse(bytes), **c)
        });
        // annotate tallies by 4 KiB page, so closing gaps up to a page loses little
        for g in [0u64, 64, 512, 4096] {
            gap = Some(g);
            out = order.iter().map(|(&c, b)| site_json(c, b, gap)).collect();
            if size(&out) <= HEAP_BYTES_BUDGET {
                break;
            }
        }
        while size(&out) > HEAP_BYTES_BUDGET {
            truncated = true;
            let keep = out.len() * 3 / 4;
            out.truncate(keep);
        }
    }
    let note = if let Some(why) = unavailable {
        Some(why.to_string())
    } else if !loaded {
        Some(not_loaded.to_string())
    } else if out.is_empty() {
        Some("the heap shim was loaded but saw no malloc, calloc or realloc".to_string())
    } else {
        None
    };
    json!({
        "version": HEAP_OBJECTS_VERSION,
        "source": "LD_PRELOAD shim (malloc, calloc, realloc, free through glibc's __libc_*) \
                   reporting each call to the QEMU plugin by an unknown system call; caller is \
                   the return address in the code that called the allocator",
        "shim_loaded": loaded,
        "allocations": allocations,
        "sites": out,
        "merged_gap": gap,
        "truncated": truncated,
        "note": note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: u8, ptr: u64, size: u64, caller: u64, old: u64) -> HeapCall {
        HeapCall {
            op,
            ptr,
            size,
            caller,
            old,
            at: 0,
        }
    }

    #[test]
    fn blocks_grouped_by_site_with_their_live_spans() {
        let calls = [
            (call(OP_LOADED, 0, 0, 0, 0), 0),
            (call(OP_ALLOC, 0x1000, 64, 0xA, 0), 5),
            (call(OP_ALLOC, 0x2000, 32, 0xB, 0), 7),
            (call(OP_FREE, 0x1000, 0, 0xC, 0), 9),
            (call(OP_ALLOC, 0x1000, 16, 0xA, 0), 11),
            (call(OP_REALLOC, 0x3000, 128, 0xD, 0x2000), 13),
        ];
        let v = build(&calls, None, "no");
        assert_eq!(v["shim_loaded"], true);
        assert_eq!(v["allocations"], 4);
        assert!(v["note"].is_null());
        let sites = v["sites"].as_array().unwrap();
        let of = |c: u64| sites.iter().find(|s| s["caller"] == c).unwrap();
        assert_eq!(
            of(0xA)["ranges"],
            json!([[0x1000, 0x1040, 5, 9], [0x1000, 0x1010, 11, null]])
        );
        assert_eq!(of(0xA)["bytes"], 80);
        // realloc ends the old block (its own site) and starts one at realloc's caller
        assert_eq!(of(0xB)["ranges"], json!([[0x2000, 0x2020, 7, 13]]));
        assert_eq!(of(0xD)["ranges"], json!([[0x3000, 0x3080, 13, null]]));
    }

    #[test]
    fn says_why_there_are_no_sites() {
        let v = build(&[], None, "PROGRAM is statically linked");
        assert_eq!(v["note"], "PROGRAM is statically linked");
        assert_eq!(v["shim_loaded"], false);
        let v = build(&[], Some("foreign"), "x");
        assert_eq!(v["note"], "foreign");
    }

    #[test]
    fn many_blocks_merge_into_ranges_within_the_budget() {
        let calls: Vec<(HeapCall, u64)> = (0..20_000u64)
            .map(|i| (call(OP_ALLOC, 0x10000 + 32 * i, 32, 0xA + (i % 3), 0), i))
            .collect();
        let v = build(&calls, None, "x");
        assert_eq!(v["merged_gap"], 64);
        assert_eq!(v["truncated"], false);
        assert_eq!(v["sites"][0]["ranges"].as_array().unwrap().len(), 1);
        assert!(serde_json::to_string(&v).unwrap().len() < HEAP_BYTES_BUDGET + 4096);
        let total: u64 = v["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(total, 20_000 * 32);
    }
}
