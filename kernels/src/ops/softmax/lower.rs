//! Softmax / log-softmax along an axis, its backward, and cross-entropy.
//!
//! One launch each, one group of invocations per slice (see [`crate::lower::reduction`]):
//! rows of the last axis are walked by neighbouring invocations (coalesced) with
//! several short rows packed per workgroup; a middle axis is walked with neighbouring
//! invocations on neighbouring columns. Each group makes two passes over its slice:
//!
//! 1. fold the statistics: online softmax `(m, s)` (running max and rescaled sum, one
//!    `exp` per element, so the slice is read once for both), or the dot product of
//!    the backward; combine them with a shared-memory tree and broadcast;
//! 2. write every element from the totals (`e^{x−m}/s`, `x − m − ln s`, ...).
//!
//! The second read of a slice comes from cache. Softmax over short slices (at most 32
//! elements per invocation) instead keeps each invocation's elements in registers:
//! one read, one `exp` per element (see [`softmax_resident`]). On a CPU (f32/f64), where each `exp`
//! is a call and rows sit in cache, softmax instead takes three passes with one `exp`
//! per element (max; `e^{x−m}` into `y` and its sum; scale `y`). Statistics
//! accumulate in f32 for f16/bf16 and in f64 for f64.

use crate::lower::index::resolve_index;
use crate::lower::math::{bind, compute_type, Num};
use crate::lower::reduction::{
    lowest_finite, row_kernel, Buf, Extremum, Group, LogSumExp, Monoid, Step, Sum, Tree, View,
};
use crate::lower::{LowerError, Plan, PlanBuilder, TargetCaps, Uniforms};
use crate::ops::elementwise::{Epilogue, XSource};
use crate::spec::{CrossEntropySpec, OpSpec, SoftmaxBackwardSpec, SoftmaxSpec};
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

pub(super) fn softmax(spec: &SoftmaxSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Softmax(spec.clone());
    softmax_of(&op, spec, XSource::plain(spec.dtype), None, caps)
}

/// The plan of `op`, the softmax `spec` of the `x` that `source` reads (its first
/// inputs), with `epilogue` applied to each probability (its operands after those).
pub(super) fn softmax_of(
    op: &OpSpec,
    spec: &SoftmaxSpec,
    source: XSource,
    epilogue: Option<Epilogue>,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    if stash_exponentials(spec, caps) {
        return softmax_stashed(op, spec, source, epilogue, caps);
    }
    let outs = op.outputs();
    let view = View::of_shape(&spec.shape, |d| d == spec.axis)?;
    let num = Num::scalar(compute_type(spec.dtype));
    let stats = LogSumExp { ty: num.ty };
    let dtype = spec.dtype;
    x_kernel(
        op,
        caps,
        view,
        &stats,
        source,
        Buf::output(&outs, 0),
        epilogue,
        |f, x, y, g, tree| {
            if let Some(steps) = g.resident_steps(f, RESIDENT_ELEMENTS) {
                return softmax_resident(f, spec, (x, y), g, tree, &steps);
            }
            let vn = g.num(num.ty);
            let acc = g.fold(f, &stats, |f, j| {
                let off = bind(f, "off", g.offset(j));
                vec![x.load(f, &vn, off)]
            });
            let total = tree.reduce(f, g, &stats, &acc, true);
            let (max, sum) = (total[0].clone(), total[1].clone());
            let sn = g.stat_num(num.ty);
            // A slice of −∞ only (fully masked) gives 0 (log-softmax: −∞ = max); a NaN
            // among them (the maximum skips it) has made the sum NaN, and the slice NaN.
            let dead = f.let_("dead", masked(max.clone(), sum.clone(), &sn));
            let dead = bind(f, "dead_v", g.splat(dead));
            // Log-softmax is (x − m) − ln s, never x − (m + ln s): m + ln s rounds at
            // m's magnitude and loses ln s's digits when |m| ≫ ln s.
            let scale = if spec.log {
                sum.log()
            } else {
                sn.lit(1.0) / sum
            };
            let scale = f.let_("scale", g.splat(scale));
            let max = bind(f, "max", g.splat(max));
            g.for_each(f, |f, j| {
                let off = bind(f, "off", g.offset(&j));
                let v = x.load(f, &vn, off.clone());
                let value = if spec.log {
                    dead.clone()
                        .select(max.clone(), (v - max.clone()) - scale.clone())
                } else {
                    let e = (v - max.clone()).exp() * scale.clone();
                    dead.clone().select(vn.lit(0.0), e)
                };
                y.store(f, &vn, off, value, dtype);
            });
        },
    )
    .map(PlanBuilder::finish)
}

