//! f64 references of the training family (formulas in [`super`]).

use super::spec::{AdamCoefficients, AdamSpec, DropoutSpec};
use crate::lower::math::compute_type;
use crate::reference::{attribute, round_to};
use crate::rng;

pub(super) fn dropout(s: &DropoutSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    // Derived on the host in f64 and rounded once, as the kernel receives it.
    let scale = attribute(s.dtype, 1.0 / (1.0 - s.p));
    let mask: Vec<f64> = (0..x.len())
        .map(|k| {
            if rng::dropout_keep(
                s.rng,
                s.seed,
                s.step,
                s.p,
                s.offset.wrapping_add(k as u64) as u32,
            ) {
                scale
            } else {
                0.0
            }
        })
        .collect();
    let y = x.iter().zip(&mask).map(|(&v, &m)| v * m).collect();
    if s.mask {
        vec![y, mask]
    } else {
        vec![y]
    }
}

pub(super) fn adam(s: &AdamSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (param, grad, m, v) = (i[0], i[1], i[2], i[3]);
    let AdamCoefficients {
        lr,
        beta1,
        one_minus_beta1,
        beta2,
        one_minus_beta2,
        inv_correction1,
        inv_correction2,
        eps,
        weight_decay,
    } = s.coefficients().map(|v| attribute(s.dtype, v));
    // `weight_decay = 0` has no decay term at all (PyTorch's Adam adds `wd·param` only
    // when `wd ≠ 0`, AdamW multiplies by `1 − lr·0`): `0·param` would make an infinite
    // param NaN. Whether there is one is the spec's structural class, as in the kernel.
    let decays = s.weight_decay != 0.0;
    let ct = compute_type(s.dtype);
    let n = param.len();
    let (mut p_out, mut m_out, mut v_out) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    for k in 0..n {
        let p = param[k];
        let g = if decays && !s.decoupled {
            grad[k] + weight_decay * p
        } else {
            grad[k]
        };
        // The new moments are values of the compute type (the kernels store them and
        // step with them, as PyTorch steps with its updated state): a `v` that lands
        // in f32's underflow range as −0 has the square root 0 there, not NaN.
        let mk = round_to(ct, beta1 * m[k] + one_minus_beta1 * g);
        let vk = round_to(ct, beta2 * v[k] + one_minus_beta2 * g * g);
        let mhat = mk * inv_correction1;
        let vhat = vk * inv_correction2;
        let mut step = mhat / (vhat.sqrt() + eps);
        if decays && s.decoupled {
            step += weight_decay * p;
        }
        p_out[k] = p - lr * step;
        m_out[k] = mk;
        v_out[k] = vk;
    }
    vec![p_out, m_out, v_out]
}
