//! Conformance cases of the softmax family: row lengths 1, 7, 255 and 1000, middle
//! axes, every float dtype.

use super::spec::*;
use kernelc_ir::ScalarType::*;

pub(super) fn softmax() -> Vec<SoftmaxSpec> {
    [
        (F32, vec![1], 0, false),
        (F32, vec![7, 255], 1, false),
        (F64, vec![3, 1000], 1, true),
        (F16, vec![4, 7, 5], 1, false),
        (Bf16, vec![2, 13, 3], 0, true),
        (F32, vec![5, 7], 1, true),
        (F32, vec![5, 8], 0, false),
        (F32, vec![3, 0], 1, false),
    ]
    .into_iter()
    .map(|(dtype, shape, axis, log)| SoftmaxSpec {
        dtype,
        shape,
        axis,
        log,
    })
    .collect()
}

pub(super) fn softmax_backward() -> Vec<SoftmaxBackwardSpec> {
    [
        (F32, vec![1], 0, false),
        (F32, vec![6, 255], 1, false),
        (F64, vec![3, 7, 4], 1, true),
        (F16, vec![2, 1000], 1, false),
        (Bf16, vec![5, 7], 0, true),
        (F32, vec![0, 4], 1, true),
    ]
    .into_iter()
    .map(|(dtype, shape, axis, log)| SoftmaxBackwardSpec {
        dtype,
        shape,
        axis,
        log,
    })
    .collect()
}

pub(super) fn cross_entropy() -> Vec<CrossEntropySpec> {
    [
        (F32, U32, 1, 1, false, true, true),
        (F32, I32, 8, 7, true, true, false),
        (F64, F32, 5, 255, false, false, true),
        (F16, U32, 3, 1000, true, true, true),
        (Bf16, I32, 6, 13, false, false, false),
        // i64 targets (PyTorch's `cross_entropy`, rustd).
        (F32, I64, 9, 11, true, true, true),
        // No rows: nothing. No classes: every target is out of range (NaN loss).
        (F32, I32, 0, 5, true, true, true),
        (F32, I64, 4, 0, false, true, true),
    ]
    .into_iter()
    .map(
        |(dtype, index_dtype, batch, classes, divide_by_batch, grad, probs)| CrossEntropySpec {
            dtype,
            index_dtype,
            batch,
            classes,
            divide_by_batch,
            grad,
            probs,
        },
    )
    .collect()
}