/// The `x` of one softmax kernel: where it is read from, the buffers and the
/// per-call values declared for it.
#[derive(Clone, Copy)]
struct Input<'a> {
    source: XSource<'a>,
    xs: &'a [Mem],
    uni: &'a [E],
}

impl Input<'_> {
    fn load(&self, f: &mut Body, n: &Num, off: E) -> E {
        self.source.load(f, n, self.xs, self.uni, off)
    }
}

/// Where a softmax's probabilities go: `y`, through the epilogue when there is one
/// (its operands' buffers and per-call values).
#[derive(Clone, Copy)]
struct Output<'a> {
    y: Mem,
    epilogue: Option<(Epilogue<'a>, &'a [Mem], &'a [E])>,
}

impl Output<'_> {
    /// Stores the probabilities `value` (`n`, in the compute type) at `off`: the
    /// epilogue's value of them where there is one, narrowed to `dtype`.
    fn store(&self, f: &mut Body, n: &Num, off: E, value: E, dtype: ScalarType) {
        let (value, off) = match self.epilogue {
            Some((e, mems, uni)) => {
                // The epilogue reads its operands at `off` too.
                let off = bind(f, "off", off);
                (e.apply(f, n, value, mems, uni, &off), off)
            }
            None => (value, off),
        };
        f.store(self.y, off, n.narrow(value, dtype));
    }
}

/// The one launch of a softmax of `op` ([`row_kernel`]): `source`'s buffers, then
/// `y`, then `epilogue`'s operands; the per-call values of both; `body(f, x, y,
/// group, tree)` writes the slice.
#[allow(clippy::too_many_arguments)]
fn x_kernel(
    op: &OpSpec,
    caps: &TargetCaps,
    view: View,
    monoid: &dyn Monoid,
    source: XSource,
    y: Buf,
    epilogue: Option<Epilogue>,
    body: impl FnOnce(&mut Body, Input, Output, &Group, &Tree),
) -> Result<PlanBuilder, LowerError> {
    let (ins, uniforms) = (op.inputs(), op.uniforms());
    let mut bufs = source.bufs(&ins);
    bufs.push(y);
    let mut scalars = source.params(&uniforms)?;
    let own = scalars.len();
    if let Some(e) = &epilogue {
        bufs.extend(e.bufs(&ins));
        scalars.extend(e.params(&uniforms)?);
    }
    row_kernel(
        op,
        caps,
        view,
        monoid,
        &bufs,
        &scalars,
        |f, m, uni, g, tree| {
            let (xs, y) = (&m[..source.count()], m[source.count()]);
            let epilogue = epilogue.map(|e| (e, &m[source.count() + 1..], &uni[own..]));
            let x = Input {
                source,
                xs,
                uni: &uni[..own],
            };
            body(f, x, Output { y, epilogue }, g, tree)
        },
    )
}

/// Elements one invocation keeps in registers for [`softmax_resident`]: short rows
/// (≤ 32·g) are read once, with one `exp` per element.
const RESIDENT_ELEMENTS: u32 = 32;

