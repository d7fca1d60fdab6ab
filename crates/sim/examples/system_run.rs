//! Run a system config and print its table: `cargo run --release -p cachecolor-sim --example
//! system_run -- examples/os/placement-random.toml` (for profiling the system engine).
use cachecolor_sim::system::{System, SystemConfig};

fn main() {
    let path = std::env::args().nth(1).expect("a system config path");
    let text = std::fs::read_to_string(&path).expect("readable config");
    let config: SystemConfig = cachecolor_sim::config::from_toml(&text).expect("valid config");
    let mut s = System::new(&config).expect("system");
    let t0 = std::time::Instant::now();
    s.run().expect("run");
    let secs = t0.elapsed().as_secs_f64();
    let r = s.report();
    let refs: u64 = r.processes.iter().map(|p| p.references).sum();
    for p in &r.processes {
        println!(
            "{:10} ipc {:.3} llc_miss_rate {:.3} tlb_misses {}",
            p.name, p.ipc, p.llc_miss_rate, p.tlb_misses
        );
    }
    println!("{:.2} M references/s", refs as f64 / secs / 1e6);
}
