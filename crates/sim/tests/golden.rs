/*!
Golden counts of whole-system runs (libCacheSim's `test_evictionAlgo.c` shape):
every whole-system example config in `examples/` under every OS policy, its exact figures checked
in under `tests/golden/`, so any change of behaviour shows in review as a diff of those files.

What is pinned, per run (`examples/DIR/NAME.toml` x policy, in `tests/golden/DIR-NAME.json`):
per process its instructions, references, cycles and IPC (f64, printed to the last digit by
serde_json's shortest round-trip form), LLC accesses and misses, TLB misses, remote accesses,
faults, frames, huge pages, eager and lazy recolors; per core its cycles, instructions, samples
and context switches; the coherence counts; the invariant violations; and `report_digest`, an
xxh3 of the whole report (every interval, counter and the policy's own report) in canonical
JSON (object keys sorted), so even a figure not listed above cannot change unseen. A policy that
refuses the config records its one-line error instead (that is behaviour too).

Every policy runs with its default `[policy.NAME]` parameters unless the config gives its own
(the config's `[policy]` table is kept, only `name` replaced). Length: the examples as written
run 540 M references in all (60 M the longest), 3.8 G under seven policies, too long for a test
anyone runs at each step. So each config's workloads are cut to at most `CAP` references a run:
every phase's `references` divided by `ceil(total / CAP)` (at least 1 each; `repeat` kept), where
`total` counts every thread's phases times their repeats. Configs already under `CAP` run as
written (10 of the 49). The shortened runs still fault, walk, sample, tick and recolor (the
figures show it: e.g. `recolors` and `lazy_recolors` of the COLORIS configs), which is what this
test pins; the papers' scenario numbers are the scenario tests' business, at full length.
`examples/rocs/programs/art_like.toml` and the configs of `examples/robustness/programs/` are left out:
they read traces captured from the C programs beside them (by `make demo`, by
tests/test_robustness_programs.py), not checked in.

Regenerate after an intended change: `make golden` (runs this test with `GOLDEN_UPDATE=1`,
then shows `git diff --stat` and the diff of `tests/golden/`). Without it a mismatch fails
naming the first differing lines of each file (compared as text, every digit).
*/
use cachecolor_sim::policy::PolicyKind;
use cachecolor_sim::system::{presets, System};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// The OS policies every config is run under: the registry's, in its order.
fn policies() -> Vec<&'static str> {
    PolicyKind::ALL.iter().map(|k| k.name()).collect()
}

/// At most this many references a run (see the module comment).
const CAP: u64 = 1_000_000;

/// Configs that cannot run from a checkout alone (they read traces captured from the C programs
/// beside them: `make demo`, tests/test_robustness_programs.py).
const SKIP: &[&str] = &[
    "rocs/programs/art_like.toml",
    "robustness/programs/list_walk.toml",
    "robustness/programs/lookup_fits.toml",
    "robustness/programs/lookup_just_fits.toml",
    "robustness/programs/matmul.toml",
    "robustness/programs/pair-lookup-list.toml",
    "robustness/programs/pair-lookup-stream.toml",
    "robustness/programs/pair-stream-lookup.toml",
    "robustness/programs/stream_table.toml",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Every `.toml` under `examples/` with a `[[processes]]` table, sorted.
fn system_configs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root().join("examples")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("examples/ readable") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).expect("example readable");
                if text.lines().any(|l| l.trim() == "[[processes]]") {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root().join("examples"))
        .expect("under examples/")
        .to_string_lossy()
        .replace('\\', "/")
}

/// Object keys sorted, recursively (serde_json's `Map` is a BTreeMap unless `preserve_order`
/// is on; this makes the digest independent of that feature and of struct field order).
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Keys of the report that are not behaviour (added by the run around it, if ever).
const NOT_BEHAVIOUR: &[&str] = &["version", "config"];

