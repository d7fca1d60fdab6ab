/*!
Traces: the record every part of cachecolor consumes, the native on-disk format, importers for
other tools' formats, and the `RecordSource` interface that lets a file, an importer or a
synthetic generator feed a simulation block by block.

Sources hand out records in blocks (a `Vec<Record>` the caller reuses) so that decoding is
amortised and the cache model can look ahead within a block (DESIGN.md principle 5). Memory use
is bounded by the block size, never by trace length.
*/

pub mod champsim;
mod columns;
pub mod din;
pub mod lackey;
pub mod native;
mod record;

pub use columns::{ColumnError, RecordColumns};
pub use record::{
    pack_syscall, syscall_number, Kind, Record, SYSCALL_ARGS_BITS, SYSCALL_NUMBER_BITS,
};

use crate::error::TraceError;

/// Records per block handed out by sources (and written per block in the native format).
pub const BLOCK_RECORDS: usize = 1 << 16;

/// How far a source has got, for progress bars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Records produced so far.
    pub records: u64,
    /// Input bytes consumed so far (0 when the source is not a file).
    pub bytes: u64,
    /// Total input bytes, or total records for generators, when known.
    pub total_bytes: Option<u64>,
    pub total_records: Option<u64>,
}

/// Anything that yields records block by block: a native trace, an importer, a generator.
pub trait RecordSource {
    /// Clear `buf` and fill it with the next records (at most `BLOCK_RECORDS` is typical but
    /// not required). Returns `Ok(false)` once the source is exhausted (and `buf` is empty).
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError>;

    /// How far the source has got.
    fn progress(&self) -> Progress {
        Progress::default()
    }

    /// The PC of each record of the block the last `next_block` returned (a native version 3 trace
    /// with `FLAG_PCS`); empty when the source has none.
    fn block_pcs(&self) -> &[u64] {
        &[]
    }

    /// Hand the PCs of the last block over to `into` (replacing its contents), as `block_pcs`
    /// gives them; a source that owns them may swap buffers instead of copying.
    fn take_block_pcs(&mut self, into: &mut Vec<u64>) {
        into.clear();
        into.extend_from_slice(self.block_pcs());
    }

    /// Ask the source to fold repeated fetches out of its blocks from the next one on (`on`;
    /// see [`FoldedFetches`]), or to stop; `false` if it does not fold (its blocks then carry
    /// every record, and `take_block_folds` gives none).
    fn fold_repeated_fetches(&mut self, _on: bool) -> bool {
        false
    }

    /// Hand over the fetches folded out of the block the last `next_block` returned
    /// (replacing `into`'s contents); none unless `fold_repeated_fetches` said yes.
    fn take_block_folds(&mut self, into: &mut FoldedFetches) {
        into.clear();
    }
}

/// The instruction fetches a source folded out of a block (`RecordSource::fold_repeated_fetches`):
/// each a fetch on the 64-byte line of the block's latest fetch before it (given, or itself
/// folded), with the thread and privilege of the record right before it, lying wholly within
/// that line, and carrying no thread change, syscall identity or escaped size or icount. Such a
/// fetch is described by its byte within the line and its size: its line is the latest fetch's,
/// its thread and privilege those of the record it is folded after, and its PC is its own
/// address; the block's first fetch is never folded, so that line is always a given record's.
/// Captured programs' traces are mostly such fetches (a line's instructions one after the
/// other, with the data references of some between them), and a reader that folds them neither
/// builds a record for each nor hands it to its consumer one at a time (`analysis::attribute`
/// counts them as first-level hits on the line the latest fetch left there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoldedFetches {
    /// The index among the block's encoded records of each record given, then the number of
    /// encoded records: the fetches folded after given record `j` are the encoded records
    /// strictly between `columns[j]` and `columns[j + 1]`.
    columns: Vec<u32>,
    /// Every encoded record's byte within its 64-byte line, and its size byte (exact for a
    /// folded fetch, which lies within its line).
    offsets: Vec<u8>,
    sizes: Vec<u8>,
}

impl FoldedFetches {
    /// Empty, keeping the buffers.
    pub fn clear(&mut self) {
        self.columns.clear();
        self.offsets.clear();
        self.sizes.clear();
    }

