//! The wgpu device through the runtime's public API: uploads and downloads, grids past
//! one axis's workgroup limit, GEMM and softmax on every shader path against the CPU,
//! typed errors for oversized allocations and foreign tensors, the disk cache (reuse,
//! and corrupt files rebuilt rather than trusted), and many threads on one runtime.
//!
//! Without a wgpu adapter (not even Mesa's lavapipe) each test prints a
//! `NOT RUN: no wgpu adapter` line and returns; with `CI` set it fails instead, so a
//! CI machine that lost its driver cannot pass silently. (Every catalogue op against
//! the reference runs in the root conformance tests.)

#![cfg(feature = "wgpu")]

use half::f16;
use kernelc_ir::{Scalar, ScalarType};
use kernelc_kernels::spec::{BinaryFn, BinarySpec, GemmSpec, OpSpec, SoftmaxSpec};
use kernelc_kernels::tolerance::{compare, tolerance};
use kernelc_runtime::cache::{decode, encode, DiskCache};
use kernelc_runtime::{Device, DeviceChoice, Runtime, RuntimeError, ShaderPath, WgpuOptions};
use std::path::{Path, PathBuf};

mod common;

/// A wgpu runtime on `shader`'s path with its disk cache at `disk`, or `None` (with a
/// NOT RUN line) when there is no adapter; on CI a missing adapter fails the test.
fn wgpu_runtime(test: &str, shader: ShaderPath, disk: DiskCache) -> Option<Runtime> {
    let choice = DeviceChoice::Wgpu(WgpuOptions {
        shader,
        allow_software: true,
    });
    match Device::open(choice) {
        Ok(device) => Some(Runtime::with_device(device, disk)),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("no wgpu adapter on CI ({test}, {}): {e}", shader.name())
        }
        Err(e) => {
            println!("NOT RUN: no wgpu adapter ({test}, {}): {e}", shader.name());
            None
        }
    }
}

fn cpu_runtime() -> Runtime {
    Runtime::with_device(Device::cpu(), DiskCache::off())
}

/// `n` deterministic values in [-2, 2) (multiples of 2^-22: exact in f32).
fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h =
                (i.wrapping_mul(2654435761) ^ seed.wrapping_mul(40503)).wrapping_mul(2246822519);
            (h >> 10) as f32 / (1u32 << 22) as f32 * 4.0 - 2.0
        })
        .collect()
}

#[test]
fn the_runtime_names_its_wgpu_target() {
    for path in ShaderPath::ALL {
        let Some(rt) = wgpu_runtime("the_runtime_names_its_wgpu_target", path, DiskCache::off())
        else {
            continue;
        };
        assert_eq!(rt.target_name(), path.name());
        assert!(!rt.device_name().is_empty());
        // WGSL has neither f64 nor i64; kernelc's SPIR-V has them where the adapter
        // does, and f64 only with i64 (its math works on the bits as i64).
        if !path.is_spirv() {
            assert!(!rt.caps().f64 && !rt.caps().i64);
        }
        assert!(!rt.caps().f64 || rt.caps().i64);
        assert!(!rt.caps().bf16);
    }
}

