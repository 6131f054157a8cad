//! Layer norm / RMS norm and batch norm, forward and backward.
//!
//! * **Layer norm** (rows of the last axis): one launch, one group of invocations per
//!   row (several short rows per workgroup), reading the row coalesced. Pass 1 folds
//!   Welford `(count, mean, M2)` triples (RMS: `Σx²`), combined across the group with
//!   Chan's formula in a shared-memory tree; pass 2 writes `y` (and `sum`, `stats`).
//! * **Layer-norm backward**: the same row launch folds `Σg` and `Σg·x̂` (RMS: `Σg·x`)
//!   and writes `dx`; the parameter gradients are column sums over rows, a second
//!   reduction with neighbouring invocations on neighbouring columns (split into
//!   partials when the columns alone cannot fill the device). No two invocations ever
//!   add into one element.
//! * **Batch norm**: per-channel statistics over `N × spatial` (Welford; the
//!   channel's elements are gathered by index arithmetic, contiguous along the spatial
//!   axes), split into partials when channels are few; the leader of each channel
//!   writes `save` and the running statistics (read, then written, by that one
//!   invocation: safe in place) and the statistics in compute precision to a
//!   temporary; then an elementwise launch normalises every element. Inference is the
//!   elementwise launch alone.
//! * **Batch-norm backward**: per-channel `Σdy`, `Σdy·x̂` the same way, then an
//!   elementwise launch for `dx`.
//!
//! The forward passes fold `x − x₀` (`x₀` the row's or channel's first value), so the
//! rounding of the mean scales with the data's spread rather than its offset and
//! `x − μ` stays accurate when `|μ| ≫ σ`. Statistics accumulate in f32 for f16/bf16
//! and in f64 for f64.

use super::ncs;
use crate::lower::math::{bind, compute_type, Num};
use crate::lower::reduction::{
    declare, fold_plan, row_kernel, Buf, Fold, FoldFns, Item, Monoid, Slices, Sum, View, Welford,
};
use crate::lower::schedule::plan_1d;
use crate::lower::{LowerError, Plan, PlanBuilder, ScalarParam, TargetCaps, Uniforms};
use crate::spec::*;
use kernelc_ir::builder::*;
use kernelc_ir::Access;

/// Positions of the optional inputs of an op whose inputs are listed in order.
struct Slots {
    next: usize,
}

