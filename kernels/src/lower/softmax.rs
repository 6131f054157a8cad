//! Softmax / log-softmax along an axis, its backward, and cross-entropy.
//!
//! One launch each, one group of invocations per slice (see [`super::reduction`]):
//! rows of the last axis are walked by neighbouring invocations (coalesced) with
//! several short rows packed per workgroup; a middle axis is walked with neighbouring
//! invocations on neighbouring columns. Each group makes two passes over its slice:
//!
//! 1. fold the statistics: online softmax `(m, s)` (running max and rescaled sum, one
//!    `exp` per element, so the slice is read once for both), or the dot product of
//!    the backward; combine them with a shared-memory tree and broadcast;
//! 2. write every element from the totals (`e^{x−m}/s`, `x − m − ln s`, ...).
//!
//! The second read of a slice comes from cache. Statistics accumulate in f32 for
//! f16/bf16 and in f64 for f64.

use super::math::{bind, compute_type, Num};
use super::reduction::{
    lowest_finite, row_kernel, Buf, Monoid, PlanBuilder, SoftmaxStats, Sum, View,
};
use super::{LowerError, Plan, TargetCaps};
use crate::spec::{CrossEntropySpec, OpSpec, SoftmaxBackwardSpec, SoftmaxSpec};
use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

pub fn softmax(spec: &SoftmaxSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Softmax(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let view = View::of_shape(&spec.shape, |d| d == spec.axis)?;
    let num = Num::scalar(compute_type(spec.dtype));
    let stats = SoftmaxStats { ty: num.ty };
    let bufs = [Buf::input(&ins, 0), Buf::output(&outs, 0)];
    let dtype = spec.dtype;
    let mut plan = PlanBuilder::default();
    row_kernel(
        &mut plan,
        caps,
        &op.name(),
        view,
        &stats.types(),
        &bufs,
        |f, m, g, tree| {
            let (x, y) = (m[0], m[1]);
            let vn = g.num(num.ty);
            let acc = g.fold(f, &stats, |f, j| {
                let off = bind(f, "off", g.offset(j));
                vec![vn.load(x, dtype, off)]
            });
            let total = tree.reduce(f, g, &stats, &acc, true);
            let (max, sum) = (total[0].clone(), total[1].clone());
            // A slice whose maximum is −∞ (fully masked) gives 0 (log-softmax: −∞ = max).
            let dead = f.let_("dead", max.clone().lt(lowest_finite(num.ty)));
            let scale = if spec.log {
                max.clone() + sum.log()
            } else {
                num.lit(1.0) / sum
            };
            let scale = f.let_("scale", g.splat(scale));
            let max = bind(f, "max", g.splat(max));
            g.for_each(f, |f, j| {
                let off = bind(f, "off", g.offset(&j));
                let v = vn.load(x, dtype, off.clone());
                let value = if spec.log {
                    dead.clone().select(max.clone(), v - scale.clone())
                } else {
                    let e = (v - max.clone()).exp() * scale.clone();
                    dead.clone().select(vn.lit(0.0), e)
                };
                f.store(y, off, vn.narrow(value, dtype));
            });
        },
    )?;
    Ok(plan.finish())
}

pub fn softmax_backward(spec: &SoftmaxBackwardSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::SoftmaxBackward(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let view = View::of_shape(&spec.shape, |d| d == spec.axis)?;
    let num = Num::scalar(compute_type(spec.dtype));
    let sum = Sum { ty: num.ty, n: 1 };
    let bufs = [
        Buf::input(&ins, 0),
        Buf::input(&ins, 1),
        Buf::output(&outs, 0),
    ];
    let dtype = spec.dtype;
    let mut plan = PlanBuilder::default();
    row_kernel(
        &mut plan,
        caps,
        &op.name(),
        view,
        &sum.types(),
        &bufs,
        |f, m, g, tree| {
            let (y, dy, dx) = (m[0], m[1], m[2]);
            let vn = g.num(num.ty);
            // softmax: Σ dy·y; log-softmax: Σ dy.
            let acc = g.fold(f, &sum, |f, j| {
                let off = bind(f, "off", g.offset(j));
                let d = vn.load(dy, dtype, off.clone());
                vec![if spec.log {
                    d
                } else {
                    d * vn.load(y, dtype, off)
                }]
            });
            let total = tree.reduce(f, g, &sum, &acc, true);
            let total = bind(f, "total", g.splat(total[0].clone()));
            g.for_each(f, |f, j| {
                let off = bind(f, "off", g.offset(&j));
                let yv = vn.load(y, dtype, off.clone());
                let dv = vn.load(dy, dtype, off.clone());
                let value = if spec.log {
                    dv - yv.exp() * total.clone()
                } else {
                    yv * (dv - total.clone())
                };
                f.store(dx, off, vn.narrow(value, dtype));
            });
        },
    )?;
    Ok(plan.finish())
}

/// A target id as `(class, valid)`: `class` is `classes` (matching no column) when
/// the id is out of range; f32 ids truncate toward zero, as the reference reads them.
fn decode_target(f: &mut Body, t: E, index_dtype: ScalarType, classes: u32) -> (E, E) {
    let t = bind(f, "target", t);
    let valid = match index_dtype {
        ScalarType::U32 => t.clone().lt(classes),
        ScalarType::I32 => t.clone().ge(0i32) & t.clone().lt(classes as i32),
        // trunc(t) ∈ [0, classes) ⟺ −1 < t < classes; NaN fails both.
        _ => t.clone().gt(-1.0f32) & t.clone().lt(classes as f32),
    };
    let valid = f.let_("valid_target", valid);
    let as_u32 = if index_dtype == ScalarType::U32 {
        t
    } else {
        t.cast(ScalarType::U32)
    };
    let class = f.let_("class", valid.clone().select(as_u32, classes));
    (class, valid)
}

pub fn cross_entropy(spec: &CrossEntropySpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::CrossEntropy(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let view = View::of_shape(&[spec.batch, spec.classes], |d| d == 1)?;
    let classes = view.len();
    let num = Num::scalar(compute_type(spec.dtype));
    let stats = SoftmaxStats { ty: num.ty };
    let mut bufs = vec![
        Buf::input(&ins, 0),
        Buf::input(&ins, 1),
        Buf::output(&outs, 0),
    ];
    for i in 1..outs.len() {
        bufs.push(Buf::output(&outs, i));
    }
    let (dtype, index_dtype) = (spec.dtype, spec.index_dtype);
    let scale = if spec.divide_by_batch {
        1.0 / spec.batch as f64
    } else {
        1.0
    };
    let second_pass = spec.grad || spec.probs;
    let mut plan = PlanBuilder::default();
    row_kernel(
        &mut plan,
        caps,
        &op.name(),
        view,
        &stats.types(),
        &bufs,
        |f, m, g, tree| {
            let (logits, targets, loss) = (m[0], m[1], m[2]);
            let vn = g.num(num.ty);
            let grad = spec.grad.then(|| m[3]);
            let probs = spec.probs.then(|| m[if spec.grad { 4 } else { 3 }]);
            let acc = g.fold(f, &stats, |f, j| {
                let off = bind(f, "off", g.offset(j));
                vec![vn.load(logits, dtype, off)]
            });
            let total = tree.reduce(f, g, &stats, &acc, second_pass);
            let lse = f.let_("lse", total[0].clone() + total[1].clone().log());
            let t = Num::scalar(compute_type(index_dtype)).load(targets, index_dtype, g.q.clone());
            let (class, valid) = decode_target(f, t, index_dtype, classes);
            f.if_(g.leader.clone(), |f| {
                let picked = g.base.clone() + class.clone().min(classes - 1);
                let xt = num.load(logits, dtype, picked);
                let value = valid.select((lse.clone() - xt) * num.lit(scale), num.lit(f64::NAN));
                f.store(loss, g.q.clone(), num.narrow(value, dtype));
            });
            if !second_pass {
                return;
            }
            let lse = bind(f, "lse_v", g.splat(lse));
            let class = bind(f, "class_v", g.splat(class));
            g.for_each(f, |f, j| {
                let off = bind(f, "off", g.offset(&j));
                let p = f.let_("p", (vn.load(logits, dtype, off.clone()) - lse).exp());
                if let Some(probs) = probs {
                    f.store(probs, off.clone(), vn.narrow(p.clone(), dtype));
                }
                if let Some(grad) = grad {
                    let hot = vn.indicator(g.lane_index(&j).eq(class));
                    let value = (p - hot) * vn.lit(scale);
                    f.store(grad, off, vn.narrow(value, dtype));
                }
            });
        },
    )?;
    Ok(plan.finish())
}
