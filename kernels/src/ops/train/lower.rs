//! Training ops: dropout and Adam / AdamW.
//!
//! Both are one pointwise launch ([`crate::lower::pointwise`]): every element is read once and
//! each output written once by the invocation that read it, so the in-place forms
//! (Adam's `param`, `m`, `v`; the runtime may alias an output with its input) are safe.
//!
//! * **dropout** draws the keep bit of element `i` from the counter RNG of
//!   [`crate::rng`] in 32-bit integer IR ([`crate::lower::rng::rng_keep`]: both
//!   schemes, the stream key folded on the host), so every target produces the
//!   reference's mask bit for bit; `y = keep ? x · (1/(1−p)) : 0` and the optional
//!   `mask = keep ? 1/(1−p) : 0`. `p = 0` keeps everything and needs no random bits; a
//!   `p` so close to 1 that its threshold is `2^24` drops everything: both are
//!   decided on the host and lower to a plain copy / constant kernel.
//! * **adam**: the step-dependent constants (`1/(1−β1ᵗ)`, `1/(1−β2ᵗ)`) and every
//!   attribute are host literals; the update is a handful of FMAs per element on
//!   `vector_width`-lane vectors.

use crate::lower::math::{bind, compute_type, Num};
use crate::lower::pointwise::{contiguous_lanes, pointwise, Pointwise, Port};
use crate::lower::rng::rng_keep;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::rng::dropout_threshold;
use crate::spec::*;

/// `2^24`: a dropout threshold this large drops every element.
const ALL_DROPPED: u32 = 1 << 24;

fn ports(sigs: Vec<TensorSig>, make: fn(TensorSig, usize) -> Port) -> Vec<Port> {
    sigs.into_iter()
        .enumerate()
        .map(|(i, s)| make(s, i))
        .collect()
}

pub(super) fn dropout(spec: &DropoutSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Dropout(spec.clone());
    let numel = op.outputs().first().map_or(1, TensorSig::numel);
    let inputs = ports(op.inputs(), Port::input);
    let outputs = ports(op.outputs(), Port::output);
    let ty = compute_type(spec.dtype);
    let threshold = dropout_threshold(spec.p);
    let scale = 1.0 / (1.0 - spec.p);
    let with_mask = spec.mask;
    // The random bits are scalar u32 work; the decided cases are plain vector copies.
    let lanes = if threshold == 0 || threshold >= ALL_DROPPED {
        contiguous_lanes(caps, numel)
    } else {
        1
    };
    let name = op.name();
    let launch = Pointwise {
        name: &name,
        numel,
        lanes,
        ty,
        inputs: &inputs,
        outputs: &outputs,
    };
    pointwise(launch, caps, |f, index, values| {
        let n = Num { ty, lanes };
        let x = values.into_iter().next().unwrap_or_else(|| n.lit(0.0));
        let (y, mask) = if threshold == 0 {
            (x, n.lit(1.0))
        } else if threshold >= ALL_DROPPED {
            (n.lit(0.0), n.lit(0.0))
        } else {
            let keep = rng_keep(f, spec.rng, spec.seed, spec.step, spec.p, index.clone());
            let keep = f.let_("keep", keep);
            (
                keep.clone().select(x * n.lit(scale), n.lit(0.0)),
                keep.select(n.lit(scale), n.lit(0.0)),
            )
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
    let inputs = ports(op.inputs(), Port::input);
    let outputs = ports(op.outputs(), Port::output);
    let ty = compute_type(spec.dtype);
    let lanes = contiguous_lanes(caps, spec.len);
    // Bias corrections on the host, as the reference computes them.
    let t = spec.step.min(i32::MAX as u64) as i32;
    let inv_c1 = 1.0 / (1.0 - spec.beta1.powi(t));
    let inv_c2 = 1.0 / (1.0 - spec.beta2.powi(t));
    let name = op.name();
    let launch = Pointwise {
        name: &name,
        numel: spec.len,
        lanes,
        ty,
        inputs: &inputs,
        outputs: &outputs,
    };
    pointwise(launch, caps, |f, _, values| {
        let n = Num { ty, lanes };
        let mut v = values.into_iter();
        let mut next = || v.next().unwrap_or_else(|| n.lit(0.0));
        let (p, grad, m, vv) = (next(), next(), next(), next());
        let p = bind(f, "p", p);
        let decay = spec.weight_decay != 0.0;
        let g = if decay && !spec.decoupled {
            f.let_("g", grad + n.lit(spec.weight_decay) * p.clone())
        } else {
            bind(f, "g", grad)
        };
        let m1 = f.let_(
            "m1",
            n.lit(spec.beta1) * m + n.lit(1.0 - spec.beta1) * g.clone(),
        );
        let v1 = f.let_(
            "v1",
            n.lit(spec.beta2) * vv + n.lit(1.0 - spec.beta2) * g.clone() * g,
        );
        let m_hat = m1.clone() * n.lit(inv_c1);
        let v_hat = v1.clone() * n.lit(inv_c2);
        let mut step = m_hat / (v_hat.sqrt() + n.lit(spec.eps));
        if decay && spec.decoupled {
            step = step + n.lit(spec.weight_decay) * p.clone();
        }
        vec![p - n.lit(spec.lr) * step, m1, v1]
    })
}
