//! No non-test source file in `crates/sim/src` is over 900 lines (the system is split by mechanism;
//! a file that long is doing more than one job and is split into sibling files of the same `impl`
//! or into submodules).
//!
//! What counts as test code is read from the sources, not guessed from names: a file is test
//! code when it is the file of a module declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`,
//! `#[cfg(test)] mod scenarios;`, `#[cfg(test)] pub(crate) mod testing;`, with or without a
//! `#[path = "..."]`), or any file in that module's folder (e.g. `policy/coloris/tests/`).
//! Every other `.rs` file under `src/` is counted whole, so an inline `#[cfg(test)] mod tests { }`
//! counts against its file: move it to a sibling file, as the other modules do.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The name of a `mod NAME;` declaration (any visibility), or None for anything else.
fn declared_module(line: &str) -> Option<&str> {
    let mut rest = line.trim();
    if let Some(r) = rest.strip_prefix("pub") {
        rest = r.trim_start();
        if rest.starts_with('(') {
            rest = rest[rest.find(')')? + 1..].trim_start();
        }
    }
    let name = rest.strip_prefix("mod ")?.trim().strip_suffix(';')?.trim();
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(name)
}

/// Files and folders of the modules `file` declares under `#[cfg(test)]`.
fn test_modules(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = file.parent().expect("file has a folder");
    let stem = file.file_stem().expect("file has a name").to_string_lossy();
    // Where `mod NAME;` looks for NAME: beside a mod.rs / lib.rs, in the folder named as the file
    // otherwise.
    let base = if stem == "mod" || stem == "lib" || stem == "main" {
        dir.to_path_buf()
    } else {
        dir.join(&*stem)
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        let mut path_attr = None;
        for next in &lines[i + 1..] {
            let t = next.trim();
            if let Some(p) = t.strip_prefix("#[path = \"") {
                path_attr = p.strip_suffix("\"]").map(str::to_owned);
            } else if t.starts_with("#[") || t.starts_with("//") {
                continue;
            } else {
                if let Some(name) = declared_module(t) {
                    match &path_attr {
                        // A path attribute on a declaration in a file is relative to that
                        // file's folder.
                        Some(p) => {
                            let target = dir.join(p);
                            found.push(target.with_extension(""));
                            found.push(target);
                        }
                        None => {
                            found.push(base.join(format!("{name}.rs")));
                            found.push(base.join(name));
                        }
                    }
                }
                break;
            }
        }
    }
    found
}

#[test]
fn no_non_test_source_file_in_sim_src_is_over_900_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut test_paths = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read source");
        test_paths.extend(test_modules(f, &text));
    }
    let is_test = |f: &Path| test_paths.iter().any(|t| f == t || f.starts_with(t));
    let (tests, sources): (Vec<&PathBuf>, Vec<&PathBuf>) = files.iter().partition(|f| is_test(f));
    // The classification found the test files it must (so a parsing slip cannot let every file
    // through as a test, or none).
    for known in [
        "system/tests.rs",
        "system/testing.rs",
        "policy/rocs/scenarios.rs",
        "policy/coloris/tests/scenarios.rs",
        "analysis/stack_tests.rs",
    ] {
        assert!(
            tests.iter().any(|t| t.ends_with(known)),
            "{known} is test code but was not classified as such"
        );
    }
    for known in ["system/mod.rs", "lib.rs", "policy/rocs/mod.rs"] {
        assert!(
            sources.iter().any(|s| s.ends_with(known)),
            "{known} is a source file but was classified as a test"
        );
    }
    let over: Vec<String> = sources
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f)
                .expect("read source")
                .lines()
                .count();
            (n > MAX_LINES)
                .then(|| format!("{} ({n} lines)", f.strip_prefix(&src).unwrap().display()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "non-test source files over {MAX_LINES} lines (split them by mechanism, issue 26): {}",
        over.join(", ")
    );
}
