//! Helpers shared by the capture crate's integration tests (`capture.rs`, `system.rs`).
use std::path::Path;
use std::process::Command;

/// `[start, end)` of the symbol `name` in `exe` (the link-time address: a non-PIE program's
/// run-time one), from its symbol table (`nm -S`): the check independent of the capture.
pub fn symbol_range(exe: &Path, name: &str) -> (u64, u64) {
    let out = Command::new("nm")
        .arg("-S")
        .arg(exe)
        .output()
        .expect("nm (binutils) must be installed");
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 4 && f[3] == name {
            let start = u64::from_str_radix(f[0], 16).unwrap();
            let size = u64::from_str_radix(f[1], 16).unwrap();
            return (start, start + size);
        }
    }
    panic!("no symbol {name} in {}: {text}", exe.display());
}
