//! The kernel cache through the runtime: memory hits, disk reuse across runtimes,
//! damaged files, single flight under contention, what the key depends on, and the
//! environment switches of the disk cache.

use kernelc_ir::{stable_hash, ScalarType};
use kernelc_kernels::spec::{BinaryFn, BinarySpec, OpSpec, SoftmaxSpec};
use kernelc_runtime::cache::{decode, encode, CacheKey, DiskCache};
use kernelc_runtime::{CpuTier, Device, Runtime, Tensor};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Barrier, Mutex};

fn runtime_at(dir: &Path) -> Runtime {
    Runtime::with_device(Device::cpu(), DiskCache::at(dir))
}

fn add_spec(dtype: ScalarType, shape: &[usize]) -> OpSpec {
    OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype,
        lhs: shape.to_vec(),
        rhs: shape.to_vec(),
        out_dtype: None,
    })
}

fn softmax_spec() -> OpSpec {
    OpSpec::Softmax(SoftmaxSpec {
        dtype: ScalarType::F32,
        shape: vec![3, 5],
        axis: 1,
        log: false,
    })
}

/// Distinct kernels (by stable hash) in the runtime's plan of `spec`, and its launches.
fn kernels_and_launches(rt: &Runtime, spec: &OpSpec) -> (u64, u64) {
    let plan = rt.plan(spec).unwrap();
    let distinct: HashSet<[u8; 32]> = plan
        .launches
        .iter()
        .map(|l| *stable_hash(&l.kernel).as_bytes())
        .collect();
    (distinct.len() as u64, plan.launches.len() as u64)
}

fn softmax_input(rt: &Runtime) -> (Tensor, Vec<f32>) {
    let x: Vec<f32> = (0..15).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    (rt.tensor(&[3, 5], &x).unwrap(), x)
}

fn softmax_reference(x: &[f32]) -> Vec<f32> {
    x.chunks(5)
        .flat_map(|row| {
            let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let exps: Vec<f64> = row.iter().map(|&v| ((v - max) as f64).exp()).collect();
            let sum: f64 = exps.iter().sum();
            exps.into_iter().map(move |e| (e / sum) as f32)
        })
        .collect()
}

/// Runs softmax on `rt` and checks the numbers.
fn run_softmax_checked(rt: &Runtime) {
    let (x, host) = softmax_input(rt);
    let y = rt.softmax(&x, -1).unwrap().to_vec::<f32>().unwrap();
    for (got, want) in y.iter().zip(softmax_reference(&host)) {
        assert!((got - want).abs() <= 1e-5, "{got} vs {want}");
    }
}

fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Every file in `dir` is a well-formed cache file (and there is at least one).
fn assert_all_intact(dir: &Path) -> Vec<PathBuf> {
    assert_all_intact_of(dir, ".clif-")
}

/// [`assert_all_intact`] for files whose name holds `kind` (the CPU tier's artifacts).
fn assert_all_intact_of(dir: &Path, kind: &str) -> Vec<PathBuf> {
    let files = cache_files(dir);
    assert!(!files.is_empty(), "the disk cache is empty");
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.contains(kind), "unexpected file {name}");
        let bytes = std::fs::read(f).unwrap();
        assert!(decode(&bytes).is_ok(), "{name} is not a valid cache file");
    }
    files
}

#[test]
fn hit_after_miss() {
    let rt = Runtime::with_device(Device::cpu(), DiskCache::off());
    let spec = add_spec(ScalarType::F32, &[4, 8]);
    let (kernels, launches) = kernels_and_launches(&rt, &spec);
    let a = rt.tensor(&[4, 8], &[1.0f32; 32]).unwrap();
    let b = rt.tensor(&[4, 8], &[2.0f32; 32]).unwrap();

    let y = rt.run(&spec, &[&a, &b]).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![3.0; 32]);
    let first = rt.stats();
    assert_eq!(first.compiles, kernels);
    assert_eq!(first.memory_hits, launches - kernels);
    assert_eq!(first.disk_hits, 0);
    assert_eq!(first.launches, launches);

    let y = rt.run(&spec, &[&a, &b]).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![3.0; 32]);
    let second = rt.stats();
    assert_eq!(second.compiles, kernels, "the second run compiled again");
    assert_eq!(second.memory_hits, first.memory_hits + launches);
    assert_eq!(second.disk_hits, 0);
    assert_eq!(second.launches, 2 * launches);
}

