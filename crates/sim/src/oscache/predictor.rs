/*!
The privileged run-length predictor of Nellans et al. section 4.2.

On every transition to privileged mode the hardware XOR-hashes architected register state
(PSTATE, g0, g1, i0, i1 on SPARC) into a 64-bit *AState* and looks it up in a table that remembers
the run length seen the last time that AState was observed. Each entry has a 2-bit saturating
confidence counter, "incremented on a prediction within 5% of the actual, and decremented
otherwise"; when the confidence is 0 the predictor makes a "global" prediction instead: "the
average run length of the last three observed syscalls (regardless of their AStates)". The paper
found a fully associative table of 200 entries close to optimal and a direct-mapped RAM of 1 K
entries as accurate (2 KB of storage).

Contract (pure, no simulator state): `predict(astate)` returns a length and where it came from;
`update(astate, actual)` trains the table with the length the run really had. A caller predicts
and then updates for each run, in order. `Accuracy` counts exact and within-5% predictions and,
for a set of switch triggers N, whether the binary decision `predicted > N` matched
`actual > N` (Figure 4).

Decisions where the paper is silent (all in `PredictorConfig`, documented in docs):
- The fully associative table is tagged with the whole AState and replaces its least recently
  used entry; the direct-mapped table is untagged (a 1 K x 2 B RAM holds no tags, which is how the
  paper's 2 KB fits), indexed by the XOR fold of the AState, so aliases share an entry.
- A new entry starts at confidence `initial_confidence` (default 1: the first repeat of an AState
  uses its last length; 0 would make it use the global average once more).
- The confidence counter is trained on the *local* entry's value (was the remembered length
  within 5% of the actual?) whichever prediction was used, so an entry at confidence 0 can recover.
- "Within 5%" is `|predicted - actual| <= 5% of actual` (so exact counts as within 5%; the
  accuracy report keeps "exact" and "within 5% but not exact" apart as the paper does).
- With no history at all the global prediction is 0 (never off-load); with fewer than three runs
  it is the mean of those seen. The mean is rounded down.
- A lookup that finds no entry (fully associative miss) uses the global prediction.
*/
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// Table organisation (section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TableKind {
    /// Tagged, fully associative, LRU replacement (paper: 200 entries).
    FullyAssociative,
    /// Untagged RAM indexed by the XOR fold of the AState (paper: 1 K entries).
    DirectMapped,
}

fn d_kind() -> TableKind {
    TableKind::FullyAssociative
}
fn d_init_conf() -> u8 {
    1
}
fn d_tolerance() -> f64 {
    0.05
}
fn d_history() -> usize {
    3
}

/// `[offload.predictor]` in a config: the paper's values as defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictorConfig {
    /// `fully-associative` (default) or `direct-mapped`.
    #[serde(default = "d_kind")]
    pub table: TableKind,
    /// Table entries; default 200 fully associative, 1024 direct-mapped.
    #[serde(default)]
    pub entries: Option<usize>,
    /// Confidence of a newly inserted entry (0..=3).
    #[serde(default = "d_init_conf")]
    pub initial_confidence: u8,
    /// Relative error counted as a good prediction (paper: 5%).
    #[serde(default = "d_tolerance")]
    pub tolerance: f64,
    /// Runs averaged by the global prediction (paper: 3).
    #[serde(default = "d_history")]
    pub global_history: usize,
}

impl Default for PredictorConfig {
    fn default() -> Self {
        PredictorConfig {
            table: d_kind(),
            entries: None,
            initial_confidence: d_init_conf(),
            tolerance: d_tolerance(),
            global_history: d_history(),
        }
    }
}

impl PredictorConfig {
    /// Entries after defaults: 200 fully associative, 1024 direct-mapped (section 4.2).
    pub fn effective_entries(&self) -> usize {
        self.entries.unwrap_or(match self.table {
            TableKind::FullyAssociative => 200,
            TableKind::DirectMapped => 1024,
        })
    }

