//! Pass 2 of the native decoder for a consumer that takes repeated fetches folded out of the
//! records (`FoldedFetches`, `RecordSource::fold_repeated_fetches`).

use super::*;

/// Pass 2 of `decode` folding repeated fetches out (`FoldedFetches`): as `decode_records`, for
/// the records given. A record is folded where it is a fetch (kind 2) whose tag holds nothing
/// else but the privilege bit of the record before (width class 0: the line of the block's
/// latest fetch before it, given or folded; no thread change or syscall identity), whose icount
/// is 1 and which lies within its line; the block's first fetch is always given.
/// That test looks at two neighbouring records only, so it runs over the block as one
/// vectorisable pass into a bit per record, and the decode loop visits the given records alone
/// (`trailing_zeros` over the bits); a folded fetch costs no more than its bit. The consumer
/// reads the folded fetches from the block's offset and size columns, copied whole, between
/// the encoded positions of the records given (`FoldedFetches::columns`), which pass 3 uses
/// too, to find the record each mark belongs to.
pub(super) fn decode_folding<const PCS: bool>(
    cols: Columns,
    out: &mut Vec<Record>,
    pcs: &mut Vec<u64>,
    fold: &mut FoldedFetches,
) {
    let Columns {
        tags,
        offsets,
        sizes,
        icounts,
        ..
    } = cols;
    let n = tags.len();
    // A byte per record, 1 where it is folded (record 0 never is), written in one pass of
    // byte compares with no early exit (it vectorises); then bit `i % 64` of word `i / 64`,
    // eight bytes at a time (each 0 or 1: the multiplication gathers their low bits into the
    // top byte).
    let mut bytes = vec![0u8; n.div_ceil(64) * 64];
    if n > 1 {
        let neighbours = tags[1..].iter().zip(&tags[..n - 1]);
        let rest = icounts[1..].iter().zip(&offsets[1..]).zip(&sizes[1..]);
        for ((b, (&t, &before)), ((&c, &off), &s)) in
            bytes[1..n].iter_mut().zip(neighbours).zip(rest)
        {
            *b = ((t & !TAG_PRIVILEGED == Kind::IFetch as u8)
                & ((t ^ before) & TAG_PRIVILEGED == 0)
                & (c == 1)
                & (off as u16 + s.max(1) as u16 <= 1 << LINE_SHIFT)) as u8;
        }
        // Width class 0 is the line of the block's latest fetch before; the block's first
        // fetch has none (its line is a delta from 0), so it is given.
        if let Some(first) = tags.iter().position(|&t| t & 3 == Kind::IFetch as u8) {
            bytes[first] = 0;
        }
    }
    let folded: Vec<u64> = bytes
        .chunks_exact(64)
        .map(|chunk| {
            chunk
                .chunks_exact(8)
                .enumerate()
                .fold(0u64, |bits, (k, eight)| {
                    let b = u64::from_le_bytes(eight.try_into().unwrap());
                    bits | (b.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k)
                })
        })
        .collect();
    let is_folded = |i: usize| folded[i / 64] >> (i % 64) & 1 != 0;
    let (start, pc_start) = (out.len(), pcs.len());
    let (records, pc_slots) = spare_slots::<PCS>(out, pcs, n);
    fold.columns.reserve(n + 1);
    let column_slots = &mut fold.columns.spare_capacity_mut()[..n];
    let mut given = 0usize;
    let mut lines = Lines::default();
    let (mut pc_at, mut last_fetch) = (0usize, 0u64);
    for (w, &bits) in folded.iter().enumerate() {
        let valid = if 64 * w + 64 <= n {
            u64::MAX
        } else {
            (1u64 << (n - 64 * w)) - 1
        };
        let mut todo = !bits & valid;
        while todo != 0 {
            let i = 64 * w + todo.trailing_zeros() as usize;
            todo &= todo - 1;
            let r = lines.record(tags[i], offsets[i], sizes[i], icounts[i], cols.addr);
            let (is_inst, address) = (r.kind == Kind::IFetch, r.addr);
            records[given].write(r);
            column_slots[given].write(i as u32);
            if PCS {
                // The block's latest fetch before a data record: a folded fetch right before
                // it (on the line of the fetch before that), else the latest fetch given.
                if i > 0 && is_folded(i - 1) {
                    last_fetch = (lines.inst << LINE_SHIFT) | offsets[i - 1] as u64;
                }
                // A data record's word is its PC XOR the block's latest fetch before it.
                let word = u64::from_le_bytes(cols.pcs[pc_at..pc_at + 8].try_into().unwrap());
                last_fetch = if is_inst { address } else { last_fetch };
                pc_slots[given].write(if is_inst { address } else { word ^ last_fetch });
                pc_at += 8 * (!is_inst) as usize;
            }
            given += 1;
        }
    }
    // SAFETY: the loop wrote the first `given` slots of `records` and `column_slots` (and with
    // `PCS`, of `pc_slots`), each reserved above.
    unsafe {
        out.set_len(start + given);
        fold.columns.set_len(given);
        if PCS {
            pcs.set_len(pc_start + given);
        }
    }
    fold.columns.push(n as u32);
    fold.offsets.extend_from_slice(offsets);
    fold.sizes.extend_from_slice(sizes);
}
