//! Tensors past one kernel's indices. Kernels index with 32 bits (all that WGSL has,
//! and what keeps GPU index math cheap), so a tensor of more than
//! [`TargetCaps::max_kernel_elements`] elements is split at lowering into pieces
//! that each fit, as torch's `TensorIterator::with_32bit_indexing` does: each piece
//! is the same op over smaller shapes, lowered as usual, its tensors bound to
//! [`Binding::Part`]s of the whole ones. Map-like ops split along rows of their
//! output (`split_map`); ops whose rows or batch items are independent split along
//! them, weights bound whole (`split_rows`); a reduction over a split axis reduces
//! each piece into a temporary and then the pieces' partials (`ops/reduce`).
//!
//! Invariant: every piece starts at a multiple of [`PIECE_ALIGNMENT`] elements of
//! its tensor, so a device binds it where it lies (WebGPU's storage offset
//! alignment is at most 256 bytes), and vector accesses keep their alignment.

use super::{lower, Binding, LowerError, Plan, TargetCaps, TempBuffer, Uniform, Whole};
use crate::shape::numel;
use crate::spec::OpSpec;

/// Elements every piece's start is a multiple of.
pub const PIECE_ALIGNMENT: u64 = 256;

/// Where one tensor of a piece lies: in a tensor of the whole op (or a temporary of
/// its plan), from element `start` (`None`: the whole tensor, a broadcast operand).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    pub of: Whole,
    pub start: Option<u64>,
}

impl Place {
    pub fn whole(of: Whole) -> Place {
        Place { of, start: None }
    }

    /// From element `start` (a multiple of [`PIECE_ALIGNMENT`]); with `start` 0, a
    /// prefix of a longer tensor.
    pub fn at(of: Whole, start: u64) -> Place {
        Place {
            of,
            start: Some(start),
        }
    }
}

/// One piece of a split op: a spec that fits one kernel's indices, and where each of
/// its inputs and outputs lies.
pub(crate) struct Piece {
    pub spec: OpSpec,
    pub inputs: Vec<Place>,
    pub outputs: Vec<Place>,
    /// Whether the piece's per-call values are the whole op's, bound at launch (a
    /// piece of the same op), or its own, fixed by the whole op's structure (a step
    /// combining partials), written into the plan.
    pub shares_uniforms: bool,
}

/// One plan running `pieces` in order, with `temps` the temporaries their places name
/// (each piece's own temporaries are appended after them).
pub(crate) fn assemble(
    caps: &TargetCaps,
    temps: Vec<TempBuffer>,
    pieces: Vec<Piece>,
) -> Result<Plan, LowerError> {
    let mut plan = Plan {
        temps,
        ..Plan::default()
    };
    for piece in pieces {
        let sub = lower(&piece.spec, caps)?;
        if !sub.prefills.is_empty() {
            return Err(LowerError::Internal("a piece of a split op has prefills"));
        }
        let temp_base = plan.temps.len();
        plan.temps.extend(sub.temps);
        let uniforms = piece.spec.uniforms();
        for mut launch in sub.launches {
            for binding in &mut launch.bindings {
                *binding = rebind(binding, &piece, temp_base, &uniforms)?;
            }
            plan.launches.push(launch);
        }
    }
    Ok(plan)
}

/// A piece's binding as a binding of the whole plan.
fn rebind(
    binding: &Binding,
    piece: &Piece,
    temp_base: usize,
    uniforms: &[Uniform],
) -> Result<Binding, LowerError> {
    let placed = |places: &[Place], i: usize, within: u64| {
        let place = places.get(i).ok_or(LowerError::Internal(
            "a piece binds a tensor it was not given",
        ))?;
        Ok(match (place.start, within) {
            (None, 0) => place.of.binding(),
            (start, within) => Binding::Part {
                of: place.of,
                start: start.unwrap_or(0) + within,
            },
        })
    };
    let temp = |i: usize| Whole::Temp(temp_base + i);
    match binding {
        Binding::Input(i) => placed(&piece.inputs, *i, 0),
        Binding::Output(i) => placed(&piece.outputs, *i, 0),
        Binding::Temp(i) => Ok(temp(*i).binding()),
        Binding::Part { of, start } => match of {
            Whole::Input(i) => placed(&piece.inputs, *i, *start),
            Whole::Output(i) => placed(&piece.outputs, *i, *start),
            Whole::Temp(i) => Ok(Binding::Part {
                of: temp(*i),
                start: *start,
            }),
        },
        Binding::Scalar(s) => Ok(Binding::Scalar(*s)),
        Binding::Uniform(i) if piece.shares_uniforms => Ok(Binding::Uniform(*i)),
        Binding::Uniform(i) => {
            uniforms
                .get(*i)
                .map(|u| Binding::Scalar(u.value))
                .ok_or(LowerError::Internal(
                    "a piece binds a per-call value it lacks",
                ))
        }
    }
}