impl Slots {
    fn new(first: usize) -> Slots {
        Slots { next: first }
    }
    fn take(&mut self, present: bool) -> Option<usize> {
        present.then(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

pub(super) fn layer_norm(spec: &LayerNormSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::LayerNorm(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let (rows, cols) = spec.rows_cols();
    let view = View::of_shape(&[rows, cols], |d| d == 1)?.whole_slices();
    let n = view.len() as f64;
    let num = Num::scalar(compute_type(spec.dtype));
    let dtype = spec.dtype;

    let mut inp = Slots::new(1);
    let (res, w, b) = (
        inp.take(spec.residual),
        inp.take(spec.weight),
        inp.take(spec.bias),
    );
    let mut out = Slots::new(ins.len() + 1);
    let (sum_out, stats_out) = (out.take(spec.residual), out.take(spec.save_stats));
    let mut bufs: Vec<Buf> = (0..ins.len()).map(|i| Buf::input(&ins, i)).collect();
    bufs.extend((0..outs.len()).map(|i| Buf::output(&outs, i)));
    let y = ins.len();

    let welford = Welford { ty: num.ty };
    let squares = Sum { ty: num.ty, n: 1 };
    let monoid: &dyn Monoid = if spec.rms { &squares } else { &welford };
    let spec_uniforms = op.uniforms();
    let uniforms = Uniforms::new(&spec_uniforms);
    let epilogue = spec.lowered_epilogue();
    let mut scalars = vec![uniforms.param("eps")?];
    if let Some(e) = &epilogue {
        scalars.extend(e.params(&spec_uniforms)?);
    }
    row_kernel(
        &op,
        caps,
        view,
        monoid,
        &bufs,
        &scalars,
        |f, m, uni, g, tree| {
            // The normalised value: x, or x + residual rounded to the dtype (`sum` is
            // an output of the dtype and y normalises it; a no-op for f32 and f64).
            let value = |f: &mut Body, n: &Num, off: &E| {
                let v = n.load(m[0], dtype, off.clone());
                let v = match res {
                    Some(r) => {
                        let sum = v + n.load(m[r], dtype, off.clone());
                        n.widen(n.narrow(sum, dtype), dtype)
                    }
                    None => v,
                };
                bind(f, "v", v)
            };
            let vn = g.num(num.ty);
            // Layer norm folds x − x₀ (x₀ the row's first value): the mean's rounding
            // then scales with the row's spread, not its offset, so x − μ stays
            // accurate when |μ| ≫ σ.
            let shift = (!spec.rms).then(|| value(f, &num, &g.base));
            let shift_v = shift.clone().map(|k| bind(f, "shift_v", g.splat(k)));
            let centred = |v: E| match &shift_v {
                Some(k) => v - k.clone(),
                None => v,
            };
            let acc = g.fold(f, monoid, |f, j| {
                let off = bind(f, "off", g.offset(j));
                let v = value(f, &vn, &off);
                vec![if spec.rms { v.clone() * v } else { centred(v) }]
            });
            let total = tree.reduce(f, g, monoid, &acc, true);
            // `mean` is that of the shifted values (0 for RMS).
            let (mean, var) = if spec.rms {
                (num.lit(0.0), total[0].clone() / num.lit(n))
            } else {
                let (mean, undefined) = undefined_if_not_finite(f, total[1].clone());
                (mean, total[2].clone() / num.lit(n) + undefined)
            };
            let rstd = f.let_("rstd", (var + uni[0].clone()).rsqrt());
            if let Some(s) = stats_out {
                f.if_(g.leader.clone(), |f| {
                    let at = f.let_("at", g.q.clone() * 2u32);
                    let mu = match &shift {
                        Some(k) => k.clone() + mean.clone(),
                        None => mean.clone(),
                    };
                    f.store(m[s], at.clone(), num.narrow(mu, dtype));
                    f.store(m[s], at + 1u32, num.narrow(rstd.clone(), dtype));
                });
            }
            let (mean, rstd) = (
                bind(f, "mean_v", g.splat(mean)),
                bind(f, "rstd_v", g.splat(rstd)),
            );
            g.for_each(f, |f, j| {
                let off = bind(f, "off", g.offset(&j));
                let v = value(f, &vn, &off);
                if let Some(s) = sum_out {
                    f.store(m[s], off.clone(), vn.narrow(v.clone(), dtype));
                }
                let mut out = if spec.rms {
                    v * rstd.clone()
                } else {
                    (centred(v) - mean.clone()) * rstd.clone()
                };
                if let Some(w) = w {
                    out = out * vn.load(m[w], dtype, j.clone());
                }
                if let Some(b) = b {
                    out = out + vn.load(m[b], dtype, j.clone());
                }
                if let Some(e) = &epilogue {
                    // Its operands are the inputs after the layer norm's own.
                    let operands = &m[e.first_input..y];
                    out = e.apply(f, &vn, out, operands, &uni[e.first_uniform..], &off);
                }
                f.store(m[y], off, vn.narrow(out, dtype));
            });
        },
    )
    .map(PlanBuilder::finish)
}

pub(super) fn layer_norm_backward(
    spec: &LayerNormBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let op = OpSpec::LayerNormBackward(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let (rows, cols) = spec.rows_cols();
    let view = View::of_shape(&[rows, cols], |d| d == 1)?.whole_slices();
    let n = view.len() as f64;
    let num = Num::scalar(compute_type(spec.dtype));
    let dtype = spec.dtype;
    let w = spec.weight.then_some(2);
    let stats = if spec.weight { 3 } else { 2 };
    let mut bufs: Vec<Buf> = (0..ins.len()).map(|i| Buf::input(&ins, i)).collect();
    bufs.push(Buf::output(&outs, 0));
    let dx = ins.len();

    let sums = Sum {
        ty: num.ty,
        n: if spec.rms { 1 } else { 2 },
    };
    let mut plan = row_kernel(&op, caps, view, &sums, &bufs, &[], |f, m, _, g, tree| {
        let vn = g.num(num.ty);
        let at = f.let_("at", g.q.clone() * 2u32);
        let rstd = f.let_("rstd", num.load(m[stats], dtype, at.clone() + 1u32));
        let mean = bind(f, "mean_v", g.splat(num.load(m[stats], dtype, at)));
        let rstd_v = bind(f, "rstd_v", g.splat(rstd.clone()));
        // g = dy·w, x̂ = (x − μ)·r (RMS uses x itself).
        let terms = |f: &mut Body, j: &E| {
            let off = bind(f, "off", g.offset(j));
            let dyv = vn.load(m[0], dtype, off.clone());
            let gv = match w {
                Some(w) => dyv * vn.load(m[w], dtype, j.clone()),
                None => dyv,
            };
            let gv = bind(f, "g", gv);
            let xv = bind(f, "x", vn.load(m[1], dtype, off.clone()));
            let xh = if spec.rms {
                xv
            } else {
                f.let_("xhat", (xv - mean.clone()) * rstd_v.clone())
            };
            (off, gv, xh)
        };
        let acc = g.fold(f, &sums, |f, j| {
            let (_, gv, xh) = terms(f, j);
            if spec.rms {
                vec![gv * xh]
            } else {
                vec![gv.clone(), gv * xh]
            }
        });
        let total = tree.reduce(f, g, &sums, &acc, true);
        let coef: Vec<E> = if spec.rms {
            // dx = r·g − x·(r³·mean(g·x))
            let gx = total[0].clone() / num.lit(n);
            vec![rstd.clone() * rstd.clone() * rstd * gx]
        } else {
            vec![total[0].clone() / num.lit(n), total[1].clone() / num.lit(n)]
        };
        let coef: Vec<E> = coef
            .into_iter()
            .map(|c| f.let_("coef", g.splat(c)))
            .collect();
        g.for_each(f, |f, j| {
            let (off, gv, xh) = terms(f, &j);
            let value = if spec.rms {
                rstd_v.clone() * gv - xh * coef[0].clone()
            } else {
                rstd_v.clone() * (gv - coef[0].clone() - xh * coef[1].clone())
            };
            f.store(m[dx], off, vn.narrow(value, dtype));
        });
    })?;

    if spec.param_grads {
        param_grads(&mut plan, caps, spec, &ins, &outs)?;
    }
    Ok(plan.finish())
}

/// `dweight = Σ_rows dy·x̂`, `dbias = Σ_rows dy`: a column reduction over the rows.
fn param_grads(
    plan: &mut PlanBuilder,
    caps: &TargetCaps,
    spec: &LayerNormBackwardSpec,
    ins: &[TensorSig],
    outs: &[TensorSig],
) -> Result<(), LowerError> {
    let (rows, cols) = spec.rows_cols();
    let num = Num::scalar(compute_type(spec.dtype));
    let dtype = spec.dtype;
    let stats = if spec.weight { 3 } else { 2 };
    let n = usize::from(spec.weight) + usize::from(spec.bias);
    let sums = Sum { ty: num.ty, n };
    let fold = Fold {
        name: format!(
            "{}_param_grads",
            OpSpec::LayerNormBackward(spec.clone()).name()
        ),
        view: View::of_shape(&[rows, cols], |d| d == 0)?,
        elem: dtype,
        monoid: &sums,
        items: vec![
            Buf::input(ins, 0),
            Buf::input(ins, 1),
            Buf::input(ins, stats),
        ],
        finals: (1..outs.len()).map(|i| Buf::output(outs, i)).collect(),
        uniforms: Vec::new(),
        item_uniforms: Vec::new(),
    };
    fold_plan(
        plan,
        caps,
        fold,
        FoldFns {
            prologue: |_: &mut Body, _: &[Mem], _: &Slices| Vec::new(),
            item: |f: &mut Body, it: &Item| {
                let (m, vn) = (it.mems, it.num(num.ty));
                let dyv = bind(f, "dy", vn.load(m[0], dtype, it.off.clone()));
                let mut v = Vec::new();
                if spec.weight {
                    // The step's rows are its element positions (one column).
                    let stat = |k: u32| {
                        move |f: &mut Body, row: E| {
                            let at = f.let_("at", row * 2u32 + k);
                            num.load(m[2], dtype, at)
                        }
                    };
                    let mean = it.gather(f, stat(0));
                    let rstd = it.gather(f, stat(1));
                    let x = vn.load(m[1], dtype, it.off.clone());
                    v.push(dyv.clone() * ((x - mean) * rstd));
                }
                if spec.bias {
                    v.push(dyv);
                }
                v
            },
            epilogue: |f: &mut Body, m: &[Mem], _: &[E], q: &E, total: &[E]| {
                for (mem, t) in m.iter().zip(total) {
                    f.store(*mem, q.clone(), num.narrow(t.clone(), dtype));
                }
            },
        },
    )
}

/// The rule for a row (channel) that holds a NaN or ±∞: its statistics are NaN. Such a
/// value makes the Welford mean `m` of the shifted values non-finite, ±∞ or NaN
/// depending on where it falls in the fold; `m − m` is then NaN (and +0 otherwise), so
/// `(m + (m − m), m − m)` gives the mean, and the term that makes the variance NaN, the
/// same for every schedule. Once per row, nothing per element.
fn undefined_if_not_finite(f: &mut Body, mean: E) -> (E, E) {
    let mean = f.let_("mean_shifted", mean);
    let undefined = f.let_("undefined", mean.clone() - mean.clone());
    (f.let_("mean_or_nan", mean + undefined.clone()), undefined)
}

/// An elementwise launch over `numel` elements of an `[N, C, S]` tensor:
/// `body(f, mems, scalars, i, c)` for element `i` of channel `c`.
fn channel_map(
    plan: &mut PlanBuilder,
    caps: &TargetCaps,
    name: &str,
    shape: (usize, usize, usize),
    (bufs, scalars): (&[Buf], &[ScalarParam]),
    body: impl FnOnce(&mut Body, &[Mem], &[E], E, E),
) -> Result<(), LowerError> {
    let (n, c, s) = shape;
    let grid = plan_1d((n * c * s) as u64, caps, 1)?;
    let mut k = KernelBuilder::new(name, grid.workgroup_size());
    let (mems, params) = declare(&mut k, bufs);
    let uni: Vec<E> = scalars.iter().map(|p| p.declare(&mut k)).collect();
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, i| {
            let mut ch = i.clone();
            if s != 1 {
                ch = ch / s as u32;
            }
            if n != 1 {
                ch = ch % c as u32;
            }
            let ch = bind(f, "c", ch);
            body(f, &mems, &uni, i, ch);
        });
    })?;
    plan.push(kernel, grid.grid, &params, scalars);
    Ok(())
}

pub(super) fn batch_norm(spec: &BatchNormSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::BatchNorm(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let (n, c, s) = ncs(&spec.shape);
    let num = Num::scalar(compute_type(spec.dtype));
    let dtype = spec.dtype;
    let spec_uniforms = op.uniforms();
    let uniforms = Uniforms::new(&spec_uniforms);
    let mut plan = PlanBuilder::default();
    if !spec.training {
        let bufs: Vec<Buf> = (0..5)
            .map(|i| Buf::input(&ins, i))
            .chain([Buf::output(&outs, 0)])
            .collect();
        channel_map(
            &mut plan,
            caps,
            &op.name(),
            (n, c, s),
            (&bufs, &[uniforms.param("eps")?]),
            |f, m, uni, i, ch| {
                let ld = |mem: Mem, at: E| num.load(mem, dtype, at);
                let rstd = (ld(m[4], ch.clone()) + uni[0].clone()).rsqrt();
                let xhat = (ld(m[0], i.clone()) - ld(m[3], ch.clone())) * rstd;
                let y = xhat * ld(m[1], ch.clone()) + ld(m[2], ch);
                f.store(m[5], i, num.narrow(y, dtype));
            },
        )?;
        return Ok(plan.finish());
    }

    // Per channel (x₀, mean of x − x₀, 1/σ) in the compute type, for the normalising
    // launch. Folding x − x₀ (x₀ the channel's first value) keeps x − μ accurate when
    // |μ| ≫ σ: the mean's rounding scales with the spread, not the offset.
    let stats = plan.temp_buf("channel_stats", num.ty, 3 * c as u32, Access::Write);
    let welford = Welford { ty: num.ty };
    let m = (n * s) as f64;
    let first = move |q: &E| {
        if s == 1 {
            q.clone()
        } else {
            q.clone() * s as u32
        }
    };
    let fold = Fold {
        name: format!("{}_stats", op.name()),
        view: View::of_shape(&[n, c, s], |d| d != 1)?,
        elem: dtype,
        monoid: &welford,
        items: vec![Buf::input(&ins, 0)],
        finals: vec![
            Buf::input(&ins, 0),
            Buf::input(&ins, 3),
            Buf::input(&ins, 4),
            Buf::output(&outs, 1),
            Buf::output(&outs, 2),
            Buf::output(&outs, 3),
            stats.clone(),
        ],
        uniforms: vec![uniforms.param("momentum")?, uniforms.param("eps")?],
        item_uniforms: Vec::new(),
    };
    fold_plan(
        &mut plan,
        caps,
        fold,
        FoldFns {
            prologue: |f: &mut Body, mm: &[Mem], slices: &Slices| {
                vec![slices.gather(f, |_, q| num.load(mm[0], dtype, first(&q)))]
            },
            item: |_: &mut Body, it: &Item| {
                let x = it.num(num.ty).load(it.mems[0], dtype, it.off.clone());
                vec![x - it.splat(it.pre[0].clone())]
            },
            epilogue: |f: &mut Body, mm: &[Mem], uni: &[E], q: &E, total: &[E]| {
                let shift = f.let_("shift", num.load(mm[0], dtype, first(q)));
                let (centred, undefined) = undefined_if_not_finite(f, total[1].clone());
                let mean = f.let_("mean", shift.clone() + centred.clone());
                let var = f.let_("var", total[2].clone() / num.lit(m) + undefined);
                let rstd = f.let_("rstd", (var.clone() + uni[1].clone()).rsqrt());
                // Running statistics: this invocation reads each before writing it.
                let take = uni[0].clone();
                let keep = f.let_("keep", num.lit(1.0) - take.clone());
                let rm =
                    num.load(mm[1], dtype, q.clone()) * keep.clone() + take.clone() * mean.clone();
                let rv = num.load(mm[2], dtype, q.clone()) * keep + take * var;
                let at = f.let_("at", q.clone() * 2u32);
                f.store(mm[3], at.clone(), num.narrow(mean, dtype));
                f.store(mm[3], at + 1u32, num.narrow(rstd.clone(), dtype));
                f.store(mm[4], q.clone(), num.narrow(rm, dtype));
                f.store(mm[5], q.clone(), num.narrow(rv, dtype));
                let at = f.let_("at3", q.clone() * 3u32);
                f.store(mm[6], at.clone(), shift);
                f.store(mm[6], at.clone() + 1u32, centred);
                f.store(mm[6], at + 2u32, rstd);
            },
        },
    )?;

    let bufs = [
        Buf::input(&ins, 0),
        Buf::input(&ins, 1),
        Buf::input(&ins, 2),
        stats.reading(),
        Buf::output(&outs, 0),
    ];
    channel_map(
        &mut plan,
        caps,
        &op.name(),
        (n, c, s),
        (&bufs, &[]),
        |f, m, _, i, ch| {
            let at = f.let_("at", ch.clone() * 3u32);
            let centred = num.load(m[0], dtype, i.clone()) - m[3].at(at.clone());
            let xhat = (centred - m[3].at(at.clone() + 1u32)) * m[3].at(at + 2u32);
            let y = xhat * num.load(m[1], dtype, ch.clone()) + num.load(m[2], dtype, ch);
            f.store(m[4], i, num.narrow(y, dtype));
        },
    )?;
    Ok(plan.finish())
}

pub(super) fn batch_norm_backward(
    spec: &BatchNormBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let op = OpSpec::BatchNormBackward(spec.clone());
    let (ins, outs) = (op.inputs(), op.outputs());
    let (n, c, s) = ncs(&spec.shape);
    let num = Num::scalar(compute_type(spec.dtype));
    let dtype = spec.dtype;
    let mut plan = PlanBuilder::default();
    if let Some(m) = spec.given_grads {
        given_grads_dx(&mut plan, caps, (&op, (n, c, s)), m as f64)?;
        return Ok(plan.finish());
    }

    // Per-channel (Σdy/M, Σdy·x̂/M) in the compute type.
    let sums_buf = plan.temp_buf("channel_sums", num.ty, 2 * c as u32, Access::Write);
    let sums = Sum { ty: num.ty, n: 2 };
    let count = (n * s) as f64;
    let mut finals = vec![sums_buf.clone()];
    if spec.param_grads {
        finals.push(Buf::output(&outs, 1));
        finals.push(Buf::output(&outs, 2));
    }
    let fold = Fold {
        name: format!("{}_sums", op.name()),
        view: View::of_shape(&[n, c, s], |d| d != 1)?,
        elem: dtype,
        monoid: &sums,
        items: vec![
            Buf::input(&ins, 0),
            Buf::input(&ins, 1),
            Buf::input(&ins, 3),
        ],
        finals,
        uniforms: Vec::new(),
        item_uniforms: Vec::new(),
    };
    fold_plan(
        &mut plan,
        caps,
        fold,
        FoldFns {
            prologue: |f: &mut Body, m: &[Mem], slices: &Slices| {
                let stat = |k: u32| move |_: &mut Body, q: E| num.load(m[2], dtype, q * 2u32 + k);
                vec![slices.gather(f, stat(0)), slices.gather(f, stat(1))]
            },
            item: |f: &mut Body, it: &Item| {
                let (m, vn) = (it.mems, it.num(num.ty));
                let dyv = bind(f, "dy", vn.load(m[0], dtype, it.off.clone()));
                let x = vn.load(m[1], dtype, it.off.clone());
                let xhat = (x - it.splat(it.pre[0].clone())) * it.splat(it.pre[1].clone());
                vec![dyv.clone(), dyv * xhat]
            },
            epilogue: |f: &mut Body, m: &[Mem], _: &[E], q: &E, total: &[E]| {
                let at = f.let_("at", q.clone() * 2u32);
                f.store(m[0], at.clone(), total[0].clone() / num.lit(count));
                f.store(m[0], at + 1u32, total[1].clone() / num.lit(count));
                if spec.param_grads {
                    f.store(m[1], q.clone(), num.narrow(total[1].clone(), dtype));
                    f.store(m[2], q.clone(), num.narrow(total[0].clone(), dtype));
                }
            },
        },
    )?;

    // dx = (dy − Σdy/M − x̂·Σdy·x̂/M)·r·w: the weight multiplies last, so a tiny
    // (subnormal) weight never underflows to 0 before it meets an infinite gradient,
    // which would make 0·∞ = NaN of −∞ (and no M·dy can overflow).
    let bufs = [
        Buf::input(&ins, 0),
        Buf::input(&ins, 1),
        Buf::input(&ins, 2),
        Buf::input(&ins, 3),
        sums_buf.reading(),
        Buf::output(&outs, 0),
    ];
    channel_map(
        &mut plan,
        caps,
        &op.name(),
        (n, c, s),
        (&bufs, &[]),
        |f, m, _, i, ch| {
            let at = f.let_("at", ch.clone() * 2u32);
            let mean = num.load(m[3], dtype, at.clone());
            let rstd = f.let_("rstd", num.load(m[3], dtype, at.clone() + 1u32));
            let xhat = (num.load(m[1], dtype, i.clone()) - mean) * rstd.clone();
            let (mean_dy, mean_dyx) = (m[4].at(at.clone()), m[4].at(at + 1u32));
            let inner = num.load(m[0], dtype, i.clone()) - mean_dy - xhat * mean_dyx;
            let dx = inner * rstd * num.load(m[2], dtype, ch);
            f.store(m[5], i, num.narrow(dx, dtype));
        },
    )?;
    Ok(plan.finish())
}

/// `dx` of batch norm's backward from the given parameter gradients `dweight`,
/// `dbias` of a batch of `m` values per channel (inputs 3 and 4; `save` is 5).
fn given_grads_dx(
    plan: &mut PlanBuilder,
    caps: &TargetCaps,
    (op, shape): (&OpSpec, (usize, usize, usize)),
    m: f64,
) -> Result<(), LowerError> {
    let (ins, outs) = (op.inputs(), op.outputs());
    let dtype = ins[0].dtype;
    let num = Num::scalar(compute_type(dtype));
    let mut bufs: Vec<Buf> = (0..6).map(|i| Buf::input(&ins, i)).collect();
    bufs.push(Buf::output(&outs, 0));
    channel_map(
        plan,
        caps,
        &op.name(),
        shape,
        (&bufs, &[]),
        |f, mem, _, i, ch| {
            let ld = |k: usize, at: E| num.load(mem[k], dtype, at);
            let at = f.let_("at", ch.clone() * 2u32);
            let rstd = f.let_("rstd", ld(5, at.clone() + 1u32));
            let xhat = (ld(1, i.clone()) - ld(5, at)) * rstd.clone();
            let (mean_dy, mean_dyx) = (
                ld(4, ch.clone()) / num.lit(m),
                ld(3, ch.clone()) / num.lit(m),
            );
            let inner = ld(0, i.clone()) - mean_dy - xhat * mean_dyx;
            let dx = inner * rstd * ld(2, ch);
            f.store(mem[6], i, num.narrow(dx, dtype));
        },
    )
}
