//! The op fuzzer's driver, shared by the fuzz tests of every crate (feature `fuzz`,
//! which brings in proptest): random cases ([`case_from_choices`]) checked on a set of
//! executors against the reference under the tolerance table, shrunk by proptest to a
//! minimal case on failure and saved as replayable JSON.
//!
//! Environment:
//! * `KERNELC_FUZZ_CASES`: cases per run (default: a CI budget of a few minutes).
//! * `KERNELC_FUZZ_SEED`: the seed (printed by every run; random when unset).
//! * `KERNELC_FUZZ_REPLAY=<file.json>`: run one saved case instead.
//! * `KERNELC_FUZZ_SURVEY`: run every case without stopping or shrinking, and print
//!   each failure grouped by op kind and input mode (for triage).
//! * `KERNELC_FUZZ_MEASURE`: print each table row's worst error per executor over the
//!   conformance table and the fuzz cases ([`measure`]).

use super::{case_data, case_from_choices, FuzzCase, FuzzLimits, InputMode};
use crate::conformance::{check_data, Executor};
use crate::lower::TargetCaps;
use crate::spec::OpKind;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// An executor and the caps that say which dtypes it has.
pub type Target = (Box<dyn Executor>, TargetCaps);

/// Cases per test on CI unless `KERNELC_FUZZ_CASES` says otherwise.
const CI_CASES: u32 = 1000;

fn cases_per_test() -> u32 {
    std::env::var("KERNELC_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_CASES)
}

/// The seed from `KERNELC_FUZZ_SEED`, or a fresh one.
fn seed() -> u64 {
    std::env::var("KERNELC_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x5eed, |d| d.as_nanos() as u64)
        })
}

/// Whether `caps` can run `case`: it has the case's dtypes, and IEEE special values
/// where the case feeds them in (a target that may fold `x·0` to 0 is held to the
/// finite semantics only).
pub fn runs_on(caps: &TargetCaps, case: &FuzzCase) -> bool {
    let spec = &case.spec;
    let sigs = spec.inputs().into_iter().chain(spec.outputs());
    sigs.into_iter().all(|s| caps.supports(s.dtype))
        && (caps.ieee_specials || !case.may_meet_specials())
        && (caps.keeps_subnormals || !case.may_meet_subnormals())
}

/// Runs `case` on every target that [`runs_on`] it; `Err` names the first failure.
/// Returns how many targets ran it.
pub fn check_case(targets: &[Target], case: &FuzzCase) -> Result<usize, String> {
    let data = case_data(case);
    let spec = &case.spec;
    let mut ran = 0;
    for (exec, caps) in targets {
        if !runs_on(caps, case) {
            continue;
        }
        check_data(exec.as_ref(), spec, &data).map_err(|f| format!("{}: {f}", exec.name()))?;
        ran += 1;
    }
    Ok(ran)
}

/// Prints what the fuzzer does not hold each target to, and why.
fn say_not_run(test: &str, targets: &[Target]) {
    for (exec, caps) in targets {
        if !caps.keeps_subnormals {
            println!(
                "{test}: NOT RUN: wide and special-value cases, and tiny attributes, on {}: \
                 it may flush subnormals to zero (TargetCaps::keeps_subnormals)",
                exec.name()
            );
        }
        if !caps.ieee_specials {
            println!(
                "{test}: NOT RUN: special-value cases, and infinite or huge attributes, on {}: \
                 it does not keep NaN, ±∞ and −0 through every operation \
                 (TargetCaps::ieee_specials)",
                exec.name()
            );
        }
    }
}

/// The generator every mode draws from, fixed by `seed`.
fn seeded_rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// A case from a random choice stream of the length proptest draws (0 to 23).
fn random_case(rng: &mut TestRng, limits: &FuzzLimits) -> FuzzCase {
    let n = (rng.next_u32() % 24) as usize;
    let choices: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    case_from_choices(&choices, limits)
}

/// Where failing cases are written.
fn failure_path(test: &str, case: &FuzzCase) -> std::path::PathBuf {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(case)
        .unwrap_or_default()
        .hash(&mut hasher);
    std::env::temp_dir()
        .join("kernelc-fuzz-failures")
        .join(format!("{test}-{:016x}.json", hasher.finish()))
}

