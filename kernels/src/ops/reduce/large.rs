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
//! Refused with [`LowerError::TooLarge`]: arg reductions over a split axis (a piece's
//! positions would need an offset), rows that alone pass the limit, and partials that
//! together do (many outputs per piece).

use kernelc_ir::ScalarType;

use super::{ReduceFn, ReduceSpec};
use crate::lower::split::{
    assemble, copy_step, padded, pieces_of, reduce_partials, rows_per_piece, step, Piece, Place,
};
use crate::lower::{LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::{BinaryFn, BinarySpec, CastSpec, ScalarSpec};
use crate::shape::numel;
use crate::OpSpec;

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
    OpSpec::Reduce(ReduceSpec {
        func,
        shape: dims.iter().map(|&(n, _)| n).collect(),
        axes: (0..dims.len()).filter(|&d| dims[d].1).collect(),
        keepdim: false,
        accumulate: spec.accumulate && !partial,
        ..spec.clone()
    })
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
        let per_piece = rows_per_piece(&what, limit, inner, &[inner, out_inner])?;
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
                    shares_uniforms: true,
                }
            })
            .collect();
        return assemble(caps, Vec::new(), pieces);
    }
    let refuse = |why: &str| LowerError::TooLarge {
        what: format!(
            "{what} of {}: elements over a split axis ({why})",
            spec.dtype
        ),
        value: numel(&spec.shape) as u64,
        limit,
    };
    if spec.func.is_arg() {
        return Err(refuse(
            "an arg reduction counts positions in one piece only",
        ));
    }
    let narrow_float = matches!(spec.dtype, ScalarType::F16 | ScalarType::Bf16);
    if spec.func == ReduceFn::Mean && narrow_float {
        return narrow_mean(spec, caps, &dims, inner, out_inner);
    }
    combine_partials(spec, caps, &dims, inner, out_inner)
}