/// Softmax of a slice whose elements fit in its group's registers
/// ([`Group::resident_steps`]): every load is issued up front and each element is
/// read once, with one `exp`. Each invocation folds its own elements to `(m_l, s_l)`
/// (its maximum, and `Σ e^{x−m_l}`), the group combines those states like the online
/// form's, and each kept `e^{x−m_l}` is scaled by `e^{m_l−m}/s`.
fn softmax_resident(
    f: &mut Body,
    spec: &SoftmaxSpec,
    (x, y): (Input, Output),
    g: &Group,
    tree: &Tree,
    steps: &[Step],
) {
    let ty = compute_type(spec.dtype);
    let (vn, sn) = (g.num(ty), g.stat_num(ty));
    let lanes = g.step_lanes();
    let xs: Vec<E> = steps
        .iter()
        .map(|s| {
            let off = bind(f, "off", g.offset(&s.j));
            let v = x.load(f, &vn, off);
            f.let_("x", v)
        })
        .collect();
    // A ragged step re-reads the slice's last step: harmless to a maximum.
    let max = Extremum::ignoring_nan(ty, true);
    let items = xs.iter().map(|x| vec![x.clone()]).collect();
    let local_max = g.combine_steps(f, &max, items).remove(0);
    let local_max = f.let_("local_max", local_max);
    // An invocation whose maximum is −∞ shifts by 0 (no −∞ − (−∞)): its −∞ elements
    // give e = 0 and its NaN elements (the maximum skips them) NaN.
    let shift = f.let_("shift", shift_of(local_max.clone(), &sn));
    let m = bind(f, "m", g.splat(shift));
    let es: Vec<E> = xs
        .iter()
        .zip(steps)
        .map(|(x, s)| {
            let e = (x.clone() - m.clone()).exp();
            if s.ragged {
                let inside = splat_to(s.inside.clone(), lanes);
                f.let_("e", inside.select(e, vn.lit(0.0)))
            } else {
                f.let_("e", e)
            }
        })
        .collect();
    let sum = Sum { ty, n: 1 };
    let items = es.iter().map(|e| vec![e.clone()]).collect();
    let local_sum = g.combine_steps(f, &sum, items).remove(0);
    let acc = [f.var("acc", local_max.clone()), f.var("acc", local_sum)];
    let total = tree.reduce(f, g, &LogSumExp { ty }, &acc, true);
    let (total_max, total_sum) = (total[0].clone(), total[1].clone());
    // As in the two-pass form: fully masked gives 0 (−∞), a NaN anywhere NaN.
    let dead = f.let_("dead", masked(total_max.clone(), total_sum.clone(), &sn));
    let dead = bind(f, "dead_v", g.splat(dead));
    let values: Vec<E> = if spec.log {
        // (x − m) − ln s, as the two-pass form (see there).
        let log_sum = f.let_("log_sum", g.splat(total_sum.log()));
        let total_max = bind(f, "max", g.splat(total_max));
        xs.into_iter()
            .map(|x| {
                dead.clone()
                    .select(total_max.clone(), (x - total_max.clone()) - log_sum.clone())
            })
            .collect()
    } else {
        // e^{m_l − m}: 0 for an invocation of −∞ elements in a live slice (its e
        // are 0, or NaN, which a NaN sum carries anyway).
        let scale = (local_max - total_max).exp() / total_sum;
        let scale = f.let_("scale", g.splat(scale));
        es.into_iter()
            .map(|e| dead.clone().select(vn.lit(0.0), e * scale.clone()))
            .collect()
    };
    let (whole, ragged): (Vec<_>, Vec<_>) = steps.iter().zip(values).partition(|(s, _)| !s.ragged);
    let store = |f: &mut Body, s: &Step, v: E| {
        y.store(f, &vn, g.offset(&s.j), v, spec.dtype);
    };
    f.if_(g.valid.clone(), |f| {
        for (s, v) in whole {
            store(f, s, v);
        }
    });
    for (s, v) in ragged {
        f.if_(s.inside.clone(), |f| store(f, s, v));
    }
}

/// A scalar condition made to match values of `lanes` lanes.
fn splat_to(e: E, lanes: u8) -> E {
    if lanes == 1 {
        e
    } else {
        e.splat(lanes)
    }
}

