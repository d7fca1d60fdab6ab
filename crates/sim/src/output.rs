/*!
The one way the Rust side writes an output file (docs/reliability.md, "Output contract"); the
Python twin is `cachecolor._output`.

What the destination is decides how it is written, so an output never destroys what it should
not:
- a regular file, or a path that does not exist yet: the data goes to a unique temporary file
  (`.NAME.XXXXXX.tmp`) in the destination's own directory, which is renamed over the path only by
  [`Output::commit`]. Dropping an uncommitted `Output` (an error, an interrupt, a panic) removes
  the temporary file, so an existing file is untouched and nothing is left behind;
- a symbolic link: followed; its final target is classified as above (the link stays a link);
- `-`: standard output;
- a character device (`/dev/null`, a terminal) or a FIFO: written in place, never replaced;
- a directory, a block device, a socket: refused with a message saying what the path is;
- the same file as one of the command's inputs: refused (it would destroy the input).

Every I/O error names the path it happened on (`writing OUT: No space left on device`).
*/
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Where an output goes once classified.
enum Sink {
    Stdout(io::Stdout),
    InPlace(File),
    Temp(tempfile::NamedTempFile),
}

/// An output being written. `Write` goes to the sink; [`Output::commit`] makes it final.
pub struct Output {
    sink: Sink,
    /// The path as the user gave it (for messages).
    shown: PathBuf,
    /// The path the temporary file is renamed to (a symlink's target), for `Sink::Temp`.
    dest: PathBuf,
}

