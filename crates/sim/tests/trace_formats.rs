//! Trace formats end to end: the native format round-trips every record exactly, reports every
//! truncation and corruption with a byte offset and never panics on arbitrary input (proptest
//! "fuzz" targets); the importers parse sample text and binary traces, compressed or not, and
//! name the offending line; `convert` never leaves a half-written file.
//!
//! `cargo test -p cachecolor-sim --release --test trace_formats -- --ignored --nocapture` prints
//! the native format's encode/decode speed (set CACHECOLOR_BENCH_LACKEY=path to also convert
//! and time a real lackey trace).
use std::io::Write;
use std::path::{Path, PathBuf};

use cachecolor_sim::rng::SplitMix64;
use cachecolor_sim::trace::native::{TraceReader, TraceWriter, MAGIC, VERSION_WITHOUT_PCS};
use cachecolor_sim::trace::{
    self, collect, convert, Format, Kind, Progress, Record, RecordSource, VecSource, BLOCK_RECORDS,
};
use cachecolor_sim::{Error, TraceError};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Helpers

fn encode(records: &[Record], metadata: &str) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), metadata).unwrap();
    w.write_all(records).unwrap();
    assert_eq!(w.records_written(), records.len() as u64);
    w.finish().unwrap()
}

fn decode(bytes: &[u8]) -> Result<Vec<Record>, TraceError> {
    let mut r = match TraceReader::new(bytes) {
        Ok(r) => r,
        Err(Error::Trace(e)) => return Err(e),
        Err(e) => panic!("reading from memory gave a non-trace error: {e}"),
    };
    collect(&mut r)
}

/// Byte ranges of each block's payload, found by walking the file's structure.
fn payload_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let meta_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let mut at = 16 + meta_len + 8;
    let mut ranges = Vec::new();
    while &bytes[at..at + 4] == b"CCBK" {
        let comp = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap()) as usize;
        ranges.push(at + 24..at + 24 + comp);
        at += 24 + comp;
    }
    assert_eq!(&bytes[at..at + 4], b"CCEN");
    assert_eq!(at + 24, bytes.len());
    ranges
}

/// A record stream shaped like a program: sequential fetches, stack and heap data, a few
/// threads, occasional kernel references, odd sizes and long instruction gaps.
fn program_like(n: usize, seed: u64) -> Vec<Record> {
    let mut rng = SplitMix64::new(seed);
    let mut pc = 0x40_0000u64;
    let mut thread = 0;
    (0..n)
        .map(|i| {
            if rng.below(5000) == 0 {
                thread = rng.below(4) as u32;
            }
            let roll = rng.below(100);
            let (kind, addr, size) = if roll < 55 {
                pc = if rng.below(20) == 0 {
                    0x40_0000 + rng.below(1 << 20)
                } else {
                    pc + 4
                };
                (Kind::IFetch, pc, 4)
            } else if roll < 75 {
                (Kind::Load, 0x7ffc_0000_0000 - 8 * rng.below(512), 8)
            } else if roll < 90 {
                (Kind::Store, 0x5555_0000_0000 + 8 * (i as u64 % 100_000), 8)
            } else {
                (
                    Kind::Modify,
                    0x5555_0000_0000 + rng.below(1 << 28),
                    [1, 2, 4, 16][i % 4],
                )
            };
            Record {
                addr,
                thread,
                icount: if rng.below(1000) == 0 {
                    70_000
                } else {
                    (kind == Kind::IFetch) as u32
                },
                size,
                kind,
                privileged: rng.below(50) == 0,
                syscall: 0,
            }
        })
        .collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cachecolor-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn arb_record() -> impl Strategy<Value = Record> {
    (
        prop_oneof![any::<u64>(), 0u64..1 << 20, Just(u64::MAX), Just(0)],
        prop_oneof![Just(0u32), 0u32..8, any::<u32>()],
        prop_oneof![0u32..3, 250u32..260, any::<u32>()],
        prop_oneof![Just(8u16), 1u16..300, any::<u16>()],
        0u8..4,
        any::<bool>(),
        prop_oneof![Just(0u32), any::<u32>()],
    )
        .prop_map(
            |(addr, thread, icount, size, kind, privileged, syscall)| Record {
                addr,
                thread,
                icount,
                size,
                kind: Kind::from_u8(kind).unwrap(),
                privileged,
                syscall,
            },
        )
}

// ---------------------------------------------------------------------------------------------
// Native format: round trips

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn native_round_trips_random_records(records in prop::collection::vec(arb_record(), 0..2000)) {
        let bytes = encode(&records, "proptest");
        prop_assert_eq!(decode(&bytes).unwrap(), records);
    }
}

