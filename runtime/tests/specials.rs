//! Special values the conformance table's random inputs never reach, on every device
//! present (the CPU; wgpu through WGSL and through SPIR-V passed to the driver; CUDA):
//! softplus and hardswish at NaN, ±∞, ±0, both sides of their thresholds and very
//! negative inputs; f64 values beyond f32's range; fully masked softmax rows.

mod common;

use kernelc_ir::{Scalar, ScalarType};
use kernelc_kernels::spec::{
    BinaryFn, BinarySpec, HardswishSpec, OpSpec, ReduceFn, ReduceSpec, SoftplusSpec,
};
use kernelc_kernels::tolerance::{compare, tolerance};
use kernelc_runtime::{Runtime, RuntimeError};

const X: [f64; 16] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    -100.0,
    -40.0,
    -20.0,
    -3.0,
    -2.999,
    3.0,
    3.001,
    19.99,
    20.01,
    100.0,
    1e-30,
];

fn check(rt: &Runtime, spec: OpSpec) {
    check_with(rt, spec, &[&X, &[1.5; 16]]);
}

/// `spec` on `values` (its inputs, in order; extra ones unused) against the reference.
fn check_with(rt: &Runtime, spec: OpSpec, values: &[&[f64]]) {
    // NaN, ±∞ and subnormal results are promised only where the caps say so (a
    // Vulkan path through naga may drop them: NVIDIA's driver does).
    let caps = rt.caps();
    if !caps.ieee_specials || !caps.keeps_subnormals {
        println!(
            "NOT RUN: {} at special values on {} ({}): its caps do not promise NaN, ±∞ \
             and subnormals",
            spec.name(),
            rt.device_name(),
            rt.target_name()
        );
        return;
    }
    let n = X.len();
    let tensors: Vec<_> = values[..spec.inputs().len()]
        .iter()
        .map(|v| rt.tensor_from_f64(&[n], ScalarType::F32, v).unwrap())
        .collect();
    let inputs: Vec<_> = tensors.iter().collect();
    let got = rt.run(&spec, &inputs).unwrap()[0].to_f64().unwrap();
    let host: Vec<Vec<f64>> = inputs.iter().map(|t| t.to_f64().unwrap()).collect();
    let refs: Vec<&[f64]> = host.iter().map(|v| v.as_slice()).collect();
    let want: Vec<f64> = kernelc_kernels::reference(&spec, &refs).unwrap()[0]
        .iter()
        .map(|&w| Scalar::from_f64(ScalarType::F32, w).to_f64())
        .collect();
    let scales = kernelc_kernels::conformance::error_scales(&spec, &host).expect("scales");
    if let Err(m) = compare(
        "out",
        &tolerance(&spec),
        ScalarType::F32,
        &got,
        &want,
        scales.as_ref().map(|s| s[0].as_slice()),
    ) {
        panic!(
            "{} on {} ({}): {m}\ngot  {got:?}\nwant {want:?}",
            spec.name(),
            rt.device_name(),
            rt.target_name()
        );
    }
    // A tiny softplus keeps its value: relative accuracy, not just absolute.
    if let OpSpec::Softplus(s) = &spec {
        if !s.backward {
            let (g, w) = (got[6], want[6]);
            assert!((g / w - 1.0).abs() < 1e-5, "softplus(-40) = {g}, want {w}");
        }
    }
}

/// Every device present; wgpu is required where `CI` is set (lavapipe), CUDA with
/// `KERNELC_REQUIRE_CUDA`.
fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("special values", common::ALL_PATHS)
}

#[test]
fn softplus_and_hardswish_at_special_values() {
    for rt in &runtimes() {
        for backward in [false, true] {
            check(
                rt,
                OpSpec::Softplus(SoftplusSpec {
                    dtype: ScalarType::F32,
                    shape: vec![X.len()],
                    beta: 1.0,
                    threshold: 20.0,
                    backward,
                }),
            );
            check(
                rt,
                OpSpec::Hardswish(HardswishSpec {
                    dtype: ScalarType::F32,
                    shape: vec![X.len()],
                    backward,
                }),
            );
        }
    }
}

