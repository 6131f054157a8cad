//! What the f64 references promise beyond the textbook formulas, each rule checked
//! where an op family once broke it: integer results wrap as the kernels' do, roundings
//! to f16/bf16 are single and exact, attributes are used as the kernels receive them,
//! and normalisation statistics stay accurate when the mean dwarfs the spread.

use kernelc_ir::ScalarType::{self, *};
use kernelc_kernels::reference::round_to;
use kernelc_kernels::*;

fn run(spec: &OpSpec, inputs: &[&[f64]]) -> Vec<Vec<f64>> {
    reference(spec, inputs).unwrap_or_else(|e| panic!("{}: {e}", spec.name()))
}

fn run1(spec: &OpSpec, inputs: &[&[f64]]) -> Vec<f64> {
    run(spec, inputs).remove(0)
}

// ---------------------------------------------------------------- integers wrap

/// Scatter-sum into `[1]` of `updates` (every index 0), in `dtype`.
fn scatter_sum(dtype: ScalarType, updates: &[f64]) -> f64 {
    let spec = OpSpec::Scatter(ScatterSpec {
        dtype,
        index_dtype: U32,
        data: vec![1],
        indices: vec![updates.len()],
        axis: 0,
        combine: ScatterCombine::Sum,
        init: ScatterInit::Zero,
        rows_of: None,
    });
    run1(&spec, &[updates, &vec![0.0; updates.len()]])[0]
}

#[test]
fn integer_scatter_sum_wraps_like_the_device() {
    // As the IR's integer `+`, `reduce` and NumPy's `add.at` do.
    assert_eq!(
        scatter_sum(I32, &[i32::MAX as f64, 1.0]),
        i32::MIN as f64,
        "i32 overflow wraps"
    );
    assert_eq!(
        scatter_sum(I32, &[i32::MIN as f64, -1.0]),
        i32::MAX as f64,
        "i32 underflow wraps"
    );
    assert_eq!(
        scatter_sum(I32, &[i32::MAX as f64, 3.0, -5.0]),
        (i32::MAX - 2) as f64,
        "a sum that overflows and comes back is exact"
    );
    assert_eq!(
        scatter_sum(U32, &[u32::MAX as f64, 2.0]),
        1.0,
        "u32 overflow wraps"
    );
    // Floats are not integers: no wrapping.
    assert_eq!(scatter_sum(F64, &[i32::MAX as f64, 1.0]), 2147483648.0);
}

// ---------------------------------------------------------------- one rounding to f16/bf16

/// The f32 `0x3F808001` = 1 + 2⁻⁸ + 2⁻²³: just above the midpoint of the bf16
/// neighbours 1 and 1 + 2⁻⁷, so it rounds up. Rounding that drops the low 32 bits of
/// the f64 first (the `half` crate's `from_f64`) sees an exact tie and rounds to 1.
const ABOVE_BF16_TIE: f64 = 1.003_906_369_209_289_6;
/// 1 + 2⁻¹¹ + 2⁻⁴⁰: just above the midpoint of the f16 neighbours 1 and 1 + 2⁻¹⁰.
const ABOVE_F16_TIE: f64 = 1.0 + 1.0 / 2048.0 + 1.0 / 1_099_511_627_776.0;

fn cast(from: ScalarType, to: ScalarType, x: f64) -> f64 {
    let spec = OpSpec::Cast(CastSpec {
        from,
        to,
        shape: vec![1],
    });
    run1(&spec, &[&[x]])[0]
}

#[test]
fn casts_to_half_types_round_once() {
    assert_eq!(f32::from_bits(0x3F80_8001) as f64, ABOVE_BF16_TIE);
    assert_eq!(cast(F32, Bf16, ABOVE_BF16_TIE), 1.0078125);
    assert_eq!(cast(F64, F16, ABOVE_F16_TIE), 1.0 + 1.0 / 1024.0);
    assert_eq!(cast(F64, Bf16, -ABOVE_BF16_TIE), -1.0078125);
    // Exact ties still go to even, and the ends of the range are kept.
    assert_eq!(cast(F64, F16, 1.0 + 1.0 / 2048.0), 1.0);
    assert_eq!(cast(F64, F16, 65520.0), f64::INFINITY);
    assert_eq!(cast(F64, F16, 65519.99), 65504.0);
    assert_eq!(cast(F64, F16, 2f64.powi(-25)), 0.0);
    assert_eq!(cast(F64, F16, 2f64.powi(-25) * 1.5), 2f64.powi(-24));
    assert!(cast(F64, Bf16, f64::NAN).is_nan());
    assert!(cast(F64, F16, -0.0).is_sign_negative());
}

