//! Reductions past one kernel's indices ([`crate::lower::split`]), on the canonical
//! shape (dimensions of extent 1 dropped, neighbours both reduced or both kept
//! merged; the output's elements and order are the same):
//!
//! * a kept first dimension splits into pieces of rows, each reduced into its rows of
//!   `y` (and of `prior`);
//! * a reduced first dimension splits into pieces, each reduced into a partial (a sum,
//!   for a mean) in a temporary; a reduction over the pieces combines the partials,
//!   then the mean divides by its count and `prior` is added.
//!
//! An f16/bf16 mean over a split axis combines the pieces' means (weighted, in f32): a
//! partial sum of the narrow type could overflow where the mean does not.
//!
//! An arg reduction over a split axis keeps each piece's extremum and its position;
//! one launch then picks, per output, the first piece holding the best value and
//! offsets its position by the piece's first row.
//!
//! A kept row that alone passes the limit is a piece of its own, split as above.
//! Partials that together pass the limit (many outputs per piece, or a leading row
//! past the limit alone: a piece per row) are combined into a running one as each
//! piece finishes; an arg reduction's, which are pairs, by moving the reduced
//! dimensions last (a copy) and reducing independent rows.

use kernelc_ir::ScalarType;

use super::{ReduceFn, ReduceSpec};
use crate::lower::math::{compute_type, Num};
use crate::lower::schedule::plan_1d;
use crate::lower::split::{
    assemble, assemble_into, copy_step, padded, pieces_of, reduce_partials, rows_per_piece, step,
    vector_op, Piece, PieceUniforms, Place,
};
use crate::lower::{Binding, Launch, LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::{BinaryFn, CastSpec, FusedNode, FusedSpec, PermuteSpec, ScalarSpec};
use crate::shape::numel;
use crate::OpSpec;
use kernelc_ir::builder::*;
use kernelc_ir::Access;

/// The dimensions of `spec`'s input with 1s dropped and neighbours of one kind
/// merged, each with whether it is reduced.
fn canonical(spec: &ReduceSpec) -> Vec<(usize, bool)> {
    let mut dims: Vec<(usize, bool)> = Vec::new();
    for (d, &n) in spec.shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let reduced = spec.axes.contains(&d);
        match dims.last_mut() {
            Some((m, r)) if *r == reduced => *m *= n,
            _ => dims.push((n, reduced)),
        }
    }
    dims
}

/// `spec` over canonical dimensions `dims` (without keepdim or prior when
/// `partial`).
fn over(spec: &ReduceSpec, dims: &[(usize, bool)], func: ReduceFn, partial: bool) -> OpSpec {
    // A piece of one row of the reduced dimension keeps it as an axis of extent 1 (a
    // reduction names an axis; over one element it is a copy).
    let one = [(1, true)];
    let dims = match dims.iter().any(|d| d.1) {
        true => dims.to_vec(),
        false => [&one[..], dims].concat(),
    };
    OpSpec::Reduce(ReduceSpec {
        func,
        shape: dims.iter().map(|&(n, _)| n).collect(),
        axes: (0..dims.len()).filter(|&d| dims[d].1).collect(),
        keepdim: false,
        accumulate: spec.accumulate && !partial,
        index_dtype: spec.index_dtype.filter(|_| func.is_arg()),
        ..spec.clone()
    })
}

/// The piece reducing `rows` rows from row `start` of the input (rows of `inner`
/// elements) with `func` into `out`: a partial (no keepdim, no prior).
fn partial_piece(
    spec: &ReduceSpec,
    dims: &[(usize, bool)],
    (start, rows): (usize, usize),
    func: ReduceFn,
    inner: u64,
    out: Place,
) -> Piece {
    let mut piece_dims = dims.to_vec();
    piece_dims[0].0 = rows;
    Piece {
        spec: over(spec, &piece_dims, func, true),
        inputs: vec![Place::at(Whole::Input(0), start as u64 * inner)],
        outputs: vec![out],
        uniforms: PieceUniforms::Shared,
    }
}