    /// Check every field; `prefix` is the dotted path of this table in the config.
    pub fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        let e = self.effective_entries();
        if e == 0 {
            return Err(ConfigError::new(
                format!("{prefix}.entries"),
                "0 entries: the predictor table needs at least 1 (paper: 200 fully associative, 1024 direct-mapped)",
            ));
        }
        if e > 1 << 20 {
            return Err(ConfigError::new(
                format!("{prefix}.entries"),
                format!("{e} entries: at most 1048576 (2^20) are supported"),
            ));
        }
        if self.initial_confidence > 3 {
            return Err(ConfigError::new(
                format!("{prefix}.initial_confidence"),
                format!(
                    "{}: the confidence counter has 2 bits (0..=3)",
                    self.initial_confidence
                ),
            ));
        }
        if !(self.tolerance.is_finite() && (0.0..1.0).contains(&self.tolerance)) {
            return Err(ConfigError::new(
                format!("{prefix}.tolerance"),
                format!("{}: a fraction in [0, 1) (paper: 0.05)", self.tolerance),
            ));
        }
        if self.global_history == 0 || self.global_history > 64 {
            return Err(ConfigError::new(
                format!("{prefix}.global_history"),
                format!("{}: between 1 and 64 runs (paper: 3)", self.global_history),
            ));
        }
        Ok(())
    }
}

/// Where a prediction came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The AState's entry, confidence above 0.
    Local,
    /// The mean of the last runs (entry at confidence 0, or no entry).
    Global,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prediction {
    pub length: u64,
    pub source: Source,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Entry {
    /// AState (fully associative only; the direct-mapped table has no tags).
    tag: u64,
    valid: bool,
    last: u64,
    confidence: u8,
    /// LRU stamp (fully associative only).
    used: u64,
}

/// XOR fold of a 64-bit AState to 32 bits: the "XOR hash" used to index the direct-mapped table.
#[inline]
pub fn fold(astate: u64) -> u32 {
    ((astate >> 32) ^ astate) as u32
}

/// Is `predicted` within `tol` (relative) of `actual`?
#[inline]
pub fn within(predicted: u64, actual: u64, tol: f64) -> bool {
    (predicted.abs_diff(actual) as f64) <= tol * actual as f64
}

/// The predictor: table plus global history.
#[derive(Debug, Clone)]
pub struct Predictor {
    kind: TableKind,
    entries: Vec<Entry>,
    initial_confidence: u8,
    tolerance: f64,
    history: Vec<u64>,
    history_len: usize,
    history_next: usize,
    clock: u64,
}

impl Predictor {
    pub fn new(cfg: &PredictorConfig) -> Result<Predictor, ConfigError> {
        cfg.validate("predictor")?;
        Ok(Predictor {
            kind: cfg.table,
            entries: vec![Entry::default(); cfg.effective_entries()],
            initial_confidence: cfg.initial_confidence,
            tolerance: cfg.tolerance,
            history: Vec::with_capacity(cfg.global_history),
            history_len: cfg.global_history,
            history_next: 0,
            clock: 0,
        })
    }

    /// The paper's mean of the last `global_history` runs (0 with no history), rounded down.
    pub fn global(&self) -> u64 {
        if self.history.is_empty() {
            return 0;
        }
        let s: u128 = self.history.iter().map(|&v| v as u128).sum();
        (s / self.history.len() as u128) as u64
    }

    fn slot(&self, astate: u64) -> Option<usize> {
        match self.kind {
            TableKind::DirectMapped => {
                let i = fold(astate) as usize % self.entries.len();
                self.entries[i].valid.then_some(i)
            }
            TableKind::FullyAssociative => {
                self.entries.iter().position(|e| e.valid && e.tag == astate)
            }
        }
    }

    /// Predict the length of the privileged run that starts with `astate` (section 4.2).
    pub fn predict(&self, astate: u64) -> Prediction {
        match self.slot(astate) {
            Some(i) if self.entries[i].confidence > 0 => Prediction {
                length: self.entries[i].last,
                source: Source::Local,
            },
            _ => Prediction {
                length: self.global(),
                source: Source::Global,
            },
        }
    }

    /// Train with the run's real length: the entry's confidence moves by the accuracy of its
    /// remembered length, the entry remembers `actual`, and the global history takes it.
    pub fn update(&mut self, astate: u64, actual: u64) {
        self.clock += 1;
        let clock = self.clock;
        match self.slot(astate) {
            Some(i) => {
                let tol = self.tolerance;
                let e = &mut self.entries[i];
                if within(e.last, actual, tol) {
                    e.confidence = (e.confidence + 1).min(3);
                } else {
                    e.confidence = e.confidence.saturating_sub(1);
                }
                e.last = actual;
                e.tag = astate;
                e.used = clock;
            }
            None => {
                let i = match self.kind {
                    TableKind::DirectMapped => fold(astate) as usize % self.entries.len(),
                    TableKind::FullyAssociative => {
                        // An invalid entry if any, else the least recently used one.
                        match self.entries.iter().position(|e| !e.valid) {
                            Some(i) => i,
                            None => {
                                let mut best = 0;
                                for (i, e) in self.entries.iter().enumerate() {
                                    if e.used < self.entries[best].used {
                                        best = i;
                                    }
                                }
                                best
                            }
                        }
                    }
                };
                self.entries[i] = Entry {
                    tag: astate,
                    valid: true,
                    last: actual,
                    confidence: self.initial_confidence,
                    used: clock,
                };
            }
        }
        if self.history.len() < self.history_len {
            self.history.push(actual);
        } else {
            self.history[self.history_next] = actual;
        }
        self.history_next = (self.history_next + 1) % self.history_len;
    }

    /// Confidence of the entry `astate` maps to (None if there is none): for tests and reports.
    pub fn confidence(&self, astate: u64) -> Option<u8> {
        self.slot(astate).map(|i| self.entries[i].confidence)
    }

    /// Valid entries.
    pub fn occupancy(&self) -> usize {
        self.entries.iter().filter(|e| e.valid).count()
    }
}

/// Prediction quality: exact, within the tolerance, and the binary decision per trigger N.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accuracy {
    pub runs: u64,
    /// predicted == actual.
    pub exact: u64,
    /// Within the tolerance but not exact.
    pub within: u64,
    /// Predictions that came from the global average.
    pub global: u64,
    /// Switch triggers N and, per N, runs where (predicted > N) == (actual > N).
    pub triggers: Vec<u64>,
    pub decision_correct: Vec<u64>,
    /// Per N, runs with actual > N (how often off-load would be right).
    pub longer_than: Vec<u64>,
}

