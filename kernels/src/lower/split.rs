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
//! Pieces start at multiples of [`PIECE_ALIGNMENT`] elements of their tensors where
//! rows are short enough, so a device binds them where they lie (WebGPU's storage
//! offset alignment is at most 256 bytes) and vector accesses keep their alignment.
//! Where a row is too long for that, pieces start at any row: lowered with one-word
//! vectors, bound from the alignment below their start, and indexed from their start
//! within that window (`lower::rebase`, once for the whole plan).

use kernelc_ir::ScalarType;

use super::{lower, Binding, LowerError, Plan, TargetCaps, TempBuffer, Uniform, Whole};
use crate::ops::{AsStridedSpec, ReduceFn, ReduceSpec};
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
    pub uniforms: PieceUniforms,
}

/// Where a piece's per-call values come from.
#[derive(Clone, Debug)]
pub(crate) enum PieceUniforms {
    /// The whole op's, bound at launch: a piece of the same op.
    Shared,
    /// Its own, fixed by the whole op's structure and written into the plan: a step
    /// combining partials.
    Own,
    /// The whole op's but for those at these indices, which are the piece's own (a
    /// GEMM piece past the first along `k` adds into C: its `beta` is 1).
    SharedExcept(Vec<usize>),
    /// The whole op's from index `offset` on: the piece's `i` is the op's
    /// `offset + i` (a fused op's epilogue, whose values follow its prologue's).
    From(usize),
}

impl Piece {
    /// The caps to lower this piece with: one-word vectors where a tensor starts off
    /// their alignment, and any binding start (offsets are settled once, on the whole
    /// plan: `lower` → `lower::rebase`).
    pub fn caps(&self, caps: &TargetCaps) -> TargetCaps {
        let starts: Vec<Option<u64>> = self
            .inputs
            .iter()
            .chain(&self.outputs)
            .map(|place| place.start)
            .collect();
        TargetCaps {
            binding_alignment: 1,
            ..super::rebase::piece_caps(caps, &self.spec, &starts)
        }
    }
}

impl PieceUniforms {
    /// The whole op's uniform that the piece's uniform `i` is, if it is one.
    fn shared(&self, i: usize) -> Option<usize> {
        match self {
            PieceUniforms::Shared => Some(i),
            PieceUniforms::Own => None,
            PieceUniforms::SharedExcept(own) => (!own.contains(&i)).then_some(i),
            PieceUniforms::From(offset) => Some(offset + i),
        }
    }
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
    assemble_into(&mut plan, caps, pieces)?;
    Ok(plan)
}

/// Appends `pieces`, in order, to `plan` (whose temporaries their places name).
pub(crate) fn assemble_into(
    plan: &mut Plan,
    caps: &TargetCaps,
    pieces: Vec<Piece>,
) -> Result<(), LowerError> {
    for piece in pieces {
        let sub = lower(&piece.spec, &piece.caps(caps))?;
        append_lowered(plan, &piece, sub)?;
    }
    Ok(())
}

/// Appends `piece`, already lowered to `sub` (by other means than [`lower`]), to
/// `plan`.
pub(crate) fn append_lowered(plan: &mut Plan, piece: &Piece, sub: Plan) -> Result<(), LowerError> {
    if !sub.prefills.is_empty() {
        return Err(LowerError::Internal("a piece of a split op has prefills"));
    }
    let temp_base = plan.temps.len();
    plan.temps.extend(sub.temps);
    super::plan::offer(&mut plan.tunable, sub.tunable);
    let uniforms = piece.spec.uniforms();
    for mut launch in sub.launches {
        for binding in &mut launch.bindings {
            *binding = rebind(binding, piece, temp_base, &uniforms)?;
        }
        plan.launches.push(launch);
    }
    Ok(())
}

/// A piece's binding as a binding of the whole plan.
fn rebind(
    binding: &Binding,
    piece: &Piece,
    temp_base: usize,
    uniforms: &[Uniform],
) -> Result<Binding, LowerError> {
    // `within`: where in the piece's tensor the binding starts (`None`: all of it).
    let placed = |places: &[Place], i: usize, within: Option<u64>| {
        let place = places.get(i).ok_or(LowerError::Internal(
            "a piece binds a tensor it was not given",
        ))?;
        Ok(match (place.start, within) {
            (None, None) => place.of.binding(),
            (start, within) => Binding::Part {
                of: place.of,
                start: start.unwrap_or(0) + within.unwrap_or(0),
            },
        })
    };
    let temp = |i: usize| Whole::Temp(temp_base + i);
    match binding {
        Binding::Input(i) => placed(&piece.inputs, *i, None),
        Binding::Output(i) => placed(&piece.outputs, *i, None),
        Binding::Temp(i) => Ok(temp(*i).binding()),
        Binding::Part { of, start } => match of {
            Whole::Input(i) => placed(&piece.inputs, *i, Some(*start)),
            Whole::Output(i) => placed(&piece.outputs, *i, Some(*start)),
            Whole::Temp(i) => Ok(Binding::Part {
                of: temp(*i),
                start: *start,
            }),
        },
        Binding::Scalar(s) => Ok(Binding::Scalar(*s)),
        Binding::Uniform(i) => match piece.uniforms.shared(*i) {
            Some(whole) => Ok(Binding::Uniform(whole)),
            None => uniforms
                .get(*i)
                .map(|u| Binding::Scalar(u.value))
                .ok_or(LowerError::Internal(
                    "a piece binds a per-call value it lacks",
                )),
        },
    }
}

