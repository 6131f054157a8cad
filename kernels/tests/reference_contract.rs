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