#[test]
fn uploads_and_downloads_round_trip() {
    let Some(rt) = wgpu_runtime(
        "uploads_and_downloads_round_trip",
        ShaderPath::Wgsl,
        DiskCache::off(),
    ) else {
        return;
    };
    // Odd sizes give odd byte counts for f16 (3 elements: 6 bytes, not a multiple of
    // wgpu's 4-byte copy alignment).
    for n in [0usize, 1, 3, 1000, 100_003] {
        let seed = |i: usize| (i as u32).wrapping_mul(2654435761).rotate_left(7);
        // Arbitrary bit patterns (NaN payloads, infinities, subnormals) travel as bits.
        let f: Vec<f32> = (0..n).map(|i| f32::from_bits(seed(i))).collect();
        let got = rt.tensor(&[n], &f).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(bits32(&got), bits32(&f), "f32 x {n}");

        // Uploads are bytes: f16 tensors exist whether or not shaders have f16.
        let h: Vec<f16> = (0..n).map(|i| f16::from_bits(seed(i) as u16)).collect();
        let got = rt.tensor(&[n], &h).unwrap().to_vec::<f16>().unwrap();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            h.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "f16 x {n}"
        );

        let i: Vec<i32> = (0..n).map(|i| seed(i) as i32).collect();
        assert_eq!(rt.tensor(&[n], &i).unwrap().to_vec::<i32>().unwrap(), i);
        let u: Vec<u32> = (0..n).map(seed).collect();
        assert_eq!(rt.tensor(&[n], &u).unwrap().to_vec::<u32>().unwrap(), u);

        // Bool elements are bytes, 0 or 1; any nonzero byte reads as true.
        let b: Vec<bool> = (0..n).map(|i| seed(i) % 3 == 0).collect();
        let bytes: Vec<u8> = b
            .iter()
            .map(|&v| if v { 1 + seed(n) as u8 % 200 } else { 0 })
            .collect();
        let t = rt
            .tensor_from_bytes(&[n], ScalarType::Bool, &bytes)
            .unwrap();
        let host = rt.tensor_to_host(&t).unwrap();
        assert_eq!(
            host.data,
            b.iter().map(|&v| Scalar::Bool(v)).collect::<Vec<_>>()
        );
        assert_eq!(rt.tensor(&[n], &b).unwrap().to_vec::<bool>().unwrap(), b);

        // The narrow integers round trip byte for byte at any length (not a
        // multiple of a word: the device pads its allocation, never the data).
        let u8s: Vec<u8> = (0..n).map(|i| seed(i) as u8).collect();
        assert_eq!(rt.tensor(&[n], &u8s).unwrap().to_vec::<u8>().unwrap(), u8s);
        let i16s: Vec<i16> = (0..n).map(|i| seed(i) as i16).collect();
        assert_eq!(
            rt.tensor(&[n], &i16s).unwrap().to_vec::<i16>().unwrap(),
            i16s
        );
        let i64s: Vec<i64> = (0..n).map(|i| (seed(i) as i64) << 31 | i as i64).collect();
        assert_eq!(
            rt.tensor(&[n], &i64s).unwrap().to_vec::<i64>().unwrap(),
            i64s
        );

        for dtype in [
            ScalarType::F32,
            ScalarType::F16,
            ScalarType::I32,
            ScalarType::U32,
            ScalarType::Bool,
            ScalarType::U8,
            ScalarType::I8,
            ScalarType::U16,
            ScalarType::I16,
            ScalarType::I64,
        ] {
            let z = rt.zeros(&[n], dtype).unwrap();
            assert_eq!(z.to_f64().unwrap(), vec![0.0; n], "zeros {dtype} x {n}");
        }
    }
    // Freed buffers are reused, and a reused one shows only its new contents: zeros
    // over ones, and a short f16 upload into a block an earlier longer tensor dirtied.
    drop(rt.tensor(&[1000], &vec![1.0f32; 1000]).unwrap());
    let again = rt.zeros(&[1000], ScalarType::F32).unwrap();
    assert_eq!(again.to_vec::<f32>().unwrap(), vec![0.0; 1000]);
    drop(rt.tensor(&[100], &[f16::ONE; 100]).unwrap());
    let short = [f16::from_f32(-2.5), f16::from_f32(0.125), f16::MAX];
    assert_eq!(
        rt.tensor(&[3], &short).unwrap().to_vec::<f16>().unwrap(),
        short
    );
    assert!(rt.stats().pool_reuses >= 2, "{:?}", rt.stats());
}

