//! The op fuzzer over runtimes, as `kernelc fuzz` runs it: random cases from a seed,
//! each on every target that can hold it to the table (`driver::runs_on`), a row per
//! op kind and target with its cases, its worst error as a share of the bound, and
//! its failures (each saved as a replayable case).

use kernelc_kernels::conformance::check_and_measure;
use kernelc_kernels::fuzz::driver::runs_on;
use kernelc_kernels::fuzz::{case_among, case_data, FuzzCase, FuzzLimits};
use kernelc_kernels::lower::TargetCaps;
use kernelc_kernels::spec::OpKind;
use kernelc_kernels::tolerance::tolerance;
use kernelc_runtime::Runtime;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One row of the table: an op kind on one target.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct OpRow {
    pub op: String,
    pub target: String,
    pub cases: u64,
    /// The worst error as a share of the row's bound (≤ 1 meets the table; 0 for
    /// exact rows).
    pub worst: f64,
    pub failures: u64,
    /// The first failure: what failed, and the case as JSON (replayable).
    pub first_failure: Option<OpFailure>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct OpFailure {
    pub message: String,
    pub case: FuzzCase,
}

/// A runtime fuzzed under the name the user gave it.
pub struct Target<'a> {
    pub name: String,
    pub runtime: &'a Runtime,
}

/// The running tally of an op-fuzz run.
#[derive(Default)]
pub struct OpTally {
    rows: BTreeMap<(String, String), OpRow>,
    /// Cases drawn so far.
    pub cases: u64,
}

impl OpTally {
    pub fn rows(&self) -> Vec<OpRow> {
        self.rows.values().cloned().collect()
    }

    pub fn failures(&self) -> u64 {
        self.rows.values().map(|r| r.failures).sum()
    }

    /// Runs `case` on every target that can hold it to the table.
    pub fn run(&mut self, targets: &[Target<'_>], case: &FuzzCase) {
        self.cases += 1;
        let data = case_data(case);
        let bound = tolerance(&case.spec).ulps.max(1.0);
        for target in targets {
            let caps: &TargetCaps = target.runtime.caps();
            if !runs_on(caps, case) {
                continue;
            }
            let key = (case.spec.kind().name().to_string(), target.name.clone());
            let row = self.rows.entry(key).or_insert_with(|| OpRow {
                op: case.spec.kind().name().to_string(),
                target: target.name.clone(),
                ..OpRow::default()
            });
            row.cases += 1;
            match check_and_measure(target.runtime, &case.spec, &data) {
                Ok(units) => row.worst = row.worst.max(units / bound),
                Err(failure) => {
                    row.failures += 1;
                    if row.first_failure.is_none() {
                        row.first_failure = Some(OpFailure {
                            message: failure.to_string(),
                            case: case.clone(),
                        });
                    }
                }
            }
        }
    }
}

/// Draws op cases from `seed`: `next()` gives the next case of one of `kinds` (all
/// kinds when empty).
pub struct OpCases {
    rng: proptest::test_runner::TestRng,
    kinds: Vec<OpKind>,
    limits: FuzzLimits,
}

impl OpCases {
    pub fn new(seed: u64, kinds: Vec<OpKind>) -> OpCases {
        OpCases {
            rng: super::seeded_rng(seed),
            kinds,
            limits: FuzzLimits::default(),
        }
    }

    /// The next case: a choice stream of the length the proptest driver draws (0 to
    /// 23 words).
    pub fn next_case(&mut self) -> FuzzCase {
        let n = (self.rng.next_u32() % 24) as usize;
        let choices: Vec<u32> = (0..n).map(|_| self.rng.next_u32()).collect();
        case_among(&self.kinds, &choices, &self.limits)
    }
}