fn pick(v: &Value, keys: &[&str]) -> Value {
    let mut out = Map::new();
    for k in keys {
        out.insert((*k).into(), v.get(*k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(out)
}

/// Run `path` under `policy`: its golden figures, or the error that refused it.
fn run(path: &Path, policy: &str) -> Value {
    run_with(path, policy, None)
}

/// As `run`, with `pmu.ideal` set to `ideal` if given.
fn run_with(path: &Path, policy: &str, ideal: Option<bool>) -> Value {
    let text = std::fs::read_to_string(path).expect("example readable");
    let mut doc: Value = toml::from_str(&text).expect("example is TOML");
    shorten(&mut doc);
    if let Some(ideal) = ideal {
        let pmu = doc
            .as_object_mut()
            .expect("a table")
            .entry("pmu")
            .or_insert_with(|| json!({}));
        pmu["ideal"] = json!(ideal);
    }
    let mut config = match presets::system_config_from_value(doc) {
        Ok(c) => c,
        Err(e) => return json!({ "error": e.to_string() }),
    };
    config.policy.name = policy.into();
    // Relative trace paths are relative to the config's directory (as the CLI resolves them).
    let dir = path.parent().expect("in a directory");
    for p in &mut config.processes {
        for t in &mut p.threads {
            if let Some(tr) = &mut t.trace {
                if tr.is_relative() {
                    *tr = dir.join(&*tr);
                }
            }
        }
    }
    let mut system = match System::new(&config) {
        Ok(s) => s,
        Err(e) => return json!({ "error": e.to_string() }),
    };
    if let Err(e) = system.run() {
        return json!({ "error": e.to_string() });
    }
    let mut report = serde_json::to_value(system.report()).expect("reports serialise");
    if let Value::Object(m) = &mut report {
        for k in NOT_BEHAVIOUR {
            m.remove(*k);
        }
    }
    let digest = xxhash_rust::xxh3::xxh3_64(canonical(&report).to_string().as_bytes());
    let processes: Vec<Value> = report["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| {
            pick(
                p,
                &[
                    "name",
                    "instructions",
                    "references",
                    "cycles",
                    "ipc",
                    "llc_accesses",
                    "llc_misses",
                    "tlb_misses",
                    "remote_accesses",
                    "faults",
                    "frames",
                    "huge_pages",
                    "recolors",
                    "lazy_recolors",
                ],
            )
        })
        .collect();
    let cores: Vec<Value> = report["cores"]
        .as_array()
        .expect("cores")
        .iter()
        .map(|c| {
            pick(
                c,
                &["cycles", "instructions", "samples", "context_switches"],
            )
        })
        .collect();
    json!({
        "processes": processes,
        "cores": cores,
        "coherence": report["coherence"],
        "intervals": report["intervals"].as_array().map_or(0, |a| a.len()),
        "invariants": report["invariants"],
        "report_digest": format!("{digest:016x}"),
    })
}

/// Each thread's workload phases, mutably.
fn phases(doc: &mut Value) -> Vec<(u64, &mut Value)> {
    let mut out = Vec::new();
    for p in doc["processes"].as_array_mut().into_iter().flatten() {
        for t in p["threads"].as_array_mut().into_iter().flatten() {
            let w = &mut t["workload"];
            let repeat = w.get("repeat").and_then(Value::as_u64).unwrap_or(1);
            for ph in w
                .get_mut("phases")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                out.push((repeat, ph));
            }
        }
    }
    out
}

/// Cut the config's workloads to at most about `CAP` references (see the module comment).
fn shorten(doc: &mut Value) {
    let total: u64 = phases(doc)
        .iter()
        .map(|(repeat, ph)| repeat * ph["references"].as_u64().unwrap_or(0))
        .sum();
    let div = total.div_ceil(CAP).max(1);
    if div == 1 {
        return;
    }
    for (_, ph) in phases(doc) {
        if let Some(n) = ph["references"].as_u64() {
            ph["references"] = json!((n / div).max(1));
        }
    }
}

/// Checks (or, with `update`, rewrites) one config's golden file: the failures it finds, in order.
fn check_golden(path: &Path, update: bool) -> Vec<String> {
    let name = rel(path);
    let file = golden_file(&name);
    let mut failures = Vec::new();
    let mut runs = Map::new();
    for policy in policies() {
        let t = std::time::Instant::now();
        runs.insert(policy.into(), run(path, policy));
        if std::env::var_os("GOLDEN_TIMES").is_some() {
            eprintln!("{name} {policy}: {:.2}s", t.elapsed().as_secs_f64());
        }
    }
    let got = json!({ "config": format!("examples/{name}"), "runs": runs });
    // Compared as text: serde_json's parser (without `float_roundtrip`) may read a float
    // one ulp off, and the point is every digit.
    let text = serde_json::to_string_pretty(&got).expect("json") + "\n";
    if update {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&file, text).expect("golden written");
        return failures;
    }
    let want = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(_) => {
            failures.push(format!("{name}: no golden file {}", file.display()));
            return failures;
        }
    };
    if want != text {
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), text.lines().collect());
        let mut shown = 0;
        for i in 0..w.len().max(g.len()) {
            let (x, y) = (
                w.get(i).copied().unwrap_or(""),
                g.get(i).copied().unwrap_or(""),
            );
            if x != y && shown < 5 {
                shown += 1;
                failures.push(format!(
                    "{name} line {}: golden `{}`, now `{}`",
                    i + 1,
                    x.trim(),
                    y.trim()
                ));
            }
        }
        if shown == 0 {
            failures.push(format!("{name}: differs"));
        }
    }
    failures
}