pub(super) fn reduce_large(spec: &ReduceSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let what = format!("reduce {}", spec.func.name());
    let limit = caps.kernel_limit();
    let dims = canonical(spec);
    let Some(&(rows, first_reduced)) = dims.first() else {
        return Err(LowerError::Internal("a large reduction of one element"));
    };
    let inner = numel(&dims[1..].iter().map(|&(n, _)| n).collect::<Vec<_>>()) as u64;
    let out_inner: u64 = dims[1..]
        .iter()
        .filter(|d| !d.1)
        .map(|&(n, _)| n as u64)
        .product();
    if !first_reduced {
        // A row past the limit alone: a piece per row, itself split (over its leading
        // reduced dimension).
        let per_piece = if inner > limit {
            1
        } else {
            rows_per_piece(&what, limit, inner, &[inner, out_inner])?
        };
        let pieces = pieces_of(rows, per_piece)
            .map(|(start, k)| {
                let mut piece_dims = dims.clone();
                piece_dims[0].0 = k;
                let out = Place::at(Whole::Output(0), start as u64 * out_inner);
                let mut inputs = vec![Place::at(Whole::Input(0), start as u64 * inner)];
                if spec.accumulate {
                    inputs.push(Place::at(Whole::Input(1), start as u64 * out_inner));
                }
                Piece {
                    spec: over(spec, &piece_dims, spec.func, false),
                    inputs,
                    outputs: vec![out],
                    uniforms: PieceUniforms::Shared,
                }
            })
            .collect();
        return assemble(caps, Vec::new(), pieces);
    }
    if spec.func.is_arg() {
        return arg_over_split(spec, caps, &dims, inner, out_inner).or_else(|e| match e {
            LowerError::TooLarge { .. } => reduced_axes_last(spec, caps, &dims),
            other => Err(other),
        });
    }
    let narrow_float = matches!(spec.dtype, ScalarType::F16 | ScalarType::Bf16);
    if spec.func == ReduceFn::Mean && narrow_float {
        return narrow_mean(spec, caps, &dims, inner, out_inner);
    }
    combine_partials(spec, caps, &dims, inner, out_inner)
}

/// The pieces `(first row, rows)` of a split first dimension whose partials (one row
/// of `pad` elements each, so that every partial starts aligned) are combined, and
/// `pad`; refused when the partials together pass the limit (many outputs per piece).
fn partial_rows(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    dims: &[(usize, bool)],
    inner: u64,
    out_inner: u64,
) -> Result<(Vec<(usize, usize)>, u64), LowerError> {
    let (parts, pad) = pieces_and_pad(spec, caps, dims, inner, out_inner)?;
    let (what, limit, count) = (
        format!("reduce {}", spec.func.name()),
        caps.kernel_limit(),
        parts.len() as u64,
    );
    if count.saturating_mul(pad) > limit {
        return Err(LowerError::TooLarge {
            what: format!(
                "{what}: partials of {count} pieces of {out_inner} outputs (reduce the leading axis in steps, or permute it last)"
            ),
            value: count * pad,
            limit,
        });
    }
    Ok((parts, pad))
}

/// The pieces `(first row, rows)` of a split first dimension and the padded length
/// of one piece's partial (its outputs, rounded up so that partials start aligned).
fn pieces_and_pad(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    dims: &[(usize, bool)],
    inner: u64,
    out_inner: u64,
) -> Result<(Vec<(usize, usize)>, u64), LowerError> {
    let what = format!("reduce {}", spec.func.name());
    // A row of the split dimension past the limit alone: a piece per row (its partial
    // itself split), combined as they come.
    let per_piece = if inner > caps.kernel_limit() {
        1
    } else {
        rows_per_piece(&what, caps.kernel_limit(), inner, &[inner])?
    };
    Ok((pieces_of(dims[0].0, per_piece).collect(), padded(out_inner)))
}

/// The binary op combining two partials of `partial` (arg reductions have none:
/// their partials are pairs, combined by `arg_over_split`).
fn combining(partial: ReduceFn) -> Result<BinaryFn, LowerError> {
    match partial {
        ReduceFn::Sum | ReduceFn::Mean => Ok(BinaryFn::Add),
        ReduceFn::Max => Ok(BinaryFn::Max),
        ReduceFn::Min => Ok(BinaryFn::Min),
        ReduceFn::MaxNan => Ok(BinaryFn::MaxNan),
        ReduceFn::MinNan => Ok(BinaryFn::MinNan),
        ReduceFn::ArgMax | ReduceFn::ArgMin => Err(LowerError::Internal(
            "an arg reduction's partials combined by a binary op",
        )),
    }
}