/// Fuzzes `targets` (or replays `KERNELC_FUZZ_REPLAY`), printing the seed and the
/// cases per op kind; panics with the minimal failing case and where it was saved.
pub fn fuzz(test: &str, targets: Vec<Target>) {
    if targets.is_empty() {
        return;
    }
    if let Ok(file) = std::env::var("KERNELC_FUZZ_REPLAY") {
        let text = std::fs::read_to_string(&file).expect("read the replay file");
        let case: FuzzCase = serde_json::from_str(&text).expect("a saved fuzz case");
        match check_case(&targets, &case) {
            Ok(n) => println!("{test}: replay of {file} passes on {n} executors"),
            Err(e) => panic!("{test}: replay of {file} fails: {e}"),
        }
        return;
    }
    if std::env::var_os("KERNELC_FUZZ_MEASURE").is_some() {
        return measure(test, &targets);
    }
    if std::env::var_os("KERNELC_FUZZ_SURVEY").is_some() {
        return survey(test, &targets);
    }
    let seed = seed();
    let cases = cases_per_test();
    println!("{test}: {cases} cases, KERNELC_FUZZ_SEED={seed}");
    say_not_run(test, &targets);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, seeded_rng(seed));
    let limits = FuzzLimits::default();
    let counts: Mutex<BTreeMap<OpKind, (u32, u32)>> = Mutex::new(BTreeMap::new());
    let result = runner.run(&proptest::collection::vec(any::<u32>(), 0..24), |choices| {
        let case = case_from_choices(&choices, &limits);
        let ran = check_case(&targets, &case).map_err(|e| {
            TestCaseError::fail(format!(
                "{e}\ncase: {}",
                serde_json::to_string(&case).unwrap_or_default()
            ))
        })?;
        let mut counts = counts.lock().expect("counts");
        let entry = counts.entry(case.spec.kind()).or_default();
        entry.0 += 1;
        entry.1 += ran as u32;
        Ok(())
    });
    let counts = counts.into_inner().expect("counts");
    let line: Vec<String> = counts
        .iter()
        .map(|(k, (cases, runs))| format!("{} {cases}/{runs}", k.name()))
        .collect();
    println!(
        "{test}: cases/executor runs per op kind: {}",
        line.join(", ")
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, choices)) => {
            let case = case_from_choices(&choices, &limits);
            let path = failure_path(test, &case);
            let saved = path.parent().map(std::fs::create_dir_all).and_then(|_| {
                std::fs::write(&path, serde_json::to_string_pretty(&case).ok()?).ok()
            });
            panic!(
                "{test} (KERNELC_FUZZ_SEED={seed}) found a failure, shrunk to:\n{reason}\n\
                 replay: KERNELC_FUZZ_REPLAY={} cargo test {test}{}",
                path.display(),
                if saved.is_some() { "" } else { " (not saved)" }
            );
        }
        Err(TestError::Abort(reason)) => panic!("{test}: aborted: {reason}"),
    }
}

/// `KERNELC_FUZZ_SURVEY`: runs the cases without stopping or shrinking and prints
/// every failure, grouped by op kind and input mode (for triage), then fails if any.
fn survey(test: &str, targets: &[Target]) {
    let seed = seed();
    say_not_run(test, targets);
    let limits = FuzzLimits::default();
    let mut rng = seeded_rng(seed);
    let mut failures: BTreeMap<String, (u32, String)> = BTreeMap::new();
    let cases = cases_per_test();
    for _ in 0..cases {
        let case = random_case(&mut rng, &limits);
        if let Err(e) = check_case(targets, &case) {
            let key = format!("{} {:?}", case.spec.name(), case.mode);
            let entry = failures.entry(key).or_insert((0, String::new()));
            entry.0 += 1;
            if entry.1.is_empty() {
                entry.1 = format!(
                    "{e}\n    {}",
                    serde_json::to_string(&case).unwrap_or_default()
                );
            }
        }
    }
    for (key, (n, example)) in &failures {
        println!("SURVEY {test} {key}: {n} failures; e.g. {example}");
    }
    assert!(
        failures.is_empty(),
        "{test}: {} failing groups of {cases} cases (seed {seed})",
        failures.len()
    );
}

/// `KERNELC_FUZZ_MEASURE`: runs the conformance table and `KERNELC_FUZZ_CASES` fuzz
/// cases on `targets` and prints, per executor and table row (op, function, output
/// dtype), the worst error as a fraction of the row's bound past the output rounding
/// (at most 1 meets the table)
/// ([`measure_data`](crate::conformance::measure_data)) and how many cases ran: the
/// numbers behind docs/semantics.md's "worst error" column. Never fails; a run that
/// errors or a NaN/∞ mismatch is counted apart.
pub fn measure(test: &str, targets: &[Target]) {
    use crate::conformance::{cases, measure_data};
    let seed = seed();
    say_not_run(test, targets);
    let limits = FuzzLimits::default();
    let mut rng = seeded_rng(seed);
    let mut all: Vec<FuzzCase> = cases::all()
        .into_iter()
        .map(|spec| FuzzCase {
            spec,
            seed: 0x5eed,
            mode: InputMode::Domain,
        })
        .collect();
    for _ in 0..cases_per_test() {
        all.push(random_case(&mut rng, &limits));
    }
    // (executor, row) -> (worst, cases, failed runs, non-finite mismatches)
    let mut rows: BTreeMap<(String, String), (f64, u32, u32, u32)> = BTreeMap::new();
    for case in &all {
        let data = case_data(case);
        let spec = &case.spec;
        let dtype = spec.outputs().first().map(|s| s.dtype);
        let row = format!(
            "{} {}",
            spec.name(),
            dtype.map_or("-".into(), |d| d.to_string())
        );
        for (exec, caps) in targets {
            if !runs_on(caps, case) {
                continue;
            }
            let entry = rows.entry((exec.name(), row.clone())).or_default();
            entry.1 += 1;
            // As a fraction of the row's `k`: at most 1 meets the table.
            let k = crate::tolerance::tolerance(spec).ulps.max(1.0);
            match measure_data(exec.as_ref(), spec, &data) {
                Ok(u) if u.is_finite() => entry.0 = entry.0.max(u / k),
                Ok(_) => entry.3 += 1,
                Err(_) => entry.2 += 1,
            }
        }
    }
    for ((exec, row), (worst, n, failed, nonfinite)) in &rows {
        println!("MEASURE {test}\t{exec}\t{row}\t{worst:.3}\t{n}\t{failed}\t{nonfinite}");
    }
}