/// NaN-propagating max/min (a NaN on either side wins) next to maxNum's (a NaN is
/// ignored), and Python's `%` next to the truncated one, at NaN, ±∞, ±0 and both signs.
#[test]
fn nan_propagating_extrema_and_floor_mod_at_special_values() {
    const Y: [f64; 16] = [
        1.0,
        f64::NAN,
        2.0,
        -0.0,
        0.0,
        3.0,
        -7.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -1.25,
        2.5,
        -3.0,
        7.5,
        -0.5,
        0.0,
    ];
    for rt in &runtimes() {
        for func in [
            BinaryFn::MaxNan,
            BinaryFn::MinNan,
            BinaryFn::Max,
            BinaryFn::Min,
            BinaryFn::FloorMod,
            BinaryFn::Mod,
        ] {
            let spec = OpSpec::Binary(BinarySpec {
                func,
                dtype: ScalarType::F32,
                lhs: vec![X.len()],
                rhs: vec![X.len()],
                out_dtype: None,
            });
            check_with(rt, spec, &[&X, &Y]);
        }
        for func in [
            ReduceFn::MaxNan,
            ReduceFn::MinNan,
            ReduceFn::Max,
            ReduceFn::Min,
        ] {
            // Rows of 4: one with a NaN, one of only NaN and ±∞, two of numbers.
            let spec = OpSpec::Reduce(ReduceSpec {
                func,
                dtype: ScalarType::F32,
                shape: vec![4, 4],
                axes: vec![1],
                keepdim: false,
                index_dtype: None,
                accumulate: false,
            });
            let x = [
                1.0,
                f64::NAN,
                -2.0,
                5.0, //
                f64::NAN,
                f64::INFINITY,
                f64::NAN,
                f64::NEG_INFINITY, //
                -0.0,
                0.0,
                -3.0,
                2.0, //
                7.0,
                7.5,
                -1e30,
                1e30,
            ];
            check_reduce(rt, spec, &x);
        }
    }
}

/// A reduction of 16 values, exactly as the reference gives it.
fn check_reduce(rt: &Runtime, spec: OpSpec, x: &[f64]) {
    let caps = rt.caps();
    if !caps.ieee_specials {
        println!(
            "NOT RUN: {} at special values on {}",
            spec.name(),
            rt.target_name()
        );
        return;
    }
    let t = rt.tensor_from_f64(&[4, 4], ScalarType::F32, x).unwrap();
    let got = rt.run(&spec, &[&t]).unwrap()[0].to_f64().unwrap();
    let want: Vec<f64> = kernelc_kernels::reference(&spec, &[x]).unwrap()[0]
        .iter()
        .map(|&w| Scalar::from_f64(ScalarType::F32, w).to_f64())
        .collect();
    let same = |g: f64, w: f64| (g.is_nan() && w.is_nan()) || g == w;
    assert!(
        got.iter().zip(&want).all(|(&g, &w)| same(g, w)),
        "{} on {} ({}): got {got:?}, want {want:?}",
        spec.name(),
        rt.device_name(),
        rt.target_name()
    );
}