/// TF32 keeps 10 significand bits: ties go to the even neighbour, a carry moves to
/// the next binade (or ∞), NaN, ∞ and subnormals keep their kind.
#[test]
fn tf32_rounding_is_nearest_even_on_the_bits() {
    let r = |bits: u32| kernelc_ir::fragment::round_to_tf32(f32::from_bits(bits)).to_bits();
    let one = 0x3F80_0000;
    assert_eq!(r(one), one);
    assert_eq!(r(one | 0x1000), one, "1 + 2⁻¹¹: a tie, to even (down)");
    assert_eq!(
        r(one | 0x3000),
        one | 0x4000,
        "1 + 3·2⁻¹¹: a tie, to even (up)"
    );
    assert_eq!(r(one | 0x1001), one | 0x2000, "just above a tie: up");
    assert_eq!(r(one | 0x0FFF), one, "just below a tie: down");
    assert_eq!(r(0x3FFF_F000), 0x4000_0000, "a carry into the exponent: 2");
    assert_eq!(r(0x7F7F_FFFF), 0x7F80_0000, "past the largest TF32: ∞");
    assert_eq!(r(0xFF80_0000), 0xFF80_0000);
    // NaN stays NaN, quieted, its dropped bits cleared (else the tensor cores, which
    // do not read them, would see ∞): a TF32 value.
    assert_eq!(r(0x7FC0_0001), 0x7FC0_0000);
    assert_eq!(r(0xFF80_0001), 0xFFC0_0000);
    assert!(kernelc_ir::fragment::is_tf32(f32::from_bits(r(
        0x7F80_1001
    ))));
    assert!(!kernelc_ir::fragment::is_tf32(f32::from_bits(0x7F80_0001)));
    assert_eq!(
        r(0x0000_1801),
        0x0000_2000,
        "a subnormal rounds at the same bit"
    );
    assert_eq!(r(0x8000_0FFF), 0x8000_0000, "to −0");
    let mut g = GemmSpec::new(F32, 1, 1, 1);
    g.input_rounding = Some(InputRounding::Tf32);
    let a = f64::from(f32::from_bits(one | 0x3000));
    assert_eq!(
        run1(&OpSpec::Gemm(g), &[&[a], &[3.0]]),
        [3.0 * f64::from(f32::from_bits(one | 0x4000))]
    );
}

#[test]
fn gemm_input_rounding_rounds_once() {
    let mut g = GemmSpec::new(F32, 1, 1, 1);
    g.input_rounding = Some(InputRounding::Bf16);
    assert_eq!(
        run1(&OpSpec::Gemm(g.clone()), &[&[ABOVE_BF16_TIE], &[1.0]]),
        [1.0078125]
    );
    g.input_rounding = Some(InputRounding::F16);
    let just_above = f32::from_bits(0x3F80_1001) as f64; // 1 + 2⁻¹¹ + 2⁻²³
    assert_eq!(
        run1(&OpSpec::Gemm(g), &[&[just_above], &[1.0]]),
        [1.0 + 1.0 / 1024.0]
    );
}

#[test]
fn constant_fill_rounds_once_in_the_reference_and_the_kernel() {
    let spec = OpSpec::Fill(FillSpec {
        dtype: F16,
        shape: vec![2],
        value: FillValue::Constant {
            value: ABOVE_F16_TIE,
        },
        offset: 0,
    });
    let want = 1.0 + 1.0 / 1024.0;
    assert_eq!(run1(&spec, &[]), [want, want]);
    // The kernel receives the value already on the f16 grid, so its store to f16
    // cannot round a second time (f64 → f32 → f16 would land on the tie and give 1).
    assert_eq!(spec.uniforms()[0].value.to_f64(), want);
}

#[test]
fn integer_to_integer_casts_wrap_float_to_integer_saturates() {
    // Two's complement truncation, as C, Rust `as`, NumPy `astype` and ONNX Cast.
    assert_eq!(cast(I32, U32, -1.0), u32::MAX as f64);
    assert_eq!(cast(I32, U32, i32::MIN as f64), 2147483648.0);
    assert_eq!(cast(U32, I32, u32::MAX as f64), -1.0);
    assert_eq!(cast(U32, I32, 2147483648.0), i32::MIN as f64);
    assert_eq!(cast(I64, I32, 4294967301.0), 5.0);
    assert_eq!(cast(I64, U32, -2.0), (u32::MAX - 1) as f64);
    assert_eq!(cast(I32, I64, -7.0), -7.0);
    assert_eq!(cast(Bool, U32, 1.0), 1.0);
    assert_eq!(cast(I32, Bool, -3.0), 1.0);
    // Floats saturate at the target range, NaN → 0.
    assert_eq!(cast(F32, U32, -1.0), 0.0);
    assert_eq!(cast(F64, I32, 3e9), i32::MAX as f64);
    assert_eq!(cast(F32, I32, f64::NAN), 0.0);
}