/// Rows of `inner` elements per piece: as many as fit `limit` elements, a multiple
/// of what keeps every piece's start a multiple of [`PIECE_ALIGNMENT`] elements in
/// each tensor split with them (`per_row`: each one's elements per row) where that
/// many fit, else any number.
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
    // Aligned pieces where a row is short enough; else pieces starting at multiples of
    // 4 elements (so vectors of up to 4 lanes, a word of a narrow type among them,
    // stay aligned) where 4 rows fit, else at any row; bound from the binding
    // alignment below their start (`rebase`).
    let lanes = per_row
        .iter()
        .map(|&n| 4 / gcd(n.max(1), 4))
        .max()
        .unwrap_or(1);
    let fits = limit / inner.max(1);
    let rows = if fits >= step {
        fits / step * step
    } else if fits >= lanes {
        fits / lanes * lanes
    } else {
        fits
    };
    if rows == 0 {
        return Err(LowerError::TooLarge {
            what: format!("{what}: elements of one row"),
            value: inner,
            limit,
        });
    }
    Ok(rows)
}

pub(crate) fn gcd(a: u64, b: u64) -> u64 {
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
    let limit = caps.kernel_limit();
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
    let per_row: Vec<u64> = split
        .iter()
        .flatten()
        .map(|&(_, n)| n)
        .chain([inner])
        .collect();
    if !flat && inner > limit {
        return split_map_by_row(caps, out, inputs, outputs, d, &split, &piece);
    }
    for (s, split) in inputs.iter().zip(&split) {
        if split.is_none() && numel(s) as u64 > limit {
            return Err(LowerError::TooLarge {
                what: format!("{what}: elements of an input broadcast along the split dimension"),
                value: numel(s) as u64,
                limit,
            });
        }
    }
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
                uniforms: PieceUniforms::Shared,
            }
        })
        .collect();
    assemble(caps, Vec::new(), pieces)
}