/// Rows of `inner` elements per piece: as many as fit `limit` elements, a multiple
/// of what keeps every piece's start a multiple of [`PIECE_ALIGNMENT`] elements in
/// each tensor split with them (`per_row`: each one's elements per row).
pub(crate) fn rows_per_piece(
    what: &str,
    limit: u64,
    inner: u64,
    per_row: &[u64],
) -> Result<u64, LowerError> {
    let step = per_row
        .iter()
        .map(|&n| PIECE_ALIGNMENT / gcd(n.max(1), PIECE_ALIGNMENT))
        .max()
        .unwrap_or(1);
    let rows = limit / inner.max(1) / step * step;
    if rows == 0 {
        return Err(LowerError::TooLarge {
            what: format!("{what}: elements of one row of its pieces ({step} rows at least)"),
            value: inner.saturating_mul(step),
            limit,
        });
    }
    Ok(rows)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The start and row count of each piece of `rows` rows, `per_piece` at a time.
pub(crate) fn pieces_of(rows: usize, per_piece: u64) -> impl Iterator<Item = (usize, usize)> {
    let per_piece = per_piece.max(1) as usize;
    (0..rows)
        .step_by(per_piece)
        .map(move |start| (start, per_piece.min(rows - start)))
}

/// The plan of a map-like op named `what` (output element `i` reads element `i` of
/// each input, NumPy-broadcast) whose tensors pass one kernel's indices: pieces of
/// rows of the output's first dimension that is not 1 (of every element, when no
/// input is broadcast), each input either split with the output or, broadcast along
/// that dimension, bound whole. `piece` makes the op over one piece's input shapes
/// and output shape; every one of the `outputs` outputs has the shape `out`.
pub(crate) fn split_map(
    what: &str,
    caps: &TargetCaps,
    out: &[usize],
    inputs: &[&[usize]],
    outputs: usize,
    piece: impl Fn(&[Vec<usize>], &[usize]) -> OpSpec,
) -> Result<Plan, LowerError> {
    let limit = caps
        .max_kernel_elements
        .min(TargetCaps::MAX_KERNEL_ELEMENTS);
    let total = numel(out);
    let flat = inputs.iter().all(|s| *s == out);
    let rank = out.len();
    let d = out
        .iter()
        .position(|&n| n != 1)
        .unwrap_or(rank.saturating_sub(1));
    // The split dimension `d`: its extent, elements per row of the output and, per input,
    // its own dimension split with it and elements per row (`None`: broadcast).
    let (rows, inner, split): (usize, u64, Vec<Option<(usize, u64)>>) = if flat {
        (total, 1, vec![Some((0, 1)); inputs.len()])
    } else {
        let rows = out.get(d).copied().unwrap_or(1);
        let split = inputs
            .iter()
            .map(|s| {
                let j = (d + s.len()).checked_sub(rank)?;
                (s.get(j) == Some(&rows) && rows > 1).then(|| (j, numel(&s[j + 1..]) as u64))
            })
            .collect();
        (rows, numel(&out[d + 1..]) as u64, split)
    };
    for (s, split) in inputs.iter().zip(&split) {
        if split.is_none() && numel(s) as u64 > limit {
            return Err(LowerError::TooLarge {
                what: format!("{what}: elements of an input broadcast along the split dimension"),
                value: numel(s) as u64,
                limit,
            });
        }
    }
    let per_row: Vec<u64> = split
        .iter()
        .flatten()
        .map(|&(_, n)| n)
        .chain([inner])
        .collect();
    let per_piece = rows_per_piece(what, limit, inner, &per_row)?;
    let resized = |shape: &[usize], dim: usize, rows: usize| {
        if flat {
            return vec![rows];
        }
        let mut shape = shape.to_vec();
        shape[dim] = rows;
        shape
    };
    let pieces = pieces_of(rows, per_piece)
        .map(|(start, rows)| {
            let shapes: Vec<Vec<usize>> = inputs
                .iter()
                .zip(&split)
                .map(|(s, split)| match split {
                    Some((dim, _)) => resized(s, *dim, rows),
                    None => s.to_vec(),
                })
                .collect();
            Piece {
                spec: piece(&shapes, &resized(out, d, rows)),
                inputs: split
                    .iter()
                    .enumerate()
                    .map(|(i, split)| match split {
                        Some((_, per_row)) => Place::at(Whole::Input(i), start as u64 * per_row),
                        None => Place::whole(Whole::Input(i)),
                    })
                    .collect(),
                outputs: (0..outputs)
                    .map(|o| Place::at(Whole::Output(o), start as u64 * inner))
                    .collect(),
                shares_uniforms: true,
            }
        })
        .collect();
    assemble(caps, Vec::new(), pieces)
}

/// How one tensor of a row-wise op lies in its pieces: split with the rows, `per_row`
/// elements a row, or bound whole to every piece (a weight, a bias; `numel` elements).
#[derive(Clone, Copy, Debug)]
pub(crate) enum RowPart {
    Rows(u64),
    Whole(u64),
}

/// The plan of an op named `what` whose `rows` outer rows are computed independently
/// (softmax over an inner axis, a norm over the last, attention or convolution per
/// batch item, ...) and whose tensors pass one kernel's indices: pieces of
/// consecutive rows, each input and output split with them or bound whole, in
/// `inputs` / `outputs` order. `piece(start, rows)` is the op over the piece of `rows`
/// rows from row `start`.
pub(crate) fn split_rows(
    what: &str,
    caps: &TargetCaps,
    rows: usize,
    inputs: &[RowPart],
    outputs: &[RowPart],
    piece: impl Fn(usize, usize) -> OpSpec,
) -> Result<Plan, LowerError> {
    let limit = caps
        .max_kernel_elements
        .min(TargetCaps::MAX_KERNEL_ELEMENTS);
    let mut per_row = Vec::new();
    for part in inputs.iter().chain(outputs) {
        match *part {
            RowPart::Rows(n) => per_row.push(n),
            RowPart::Whole(n) if n > limit => {
                return Err(LowerError::TooLarge {
                    what: format!("{what}: elements of a tensor every piece reads whole"),
                    value: n,
                    limit,
                })
            }
            RowPart::Whole(_) => {}
        }
    }
    let widest = per_row.iter().copied().max().unwrap_or(1);
    let per_piece = rows_per_piece(what, limit, widest, &per_row)?;
    let place = |parts: &[RowPart], start: usize, whole: fn(usize) -> Whole| -> Vec<Place> {
        parts
            .iter()
            .enumerate()
            .map(|(i, part)| match *part {
                RowPart::Rows(n) => Place::at(whole(i), start as u64 * n),
                RowPart::Whole(_) => Place::whole(whole(i)),
            })
            .collect()
    };
    let pieces = pieces_of(rows, per_piece)
        .map(|(start, count)| Piece {
            spec: piece(start, count),
            inputs: place(inputs, start, Whole::Input),
            outputs: place(outputs, start, Whole::Output),
            shares_uniforms: true,
        })
        .collect();
    assemble(caps, Vec::new(), pieces)
}

/// [`split_rows`] over `op`'s own tensors: those named in `whole` bound whole, every
/// other split along the `rows` leading rows (its elements divided by `rows` a row).
pub(crate) fn split_rows_of(
    op: &impl crate::op::Op,
    what: &str,
    caps: &TargetCaps,
    rows: usize,
    whole: &[&str],
    piece: impl Fn(usize) -> OpSpec,
) -> Result<Plan, LowerError> {
    split_rows_at(op, what, caps, rows, whole, |_, count| piece(count))
}

/// [`split_rows_of`] whose pieces also depend on their first row (`piece(start,
/// rows)`: dropout's random-stream offset).
pub(crate) fn split_rows_at(
    op: &impl crate::op::Op,
    what: &str,
    caps: &TargetCaps,
    rows: usize,
    whole: &[&str],
    piece: impl Fn(usize, usize) -> OpSpec,
) -> Result<Plan, LowerError> {
    let part = |sig: &crate::spec::TensorSig| -> Result<RowPart, LowerError> {
        let n = numel(&sig.shape) as u64;
        if whole.contains(&sig.name.as_str()) {
            return Ok(RowPart::Whole(n));
        }
        match n.checked_rem(rows as u64) {
            Some(0) => Ok(RowPart::Rows(n / rows as u64)),
            _ => Err(LowerError::Internal(
                "a tensor split with the rows is not a whole number of them",
            )),
        }
    };
    let inputs = op
        .inputs()
        .iter()
        .map(part)
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = op
        .outputs()
        .iter()
        .map(part)
        .collect::<Result<Vec<_>, _>>()?;
    split_rows(what, caps, rows, &inputs, &outputs, piece)
}