    /// The number of fetches folded out.
    pub fn len(&self) -> usize {
        self.offsets.len() - self.columns.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes within the line and the sizes of the fetches folded after given record `j`
    /// (none where nothing was folded).
    #[inline(always)]
    pub fn after(&self, j: usize) -> (&[u8], &[u8]) {
        match (self.columns.get(j), self.columns.get(j + 1)) {
            (Some(&a), Some(&b)) => {
                let span = a as usize + 1..b as usize;
                (&self.offsets[span.clone()], &self.sizes[span])
            }
            _ => (&[], &[]),
        }
    }

    /// The fetch at byte `off` of the 64-byte line at `line` (the address of the line of the
    /// block's latest fetch before it), with `size`, folded after `head`: a fetch of `head`'s
    /// thread and privilege, `icount` 1 and no syscall identity.
    #[inline]
    pub fn fetch(head: &Record, line: u64, off: u8, size: u8) -> Record {
        Record {
            addr: line | off as u64,
            size: size as u16,
            icount: 1,
            kind: Kind::IFetch,
            syscall: 0,
            ..*head
        }
    }

    /// The records of a block with the folded fetches put back, each after the record it was
    /// folded after (`fetch`, on the line of the latest fetch; its PC, where `pcs` is given, its
    /// own address).
    pub fn unfold(&self, records: &[Record], mut pcs: Option<&mut Vec<u64>>) -> Vec<Record> {
        let mut out = Vec::with_capacity(records.len() + self.len());
        let given = pcs.as_deref().map(|p| p.to_vec());
        if let Some(p) = pcs.as_deref_mut() {
            p.clear();
        }
        let mut line = 0u64;
        for (j, r) in records.iter().enumerate() {
            out.push(*r);
            if r.kind == Kind::IFetch {
                line = r.addr & !63;
            }
            if let (Some(p), Some(g)) = (pcs.as_deref_mut(), &given) {
                p.push(g[j]);
            }
            let (offsets, sizes) = self.after(j);
            for (&off, &size) in offsets.iter().zip(sizes) {
                let f = Self::fetch(r, line, off, size);
                out.push(f);
                if let Some(p) = pcs.as_deref_mut() {
                    p.push(f.addr);
                }
            }
        }
        out
    }
}

impl<S: RecordSource + ?Sized> RecordSource for Box<S> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        (**self).next_block(buf)
    }
    fn progress(&self) -> Progress {
        (**self).progress()
    }
    fn block_pcs(&self) -> &[u64] {
        (**self).block_pcs()
    }
    fn take_block_pcs(&mut self, into: &mut Vec<u64>) {
        (**self).take_block_pcs(into)
    }
    fn fold_repeated_fetches(&mut self, on: bool) -> bool {
        (**self).fold_repeated_fetches(on)
    }
    fn take_block_folds(&mut self, into: &mut FoldedFetches) {
        (**self).take_block_folds(into)
    }
}

/// A source over records already in memory (tests, Python arrays).
pub struct VecSource {
    records: Vec<Record>,
    pos: usize,
}

impl VecSource {
    pub fn new(records: Vec<Record>) -> Self {
        VecSource { records, pos: 0 }
    }
}

impl RecordSource for VecSource {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        buf.clear();
        let end = (self.pos + BLOCK_RECORDS).min(self.records.len());
        buf.extend_from_slice(&self.records[self.pos..end]);
        self.pos = end;
        Ok(!buf.is_empty())
    }
    fn progress(&self) -> Progress {
        Progress {
            records: self.pos as u64,
            total_records: Some(self.records.len() as u64),
            ..Progress::default()
        }
    }
}

/// `pipelined` reading `source` block by block (its progress after each block).
pub fn pipelined_source<E: Send + From<TraceError>>(
    source: &mut (dyn RecordSource + Send),
    consume: impl FnMut(&[Record], Progress) -> Result<(), E>,
) -> Result<(), E> {
    pipelined(
        |buf| -> Result<Option<Progress>, E> {
            Ok(if source.next_block(buf)? {
                Some(source.progress())
            } else {
                None
            })
        },
        consume,
    )
}

/// Produce blocks of records on a helper thread while `consume` handles the previous block on
/// this one: decoding a trace (zstd, text parsing) or turning NumPy columns into records then
/// overlaps with simulating instead of adding to it. `produce` fills the (cleared) buffer and
/// returns the progress so far, or `None` when there is nothing more; blocks reach `consume`
/// in order, with the progress after each. Two buffers circulate, so memory stays at two
/// blocks. The first error from either side stops both and is returned; a panic on the helper
/// thread is resumed here. On a machine with one CPU it all runs on this thread.
pub fn pipelined<E: Send>(
    mut produce: impl FnMut(&mut Vec<Record>) -> Result<Option<Progress>, E> + Send,
    mut consume: impl FnMut(&[Record], Progress) -> Result<(), E>,
) -> Result<(), E> {
    pipelined_with(
        || Vec::with_capacity(BLOCK_RECORDS),
        |buf: &mut Vec<Record>| {
            buf.clear();
            produce(buf)
        },
        |buf, p| consume(buf, p),
    )
}