#[test]
fn native_round_trips_edge_cases() {
    let all_kinds: Vec<Record> = Kind::ALL
        .iter()
        .flat_map(|&k| {
            [false, true].map(|privileged| Record {
                privileged,
                ..Record::new(k, 0x1234, 8)
            })
        })
        .collect();
    let extremes: Vec<Record> = [0, u64::MAX, 1, u64::MAX - 63, 0, 1 << 63, u64::MAX, 63, 64]
        .iter()
        .enumerate()
        .map(|(i, &addr)| Record {
            addr,
            thread: [0, u32::MAX, 7, 7, 0][i % 5],
            icount: [0, u32::MAX, 254, 255, 256][i % 5],
            size: [0, u16::MAX, 254, 255, 1][i % 5],
            kind: Kind::ALL[i % 4],
            privileged: i % 2 == 0,
            syscall: [0, u32::MAX, 1, 0x8000_0000, 0][i % 5],
        })
        .collect();
    let cases: Vec<(&str, Vec<Record>)> = vec![
        ("empty", vec![]),
        ("one", vec![Record::load(0xdead_beef)]),
        ("block", program_like(BLOCK_RECORDS, 1)),
        ("block+1", program_like(BLOCK_RECORDS + 1, 2)),
        ("three blocks", program_like(3 * BLOCK_RECORDS - 5, 3)),
        ("all kinds", all_kinds),
        ("extremes", extremes),
    ];
    for (name, records) in cases {
        let bytes = encode(&records, name);
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        assert_eq!(r.metadata(), name);
        assert_eq!(r.version(), VERSION_WITHOUT_PCS);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while r.next_block(&mut buf).unwrap() {
            assert!(
                !buf.is_empty() && buf.len() <= BLOCK_RECORDS,
                "{name}: block of {}",
                buf.len()
            );
            got.extend_from_slice(&buf);
        }
        assert_eq!(got, records, "{name}");
        assert_eq!(r.progress().records, records.len() as u64, "{name}");
        assert_eq!(r.progress().bytes, bytes.len() as u64, "{name}");
    }
}

#[test]
fn writer_buffers_single_writes_like_write_all() {
    let records = program_like(BLOCK_RECORDS + 100, 4);
    let mut w = TraceWriter::new(Vec::new(), "").unwrap();
    for r in &records {
        w.write(r).unwrap();
    }
    assert_eq!(w.finish().unwrap(), encode(&records, ""));
}

