/*!
Analytic models and profiles (DESIGN.md `analysis`):
- `bins`: the thesis's page-bin conflict model (section 3.2);
- `stack`: exact LRU stack distances (Mattson) in O(log M) per reference, for one fully
  associative stack and per cache set (the thesis's per-set stack distance profiles, 5.3).
*/
pub mod bins;
pub mod stack;