// ---------------------------------------------------------------- attributes as received

/// `v` as an f32 attribute reaches the kernels of f32, f16 and bf16 ops.
fn f32r(v: f64) -> f64 {
    v as f32 as f64
}

fn scalar(func: BinaryFn, dtype: ScalarType, s: f64, x: f64) -> f64 {
    let spec = OpSpec::Scalar(ScalarSpec {
        func,
        dtype,
        shape: vec![1],
        scalar: s,
        reversed: false,
        out_dtype: None,
    });
    run1(&spec, &[&[x]])[0]
}

#[test]
fn the_scalar_operand_is_rounded_to_the_compute_type() {
    // fmod(1, 0.1f32) = 0.0999999865..., fmod(1, 0.1) = 0.0999999999...95: in f32 they
    // are different values, and `mod` is exact in the table.
    assert_eq!(scalar(BinaryFn::Mod, F32, 0.1, 1.0), 1.0 % f32r(0.1));
    assert_eq!(scalar(BinaryFn::Eq, F32, 0.1, f32r(0.1)), 1.0);
    assert_eq!(scalar(BinaryFn::Eq, Bf16, 0.1, f32r(0.1)), 1.0);
    assert_eq!(scalar(BinaryFn::Max, F16, 0.1, 0.0), f32r(0.1));
    // f64 ops compute with the f64 value; integer operands are exact.
    assert_eq!(scalar(BinaryFn::Mod, F64, 0.1, 1.0), 1.0 % 0.1);
    assert_eq!(scalar(BinaryFn::Sub, I32, 7.0, 1.0), -6.0);
}

#[test]
fn float_attributes_are_used_as_the_kernels_receive_them() {
    let leaky = OpSpec::Unary(UnarySpec {
        func: UnaryFn::LeakyRelu { slope: 0.1 },
        dtype: F32,
        shape: vec![1],
    });
    assert_eq!(run1(&leaky, &[&[-1.0]]), [-f32r(0.1)]);
    let leaky_back = OpSpec::ActivationBackward(ActivationBackwardSpec {
        func: Activation::LeakyRelu { slope: 0.1 },
        dtype: Bf16,
        shape: vec![1],
    });
    assert_eq!(run1(&leaky_back, &[&[-1.0], &[1.0]]), [f32r(0.1)]);

    let mut gemm = GemmSpec::new(F32, 1, 1, 1);
    (gemm.alpha, gemm.beta) = (0.1, 0.3);
    assert_eq!(
        run1(&OpSpec::Gemm(gemm), &[&[1.0], &[1.0], &[1.0]]),
        [f32r(0.1) + f32r(0.3)]
    );

    // One query, two keys: the weights are softmax(scale·[0, 1]).
    let attention = OpSpec::Attention(AttentionSpec {
        dtype: F16,
        layout: AttentionLayout::Bhsd,
        batch: 1,
        heads: 1,
        kv_heads: 1,
        seq_q: 1,
        seq_k: 2,
        head_dim: 1,
        scale: 0.1,
        causal: false,
        mask: None,
        causal_align: Default::default(),
        lse: false,
    });
    let w = 1.0 / (1.0 + (-f32r(0.1)).exp());
    assert_eq!(run1(&attention, &[&[1.0], &[0.0, 1.0], &[0.0, 1.0]]), [w]);

    let rms = OpSpec::LayerNorm(LayerNormSpec {
        rms: true,
        ..LayerNormSpec::new(F32, &[1, 1], 0.1)
    });
    assert_eq!(run1(&rms, &[&[1.0]]), [1.0 / (1.0 + f32r(0.1)).sqrt()]);

    let brightness = OpSpec::ImageFilter(ImageFilterSpec {
        filter: ImageFilter::Brightness { factor: 0.1 },
        dtype: F32,
        height: 1,
        width: 1,
        channels: 1,
    });
    assert_eq!(run1(&brightness, &[&[1.0]]), [f32r(0.1)]);

    // Softplus switches to the identity where β·x > threshold. With the f64 values,
    // 0.6·6 < 3.6 and y would be log1p(e^{3.6})/0.6 ≈ 6.05; with the f32 values the
    // kernel receives, β·x = 3.6000001 > 3.5999999 (also once rounded to f32) and
    // y = x = 6.
    let softplus = OpSpec::Softplus(SoftplusSpec {
        dtype: F32,
        shape: vec![1],
        beta: 0.6,
        threshold: 3.6,
        backward: false,
    });
    assert!(0.6 * 6.0 < 3.6 && f32r(f32r(0.6) * 6.0) > f32r(3.6));
    assert_eq!(run1(&softplus, &[&[6.0]]), [6.0]);

    // Dropout's scale 1/(1 − p) is derived on the host and rounded once.
    let dropout = OpSpec::Dropout(DropoutSpec {
        dtype: F32,
        shape: vec![64],
        p: 0.3,
        seed: 7,
        step: 0,
        mask: true,
        rng: Default::default(),
        offset: 0,
    });
    let out = run(&dropout, &[&[1.0; 64]]);
    let scale = f32r(1.0 / 0.7);
    assert!(out[1].iter().all(|&m| m == 0.0 || m == scale));
    assert_eq!(out[0], out[1]);
}

