//! Conformance cases of the reduction family: reduced axes in the middle, several
//! and non-adjacent, every dtype, and sizes large enough to take the split path.

use super::spec::*;
use kernelc_ir::ScalarType::{self, *};

fn red(
    func: ReduceFn,
    dtype: ScalarType,
    shape: &[usize],
    axes: &[usize],
    keepdim: bool,
    index_dtype: Option<ScalarType>,
    accumulate: bool,
) -> ReduceSpec {
    ReduceSpec {
        func,
        dtype,
        shape: shape.to_vec(),
        axes: axes.to_vec(),
        keepdim,
        index_dtype,
        accumulate,
    }
}

pub(super) fn reduce() -> Vec<ReduceSpec> {
    use ReduceFn::*;
    vec![
        red(Sum, F32, &[1], &[0], false, None, false),
        red(Sum, F32, &[7, 255], &[1], false, None, false),
        red(Mean, F64, &[4, 1000], &[1], true, None, false),
        red(Sum, F16, &[3, 7, 5], &[1], true, None, false),
        red(Mean, Bf16, &[5, 1, 7], &[1], false, None, false),
        red(Max, Bf16, &[6, 13, 4], &[0, 2], false, None, false),
        red(Min, I32, &[5, 9], &[0], false, None, false),
        red(Max, F32, &[2, 3, 4, 5], &[0, 1, 2, 3], false, None, false),
        red(Sum, I32, &[1000, 3], &[0], false, None, true),
        red(Sum, U32, &[7, 3, 11], &[0, 2], true, None, true),
        red(ArgMax, I32, &[4, 100], &[1], false, Some(U32), false),
        red(ArgMin, F32, &[2, 3, 4], &[0, 2], false, Some(I32), false),
        red(ArgMax, Bf16, &[7, 1000], &[1], false, Some(F32), false),
        red(ArgMin, U32, &[33, 5], &[0], true, Some(U32), false),
        // Large enough to split into partial states on both schedules.
        red(Sum, F32, &[20_000], &[0], false, None, true),
        // A column reduction that splits on GPU caps.
        red(Mean, F32, &[8192, 2], &[0], false, None, false),
        // Columns in multiples of 4: each step loads one element of 4 adjacent slices.
        red(ArgMax, I32, &[6, 8], &[0], false, Some(I32), false),
        red(Sum, F16, &[5, 12], &[0], false, None, true),
        red(Min, F64, &[3, 7, 4], &[1], true, None, false),
        // Every integer width: sums wrap at the dtype's width; i64 arg indices.
        red(Sum, I64, &[7, 33], &[1], false, None, false),
        red(Sum, U8, &[5, 40], &[1], false, None, false),
        red(Max, I8, &[6, 13, 4], &[0, 2], false, None, false),
        red(Min, U16, &[9, 8], &[0], true, None, false),
        red(Sum, I16, &[300, 3], &[0], false, None, true),
        red(ArgMax, F32, &[4, 100], &[1], false, Some(I64), false),
        red(ArgMin, I64, &[33, 5], &[0], false, Some(I64), false),
        red(Max, I64, &[2, 3, 4, 5], &[0, 1, 2, 3], false, None, false),
        // NaN-propagating extrema (NaN itself: runtime/tests/specials.rs).
        red(MaxNan, F32, &[7, 255], &[1], false, None, false),
        red(MinNan, F16, &[6, 13, 4], &[0, 2], true, None, false),
        red(MaxNan, I32, &[8192, 2], &[0], false, None, false),
        red(MinNan, F64, &[20_000], &[0], false, None, false),
        // Empty axes give the identity (sum 0, max −∞ or the least integer, min +∞
        // or the greatest), mean NaN; an accumulated sum keeps the prior. An empty
        // kept axis: nothing at all.
        red(Sum, F32, &[3, 0], &[1], false, None, false),
        red(Mean, F32, &[0, 4], &[0], true, None, false),
        red(Max, F32, &[2, 0, 3], &[1], false, None, false),
        red(Min, I32, &[4, 0], &[1], false, None, false),
        red(Max, U8, &[0, 2], &[0], false, None, false),
        red(Sum, I64, &[2, 0], &[0, 1], false, None, true),
        red(Sum, F32, &[0, 5], &[1], false, None, false),
    ]
}
