//! Conformance cases of the normalisation family.

use super::spec::*;
use kernelc_ir::ScalarType::*;

pub(super) fn layer_norm() -> Vec<LayerNormSpec> {
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
    .map(
        |(dtype, shape, rms, weight, bias, residual, save_stats)| LayerNormSpec {
            dtype,
            shape,
            eps: 1e-5,
            rms,
            weight,
            bias,
            residual,
            save_stats,
        },
    )
    .collect()
}

pub(super) fn layer_norm_backward() -> Vec<LayerNormBackwardSpec> {
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
    .map(
        |(dtype, shape, rms, weight, bias, param_grads)| LayerNormBackwardSpec {
            dtype,
            shape,
            rms,
            weight,
            bias,
            param_grads,
        },
    )
    .collect()
}

pub(super) fn batch_norm() -> Vec<BatchNormSpec> {
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
    .map(|(dtype, shape, training)| BatchNormSpec {
        dtype,
        shape,
        eps: 1e-5,
        momentum: 0.1,
        training,
    })
    .collect()
}

pub(super) fn batch_norm_backward() -> Vec<BatchNormBackwardSpec> {
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
    .map(|(dtype, shape, param_grads)| BatchNormBackwardSpec {
        dtype,
        shape,
        param_grads,
    })
    .collect()
}
