//! Reductions (sum, mean, max, min, argmax, argmin) over any set of axes.
//!
//! The tensor is viewed as slices over the reduced axes ([`View::of_shape`]: reduced
//! axes need not be contiguous, index arithmetic gathers them), and folded by
//! [`fold_plan`]: a workgroup-cooperative fold with a shared-memory tree when the
//! reduced axes are innermost (coalesced rows), one invocation per output column when
//! a kept axis is innermost (coalesced across columns), and a split into partial
//! states plus a combine launch when the outputs are too few to fill the device
//! (e.g. the sum of a whole tensor). Sums of f16/bf16 accumulate in f32, of f64 in
//! f64; extrema start from the slice's first element, so no ±∞/NaN identity is needed.

use crate::lower::math::{compute_type, Num};
use crate::lower::reduction::{
    fold_plan, ArgExtremum, Buf, Extremum, Fold, FoldFns, Item, Monoid, Slices, Sum, View,
};
use crate::lower::{LowerError, Plan, PlanBuilder, TargetCaps};
use crate::ops::elementwise::{Epilogue, XSource};
use crate::spec::{OpSpec, ReduceFn, ReduceSpec};
use kernelc_ir::builder::*;
use kernelc_ir::ScalarType;

/// The monoid folding `func` in compute type `ty`.
fn monoid_of(func: ReduceFn, ty: ScalarType) -> Box<dyn Monoid> {
    match func {
        ReduceFn::Sum | ReduceFn::Mean => Box::new(Sum { ty, n: 1 }),
        ReduceFn::Max => Box::new(Extremum::ignoring_nan(ty, true)),
        ReduceFn::Min => Box::new(Extremum::ignoring_nan(ty, false)),
        ReduceFn::MaxNan => Box::new(Extremum::propagating_nan(ty, true)),
        ReduceFn::MinNan => Box::new(Extremum::propagating_nan(ty, false)),
        ReduceFn::ArgMax => Box::new(ArgExtremum { ty, max: true }),
        ReduceFn::ArgMin => Box::new(ArgExtremum { ty, max: false }),
    }
}

pub(super) fn reduce(spec: &ReduceSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let op = OpSpec::Reduce(spec.clone());
    reduce_of(&op, spec, XSource::plain(spec.dtype), None, caps)
}

/// The plan of `op`, which reduces as `spec` the `x` that `source` reads (its first
/// inputs; `prior` follows them) and applies `epilogue` to the result (its operands
/// after those).
pub(super) fn reduce_of(
    op: &OpSpec,
    spec: &ReduceSpec,
    source: XSource,
    epilogue: Option<Epilogue>,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let (ins, outs) = (op.inputs(), op.outputs());
    let view = View::of_shape(&spec.shape, |d| spec.axes.contains(&d))?;
    let len = view.len();
    let num = Num::scalar(compute_type(spec.dtype));
    let monoid = monoid_of(spec.func, num.ty);
    let out_ty = spec.out_dtype();

    let mut finals = Vec::new();
    if spec.accumulate {
        finals.push(Buf::input(&ins, source.count()));
    }
    finals.push(Buf::output(&outs, 0));
    // The epilogue's operands follow `y` (at `operands`).
    let operands = finals.len();
    if let Some(e) = &epilogue {
        finals.extend(e.bufs(&ins));
    }
    let uniforms = match &epilogue {
        Some(e) => e.params(&op.uniforms())?,
        None => Vec::new(),
    };
    let fold = Fold {
        name: op.name(),
        view,
        elem: spec.dtype,
        monoid: monoid.as_ref(),
        items: source.bufs(&ins),
        finals,
        uniforms,
        item_uniforms: source.params(&op.uniforms())?,
    };
    let mut plan = PlanBuilder::default();
    let dtype = spec.dtype;
    fold_plan(
        &mut plan,
        caps,
        fold,
        FoldFns {
            prologue: |_: &mut Body, _: &[Mem], _: &Slices| Vec::new(),
            item: |f: &mut Body, it: &Item| {
                vec![source.load(f, &it.num(num.ty), it.mems, it.uniforms, it.off.clone())]
            },
            epilogue: |f: &mut Body, m: &[Mem], uni: &[E], q: &E, total: &[E]| {
                let value = match spec.func {
                    ReduceFn::Mean => total[0].clone() / num.lit(len as f64),
                    ReduceFn::ArgMax | ReduceFn::ArgMin => {
                        let index = total[1].clone();
                        if out_ty == ScalarType::U32 {
                            index
                        } else {
                            index.cast(out_ty)
                        }
                    }
                    ReduceFn::Sum
                    | ReduceFn::Max
                    | ReduceFn::Min
                    | ReduceFn::MaxNan
                    | ReduceFn::MinNan => total[0].clone(),
                };
                let (value, y) = if spec.accumulate {
                    let prior = num.load(m[0], dtype, q.clone());
                    (prior + value, m[1])
                } else {
                    (value, m[0])
                };
                let value = match &epilogue {
                    Some(e) => e.apply(f, &num, value, &m[operands..], uni, q),
                    None => value,
                };
                let value = if spec.func.is_arg() {
                    value
                } else {
                    num.narrow(value, out_ty)
                };
                f.store(y, q.clone(), value);
            },
        },
    )?;
    Ok(plan.finish())
}