/// f64 values beyond f32's range stay finite (the SPIR-V emitter once judged an f64
/// constant's finiteness as an f32 and wrote 1e300 as inf), and softmax of a fully
/// masked row is 0 (log-softmax −∞), not NaN.
#[test]
fn f64_beyond_f32_range_and_masked_softmax_rows() {
    for rt in &runtimes() {
        if !rt.caps().f64 {
            eprintln!(
                "NOT RUN: f64 special values on {} (no f64)",
                rt.device_name()
            );
            continue;
        }
        for value in [1e300, -1e300, 3.5e38, 1e-300] {
            let spec = OpSpec::Fill(kernelc_kernels::spec::FillSpec {
                dtype: ScalarType::F64,
                shape: vec![5],
                value: kernelc_kernels::spec::FillValue::Constant { value },
                offset: 0,
            });
            let got = rt.run(&spec, &[]).unwrap()[0].to_vec::<f64>().unwrap();
            assert!(
                got.iter().all(|&g| g == value),
                "{}: fill {value} gave {got:?}",
                rt.device_name()
            );
        }
        for log in [false, true] {
            let spec = OpSpec::Softmax(kernelc_kernels::spec::SoftmaxSpec {
                dtype: ScalarType::F64,
                shape: vec![2, 3],
                axis: 1,
                log,
            });
            let inf = f64::INFINITY;
            let x = rt
                .tensor(&[2, 3], &[-inf, -inf, -inf, -inf, 1.0, 2.0])
                .unwrap();
            let got = rt.run(&spec, &[&x]).unwrap()[0].to_vec::<f64>().unwrap();
            let masked = if log { -inf } else { 0.0 };
            assert!(
                got[..3].iter().all(|&g| g == masked) && got[3] == if log { -inf } else { 0.0 },
                "{} log={log}: {got:?}",
                rt.device_name()
            );
            assert!(got[4..].iter().all(|g| g.is_finite()), "{got:?}");
        }
    }
}

/// A fill constant is rounded to f16/bf16 once (it was rounded to f32 first, then to
/// the storage type in the kernel: twice).
#[test]
fn fill_constants_round_once_to_half_types() {
    for rt in &runtimes() {
        for (dtype, value, want) in [
            (ScalarType::F16, 1.0004882812509313, 1.0009765625),
            (ScalarType::Bf16, 1.0039063692, 1.0078125),
        ] {
            if !rt.caps().supports(dtype) {
                eprintln!("NOT RUN: {dtype} fill on {}", rt.device_name());
                continue;
            }
            let spec = OpSpec::Fill(kernelc_kernels::spec::FillSpec {
                dtype,
                shape: vec![4],
                value: kernelc_kernels::spec::FillValue::Constant { value },
                offset: 0,
            });
            let got = rt.run(&spec, &[]).unwrap()[0].to_f64().unwrap();
            assert!(
                got.iter().all(|&g| g == want),
                "{}: {dtype} fill {value} gave {got:?}, want {want}",
                rt.device_name()
            );
        }
    }
}

/// Log-softmax and cross-entropy keep their digits for large logits: computed as
/// `(x − m) − ln Σ` and `(m − x_t) + ln Σ`, never through `m + ln Σ`, which rounds at
/// the logits' magnitude (log-softmax gave −3.4375 for −3.4401896, loss 0.4375 for
/// 0.44018966). Checked to a few f32 ulps, tighter than the table's normalised bound.
#[test]
fn log_softmax_and_cross_entropy_of_large_logits_keep_their_digits() {
    let logits = [100000.0f32, 100001.0, 100002.0, 100003.0];
    let lse = (0..4).map(|i| (i as f64).exp()).sum::<f64>().ln();
    let want: Vec<f64> = (0..4).map(|i| i as f64 - 3.0 - (lse - 3.0)).collect();
    let close = |got: f64, want: f64| (got - want).abs() <= 4.0 * f32::EPSILON as f64 * want.abs();
    for rt in &runtimes() {
        let x = rt.tensor(&[1, 4], &logits).unwrap();
        let spec = OpSpec::Softmax(kernelc_kernels::spec::SoftmaxSpec {
            dtype: ScalarType::F32,
            shape: vec![1, 4],
            axis: 1,
            log: true,
        });
        let got = rt.run(&spec, &[&x]).unwrap()[0].to_f64().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                close(*g, *w),
                "{}: log-softmax {got:?}, want {want:?}",
                rt.device_name()
            );
        }
        let targets = rt.tensor(&[1], &[3u32]).unwrap();
        let spec = OpSpec::CrossEntropy(kernelc_kernels::spec::CrossEntropySpec {
            dtype: ScalarType::F32,
            index_dtype: ScalarType::U32,
            batch: 1,
            classes: 4,
            divide_by_batch: false,
            grad: true,
            probs: true,
        });
        let out = rt.run(&spec, &[&x, &targets]).unwrap();
        let loss = out[0].to_f64().unwrap()[0];
        assert!(
            close(loss, -want[3]),
            "{}: loss {loss}, want {}",
            rt.device_name(),
            -want[3]
        );
        let probs = out[2].to_f64().unwrap();
        for (p, w) in probs.iter().zip(&want) {
            assert!(close(*p, w.exp()), "{}: probs {probs:?}", rt.device_name());
        }
    }
}

