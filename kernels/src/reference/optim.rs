//! One Adam / AdamW step, elementwise, with `t = step`:
//!
//! ```text
//! g  = grad + (decoupled ? 0 : weight_decay · param)
//! m' = β1·m + (1 − β1)·g
//! v' = β2·v + (1 − β2)·g²
//! m̂  = m' / (1 − β1ᵗ),   v̂ = v' / (1 − β2ᵗ)
//! param' = param − lr · (m̂ / (√v̂ + eps) + (decoupled ? weight_decay · param : 0))
//! ```

use crate::spec::AdamSpec;

pub(crate) fn adam(s: &AdamSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
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
