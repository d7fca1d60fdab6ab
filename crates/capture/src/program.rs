/*!
Finding the program to trace and what it is, before any back end starts, so that a typo gives a
clear error instead of a tracer's obscure one.

- A name containing '/' is a path; any other name is looked up on `PATH` like a shell does.
- The file must be a regular file with an execute permission the caller holds (`access(X_OK)`).
- Its first bytes decide how to run it: an ELF executable (its `e_machine` picks the
  `qemu-<arch>` binary, so a foreign-architecture program can be traced too), or a `#!` script,
  which QEMU user mode cannot start by itself: it is run as `INTERPRETER [ARG] SCRIPT ARGS...`
  with the interpreter traced. `#!/usr/bin/env NAME` resolves NAME on `PATH` and traces it
  directly, since `env` would otherwise exec it outside the tracer.
*/
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::CaptureError;

/// A resolved program, ready to be started under a back end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// What the user typed (the guest's `argv[0]`).
    pub name: String,
    /// The executable file found for it.
    pub path: PathBuf,
    /// QEMU architecture name (`x86_64`, `aarch64`, ...) of the ELF binary that will run: the
    /// program itself or its `#!` interpreter.
    pub arch: &'static str,
    /// For a `#!` script: the ELF interpreter and its optional argument; QEMU runs
    /// `interpreter [arg] path args...`.
    pub interpreter: Option<(PathBuf, Option<String>)>,
}

impl Program {
    /// Resolve `name` as a shell would and check that it can run.
    pub fn resolve(name: &str) -> Result<Program, CaptureError> {
        if name.is_empty() {
            return Err(CaptureError::ProgramNotFound {
                program: String::new(),
                where_: "(empty program name)".into(),
            });
        }
        let path = find_executable(name)?;
        let head = read_head(&path)?;
        if let Some(arch) = elf_arch(&path, &head)? {
            return Ok(Program {
                name: name.to_string(),
                path,
                arch,
                interpreter: None,
            });
        }
        if head.starts_with(b"#!") {
            let (interp, arg) = parse_shebang(&path, &head)?;
            let interp_path = find_executable(&interp)?;
            let ihead = read_head(&interp_path)?;
            let arch =
                elf_arch(&interp_path, &ihead)?.ok_or_else(|| CaptureError::NotExecutable {
                    path: interp_path.clone(),
                    reason: format!(
                        "the interpreter of script {} is not an ELF executable",
                        path.display()
                    ),
                })?;
            return Ok(Program {
                name: name.to_string(),
                path,
                arch,
                interpreter: Some((interp_path, arg)),
            });
        }
        Err(CaptureError::NotExecutable {
            path,
            reason: "not an ELF executable nor a #! script".into(),
        })
    }

    /// True when the binary that runs is not of the host's architecture (only QEMU can run it).
    pub fn is_foreign_arch(&self) -> bool {
        self.arch != host_arch()
    }

    /// `qemu-<arch>` for this program.
    pub fn qemu_binary_name(&self) -> String {
        format!("qemu-{}", self.arch)
    }
}

/// The QEMU architecture name of the host.
pub(crate) fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x86_64",
        "x86" => "i386",
        "aarch64" => "aarch64",
        "arm" => "arm",
        "riscv64" => "riscv64",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        "loongarch64" => "loongarch64",
        other => other,
    }
}

/// Find `name` like execvp(3): a path if it has a '/', else the first executable on `PATH`.
pub(crate) fn find_executable(name: &str) -> Result<PathBuf, CaptureError> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        check_executable(&p)?;
        return Ok(p);
    }
    let path_var =
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut non_exec: Option<PathBuf> = None;
    for dir in std::env::split_paths(&path_var) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let cand = dir.join(name);
        if cand.is_file() {
            if is_executable(&cand) {
                return Ok(cand);
            }
            non_exec.get_or_insert(cand);
        }
    }
    match non_exec {
        Some(p) => Err(CaptureError::NotExecutable {
            path: p,
            reason: "the file has no execute permission".into(),
        }),
        None => Err(CaptureError::ProgramNotFound {
            program: name.to_string(),
            where_: "(no such file on PATH; give a path such as ./prog)".into(),
        }),
    }
}

fn check_executable(p: &Path) -> Result<(), CaptureError> {
    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CaptureError::ProgramNotFound {
            program: p.display().to_string(),
            where_: "(no such file)".into(),
        }),
        Err(e) => Err(CaptureError::NotExecutable {
            path: p.to_path_buf(),
            reason: e.to_string(),
        }),
        Ok(m) if m.is_dir() => Err(CaptureError::NotExecutable {
            path: p.to_path_buf(),
            reason: "it is a directory".into(),
        }),
        Ok(m) if !m.is_file() => Err(CaptureError::NotExecutable {
            path: p.to_path_buf(),
            reason: "not a regular file".into(),
        }),
        Ok(_) if !is_executable(p) => Err(CaptureError::NotExecutable {
            path: p.to_path_buf(),
            reason: "the file has no execute permission".into(),
        }),
        Ok(_) => Ok(()),
    }
}