/// Kernels are fitted under a driver's loop budget (`TargetCaps::max_loop_iterations`):
/// llvmpipe cuts an invocation's loops short after 65,535 iterations, so a max-pool
/// backward summing 90,000 windows into one pixel gave 65,535 and a scatter dropped
/// indices past ~64,525. A kernel that cannot be fitted is refused, by name.
#[test]
fn loops_past_65535_iterations_run_to_the_end() {
    for rt in &runtimes() {
        let spec: OpSpec = serde_json::from_str(
            r#"{"op":"pool2d_backward","kind":"max","dtype":"f32","batch":1,"channels":1,
                "height":2,"width":2,"out_height":300,"out_width":300,"index_dtype":"u32"}"#,
        )
        .unwrap();
        let dy = rt.tensor(&[1, 1, 300, 300], &vec![1.0f32; 90_000]).unwrap();
        let idx = rt.tensor(&[1, 1, 300, 300], &vec![0u32; 90_000]).unwrap();
        let dx = rt.run(&spec, &[&dy, &idx]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(dx, vec![90_000.0, 0.0, 0.0, 0.0], "{}", rt.device_name());

        let n = 70_000;
        let spec: OpSpec = serde_json::from_str(&format!(
            r#"{{"op":"scatter","dtype":"f32","index_dtype":"u32","data":[4,1],"indices":[{n}],
                "axis":0,"combine":"sum","init":"zero"}}"#
        ))
        .unwrap();
        let updates = rt.tensor(&[n, 1], &vec![1.0f32; n]).unwrap();
        let indices: Vec<u32> = (0..n as u32).map(|i| i % 2).collect();
        let indices = rt.tensor(&[n], &indices).unwrap();
        let out = rt.run(&spec, &[&updates, &indices]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(
            out,
            vec![35_000.0, 35_000.0, 0.0, 0.0],
            "{}",
            rt.device_name()
        );

        // 4,410,000 windows into one pixel: past what unrolling (by 64 at most) can fit
        // in 65,535 iterations, so a device with that budget refuses it.
        let spec: OpSpec = serde_json::from_str(
            r#"{"op":"pool2d_backward","kind":"max","dtype":"f32","batch":1,"channels":1,
                "height":1,"width":1,"out_height":2100,"out_width":2100,"index_dtype":"u32"}"#,
        )
        .unwrap();
        let n = 2100 * 2100;
        let dy = rt.tensor(&[1, 1, 2100, 2100], &vec![1.0f32; n]).unwrap();
        let idx = rt.tensor(&[1, 1, 2100, 2100], &vec![0u32; n]).unwrap();
        match (rt.run(&spec, &[&dy, &idx]), rt.caps().max_loop_iterations) {
            (Ok(out), None) => {
                assert_eq!(
                    out[0].to_vec::<f32>().unwrap(),
                    vec![n as f32],
                    "{}",
                    rt.device_name()
                )
            }
            (Err(RuntimeError::Compile { message, .. }), Some(_)) => {
                assert!(message.contains("4410001 loop iterations"), "{message}")
            }
            (other, budget) => panic!("{}, budget {budget:?}: {other:?}", rt.device_name()),
        }
    }
}

