//! The native trace reader: the file header (magic, version, flags, metadata, the footer's
//! record count when the file is seekable), then block by block with each block's checksum
//! checked before it is decoded; the first error is kept and returned again.

use super::*;

// ---------------------------------------------------------------------------------------------
// Reader

/// Reads a native trace block by block (a `RecordSource`).
pub struct TraceReader<R: Read> {
    r: R,
    metadata: String,
    version: u16,
    /// Version 3 with `FLAG_PCS`: the PCs of the last block read, one per record.
    pcs: Option<Vec<u64>>,
    /// Once `fold_repeated_fetches` is asked: the fetches folded out of the last block.
    fold: Option<FoldedFetches>,
    /// Bytes consumed from the start of the file.
    offset: u64,
    /// Bytes of the file header (magic to its checksum): where the first block starts.
    header_bytes: u64,
    blocks: u64,
    records: u64,
    total_bytes: Option<u64>,
    total_records: Option<u64>,
    decompressor: zstd::bulk::Decompressor<'static>,
    comp: Vec<u8>,
    raw: Vec<u8>,
    state: State,
}

enum State {
    Reading,
    Done,
    Failed(TraceError),
}

impl TraceReader<BufReader<File>> {
    /// Open the trace at `path`. Progress then knows the file size and, when the end marker is
    /// intact, the total record count.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let mut file = File::open(path).map_err(|e| {
            Error::Io(io::Error::new(
                e.kind(),
                format!("cannot open {}: {e}", path.display()),
            ))
        })?;
        // Only a regular file can be sized and peeked at its end; a pipe or a FIFO (`<(zstdcat
        // ...)`, `/dev/stdin`) is streamed from its start without a total (seeking it would fail
        // with "Illegal seek").
        let len = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let total_records = len.and_then(|len| peek_total_records(&mut file, len));
        if len.is_some() {
            file.seek(SeekFrom::Start(0)).map_err(|e| {
                Error::Io(io::Error::new(
                    e.kind(),
                    format!("cannot read {}: {e}", path.display()),
                ))
            })?;
        }
        let mut reader = TraceReader::new(BufReader::with_capacity(1 << 20, file))?;
        reader.total_bytes = len;
        reader.total_records = total_records;
        Ok(reader)
    }
}

/// The record count in an intact end marker at the end of the file, if there is one.
fn peek_total_records(file: &mut File, len: u64) -> Option<u64> {
    if len < (FILE_HEADER_FIXED + 8 + BLOCK_HEADER_BYTES) as u64 {
        return None;
    }
    let mut end = [0u8; BLOCK_HEADER_BYTES];
    file.seek(SeekFrom::Start(len - BLOCK_HEADER_BYTES as u64))
        .ok()?;
    file.read_exact(&mut end).ok()?;
    let sum = u64::from_le_bytes(end[16..].try_into().unwrap());
    (end[..4] == END_MAGIC && xxh3_64(&end[4..16]) == sum)
        .then(|| u64::from_le_bytes(end[8..16].try_into().unwrap()))
}

/// Read until `buf` is full or the input ends; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A short description of what a file that is not a native trace seems to be.
fn guess_format(start: &[u8]) -> &'static str {
    if start.starts_with(&[0x1f, 0x8b]) {
        " (it looks gzip-compressed)"
    } else if start.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
        " (it looks xz-compressed)"
    } else if start.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        " (it looks zstd-compressed)"
    } else if start.starts_with(b"==") || start.starts_with(b"I ") || start.starts_with(b" ") {
        " (it looks like text; is it Valgrind lackey output?)"
    } else if start.first().is_some_and(|b| b"01234".contains(b)) && start.get(1) == Some(&b' ') {
        " (it looks like text; is it a Dinero din trace?)"
    } else {
        ""
    }
}

