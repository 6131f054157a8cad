//! Training ops: dropout and Adam / AdamW.
//!
//! Both are one pointwise launch ([`crate::lower::pointwise`]): every element is read once and
//! each output written once by the invocation that read it, so the in-place forms
//! (Adam's `param`, `m`, `v`; the runtime may alias an output with its input) are safe.
//!
//! * **dropout** draws the keep bit of element `i` from the counter RNG of
//!   [`crate::rng`] in 32-bit integer IR ([`crate::lower::rng::rng_keep`]: both
//!   schemes, the stream word folded on the host), so every target produces the
//!   reference's mask bit for bit; `mask = keep ? 1/(1−p) : 0` and `y = x · mask`
//!   (so a dropped NaN or ±∞ is NaN, as in PyTorch). The stream word, the integer threshold and the
//!   scale are uniforms, so new seeds and steps compile nothing. `p = 0` keeps
//!   everything and needs no random bits; a `p` so close to 1 that its threshold is
//!   `2^24` drops everything: both are structural classes
//!   ([`DropoutSpec::class`](crate::spec::DropoutSpec::class)) that lower to a plain
//!   copy / constant kernel.
//! * **adam**: every attribute and the step-dependent constants (`1/(1−β1ᵗ)`,
//!   `1/(1−β2ᵗ)`: [`AdamSpec::coefficients`], which the reference uses too) are
//!   uniforms, so a training loop compiles once; the update is a handful of FMAs per
//!   element on
//!   `vector_width`-lane vectors. Whether there is weight decay (and which kind)
//!   shapes the kernel and stays in the cache key.

use crate::lower::math::{bind, compute_type, Num};
use crate::lower::pointwise::{contiguous_lanes, pointwise};
use crate::lower::rng::rng_keep;
use crate::lower::{LowerError, Plan, TargetCaps, Uniforms};
use crate::spec::*;

pub(super) fn dropout(spec: &DropoutSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Dropout(spec.clone());
    let numel = op.outputs().first().map_or(1, TensorSig::numel);
    let ty = compute_type(spec.dtype);
    let class = spec.class();
    let with_mask = spec.mask;
    // The random bits are scalar u32 work; the decided cases are plain vector copies.
    let (lanes, params) = match class {
        DropoutClass::KeepAll | DropoutClass::DropAll => {
            (contiguous_lanes(caps, numel), Vec::new())
        }
        DropoutClass::Random => (1, Uniforms::new(&op.uniforms()).params()?),
    };
    let items = (numel, lanes, ty);
    pointwise(&op, caps, items, &params, |f, index, values, p| {
        let n = Num { ty, lanes };
        let x = values.into_iter().next().unwrap_or_else(|| n.lit(0.0));
        let (y, mask) = match class {
            DropoutClass::KeepAll => (x, n.lit(1.0)),
            // `x · 0`, not 0: a dropped NaN or ±∞ is NaN (as PyTorch's `p = 1`).
            DropoutClass::DropAll => (x * n.lit(0.0), n.lit(0.0)),
            DropoutClass::Random => {
                // Uniforms: stream word, threshold, scale (see `DropoutSpec::uniforms`).
                let (stream, threshold, scale) = (p[0].clone(), p[1].clone(), p[2].clone());
                // The stream index wraps at 2^32, as the reference's does.
                let at = match spec.offset as u32 {
                    0 => index.clone(),
                    offset => index.clone() + offset,
                };
                let keep = rng_keep(f, spec.rng, stream, threshold, at);
                let mask = f.let_("mask", keep.select(scale, n.lit(0.0)));
                (x * mask.clone(), mask)
            }
        };
        if with_mask {
            vec![y, mask]
        } else {
            vec![y]
        }
    })
}

pub(super) fn adam(spec: &AdamSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Adam(spec.clone());
    let ty = compute_type(spec.dtype);
    let lanes = contiguous_lanes(caps, spec.len);
    let params = Uniforms::new(&op.uniforms()).params()?;
    let items = (spec.len, lanes, ty);
    let decay = spec.weight_decay != 0.0;
    pointwise(&op, caps, items, &params, |f, _, values, p| {
        let n = Num { ty, lanes };
        // Uniforms in `AdamSpec::uniforms` order.
        let u = |i: usize| n.splat(p[i].clone());
        let (lr, beta1, one_minus_beta1, beta2, one_minus_beta2) = (u(0), u(1), u(2), u(3), u(4));
        let (inv_c1, inv_c2, eps) = (u(5), u(6), u(7));
        let mut v = values.into_iter();
        let mut next = || v.next().unwrap_or_else(|| n.lit(0.0));
        let (param, grad, m, vv) = (next(), next(), next(), next());
        let param = bind(f, "p", param);
        let g = if decay && !spec.decoupled {
            f.let_("g", grad + u(8) * param.clone())
        } else {
            bind(f, "g", grad)
        };
        let m1 = f.let_("m1", beta1 * m + one_minus_beta1 * g.clone());
        let v1 = f.let_("v1", beta2 * vv + one_minus_beta2 * g.clone() * g);
        let m_hat = m1.clone() * inv_c1;
        let v_hat = v1.clone() * inv_c2;
        let mut step = m_hat / (v_hat.sqrt() + eps);
        if decay && spec.decoupled {
            step = step + u(8) * param.clone();
        }
        vec![param - lr * step, m1, v1]
    })
}
