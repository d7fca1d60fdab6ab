/*!
Analytic models and profiles (DESIGN.md `analysis`):
- `bins`: the thesis's page-bin conflict model (section 3.2);
- `stack`: exact LRU stack distances (Mattson) in O(log M) per reference, for one fully
  associative stack and per cache set (the thesis's per-set stack distance profiles, 5.3);
- `shards`, `aet`: approximate miss-rate curves (spatial sampling; reuse-time sampling);
- `rapidmrc`: an L2 curve from a window of L1 misses (Azimi et al. 3.2.2) and its error;
- `placement`: page placement through a page map or a simulated allocator (physically aware
  SDP, thesis 5.3.1), eq. 5.2's miss probability, section 2.3.2's stochastic hit rates;
- `pages`: page-level profiles (ROCS 3): per page accesses and misses at a level, ground truth
  and the PMU sampler's estimate, miss-rate regions;
- `attribute`: where each reference of a trace with PCs was served, per PC and per data page
  (`cachecolor annotate`);
- `mrc`: curves of traces (units, methods, sizes, results) for the Python API and CLI;
- `histogram`: the log-linear histogram the approximations keep;
- `reference`: ANCHORS.md's zipf + scan reference trace.
*/
pub mod aet;
pub mod attribute;
pub mod bins;
pub mod histogram;
pub mod mrc;
pub mod pages;
pub mod placement;
pub mod rapidmrc;
pub mod reference;
pub mod shards;
pub mod stack;
