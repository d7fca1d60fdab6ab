/*!
OS/user cache interference (Nellans et al., "Interference Aware Cache Designs for Operating
System Execution", 2009): the pieces of that paper built on the simulator. docs/oscache.md maps
each to its section.

- `runs`: privileged runs in a record stream (a maximal stretch of one thread's records with
  `Record::privileged` set; its length is the sum of their `icount`s; its syscall identity, the
  paper's AState stand-in (section 4.2), is `Record::syscall` of its first record).
- The synthetic OS-intensive workloads are the `syscall-mix` workload pattern
  (`workload/syscall_mix.rs`); presets in `examples/oscache/workloads/`.

Off-load (section 4): `predictor` (the run-length predictor) and `offload` (the OS core).
*/

pub mod model;
pub mod offload;
pub mod predictor;
pub mod runs;
#[cfg(test)]
mod tests;
