use super::*;
use crate::trace::collect;

fn sample(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let kind = Kind::ALL[i % 4];
            Record {
                addr: 0x7fff_0000_0000u64.wrapping_add((i as u64).wrapping_mul(0x9e37_79b9)),
                thread: (i / 1000) as u32,
                icount: (i % 300) as u32,
                size: [1, 4, 8, 64, 300, 65535][i % 6],
                kind,
                privileged: i % 7 == 0,
                syscall: if i % 21 == 0 {
                    (i as u32).wrapping_mul(0x9e37_79b9) | 1
                } else {
                    0
                },
            }
        })
        .collect()
}

/// `bytes` (a file with empty metadata) relabelled as `version`, header checksum redone.
fn relabel(mut bytes: Vec<u8>, version: u16) -> Vec<u8> {
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    let sum = xxh3_64(&bytes[..FILE_HEADER_FIXED]);
    bytes[FILE_HEADER_FIXED..FILE_HEADER_FIXED + 8].copy_from_slice(&sum.to_le_bytes());
    bytes
}

#[test]
fn version_1_files_still_read_and_bit_7_is_reserved_there() {
    let mut plain = sample(3000);
    plain.iter_mut().for_each(|r| r.syscall = 0);
    let v1 = relabel(encode_file(&plain, ""), 1);
    let r = TraceReader::new(&v1[..]).unwrap();
    assert_eq!(r.version(), 1);
    assert_eq!(decode_file(&v1).unwrap(), plain);
    // The same records with syscall identities need version 2.
    let with = sample(3000);
    assert!(with.iter().any(|r| r.syscall != 0));
    assert_eq!(decode_file(&encode_file(&with, "")).unwrap(), with);
    let err = decode_file(&relabel(encode_file(&with, ""), 1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("reserved tag bit"), "{err}");
}

fn encode_file(records: &[Record], meta: &str) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), meta).unwrap();
    w.write_all(records).unwrap();
    w.finish().unwrap()
}

fn decode_file(bytes: &[u8]) -> Result<Vec<Record>, Error> {
    let mut r = TraceReader::new(bytes)?;
    Ok(collect(&mut r)?)
}

/// One PC per record of `sample`: data records get a made-up instruction address, ifetches
/// their own address (what a reader returns for them).
fn sample_pcs(records: &[Record]) -> Vec<u64> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if r.kind == Kind::IFetch {
                r.addr
            } else {
                0x40_0000_1000 + 4 * (i as u64 % 97)
            }
        })
        .collect()
}

fn decode_file_with_pcs(bytes: &[u8]) -> Result<(Vec<Record>, Vec<u64>), Error> {
    let mut r = TraceReader::new(bytes)?;
    let (mut records, mut pcs, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    while r.next_block(&mut buf)? {
        records.extend_from_slice(&buf);
        pcs.extend_from_slice(r.block_pcs());
    }
    Ok((records, pcs))
}

#[test]
fn version_3_pc_column_round_trips_across_blocks() {
    let records = sample(BLOCK_RECORDS + 333);
    let pcs = sample_pcs(&records);
    let mut w = TraceWriter::with_pcs(Vec::new(), "m").unwrap();
    // Half through write_all_with_pcs, half one at a time: both keep the PCs aligned.
    let half = records.len() / 2;
    w.write_all_with_pcs(&records[..half], Some(&pcs[..half]))
        .unwrap();
    for (r, pc) in records[half..].iter().zip(&pcs[half..]) {
        w.write_with_pc(r, *pc).unwrap();
    }
    let bytes = w.finish().unwrap();
    let r = TraceReader::new(&bytes[..]).unwrap();
    assert_eq!((r.version(), r.has_pcs()), (3, true));
    let (got, got_pcs) = decode_file_with_pcs(&bytes).unwrap();
    assert_eq!(got, records);
    assert_eq!(got_pcs, pcs);
    // A writer with PCs given none records 0 (unknown) for data, the address for ifetches.
    let mut w = TraceWriter::with_pcs(Vec::new(), "").unwrap();
    w.write_all(&records[..100]).unwrap();
    let (_, zero) = decode_file_with_pcs(&w.finish().unwrap()).unwrap();
    for (r, pc) in records[..100].iter().zip(zero) {
        assert_eq!(pc, if r.kind == Kind::IFetch { r.addr } else { 0 });
    }
}

#[test]
fn traces_without_pcs_stay_version_2_and_older_versions_read_without_pcs() {
    let mut plain = sample(2000);
    plain.iter_mut().for_each(|r| r.syscall = 0);
    for (bytes, version) in [
        (encode_file(&plain, ""), 2),
        (relabel(encode_file(&plain, ""), 1), 1),
    ] {
        let (got, pcs) = decode_file_with_pcs(&bytes).unwrap();
        assert_eq!(got, plain);
        assert!(pcs.is_empty(), "version {version} has no PC column");
    }
    // The PC flag means nothing before version 3: such a header is rejected, by field.
    let mut w = TraceWriter::with_pcs(Vec::new(), "").unwrap();
    w.write_all(&plain).unwrap();
    let err = decode_file(&relabel(w.finish().unwrap(), 2))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unsupported trace flags 0x0001 for version 2"),
        "{err}"
    );
}