fn err(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

/// Prefix an I/O error with what was being done to which path, keeping its kind.
pub fn at_path(what: &str, path: &Path, e: io::Error) -> io::Error {
    err(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Whether `a` and `b` are the same file (device and inode).
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

impl Output {
    /// Open `path` for writing as the module's contract says; `inputs` are the command's input
    /// files (an output that is one of them is refused).
    pub fn create(path: &Path, inputs: &[&Path]) -> io::Result<Output> {
        let shown = path.to_path_buf();
        if path.as_os_str() == "-" {
            return Ok(Output {
                sink: Sink::Stdout(io::stdout()),
                shown,
                dest: PathBuf::new(),
            });
        }
        if path.as_os_str().is_empty() {
            return Err(err(
                io::ErrorKind::InvalidInput,
                "the output path is empty".into(),
            ));
        }
        // Follow the path (symlinks included) to see what it is now.
        let meta = match std::fs::metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(at_path("cannot write", path, e)),
        };
        if let Some(m) = &meta {
            for input in inputs {
                if let Ok(im) = std::fs::metadata(input) {
                    if same_file(m, &im) && !m.file_type().is_char_device() {
                        return Err(err(
                            io::ErrorKind::InvalidInput,
                            format!(
                                "the output {} is the input {}: writing it would destroy the input; give another output path",
                                path.display(),
                                input.display()
                            ),
                        ));
                    }
                }
            }
            let ft = m.file_type();
            if ft.is_dir() {
                return Err(err(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "cannot write {}: it is a directory; give a file path",
                        path.display()
                    ),
                ));
            }
            if ft.is_char_device() || ft.is_fifo() {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| at_path("cannot open", path, e))?;
                return Ok(Output {
                    sink: Sink::InPlace(f),
                    shown,
                    dest: PathBuf::new(),
                });
            }
            if !ft.is_file() {
                let what = if ft.is_block_device() {
                    "a block device"
                } else if ft.is_socket() {
                    "a socket"
                } else {
                    "not a regular file"
                };
                return Err(err(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "refusing to write {}: it is {what}; give a regular file path",
                        path.display()
                    ),
                ));
            }
        }
        // A regular file or a new path: write beside the final target (a symlink's target, so
        // the link survives), then rename.
        let dest = if meta.is_some() {
            std::fs::canonicalize(path).map_err(|e| at_path("cannot resolve", path, e))?
        } else {
            path.to_path_buf()
        };
        let name = dest.file_name().ok_or_else(|| {
            err(
                io::ErrorKind::InvalidInput,
                format!("cannot write {}: not a file name", path.display()),
            )
        })?;
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| at_path("cannot create a temporary file in", &dir, e))?;
        // NamedTempFile is 0600; give the result the mode a new file would have (or the old one's).
        let mode = match &meta {
            Some(m) => m.mode() & 0o7777,
            None => 0o666 & !current_umask(),
        };
        use std::os::unix::fs::PermissionsExt;
        let _ = tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode));
        Ok(Output {
            sink: Sink::Temp(tmp),
            shown,
            dest,
        })
    }

    /// The path as given (for messages).
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// The temporary file, when the output is a regular file (seekable: a writer may go back
    /// and patch what it wrote before `commit`); `None` for stdout, a device or a FIFO.
    pub fn file_mut(&mut self) -> Option<&mut File> {
        match &mut self.sink {
            Sink::Temp(t) => Some(t.as_file_mut()),
            _ => None,
        }
    }

    /// Whether the output is a regular file that will be renamed into place.
    pub fn is_replaced(&self) -> bool {
        matches!(self.sink, Sink::Temp(_))
    }

    /// Flush and make the output final: sync and rename a temporary file over the destination.
    pub fn commit(self) -> io::Result<()> {
        let shown = self.shown;
        match self.sink {
            Sink::Stdout(mut s) => s.flush().map_err(|e| at_path("writing", &shown, e)),
            Sink::InPlace(mut f) => f.flush().map_err(|e| at_path("writing", &shown, e)),
            Sink::Temp(mut t) => {
                t.flush().map_err(|e| at_path("writing", &shown, e))?;
                t.as_file()
                    .sync_all()
                    .map_err(|e| at_path("writing", &shown, e))?;
                t.persist(&self.dest)
                    .map_err(|e| at_path("cannot rename into", &shown, e.error))?;
                Ok(())
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = match &mut self.sink {
            Sink::Stdout(s) => s.write(buf),
            Sink::InPlace(f) => f.write(buf),
            Sink::Temp(t) => t.write(buf),
        };
        r.map_err(|e| at_path("writing", &self.shown, e))
    }
    fn flush(&mut self) -> io::Result<()> {
        let r = match &mut self.sink {
            Sink::Stdout(s) => s.flush(),
            Sink::InPlace(f) => f.flush(),
            Sink::Temp(t) => t.flush(),
        };
        r.map_err(|e| at_path("writing", &self.shown, e))
    }
}

fn current_umask() -> u32 {
    // umask(2) can only be read by setting it; set it back at once (single-threaded callers
    // may race only with another umask change, which this crate never makes).
    #[cfg(target_os = "linux")]
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
    #[cfg(not(target_os = "linux"))]
    0o022
}

/// Write `bytes` to `path` under the contract (for small outputs such as JSON documents).
pub fn write_all(path: &Path, inputs: &[&Path], bytes: &[u8]) -> io::Result<()> {
    let mut out = Output::create(path, inputs)?;
    out.write_all(bytes)?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn output_to_regular_file_replaces_only_on_commit() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        std::fs::write(&p, b"old").unwrap();
        {
            let mut o = Output::create(&p, &[]).unwrap();
            o.write_all(b"new but abandoned").unwrap();
            // dropped without commit: an error or an interrupt
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert!(leftovers(d.path()).is_empty());
        write_all(&p, &[], b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert!(leftovers(d.path()).is_empty());
    }

    #[test]
    fn output_to_device_node_is_written_in_place_not_replaced() {
        // Regression: `--json /dev/null` used to rename a regular file over the device node.
        write_all(Path::new("/dev/null"), &[], b"x").unwrap();
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device());
    }

    #[test]
    fn output_to_fifo_is_written_in_place() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let p = p.clone();
            std::thread::spawn(move || std::fs::read(p).unwrap())
        };
        write_all(&p, &[], b"through the fifo").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the fifo");
        assert!(std::fs::symlink_metadata(&p).unwrap().file_type().is_fifo());
    }

    #[test]
    fn output_through_symlink_keeps_the_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target.json");
        std::fs::write(&target, b"old").unwrap();
        let link = d.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_all(&link, &[], b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn output_to_directory_is_refused_and_leaves_nothing() {
        // Regression: `--json /tmp` wrote `/.tmp.tmp` into `/`.
        let d = tempfile::tempdir().unwrap();
        let e = Output::create(d.path(), &[]).err().unwrap();
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert!(leftovers(d.path()).is_empty());
        assert!(leftovers(d.path().parent().unwrap())
            .iter()
            .all(|n| !n.starts_with(&format!(
                ".{}",
                d.path().file_name().unwrap().to_string_lossy()
            ))));
    }

    #[test]
    fn output_same_as_input_is_refused() {
        // Regression: `trace convert --from din t.din t.din` destroyed its own input.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.din");
        std::fs::write(&p, b"0 10\n").unwrap();
        let alias = d.path().join("alias");
        std::os::unix::fs::symlink(&p, &alias).unwrap();
        for out in [&p, &alias] {
            let e = Output::create(out, &[&p]).err().unwrap();
            assert!(e.to_string().contains("is the input"), "{e}");
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"0 10\n");
    }

    #[test]
    fn output_missing_directory_names_the_path() {
        let e = Output::create(Path::new("/nonexistent-dir-xyz/out.json"), &[])
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent-dir-xyz"), "{e}");
    }

    #[test]
    fn output_enospc_names_the_path_and_cleans_up() {
        // /dev/full: every write fails with ENOSPC. In place (a device), so the message must
        // name the path; a regular file behaves the same through its temporary file.
        let mut o = Output::create(Path::new("/dev/full"), &[]).unwrap();
        let e = o
            .write_all(&[0u8; 1 << 16])
            .and_then(|_| o.flush())
            .err()
            .unwrap();
        assert!(e.to_string().contains("/dev/full"), "{e}");
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
    }
}