/// An f16/bf16 mean over a split first dimension: each piece's mean (a partial sum
/// could overflow the type, a mean cannot), widened to f32, weighted by its share of
/// the rows and summed in f32; rounded to the dtype once (then the prior added).
fn narrow_mean(
    spec: &ReduceSpec,
    caps: &TargetCaps,
    dims: &[(usize, bool)],
    inner: u64,
    out_inner: u64,
) -> Result<Plan, LowerError> {
    let what = format!("reduce {}", spec.func.name());
    let limit = caps.kernel_limit();
    let per_piece = rows_per_piece(&what, limit, inner, &[inner])?;
    let pad = padded(out_inner);
    let rows = dims[0].0;
    let parts: Vec<(usize, usize)> = pieces_of(rows, per_piece).collect();
    let count = parts.len();
    if count as u64 * pad > limit {
        return Err(LowerError::TooLarge {
            what: format!("{what}: partials of {count} pieces of {out_inner} outputs"),
            value: count as u64 * pad,
            limit,
        });
    }
    let (dtype, wide) = (spec.dtype, ScalarType::F32);
    let temp = |dtype, len| TempBuffer { dtype, len };
    // 0: the pieces' means; 1: widened; 2: weighted; 3: their sum; 4: rounded.
    let temps = vec![
        temp(dtype, count as u64 * pad),
        temp(wide, count as u64 * pad),
        temp(wide, count as u64 * pad),
        temp(wide, pad),
        temp(dtype, out_inner),
    ];
    let t = Whole::Temp;
    let mut pieces: Vec<Piece> = parts
        .iter()
        .enumerate()
        .map(|(c, &(start, k))| {
            let mut piece_dims = dims.to_vec();
            piece_dims[0].0 = k;
            Piece {
                spec: over(spec, &piece_dims, ReduceFn::Mean, true),
                inputs: vec![Place::at(Whole::Input(0), start as u64 * inner)],
                outputs: vec![Place::at(t(0), c as u64 * pad)],
                shares_uniforms: true,
            }
        })
        .collect();
    let cast = |from, to, n: u64| {
        OpSpec::Cast(CastSpec {
            from,
            to,
            shape: vec![n as usize],
        })
    };
    pieces.push(step(
        cast(dtype, wide, count as u64 * pad),
        vec![Place::whole(t(0))],
        Place::whole(t(1)),
    ));
    for (c, &(_, k)) in parts.iter().enumerate() {
        let weight = OpSpec::Scalar(ScalarSpec {
            func: BinaryFn::Mul,
            dtype: wide,
            shape: vec![pad as usize],
            scalar: k as f64 / rows as f64,
            reversed: false,
            out_dtype: None,
        });
        let at = c as u64 * pad;
        pieces.push(step(weight, vec![Place::at(t(1), at)], Place::at(t(2), at)));
    }
    pieces.push(reduce_partials(wide, ReduceFn::Sum, count, pad, t(2), t(3)));
    let y = Place::whole(Whole::Output(0));
    let mean = Place::at(t(3), 0);
    if spec.accumulate {
        let n = out_inner as usize;
        pieces.push(step(
            cast(wide, dtype, out_inner),
            vec![mean],
            Place::whole(t(4)),
        ));
        let add = OpSpec::Binary(BinarySpec {
            func: BinaryFn::Add,
            dtype,
            lhs: vec![n],
            rhs: vec![n],
            out_dtype: None,
        });
        pieces.push(step(
            add,
            vec![Place::whole(Whole::Input(1)), Place::whole(t(4))],
            y,
        ));
    } else {
        pieces.push(step(cast(wide, dtype, out_inner), vec![mean], y));
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
    let what = format!("reduce {}", spec.func.name());
    let limit = caps.kernel_limit();
    let partial = match spec.func {
        ReduceFn::Mean => ReduceFn::Sum,
        f => f,
    };
    let per_piece = rows_per_piece(&what, limit, inner, &[inner])?;
    let padded = padded(out_inner);
    let mut pieces: Vec<Piece> = pieces_of(dims[0].0, per_piece)
        .enumerate()
        .map(|(c, (start, k))| {
            let mut piece_dims = dims.to_vec();
            piece_dims[0].0 = k;
            Piece {
                spec: over(spec, &piece_dims, partial, true),
                inputs: vec![Place::at(Whole::Input(0), start as u64 * inner)],
                outputs: vec![Place::at(Whole::Temp(0), c as u64 * padded)],
                shares_uniforms: true,
            }
        })
        .collect();
    let count = pieces.len();
    if count as u64 * padded > limit {
        return Err(LowerError::TooLarge {
            what: format!(
                "{what}: partials of {count} pieces of {out_inner} outputs (reduce the leading axis in steps, or permute it last)"
            ),
            value: count as u64 * padded,
            limit,
        });
    }
    let temp = |len: u64| TempBuffer {
        dtype: spec.dtype,
        len,
    };
    let mut temps = vec![temp(count as u64 * padded), temp(padded)];
    let n = out_inner as usize;
    pieces.push(reduce_partials(
        spec.dtype,
        partial,
        count,
        padded,
        Whole::Temp(0),
        Whole::Temp(1),
    ));
    // The first `n` elements of the combined row.
    let mut result = Place::at(Whole::Temp(1), 0);
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
            Place::whole(Whole::Temp(2))
        } else {
            y
        };
        pieces.push(step(divide, vec![result], to));
        result = to;
    }
    if spec.accumulate {
        let add = OpSpec::Binary(BinarySpec {
            func: BinaryFn::Add,
            dtype: spec.dtype,
            lhs: vec![n],
            rhs: vec![n],
            out_dtype: None,
        });
        pieces.push(step(add, vec![Place::whole(Whole::Input(1)), result], y));
    } else if spec.func != ReduceFn::Mean {
        pieces.push(copy_step(spec.dtype, n, result, y));
    }
    assemble(caps, temps, pieces)
}