/// Whether softmax should compute each `e^{x−m}` once and keep it in `y`: on a CPU
/// (one invocation, rows in cache) an `exp` costs more than re-reading a row, so
/// three passes (max; `e^{x−m}` into `y` and its sum; scale `y`) beat the online
/// form's two passes with two `exp`s per element. A GPU's `exp` is nearly free and
/// its memory is not: it keeps the online form. Only where `y` holds the compute
/// type exactly (f32, f64), so that the kept value is not rounded twice.
fn stash_exponentials(spec: &SoftmaxSpec, caps: &TargetCaps) -> bool {
    caps.is_serial() && !spec.log && compute_type(spec.dtype) == spec.dtype
}

/// Softmax in three passes with one `exp` per element (see [`stash_exponentials`]);
/// `y` is read back, so it is bound read-write.
fn softmax_stashed(
    op: &OpSpec,
    spec: &SoftmaxSpec,
    source: XSource,
    epilogue: Option<Epilogue>,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let outs = op.outputs();
    let view = View::of_shape(&spec.shape, |d| d == spec.axis)?;
    let num = Num::scalar(compute_type(spec.dtype));
    let max = Extremum::ignoring_nan(num.ty, true);
    let sum = Sum { ty: num.ty, n: 1 };
    let mut y_buf = Buf::output(&outs, 0);
    y_buf.access = Access::ReadWrite;
    let kernel = |f: &mut Body, x: Input, y: Output, g: &Group, tree: &Tree| {
        let vn = g.num(num.ty);
        let acc = g.fold(f, &max, |f, j| {
            let off = bind(f, "off", g.offset(j));
            vec![x.load(f, &vn, off)]
        });
        let top = tree.reduce(f, g, &max, &acc, true)[0].clone();
        let sn = g.stat_num(num.ty);
        // A slice whose maximum is −∞ shifts by 0: its −∞ elements give 0 (the
        // fully masked slice's sum is 0, and so is its result), its NaN ones
        // (the maximum skips them) NaN.
        let top = bind(f, "max", g.splat(shift_of(top, &sn)));
        let acc = g.fold(f, &sum, |f, j| {
            let off = bind(f, "off", g.offset(j));
            let e = (x.load(f, &vn, off.clone()) - top.clone()).exp();
            let e = f.let_("e", e);
            f.store(y.y, off, e.clone());
            vec![e]
        });
        let total = tree.reduce(f, g, &sum, &acc, true)[0].clone();
        let masked = total.clone().eq(sn.lit(0.0));
        let scale = masked.select(sn.lit(0.0), sn.lit(1.0) / total);
        let scale = f.let_("scale", g.splat(scale));
        g.for_each(f, |f, j| {
            let off = bind(f, "off", g.offset(&j));
            let e = y.y.load(off.clone(), g.step_lanes());
            y.store(f, &vn, off, e * scale.clone(), spec.dtype);
        });
    };
    x_kernel(op, caps, view, &max, source, y_buf, epilogue, kernel).map(PlanBuilder::finish)
}

/// Whether a slice with online statistics `(max, sum)` is fully masked (every element
/// −∞): its maximum is −∞ and its sum not NaN (a NaN element, which the maximum skips,
/// makes the sum NaN).
fn masked(max: E, sum: E, sn: &Num) -> E {
    max.lt(lowest_finite(sn)) & sum.clone().eq(sum)
}

/// The shift of `e^{x − m}`: the maximum, or 0 where it is −∞ (no `−∞ − (−∞)`).
fn shift_of(max: E, sn: &Num) -> E {
    max.clone().lt(lowest_finite(sn)).select(sn.lit(0.0), max)
}

pub(super) fn softmax_backward(
    spec: &SoftmaxBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
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
    row_kernel(&op, caps, view, &sum, &bufs, &[], |f, m, _, g, tree| {
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
    })
    .map(PlanBuilder::finish)
}