#[test]
fn disk_artifact_is_reused_by_another_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let first = runtime_at(dir.path());
    let (kernels, _) = kernels_and_launches(&first, &softmax_spec());
    run_softmax_checked(&first);
    assert_eq!(first.stats().compiles, kernels);
    assert_eq!(first.stats().disk_hits, 0);
    let files = assert_all_intact(dir.path());
    assert_eq!(
        files.len() as u64,
        kernels,
        "one file per compiled function"
    );

    let second = runtime_at(dir.path());
    run_softmax_checked(&second);
    let stats = second.stats();
    assert_eq!(stats.compiles, 0, "the second runtime compiled: {stats:?}");
    assert_eq!(stats.disk_hits, kernels);
    // Nothing new was written.
    assert_eq!(cache_files(dir.path()), files);
}

/// The CPU's LLVM tier keeps one object file per kernel: a second runtime (after the
/// first and its loaded code are gone) loads them and compiles nothing; an object
/// file LLVM cannot load (well-formed cache file, not an object) is compiled again,
/// counted as a compile, and replaced.
#[test]
fn llvm_tier_objects_are_reused_and_unusable_ones_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let llvm_at =
        |dir: &Path| Runtime::with_device(Device::cpu_with_tier(CpuTier::Llvm), DiskCache::at(dir));
    let (kernels, files) = {
        let first = llvm_at(dir.path());
        let (kernels, _) = kernels_and_launches(&first, &softmax_spec());
        run_softmax_checked(&first);
        assert_eq!(
            (first.stats().compiles, first.stats().disk_hits),
            (kernels, 0)
        );
        (kernels, assert_all_intact_of(dir.path(), ".o"))
    };
    assert_eq!(files.len() as u64, kernels, "one object per kernel");
    {
        let second = llvm_at(dir.path());
        run_softmax_checked(&second);
        let stats = second.stats();
        assert_eq!((stats.compiles, stats.disk_hits), (0, kernels), "{stats:?}");
    }
    for f in &files {
        std::fs::write(f, encode(b"not an object file")).unwrap();
    }
    let third = llvm_at(dir.path());
    run_softmax_checked(&third);
    let stats = third.stats();
    assert_eq!((stats.compiles, stats.disk_hits), (kernels, 0), "{stats:?}");
    assert_eq!(assert_all_intact_of(dir.path(), ".o"), files);
}

/// Populates `dir` with softmax's artifacts, damages every file with `damage`, and
/// checks that a fresh runtime detects it, recompiles, gets the right numbers and
/// leaves good files behind that a third runtime reuses.
fn damaged_files_are_recompiled(damage: impl Fn(&Path, usize)) {
    let dir = tempfile::tempdir().unwrap();
    let first = runtime_at(dir.path());
    let (kernels, _) = kernels_and_launches(&first, &softmax_spec());
    run_softmax_checked(&first);
    let files = assert_all_intact(dir.path());
    let originals: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    for (i, f) in files.iter().enumerate() {
        damage(f, i);
        assert_ne!(
            std::fs::read(f).unwrap(),
            originals[i],
            "damage did nothing"
        );
    }

    let second = runtime_at(dir.path());
    run_softmax_checked(&second);
    let stats = second.stats();
    assert_eq!(
        stats.compiles, kernels,
        "damaged files were trusted: {stats:?}"
    );
    assert_eq!(stats.disk_hits, 0);
    // The damaged files were replaced by good ones.
    assert_eq!(assert_all_intact(dir.path()), files);

    let third = runtime_at(dir.path());
    run_softmax_checked(&third);
    assert_eq!(third.stats().compiles, 0);
    assert_eq!(third.stats().disk_hits, kernels);
}

