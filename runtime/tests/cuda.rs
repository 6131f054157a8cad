//! The CUDA device through the runtime. Without a CUDA driver (or device) opening it
//! is a typed `NoDevice` error and `BestAvailable` falls back; the tests that need a
//! GPU print a `NOT RUN: no CUDA device` line and return when there is none.
//! (Every catalogue op against the reference runs in the root conformance tests.)

#![cfg(feature = "cuda")]

use kernelc_ir::ScalarType;
use kernelc_kernels::spec::{BinaryFn, BinarySpec, OpSpec};
use kernelc_runtime::cache::{encode, DiskCache};
use kernelc_runtime::{Device, DeviceChoice, Runtime, RuntimeError};
use std::path::Path;

mod common;

/// Whether this machine has a CUDA driver library at all.
fn driver_present() -> bool {
    // SAFETY: only tries to open the candidate library names (as the device does).
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// A CUDA runtime with its disk cache at `disk`, or `None` with a NOT RUN line.
fn cuda_runtime(test: &str, disk: DiskCache) -> Option<Runtime> {
    match Device::open(DeviceChoice::Cuda { ordinal: 0 }) {
        Ok(device) => Some(Runtime::with_device(device, disk)),
        Err(e) => {
            println!("NOT RUN: no CUDA device ({test}): {e}");
            None
        }
    }
}

#[test]
fn opening_cuda_without_a_driver_or_device_is_a_typed_error() {
    match Runtime::new(DeviceChoice::Cuda { ordinal: 0 }) {
        Ok(rt) => {
            assert!(driver_present());
            assert_eq!(rt.target_name(), "ptx");
            assert!(
                rt.device_name().contains("CUDA sm_"),
                "{}",
                rt.device_name()
            );
        }
        Err(RuntimeError::NoDevice(message)) => {
            if !driver_present() {
                assert!(message.contains("libcuda"), "{message}");
            }
        }
        Err(other) => panic!("expected NoDevice, got {other:?}"),
    }
    // No machine has this many devices; asking is an error, not a panic.
    match Runtime::new(DeviceChoice::Cuda { ordinal: 4096 }) {
        Err(RuntimeError::NoDevice(message)) => assert!(!message.is_empty()),
        Err(other) => panic!("expected NoDevice, got {other:?}"),
        Ok(rt) => panic!("opened a 4097th CUDA device: {}", rt.device_name()),
    }
}

#[test]
fn best_available_falls_back_to_the_cpu_without_cuda() {
    let rt = Runtime::new(DeviceChoice::BestAvailable).expect("some device is always there");
    let cuda_works = Device::open(DeviceChoice::Cuda { ordinal: 0 }).is_ok();
    if cuda_works {
        assert_eq!(rt.target_name(), "ptx");
    } else {
        // This test binary is built without `wgpu`, so the CPU is what remains.
        #[cfg(not(feature = "wgpu"))]
        assert_eq!(rt.target_name(), "cpu");
    }
    let a = rt.tensor(&[3], &[1.0f32, 2.0, 3.0]).unwrap();
    let y = rt.add(&a, &a).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
}

#[test]
fn uploads_and_downloads_round_trip() {
    let Some(rt) = cuda_runtime("uploads_and_downloads_round_trip", DiskCache::off()) else {
        return;
    };
    // Up to past the pinned staging buffer's 8 MiB (chunked transfers), and narrow
    // types and bool (bytes, any length).
    for n in [0usize, 1, 3, 64, 257, 100_003, 5_000_011] {
        let f: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
        assert_eq!(rt.tensor(&[n], &f).unwrap().to_vec::<f32>().unwrap(), f);
        let h: Vec<half::f16> = (0..n).map(|i| half::f16::from_f32(i as f32)).collect();
        assert_eq!(
            rt.tensor(&[n], &h).unwrap().to_vec::<half::f16>().unwrap(),
            h
        );
        let l: Vec<i64> = (0..n as i64).map(|i| i * -1_000_000_007).collect();
        assert_eq!(rt.tensor(&[n], &l).unwrap().to_vec::<i64>().unwrap(), l);
        let z = rt.zeros(&[n], ScalarType::F64).unwrap();
        assert_eq!(z.to_vec::<f64>().unwrap(), vec![0.0; n]);
        let b: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
        assert_eq!(rt.tensor(&[n], &b).unwrap().to_vec::<u8>().unwrap(), b);
        let flags: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
        assert_eq!(
            rt.tensor(&[n], &flags).unwrap().to_vec::<bool>().unwrap(),
            flags
        );
    }
    // Freed buffers are reused by size, and a reused one shows only its new contents.
    let first = rt.tensor(&[1000], &vec![1.0f32; 1000]).unwrap();
    drop(first);
    let again = rt.zeros(&[1000], ScalarType::F32).unwrap();
    assert_eq!(again.to_vec::<f32>().unwrap(), vec![0.0; 1000]);
    assert!(rt.stats().pool_reuses > 0, "{:?}", rt.stats());
}

#[test]
fn matmul_matches_the_cpu() {
    let Some(rt) = cuda_runtime("matmul_matches_the_cpu", DiskCache::off()) else {
        return;
    };
    let cpu = Runtime::with_device(Device::cpu(), DiskCache::off());
    for (m, k, n) in [(1, 1, 1), (7, 13, 5), (64, 64, 64), (129, 70, 257)] {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 24.0)
            .collect();
        let gpu_out = rt
            .matmul(
                &rt.tensor(&[m, k], &a).unwrap(),
                &rt.tensor(&[k, n], &b).unwrap(),
            )
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let cpu_out = cpu
            .matmul(
                &cpu.tensor(&[m, k], &a).unwrap(),
                &cpu.tensor(&[k, n], &b).unwrap(),
            )
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(gpu_out.len(), m * n);
        for (i, (g, c)) in gpu_out.iter().zip(&cpu_out).enumerate() {
            // Both sum k products of magnitude <= 4 in f32, in possibly different orders.
            let tol = 2.0 * k as f32 * 4.0 * f32::EPSILON;
            assert!((g - c).abs() <= tol, "{m}x{k}x{n} [{i}]: gpu {g}, cpu {c}");
        }
    }
}

