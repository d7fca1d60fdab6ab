/*!
The guest image of full-system capture (src/system.rs): an initramfs, i.e. a `newc` cpio
archive (the "new ASCII" format the kernel unpacks into its root file system:
Documentation/driver-api/early-userspace/buffer-format.rst), written uncompressed.

[`Image`] collects entries (directories, regular files, symbolic links) under absolute guest
paths, creating parent directories on the way; the same path added twice keeps its first entry
(a library needed by two programs is stored once). [`Image::add_host_path`] copies a host file,
symbolic link or directory tree to the same path in the guest, and, for an ELF program, the
shared libraries and loader `ldd` names for it, so a dynamically linked program runs in the
guest as it does on the host. Everything is written with uid/gid 0 and mtime 0, so the same
inputs give the same image, byte for byte.
*/
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

enum Entry {
    Dir,
    File { mode: u32, data: Vec<u8> },
    Symlink(String),
}

#[derive(Default)]
pub(crate) struct Image {
    entries: BTreeMap<PathBuf, Entry>,
    order: Vec<PathBuf>,
    bytes: u64,
}

fn guest_key(path: &Path) -> Option<PathBuf> {
    // A normalised absolute path without `.`/`..` (a `..` would escape nothing in the guest,
    // but a path that needs it is not one we copied).
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

impl Image {
    /// Total bytes of file contents stored so far.
    pub(crate) fn data_bytes(&self) -> u64 {
        self.bytes
    }

    fn insert(&mut self, path: &Path, e: Entry) {
        let Some(key) = guest_key(path) else { return };
        if key == Path::new("/") || self.entries.contains_key(&key) {
            return;
        }
        if let Some(parent) = key.parent() {
            let parent = parent.to_path_buf();
            if parent != Path::new("/") && !self.entries.contains_key(&parent) {
                self.insert(&parent, Entry::Dir);
            }
        }
        if let Entry::File { data, .. } = &e {
            self.bytes += data.len() as u64;
        }
        self.order.push(key.clone());
        self.entries.insert(key, e);
    }

    pub(crate) fn dir(&mut self, path: &str) {
        self.insert(Path::new(path), Entry::Dir);
    }

    pub(crate) fn file(&mut self, path: &str, mode: u32, data: Vec<u8>) {
        self.insert(Path::new(path), Entry::File { mode, data });
    }

    #[cfg(test)]
    pub(crate) fn symlink(&mut self, path: &str, target: &str) {
        self.insert(Path::new(path), Entry::Symlink(target.to_string()));
    }

    pub(crate) fn contains(&self, path: &Path) -> bool {
        guest_key(path).is_some_and(|k| self.entries.contains_key(&k))
    }

    /// Copy a host path to the same guest path: a file (with the libraries an ELF program
    /// needs) or a directory tree. The path itself is followed if it is a symbolic link (its
    /// target's content is stored under the given name, as `cp -L` does); links inside a
    /// directory tree are copied as links.
    pub(crate) fn add_host_path(&mut self, path: &Path) -> io::Result<()> {
        self.add(path, true)
    }

    fn add(&mut self, path: &Path, follow: bool) -> io::Result<()> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let meta = if follow {
            std::fs::metadata(path)
        } else {
            std::fs::symlink_metadata(path)
        }
        .map_err(named)?;
        if self.contains(path) {
            return Ok(());
        }
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path).map_err(named)?;
            self.insert(path, Entry::Symlink(target.to_string_lossy().into_owned()));
        } else if meta.is_dir() {
            self.insert(path, Entry::Dir);
            let mut names: Vec<_> = std::fs::read_dir(path)
                .map_err(named)?
                .map(|e| e.map(|e| e.path()))
                .collect::<io::Result<_>>()
                .map_err(named)?;
            names.sort();
            for p in names {
                self.add(&p, false)?;
            }
        } else if meta.is_file() {
            let data = std::fs::read(path).map_err(named)?;
            let elf = data.starts_with(b"\x7fELF");
            self.insert(
                path,
                Entry::File {
                    mode: meta.permissions().mode() & 0o7777,
                    data,
                },
            );
            if elf && meta.permissions().mode() & 0o111 != 0 {
                for lib in shared_libraries(path) {
                    self.add(&lib, true)?;
                }
            }
        }
        // Sockets, FIFOs and devices are skipped: the guest has its own /dev.
        Ok(())
    }

    /// Write the archive.
    pub(crate) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        for (ino, key) in (1u32..).zip(self.order.iter()) {
            let name = key.to_string_lossy();
            let name = name.trim_start_matches('/');
            let (mode, data): (u32, &[u8]) = match &self.entries[key] {
                Entry::Dir => (0o040755, &[]),
                Entry::File { mode, data } => (0o100000 | mode, data),
                Entry::Symlink(t) => (0o120777, t.as_bytes()),
            };
            write_header(out, ino, mode, data.len() as u32, name)?;
            out.write_all(data)?;
            pad(out, data.len())?;
        }
        write_header(out, 0, 0, 0, "TRAILER!!!")
    }
}

fn write_header(
    out: &mut impl Write,
    ino: u32,
    mode: u32,
    size: u32,
    name: &str,
) -> io::Result<()> {
    let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
    let namesize = name.len() as u32 + 1;
    write!(
        out,
        "070701{ino:08X}{mode:08X}{:08X}{:08X}{nlink:08X}{:08X}{size:08X}{:08X}{:08X}{:08X}{:08X}{namesize:08X}{:08X}",
        0, 0, 0, 0, 0, 0, 0, 0
    )?;
    out.write_all(name.as_bytes())?;
    out.write_all(&[0])?;
    pad(out, 110 + namesize as usize)
}

fn pad(out: &mut impl Write, len: usize) -> io::Result<()> {
    let n = (4 - len % 4) % 4;
    out.write_all(&[0u8; 3][..n])
}

/// The shared libraries and program interpreter `ldd` lists for `path` (empty for a static
/// program or when ldd is unavailable: the guest then reports what it cannot load).
fn shared_libraries(path: &Path) -> Vec<PathBuf> {
    let Ok(out) = Command::new("ldd").arg(path).output() else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let after = l.split_once("=>").map_or(l, |(_, r)| r.trim());
            let p = after.split_whitespace().next()?;
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The archive lists what was added, in order, with parents first, as GNU cpio reads it
    /// (an independent reader) -- when cpio is installed.
    #[test]
    fn cpio_reads_the_archive() {
        let mut img = Image::default();
        img.file("/a/b/c.txt", 0o644, b"hello".to_vec());
        img.symlink("/a/l", "b/c.txt");
        img.dir("/e");
        img.file("/a/b/c.txt", 0o600, b"ignored: first wins".to_vec());
        let mut bytes = Vec::new();
        img.write(&mut bytes).unwrap();
        assert_eq!(bytes.len() % 4, 0);
        assert_eq!(img.data_bytes(), 5);
        let Ok(mut child) = Command::new("cpio")
            .args(["-t", "-v", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("skipped: cpio is not installed");
            return;
        };
        child.stdin.take().unwrap().write_all(&bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        let listing = String::from_utf8_lossy(&out.stdout);
        let names: Vec<&str> = listing
            .lines()
            .map(|l| l.split_whitespace().nth(8).unwrap_or(""))
            .collect();
        assert_eq!(names, ["a", "a/b", "a/b/c.txt", "a/l", "e"], "{listing}");
        assert!(listing.contains("-rw-r--r--"), "{listing}");
        assert!(listing.contains("a/l -> b/c.txt"), "{listing}");
    }
}