#[test]
fn adam_uses_the_coefficients_the_kernel_receives() {
    let spec = AdamSpec {
        dtype: F32,
        len: 1,
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-3,
        weight_decay: 0.01,
        decoupled: true,
        step: 3,
    };
    let got = run(&OpSpec::Adam(spec), &[&[1.0], &[0.5], &[0.25], &[0.125]]);
    // Each per-call value as `uniforms` gives it: derived on the host in f64 (1 − β,
    // the bias corrections 1/(1 − βᵗ)), rounded once to f32.
    let (lr, b1, c1, b2, c2) = (
        f32r(0.1),
        f32r(0.9),
        f32r(1.0 - 0.9),
        f32r(0.999),
        f32r(1.0 - 0.999),
    );
    let (ic1, ic2) = (
        f32r(1.0 / (1.0 - 0.9f64.powi(3))),
        f32r(1.0 / (1.0 - 0.999f64.powi(3))),
    );
    let (eps, wd) = (f32r(1e-3), f32r(0.01));
    // The new moments are f32 values (the kernel stores them and steps with them).
    let m = f32r(b1 * 0.25 + c1 * 0.5);
    let v = f32r(b2 * 0.125 + c2 * 0.25);
    let p = 1.0 - lr * ((m * ic1) / ((v * ic2).sqrt() + eps) + wd * 1.0);
    assert_eq!(got, [vec![p], vec![m], vec![v]]);
}

// ---------------------------------------------------------------- normalisation statistics

#[track_caller]
fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "got {got:?}, want {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "[{i}]: got {g}, want {w} (got {got:?})"
        );
    }
}

/// 10¹⁵ + j/8 for j = 0..8: exact f64 values (the ulp at 10¹⁵ is 1/8) whose mean is
/// 10¹⁵ + 7/16 and whose biased variance is 5.25/64, so `x̂_j = (j − 3.5)/√5.25`.
/// A plain sum of them rounds at 8·10¹⁵ (ulp 1) and loses the spread entirely.
fn offset_row() -> (Vec<f64>, Vec<f64>) {
    let x = (0..8).map(|j| 1e15 + j as f64 / 8.0).collect();
    let xhat = (0..8).map(|j| (j as f64 - 3.5) / 5.25f64.sqrt()).collect();
    (x, xhat)
}

#[test]
fn layer_norm_statistics_survive_a_mean_far_above_the_spread() {
    let (x, xhat) = offset_row();
    let spec = OpSpec::LayerNorm(LayerNormSpec {
        save_stats: true,
        ..LayerNormSpec::new(F64, &[1, 8], 0.0)
    });
    let out = run(&spec, &[&x]);
    close(&out[0], &xhat, 1e-14);
    close(&out[1][1..], &[1.0 / (5.25f64 / 64.0).sqrt()], 1e-14);
    assert!(
        (out[1][0] - (1e15 + 7.0 / 16.0)).abs() <= 0.125,
        "mean {}",
        out[1][0]
    );
}

#[test]
fn batch_norm_statistics_survive_a_mean_far_above_the_spread() {
    let (x, xhat) = offset_row();
    let spec = OpSpec::BatchNorm(BatchNormSpec {
        dtype: F64,
        shape: vec![8, 1],
        eps: 0.0,
        momentum: 0.5,
        training: true,
    });
    let out = run(&spec, &[&x, &[1.0], &[0.0], &[0.0], &[1.0]]);
    close(&out[0], &xhat, 1e-14);
    close(&out[1][1..], &[1.0 / (5.25f64 / 64.0).sqrt()], 1e-14);
    // The running variance takes the batch's variance, the running mean its mean.
    close(&out[3], &[0.5 + 0.5 * 5.25 / 64.0], 1e-15);
    close(&out[2], &[0.5e15 + 7.0 / 32.0], 1e-15);
}

