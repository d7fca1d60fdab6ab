/*!
Analytic models and profiles (DESIGN.md `analysis`). So far: the thesis's page-bin conflict
model (`bins`); miss-rate curves, stack-distance and page-level profiles come with issue 4.
*/
pub mod bins;