fn is_executable(p: &Path) -> bool {
    match CString::new(p.as_os_str().as_bytes()) {
        // SAFETY: a valid NUL-terminated path; access() only reads it.
        Ok(c) => unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 },
        Err(_) => false,
    }
}

fn read_head(p: &Path) -> Result<Vec<u8>, CaptureError> {
    let mut f = File::open(p).map_err(|e| CaptureError::NotExecutable {
        path: p.to_path_buf(),
        reason: format!("cannot read it: {e}"),
    })?;
    let mut buf = vec![0u8; 256];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(CaptureError::NotExecutable {
                    path: p.to_path_buf(),
                    reason: format!("cannot read it: {e}"),
                })
            }
        }
    }
    buf.truncate(n);
    Ok(buf)
}

/// True for a 64-bit little-endian ELF executable without a `PT_INTERP` program header: a
/// statically linked program (static-pie too), which no dynamic loader (so no `LD_PRELOAD`)
/// runs. False when the file cannot be read or is another kind of ELF.
pub(crate) fn is_static_elf(p: &Path) -> bool {
    const PT_INTERP: u32 = 3;
    let Ok(data) = std::fs::read(p) else {
        return false;
    };
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 || data[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(data[32..40].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    if phentsize < 4 {
        return false;
    }
    (0..phnum).all(|i| {
        let o = phoff.saturating_add(i * phentsize);
        data.get(o..o + 4)
            .is_some_and(|t| u32::from_le_bytes(t.try_into().unwrap()) != PT_INTERP)
    })
}

/// The QEMU architecture of an ELF file, `None` if `head` is not ELF.
fn elf_arch(p: &Path, head: &[u8]) -> Result<Option<&'static str>, CaptureError> {
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return Ok(None);
    }
    let class64 = head[4] == 2;
    let big = head[5] == 2;
    let machine = if big {
        u16::from_be_bytes([head[18], head[19]])
    } else {
        u16::from_le_bytes([head[18], head[19]])
    };
    let arch = match (machine, class64, big) {
        (62, _, _) => "x86_64",
        (3, _, _) => "i386",
        (183, _, false) => "aarch64",
        (183, _, true) => "aarch64_be",
        (40, _, false) => "arm",
        (40, _, true) => "armeb",
        (243, true, _) => "riscv64",
        (243, false, _) => "riscv32",
        (21, _, false) => "ppc64le",
        (21, _, true) => "ppc64",
        (20, _, _) => "ppc",
        (22, _, _) => "s390x",
        (258, _, _) => "loongarch64",
        _ => {
            return Err(CaptureError::NotExecutable {
                path: p.to_path_buf(),
                reason: format!("ELF machine type {machine} is not supported by the capture"),
            })
        }
    };
    Ok(Some(arch))
}

/// Split a `#!` line into interpreter and optional single argument (Linux semantics), with
/// `/usr/bin/env NAME` replaced by NAME.
fn parse_shebang(p: &Path, head: &[u8]) -> Result<(String, Option<String>), CaptureError> {
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = String::from_utf8_lossy(&head[2..line_end])
        .trim()
        .to_string();
    let mut parts = line.splitn(2, [' ', '\t']);
    let interp = parts.next().unwrap_or("").to_string();
    let arg = parts
        .next()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if interp.is_empty() {
        return Err(CaptureError::NotExecutable {
            path: p.to_path_buf(),
            reason: "its #! line names no interpreter".into(),
        });
    }
    if interp.ends_with("/env") {
        if let Some(a) = &arg {
            if !a.starts_with('-') && !a.contains([' ', '\t']) {
                return Ok((a.clone(), None));
            }
        }
    }
    Ok((interp, arg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines() {
        let p = Path::new("x");
        assert_eq!(
            parse_shebang(p, b"#!/bin/sh\n").unwrap(),
            ("/bin/sh".into(), None)
        );
        assert_eq!(
            parse_shebang(p, b"#! /usr/bin/python3 -u  \nrest").unwrap(),
            ("/usr/bin/python3".into(), Some("-u".into()))
        );
        assert_eq!(
            parse_shebang(p, b"#!/usr/bin/env python3\n").unwrap(),
            ("python3".into(), None)
        );
        assert!(parse_shebang(p, b"#!\n").is_err());
    }

    #[test]
    fn resolves_on_path_and_reports_missing() {
        let sh = Program::resolve("sh").unwrap();
        assert!(sh.path.is_absolute() || sh.path.starts_with("."));
        assert_eq!(sh.arch, host_arch());
        match Program::resolve("no-such-program-cachecolor") {
            Err(CaptureError::ProgramNotFound { .. }) => {}
            other => panic!("{other:?}"),
        }
        match Program::resolve("/etc/hostname") {
            Err(CaptureError::NotExecutable { .. }) => {}
            other => panic!("{other:?}"),
        }
        match Program::resolve("/tmp") {
            Err(CaptureError::NotExecutable { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
