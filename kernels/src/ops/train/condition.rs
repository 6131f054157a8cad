//! What Adam's conditioned tolerance is proportional to
//! ([`Op::condition`](crate::op::Op::condition)), per element and in units of `u`: each
//! output is a short formula of the inputs, so its condition is the sum of the
//! magnitudes of the rounded terms on its way, with the relative errors of the moments
//! carried through the square root and the division:
//!
//! * `m' = β₁m + (1 − β₁)g`: `3(|β₁m| + |1 − β₁|·Sg)`, `Sg = |grad| + 2|wd·p|`;
//! * `v' = β₂v + (1 − β₂)g²`: `3(|β₂v| + |1 − β₂|·(g² + 2|g|·Sg))`;
//! * `p' = p − lr·(m̂/(√v̂ + ε) + decay)`: `|p| + |lr|·(|q|·(Sm/|m'| + Sv/2|v'| + 4) +
//!   2|decay|) + |p'|` with `q = m̂/(√v̂ + ε)`.

use super::spec::{AdamCoefficients, AdamSpec};
use crate::lower::math::compute_type;
use crate::reference::attribute;
use crate::tolerance::OVERFLOWS;
use kernelc_ir::ScalarType;

/// The largest finite value of `dtype`'s compute type.
fn max_of(dtype: ScalarType) -> f64 {
    match compute_type(dtype) {
        ScalarType::F64 => f64::MAX,
        _ => f32::MAX as f64,
    }
}

pub(super) fn adam(s: &AdamSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (param, grad, m, v) = (i[0], i[1], i[2], i[3]);
    let c: AdamCoefficients = s.coefficients().map(|x| attribute(s.dtype, x));
    let n = param.len();
    let (mut sp, mut sm, mut sv) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let relative = |s: f64, x: f64| if x == 0.0 { 0.0 } else { s / x.abs() };
    // `weight_decay = 0` has no decay term (the reference's rule): no `0·p`, which is
    // NaN at an infinite parameter.
    let decays = s.weight_decay != 0.0;
    for k in 0..n {
        let p = param[k];
        let wd_p = if decays { c.weight_decay * p } else { 0.0 };
        let (g, sg) = if s.decoupled {
            (grad[k], grad[k].abs())
        } else {
            (grad[k] + wd_p, grad[k].abs() + 2.0 * wd_p.abs())
        };
        let mk = c.beta1 * m[k] + c.one_minus_beta1 * g;
        let vk = c.beta2 * v[k] + c.one_minus_beta2 * g * g;
        sm[k] = 3.0 * ((c.beta1 * m[k]).abs() + c.one_minus_beta1.abs() * sg);
        sv[k] =
            3.0 * ((c.beta2 * v[k]).abs() + c.one_minus_beta2.abs() * (g * g + 2.0 * g.abs() * sg));
        let q = mk * c.inv_correction1 / ((vk * c.inv_correction2).sqrt() + c.eps);
        let decay = if s.decoupled { wd_p } else { 0.0 };
        let p_out = p - c.lr * (q + decay);
        let sq = q.abs() * (relative(sm[k], mk) + relative(sv[k], vk) / 2.0 + 4.0);
        sp[k] = p.abs() + c.lr.abs() * (sq + 2.0 * decay.abs()) + p_out.abs();
        // Past the compute type's range on the way (g², the moments, the step; the
        // step before `lr` scales it too: at `lr = ±0` an infinite step makes the
        // kernel's `lr·q` NaN, as PyTorch's, where the exact value is 0).
        let limit = max_of(s.dtype);
        let on_the_way = [g, g * g, mk, vk, q, c.lr * q, decay, wd_p];
        if on_the_way.iter().any(|v| v.abs() > limit) {
            sp[k] = OVERFLOWS;
            sm[k] = OVERFLOWS;
            sv[k] = OVERFLOWS;
        }
    }
    vec![sp, sm, sv]
}