#[test]
fn corrupted_files_are_detected_and_recompiled() {
    damaged_files_are_recompiled(|path, i| {
        let mut bytes = std::fs::read(path).unwrap();
        // Alternate between the payload (checksum mismatch), the magic and the length.
        let at = match i % 3 {
            0 => bytes.len() / 2 + 24,
            1 => 0,
            _ => 8,
        }
        .min(bytes.len() - 1);
        bytes[at] ^= 0xA5;
        std::fs::write(path, bytes).unwrap();
    });
}

#[test]
fn truncated_files_are_detected_and_recompiled() {
    damaged_files_are_recompiled(|path, i| {
        let len = std::fs::metadata(path).unwrap().len();
        // Lose the tail of the payload, or most of the header, or everything.
        let keep = match i % 3 {
            0 => len / 2 + 24,
            1 => 10,
            _ => 0,
        };
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.set_len(keep.min(len - 1)).unwrap();
    });
}

/// A file with a valid header and checksum whose payload Cranelift cannot use (as from
/// another Cranelift version) is recompiled, and counted as a compile, not a disk hit.
#[test]
fn well_formed_but_unusable_artifact_counts_as_a_compile() {
    damaged_files_are_recompiled(|path, _| {
        std::fs::write(path, encode(b"not cranelift's compiled code")).unwrap();
    });
}

#[test]
fn sixteen_threads_compile_each_kernel_once() {
    let rt = Runtime::with_device(Device::cpu(), DiskCache::off());
    let spec = softmax_spec();
    let (kernels, launches) = kernels_and_launches(&rt, &spec);
    let (x, host) = softmax_input(&rt);
    let want = softmax_reference(&host);
    let barrier = Barrier::new(16);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    rt.run(&spec, &[&x]).unwrap()[0].to_vec::<f32>().unwrap()
                })
            })
            .collect();
        for h in handles {
            let y = h.join().unwrap();
            for (got, want) in y.iter().zip(&want) {
                assert!((got - want).abs() <= 1e-5);
            }
        }
    });
    let stats = rt.stats();
    assert_eq!(stats.compiles, kernels, "{stats:?}");
    assert_eq!(stats.disk_hits, 0);
    assert_eq!(stats.launches, 16 * launches);
    // Every other request was served from memory (waiters included).
    assert_eq!(stats.memory_hits, 16 * launches - kernels);
}

#[test]
fn sixteen_runtimes_share_one_disk_cache() {
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| run_softmax_checked(&runtime_at(dir.path())));
        }
    });
    // Concurrent writers never leave a torn or temporary file.
    assert_all_intact(dir.path());
    let rt = runtime_at(dir.path());
    run_softmax_checked(&rt);
    assert_eq!(rt.stats().compiles, 0);
}

#[test]
fn key_changes_with_shape_dtype_and_target() {
    let rt = Runtime::with_device(Device::cpu(), DiskCache::off());
    let specs = [
        add_spec(ScalarType::F32, &[4, 8]),
        add_spec(ScalarType::F32, &[4, 9]),
        add_spec(ScalarType::F32, &[5, 8]),
        add_spec(ScalarType::F64, &[4, 8]),
        add_spec(ScalarType::I32, &[4, 8]),
    ];
    let mut hashes = HashSet::new();
    for spec in &specs {
        for launch in &rt.plan(spec).unwrap().launches {
            assert!(
                hashes.insert(*stable_hash(&launch.kernel).as_bytes()),
                "{spec:?} shares a kernel with another spec"
            );
        }
    }

    // Each spec compiles its own kernels; running them all again compiles nothing.
    let mut expected = 0;
    for spec in &specs {
        let (kernels, _) = kernels_and_launches(&rt, spec);
        expected += kernels;
        let sigs = spec.inputs();
        let inputs: Vec<Tensor> = sigs
            .iter()
            .map(|s| rt.zeros(&s.shape, s.dtype).unwrap())
            .collect();
        let refs: Vec<&Tensor> = inputs.iter().collect();
        rt.run(spec, &refs).unwrap();
        assert_eq!(rt.stats().compiles, expected, "{spec:?}");
    }
    for spec in &specs {
        let inputs: Vec<Tensor> = spec
            .inputs()
            .iter()
            .map(|s| rt.zeros(&s.shape, s.dtype).unwrap())
            .collect();
        let refs: Vec<&Tensor> = inputs.iter().collect();
        rt.run(spec, &refs).unwrap();
    }
    assert_eq!(rt.stats().compiles, expected);

    // The same kernel for another target or other target options is another key.
    let device = Device::cpu();
    assert_eq!(device.target_name(), "cpu");
    let options = device.target_options();
    assert!(options.contains(std::env::consts::ARCH), "{options}");
    let kernel = &rt.plan(&specs[0]).unwrap().launches[0].kernel;
    let hash = stable_hash(kernel);
    let key = CacheKey::new(hash.as_bytes(), "cpu", options);
    assert_eq!(key, CacheKey::new(hash.as_bytes(), "cpu", options));
    assert_ne!(key, CacheKey::new(hash.as_bytes(), "wgsl", options));
    assert_ne!(key, CacheKey::new(hash.as_bytes(), "ptx", options));
    assert_ne!(
        key,
        CacheKey::new(hash.as_bytes(), "cpu", &format!("{options} has_avx512f"))
    );
    let other = &rt.plan(&specs[1]).unwrap().launches[0].kernel;
    assert_ne!(
        key,
        CacheKey::new(stable_hash(other).as_bytes(), "cpu", options)
    );
}