/// The pieces of [`combine_partials`] when their partials together pass the limit
/// (few rows per piece, many outputs): each piece's partial combined into a running
/// one as it comes, by `func` (ping-pong between two temporaries, so that no launch
/// writes what it reads). Temporaries 0 and 1 hold the running partial, 2 a piece's;
/// returns the pieces and the temporary holding the result.
fn running_partials(
    spec: &ReduceSpec,
    dims: &[(usize, bool)],
    parts: &[(usize, usize)],
    partial: ReduceFn,
    func: BinaryFn,
    inner: u64,
    out_inner: u64,
) -> (Vec<Piece>, Whole) {
    let mut pieces = Vec::new();
    let mut running = Whole::Temp(0);
    for (c, &part) in parts.iter().enumerate() {
        let into = if c == 0 { running } else { Whole::Temp(2) };
        pieces.push(partial_piece(
            spec,
            dims,
            part,
            partial,
            inner,
            Place::whole(into),
        ));
        if c > 0 {
            let next = match running {
                Whole::Temp(0) => Whole::Temp(1),
                _ => Whole::Temp(0),
            };
            pieces.push(step(
                vector_op(func, spec.dtype, out_inner as usize),
                vec![Place::whole(running), Place::whole(Whole::Temp(2))],
                Place::whole(next),
            ));
            running = next;
        }
    }
    (pieces, running)
}

/// An f16/bf16 mean over a split first dimension: each piece's mean (a partial sum
/// could overflow the type, a mean cannot), widened to f32, weighted by its share of
/// the rows and added to a running sum in f32 as it comes (so any number of pieces
/// of any number of outputs); rounded to the dtype once (then the prior added).
fn narrow_mean(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    dims: &[(usize, bool)],
    inner: u64,
    out_inner: u64,
) -> Result<Plan, LowerError> {
    let (parts, _) = pieces_and_pad(spec, caps, dims, inner, out_inner)?;
    let rows = dims[0].0;
    let (dtype, wide) = (spec.dtype, ScalarType::F32);
    let n = out_inner as usize;
    let temp = |dtype| TempBuffer {
        dtype,
        len: out_inner,
    };
    // 0: a piece's mean; 1: widened; 2: the running weighted sum; 3: rounded.
    let temps = vec![temp(dtype), temp(wide), temp(wide), temp(dtype)];
    let t = |i| Place::whole(Whole::Temp(i));
    let cast = |from, to| {
        OpSpec::Cast(CastSpec {
            from,
            to,
            shape: vec![n],
        })
    };
    let mut pieces = Vec::new();
    for (c, &part) in parts.iter().enumerate() {
        pieces.push(partial_piece(spec, dims, part, ReduceFn::Mean, inner, t(0)));
        pieces.push(step(cast(dtype, wide), vec![t(0)], t(1)));
        let weight = part.1 as f64 / rows as f64;
        // sum (+)= mean · weight
        let mut nodes = vec![
            FusedNode::Input(0),
            FusedNode::Scalar {
                func: BinaryFn::Mul,
                x: 0,
                scalar: weight,
                reversed: false,
            },
        ];
        let mut inputs = vec![t(1)];
        if c > 0 {
            nodes.extend([
                FusedNode::Input(1),
                FusedNode::Binary {
                    func: BinaryFn::Add,
                    a: 2,
                    b: 1,
                },
            ]);
            inputs.push(t(2));
        }
        let shapes = vec![vec![n]; inputs.len()];
        pieces.push(step(
            OpSpec::Fused(FusedSpec {
                dtype: wide,
                inputs: shapes,
                nodes,
            }),
            inputs,
            t(2),
        ));
    }
    let y = Place::whole(Whole::Output(0));
    if spec.accumulate {
        pieces.push(step(cast(wide, dtype), vec![t(2)], t(3)));
        pieces.push(step(
            vector_op(BinaryFn::Add, dtype, n),
            vec![Place::whole(Whole::Input(1)), t(3)],
            y,
        ));
    } else {
        pieces.push(step(cast(wide, dtype), vec![t(2)], y));
    }
    assemble(caps, temps, pieces)
}