fn bits32(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn f16_arithmetic_runs_where_the_adapter_has_it() {
    let Some(rt) = wgpu_runtime(
        "f16_arithmetic_runs_where_the_adapter_has_it",
        ShaderPath::Wgsl,
        DiskCache::off(),
    ) else {
        return;
    };
    if !rt.caps().f16 {
        println!("NOT RUN: {} has no shader f16", rt.device_name());
        return;
    }
    let a: Vec<f16> = (0..1001).map(|i| f16::from_f32(i as f32 * 0.5)).collect();
    let t = rt.tensor(&[a.len()], &a).unwrap();
    let got = rt.add(&t, &t).unwrap().to_vec::<f16>().unwrap();
    let want: Vec<f16> = a.iter().map(|v| f16::from_f32(v.to_f32() * 2.0)).collect();
    assert_eq!(got, want);
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

/// Index of the first element where `got` and `want` differ (bitwise), if any.
fn first_difference(got: &[f32], want: &[f32]) -> Option<usize> {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits())
}

#[test]
fn a_grid_past_one_axis_limit_covers_every_element() {
    let test = "a_grid_past_one_axis_limit_covers_every_element";
    let Some(rt) = wgpu_runtime(test, ShaderPath::Wgsl, DiskCache::off()) else {
        return;
    };
    let limit = rt.caps().max_workgroups_per_dimension;
    // `+ 1000` is a multiple of the vector width (items of 4 lanes, a quarter of the
    // workgroups); `+ 1001` is not, so every element is its own item and the
    // workgroups outnumber one axis's limit: the grid is folded into x and y.
    for n in [65_535 * 256 + 1000, 65_535 * 256 + 1001] {
        let spec = add_spec(n);
        let plan = rt.plan(&spec).unwrap();
        let grid = plan.launches[0].grid;
        assert!(grid.iter().all(|&g| g <= limit), "{grid:?} within {limit}");
        if n % 4 != 0 {
            let workgroups: u64 = grid.iter().map(|&g| u64::from(g)).product();
            assert!(workgroups > 65_535 && grid[1] > 1, "folded grid {grid:?}");
        }
        // a + b is exact and different for (almost) every element, so a misplaced or
        // missing workgroup shows.
        let a: Vec<f32> = (0..n).map(|i| (i % 4096) as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| (i / 4096) as f32 * 4096.0).collect();
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let (ta, tb) = (rt.tensor(&[n], &a).unwrap(), rt.tensor(&[n], &b).unwrap());
        let got = rt.run(&spec, &[&ta, &tb]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        if let Some(i) = first_difference(&got, &want) {
            panic!(
                "n = {n}, grid {grid:?}: [{i}] is {}, want {}",
                got[i], want[i]
            );
        }
    }
}

/// `got` against `reference` (f64) within `spec`'s tolerance.
fn check_within_tolerance(
    what: &str,
    spec: &OpSpec,
    got: &[f32],
    reference: &[f64],
    inputs: &[Vec<f64>],
) {
    let scales = kernelc_kernels::conformance::error_scales(spec, inputs).expect("scales");
    let scales = scales.as_ref().map(|s| s[0].as_slice());
    let got: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
    // The reference rounded to the output dtype, as the comparison expects.
    let want: Vec<f64> = reference.iter().map(|&v| f64::from(v as f32)).collect();
    assert_eq!(got.len(), want.len(), "{what}");
    if let Err(m) = compare(what, &tolerance(spec), ScalarType::F32, &got, &want, scales) {
        panic!("{m}");
    }
}

#[test]
fn matmul_matches_the_cpu_on_every_shader_path() {
    let cpu = cpu_runtime();
    for path in ShaderPath::ALL {
        let test = "matmul_matches_the_cpu_on_every_shader_path";
        let Some(rt) = wgpu_runtime(test, path, DiskCache::off()) else {
            continue;
        };
        for (m, k, n) in [(1, 1, 1), (7, 13, 5), (64, 64, 64), (129, 70, 257)] {
            let (a, b) = (data(m * k, 1), data(k * n, 2));
            let mut reference = vec![0.0; m * n];
            let mut magnitude = vec![0.0; m * n];
            for i in 0..m {
                for j in 0..n {
                    for p in 0..k {
                        let prod = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                        reference[i * n + j] += prod;
                        magnitude[i * n + j] += prod.abs();
                    }
                }
            }
            let spec = OpSpec::Gemm(GemmSpec::new(ScalarType::F32, m, n, k));
            let widen = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
            let inputs = [widen(&a), widen(&b)];
            let mut outputs = Vec::new();
            for r in [&rt, &cpu] {
                let c = r
                    .matmul(
                        &r.tensor(&[m, k], &a).unwrap(),
                        &r.tensor(&[k, n], &b).unwrap(),
                    )
                    .unwrap();
                assert_eq!(c.shape(), &[m, n]);
                outputs.push(c.to_vec::<f32>().unwrap());
            }
            for (out, on) in outputs.iter().zip([path.name(), "cpu"]) {
                let what = format!("{m}x{k}x{n} matmul on {on}");
                check_within_tolerance(&what, &spec, out, &reference, &inputs);
            }
        }
    }
}

#[test]
fn float_remainder_is_exact_on_every_shader_path() {
    for path in ShaderPath::ALL {
        let test = "float_remainder_is_exact_on_every_shader_path";
        let Some(rt) = wgpu_runtime(test, path, DiskCache::off()) else {
            continue;
        };
        common::assert_float_rem_is_exact(&rt, &format!("{} [{}]", rt.device_name(), path.name()));
    }
}

#[test]
fn softmax_matches_the_cpu_on_every_shader_path() {
    let cpu = cpu_runtime();
    for path in ShaderPath::ALL {
        let test = "softmax_matches_the_cpu_on_every_shader_path";
        let Some(rt) = wgpu_runtime(test, path, DiskCache::off()) else {
            continue;
        };
        // Short rows, long rows, one row, and a softmax over the first axis.
        for (shape, axis) in [
            (vec![1usize, 1], 1usize),
            (vec![3, 7], 1),
            (vec![5, 1000], 1),
            (vec![1, 4099], 1),
            (vec![33, 257], 1),
            (vec![17, 9], 0),
        ] {
            let (rows, cols) = (shape[0], shape[1]);
            let x: Vec<f32> = data(rows * cols, 3).iter().map(|v| v * 4.0).collect();
            let at = |r: usize, c: usize| f64::from(x[r * cols + c]);
            let mut reference = vec![0.0; x.len()];
            let (lines, len) = if axis == 1 {
                (rows, cols)
            } else {
                (cols, rows)
            };
            for line in 0..lines {
                let value = |j: usize| if axis == 1 { at(line, j) } else { at(j, line) };
                let max = (0..len).map(value).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = (0..len).map(|j| (value(j) - max).exp()).sum();
                for j in 0..len {
                    let index = if axis == 1 {
                        line * cols + j
                    } else {
                        j * cols + line
                    };
                    reference[index] = (value(j) - max).exp() / sum;
                }
            }
            let spec = OpSpec::Softmax(SoftmaxSpec {
                dtype: ScalarType::F32,
                shape: shape.clone(),
                axis,
                log: false,
            });
            for (r, on) in [(&rt, path.name()), (&cpu, "cpu")] {
                let y = r
                    .softmax(&r.tensor(&shape, &x).unwrap(), axis as i64)
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap();
                let what = format!("softmax {shape:?} axis {axis} on {on}");
                let input = [x.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>()];
                check_within_tolerance(&what, &spec, &y, &reference, &input);
            }
        }
    }
}

#[test]
fn an_allocation_past_the_adapter_limits_is_a_typed_error() {
    let test = "an_allocation_past_the_adapter_limits_is_a_typed_error";
    let Some(mut rt) = wgpu_runtime(test, ShaderPath::Wgsl, DiskCache::off()) else {
        return;
    };
    let works = |rt: &Runtime| {
        let a = rt.tensor(&[3], &[1.0f32, 2.0, 3.0]).unwrap();
        assert_eq!(
            rt.add(&a, &a).unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 4.0, 6.0]
        );
    };
    // 2^40 f32 is 4 TiB: over the runtime's default cap of 1 TiB.
    match rt.zeros(&[1 << 40], ScalarType::F32) {
        Err(RuntimeError::TooLarge { bytes, limit, .. }) => {
            assert_eq!((bytes, limit), (1 << 42, 1 << 40));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    works(&rt);
    // Without the runtime's cap the adapter's own limits refuse it, before wgpu sees it.
    rt.set_max_buffer_bytes(u64::MAX);
    for shape in [vec![1usize << 40], vec![1 << 20, 1 << 20]] {
        match rt.zeros(&shape, ScalarType::F32) {
            Err(RuntimeError::OutOfMemory { bytes, device }) => {
                assert_eq!(bytes, 1 << 42);
                assert_eq!(device, rt.device_name());
            }
            other => panic!("expected OutOfMemory for {shape:?}, got {other:?}"),
        }
        works(&rt);
    }
    // A shape whose byte count overflows is TooLarge whatever the cap.
    assert!(matches!(
        rt.zeros(&[usize::MAX, 2], ScalarType::F32),
        Err(RuntimeError::TooLarge { .. })
    ));
    // A lower cap applies to every allocation the runtime makes: uploads, zeros and
    // an op's outputs.
    rt.set_max_buffer_bytes(4096);
    assert!(rt.zeros(&[1024], ScalarType::F32).is_ok());
    for result in [
        rt.zeros(&[1025], ScalarType::F32).map(drop),
        rt.tensor(&[1025], &vec![0.0f32; 1025]).map(drop),
    ] {
        match result {
            Err(RuntimeError::TooLarge { bytes, limit, .. }) => {
                assert_eq!((bytes, limit), (4100, 4096))
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }
    let small = rt.tensor(&[1024], &vec![1i32; 1024]).unwrap();
    // Inputs within the cap, an output past it: [1024, 1] x [1, 2] is 8 KiB.
    let col = rt.tensor(&[1024, 1], &vec![1.0f32; 1024]).unwrap();
    let row = rt.tensor(&[1, 2], &[1.0f32, 2.0]).unwrap();
    assert!(matches!(
        rt.matmul(&col, &row),
        Err(RuntimeError::TooLarge { .. })
    ));
    assert_eq!(
        rt.add(&small, &small).unwrap().to_vec::<i32>().unwrap(),
        vec![2; 1024]
    );
    works(&rt);
}

#[test]
fn a_tensor_of_another_runtime_is_wrong_device() {
    let test = "a_tensor_of_another_runtime_is_wrong_device";
    let Some(rt) = wgpu_runtime(test, ShaderPath::Wgsl, DiskCache::off()) else {
        return;
    };
    let mine = rt.tensor(&[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let cpu = cpu_runtime();
    let on_cpu = cpu.tensor(&[4], &[1.0f32; 4]).unwrap();
    let other = wgpu_runtime(test, ShaderPath::Wgsl, DiskCache::off()).unwrap();
    let on_other = other.tensor(&[4], &[1.0f32; 4]).unwrap();
    for foreign in [&on_cpu, &on_other] {
        for result in [rt.add(&mine, foreign), rt.add(foreign, &mine)] {
            match result {
                Err(RuntimeError::WrongDevice {
                    tensor_device,
                    runtime_device,
                }) => {
                    assert_eq!(tensor_device, foreign.device_name());
                    assert_eq!(runtime_device, rt.device_name());
                }
                other => panic!("expected WrongDevice, got {other:?}"),
            }
        }
    }
    // And the other way round: a wgpu tensor on the CPU runtime.
    assert!(matches!(
        cpu.add(&on_cpu, &mine),
        Err(RuntimeError::WrongDevice { .. })
    ));
    assert_eq!(
        rt.add(&mine, &mine).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 4.0, 6.0, 8.0]
    );
}

/// Runs `a + a` for `a = [0, 1, ..]` and checks the sum.
fn check_add(rt: &Runtime, n: usize) {
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let t = rt.tensor(&[n], &a).unwrap();
    let out = rt.run(&add_spec(n), &[&t, &t]).unwrap();
    let want: Vec<f32> = a.iter().map(|v| v * 2.0).collect();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
}

/// The files of `dir` named `*.<ext>`.
fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The disk-cache entry kind of a shader path's artifacts.
fn artifact_extension(path: ShaderPath) -> &'static str {
    match path {
        ShaderPath::Wgsl => "wgsl",
        _ => "spv",
    }
}

/// A fresh runtime on `dir` runs the op and compiles exactly `compiles` kernels and
/// rebuilds `disk_hits` from disk.
fn expect_stats(test: &str, path: ShaderPath, dir: &Path, compiles: u64, disk_hits: u64) {
    let rt = wgpu_runtime(test, path, DiskCache::at(dir)).unwrap();
    check_add(&rt, 1000);
    let s = rt.stats();
    assert_eq!(
        (s.compiles, s.disk_hits),
        (compiles, disk_hits),
        "{}: {s:?}",
        path.name()
    );
}

#[test]
fn artifacts_are_reused_from_disk_and_damaged_ones_rebuilt() {
    let test = "artifacts_are_reused_from_disk_and_damaged_ones_rebuilt";
    for path in [
        ShaderPath::Wgsl,
        ShaderPath::SpirvViaNaga,
        ShaderPath::SpirvPassthrough,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let Some(first) = wgpu_runtime(test, path, DiskCache::at(dir.path())) else {
            continue;
        };
        check_add(&first, 1000);
        let compiled = first.stats().compiles;
        assert!(compiled > 0, "{}", path.name());
        let ext = artifact_extension(path);
        let files = files_with_extension(dir.path(), ext);
        assert_eq!(files.len() as u64, compiled, "one .{ext} per kernel");
        let intact: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();

        // A second runtime on the same cache compiles nothing.
        expect_stats(test, path, dir.path(), 0, compiled);

        // Damage every file, three ways; each time a fresh runtime detects it, compiles
        // again, and leaves a good file behind.
        type Damage = fn(&[u8]) -> Vec<u8>;
        let damages: [(&str, Damage); 3] = [
            // Garbage of the same length (the checksum fails).
            ("garbage", |b| {
                (0..b.len()).map(|i| (i * 131 + 7) as u8).collect()
            }),
            // Cut short (the length fails).
            ("truncated", |b| b[..b.len() / 2].to_vec()),
            // A well-formed cache file whose payload is no shader: wgpu rejects it (or,
            // for SPIR-V, it lacks the magic number and never reaches the driver).
            ("not a shader", |_| encode(b"this is not a shader!!!!")),
        ];
        for (how, damage) in damages {
            for (f, good) in files.iter().zip(&intact) {
                std::fs::write(f, damage(good)).unwrap();
            }
            expect_stats(test, path, dir.path(), compiled, 0);
            for (f, good) in files.iter().zip(&intact) {
                let now = std::fs::read(f).unwrap();
                assert!(decode(&now).is_ok(), "{how} {}: rewritten", f.display());
                assert_eq!(&now, good, "{how}: the same artifact as first compiled");
            }
            // ... and that file serves the next runtime.
            expect_stats(test, path, dir.path(), 0, compiled);
        }
    }
}

#[test]
fn the_naga_path_keeps_no_artifact_and_compiles_again() {
    let test = "the_naga_path_keeps_no_artifact_and_compiles_again";
    let dir = tempfile::tempdir().unwrap();
    let Some(first) = wgpu_runtime(test, ShaderPath::NagaIr, DiskCache::at(dir.path())) else {
        return;
    };
    check_add(&first, 1000);
    let compiled = first.stats().compiles;
    assert!(compiled > 0);
    // The naga module is emitted in memory and handed over as is: nothing to store,
    // so a second runtime emits it again (emission is cheap next to pipeline creation,
    // which no path can cache on disk).
    let stored = std::fs::read_dir(dir.path())
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(stored, 0, "the naga path writes no cache files");
    expect_stats(test, ShaderPath::NagaIr, dir.path(), compiled, 0);
}

#[test]
fn sixteen_threads_share_one_runtime_and_one_compile() {
    let test = "sixteen_threads_share_one_runtime_and_one_compile";
    let Some(rt) = wgpu_runtime(test, ShaderPath::Wgsl, DiskCache::off()) else {
        return;
    };
    let barrier = std::sync::Barrier::new(16);
    std::thread::scope(|s| {
        for _ in 0..16 {
            let (rt, barrier) = (&rt, &barrier);
            s.spawn(move || {
                barrier.wait();
                for _ in 0..10 {
                    check_add(rt, 4099);
                }
            });
        }
    });
    let stats = rt.stats();
    assert_eq!(stats.compiles, 1, "{stats:?}");
    assert_eq!(stats.disk_hits, 0, "{stats:?}");
    assert_eq!(stats.launches, 160, "{stats:?}");
    // Every other request was served from memory (or waited for the one compile).
    assert_eq!(stats.memory_hits, 159, "{stats:?}");
}

/// i64 is refused where WGSL is the shader language (it has no 64-bit integers) with a
/// typed lowering error naming the dtype and the target; kernelc's SPIR-V runs it where
/// the device has `SHADER_INT64` (lavapipe does).
#[test]
fn i64_ops_are_refused_naming_the_dtype_and_target_where_wgsl_has_none() {
    let spec: OpSpec =
        serde_json::from_str(r#"{"op":"binary","func":"add","dtype":"i64","lhs":[3],"rhs":[3]}"#)
            .unwrap();
    for path in ShaderPath::ALL {
        let Some(rt) = wgpu_runtime(
            "i64_ops_are_refused_naming_the_dtype_and_target_where_wgsl_has_none",
            path,
            DiskCache::off(),
        ) else {
            continue;
        };
        let a = rt.tensor(&[3], &[1i64 << 40, -5, 7]).unwrap();
        let b = rt.tensor(&[3], &[1i64, 5, i64::MAX]).unwrap();
        match rt.run(&spec, &[&a, &b]) {
            Ok(out) => {
                assert!(rt.caps().i64, "{}: ran i64 without the caps", path.name());
                let got = out[0].to_vec::<i64>().unwrap();
                assert_eq!(
                    got,
                    vec![(1i64 << 40) + 1, 0, i64::MIN + 6],
                    "{}",
                    path.name()
                );
            }
            Err(e @ RuntimeError::Lower { .. }) => {
                assert!(!rt.caps().i64, "{}: refused i64 it has: {e}", path.name());
                let message = e.to_string();
                assert!(message.contains("i64"), "{message}");
                assert!(message.contains(path.name()), "{message}");
            }
            Err(e) => panic!("{}: {e}", path.name()),
        }
    }
}