/// A target id as `(class, valid)`: `class` is `classes` (matching no column) when
/// the id is out of range ([`resolve_index`]: f32 ids truncate toward zero, as the
/// reference reads them).
fn decode_target(f: &mut Body, t: E, index_dtype: ScalarType, classes: u32) -> (E, E) {
    let (valid, r) = resolve_index(f, t, index_dtype, classes as usize, false);
    let class = f.let_("class", valid.clone().select(r, classes));
    (class, valid)
}

pub(super) fn cross_entropy(
    spec: &CrossEntropySpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let op = OpSpec::CrossEntropy(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let view = View::of_shape(&[spec.batch, spec.classes], |d| d == 1)?.whole_slices();
    let classes = view.len();
    let num = Num::scalar(compute_type(spec.dtype));
    let stats = LogSumExp { ty: num.ty };
    let mut bufs = vec![
        Buf::input(&ins, 0),
        Buf::input(&ins, 1),
        Buf::output(&outs, 0),
    ];
    for i in 1..outs.len() {
        bufs.push(Buf::output(&outs, i));
    }
    let (dtype, index_dtype) = (spec.dtype, spec.index_dtype);
    // 1/batch, a per-call value: every piece of a split op divides by the whole batch.
    let spec_uniforms = op.uniforms();
    let uniforms = Uniforms::new(&spec_uniforms);
    let scalars = match spec.divide_by_batch {
        true => vec![uniforms.param("scale")?],
        false => Vec::new(),
    };
    let second_pass = spec.grad || spec.probs;
    row_kernel(
        &op,
        caps,
        view,
        &stats,
        &bufs,
        &scalars,
        |f, m, uni, g, tree| {
            let scale = uni.first().cloned();
            let scaled = |v: E, splat: &dyn Fn(E) -> E| match &scale {
                Some(s) => v * splat(s.clone()),
                None => v,
            };
            let (logits, targets, loss) = (m[0], m[1], m[2]);
            let vn = g.num(num.ty);
            let grad = spec.grad.then(|| m[3]);
            let probs = spec.probs.then(|| m[if spec.grad { 4 } else { 3 }]);
            let acc = g.fold(f, &stats, |f, j| {
                let off = bind(f, "off", g.offset(j));
                vec![vn.load(logits, dtype, off)]
            });
            let total = tree.reduce(f, g, &stats, &acc, second_pass);
            // loss = (m − x_t) + ln s and p = e^{(x − m) − ln s}: never through
            // m + ln s, which rounds at m's magnitude (logits near 1e5 lost ln s's
            // digits: loss 0.4375 for 0.44019).
            let max = f.let_("max", total[0].clone());
            let log_sum = f.let_("log_sum", total[1].clone().log());
            let t = Num::scalar(compute_type(index_dtype)).load(targets, index_dtype, g.q.clone());
            let (class, valid) = decode_target(f, t, index_dtype, classes);
            f.if_(g.leader.clone(), |f| {
                let picked = g.base.clone() + class.clone().min(classes - 1);
                let xt = num.load(logits, dtype, picked);
                let value = valid.select(
                    scaled((max.clone() - xt) + log_sum.clone(), &|s| s),
                    num.lit(f64::NAN),
                );
                f.store(loss, g.q.clone(), num.narrow(value, dtype));
            });
            if !second_pass {
                return;
            }
            let max = bind(f, "max_v", g.splat(max));
            let log_sum = bind(f, "log_sum_v", g.splat(log_sum));
            let class = bind(f, "class_v", g.splat(class));
            g.for_each(f, |f, j| {
                let off = bind(f, "off", g.offset(&j));
                let x = vn.load(logits, dtype, off.clone());
                let p = f.let_("p", ((x - max.clone()) - log_sum.clone()).exp());
                if let Some(probs) = probs {
                    f.store(probs, off.clone(), vn.narrow(p.clone(), dtype));
                }
                if let Some(grad) = grad {
                    let hot = vn.indicator(g.lane_index(&j).eq(class));
                    let value = scaled(p - hot, &|s| g.splat(s));
                    f.store(grad, off, vn.narrow(value, dtype));
                }
            });
        },
    )
    .map(PlanBuilder::finish)
}