/// The golden file of the config at `name` (relative to `examples/`).
fn golden_file(name: &str) -> PathBuf {
    golden_dir().join(format!(
        "{}.json",
        name.trim_end_matches(".toml").replace('/', "-")
    ))
}

#[test]
fn golden_counts_of_every_example_under_every_policy() {
    let update = std::env::var_os("GOLDEN_UPDATE").is_some();
    let only = std::env::var("GOLDEN_ONLY").ok();
    let configs = system_configs();
    assert!(configs.len() >= 40, "found only {} configs", configs.len());
    let todo: Vec<&PathBuf> = configs
        .iter()
        .filter(|path| {
            let name = rel(path);
            !SKIP.contains(&name.as_str()) && only.as_deref().is_none_or(|o| name.contains(o))
        })
        .collect();
    let seen: Vec<PathBuf> = todo.iter().map(|p| golden_file(&rel(p))).collect();
    // The configs are independent runs: one worker per host CPU takes the next config, and the
    // failures are put back in config order, so the message does not depend on the schedule.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(todo.len().max(1));
    let mut per_config: Vec<Vec<String>> = vec![Vec::new(); todo.len()];
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = todo.get(i) else { break };
                        done.push((i, check_golden(path, update)));
                    }
                    done
                })
            })
            .collect();
        for h in handles {
            for (i, f) in h.join().expect("golden worker panicked") {
                per_config[i] = f;
            }
        }
    });
    let mut failures: Vec<String> = per_config.into_iter().flatten().collect();
    if only.is_none() && !update {
        // A golden file whose config is gone is stale.
        for e in std::fs::read_dir(golden_dir()).expect("golden dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "json") && !seen.contains(&p) {
                failures.push(format!("{}: no example config of that name", p.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "golden counts differ (run `make golden` if the change is intended):\n{}",
        failures.join("\n")
    );
}

/// The exact-oracle PMU (`pmu.ideal = true`): when the realistic PMU landed (branch `pmu`, commit
/// cb5e85c) `tests/golden-ideal/` held the golden files of five examples as they were before it,
/// and ideal runs equalled them bit for bit. Since then they are the golden counts of the ideal
/// PMU, regenerated with the others by `make golden` when another change (the memory model, a
/// policy fix) moves them.
#[test]
fn ideal_pmu_keeps_the_pre_pmu_golden_counts() {
    let update = std::env::var_os("GOLDEN_UPDATE").is_some();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-ideal");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/golden-ideal")
        .map(|e| e.expect("entry").path())
        .collect();
    names.sort();
    assert!(names.len() >= 5);
    for file in names {
        let want: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("readable")).unwrap();
        let config = want["config"].as_str().expect("config path");
        let path = root().join(config);
        let mut runs = Map::new();
        for policy in policies() {
            runs.insert(policy.into(), run_with(&path, policy, Some(true)));
        }
        let got = json!({ "config": config, "runs": runs });
        let text = serde_json::to_string_pretty(&got).expect("json") + "\n";
        if update {
            std::fs::write(&file, &text).expect("writable");
            continue;
        }
        assert!(
            text == std::fs::read_to_string(&file).expect("readable"),
            "{} differs under pmu.ideal = true",
            file.display()
        );
    }
}