#[test]
fn an_allocation_past_device_memory_is_a_typed_error() {
    let Some(mut rt) = cuda_runtime(
        "an_allocation_past_device_memory_is_a_typed_error",
        DiskCache::off(),
    ) else {
        return;
    };
    rt.set_max_buffer_bytes(u64::MAX);
    // 256 TiB: more than any GPU has.
    match rt.zeros(&[1 << 46], ScalarType::F32) {
        Err(RuntimeError::OutOfMemory { bytes, .. }) => assert_eq!(bytes, 1 << 48),
        Err(other) => panic!("expected OutOfMemory, got {other:?}"),
        Ok(_) => panic!("allocated 256 TiB"),
    }
    // The device still works.
    let a = rt.tensor(&[2], &[1i32, 2]).unwrap();
    assert_eq!(rt.add(&a, &a).unwrap().to_vec::<i32>().unwrap(), vec![2, 4]);
}

fn add_spec(n: usize) -> OpSpec {
    OpSpec::Binary(BinarySpec {
        func: BinaryFn::Add,
        dtype: ScalarType::F32,
        lhs: vec![n],
        rhs: vec![n],
        out_dtype: None,
    })
}

/// Runs `a + a` for `a = [0, 1, ..]` and checks the sum.
fn check_add(rt: &Runtime, n: usize) {
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let t = rt.tensor(&[n], &a).unwrap();
    let out = rt.run(&add_spec(n), &[&t, &t]).unwrap();
    let want: Vec<f32> = a.iter().map(|v| v * 2.0).collect();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
}

fn ptx_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ptx_is_reused_from_disk_and_a_rejected_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let test = "ptx_is_reused_from_disk_and_a_rejected_file_is_replaced";
    let Some(first) = cuda_runtime(test, DiskCache::at(dir.path())) else {
        return;
    };
    check_add(&first, 1000);
    assert!(first.stats().compiles > 0);
    let files = ptx_files(dir.path());
    assert!(!files.is_empty(), "the PTX was stored");

    let second = cuda_runtime(test, DiskCache::at(dir.path())).unwrap();
    check_add(&second, 1000);
    let s = second.stats();
    assert_eq!((s.compiles, s.disk_hits), (0, files.len() as u64), "{s:?}");

    // Intact as a cache file (good checksum) but not PTX the driver takes: rebuilt.
    for f in &files {
        std::fs::write(f, encode(b".version 1.0\n.target nonsense\n")).unwrap();
    }
    let third = cuda_runtime(test, DiskCache::at(dir.path())).unwrap();
    check_add(&third, 1000);
    let s = third.stats();
    assert_eq!((s.compiles, s.disk_hits), (files.len() as u64, 0), "{s:?}");
    for f in &files {
        let text = std::fs::read(f).unwrap();
        assert!(
            !text.ends_with(b"nonsense\n"),
            "{} was replaced",
            f.display()
        );
    }
}

#[test]
fn sixteen_threads_share_one_device() {
    let Some(rt) = cuda_runtime("sixteen_threads_share_one_device", DiskCache::off()) else {
        return;
    };
    let barrier = std::sync::Barrier::new(16);
    std::thread::scope(|s| {
        for t in 0..16 {
            let (rt, barrier) = (&rt, &barrier);
            s.spawn(move || {
                barrier.wait();
                // Eight threads share a shape (one compile, single flight), eight differ.
                let n = if t % 2 == 0 { 4096 } else { 100 + t };
                for _ in 0..10 {
                    check_add(rt, n);
                }
            });
        }
    });
}

#[test]
fn float_remainder_is_exact() {
    let Some(rt) = cuda_runtime("float_remainder_is_exact", DiskCache::off()) else {
        return;
    };
    common::assert_float_rem_is_exact(&rt, &rt.device_name());
}
