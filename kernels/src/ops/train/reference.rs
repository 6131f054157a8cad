//! f64 references of the training family (formulas in [`super`]).

use super::spec::{AdamSpec, DropoutSpec};
use crate::rng;

pub(super) fn dropout(s: &DropoutSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let x = i[0];
    let scale = 1.0 / (1.0 - s.p);
    let mask: Vec<f64> = (0..x.len())
        .map(|k| {
            if rng::dropout_keep(s.rng, s.seed, s.step, s.p, k as u32) {
                scale
            } else {
                0.0
            }
        })
        .collect();
    let y = x
        .iter()
        .zip(&mask)
        .map(|(&v, &m)| if m != 0.0 { v / (1.0 - s.p) } else { 0.0 })
        .collect();
    if s.mask {
        vec![y, mask]
    } else {
        vec![y]
    }
}

pub(super) fn adam(s: &AdamSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (param, grad, m, v) = (i[0], i[1], i[2], i[3]);
    let t = s.step.min(i32::MAX as u64) as i32;
    let c1 = 1.0 - s.beta1.powi(t);
    let c2 = 1.0 - s.beta2.powi(t);
    let n = param.len();
    let (mut p_out, mut m_out, mut v_out) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    for k in 0..n {
        let p = param[k];
        let g = if s.decoupled {
            grad[k]
        } else {
            grad[k] + s.weight_decay * p
        };
        let mk = s.beta1 * m[k] + (1.0 - s.beta1) * g;
        let vk = s.beta2 * v[k] + (1.0 - s.beta2) * g * g;
        let mhat = mk / c1;
        let vhat = vk / c2;
        let decay = if s.decoupled { s.weight_decay * p } else { 0.0 };
        p_out[k] = p - s.lr * (mhat / (vhat.sqrt() + s.eps) + decay);
        m_out[k] = mk;
        v_out[k] = vk;
    }
    vec![p_out, m_out, v_out]
}
