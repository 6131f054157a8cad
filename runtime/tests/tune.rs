//! Autotuning on the CPU device: the schedules of a large GEMM timed on first use,
//! the choice kept in memory and in the disk cache (a second runtime on the same
//! cache times nothing), applied to every problem of the shape class, ignored when
//! damaged, and skipped when off or for small problems.

use kernelc_ir::ScalarType::F32;
use kernelc_kernels::lower::TargetCaps;
use kernelc_kernels::spec::{GemmSpec, OpSpec};
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::cache::{decode, encode};
use kernelc_runtime::tune::{TuneRecord, TUNE_MIN_MULTIPLY_ADDS};
use kernelc_runtime::{Autotune, Device, Runtime, TuneSource};
use std::path::Path;

fn runtime_at(dir: &Path) -> Runtime {
    Runtime::with_device(Device::cpu(), DiskCache::at(dir))
}

/// A GEMM of exactly the tuning threshold's multiply-adds (512³).
fn large(m: usize, n: usize, k: usize) -> OpSpec {
    OpSpec::Gemm(GemmSpec::new(F32, m, n, k))
}

/// `a · b` for `a` of `m × k` and `b` of `k × n` through `rt`, against an f64 sum.
fn runs_correctly(rt: &Runtime, m: usize, n: usize, k: usize) {
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
    let (ta, tb) = (
        rt.tensor(&[m, k], &a).unwrap(),
        rt.tensor(&[k, n], &b).unwrap(),
    );
    let out = rt.run(&large(m, n, k), &[&ta, &tb]).unwrap();
    let c = out[0].to_vec::<f32>().unwrap();
    for (i, j) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3), (m - 1, 0)] {
        let exact: f64 = (0..k)
            .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
            .sum();
        // Small integers: every partial sum is exact in f32.
        assert_eq!(c[i * n + j] as f64, exact, "C[{i}, {j}]");
    }
}

#[test]
fn the_first_call_of_a_large_gemm_times_its_schedules_and_keeps_the_fastest() {
    assert_eq!(512u64.pow(3), TUNE_MIN_MULTIPLY_ADDS);
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_at(dir.path());
    runs_correctly(&rt, 512, 512, 512);
    let stats = rt.stats();
    assert_eq!(stats.tunings, 1);
    assert!(stats.tuning_micros > 0);

    let report = rt.tune(&large(512, 512, 512)).unwrap().expect("a choice");
    assert_eq!(report.source, TuneSource::Memory);
    let record = &report.record;
    assert!(record.candidates.len() >= 2, "{record:?}");
    assert!(
        record.candidates[0].micros.is_some(),
        "the heuristics' is always timed"
    );
    let fastest = record
        .candidates
        .iter()
        .filter_map(|c| Some((c.micros?, &c.name)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap();
    assert_eq!(&record.chosen, fastest.1);
    // Untimed candidates say why.
    for c in &record.candidates {
        assert_eq!(c.micros.is_none(), c.note.is_some(), "{c:?}");
    }

    // Another problem of the class (sizes rounding to the same powers of two) takes
    // the choice without tuning, and its plan is the chosen schedule's.
    runs_correctly(&rt, 300, 400, 500);
    assert_eq!(rt.stats().tunings, 1);
    let spec = large(300, 400, 500);
    let chosen = TargetCaps {
        schedule: Some(record.chosen.clone()),
        ..rt.caps().clone()
    };
    let expected = kernelc_kernels::lower::lower(&spec.structural(), &chosen).unwrap();
    assert_eq!(rt.plan(&spec).unwrap().launches, expected.launches);
}

#[test]
fn a_second_runtime_on_the_same_disk_cache_times_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let spec = large(512, 512, 512);
    let first = runtime_at(dir.path()).tune(&spec).unwrap().unwrap();
    assert_eq!(first.source, TuneSource::Timed);

    let rt = runtime_at(dir.path());
    let again = rt.tune(&spec).unwrap().unwrap();
    assert_eq!(again.source, TuneSource::Disk);
    assert_eq!(again.record, first.record);
    runs_correctly(&rt, 512, 512, 512);
    assert_eq!(rt.stats().tunings, 0);

    // `retune` times again and replaces the record.
    let retuned = rt.retune(&spec).unwrap().unwrap();
    assert_eq!(retuned.source, TuneSource::Timed);
    assert_eq!(rt.stats().tunings, 1);
}

#[test]
fn a_damaged_tuning_record_is_ignored_and_the_class_tuned_again() {
    let dir = tempfile::tempdir().unwrap();
    let spec = large(512, 512, 512);
    runtime_at(dir.path()).tune(&spec).unwrap().unwrap();
    let cache = DiskCache::at(dir.path());
    let records: Vec<_> = cache
        .entries()
        .into_iter()
        .filter(|e| e.kind == "tune")
        .collect();
    assert_eq!(records.len(), 1, "one record per class and device");
    let path = dir.path().join(format!("{}.tune", records[0].key));
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();

    let rt = runtime_at(dir.path());
    let report = rt.tune(&spec).unwrap().unwrap();
    assert_eq!(report.source, TuneSource::Timed);
    // And a well-formed file holding something else than a record.
    let key = cache
        .entries()
        .into_iter()
        .find(|e| e.kind == "tune")
        .unwrap()
        .key;
    let path = dir.path().join(format!("{key}.tune"));
    std::fs::write(
        &path,
        kernelc_runtime::cache::encode(b"{\"not\": \"a record\"}"),
    )
    .unwrap();
    let report = runtime_at(dir.path()).tune(&spec).unwrap().unwrap();
    assert_eq!(report.source, TuneSource::Timed);
}

#[test]
fn nothing_is_tuned_when_off_or_small() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime_at(dir.path());
    rt.set_autotune(Autotune::Off);
    runs_correctly(&rt, 512, 512, 512);
    assert_eq!(rt.stats().tunings, 0);
    rt.set_autotune(Autotune::On);
    // 511 · 512 · 512 is below the threshold.
    runs_correctly(&rt, 511, 512, 512);
    assert_eq!(rt.stats().tunings, 0);
    // An op without a choice of schedules has nothing to tune.
    let add: OpSpec = serde_json::from_str(
        r#"{"op": "binary", "func": "add", "dtype": "f32", "lhs": [4], "rhs": [4]}"#,
    )
    .unwrap();
    assert!(rt.tune(&add).unwrap().is_none());
    // Asked for explicitly, a small problem is tuned all the same.
    let report = rt.tune(&large(64, 64, 64)).unwrap().unwrap();
    assert_eq!(report.source, TuneSource::Timed);
}