#[test]
fn layer_norm_normalises_the_residual_sum_it_outputs() {
    // In f16, (1 + 2⁻¹⁰) + 2⁻¹² rounds to 1 + 2⁻¹⁰: `sum` is that f16 value, and y
    // normalises `sum`, not the exact x + residual.
    let x = [1.0 + 2f64.powi(-10), 0.0, 0.0];
    let residual = [2f64.powi(-12), 1.0, 0.0];
    let sum = [1.0 + 2f64.powi(-10), 1.0, 0.0];
    let spec = |dtype, residual| LayerNormSpec {
        residual,
        ..LayerNormSpec::new(dtype, &[1, 3], 0.0)
    };
    let out = run(&OpSpec::LayerNorm(spec(F16, true)), &[&x, &residual]);
    assert_eq!(out[1], sum);
    assert_eq!(out[0], run1(&OpSpec::LayerNorm(spec(F64, false)), &[&sum]));
    // bf16 RMS norm: 1 + 2⁻⁹ rounds to 1, so the row is [1, 1] and y is [1, 1].
    let rms = OpSpec::LayerNorm(LayerNormSpec {
        rms: true,
        shape: vec![1, 2],
        ..spec(Bf16, true)
    });
    let out = run(&rms, &[&[1.0, 0.0], &[2f64.powi(-9), 1.0]]);
    assert_eq!(out[1], [1.0, 1.0], "bf16 sum");
    assert_eq!(out[0], [1.0, 1.0], "y of the rounded sum");
}

// ---------------------------------------------------------------- conformance inputs

/// The saved statistics the conformance harness feeds a backward op are those its
/// forward computes from the same `x` (as stored), so the table exercises the
/// backward on inputs a forward pass could produce.
#[test]
fn backward_norm_inputs_hold_the_statistics_of_x() {
    use kernelc_kernels::conformance::case_data;
    for kind in [OpKind::LayerNormBackward, OpKind::BatchNormBackward] {
        for spec in kind.cases() {
            if spec.inputs()[1].numel() == 0 {
                // No values: no forward statistics to hold.
                continue;
            }
            let data = case_data(&spec, 0x5eed);
            let sigs = spec.inputs();
            let x = &data.values[1];
            let (saved, forward) = match &spec {
                OpSpec::LayerNormBackward(s) => (
                    sigs.iter().position(|i| i.name == "stats"),
                    OpSpec::LayerNorm(LayerNormSpec {
                        rms: s.rms,
                        save_stats: true,
                        ..LayerNormSpec::new(s.dtype, &s.shape, 1e-5)
                    }),
                ),
                OpSpec::BatchNormBackward(s) => (
                    sigs.iter().position(|i| i.name == "save"),
                    OpSpec::BatchNorm(BatchNormSpec {
                        dtype: s.dtype,
                        shape: s.shape.clone(),
                        eps: 1e-5,
                        momentum: 0.0,
                        training: true,
                    }),
                ),
                other => panic!("not a backward norm: {other:?}"),
            };
            let forward_inputs: Vec<Vec<f64>> = forward
                .inputs()
                .iter()
                .map(|sig| match sig.name.as_str() {
                    "x" => x.clone(),
                    "running_var" | "weight" => vec![1.0; sig.numel()],
                    _ => vec![0.0; sig.numel()],
                })
                .collect();
            let refs: Vec<&[f64]> = forward_inputs.iter().map(|v| v.as_slice()).collect();
            let out = run(&forward, &refs);
            let stats = match &forward {
                OpSpec::BatchNorm(_) => &out[1],
                _ => &out[out.len() - 1],
            };
            let want: Vec<f64> = stats
                .iter()
                .map(|&v| round_to(spec.inputs()[1].dtype, v))
                .collect();
            let k = saved.expect("a statistics input");
            // NaN statistics (of rows with no features) equal NaN.
            let same = |a: &f64, b: &f64| a == b || a.is_nan() && b.is_nan();
            assert!(
                data.values[k].len() == want.len()
                    && data.values[k].iter().zip(&want).all(|(a, b)| same(a, b)),
                "{}: {:?} vs {want:?}",
                serde_json::to_string(&spec).unwrap(),
                data.values[k]
            );
        }
    }
}
