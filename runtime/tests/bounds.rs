//! The runtime's caches stay within their bounds: the in-memory plan and kernel caches
//! (least recently used dropped first, counted in `Stats`), the disk cache (least
//! recently used files deleted), and the environment variables that set them.

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::{OpSpec, UnaryFn, UnarySpec};
use kernelc_runtime::cache::DiskCache;
use kernelc_runtime::{Device, DeviceChoice, Runtime, RuntimeError, RuntimeOptions};
use std::num::NonZeroUsize;

fn neg(n: usize) -> OpSpec {
    OpSpec::Unary(UnarySpec {
        func: UnaryFn::Neg,
        dtype: ScalarType::F32,
        shape: vec![n],
    })
}

/// Runs `-x` on `n` elements and checks every result.
fn run_neg(rt: &Runtime, n: usize) {
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let t = rt.tensor(&[n], &x).unwrap();
    let y = rt.run(&neg(n), &[&t]).unwrap()[0].to_vec::<f32>().unwrap();
    assert!(
        y.iter().zip(&x).all(|(y, x)| *y == -*x),
        "-x wrong for {n} elements"
    );
}

fn bounded(entries: usize) -> RuntimeOptions {
    let n = NonZeroUsize::new(entries).expect("non-zero");
    RuntimeOptions {
        plan_cache_entries: n,
        kernel_cache_entries: n,
        ..RuntimeOptions::default()
    }
}

#[test]
fn ten_thousand_shapes_keep_the_memory_caches_at_their_bound() {
    let dir = tempfile::tempdir().unwrap();
    let bound = 64;
    let shapes = 10_000;
    let rt = Runtime::with_options(Device::cpu(), DiskCache::at(dir.path()), bounded(bound));
    for n in 1..=shapes {
        run_neg(&rt, n);
        let s = rt.stats();
        assert!(s.plans_in_memory <= bound as u64 && s.kernels_in_memory <= bound as u64);
    }
    let s = rt.stats();
    assert_eq!(s.compiles, shapes as u64, "one kernel per shape");
    assert_eq!(s.plans_in_memory, bound as u64);
    assert_eq!(s.kernels_in_memory, bound as u64);
    assert_eq!(s.plan_evictions, (shapes - bound) as u64);
    assert_eq!(s.kernel_evictions, (shapes - bound) as u64);

    // The most recent shapes are still in memory: no compile, no disk read.
    run_neg(&rt, shapes);
    assert_eq!(rt.stats().compiles, s.compiles);
    assert_eq!(rt.stats().disk_hits, s.disk_hits);

    // An evicted shape comes back from the disk cache, correct.
    run_neg(&rt, 1);
    assert_eq!(rt.stats().disk_hits, s.disk_hits + 1);
    assert_eq!(rt.stats().compiles, s.compiles);

    // Without a disk cache it is compiled again, correct.
    let rt = Runtime::with_options(Device::cpu(), DiskCache::off(), bounded(2));
    for n in [5, 6, 7, 5] {
        run_neg(&rt, n);
    }
    assert_eq!(
        rt.stats().compiles,
        4,
        "5 was evicted by 7 and compiled again"
    );
    assert_eq!(rt.stats().kernel_evictions, 2);
}

#[test]
fn the_disk_cache_stays_under_its_bound_and_clears() {
    let dir = tempfile::tempdir().unwrap();
    // Well under 200 kernels' artifacts (a few hundred bytes each), well over one.
    let max = 12 * 1024;
    let disk = DiskCache::at(dir.path()).with_max_bytes(max);
    let rt = Runtime::with_options(Device::cpu(), disk, bounded(4));
    for n in 1..=200 {
        run_neg(&rt, n);
        assert!(
            rt.disk_cache().size_bytes() <= max,
            "{} bytes on disk after {n} shapes",
            rt.disk_cache().size_bytes()
        );
    }
    assert!(rt.stats().disk_evictions > 0, "{:?}", rt.stats());
    // A file of another name in the directory is not the cache's to delete.
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let removed = rt.clear_disk_cache().unwrap();
    assert!(removed > 0);
    assert_eq!(rt.disk_cache().size_bytes(), 0);
    assert!(dir.path().join("notes.txt").exists());
    // Kernels in memory still run; new ones compile and are stored again.
    run_neg(&rt, 200);
    run_neg(&rt, 201);
    assert!(rt.disk_cache().size_bytes() > 0);
    rt.clear_memory_caches();
    assert_eq!(rt.stats().plans_in_memory, 0);
    assert_eq!(rt.stats().kernels_in_memory, 0);
    let before = rt.stats().disk_hits;
    run_neg(&rt, 201);
    assert_eq!(rt.stats().disk_hits, before + 1);
}

/// The environment variables, set and checked one after another in this one test
/// (no other test of this binary reads them).
#[test]
fn environment_variables_set_the_bounds_and_bad_values_are_named() {
    let vars = [
        "KERNELC_PLAN_CACHE",
        "KERNELC_KERNEL_CACHE",
        "KERNELC_CACHE_MAX_BYTES",
        "KERNELC_TUNING_BUDGET",
    ];
    let set = |var: &str, value: Option<&str>| match value {
        Some(v) => std::env::set_var(var, v),
        None => std::env::remove_var(var),
    };
    for (var, bad) in [
        ("KERNELC_PLAN_CACHE", "0"),
        ("KERNELC_PLAN_CACHE", "lots"),
        ("KERNELC_KERNEL_CACHE", "-3"),
        ("KERNELC_CACHE_MAX_BYTES", "12Q"),
        ("KERNELC_CACHE_MAX_BYTES", ""),
        ("KERNELC_TUNING_BUDGET", "0"),
        ("KERNELC_TUNING_BUDGET", "1s"),
    ] {
        set(var, Some(bad));
        match Runtime::new(DeviceChoice::Cpu) {
            Err(RuntimeError::BadArgument(m)) => assert!(m.contains(var), "{m}"),
            Err(e) => panic!("{var}={bad}: {e}"),
            Ok(_) => panic!("{var}={bad} was accepted"),
        }
        // The infallible constructor falls back to the defaults.
        run_neg(&Runtime::cpu(), 3);
        set(var, None);
    }
    set("KERNELC_PLAN_CACHE", Some("7"));
    set("KERNELC_KERNEL_CACHE", Some(" 9 "));
    set("KERNELC_CACHE_MAX_BYTES", Some("2M"));
    set("KERNELC_TUNING_BUDGET", Some("2500"));
    let options = RuntimeOptions::from_env().unwrap();
    assert_eq!(
        options.tuning_budget,
        std::time::Duration::from_millis(2500)
    );
    assert_eq!(options.plan_cache_entries.get(), 7);
    assert_eq!(options.kernel_cache_entries.get(), 9);
    assert_eq!(DiskCache::from_env().unwrap().max_bytes(), 2 << 20);
    for var in vars {
        set(var, None);
    }
    assert_eq!(
        RuntimeOptions::from_env().unwrap(),
        RuntimeOptions::default()
    );
}