/// `pipelined` with blocks of any type `B` (made by `new`; e.g. records with their PCs):
/// `produce` refills a block the consumer has finished with.
pub fn pipelined_with<B: Send, E: Send>(
    new: impl Fn() -> B,
    mut produce: impl FnMut(&mut B) -> Result<Option<Progress>, E> + Send,
    mut consume: impl FnMut(&B, Progress) -> Result<(), E>,
) -> Result<(), E> {
    use std::sync::mpsc::sync_channel;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        let mut buf = new();
        loop {
            match produce(&mut buf)? {
                Some(p) => consume(&buf, p)?,
                None => return Ok(()),
            }
        }
    }
    let (full_tx, full_rx) = sync_channel::<(B, Progress)>(1);
    let (empty_tx, empty_rx) = sync_channel::<B>(2);
    for _ in 0..2 {
        empty_tx.send(new()).expect("receiver alive");
    }
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || -> Result<(), E> {
            while let Ok(mut buf) = empty_rx.recv() {
                match produce(&mut buf)? {
                    Some(p) => {
                        if full_tx.send((buf, p)).is_err() {
                            return Ok(()); // the consumer stopped
                        }
                    }
                    None => return Ok(()),
                }
            }
            Ok(())
        });
        let mut consumed = Ok(());
        for (buf, p) in full_rx.iter() {
            if let Err(e) = consume(&buf, p) {
                consumed = Err(e);
                break;
            }
            // The producer may have finished; then the buffer is simply dropped.
            let _ = empty_tx.send(buf);
        }
        // Unblock a producer waiting for a buffer or for room to send.
        drop(full_rx);
        drop(empty_tx);
        let produced = match producer.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        consumed.and(produced)
    })
}

