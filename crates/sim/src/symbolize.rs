//! Code addresses of an ELF file to function, source file and line, as binutils' `addr2line -f
//! -C` gives them, with `nm`'s nearest text symbol for the addresses it cannot place
//! (`cachecolor annotate`). Built on `addr2line` (gimli's DWARF reader) in process: one file's
//! line tables are parsed once for all its addresses, with no child process per file.
//!
//! Debug information kept apart from the file is found as GDB and binutils find it: by the
//! file's build ID (`/usr/lib/debug/.build-id/xx/yyyy.debug`), else by its `.gnu_debuglink`
//! (beside the file, in its `.debug` folder, or under `/usr/lib/debug`); a debug file that
//! `dwz` shrank names its supplementary file in `.gnu_debugaltlink`.
use std::borrow::Cow;
use std::path::{Path, PathBuf};

use addr2line::Loader;
use object::{Object, ObjectSymbol, ObjectSymbolTable, SymbolKind};

/// Where one address is, as far as the file's debug information and symbols say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// The function (demangled; the innermost one where the address is in inlined code), from
    /// the debug information, else the symbol that contains the address.
    pub function: Option<String>,
    /// The source file of the address's line (the innermost inlined one's).
    pub file: Option<String>,
    /// Its line, 0 where unknown.
    pub line: u32,
    /// Where `function` is unknown: the nearest text symbol at or below the address (as `nm`
    /// lists them: the symbol table, else the dynamic symbols), demangled.
    pub nearest: Option<String>,
}

/// The root under which distributions install separate debug files.
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The place of each of `addresses` (link-time addresses of `path`). A file that cannot be
/// read or parsed places nothing (every field empty): annotate then names its mapping.
pub fn symbolize(path: &Path, addresses: &[u64]) -> Vec<Place> {
    let Ok(main) = Loader::new(path) else {
        return vec![Place::default(); addresses.len()];
    };
    let debug_path = separate_debug_file(path);
    // A supplementary file that does not load leaves the debug file's own DWARF and symbols.
    let debug = debug_path.as_deref().and_then(|d| {
        debug_alt_link(d)
            .and_then(|sup| Loader::new_with_sup(d, Some(&sup)).ok())
            .or_else(|| Loader::new(d).ok())
    });
    let dwarf = debug.as_ref().unwrap_or(&main);
    // Read only where some address has no function (nm's fallback).
    let mut text_symbols: Option<Vec<(u64, String)>> = None;
    addresses
        .iter()
        .map(|&a| {
            let mut place = Place::default();
            if let Ok(mut frames) = dwarf.find_frames(a) {
                if let Ok(Some(frame)) = frames.next() {
                    place.function = frame
                        .function
                        .and_then(|f| f.demangle().ok().map(Cow::into_owned));
                    if let Some(loc) = frame.location {
                        place.file = loc.file.map(str::to_string);
                        place.line = loc.line.unwrap_or(0);
                    }
                }
            }
            if place.function.is_none() {
                place.function = debug
                    .as_ref()
                    .and_then(|d| d.find_symbol(a))
                    .or_else(|| main.find_symbol(a))
                    .map(demangle);
            }
            if place.function.is_none() {
                let symbols = text_symbols.get_or_insert_with(|| {
                    let s = debug_path.as_deref().map(text_symbols_of);
                    match s {
                        Some(s) if !s.is_empty() => s,
                        _ => text_symbols_of(path),
                    }
                });
                let i = symbols.partition_point(|&(start, _)| start <= a);
                place.nearest = i.checked_sub(1).map(|i| demangle(&symbols[i].1));
            }
            place
        })
        .collect()
}

/// `path` mapped into memory, where it can be opened.
fn mapped(path: &Path) -> Option<memmap2::Mmap> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: the map is only read, and only while this process reads the file; a file
    // changed under it gives wrong names, not unsafety beyond what every ELF reader accepts.
    unsafe { memmap2::Mmap::map(&file) }.ok()
}

fn demangle(name: &str) -> String {
    addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned()
}

/// The defined text symbols of `path` by address, as stored (mangled): its symbol table, else
/// its dynamic symbols (`nm`, then `nm -D`, keeping types `t T w W i I`).
fn text_symbols_of(path: &Path) -> Vec<(u64, String)> {
    let Some(data) = mapped(path) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    let from = |table: Option<object::SymbolTable<'_, '_>>| -> Vec<(u64, String)> {
        let Some(table) = table else {
            return Vec::new();
        };
        let mut s: Vec<(u64, String)> = table
            .symbols()
            .filter(|s| s.is_definition() && s.kind() == SymbolKind::Text)
            .filter_map(|s| {
                let name = s.name().ok().filter(|n| !n.is_empty())?;
                Some((s.address(), name.to_string()))
            })
            .collect();
        s.sort();
        s
    };
    let s = from(file.symbol_table());
    if s.is_empty() {
        from(file.dynamic_symbol_table())
    } else {
        s
    }
}

/// `path`'s debug information kept apart, where installed: by build ID, else by debug link.
fn separate_debug_file(path: &Path) -> Option<PathBuf> {
    let data = mapped(path)?;
    let file = object::File::parse(&*data).ok()?;
    if let Ok(Some(id)) = file.build_id() {
        if id.len() >= 2 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let p = Path::new(DEBUG_ROOT)
                .join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..]));
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let (name, crc) = file.gnu_debuglink().ok()??;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    let real = std::fs::canonicalize(path).ok()?;
    let dir = real.parent()?;
    let under_root = Path::new(DEBUG_ROOT).join(dir.strip_prefix("/").unwrap_or(dir));
    [
        dir.join(name),
        dir.join(".debug").join(name),
        under_root.join(name),
    ]
    .into_iter()
    // The link's CRC-32 names the one file that belongs to this one (a stale or foreign debug
    // file of the same name would place code in the wrong functions), as binutils checks it.
    .find(|p| p.is_file() && p.as_path() != real.as_path() && file_crc32(p) == Some(crc))
}

/// The CRC-32 of a whole file (`.gnu_debuglink`'s checksum).
fn file_crc32(path: &Path) -> Option<u32> {
    let data = mapped(path)?;
    let mut h = crc32fast::Hasher::new();
    h.update(&data);
    Some(h.finalize())
}

/// The supplementary file a `dwz`-shrunk debug file refers to (`.gnu_debugaltlink`), where it
/// exists: an absolute path, or one relative to the debug file's folder.
fn debug_alt_link(debug: &Path) -> Option<PathBuf> {
    let data = mapped(debug)?;
    let file = object::File::parse(&*data).ok()?;
    let (name, _id) = file.gnu_debugaltlink().ok()??;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    let p = if name.is_absolute() {
        name.to_path_buf()
    } else {
        debug.parent()?.join(name)
    };
    p.is_file().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that is not ELF, or not there, places nothing and does not fail.
    #[test]
    fn a_file_that_is_not_elf_places_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("not-elf");
        std::fs::write(&p, b"plain text, not an object file").unwrap();
        for path in [p.clone(), dir.path().join("absent")] {
            assert_eq!(symbolize(&path, &[0x1000, 0]), vec![Place::default(); 2]);
        }
    }
}
