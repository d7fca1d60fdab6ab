//! Nellans et al. Tables 2 and 3 and the characterisation on the synthetic workloads: every
//! `examples/oscache/*.toml` machine on every `examples/oscache/workloads/*.toml` workload,
//! IPC relative to `baseline.toml`. `cargo run --release -p cachecolor-sim --example
//! oscache_table [REFERENCES]` (default 3M records per run).
use cachecolor_sim::oscache::model::{run_workload, RunConfig};
use cachecolor_sim::workload::WorkloadSpec;
use std::path::Path;

fn main() {
    let refs: Option<u64> = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("REFERENCES"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/oscache");
    let mut machines: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        // offload-*.toml are section 4's off-load configs, not machines of this model.
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("offload-")
        })
        .collect();
    machines.sort();
    for w in ["web-server", "jvm", "compute"] {
        let text = std::fs::read_to_string(root.join(format!("workloads/{w}.toml"))).unwrap();
        let mut spec: WorkloadSpec = cachecolor_sim::config::from_toml(&text).unwrap();
        if let Some(r) = refs {
            spec.phases[0].references = r;
        }
        let base =
            RunConfig::from_toml(&std::fs::read_to_string(root.join("baseline.toml")).unwrap())
                .unwrap();
        let b = run_workload(&base.model, &spec).unwrap();
        println!(
            "== {w}: privileged {:.1}%, baseline IPC {:.4}, runs {:?}",
            100.0 * b.privileged_share,
            b.ipc,
            b.runs_by_length
        );
        for c in &b.caches {
            let ev = c.evictions[0] + c.evictions[1];
            println!(
                "   {:8} miss user {:.3} os {:.3}  OS-caused evictions {:.1}% by run {:?}",
                c.name,
                c.misses[0] as f64 / c.accesses[0].max(1) as f64,
                c.misses[1] as f64 / c.accesses[1].max(1) as f64,
                100.0 * c.evictions[1] as f64 / ev.max(1) as f64,
                c.os_evictions_by_run
            );
        }
        for m in &machines {
            let name = m.file_stem().unwrap().to_string_lossy();
            if name == "baseline" {
                continue;
            }
            let cfg = RunConfig::from_toml(&std::fs::read_to_string(m).unwrap()).unwrap();
            let r = run_workload(&cfg.model, &spec).unwrap();
            let acc = r.bank_predictions[0] as f64
                / (r.bank_predictions[0] + r.bank_predictions[1]).max(1) as f64;
            println!(
                "   {name:32} IPC {:.4} rel {:.3}  bank-pred {:.2} fallback {}/{} inv {}",
                r.ipc,
                r.ipc / b.ipc,
                acc,
                r.fallback_epochs,
                r.epochs,
                r.invariants.len()
            );
        }
    }
}
