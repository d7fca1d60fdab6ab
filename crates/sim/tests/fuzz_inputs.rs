//! Property-based fuzzing of everything the simulator reads (docs/reliability.md): the native
//! decoder with payload corruption that keeps valid checksums (so the column checks, not the
//! checksum, must catch it), the lackey / din / ChampSim importers on arbitrary bytes and
//! near-valid text, and config parsing (TOML and JSON) on arbitrary documents. The property is
//! always the same: no panic, no hang, no unbounded allocation; either a value or an error that
//! says where (a byte offset, a line, a field path).
//!
//! Cases per property default to a CI-sized budget; `PROPTEST_CASES=N` raises it (`make fuzz`
//! runs these with a time budget). proptest was chosen over cargo-fuzz because it runs on the
//! stable toolchain inside `cargo test` (CI) and shrinks a failure to a minimal input.
use std::io::Cursor;

use cachecolor_sim::config::SimulationConfig;
use cachecolor_sim::trace::champsim::ChampSimReader;
use cachecolor_sim::trace::din::DinReader;
use cachecolor_sim::trace::lackey::LackeyReader;
use cachecolor_sim::trace::native::{TraceReader, TraceWriter};
use cachecolor_sim::trace::{collect, Kind, Record, RecordSource};
use cachecolor_sim::Error;
use proptest::prelude::*;
use xxhash_rust::xxh3::Xxh3;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn arb_record() -> impl Strategy<Value = Record> {
    (
        prop_oneof![any::<u64>(), 0u64..1 << 20],
        0u32..4,
        prop_oneof![0u32..3, any::<u32>()],
        prop_oneof![Just(8u16), any::<u16>()],
        0u8..4,
        any::<bool>(),
    )
        .prop_map(|(addr, thread, icount, size, kind, privileged)| Record {
            addr,
            thread,
            icount,
            size,
            kind: Kind::ALL[kind as usize],
            privileged,
            syscall: 0,
        })
}

fn encode(records: &[Record]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), "fuzz").unwrap();
    w.write_all(records).unwrap();
    w.finish().unwrap()
}

/// Every block's (header offset, payload range).
fn blocks(bytes: &[u8]) -> Vec<(usize, std::ops::Range<usize>)> {
    let meta_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let mut at = 16 + meta_len + 8;
    let mut out = Vec::new();
    while &bytes[at..at + 4] == b"CCBK" {
        let comp = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap()) as usize;
        out.push((at, at + 24..at + 24 + comp));
        at += 24 + comp;
    }
    out
}

/// Decompress block `k`, let `mutate` change its raw columns (and maybe the header's record
/// count), recompress, rewrite the header's lengths and recompute its checksum: corruption that
/// the checksum cannot catch.
fn resign_block(bytes: &[u8], k: usize, mutate: impl FnOnce(&mut Vec<u8>, &mut u32)) -> Vec<u8> {
    let bl = blocks(bytes);
    let (at, payload) = bl[k].clone();
    let mut n = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
    let raw_len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
    let mut raw = zstd::bulk::decompress(&bytes[payload.clone()], raw_len).unwrap();
    mutate(&mut raw, &mut n);
    let comp = zstd::bulk::compress(&raw, 1).unwrap();
    let mut header = [0u8; 24];
    header[..4].copy_from_slice(b"CCBK");
    header[4..8].copy_from_slice(&n.to_le_bytes());
    header[8..12].copy_from_slice(&(raw.len() as u32).to_le_bytes());
    header[12..16].copy_from_slice(&(comp.len() as u32).to_le_bytes());
    let mut h = Xxh3::new();
    h.update(&header[4..16]);
    h.update(&comp);
    header[16..].copy_from_slice(&h.digest().to_le_bytes());
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&comp);
    out.extend_from_slice(&bytes[payload.end..]);
    out
}