#[test]
fn the_switch_reads_on_and_off() {
    for (text, want) in [
        ("on", Autotune::On),
        ("OFF", Autotune::Off),
        (" 0 ", Autotune::Off),
        ("true", Autotune::On),
    ] {
        assert_eq!(text.parse::<Autotune>().unwrap(), want, "{text}");
    }
    let err = "sometimes".parse::<Autotune>().unwrap_err().to_string();
    assert!(
        err.contains("KERNELC_AUTOTUNE") && err.contains("sometimes"),
        "{err}"
    );
}

/// The record a runtime on `dir` stores for `spec`'s class, and its file.
fn stored(dir: &Path, spec: &OpSpec) -> (TuneRecord, std::path::PathBuf) {
    runtime_at(dir).tune(spec).unwrap().unwrap();
    let key = DiskCache::at(dir)
        .entries()
        .into_iter()
        .find(|e| e.kind == "tune")
        .expect("a tuning record")
        .key;
    let path = dir.join(format!("{key}.tune"));
    let bytes = std::fs::read(&path).unwrap();
    let payload = decode(&bytes).unwrap().to_vec();
    (serde_json::from_slice(&payload).unwrap(), path)
}

/// Writes `record` as the stored choice at `path`.
fn store(path: &Path, record: &TuneRecord) {
    std::fs::write(path, encode(&serde_json::to_vec(record).unwrap())).unwrap();
}

#[test]
fn a_stored_choice_is_taken_and_one_not_offered_leaves_the_heuristics() {
    let dir = tempfile::tempdir().unwrap();
    let spec = large(512, 512, 512);
    let (mut record, path) = stored(dir.path(), &spec);
    let caps = runtime_at(dir.path()).caps().clone();
    let heuristics = kernelc_kernels::lower::lower(&spec.structural(), &caps).unwrap();
    let choices = heuristics.tunable.clone().unwrap().choices;
    // Another schedule than the heuristics' as the stored choice: every problem of
    // the class takes it, and computes correctly.
    record.chosen = choices[1].clone();
    store(&path, &record);
    let rt = runtime_at(dir.path());
    let chosen = TargetCaps {
        schedule: Some(choices[1].clone()),
        ..caps.clone()
    };
    let expected = kernelc_kernels::lower::lower(&spec.structural(), &chosen).unwrap();
    assert_eq!(rt.plan(&spec).unwrap().launches, expected.launches);
    assert_ne!(expected.launches, heuristics.launches);
    runs_correctly(&rt, 512, 512, 512);
    assert_eq!(rt.stats().tunings, 0);
    // A name lowering does not offer: the heuristics' plan, nothing tuned again.
    record.chosen = "simt 1x1x1 1x1 of 1x1".into();
    store(&path, &record);
    let rt = runtime_at(dir.path());
    assert_eq!(rt.plan(&spec).unwrap().launches, heuristics.launches);
    runs_correctly(&rt, 512, 512, 512);
    assert_eq!(rt.stats().tunings, 0);
    // A record of another class under this class's key is not trusted.
    record.class = "gemm of another class".into();
    store(&path, &record);
    let rt = runtime_at(dir.path());
    runs_correctly(&rt, 512, 512, 512);
    assert_eq!(rt.stats().tunings, 1);
}

/// The budget bounds what is timed: with none left after the heuristics' schedule,
/// only it is timed (the others say why); with plenty, every schedule is.
#[test]
fn the_tuning_budget_bounds_what_is_timed() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime_at(dir.path());
    rt.set_tuning_budget(Duration::from_nanos(1));
    assert_eq!(rt.tuning_budget(), Duration::from_nanos(1));
    let record = rt
        .tune(&large(512, 512, 512))
        .unwrap()
        .expect("a choice")
        .record;
    assert!(record.candidates.len() >= 2, "{record:?}");
    assert!(record.candidates[0].micros.is_some());
    for c in &record.candidates[1..] {
        assert!(c.micros.is_none(), "{c:?}");
        assert!(
            c.note.as_deref().is_some_and(|n| n.contains("budget")),
            "{c:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime_at(dir.path());
    rt.set_tuning_budget(Duration::from_secs(600));
    let record = rt
        .tune(&large(512, 512, 512))
        .unwrap()
        .expect("a choice")
        .record;
    assert!(
        record.candidates.iter().all(|c| c.micros.is_some()),
        "{record:?}"
    );
}