impl Accuracy {
    pub fn new(triggers: &[u64]) -> Accuracy {
        Accuracy {
            runs: 0,
            exact: 0,
            within: 0,
            global: 0,
            triggers: triggers.to_vec(),
            decision_correct: vec![0; triggers.len()],
            longer_than: vec![0; triggers.len()],
        }
    }

    pub fn record(&mut self, p: Prediction, actual: u64, tol: f64) {
        self.runs += 1;
        if p.length == actual {
            self.exact += 1;
        } else if within(p.length, actual, tol) {
            self.within += 1;
        }
        if p.source == Source::Global {
            self.global += 1;
        }
        for (k, &n) in self.triggers.iter().enumerate() {
            if (p.length > n) == (actual > n) {
                self.decision_correct[k] += 1;
            }
            if actual > n {
                self.longer_than[k] += 1;
            }
        }
    }

    pub fn exact_fraction(&self) -> f64 {
        frac(self.exact, self.runs)
    }
    pub fn within_fraction(&self) -> f64 {
        frac(self.within, self.runs)
    }
    pub fn decision_fraction(&self, k: usize) -> f64 {
        frac(self.decision_correct[k], self.runs)
    }
}

fn frac(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Predict then train over a sequence of (AState, length) runs, collecting accuracy.
pub fn evaluate(
    cfg: &PredictorConfig,
    runs: impl IntoIterator<Item = (u64, u64)>,
    triggers: &[u64],
) -> Result<Accuracy, ConfigError> {
    let mut p = Predictor::new(cfg)?;
    let mut acc = Accuracy::new(triggers);
    for (a, len) in runs {
        let pr = p.predict(a);
        acc.record(pr, len, cfg.tolerance);
        p.update(a, len);
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fa(entries: usize) -> Predictor {
        Predictor::new(&PredictorConfig {
            entries: Some(entries),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn defaults_are_the_papers() {
        let c = PredictorConfig::default();
        assert_eq!(c.effective_entries(), 200);
        assert_eq!(c.tolerance, 0.05);
        assert_eq!(c.global_history, 3);
        let d = PredictorConfig {
            table: TableKind::DirectMapped,
            ..Default::default()
        };
        assert_eq!(d.effective_entries(), 1024);
    }

    #[test]
    fn no_history_predicts_zero_from_global() {
        let p = fa(4);
        assert_eq!(
            p.predict(7),
            Prediction {
                length: 0,
                source: Source::Global
            }
        );
    }

    #[test]
    fn global_is_the_mean_of_the_last_three_runs() {
        let mut p = fa(8);
        p.update(1, 100);
        assert_eq!(p.global(), 100);
        p.update(2, 200);
        assert_eq!(p.global(), 150);
        p.update(3, 301);
        assert_eq!(p.global(), 200); // 601 / 3 rounded down
        p.update(4, 1000);
        // 100 dropped: (200 + 301 + 1000) / 3
        assert_eq!(p.global(), 500);
        // An unseen AState gets the global prediction.
        assert_eq!(p.predict(99).length, 500);
        assert_eq!(p.predict(99).source, Source::Global);
    }

    #[test]
    fn new_entry_predicts_its_last_length_at_initial_confidence() {
        let mut p = fa(8);
        p.update(5, 1234);
        assert_eq!(p.confidence(5), Some(1));
        assert_eq!(
            p.predict(5),
            Prediction {
                length: 1234,
                source: Source::Local
            }
        );
        // initial_confidence = 0: the first repeat still uses the global average.
        let mut q = Predictor::new(&PredictorConfig {
            initial_confidence: 0,
            ..Default::default()
        })
        .unwrap();
        q.update(5, 1234);
        q.update(6, 10);
        assert_eq!(q.predict(5).source, Source::Global);
        assert_eq!(q.predict(5).length, (1234 + 10) / 2);
    }

    #[test]
    fn confidence_rises_within_five_percent_and_saturates_at_three() {
        let mut p = fa(8);
        p.update(5, 1000); // insert, confidence 1
        p.update(5, 1050); // |1000-1050| = 50 <= 5% of 1050: +1
        assert_eq!(p.confidence(5), Some(2));
        p.update(5, 1000); // |1050-1000| = 50 <= 50: +1 (boundary counts)
        assert_eq!(p.confidence(5), Some(3));
        p.update(5, 1000);
        assert_eq!(p.confidence(5), Some(3)); // saturates
        assert_eq!(p.predict(5).length, 1000);
    }

    #[test]
    fn confidence_falls_otherwise_and_zero_falls_back_to_global() {
        let mut p = fa(8);
        p.update(5, 1000); // conf 1
        p.update(5, 1100); // 100 > 55: -1 -> 0
        assert_eq!(p.confidence(5), Some(0));
        let pr = p.predict(5);
        assert_eq!(pr.source, Source::Global);
        assert_eq!(pr.length, (1000 + 1100) / 2);
        p.update(5, 2000); // -1 saturates at 0
        assert_eq!(p.confidence(5), Some(0));
        // The entry still remembers the last length and recovers on a good match.
        p.update(5, 2000);
        assert_eq!(p.confidence(5), Some(1));
        assert_eq!(p.predict(5).source, Source::Local);
        assert_eq!(p.predict(5).length, 2000);
    }

    #[test]
    fn just_outside_five_percent_is_a_miss() {
        assert!(within(95, 100, 0.05));
        assert!(within(105, 100, 0.05));
        assert!(!within(94, 100, 0.05));
        assert!(!within(106, 100, 0.05));
        assert!(within(0, 0, 0.05));
        assert!(!within(1, 0, 0.05));
    }

    #[test]
    fn fully_associative_replaces_the_least_recently_used_entry() {
        let mut p = fa(2);
        p.update(1, 10);
        p.update(2, 20);
        p.update(1, 10); // touches 1: 2 is now LRU
        p.update(3, 30); // evicts 2
        assert!(p.confidence(1).is_some());
        assert!(p.confidence(2).is_none());
        assert!(p.confidence(3).is_some());
        assert_eq!(p.occupancy(), 2);
        // 2 is gone: predicted from the global mean of the last three runs (20, 10, 30).
        assert_eq!(p.predict(2).source, Source::Global);
        assert_eq!(p.predict(2).length, (20 + 10 + 30) / 3);
    }

    #[test]
    fn direct_mapped_aliases_share_an_entry_without_tags() {
        let mut p = Predictor::new(&PredictorConfig {
            table: TableKind::DirectMapped,
            entries: Some(4),
            ..Default::default()
        })
        .unwrap();
        // fold(1) = 1 and fold(5) = 5: both index 1 of 4.
        assert_eq!(fold(1) % 4, fold(5) % 4);
        p.update(1, 100);
        // No tag: AState 5 reads AState 1's entry.
        assert_eq!(
            p.predict(5),
            Prediction {
                length: 100,
                source: Source::Local
            }
        );
        // Training it with 5's length moves the shared confidence.
        p.update(5, 500);
        assert_eq!(p.confidence(1), Some(0));
        // The fold XORs the high half into the low half.
        assert_eq!(fold(0x0000_0001_0000_0001), 0);
        assert_eq!(fold(0x0000_0003_0000_0001), 2);
    }

    #[test]
    fn zero_entries_and_other_impossible_settings_are_rejected() {
        let e = Predictor::new(&PredictorConfig {
            entries: Some(0),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.field, "predictor.entries");
        assert!(e.message.contains("at least 1"), "{}", e.message);
        for (cfg, field) in [
            (
                PredictorConfig {
                    initial_confidence: 4,
                    ..Default::default()
                },
                "predictor.initial_confidence",
            ),
            (
                PredictorConfig {
                    tolerance: -0.1,
                    ..Default::default()
                },
                "predictor.tolerance",
            ),
            (
                PredictorConfig {
                    tolerance: f64::NAN,
                    ..Default::default()
                },
                "predictor.tolerance",
            ),
            (
                PredictorConfig {
                    global_history: 0,
                    ..Default::default()
                },
                "predictor.global_history",
            ),
        ] {
            assert_eq!(Predictor::new(&cfg).unwrap_err().field, field);
        }
    }

    #[test]
    fn accuracy_counts_exact_within_and_decisions() {
        // Runs: A=1000 x3 (exact after first), B=100 then 104 (within), then C=5000 unseen.
        let runs = [
            (1u64, 1000u64),
            (1, 1000),
            (1, 1000),
            (2, 100),
            (2, 104),
            (3, 5000),
        ];
        let acc = evaluate(&PredictorConfig::default(), runs, &[500]).unwrap();
        assert_eq!(acc.runs, 6);
        // predictions: 0 (G), 1000, 1000, 1000 (G: mean 1000), 100, 401 (G: (1000+100+104)/3)
        assert_eq!(acc.exact, 2);
        assert_eq!(acc.within, 1);
        assert_eq!(acc.global, 3);
        // decisions at N=500: run1 pred 0 vs 1000 wrong; run2,3 right; run4 pred 1000 vs 100
        // wrong; run5 right; run6 pred 401 vs 5000 wrong.
        assert_eq!(acc.decision_correct, vec![3]);
        assert_eq!(acc.longer_than, vec![4]);
        assert!((acc.exact_fraction() - 2.0 / 6.0).abs() < 1e-12);
    }
}