/// Drain a source into a vector (tests and small traces only: memory grows with length).
pub fn collect(src: &mut dyn RecordSource) -> Result<Vec<Record>, TraceError> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while src.next_block(&mut buf)? {
        out.extend_from_slice(&buf);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Trace files: formats, opening by format, conversion to the native format.

crate::registry! {
    /// The on-disk trace formats cachecolor reads: the registry (`crate::registry`), one line
    /// per format.
    pub enum Format (field = "format", what = "trace format", plural = "trace formats") {
        /// cachecolor's own format (`native.rs`, docs/trace-format.md).
        Native = "native",
        /// Valgrind `--tool=lackey --trace-mem=yes` output.
        Lackey = "lackey",
        /// Dinero III/IV `din` text.
        Din = "din",
        /// ChampSim binary `input_instr` records.
        ChampSim = "champsim",
    }
}

/// Open a trace file of the given format as a record source. Text and ChampSim files are
/// decompressed by extension (`.gz`, `.xz`, `.zst`); progress reports the bytes read from the
/// file itself and its size. A native trace is compressed inside and is opened as it is.
pub fn open(
    path: &std::path::Path,
    format: Format,
) -> Result<Box<dyn RecordSource + Send>, crate::Error> {
    if format == Format::Native {
        return Ok(Box::new(native::TraceReader::open(path)?));
    }
    let Input {
        reader: input,
        read,
        total_bytes,
    } = open_input(path)?;
    let inner: Box<dyn RecordSource + Send> = match format {
        Format::Lackey => Box::new(lackey::LackeyReader::new(
            std::io::BufReader::with_capacity(1 << 20, input),
        )),
        Format::Din => Box::new(din::DinReader::new(std::io::BufReader::with_capacity(
            1 << 20,
            input,
        ))),
        Format::ChampSim => Box::new(champsim::ChampSimReader::new(input)),
        Format::Native => unreachable!("handled above"),
    };
    Ok(Box::new(FileSource {
        inner,
        read,
        total_bytes,
    }))
}

/// A file opened for reading, decompressed by extension.
pub(crate) struct Input {
    pub(crate) reader: Box<dyn std::io::Read + Send>,
    /// Bytes read from the file itself so far (compressed bytes for a compressed file).
    pub(crate) read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The file's size, when known.
    pub(crate) total_bytes: Option<u64>,
}

/// Open `path` for reading, decompressing by extension (`.gz`, `.xz`, `.zst`/`.zstd`).
pub(crate) fn open_input(path: &std::path::Path) -> Result<Input, crate::Error> {
    let file = std::fs::File::open(path).map_err(|e| {
        crate::Error::Io(std::io::Error::new(
            e.kind(),
            format!("cannot open {}: {e}", path.display()),
        ))
    })?;
    let meta = file.metadata().ok();
    let total_bytes = meta.as_ref().filter(|m| m.is_file()).map(|m| m.len());
    let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = std::io::BufReader::with_capacity(
        1 << 16,
        CountingReader {
            inner: file,
            read: std::sync::Arc::clone(&read),
            // A pipe, FIFO or terminal can block a read forever: wait for it in slices so an
            // interrupt (`request_abort`) is seen (a convert from a FIFO would never stop).
            wait: meta.is_some_and(|m| !m.is_file()),
        },
    );
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let reader: Box<dyn std::io::Read + Send> = match ext.as_str() {
        "gz" => Box::new(flate2::bufread::MultiGzDecoder::new(counted)),
        "xz" => Box::new(xz2::bufread::XzDecoder::new_multi_decoder(counted)),
        "zst" | "zstd" => Box::new(zstd::stream::read::Decoder::with_buffer(counted)?),
        _ => Box::new(counted),
    };
    Ok(Input {
        reader,
        read,
        total_bytes,
    })
}

/// Counts the bytes read through it (shared with the source that reports progress).
struct CountingReader<R> {
    inner: R,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Poll before reading, checking `abort_requested` every 100 ms (not a regular file).
    wait: bool,
}

static ABORT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ask every trace input that waits on a pipe, FIFO or terminal to give up: its next read (or the
/// one it is waiting in, within 100 ms) fails with "interrupted". The Python layer calls this when
/// Ctrl-C or SIGTERM arrives during a conversion; `clear_abort` re-arms it.
pub fn request_abort() {
    ABORT.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Re-arm after [`request_abort`] (a new conversion starts).
pub fn clear_abort() {
    ABORT.store(false, std::sync::atomic::Ordering::SeqCst);
}

fn abort_requested() -> bool {
    ABORT.load(std::sync::atomic::Ordering::SeqCst)
}

impl<R: std::io::Read + std::os::fd::AsRawFd> std::io::Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.wait {
            #[cfg(target_os = "linux")]
            loop {
                if abort_requested() {
                    return Err(std::io::Error::other("interrupted"));
                }
                let mut pfd = libc::pollfd {
                    fd: self.inner.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the duration of the call.
                let r = unsafe { libc::poll(&mut pfd, 1, 100) };
                if r != 0 {
                    break; // readable, hung up, or an error the read itself will report
                }
            }
        }
        let n = self.inner.read(buf)?;
        self.read
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// An importer over a file: progress in bytes of the file rather than of the decoded text.
struct FileSource {
    inner: Box<dyn RecordSource + Send>,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    total_bytes: Option<u64>,
}

impl RecordSource for FileSource {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        self.inner.next_block(buf)
    }
    fn progress(&self) -> Progress {
        Progress {
            bytes: self.read.load(std::sync::atomic::Ordering::Relaxed),
            total_bytes: self.total_bytes,
            ..self.inner.progress()
        }
    }
}

/// Stream `src` into a native trace at `out` with the given metadata, calling `progress` after
/// every block. The trace is written through [`crate::output::Output`]: to a unique temporary
/// file renamed to `out` only once complete (so a failure leaves any existing `out` untouched
/// and no partial file behind), in place for a device or FIFO, to stdout for `-`. Returns the
/// number of records written.
pub fn convert(
    src: &mut dyn RecordSource,
    out: &std::path::Path,
    metadata: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<u64, crate::Error> {
    convert_checked(src, out, &[], metadata, &mut |p| {
        progress(p);
        Ok(())
    })
}

/// [`convert`] refusing an `out` that is one of `inputs`, with a progress callback that can stop
/// the conversion (an interrupt): its error is returned and nothing is written.
pub fn convert_checked(
    src: &mut dyn RecordSource,
    out: &std::path::Path,
    inputs: &[&std::path::Path],
    metadata: &str,
    progress: &mut dyn FnMut(Progress) -> Result<(), crate::Error>,
) -> Result<u64, crate::Error> {
    let sink = crate::output::Output::create(out, inputs)?;
    let mut w =
        native::TraceWriter::new(std::io::BufWriter::with_capacity(1 << 20, sink), metadata)?;
    let mut buf = Vec::with_capacity(BLOCK_RECORDS);
    while src.next_block(&mut buf)? {
        w.write_all(&buf)?;
        progress(Progress {
            records: w.records_written(),
            ..src.progress()
        })?;
    }
    let records = w.records_written();
    let sink = w.finish()?.into_inner().map_err(|e| e.into_error())?;
    sink.commit()?;
    Ok(records)
}