fn hex_bytes(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl<R: Read> TraceReader<R> {
    /// Read and check the file header from `r`.
    pub fn new(mut r: R) -> Result<Self, Error> {
        let io_err = |e: io::Error, at: u64| TraceError::at(at, format!("read error: {e}"));
        let mut fixed = [0u8; FILE_HEADER_FIXED];
        let got = read_full(&mut r, &mut fixed).map_err(|e| io_err(e, 0))?;
        let magic_got = got.min(MAGIC.len());
        if got == 0 {
            return Err(TraceError::at(
                0,
                "empty file: not a cachecolor trace (expected magic \"CCTRACE\\0\")",
            )
            .into());
        }
        if fixed[..magic_got] != MAGIC[..magic_got] {
            return Err(TraceError::at(
                0,
                format!(
                    "not a cachecolor trace: it starts with {} where a native trace starts with \
                     \"CCTRACE\\0\"{}; for another tool's trace, give its format (lackey, din \
                     or champsim)",
                    hex_bytes(&fixed[..magic_got]),
                    guess_format(&fixed[..got]),
                ),
            )
            .into());
        }
        if got < 10 {
            return Err(TraceError::at(
                got as u64,
                format!("truncated trace: the file header ends after {got} bytes"),
            )
            .into());
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(TraceError::at(
                8,
                format!(
                    "unsupported trace version {version} (this cachecolor reads versions {MIN_VERSION} to {VERSION})"
                ),
            )
            .into());
        }
        if got < FILE_HEADER_FIXED {
            return Err(TraceError::at(
                got as u64,
                format!("truncated trace: the file header ends after {got} bytes"),
            )
            .into());
        }
        let flags = u16::from_le_bytes([fixed[10], fixed[11]]);
        let known = if version >= 3 { FLAG_PCS } else { 0 };
        if flags & !known != 0 {
            return Err(TraceError::at(
                10,
                format!(
                    "unsupported trace flags {flags:#06x} for version {version} (this cachecolor \
                     knows {known:#06x}): the file is corrupt or from a newer cachecolor"
                ),
            )
            .into());
        }
        let meta_len = u32::from_le_bytes(fixed[12..16].try_into().unwrap()) as usize;
        if meta_len > MAX_METADATA_BYTES {
            return Err(TraceError::at(
                12,
                format!(
                    "metadata length {meta_len} exceeds the limit of {MAX_METADATA_BYTES} bytes: \
                     the file header is corrupt"
                ),
            )
            .into());
        }
        let mut rest = vec![0u8; meta_len + 8];
        let got = read_full(&mut r, &mut rest).map_err(|e| io_err(e, FILE_HEADER_FIXED as u64))?;
        let header_len = FILE_HEADER_FIXED + rest.len();
        if got < rest.len() {
            return Err(TraceError::at(
                (FILE_HEADER_FIXED + got) as u64,
                format!(
                    "truncated trace: the file header ends after {} of {header_len} bytes",
                    FILE_HEADER_FIXED + got
                ),
            )
            .into());
        }
        let (meta, sum) = rest.split_at(meta_len);
        let mut h = Xxh3::new();
        h.update(&fixed);
        h.update(meta);
        if h.digest() != u64::from_le_bytes(sum.try_into().unwrap()) {
            return Err(TraceError::at(
                0,
                "checksum mismatch in the file header: the file is corrupt",
            )
            .into());
        }
        let metadata = String::from_utf8(meta.to_vec()).map_err(|e| {
            TraceError::at(
                (FILE_HEADER_FIXED + e.utf8_error().valid_up_to()) as u64,
                "trace metadata is not valid UTF-8: the file is corrupt",
            )
        })?;
        Ok(TraceReader {
            r,
            metadata,
            version,
            pcs: (flags & FLAG_PCS != 0).then(Vec::new),
            fold: None,
            offset: header_len as u64,
            header_bytes: header_len as u64,
            blocks: 0,
            records: 0,
            total_bytes: None,
            total_records: None,
            decompressor: zstd::bulk::Decompressor::new()?,
            comp: Vec::new(),
            raw: Vec::new(),
            state: State::Reading,
        })
    }

    /// The free-form metadata string stored in the header.
    pub fn metadata(&self) -> &str {
        &self.metadata
    }

    /// The format version of the file.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes of the file header (magic, version, flags, metadata, checksum): the records (the
    /// blocks and the end marker) start at this offset.
    pub fn header_bytes(&self) -> u64 {
        self.header_bytes
    }

    /// The record count of the end marker, read from the end of the file by `open` (None for
    /// a stream, or when the end marker is missing or damaged).
    pub fn total_records(&self) -> Option<u64> {
        self.total_records
    }

    /// Do the records carry the PC of the instruction that made them (version 3, `FLAG_PCS`)?
    pub fn has_pcs(&self) -> bool {
        self.pcs.is_some()
    }

    /// The PCs of the block the last `next_block` returned, one per record (an ifetch's is its
    /// own address, 0 = unknown); empty when the trace has none (`has_pcs`).
    pub fn block_pcs(&self) -> &[u64] {
        self.pcs.as_deref().unwrap_or(&[])
    }

    /// Read the next block (or the end marker) into `buf`.
    fn read_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        let at = self.offset;
        let mut header = [0u8; BLOCK_HEADER_BYTES];
        let got = read_full(&mut self.r, &mut header)
            .map_err(|e| TraceError::at(at, format!("read error: {e}")))?;
        if got == 0 {
            return Err(TraceError::at(
                at,
                format!(
                    "truncated trace: the file ends at byte {at} after {} blocks ({} records) \
                     without an end marker (was the writer interrupted?)",
                    self.blocks, self.records
                ),
            ));
        }
        let seen = got.min(4);
        let is_block = header[..seen] == BLOCK_MAGIC[..seen];
        let is_end = header[..seen] == END_MAGIC[..seen];
        if !is_block && !is_end {
            return Err(TraceError::at(
                at,
                format!(
                    "expected a block (\"CCBK\") or the end marker (\"CCEN\") at byte {at} but \
                     found {}: the file is corrupt",
                    hex_bytes(&header[..got.min(4)])
                ),
            ));
        }
        let what = match (is_block, is_end) {
            (true, true) => "block header or end marker",
            (true, false) => "block header",
            _ => "end marker",
        };
        if got < BLOCK_HEADER_BYTES {
            return Err(TraceError::at(
                at + got as u64,
                format!(
                    "truncated trace: {what} at byte {at} ends after {got} of \
                     {BLOCK_HEADER_BYTES} bytes"
                ),
            ));
        }
        let field = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().unwrap());
        let sum = u64::from_le_bytes(header[16..].try_into().unwrap());
        self.offset += BLOCK_HEADER_BYTES as u64;

        if is_end {
            if xxh3_64(&header[4..16]) != sum {
                return Err(TraceError::at(
                    at,
                    format!(
                        "checksum mismatch in the end marker at byte {at}: the file is corrupt"
                    ),
                ));
            }
            if field(4) != 0 {
                return Err(TraceError::at(
                    at + 4,
                    format!(
                        "the end marker at byte {at} has a nonzero reserved field: the file is \
                         corrupt or from a newer cachecolor"
                    ),
                ));
            }
            let total = u64::from_le_bytes(header[8..16].try_into().unwrap());
            if total != self.records {
                return Err(TraceError::at(
                    at,
                    format!(
                        "the end marker at byte {at} counts {total} records but the file holds \
                         {}: the file is corrupt",
                        self.records
                    ),
                ));
            }
            let mut extra = [0u8; 1];
            let more = read_full(&mut self.r, &mut extra)
                .map_err(|e| TraceError::at(self.offset, format!("read error: {e}")))?;
            if more != 0 {
                return Err(TraceError::at(
                    self.offset,
                    format!(
                        "unexpected data after the end marker at byte {}: the file is corrupt",
                        self.offset
                    ),
                ));
            }
            return Ok(false);
        }

        let index = self.blocks;
        let (n, raw_len, comp_len) = (field(4) as usize, field(8) as usize, field(12) as usize);
        let corrupt = |msg: String| {
            TraceError::at(
                at,
                format!("block {index} at byte {at} {msg}: the file is corrupt"),
            )
        };
        if n == 0 || n > MAX_BLOCK_RECORDS {
            return Err(corrupt(format!(
                "declares {n} records (allowed 1 to {MAX_BLOCK_RECORDS})"
            )));
        }
        let max_record_bytes = if self.pcs.is_some() {
            MAX_RECORD_BYTES_WITH_PCS
        } else {
            MAX_RECORD_BYTES
        };
        if raw_len < DIRECTORY_BYTES + 4 * n || raw_len > DIRECTORY_BYTES + max_record_bytes * n {
            return Err(corrupt(format!("declares {raw_len} bytes for {n} records")));
        }
        if comp_len > max_compressed_len(raw_len) {
            return Err(corrupt(format!(
                "declares {comp_len} compressed bytes for {raw_len} bytes of records"
            )));
        }
        self.comp.clear();
        self.comp.resize(comp_len, 0);
        let got = read_full(&mut self.r, &mut self.comp)
            .map_err(|e| TraceError::at(self.offset, format!("read error: {e}")))?;
        if got < comp_len {
            return Err(TraceError::at(
                self.offset + got as u64,
                format!(
                    "truncated trace: block {index} at byte {at} ends after {} of {} bytes",
                    BLOCK_HEADER_BYTES + got,
                    BLOCK_HEADER_BYTES + comp_len
                ),
            ));
        }
        self.offset += comp_len as u64;
        if block_checksum(&header[4..16], &self.comp) != sum {
            return Err(TraceError::at(
                at,
                format!("checksum mismatch in block {index} at byte {at}: the file is corrupt"),
            ));
        }
        self.raw.clear();
        self.raw.reserve(raw_len + 8);
        let out = self
            .decompressor
            .decompress_to_buffer(&self.comp, &mut self.raw)
            .map_err(|e| corrupt(format!("does not decompress ({e})")))?;
        if out != raw_len {
            return Err(corrupt(format!(
                "decompresses to {out} bytes instead of {raw_len}"
            )));
        }
        self.raw.extend_from_slice(&[0u8; 8]);
        decode(
            &self.raw,
            raw_len,
            n,
            self.version,
            buf,
            self.pcs.as_mut(),
            self.fold.as_mut(),
        )
        .map_err(|msg| corrupt(format!("is malformed: {msg}")))?;
        self.blocks += 1;
        self.records += n as u64;
        Ok(true)
    }
}

