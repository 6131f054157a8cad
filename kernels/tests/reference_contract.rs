//! What the f64 references promise beyond the textbook formulas, each rule checked
//! where an op family once broke it: integer results wrap as the kernels' do, roundings
//! to f16/bf16 are single and exact, attributes are used as the kernels receive them,
//! and normalisation statistics stay accurate when the mean dwarfs the spread.

use kernelc_ir::ScalarType::{self, *};
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

#[test]
fn gemm_input_rounding_rounds_once() {
    let mut g = GemmSpec::new(F32, 1, 1, 1);
    g.input_rounding = Some(Bf16);
    assert_eq!(
        run1(&OpSpec::Gemm(g.clone()), &[&[ABOVE_BF16_TIE], &[1.0]]),
        [1.0078125]
    );
    g.input_rounding = Some(F16);
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