#[test]
fn a_pc_column_cut_short_is_corruption_not_a_misread() {
    let records = sample(500);
    let mut raw = Vec::new();
    Encoder::default().encode(&records, Some(&sample_pcs(&records)), &mut raw);
    let len = raw.len() - 8; // one PC missing
    raw.extend_from_slice(&[0; 8]);
    let mut out = Vec::new();
    let mut pcs = Vec::new();
    let err = decode(
        &raw,
        len,
        records.len(),
        VERSION,
        &mut out,
        Some(&mut pcs),
        None,
    )
    .unwrap_err();
    assert!(err.contains("column directory"), "{err}");
}

#[test]
fn zigzag_round_trips_extremes() {
    for v in [0i64, 1, -1, i64::MAX, i64::MIN, 12345, -98765] {
        assert_eq!(unzigzag(zigzag(v)), v);
    }
}

#[test]
fn block_round_trip() {
    let records = sample(5000);
    let mut raw = Vec::new();
    Encoder::default().encode(&records, None, &mut raw);
    let len = raw.len();
    raw.extend_from_slice(&[0; 8]);
    let mut out = Vec::new();
    decode(&raw, len, records.len(), VERSION, &mut out, None, None).unwrap();
    assert_eq!(out, records);
}

#[test]
fn file_round_trip_keeps_metadata() {
    let records = sample(BLOCK_RECORDS + 17);
    let bytes = encode_file(&records, "prog --flag ✓");
    let r = TraceReader::new(&bytes[..]).unwrap();
    assert_eq!(r.metadata(), "prog --flag ✓");
    assert_eq!(r.version(), VERSION_WITHOUT_PCS);
    assert!(!r.has_pcs());
    assert_eq!(decode_file(&bytes).unwrap(), records);
}

#[test]
fn missing_end_marker_is_truncation() {
    let bytes = encode_file(&sample(10), "");
    let cut = &bytes[..bytes.len() - BLOCK_HEADER_BYTES];
    let err = decode_file(cut).unwrap_err().to_string();
    assert!(
        err.contains("truncated") && err.contains("without an end marker"),
        "{err}"
    );
}