impl<R: Read> RecordSource for TraceReader<R> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        buf.clear();
        match &self.state {
            State::Done => return Ok(false),
            State::Failed(e) => return Err(e.clone()),
            State::Reading => {}
        }
        match self.read_block(buf) {
            Ok(true) => Ok(true),
            Ok(false) => {
                // No block: nothing folded out of it either.
                if let Some(fold) = &mut self.fold {
                    fold.clear();
                }
                self.state = State::Done;
                Ok(false)
            }
            Err(e) => {
                buf.clear();
                if let Some(pcs) = &mut self.pcs {
                    pcs.clear();
                }
                if let Some(fold) = &mut self.fold {
                    fold.clear();
                }
                self.state = State::Failed(e.clone());
                Err(e)
            }
        }
    }

    fn block_pcs(&self) -> &[u64] {
        TraceReader::block_pcs(self)
    }

    fn take_block_pcs(&mut self, into: &mut Vec<u64>) {
        match &mut self.pcs {
            // The next block's decode clears and refills whichever buffer it gets.
            Some(pcs) => std::mem::swap(pcs, into),
            None => into.clear(),
        }
    }

    /// From the next block on, fold repeated fetches out of the records (`FoldedFetches`), or
    /// give every record again.
    fn fold_repeated_fetches(&mut self, on: bool) -> bool {
        self.fold = on.then(FoldedFetches::default);
        on
    }

    fn take_block_folds(&mut self, into: &mut FoldedFetches) {
        match &mut self.fold {
            Some(fold) => std::mem::swap(fold, into),
            None => into.clear(),
        }
    }

    fn progress(&self) -> Progress {
        Progress {
            records: self.records,
            bytes: self.offset,
            total_bytes: self.total_bytes,
            total_records: self.total_records,
        }
    }
}