fn decode(bytes: &[u8]) -> Result<Vec<Record>, String> {
    match TraceReader::new(bytes) {
        Ok(mut r) => collect(&mut r).map_err(|e| {
            assert!(e.offset.is_some(), "a decoder error names its offset: {e}");
            e.to_string()
        }),
        Err(Error::Trace(e)) => Err(e.to_string()),
        Err(e) => panic!("reading from memory gave a non-trace error: {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(96)))]

    /// Payload corruption behind a valid checksum: flips, overwrites, a cut or a stretch of the
    /// raw columns. The decoder must reject it or decode records that re-encode to themselves
    /// (a valid trace), never panic or read out of bounds.
    #[test]
    fn fuzz_native_payload_corruption_with_recomputed_checksums(
        records in prop::collection::vec(arb_record(), 1..600),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in prop_oneof![Just(0usize), 1usize..64],
        grow in prop_oneof![Just(0usize), 1usize..16],
        count_delta in prop_oneof![Just(0i64), -3i64..4],
    ) {
        let good = encode(&records);
        let bad = resign_block(&good, 0, |raw, n| {
            for (i, b) in &edits {
                let k = i.index(raw.len());
                raw[k] = *b;
            }
            raw.truncate(raw.len().saturating_sub(cut));
            raw.extend(std::iter::repeat_n(0xAB, grow));
            *n = (*n as i64 + count_delta).clamp(0, u32::MAX as i64) as u32;
        });
        if let Ok(got) = decode(&bad) {
            prop_assert_eq!(decode(&encode(&got)).unwrap(), got);
        }
    }

    /// The offset column must hold `addr & 63`: any byte of 64-255 is corruption.
    #[test]
    fn fuzz_native_offset_bytes_above_63_are_rejected(
        records in prop::collection::vec(arb_record(), 1..300),
        which in any::<prop::sample::Index>(),
        value in 64u8..=255,
    ) {
        let good = encode(&records);
        let n = records.len();
        let bad = resign_block(&good, 0, |raw, _| {
            let k = 16 + n + which.index(n); // directory, tags, then the offset column
            raw[k] = value;
        });
        let e = decode(&bad).unwrap_err();
        prop_assert!(e.contains("offset byte"), "{}", e);
    }

    /// Arbitrary bytes through every importer: an error naming where, or records; never a panic.
    #[test]
    fn fuzz_importers_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let sources: Vec<Box<dyn RecordSource>> = vec![
            Box::new(LackeyReader::new(Cursor::new(bytes.clone()))),
            Box::new(DinReader::new(Cursor::new(bytes.clone()))),
            Box::new(ChampSimReader::new(Cursor::new(bytes.clone()))),
        ];
        for mut s in sources {
            let _ = collect(&mut *s);
        }
        let _ = decode(&bytes);
    }

    /// Near-valid text: real lackey / din lines with edits, odd spacing, huge numbers, control
    /// bytes. Errors must name a line.
    #[test]
    fn fuzz_text_importers_on_near_valid_lines(
        lines in prop::collection::vec(
            prop_oneof![
                (any::<u64>(), 0u32..20).prop_map(|(a, s)| format!(" L {a:x},{s}")),
                (any::<u64>(), 0u32..20).prop_map(|(a, s)| format!("I  {a:08x},{s}")),
                (any::<u64>(), any::<u16>()).prop_map(|(a, s)| format!(" M {a:x},{s}")),
                (0u8..10, any::<u64>()).prop_map(|(l, a)| format!("{l} {a:x}")),
                "[ -~\t\r\x1b\x00]{0,40}",
                Just("==123== Lackey".to_string()),
                Just(" S ffffffffffffffffffff,8".to_string()),
            ],
            0..60,
        ),
    ) {
        let text = lines.join("\n");
        for mut s in [
            Box::new(LackeyReader::new(Cursor::new(text.clone().into_bytes()))) as Box<dyn RecordSource>,
            Box::new(DinReader::new(Cursor::new(text.clone().into_bytes()))),
        ] {
            if let Err(e) = collect(&mut *s) {
                let m = e.to_string();
                prop_assert!(m.contains("line") || e.offset.is_some(), "{}", m);
            }
        }
    }

    /// Arbitrary JSON documents shaped like configs (tables, arrays, numbers of every size,
    /// strings) through the strict parser and `effective()`: a config or a ConfigError.
    #[test]
    fn fuzz_config_json_documents(doc in arb_config_json()) {
        let text = doc.to_string();
        if let Ok(c) = SimulationConfig::from_json(&text) {
            let _ = c.effective();
        }
    }

    /// Arbitrary TOML text built from config-like keys and values.
    #[test]
    fn fuzz_config_toml_text(
        levels in prop::collection::vec(
            (
                prop_oneof![Just("\"32KiB\"".to_string()), Just("\"1TiB\"".to_string()), any::<u64>().prop_map(|v| v.to_string()), Just("-1".to_string()), Just("[1, 2]".to_string())],
                prop_oneof![0u32..100, Just(u32::MAX)].prop_map(|w| w.to_string()),
                prop_oneof![Just("\"lru\""), Just("\"srrip\""), Just("\"tree-plru\""), Just("\"x\"")],
            ),
            0..4,
        ),
        top in prop_oneof![Just(""), Just("line_size = 0\n"), Just("cores = 4096\n"), Just("page_size = \"2MiB\"\n"), Just("line_size = 128\n")],
        tail in "[ -~\n]{0,30}",
    ) {
        let mut text = format!("[hierarchy]\n{top}");
        for (i, (size, ways, policy)) in levels.iter().enumerate() {
            text.push_str(&format!("[[hierarchy.levels]]\nname = \"L{i}\"\nsize = {size}\nways = {ways}\npolicy = {policy}\n"));
        }
        text.push_str(&tail);
        if let Ok(c) = SimulationConfig::from_toml(&text) {
            if let Ok(e) = c.effective() {
                // What passed the check must build (the check == the run's validation).
                let _ = cachecolor_sim::cache::Hierarchy::new(&e.hierarchy);
            }
        }
    }
}

fn arb_config_json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(json!("32KiB")),
        Just(json!("1TiB")),
        "[a-z0-9 ]{0,8}".prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("name".to_string()),
                    Just("size".to_string()),
                    Just("ways".to_string()),
                    Just("levels".to_string()),
                    Just("policy".to_string()),
                    "[a-z_]{1,8}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    (
        prop::collection::vec(
            (
                value.clone(),
                prop_oneof![
                    Just(json!(8)),
                    Just(json!(0)),
                    Just(json!(512)),
                    any::<u32>().prop_map(Value::from)
                ],
            ),
            0..3,
        ),
        value,
    )
        .prop_map(|(levels, extra)| {
            let levels: Vec<Value> = levels
                .into_iter()
                .enumerate()
                .map(|(i, (size, ways))| {
                    let size = if size.is_object() {
                        json!("32KiB")
                    } else {
                        size
                    };
                    json!({"name": format!("L{i}"), "size": size, "ways": ways})
                })
                .collect();
            json!({"hierarchy": {"levels": levels}, "workload": extra})
        })
}
