//! Cases for reductions, softmax (+ backward), cross-entropy, layer norm and batch norm (+ backward).
//!
//! Row lengths 1, 7, 255 and 1000 (below, at and past a 256-invocation group), reduced
//! axes in the middle, several and non-adjacent, every dtype the specs accept, and a
//! few sizes large enough to take the split (partials + combine) path of the GPU and
//! CPU schedules.

use crate::spec::*;
use kernelc_ir::ScalarType::{self, *};

/// The cases of `kind` (one of this family's kinds).
pub fn cases(kind: OpKind) -> Vec<OpSpec> {
    match kind {
        OpKind::Reduce => reduce(),
        OpKind::Softmax => softmax(),
        OpKind::SoftmaxBackward => softmax_backward(),
        OpKind::CrossEntropy => cross_entropy(),
        OpKind::LayerNorm => layer_norm(),
        OpKind::LayerNormBackward => layer_norm_backward(),
        OpKind::BatchNorm => batch_norm(),
        OpKind::BatchNormBackward => batch_norm_backward(),
        _ => Vec::new(),
    }
}

fn red(
    func: ReduceFn,
    dtype: ScalarType,
    shape: &[usize],
    axes: &[usize],
    keepdim: bool,
    index_dtype: Option<ScalarType>,
    accumulate: bool,
) -> OpSpec {
    OpSpec::Reduce(ReduceSpec {
        func,
        dtype,
        shape: shape.to_vec(),
        axes: axes.to_vec(),
        keepdim,
        index_dtype,
        accumulate,
    })
}

fn reduce() -> Vec<OpSpec> {
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
    ]
}

fn softmax() -> Vec<OpSpec> {
    [
        (F32, vec![1], 0, false),
        (F32, vec![7, 255], 1, false),
        (F64, vec![3, 1000], 1, true),
        (F16, vec![4, 7, 5], 1, false),
        (Bf16, vec![2, 13, 3], 0, true),
        (F32, vec![5, 7], 1, true),
        (F32, vec![5, 8], 0, false),
    ]
    .into_iter()
    .map(|(dtype, shape, axis, log)| {
        OpSpec::Softmax(SoftmaxSpec {
            dtype,
            shape,
            axis,
            log,
        })
    })
    .collect()
}

fn softmax_backward() -> Vec<OpSpec> {
    [
        (F32, vec![1], 0, false),
        (F32, vec![6, 255], 1, false),
        (F64, vec![3, 7, 4], 1, true),
        (F16, vec![2, 1000], 1, false),
        (Bf16, vec![5, 7], 0, true),
    ]
    .into_iter()
    .map(|(dtype, shape, axis, log)| {
        OpSpec::SoftmaxBackward(SoftmaxBackwardSpec {
            dtype,
            shape,
            axis,
            log,
        })
    })
    .collect()
}

fn cross_entropy() -> Vec<OpSpec> {
    [
        (F32, U32, 1, 1, false, true, true),
        (F32, I32, 8, 7, true, true, false),
        (F64, F32, 5, 255, false, false, true),
        (F16, U32, 3, 1000, true, true, true),
        (Bf16, I32, 6, 13, false, false, false),
    ]
    .into_iter()
    .map(
        |(dtype, index_dtype, batch, classes, divide_by_batch, grad, probs)| {
            OpSpec::CrossEntropy(CrossEntropySpec {
                dtype,
                index_dtype,
                batch,
                classes,
                divide_by_batch,
                grad,
                probs,
            })
        },
    )
    .collect()
}

fn layer_norm() -> Vec<OpSpec> {
    // (dtype, shape, rms, weight, bias, residual, save_stats)
    [
        (F32, vec![1, 1], false, true, true, false, true),
        (F32, vec![7, 255], false, true, true, false, true),
        (F64, vec![3, 1000], true, true, false, false, true),
        (F16, vec![4, 7], false, true, true, true, true),
        (Bf16, vec![2, 3, 13], true, false, false, true, false),
        (F32, vec![5, 7], false, false, false, false, false),
    ]
    .into_iter()
    .map(|(dtype, shape, rms, weight, bias, residual, save_stats)| {
        OpSpec::LayerNorm(LayerNormSpec {
            dtype,
            shape,
            eps: 1e-5,
            rms,
            weight,
            bias,
            residual,
            save_stats,
        })
    })
    .collect()
}

fn layer_norm_backward() -> Vec<OpSpec> {
    // (dtype, shape, rms, weight, bias, param_grads)
    [
        (F32, vec![1, 1], false, true, true, true),
        (F32, vec![7, 255], false, true, true, true),
        (F64, vec![3, 1000], true, true, false, true),
        (F16, vec![4, 7], false, false, true, true),
        (Bf16, vec![2, 3, 13], true, false, false, false),
        // Many rows of few columns: the parameter gradients split on GPU caps.
        (F32, vec![600, 40], false, true, true, true),
        // One column: the parameter gradients read 4 rows per step (gathered stats).
        (F32, vec![8, 1], false, true, true, true),
    ]
    .into_iter()
    .map(|(dtype, shape, rms, weight, bias, param_grads)| {
        OpSpec::LayerNormBackward(LayerNormBackwardSpec {
            dtype,
            shape,
            rms,
            weight,
            bias,
            param_grads,
        })
    })
    .collect()
}

fn batch_norm() -> Vec<OpSpec> {
    [
        (F32, vec![1, 1], true),
        (F32, vec![2, 3, 4, 4], true),
        (F64, vec![3, 5, 7], true),
        (F16, vec![2, 3, 5, 5], false),
        (Bf16, vec![4, 2, 3], true),
        (F32, vec![7, 4], false),
        // Few channels of many elements: the statistics split on both schedules.
        (F32, vec![4, 2, 64, 64], true),
        // No spatial axes: channels are adjacent columns.
        (F32, vec![16, 8], true),
    ]
    .into_iter()
    .map(|(dtype, shape, training)| {
        OpSpec::BatchNorm(BatchNormSpec {
            dtype,
            shape,
            eps: 1e-5,
            momentum: 0.1,
            training,
        })
    })
    .collect()
}

fn batch_norm_backward() -> Vec<OpSpec> {
    [
        (F32, vec![1, 1], true),
        (F32, vec![2, 3, 4, 4], true),
        (F64, vec![3, 5, 7], false),
        (F16, vec![2, 3, 5, 5], true),
        (Bf16, vec![4, 2, 3], true),
        (F32, vec![4, 2, 64, 64], true),
        (F16, vec![9, 4], true),
    ]
    .into_iter()
    .map(|(dtype, shape, param_grads)| {
        OpSpec::BatchNormBackward(BatchNormBackwardSpec {
            dtype,
            shape,
            param_grads,
        })
    })
    .collect()
}