/// Environment variables are process-wide: the tests that touch them hold this lock,
/// and no other test in this file reads them (the others pass a `DiskCache`).
static ENV_LOCK: Mutex<()> = Mutex::new(());

/// Runs `f` with `KERNELC_CACHE` and `KERNELC_CACHE_DIR` set as given (None: unset),
/// restoring the previous values afterwards.
fn with_env(cache: Option<&str>, dir: Option<&Path>, f: impl FnOnce()) {
    let _guard = ENV_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let saved = (
        std::env::var_os("KERNELC_CACHE"),
        std::env::var_os("KERNELC_CACHE_DIR"),
    );
    let set = |name: &str, value: Option<&std::ffi::OsStr>| match value {
        Some(v) => std::env::set_var(name, v),
        None => std::env::remove_var(name),
    };
    set("KERNELC_CACHE", cache.map(std::ffi::OsStr::new));
    set("KERNELC_CACHE_DIR", dir.map(Path::as_os_str));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    set("KERNELC_CACHE", saved.0.as_deref());
    set("KERNELC_CACHE_DIR", saved.1.as_deref());
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn env_cache_off_disables_the_disk_cache() {
    let dir = tempfile::tempdir().unwrap();
    for value in ["off", "OFF", "Off", "0"] {
        with_env(Some(value), Some(dir.path()), || {
            assert_eq!(
                DiskCache::from_env().expect("no bound set").dir(),
                None,
                "KERNELC_CACHE={value}"
            );
            let rt = Runtime::cpu();
            assert_eq!(rt.disk_cache().dir(), None);
            run_softmax_checked(&rt);
        });
    }
    assert!(
        cache_files(dir.path()).is_empty(),
        "a disabled cache wrote files"
    );
}

#[test]
fn env_cache_dir_sets_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    for cache in [None, Some("on"), Some("1"), Some("")] {
        with_env(cache, Some(dir.path()), || {
            assert_eq!(
                DiskCache::from_env().expect("no bound set").dir(),
                Some(dir.path()),
                "{cache:?}"
            );
        });
    }
    with_env(None, Some(dir.path()), || {
        let rt = Runtime::cpu();
        assert_eq!(rt.disk_cache().dir(), Some(dir.path()));
        run_softmax_checked(&rt);
        let rt = Runtime::new(kernelc_runtime::DeviceChoice::Cpu).unwrap();
        assert_eq!(rt.disk_cache().dir(), Some(dir.path()));
        run_softmax_checked(&rt);
        assert_eq!(rt.stats().compiles, 0);
        assert!(rt.stats().disk_hits > 0);
    });
    assert_all_intact(dir.path());
}

#[test]
fn env_default_is_the_user_cache_dir() {
    with_env(None, None, || {
        // The platform's cache directory (`~/.cache/kernelc` on Linux), or off where
        // there is no home directory.
        if let Some(dir) = DiskCache::from_env().expect("no bound set").dir() {
            assert!(dir.ends_with("kernelc"), "{}", dir.display());
        }
    });
}