/// The reduced-first-dimension case of [`reduce_large`]: partials of pieces in a
/// temporary, one row of `padded` elements each (so every piece starts aligned),
/// then their reduction, the mean's division and the prior's addition.
fn combine_partials(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    dims: &[(usize, bool)],
    inner: u64,
    out_inner: u64,
) -> Result<Plan, LowerError> {
    let partial = match spec.func {
        ReduceFn::Mean => ReduceFn::Sum,
        f => f,
    };
    let temp = |len: u64| TempBuffer {
        dtype: spec.dtype,
        len,
    };
    let n = out_inner as usize;
    let (parts, padded) = pieces_and_pad(spec, caps, dims, inner, out_inner)?;
    let count = parts.len();
    let (mut pieces, mut temps, combined) = if count as u64 * padded > caps.kernel_limit() {
        // Too many partials to keep at once: combine them as they come.
        let func = combining(partial)?;
        let (pieces, result) =
            running_partials(spec, dims, &parts, partial, func, inner, out_inner);
        (pieces, vec![temp(out_inner); 3], result)
    } else {
        let mut pieces: Vec<Piece> = parts
            .iter()
            .enumerate()
            .map(|(c, &part)| {
                let out = Place::at(Whole::Temp(0), c as u64 * padded);
                partial_piece(spec, dims, part, partial, inner, out)
            })
            .collect();
        pieces.push(reduce_partials(
            spec.dtype,
            partial,
            count,
            padded,
            Whole::Temp(0),
            Whole::Temp(1),
        ));
        let temps = vec![temp(count as u64 * padded), temp(padded)];
        (pieces, temps, Whole::Temp(1))
    };
    let extra = Whole::Temp(temps.len());
    // The first `n` elements of the combined row.
    let mut result = Place::at(combined, 0);
    let y = Place::whole(Whole::Output(0));
    if spec.func == ReduceFn::Mean {
        let divide = OpSpec::Scalar(ScalarSpec {
            func: BinaryFn::Div,
            dtype: spec.dtype,
            shape: vec![n],
            scalar: numel(&spec.shape) as f64 / n as f64,
            reversed: false,
            out_dtype: None,
        });
        let to = if spec.accumulate {
            temps.push(temp(out_inner));
            Place::whole(extra)
        } else {
            y
        };
        pieces.push(step(divide, vec![result], to));
        result = to;
    }
    if spec.accumulate {
        let add = vector_op(BinaryFn::Add, spec.dtype, n);
        pieces.push(step(add, vec![Place::whole(Whole::Input(1)), result], y));
    } else if spec.func != ReduceFn::Mean {
        pieces.push(copy_step(spec.dtype, n, result, y));
    }
    assemble(caps, temps, pieces)
}

/// An arg reduction over a split first dimension: per piece its extremum (maxNum /
/// minNum, as the arg reduction ignores NaN) and its local position, in temporaries;
/// then one launch per output taking the first piece whose value beats the ones
/// before (a number beats NaN; ties keep the earlier piece), its position offset by
/// the positions before the piece (`start · reduced elements per row`).
fn arg_over_split(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    dims: &[(usize, bool)],
    inner: u64,
    out_inner: u64,
) -> Result<Plan, LowerError> {
    let (parts, pad) = partial_rows(spec, caps, dims, inner, out_inner)?;
    let count = parts.len();
    let max = spec.func == ReduceFn::ArgMax;
    let extremum = if max { ReduceFn::Max } else { ReduceFn::Min };
    let index = spec.out_dtype();
    let temps = vec![
        TempBuffer {
            dtype: spec.dtype,
            len: count as u64 * pad,
        },
        TempBuffer {
            dtype: index,
            len: count as u64 * pad,
        },
    ];
    let mut pieces = Vec::new();
    for (c, &part) in parts.iter().enumerate() {
        for (func, t) in [(extremum, 0), (spec.func, 1)] {
            let out = Place::at(Whole::Temp(t), c as u64 * pad);
            pieces.push(partial_piece(spec, dims, part, func, inner, out));
        }
    }
    let mut plan = Plan {
        temps,
        ..Plan::default()
    };
    assemble_into(&mut plan, caps, pieces)?;
    // Positions before a piece: its first row times the reduced elements of a row.
    let per_row: u64 = dims[1..]
        .iter()
        .filter(|d| d.1)
        .map(|&(n, _)| n as u64)
        .product();
    let offsets: Vec<u64> = parts
        .iter()
        .map(|&(start, _)| start as u64 * per_row)
        .collect();
    plan.launches.push(pick_launch(
        spec,
        caps,
        (max, index),
        (count, pad, out_inner),
        &offsets,
    )?);
    Ok(plan)
}

