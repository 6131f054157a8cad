//! Conformance cases of the normalisation family.

use super::spec::*;
use crate::conformance::inputs::{drawn, Domain};
use crate::op::Op;
use crate::reference::round_to;
use crate::spec::TensorSig;
use kernelc_ir::ScalarType::{self, *};

pub(super) fn layer_norm() -> Vec<LayerNormSpec> {
    // (dtype, shape, rms, weight, bias, residual, save_stats)
    [
        (F32, vec![1, 1], false, true, true, false, true),
        (F32, vec![7, 255], false, true, true, false, true),
        (F64, vec![3, 1000], true, true, false, false, true),
        (F16, vec![4, 7], false, true, true, true, true),
        (Bf16, vec![2, 3, 13], true, false, false, true, false),
        (F32, vec![5, 7], false, false, false, false, false),
        // No rows: nothing. Rows of no features: the statistics of nothing (NaN).
        (F32, vec![0, 6], false, true, true, true, true),
        (F32, vec![3, 0], false, true, true, false, true),
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
            epilogue: None,
        },
    )
    .chain(layer_norm_epilogues())
    .collect()
}

/// Layer norms with an elementwise epilogue on `y` (a graph's fused `layer_norm(x)`
/// followed by elementwise nodes).
fn layer_norm_epilogues() -> Vec<LayerNormSpec> {
    use crate::ops::{BinaryFn, FusedNode::*, FusedSpec, UnaryFn};
    let epilogue = |dtype, inputs, nodes| {
        Some(FusedSpec {
            dtype,
            inputs,
            nodes,
        })
    };
    vec![
        // adaLN: y·(1 + s) + t, the scale per row, the shift per column.
        LayerNormSpec {
            weight: true,
            bias: true,
            epilogue: epilogue(
                F32,
                vec![vec![6, 40], vec![6, 1], vec![40]],
                vec![
                    Input(0),
                    Input(1),
                    Input(2),
                    Scalar {
                        func: BinaryFn::Add,
                        x: 1,
                        scalar: 1.0,
                        reversed: false,
                    },
                    Binary {
                        func: BinaryFn::Mul,
                        a: 0,
                        b: 3,
                    },
                    Binary {
                        func: BinaryFn::Add,
                        a: 4,
                        b: 2,
                    },
                ],
            ),
            ..LayerNormSpec::new(F32, &[6, 40], 1e-5)
        },
        // RMS norm of x + residual then SiLU, bf16, with `sum` and `stats` beside y.
        LayerNormSpec {
            rms: true,
            residual: true,
            save_stats: true,
            epilogue: epilogue(
                Bf16,
                vec![vec![3, 5, 24]],
                vec![
                    Input(0),
                    Unary {
                        func: UnaryFn::Silu,
                        x: 0,
                    },
                ],
            ),
            ..LayerNormSpec::new(Bf16, &[3, 5, 24], 1e-5)
        },
        // Short ragged rows, f16: y·g with g of y's shape (a gate), a per-call eps.
        LayerNormSpec {
            weight: true,
            epilogue: epilogue(
                F16,
                vec![vec![7, 3], vec![7, 3]],
                vec![
                    Input(0),
                    Input(1),
                    Binary {
                        func: BinaryFn::Mul,
                        a: 0,
                        b: 1,
                    },
                ],
            ),
            ..LayerNormSpec::new(F16, &[7, 3], 1e-3)
        },
    ]
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
        // No rows: the parameter gradients are sums of nothing (zeros).
        (F32, vec![0, 5], false, true, true, true),
        (F32, vec![4, 0], false, true, true, true),
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
        // No values per channel in inference: nothing; no channels: nothing.
        (F32, vec![0, 3, 4], false),
        (F32, vec![2, 0, 5], true),
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
        // No values per channel: dx is empty, the parameter gradients are zeros.
        (F32, vec![0, 3, 2], true),
        (F32, vec![4, 3, 0], true),
    ]
    .into_iter()
    .map(|(dtype, shape, param_grads)| BatchNormBackwardSpec {
        dtype,
        shape,
        param_grads,
        given_grads: None,
    })
    // `dx` of a piece of a larger batch, its parameter gradients given.
    .chain(
        [(F32, vec![2, 3, 4, 4], 96), (F16, vec![3, 2, 5], 45)].map(|(dtype, shape, m)| {
            BatchNormBackwardSpec {
                dtype,
                shape,
                param_grads: false,
                given_grads: Some(m),
            }
        }),
    )
    .collect()
}

/// The forward's `eps` behind the saved statistics of the backward cases (the usual
/// default).
const SAVED_EPS: f64 = 1e-5;

/// Input `x` (input 1 of both backward ops) of a case, as the device stores it.
fn stored_x(dtype: ScalarType, x: &TensorSig, domain: Domain, seed: u64) -> Vec<f64> {
    drawn(domain, seed, 1, x.numel())
        .into_iter()
        .map(|v| round_to(dtype, v))
        .collect()
}

/// The `stats` input of a layer-norm backward case: `[μ, 1/σ]` per row as the forward
/// computes them from the case's `x`, so the backward runs on what a forward produced
/// (unrelated statistics make `x̂` arbitrary and the case meaningless).
pub(super) fn layer_norm_stats(s: &LayerNormBackwardSpec, seed: u64) -> Vec<f64> {
    let sig = &s.inputs()[1];
    let x = stored_x(s.dtype, sig, s.domain(sig), seed);
    let forward = LayerNormSpec {
        rms: s.rms,
        save_stats: true,
        ..LayerNormSpec::new(s.dtype, &s.shape, SAVED_EPS)
    };
    // `stats` is the forward's last output.
    forward.reference(&[&x]).pop().unwrap_or_default()
}

/// The `save` input of a batch-norm backward case: `[μ_c, 1/σ_c]` per channel as the
/// training forward computes them from the case's `x`.
pub(super) fn batch_norm_save(s: &BatchNormBackwardSpec, seed: u64) -> Vec<f64> {
    let sig = &s.inputs()[1];
    let x = stored_x(s.dtype, sig, s.domain(sig), seed);
    let (ones, zeros) = (vec![1.0; s.channels()], vec![0.0; s.channels()]);
    let forward = BatchNormSpec {
        dtype: s.dtype,
        shape: s.shape.clone(),
        eps: SAVED_EPS,
        momentum: 0.0,
        training: true,
    };
    // Outputs: y, save, running_mean, running_var.
    forward
        .reference(&[&x, &ones, &zeros, &zeros, &ones])
        .into_iter()
        .nth(1)
        .unwrap_or_default()
}