#[test]
fn wrong_magic_and_version() {
    let err = decode_file(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a cachecolor trace"), "{err}");
    let mut bytes = encode_file(&[], "");
    bytes[8] = 9;
    let err = decode_file(&bytes).unwrap_err().to_string();
    assert!(err.contains("unsupported trace version 9"), "{err}");
    let err = decode_file(b"").unwrap_err().to_string();
    assert!(err.contains("empty file"), "{err}");
}

#[test]
fn flipped_payload_bit_is_a_checksum_mismatch() {
    let mut bytes = encode_file(&sample(100), "");
    let payload = FILE_HEADER_FIXED + 8 + BLOCK_HEADER_BYTES + 3;
    bytes[payload] ^= 0x10;
    let err = decode_file(&bytes).unwrap_err().to_string();
    assert!(err.contains("checksum mismatch in block 0"), "{err}");
}

#[test]
fn reader_is_fused_after_error_and_end() {
    let bytes = encode_file(&sample(3), "");
    let mut r = TraceReader::new(&bytes[..]).unwrap();
    let mut buf = Vec::new();
    assert!(r.next_block(&mut buf).unwrap());
    assert!(!r.next_block(&mut buf).unwrap());
    assert!(!r.next_block(&mut buf).unwrap());
    let cut = &bytes[..bytes.len() - 5];
    let mut r = TraceReader::new(cut).unwrap();
    assert!(r.next_block(&mut buf).unwrap());
    let e1 = r.next_block(&mut buf).unwrap_err();
    assert_eq!(r.next_block(&mut buf).unwrap_err(), e1);
}

/// A program's fetches, run on through lines (1 to 15 bytes each, now and then 300, which is
/// escaped, or one that straddles two lines), a data record after some (now and then one that
/// changes the thread, or of the other privilege), a jump now and then,
/// thread changes and privileged stretches starting with a syscall identity, and fetch icounts
/// mostly 1 with some 0 and 300 (escaped): every mark that stops a fetch from being folded.
fn fetch_runs(n: usize) -> Vec<Record> {
    let (mut x, mut pc, mut thread, mut privileged) = (11u64, 0x40_1000u64, 0u32, false);
    let mut recs = Vec::with_capacity(n + 2);
    while recs.len() < n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let size = match x >> 56 {
            0 => 300,
            _ => 1 + (x >> 60) as u16 % 15,
        };
        let mut f = Record::new(Kind::IFetch, pc, size);
        f.thread = thread;
        f.privileged = privileged;
        f.icount = match (x >> 20) % 200 {
            0 => 0,
            1 => 300,
            _ => 1,
        };
        if x % 211 == 0 {
            privileged = !privileged;
            f.privileged = privileged;
            f.syscall = if privileged { (x as u32) | 1 } else { 0 };
        }
        if x % 251 == 0 {
            thread = (thread + 1) % 3;
            f.thread = thread;
        }
        // A syscall identity on a fetch that would fold but for it (a writer may put one on
        // any record).
        if privileged && x % 37 == 0 {
            f.syscall = (x >> 7) as u32 | 1;
        }
        recs.push(f);
        if x % 3 == 0 {
            let mut d = Record::new(
                Kind::ALL[(x >> 8) as usize % 4],
                0x7f00_0000 + (x >> 30) % 65536,
                8,
            );
            d.thread = thread;
            d.privileged = privileged;
            // A data record that changes the thread, or whose privilege is not its
            // neighbours': the fetch after it, on the line of the fetch before, is not folded.
            if x % 7 == 0 && (x >> 40) % 41 == 0 {
                thread = (thread + 1) % 3;
                d.thread = thread;
            }
            if x % 7 == 1 && (x >> 40) % 37 == 0 {
                d.privileged = !privileged;
            }
            recs.push(d);
            // Now and then a second data record right after: its PC is reconstructed from
            // the latest fetch before the first (folded or given).
            if x % 4 == 3 {
                recs.push(Record {
                    addr: d.addr ^ 8,
                    kind: Kind::Load,
                    ..d
                });
            }
        }
        pc = if x % 29 == 0 {
            0x40_1000 + (x >> 33) % 8192
        } else {
            pc + size.min(15) as u64
        };
    }
    recs
}