/// The launch of [`arg_over_split`] choosing, per output, the best piece.
fn pick_launch(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    (max, index): (bool, ScalarType),
    (count, pad, outputs): (usize, u64, u64),
    offsets: &[u64],
) -> Result<Launch, LowerError> {
    let (vn, xn) = (
        Num::scalar(compute_type(spec.dtype)),
        Num::scalar(compute_type(index)),
    );
    let grid = plan_1d(outputs, caps, 1)?;
    let mut k = KernelBuilder::new(
        format!("reduce_{}_pick", spec.func.name()),
        grid.workgroup_size(),
    );
    let len = count as u64 * pad;
    let values = k.buffer("values", spec.dtype, len, Access::Read);
    let positions = k.buffer("positions", index, len, Access::Read);
    let y = k.buffer("y", index, outputs, Access::Write);
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, q| {
            let at = |c: usize| q.clone() + (c as u64 * pad) as u32;
            let best = f.var("best", vn.load(values, spec.dtype, at(0)));
            let pos = f.var("pos", xn.load(positions, index, at(0)));
            for (c, &offset) in offsets.iter().enumerate().skip(1) {
                let v = f.let_(&format!("v{c}"), vn.load(values, spec.dtype, at(c)));
                let beats = if max {
                    v.clone().gt(best.get())
                } else {
                    v.clone().lt(best.get())
                };
                // A number beats a NaN incumbent (`x ≠ x` only for NaN).
                let better = f.let_(
                    &format!("better{c}"),
                    beats | (best.get().ne(best.get()) & v.clone().eq(v.clone())),
                );
                let p = xn.load(positions, index, at(c)) + xn.lit(offset as f64);
                f.assign(pos, better.clone().select(p, pos.get()));
                f.assign(best, better.select(v, best.get()));
            }
            // Every piece NaN: position 0, as the unsplit reduction gives.
            let found = best.get().eq(best.get());
            f.store(y, q, xn.narrow(found.select(pos.get(), xn.lit(0.0)), index));
        });
    })?;
    Ok(Launch {
        kernel,
        grid: grid.grid,
        bindings: vec![Binding::Temp(0), Binding::Temp(1), Binding::Output(0)],
    })
}

/// A reduction as a copy with the reduced dimensions moved last (a permute, itself
/// split), then a reduction over independent rows: where the partials of pieces along
/// the reduced dimension would not fit (an arg reduction's extremum and position per
/// output). Positions count the reduced dimensions row-major in their order, as
/// before the move; the outputs keep theirs.
fn reduced_axes_last(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    dims: &[(usize, bool)],
) -> Result<Plan, LowerError> {
    let shape: Vec<usize> = dims.iter().map(|&(n, _)| n).collect();
    let perm: Vec<usize> = (0..dims.len())
        .filter(|&d| !dims[d].1)
        .chain((0..dims.len()).filter(|&d| dims[d].1))
        .collect();
    let moved: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
    let kept = dims.iter().filter(|d| !d.1).count();
    let temps = vec![TempBuffer {
        dtype: spec.dtype,
        len: numel(&shape) as u64,
    }];
    let mut inputs = vec![Place::whole(Whole::Temp(0))];
    if spec.accumulate {
        inputs.push(Place::whole(Whole::Input(1)));
    }
    let pieces = vec![
        step(
            OpSpec::Permute(PermuteSpec {
                dtype: spec.dtype,
                shape,
                perm,
            }),
            vec![Place::whole(Whole::Input(0))],
            Place::whole(Whole::Temp(0)),
        ),
        Piece {
            spec: OpSpec::Reduce(ReduceSpec {
                shape: moved,
                axes: (kept..dims.len()).collect(),
                keepdim: false,
                ..spec.clone()
            }),
            inputs,
            outputs: vec![Place::whole(Whole::Output(0))],
            uniforms: PieceUniforms::Shared,
        },
    ];
    assemble(caps, temps, pieces)
}