#[test]
fn native_file_open_reports_sizes_and_round_trips() {
    let dir = temp_dir("open");
    let path = dir.join("t.cct");
    let records = program_like(BLOCK_RECORDS + 10, 5);
    let mut w = TraceWriter::create(&path, "cmd: ./prog --x").unwrap();
    w.write_all(&records).unwrap();
    w.finish().unwrap();
    let len = std::fs::metadata(&path).unwrap().len();

    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.metadata(), "cmd: ./prog --x");
    let p = r.progress();
    assert_eq!(
        (p.total_bytes, p.total_records),
        (Some(len), Some(records.len() as u64))
    );
    assert_eq!(collect(&mut r).unwrap(), records);

    let mut src = trace::open(&path, Format::Native).unwrap();
    assert_eq!(collect(&mut src).unwrap(), records);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let path = Path::new("/nonexistent/dir/trace.cct");
    for result in [
        TraceReader::open(path).map(|_| ()),
        trace::open(path, Format::Lackey).map(|_| ()),
        trace::open(path, Format::Native).map(|_| ()),
    ] {
        match result {
            Err(Error::Io(e)) => {
                assert!(e.to_string().contains("/nonexistent/dir/trace.cct"), "{e}");
                assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected an Io error, got {other:?}", other = other.err()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Native format: bad input

#[test]
fn empty_wrong_magic_and_wrong_version_are_explained() {
    let e = decode(b"").unwrap_err();
    assert_eq!(e.offset, Some(0));
    assert!(
        e.message.starts_with("empty file: not a cachecolor trace"),
        "{e}"
    );

    let e = decode(b"I  0400d7d4,8\n L 04d8f018,4\n").unwrap_err();
    assert!(e.message.starts_with("not a cachecolor trace"), "{e}");
    assert!(e.message.contains("lackey"), "{e}");
    let e = decode(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0]).unwrap_err();
    assert!(e.message.contains("gzip"), "{e}");

    let mut bytes = encode(&[Record::load(1)], "");
    bytes[8..10].copy_from_slice(&9u16.to_le_bytes());
    let e = decode(&bytes).unwrap_err();
    assert_eq!(
        e.message,
        "unsupported trace version 9 (this cachecolor reads versions 1 to 3)"
    );
    assert_eq!(e.offset, Some(8));
}

#[test]
fn every_truncation_of_a_small_trace_is_reported_as_truncated() {
    let bytes = encode(&program_like(300, 6), "meta");
    for cut in 1..bytes.len() {
        let e = decode(&bytes[..cut]).unwrap_err();
        assert!(e.message.contains("truncated"), "cut at {cut}: {e}");
        let offset = e.offset.expect("truncation errors carry an offset");
        assert!(offset <= cut as u64, "cut at {cut}: offset {offset}");
    }
}

#[test]
fn truncated_block_message_gives_offset_and_byte_counts() {
    let bytes = encode(&program_like(1000, 7), "");
    let block = &payload_ranges(&bytes)[0];
    let cut = block.start + 10;
    let e = decode(&bytes[..cut]).unwrap_err();
    let header_at = block.start - 24;
    let want = format!(
        "truncated trace: block 0 at byte {header_at} ends after 34 of {} bytes",
        block.len() + 24
    );
    assert_eq!(e.message, want);
    assert_eq!(e.offset, Some(cut as u64));
}

#[test]
fn flipped_bit_in_a_block_is_a_checksum_mismatch() {
    let bytes = encode(&program_like(2 * BLOCK_RECORDS, 8), "");
    let ranges = payload_ranges(&bytes);
    let second = &ranges[1];
    let mut bad = bytes.clone();
    bad[second.start + second.len() / 2] ^= 4;
    let e = decode(&bad).unwrap_err();
    let at = second.start - 24;
    assert_eq!(
        e.message,
        format!("checksum mismatch in block 1 at byte {at}: the file is corrupt")
    );
    assert_eq!(e.offset, Some(at as u64));
}

#[test]
fn trailing_garbage_and_wrong_end_count_are_corruption() {
    let mut bytes = encode(&[Record::load(1)], "");
    let mut long = bytes.clone();
    long.push(0);
    let e = decode(&long).unwrap_err();
    assert!(
        e.message.contains("unexpected data after the end marker"),
        "{e}"
    );
    assert_eq!(e.offset, Some(bytes.len() as u64));

    // An end marker with a valid checksum but the wrong count (a writer bug or a splice).
    let end = bytes.len() - 24;
    bytes[end + 8..end + 16].copy_from_slice(&2u64.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[end + 4..end + 16]);
    bytes[end + 16..].copy_from_slice(&sum.to_le_bytes());
    let e = decode(&bytes).unwrap_err();
    assert!(
        e.message.contains("counts 2 records but the file holds 1"),
        "{e}"
    );
}

/// A valid trace of a few records, then arbitrary bytes where blocks should be: exercises the
/// block parser on garbage that gets past the header check.
fn valid_header_then(garbage: &[u8]) -> Vec<u8> {
    let mut bytes = encode(&[], "fuzz");
    bytes.truncate(bytes.len() - 24);
    bytes.extend_from_slice(garbage);
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes: an error or (never, in practice) a trace, but never a panic.
    #[test]
    fn fuzz_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = decode(&with_magic);
        let _ = decode(&valid_header_then(&bytes));
    }

    /// Garbage shaped like block headers (real magic, random counts and lengths).
    #[test]
    fn fuzz_block_headers_never_panic(
        n in prop_oneof![any::<u32>(), 0u32..70_000],
        raw in prop_oneof![any::<u32>(), 0u32..2_000_000],
        comp in prop_oneof![any::<u32>(), 0u32..100_000],
        tail in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut g = b"CCBK".to_vec();
        for v in [n, raw, comp] {
            g.extend_from_slice(&v.to_le_bytes());
        }
        g.extend_from_slice(&tail);
        let e = decode(&valid_header_then(&g)).unwrap_err();
        prop_assert!(e.offset.is_some());
    }

    /// A valid trace cut anywhere: always an error that says truncated and where.
    #[test]
    fn fuzz_truncation_is_reported(
        n in 0usize..(BLOCK_RECORDS + 2000),
        seed in any::<u64>(),
        cut_frac in 0.0f64..1.0,
    ) {
        let bytes = encode(&program_like(n, seed), "truncate me");
        let cut = ((bytes.len() as f64 * cut_frac) as usize).clamp(1, bytes.len() - 1);
        let e = decode(&bytes[..cut]).unwrap_err();
        prop_assert!(e.message.contains("truncated"), "cut {}: {}", cut, e);
        prop_assert!(e.offset.is_some_and(|o| o <= cut as u64), "cut {}: {:?}", cut, e.offset);
    }

    /// A valid trace with one flipped bit anywhere: always an error; in a block's payload, a
    /// checksum mismatch.
    #[test]
    fn fuzz_bit_flips_are_reported(
        n in 1usize..(BLOCK_RECORDS + 2000),
        seed in any::<u64>(),
        at_frac in 0.0f64..1.0,
        bit in 0u8..8,
    ) {
        let mut bytes = encode(&program_like(n, seed), "flip me");
        let at = ((bytes.len() as f64 * at_frac) as usize).min(bytes.len() - 1);
        let in_payload = payload_ranges(&bytes).iter().any(|r| r.contains(&at));
        bytes[at] ^= 1 << bit;
        let e = decode(&bytes).unwrap_err();
        prop_assert!(e.offset.is_some(), "flip at {}: {}", at, e);
        if in_payload {
            prop_assert!(e.message.contains("checksum mismatch"), "flip at {}: {}", at, e);
        }
    }

    /// Several random bit flips and a random cut together: never a panic, never a wrong answer
    /// passed off as the trace.
    #[test]
    fn fuzz_flips_and_cuts_never_panic(
        seed in any::<u64>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let records = program_like(3000, seed);
        let mut bytes = encode(&records, "");
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        let cut = 1 + cut.index(bytes.len());
        if let Ok(got) = decode(&bytes[..cut]) {
            prop_assert_eq!(got, records);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Formats, importers, conversion

#[test]
fn format_names_parse() {
    assert_eq!(Format::parse("native").unwrap(), Format::Native);
    assert_eq!(Format::parse("lackey").unwrap(), Format::Lackey);
    assert_eq!(Format::parse("din").unwrap(), Format::Din);
    assert_eq!(Format::parse("ChampSim").unwrap(), Format::ChampSim);
    let e = Format::parse("pin").unwrap_err();
    assert_eq!(e.field, "format");
    assert!(e.message.contains("native, lackey, din, champsim"), "{e}");
    for f in Format::ALL {
        assert_eq!(Format::parse(&f.to_string()).unwrap(), f);
    }
}

const LACKEY_SAMPLE: &str = "==42== Lackey, an example Valgrind tool\n\
==42== Command: ./prog\n\
==42== \n\
I  0400d7d4,8\n \
S 7ff000398,8\n\
I  0400d7dc,3\n \
L 04d8f018,4\n \
M 0421c7f0,4\n\
==42== \n\
==42== Counted 1 call to main()\n";

fn lackey_expected() -> Vec<Record> {
    vec![
        Record {
            icount: 1,
            ..Record::new(Kind::IFetch, 0x0400d7d4, 8)
        },
        Record::new(Kind::Store, 0x7ff000398, 8),
        Record {
            icount: 1,
            ..Record::new(Kind::IFetch, 0x0400d7dc, 3)
        },
        Record::new(Kind::Load, 0x04d8f018, 4),
        Record::new(Kind::Modify, 0x0421c7f0, 4),
    ]
}

#[test]
fn importers_read_plain_gzip_xz_and_zstd_files() {
    let dir = temp_dir("compressed");
    let din = "2 400d7d4\n0 7ff000398 8\n1 4d8f018\n4 0\n";
    let din_expected = vec![
        Record {
            icount: 1,
            ..Record::new(Kind::IFetch, 0x400d7d4, 4)
        },
        Record::new(Kind::Load, 0x7ff000398, 8),
        Record::new(Kind::Store, 0x4d8f018, 4),
    ];
    for (format, text, expected) in [
        (Format::Lackey, LACKEY_SAMPLE, lackey_expected()),
        (Format::Din, din, din_expected),
    ] {
        let plain = dir.join(format!("{format}.txt"));
        std::fs::write(&plain, text).unwrap();
        let gz = dir.join(format!("{format}.txt.gz"));
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        let xz = dir.join(format!("{format}.txt.xz"));
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(text.as_bytes()).unwrap();
        std::fs::write(&xz, e.finish().unwrap()).unwrap();
        let zst = dir.join(format!("{format}.txt.zst"));
        std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 1).unwrap()).unwrap();

        for path in [plain, gz, xz, zst] {
            let mut src = trace::open(&path, format).unwrap();
            assert_eq!(collect(&mut src).unwrap(), expected, "{}", path.display());
            let p = src.progress();
            let len = std::fs::metadata(&path).unwrap().len();
            assert_eq!(
                (p.bytes, p.total_bytes),
                (len, Some(len)),
                "{}",
                path.display()
            );
            assert_eq!(p.records, expected.len() as u64);
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn importers_name_the_bad_line() {
    let text = "I  0400d7d4,8\n L 04d8f018,4\n L 04d8f01g,4\n";
    let e = collect(&mut trace::lackey::LackeyReader::new(text.as_bytes())).unwrap_err();
    assert_eq!(e.offset, Some(28));
    assert_eq!(
        e.message,
        "line 3: address 04d8f01g is not hexadecimal: \" L 04d8f01g,4\""
    );

    let text = "0 1000\n1 2000\n2 3000\nx 4000\n";
    let e = collect(&mut trace::din::DinReader::new(text.as_bytes())).unwrap_err();
    assert!(e.message.starts_with("line 4: label \"x\""), "{e}");
    assert_eq!(e.offset, Some(21));

    // The error is sticky and no records of the failing block leak out.
    let mut r = trace::din::DinReader::new(text.as_bytes());
    let mut buf = vec![Record::load(0)];
    assert!(r.next_block(&mut buf).is_err());
    assert!(buf.is_empty());
    assert!(r.next_block(&mut buf).is_err());
}

fn champsim_instr(ip: u64, dst: [u64; 2], src: [u64; 4]) -> Vec<u8> {
    let mut b = ip.to_le_bytes().to_vec();
    b.extend_from_slice(&[0, 0, 1, 2, 3, 4, 5, 6]);
    for a in dst.iter().chain(&src) {
        b.extend_from_slice(&a.to_le_bytes());
    }
    assert_eq!(b.len(), 64);
    b
}

#[test]
fn champsim_open_picks_decompression_by_extension() {
    let dir = temp_dir("champsim");
    let mut raw = champsim_instr(0x1000, [0x9000, 0], [0x8000, 0, 0, 0x8040]);
    raw.extend(champsim_instr(0x1004, [0, 0], [0, 0, 0, 0]));
    let expected = vec![
        Record {
            icount: 1,
            ..Record::new(Kind::IFetch, 0x1000, 4)
        },
        Record::new(Kind::Load, 0x8000, 8),
        Record::new(Kind::Load, 0x8040, 8),
        Record::new(Kind::Store, 0x9000, 8),
        Record {
            icount: 1,
            ..Record::new(Kind::IFetch, 0x1004, 4)
        },
    ];
    let plain = dir.join("t.champsimtrace");
    std::fs::write(&plain, &raw).unwrap();
    let xz = dir.join("t.champsimtrace.xz");
    let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(&raw).unwrap();
    std::fs::write(&xz, e.finish().unwrap()).unwrap();
    let gz = dir.join("t.champsimtrace.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&raw).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    for path in [&plain, &xz, &gz] {
        let mut r = trace::champsim::ChampSimReader::open(path).unwrap();
        assert_eq!(collect(&mut r).unwrap(), expected, "{}", path.display());
        let mut src = trace::open(path, Format::ChampSim).unwrap();
        assert_eq!(collect(&mut src).unwrap(), expected, "{}", path.display());
    }
    // A cut record is a truncation with the offset of the instruction it belongs to.
    std::fs::write(&plain, &raw[..100]).unwrap();
    let e = collect(&mut trace::open(&plain, Format::ChampSim).unwrap()).unwrap_err();
    assert_eq!(e.offset, Some(64));
    assert!(e.message.contains("truncated ChampSim trace"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn convert_streams_a_source_into_a_native_trace() {
    let dir = temp_dir("convert");
    let input = dir.join("prog.lackey");
    std::fs::write(&input, LACKEY_SAMPLE).unwrap();
    let out = dir.join("prog.cct");
    let mut src = trace::open(&input, Format::Lackey).unwrap();
    let mut calls: Vec<Progress> = Vec::new();
    let n = convert(&mut *src, &out, "lackey ./prog", &mut |p| calls.push(p)).unwrap();
    assert_eq!(n, 5);
    assert_eq!(calls.last().unwrap().records, 5);
    let mut r = TraceReader::open(&out).unwrap();
    assert_eq!(r.metadata(), "lackey ./prog");
    assert_eq!(collect(&mut r).unwrap(), lackey_expected());
    assert_eq!(files_in(&dir), ["prog.cct", "prog.lackey"]);

    // Many blocks: progress comes about once a block.
    let records = program_like(3 * BLOCK_RECORDS + 7, 9);
    let mut calls = 0;
    let n = convert(&mut VecSource::new(records.clone()), &out, "", &mut |_| {
        calls += 1
    })
    .unwrap();
    assert_eq!((n, calls), (records.len() as u64, 4));
    assert_eq!(
        collect(&mut TraceReader::open(&out).unwrap()).unwrap(),
        records
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn failed_convert_keeps_the_old_output_and_leaves_no_temporary() {
    let dir = temp_dir("convert-fail");
    let out = dir.join("prog.cct");
    std::fs::write(&out, b"precious").unwrap();
    let input = dir.join("bad.din");
    let mut text = String::new();
    for i in 0..(2 * BLOCK_RECORDS) {
        text.push_str(&format!("0 {:x}\n", i * 64));
    }
    text.push_str("0 zzz\n");
    std::fs::write(&input, &text).unwrap();
    let mut src = trace::open(&input, Format::Din).unwrap();
    let e = convert(&mut *src, &out, "", &mut |_| {}).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("line {}", 2 * BLOCK_RECORDS + 1)),
        "{msg}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    assert_eq!(files_in(&dir), ["bad.din", "prog.cct"]);
    std::fs::remove_dir_all(dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Speed (run on demand; prints figures, asserts nothing about time)

fn cpu_seconds() -> f64 {
    // Thread CPU time (ns) from the scheduler: robust against other load on the machine.
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |ns| ns / 1e9)
}

fn time_native(name: &str, records: &[Record]) {
    let n = records.len() as f64;
    let (t, c) = (std::time::Instant::now(), cpu_seconds());
    let bytes = encode(records, name);
    let (enc_wall, enc_cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
    let mut best = (f64::INFINITY, f64::INFINITY);
    let mut buf = Vec::new();
    for _ in 0..5 {
        let (t, c) = (std::time::Instant::now(), cpu_seconds());
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        let mut count = 0;
        while r.next_block(&mut buf).unwrap() {
            count += buf.len();
        }
        assert_eq!(count, records.len());
        best = (
            best.0.min(t.elapsed().as_secs_f64()),
            best.1.min(cpu_seconds() - c),
        );
    }
    println!(
        "{name}: {} records, {:.2} bytes/record; encode {:.0} M/s ({:.0} M/s cpu); \
         decode {:.0} M/s ({:.0} M/s cpu)",
        records.len(),
        bytes.len() as f64 / n,
        n / enc_wall / 1e6,
        n / enc_cpu / 1e6,
        n / best.0 / 1e6,
        n / best.1 / 1e6,
    );
}

#[test]
#[ignore = "speed check: run with --release --ignored --nocapture"]
fn speed_of_native_encode_decode() {
    time_native("program-like", &program_like(20_000_000, 42));
    let mut rng = SplitMix64::new(7);
    let random: Vec<Record> = (0..20_000_000)
        .map(|_| Record::load(rng.below(1 << 32) & !7))
        .collect();
    time_native("uniform random 4 GiB", &random);
    let sequential: Vec<Record> = (0..20_000_000u64).map(|i| Record::load(8 * i)).collect();
    time_native("sequential", &sequential);

    if let Ok(path) = std::env::var("CACHECOLOR_BENCH_LACKEY") {
        let (t, c) = (std::time::Instant::now(), cpu_seconds());
        let mut src = trace::open(Path::new(&path), Format::Lackey).unwrap();
        let mut records = Vec::new();
        let mut buf = Vec::new();
        while records.len() < 50_000_000 && src.next_block(&mut buf).unwrap() {
            records.extend_from_slice(&buf);
        }
        let n = records.len() as f64;
        println!(
            "lackey import: {:.1} M/s ({:.1} M/s cpu)",
            n / t.elapsed().as_secs_f64() / 1e6,
            n / (cpu_seconds() - c) / 1e6
        );
        time_native("lackey trace", &records);
    }
}

/// `pipelined` hands every block over in order with its progress, and stops both sides at the
/// first error from either.
#[test]
fn pipelined_blocks_arrive_in_order_and_errors_stop_both_sides() {
    use cachecolor_sim::trace::{pipelined, Progress, Record};
    let blocks = 50u64;
    let mut made = 0u64;
    let mut seen = Vec::new();
    pipelined(
        |buf: &mut Vec<Record>| -> Result<Option<Progress>, String> {
            if made == blocks {
                return Ok(None);
            }
            buf.extend((0..1000).map(|i| Record::load(made * 1000 + i)));
            made += 1;
            Ok(Some(Progress {
                records: made * 1000,
                ..Progress::default()
            }))
        },
        |block, p| {
            assert_eq!(block.len(), 1000);
            seen.push((block[0].addr, block[999].addr, p.records));
            Ok(())
        },
    )
    .unwrap();
    let want: Vec<_> = (0..blocks)
        .map(|b| (b * 1000, b * 1000 + 999, (b + 1) * 1000))
        .collect();
    assert_eq!(seen, want);

    // A producer error after three blocks: those three are consumed, then the error returns.
    let mut made = 0;
    let mut consumed = 0;
    let r = pipelined(
        |buf: &mut Vec<Record>| {
            if made == 3 {
                return Err("corrupt block 3".to_string());
            }
            made += 1;
            buf.push(Record::load(made));
            Ok(Some(Progress::default()))
        },
        |_, _| {
            consumed += 1;
            Ok(())
        },
    );
    assert_eq!(r, Err("corrupt block 3".to_string()));
    assert_eq!(consumed, 3);

    // A consumer error (e.g. Ctrl-C) stops an endless producer.
    let r = pipelined(
        |buf: &mut Vec<Record>| -> Result<Option<Progress>, String> {
            buf.push(Record::load(1));
            Ok(Some(Progress::default()))
        },
        |_, _| Err("interrupted".to_string()),
    );
    assert_eq!(r, Err("interrupted".to_string()));
}