/// Every record of a trace read with its repeated fetches folded out, put back with
/// `FoldedFetches::unfold`: the records and PCs read without folding.
fn read_folded(bytes: &[u8]) -> (Vec<Record>, Vec<u64>, usize) {
    let mut r = TraceReader::new(bytes).unwrap();
    assert!(r.fold_repeated_fetches(true));
    let (mut records, mut pcs, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    let (mut fold, mut block_pcs, mut folded) = (FoldedFetches::default(), Vec::new(), 0);
    while r.next_block(&mut buf).unwrap() {
        r.take_block_pcs(&mut block_pcs);
        r.take_block_folds(&mut fold);
        folded += fold.len();
        let has_pcs = !block_pcs.is_empty();
        if has_pcs {
            assert_eq!(block_pcs.len(), buf.len());
        }
        records.extend(fold.unfold(&buf, has_pcs.then_some(&mut block_pcs)));
        pcs.extend_from_slice(&block_pcs);
    }
    // At the end, nothing is left folded.
    r.take_block_folds(&mut fold);
    assert!(fold.is_empty() && !r.next_block(&mut buf).unwrap());
    (records, pcs, folded)
}

#[test]
fn folded_fetches_put_back_are_the_records_read_without_folding() {
    let records = fetch_runs(2 * BLOCK_RECORDS + 777);
    let pcs = sample_pcs(&records);
    for with_pcs in [true, false] {
        let mut w = TraceWriter::new_with(Vec::new(), "", with_pcs).unwrap();
        w.write_all_with_pcs(&records, with_pcs.then_some(&pcs[..]))
            .unwrap();
        let bytes = w.finish().unwrap();
        let (plain, plain_pcs) = decode_file_with_pcs(&bytes).unwrap();
        assert_eq!(plain, records);
        let (got, got_pcs, folded) = read_folded(&bytes);
        assert_eq!(got.len(), records.len(), "pcs {with_pcs}");
        if let Some(i) = (0..got.len()).find(|&i| got[i] != records[i]) {
            panic!(
                "pcs {with_pcs}: record {i}: {:?} read as {:?}",
                records[i], got[i]
            );
        }
        assert_eq!(got_pcs, plain_pcs, "pcs {with_pcs}");
        // Not vacuous: most fetches fold, and every mark occurs on records that do not.
        let fetches = records.iter().filter(|r| r.kind == Kind::IFetch).count();
        assert!(
            folded > fetches / 3 && folded < fetches,
            "{folded} of {fetches}"
        );
        assert!(records
            .iter()
            .any(|r| r.syscall != 0 && r.kind == Kind::IFetch));
        // A syscall identity where a fold would otherwise be: a privileged fetch on the line,
        // privilege and thread of the fetch before it.
        assert!(records.windows(2).any(|w| {
            let (a, b) = (&w[0], &w[1]);
            b.syscall != 0
                && (a.kind, b.kind) == (Kind::IFetch, Kind::IFetch)
                && (a.addr >> 6, a.thread, a.privileged) == (b.addr >> 6, b.thread, b.privileged)
        }));
        // Read again with folding asked and then turned off: every record, none folded.
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        r.fold_repeated_fetches(true);
        assert!(!r.fold_repeated_fetches(false));
        assert_eq!(collect(&mut r).unwrap(), records);
        assert!(records
            .iter()
            .any(|r| r.size == 300 && r.kind == Kind::IFetch));
        assert!(records.iter().any(|r| r.icount == 300));
        assert!(records.iter().any(|r| r.thread == 2));
    }
}

/// A block's first fetch is never folded: its line is a delta from 0, not the line of a fetch
/// before it in the block. Here it comes after a data record at the block's start, at line 0,
/// with nothing else that stops a fold; folded, it would be put back on the line of the
/// previous block's last fetch.
#[test]
fn a_blocks_first_fetch_after_a_data_record_is_not_folded() {
    let mut records: Vec<Record> = (0..BLOCK_RECORDS as u64)
        .map(|i| Record::new(Kind::IFetch, 0x40_1000 + 4 * (i % 8), 4))
        .collect();
    records.push(Record::new(Kind::Load, 0x7f00_0000, 8));
    records.push(Record::new(Kind::IFetch, 0x8, 4));
    records.push(Record::new(Kind::IFetch, 0xc, 4));
    records.push(Record::new(Kind::Load, 0x7f00_0040, 8));
    records.push(Record::new(Kind::IFetch, 0x10, 4));
    // Fetches as captured: one instruction each.
    for r in records.iter_mut().filter(|r| r.kind == Kind::IFetch) {
        r.icount = 1;
    }
    for with_pcs in [true, false] {
        let mut w = TraceWriter::new_with(Vec::new(), "", with_pcs).unwrap();
        let pcs = sample_pcs(&records);
        w.write_all_with_pcs(&records, with_pcs.then_some(&pcs[..]))
            .unwrap();
        let bytes = w.finish().unwrap();
        let (got, got_pcs, folded) = read_folded(&bytes);
        assert_eq!(got, records, "pcs {with_pcs}");
        if with_pcs {
            assert_eq!(got_pcs, decode_file_with_pcs(&bytes).unwrap().1);
        }
        // Folded: the first block's fetches after its first, and the second block's fetches
        // after its first (one right after it, one after a data record).
        assert_eq!(folded, BLOCK_RECORDS - 1 + 2, "pcs {with_pcs}");
    }
}