/// [`split_map`] where one row along the split dimension `d` passes the limit alone: a
/// piece per row, the op over the dimensions after `d` (itself split), inputs split
/// with the output at the row's start or, broadcast along `d`, bound whole.
fn split_map_by_row(
    caps: &TargetCaps,
    out: &[usize],
    inputs: &[&[usize]],
    outputs: usize,
    d: usize,
    split: &[Option<(usize, u64)>],
    piece: &impl Fn(&[Vec<usize>], &[usize]) -> OpSpec,
) -> Result<Plan, LowerError> {
    let rank = out.len();
    let row_out = &out[d + 1..];
    let inner = numel(row_out) as u64;
    // Each input's dimensions after `d` (aligned right: a broadcast input has 1s or
    // nothing up to and at `d`).
    let row_shape = |s: &[usize]| s[s.len().saturating_sub(rank - d - 1)..].to_vec();
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|s| row_shape(s)).collect();
    let spec = piece(&shapes, row_out);
    let pieces = (0..out[d] as u64)
        .map(|r| Piece {
            spec: spec.clone(),
            inputs: split
                .iter()
                .enumerate()
                .map(|(i, split)| match split {
                    Some((_, per_row)) => Place::at(Whole::Input(i), r * per_row),
                    None => Place::whole(Whole::Input(i)),
                })
                .collect(),
            outputs: (0..outputs)
                .map(|o| Place::at(Whole::Output(o), r * inner))
                .collect(),
            uniforms: PieceUniforms::Shared,
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
    /// An output of `numel` elements summed over every row (a parameter's gradient):
    /// each piece writes its partial sum into a temporary, and a reduction over the
    /// pieces adds them into the output.
    Summed(u64, ScalarType),
    /// An output of `numel` elements per piece, each piece's kept in a row of a
    /// temporary (for a later step to combine).
    PerPiece(u64, ScalarType),
}

/// Elements of one piece's partial in a temporary of partials: `n` rounded up so that
/// every partial starts aligned.
pub(crate) fn padded(n: u64) -> u64 {
    n.div_ceil(PIECE_ALIGNMENT) * PIECE_ALIGNMENT
}

/// The step reducing `count` partials with `func`, rows of `padded` elements of
/// `partials`, into the `padded` elements of `row`.
pub(crate) fn reduce_partials(
    dtype: ScalarType,
    func: ReduceFn,
    count: usize,
    padded: u64,
    partials: Whole,
    row: Whole,
) -> Piece {
    step(
        OpSpec::Reduce(ReduceSpec {
            func,
            dtype,
            shape: vec![count, padded as usize],
            axes: vec![0],
            keepdim: false,
            index_dtype: None,
            accumulate: false,
        }),
        vec![Place::whole(partials)],
        Place::whole(row),
    )
}

/// The step copying `n` elements from `from` to `to`.
pub(crate) fn copy_step(dtype: ScalarType, n: usize, from: Place, to: Place) -> Piece {
    step(
        OpSpec::AsStrided(AsStridedSpec {
            dtype,
            len: n,
            shape: vec![n],
            strides: vec![1],
            offset: 0,
            scatter: false,
        }),
        vec![from],
        to,
    )
}

/// `func` of two vectors of `n` elements of `dtype`.
pub(crate) fn vector_op(func: crate::ops::BinaryFn, dtype: ScalarType, n: usize) -> OpSpec {
    OpSpec::Binary(crate::ops::BinarySpec {
        func,
        dtype,
        lhs: vec![n],
        rhs: vec![n],
        out_dtype: None,
    })
}

/// The step casting `n` elements of `from` at `x` into `to` at `y`.
pub(crate) fn cast_step(from: ScalarType, to: ScalarType, n: usize, x: Place, y: Place) -> Piece {
    step(
        OpSpec::Cast(crate::ops::CastSpec {
            from,
            to,
            shape: vec![n],
        }),
        vec![x],
        y,
    )
}

/// `func` over the first axis of a tensor of `shape`, `dtype`.
pub(crate) fn over_first_axis(func: ReduceFn, dtype: ScalarType, shape: Vec<usize>) -> OpSpec {
    OpSpec::Reduce(ReduceSpec {
        func,
        dtype,
        shape,
        axes: vec![0],
        keepdim: false,
        index_dtype: None,
        accumulate: false,
    })
}

/// A step of a split op's plan after (or between) its pieces: its own per-call values.
pub(crate) fn step(spec: OpSpec, inputs: Vec<Place>, output: Place) -> Piece {
    Piece {
        spec,
        inputs,
        outputs: vec![output],
        uniforms: PieceUniforms::Own,
    }
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
    let placed = |parts: &[RowPart], whole: fn(usize) -> Whole| -> Vec<(Place, RowPart)> {
        parts
            .iter()
            .enumerate()
            .map(|(i, &p)| (Place::whole(whole(i)), p))
            .collect()
    };
    let inputs = placed(inputs, Whole::Input);
    let outputs = placed(outputs, Whole::Output);
    let mut split = RowPieces::new(what, caps, rows, &inputs, &outputs, 0, piece)?;
    for (o, row) in std::mem::take(&mut split.sums) {
        if let Some((n, dtype)) = outputs[o].1.kept() {
            let copy = copy_step(dtype, n as usize, Place::at(row, 0), outputs[o].0);
            split.pieces.push(copy);
        }
    }
    assemble(caps, split.temps, split.pieces)
}

impl RowPart {
    /// Elements and dtype of an output kept per piece (summed or not).
    fn kept(self) -> Option<(u64, ScalarType)> {
        match self {
            RowPart::Rows(_) | RowPart::Whole(_) => None,
            RowPart::Summed(n, dtype) | RowPart::PerPiece(n, dtype) => Some((n, dtype)),
        }
    }
}

/// The pieces of a row-wise op ([`split_rows`]) whose tensors lie anywhere in a
/// larger plan: `(place, part)` per input and output of a piece, a part split with
/// the rows starting where its place starts.
pub(crate) struct RowPieces {
    /// The temporaries the pieces add, numbered from `temp_base` on.
    pub temps: Vec<TempBuffer>,
    pub pieces: Vec<Piece>,
    /// Per [`RowPart::Summed`] output (by index): the temporary whose first elements
    /// hold its sum over every piece.
    pub sums: Vec<(usize, Whole)>,
    /// Per [`RowPart::PerPiece`] output (by index): the temporary holding piece `c`'s
    /// from element `c·stride` on, and `stride`.
    pub per_piece: Vec<(usize, Whole, u64)>,
}

impl RowPieces {
    pub(crate) fn new(
        what: &str,
        caps: &TargetCaps,
        rows: usize,
        inputs: &[(Place, RowPart)],
        outputs: &[(Place, RowPart)],
        temp_base: usize,
        piece: impl Fn(usize, usize) -> OpSpec,
    ) -> Result<RowPieces, LowerError> {
        let limit = caps.kernel_limit();
        let mut per_row = Vec::new();
        for (_, part) in inputs.iter().chain(outputs) {
            match *part {
                RowPart::Rows(n) => per_row.push(n),
                RowPart::Whole(n) | RowPart::Summed(n, _) | RowPart::PerPiece(n, _)
                    if n > limit =>
                {
                    return Err(LowerError::TooLarge {
                        what: format!(
                            "{what}: elements of a tensor every piece reads or writes whole"
                        ),
                        value: n,
                        limit,
                    })
                }
                RowPart::Whole(_) | RowPart::Summed(..) | RowPart::PerPiece(..) => {}
            }
        }
        if inputs.iter().any(|(_, p)| p.kept().is_some()) {
            return Err(LowerError::Internal("an input kept per piece"));
        }
        let widest = per_row.iter().copied().max().unwrap_or(1);
        let per_piece = rows_per_piece(what, limit, widest, &per_row)?;
        let count = pieces_of(rows, per_piece).count();
        let mut split = RowPieces {
            temps: Vec::new(),
            pieces: Vec::new(),
            sums: Vec::new(),
            per_piece: Vec::new(),
        };
        // Per kept output, a temporary of a padded row per piece (then, summed, a row
        // for the sum).
        let mut summed = Vec::new();
        for (o, (_, part)) in outputs.iter().enumerate() {
            let Some((n, dtype)) = part.kept() else {
                continue;
            };
            let pad = padded(n);
            if count as u64 * pad > limit {
                return Err(LowerError::TooLarge {
                    what: format!("{what}: partials of {count} pieces of {n} elements"),
                    value: count as u64 * pad,
                    limit,
                });
            }
            let t = Whole::Temp(temp_base + split.temps.len());
            split.per_piece.push((o, t, pad));
            split.temps.push(TempBuffer {
                dtype,
                len: count as u64 * pad,
            });
            if let RowPart::Summed(..) = part {
                let row = Whole::Temp(temp_base + split.temps.len());
                split.temps.push(TempBuffer { dtype, len: pad });
                summed.push(reduce_partials(dtype, ReduceFn::Sum, count, pad, t, row));
                split.sums.push((o, row));
            }
        }
        let place = |tensors: &[(Place, RowPart)], c: usize, start: usize, outputs: bool| {
            tensors
                .iter()
                .enumerate()
                .map(|(i, &(at, part))| match part {
                    RowPart::Rows(n) => Place::at(at.of, at.start.unwrap_or(0) + start as u64 * n),
                    RowPart::Whole(_) => at,
                    // Only outputs are kept (inputs were checked above).
                    RowPart::Summed(..) | RowPart::PerPiece(..) => {
                        match split.per_piece.iter().find(|p| outputs && p.0 == i) {
                            Some(&(_, temp, pad)) => Place::at(temp, c as u64 * pad),
                            None => at,
                        }
                    }
                })
                .collect()
        };
        let pieces: Vec<Piece> = pieces_of(rows, per_piece)
            .enumerate()
            .map(|(c, (start, k))| Piece {
                spec: piece(start, k),
                inputs: place(inputs, c, start, false),
                outputs: place(outputs, c, start, true),
                uniforms: PieceUniforms::Shared,
            })
            .collect();
        split.pieces = pieces;
        split.pieces.extend(summed);
        Ok(split)
    }
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
    split_rows_summing(op, what, caps, rows, whole, &[], piece)
}

/// [`split_rows_at`] with the outputs named in `summed` sums over every row (a
/// parameter's gradient; [`RowPart::Summed`]).
pub(crate) fn split_rows_summing(
    op: &impl crate::op::Op,
    what: &str,
    caps: &TargetCaps,
    rows: usize,
    whole: &[&str],
    summed: &[&str],
    piece: impl Fn(usize, usize) -> OpSpec,
) -> Result<Plan, LowerError> {
    let part = |sig: &crate::spec::TensorSig| -> Result<RowPart, LowerError> {
        let n = numel(&sig.shape) as u64;
        if whole.contains(&sig.name.as_str()) {
            return Ok(RowPart::Whole(n));
        }
        if summed.contains(&sig.name.as_str()) {
            return Ok(RowPart::Summed(n, sig.dtype));
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