/// NaN, ±∞ and −0 come through elementwise ops whose attribute could let a compiler
/// fold them away (slope 0, a zero divisor, a −0 factor): on lavapipe, leaky ReLU with
/// slope 0 mapped NaN and −∞ to 0, `x / 0.0` gave NaN for ±∞, `x · −0.0` gave 0 for
/// NaN. Per-call attributes are uniforms now, which no compiler folds.
#[test]
fn nan_infinity_and_signed_zero_survive_attribute_specials() {
    let x = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        2.0,
        -3.0,
    ];
    for rt in &runtimes() {
        let t = rt.tensor_from_f64(&[x.len()], ScalarType::F32, &x).unwrap();
        let specs = [
            r#"{"op":"unary","func":{"leaky_relu":{"slope":0.0}},"dtype":"f32","shape":[7]}"#,
            r#"{"op":"scalar","func":"div","dtype":"f32","shape":[7],"scalar":0.0}"#,
            r#"{"op":"scalar","func":"mul","dtype":"f32","shape":[7],"scalar":-0.0}"#,
            r#"{"op":"scalar","func":"div","dtype":"f32","shape":[7],"scalar":-0.0}"#,
            r#"{"op":"scalar","func":"add","dtype":"f32","shape":[7],"scalar":-0.0}"#,
        ];
        for json in specs {
            let spec: OpSpec = serde_json::from_str(json).unwrap();
            let got = rt.run(&spec, &[&t]).unwrap()[0].to_vec::<f32>().unwrap();
            let want = kernelc_kernels::reference(&spec, &[&x]).unwrap().remove(0);
            for ((g, w), v) in got.iter().zip(&want).zip(&x) {
                let same = (g.is_nan() && w.is_nan()) || g.to_bits() == (*w as f32).to_bits();
                assert!(
                    same,
                    "{}: {json} at {v}: got {g}, want {w}",
                    rt.device_name()
                );
            }
        }
    }
}

/// `pow` within the table where its exact products hold: f64 `pow(1e30, −9.93…)` was
/// 165 ulp off on lavapipe's SPIR-V, whose `fma` rounds twice (the device is probed at
/// open and the f64 math then emulates it). f32 `pow(0.15262212, −39.43497)` was ~17
/// ulp off on the three paths through naga, whose SPIR-V lets the driver apply inexact
/// algebra (Mesa folds `(a + b) − a` to `b`), zeroing the TwoSum error terms that carry
/// `y·log₂x`; the sums now read through opaque values there
/// (`MathExpansion::opaque_sums`). Every wgpu path runs here.
#[test]
fn pow_keeps_its_accuracy_where_fma_is_not_fused() {
    let cases = [
        (ScalarType::F64, 1e30, -9.930448799825829),
        (ScalarType::F64, 0.39887419044971467, -754.84326171875),
        (ScalarType::F32, 0.15262212, -39.43497),
    ];
    for rt in &runtimes() {
        for (dtype, a, b) in cases {
            if !rt.caps().supports(dtype) {
                continue;
            }
            let spec: OpSpec = serde_json::from_str(&format!(
                r#"{{"op":"binary","func":"pow","dtype":"{dtype}","lhs":[1],"rhs":[1]}}"#
            ))
            .unwrap();
            let (x, y) = (
                rt.tensor_from_f64(&[1], dtype, &[a]).unwrap(),
                rt.tensor_from_f64(&[1], dtype, &[b]).unwrap(),
            );
            let got = rt.run(&spec, &[&x, &y]).unwrap()[0].to_f64().unwrap();
            let (xa, yb) = (x.to_f64().unwrap(), y.to_f64().unwrap());
            let want = kernelc_kernels::reference(&spec, &[&xa, &yb])
                .unwrap()
                .remove(0);
            let want: Vec<f64> = want
                .iter()
                .map(|&w| Scalar::from_f64(dtype, w).to_f64())
                .collect();
            let result = compare("out", &tolerance(&spec), dtype, &got, &want, None);
            let name = format!("{} ({})", rt.device_name(), rt.target_name());
            println!(
                "{name}: {dtype} pow({a}, {b}) = {:e} (want {:e})",
                got[0], want[0]
            );
            assert!(result.is_ok(), "{name}: {:?}", result.err());
        }
    }
}
