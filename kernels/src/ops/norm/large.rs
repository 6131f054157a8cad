//! Batch norm past one kernel's indices ([`crate::lower::split`]): its statistics
//! and parameter gradients are per channel over the whole batch, so pieces of the
//! batch keep their partials, a step combines them, and pieces of the batch then
//! compute the elementwise part with the whole batch's values.
//!
//! * Training: each piece's mean and biased variance (a piece with momentum 1 over
//!   zero running statistics: its running outputs are its statistics), combined per
//!   channel by Chan's parallel formula (weights `n_k/n` of the pieces' counts); the
//!   combining launch writes `save` and the running statistics; `y` is then the
//!   inference formula over the combined mean and variance (rounded to the dtype).
//! * Backward: each piece's `dweight`, `dbias` partials summed; `dx` is then
//!   [`BatchNormBackwardSpec::given_grads`] over the pieces.
//!
//! The pieces of the first pass also write their `y` or `dx`; the second pass
//! overwrites them.

use kernelc_ir::builder::*;
use kernelc_ir::Access;

use super::{BatchNormBackwardSpec, BatchNormSpec};
use crate::lower::math::{compute_type, Num};
use crate::lower::reduction::{declare, Buf};
use crate::lower::schedule::plan_1d;
use crate::lower::split::{
    assemble, assemble_into, copy_step, split_rows_of, step, Piece, PieceUniforms, Place, RowPart,
    RowPieces,
};
use crate::lower::{Launch, LowerError, Plan, TargetCaps, TempBuffer, Uniforms, Whole};
use crate::ops::{FillSpec, FillValue};
use crate::shape::{numel, with_rows};
use crate::spec::OpSpec;

/// A tensor split with the batch: `per_item` elements per batch item.
fn rows_of(at: Whole, per_item: usize) -> (Place, RowPart) {
    (Place::whole(at), RowPart::Rows(per_item as u64))
}

/// A tensor every piece reads whole.
fn whole(at: Whole, n: usize) -> (Place, RowPart) {
    (Place::whole(at), RowPart::Whole(n as u64))
}

pub(super) fn batch_norm_backward(
    spec: &BatchNormBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let what = "batch_norm_backward";
    let (n, c) = (spec.shape[0], spec.channels());
    let per_item = numel(&spec.shape[1..]);
    let piece_shape = |r: usize| with_rows(&spec.shape, r);
    let (dy, x, w) = (Whole::Input(0), Whole::Input(1), Whole::Input(2));
    if spec.given_grads.is_some() {
        // Every tensor but dy, x and dx is per channel.
        let whole = ["weight", "dweight", "dbias", "save"];
        return split_rows_of(spec, what, caps, n, &whole, |r| {
            OpSpec::from(BatchNormBackwardSpec {
                shape: piece_shape(r),
                ..spec.clone()
            })
        });
    }
    if per_item as u64 > caps.kernel_limit() {
        return backward_by_channels(spec, caps);
    }
    // First pass: each piece's parameter-gradient partials, summed.
    let save = Whole::Input(3);
    let grads = [
        rows_of(Whole::Output(0), per_item),
        (
            Place::whole(Whole::Output(1)),
            RowPart::Summed(c as u64, spec.dtype),
        ),
        (
            Place::whole(Whole::Output(2)),
            RowPart::Summed(c as u64, spec.dtype),
        ),
    ];
    let first_inputs = [
        rows_of(dy, per_item),
        rows_of(x, per_item),
        whole(w, c),
        whole(save, 2 * c),
    ];
    let first = RowPieces::new(what, caps, n, &first_inputs, &grads, 0, |_, r| {
        OpSpec::from(BatchNormBackwardSpec {
            shape: piece_shape(r),
            param_grads: true,
            given_grads: None,
            ..spec.clone()
        })
    })?;
    let [(_, dweight), (_, dbias)] = first.sums[..] else {
        return Err(LowerError::Internal(
            "batch norm backward sums two gradients",
        ));
    };
    let mut temps = first.temps;
    let mut pieces = first.pieces;
    if spec.param_grads {
        for (row, o) in [(dweight, 1), (dbias, 2)] {
            let out = Place::whole(Whole::Output(o));
            pieces.push(copy_step(spec.dtype, c, Place::at(row, 0), out));
        }
    }
    // Second pass: dx of every piece from the whole batch's gradients.
    let given = |row: Whole| (Place::at(row, 0), RowPart::Whole(c as u64));
    let second_inputs = [
        rows_of(dy, per_item),
        rows_of(x, per_item),
        whole(w, c),
        given(dweight),
        given(dbias),
        whole(save, 2 * c),
    ];
    let dx = [rows_of(Whole::Output(0), per_item)];
    let second = RowPieces::new(what, caps, n, &second_inputs, &dx, temps.len(), |_, r| {
        OpSpec::from(BatchNormBackwardSpec {
            shape: piece_shape(r),
            param_grads: false,
            given_grads: Some(numel(&spec.shape) / c.max(1)),
            ..spec.clone()
        })
    })?;
    temps.extend(second.temps);
    pieces.extend(second.pieces);
    assemble(caps, temps, pieces)
}

pub(super) fn batch_norm(spec: &BatchNormSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let what = "batch_norm";
    let (n, c) = (spec.shape[0], spec.channels());
    let per_item = numel(&spec.shape[1..]);
    let piece_shape = |r: usize| with_rows(&spec.shape, r);
    let (x, w, b) = (Whole::Input(0), Whole::Input(1), Whole::Input(2));
    let y = rows_of(Whole::Output(0), per_item);
    let inference = |running_mean: Whole, running_var: Whole| {
        [
            rows_of(x, per_item),
            whole(w, c),
            whole(b, c),
            whole(running_mean, c),
            whole(running_var, c),
        ]
    };
    let inference_piece = |r: usize| {
        OpSpec::from(BatchNormSpec {
            shape: piece_shape(r),
            training: false,
            ..spec.clone()
        })
    };
    if !spec.training {
        let whole = ["weight", "bias", "running_mean", "running_var"];
        return split_rows_of(spec, what, caps, n, &whole, inference_piece)
            .or_else(|_| inference_by_channels(spec, caps));
    }
    if per_item as u64 > caps.kernel_limit() {
        return training_by_channels(spec, caps);
    }
    // Temporaries: zeros (the pieces' running inputs), a scratch `save`, then the
    // combined mean and variance.
    let dtype = spec.dtype;
    let channel_temp = |len: usize| TempBuffer {
        dtype,
        len: len as u64,
    };
    let (zeros, scratch, mean, var) = (0, 1, 2, 3);
    let mut temps = vec![
        channel_temp(c),
        channel_temp(2 * c),
        channel_temp(c),
        channel_temp(c),
    ];
    let zero_fill = OpSpec::Fill(FillSpec {
        dtype,
        shape: vec![c],
        value: FillValue::Constant { value: 0.0 },
        offset: 0,
    });
    let mut pieces = vec![step(
        zero_fill,
        Vec::new(),
        Place::whole(Whole::Temp(zeros)),
    )];
    // First pass: each piece's statistics (its running outputs with momentum 1).
    let stats = |k| {
        (
            Place::whole(Whole::Temp(k)),
            RowPart::PerPiece(c as u64, dtype),
        )
    };
    let outputs = [
        y,
        (
            Place::whole(Whole::Temp(scratch)),
            RowPart::Whole(2 * c as u64),
        ),
        stats(0),
        stats(1),
    ];
    let inputs = inference(Whole::Temp(zeros), Whole::Temp(zeros));
    let first = RowPieces::new(what, caps, n, &inputs, &outputs, temps.len(), |_, r| {
        OpSpec::from(BatchNormSpec {
            shape: piece_shape(r),
            eps: 0.0,
            momentum: 1.0,
            ..spec.clone()
        })
    })?;
    let piece_rows: Vec<usize> = first
        .pieces
        .iter()
        .filter_map(|p| match &p.spec {
            OpSpec::BatchNorm(s) => s.shape.first().copied(),
            _ => None,
        })
        .collect();
    let [(_, means, stride), (_, vars, _)] = first.per_piece[..] else {
        return Err(LowerError::Internal(
            "batch norm keeps two statistics per piece",
        ));
    };
    temps.extend(first.temps);
    // The pieces' momentum and eps are these constants, not the call's.
    pieces.extend(first.pieces.into_iter().map(|mut p| {
        p.uniforms = PieceUniforms::Own;
        p
    }));
    let mut plan = Plan {
        temps,
        ..Plan::default()
    };
    assemble_into(&mut plan, caps, pieces)?;
    let combine = Combine {
        spec,
        piece_rows: &piece_rows,
        partials: (means, vars, stride),
        combined: (Whole::Temp(mean), Whole::Temp(var)),
    };
    plan.launches.push(combine.launch(caps)?);
    // Second pass: y of every piece from the whole batch's statistics.
    let inputs = inference(Whole::Temp(mean), Whole::Temp(var));
    let second = RowPieces::new(what, caps, n, &inputs, &[y], plan.temps.len(), |_, r| {
        inference_piece(r)
    })?;
    plan.temps.extend(second.temps);
    assemble_into(&mut plan, caps, second.pieces)?;
    Ok(plan)
}

/// The launch combining the pieces' statistics per channel.
struct Combine<'a> {
    spec: &'a BatchNormSpec,
    /// Batch items of each piece, in order.
    piece_rows: &'a [usize],
    /// Each piece's means and variances: piece `k`'s from element `k·stride`.
    partials: (Whole, Whole, u64),
    /// Where the combined mean and variance go (`[C]` each, for the second pass).
    combined: (Whole, Whole),
}

impl Combine<'_> {
    /// One invocation per channel: mean `Σ w_k·μ_k`, variance `Σ w_k·(σ²_k + (μ_k −
    /// μ)²)` with `w_k = n_k/n`, in the compute type; then `save`, the running
    /// statistics (as the one-kernel plan updates them) and the combined pair.
    fn launch(&self, caps: &TargetCaps) -> Result<Launch, LowerError> {
        let spec = self.spec;
        let op = OpSpec::BatchNorm(spec.clone());
        let (ins, outs) = (op.inputs(), op.outputs());
        let (dtype, c) = (spec.dtype, spec.channels());
        let num = Num::scalar(compute_type(dtype));
        let count = self.piece_rows.len();
        let (means, vars, stride) = self.partials;
        let temp = |name: &str, at: Whole, len: u64, access: Access| Buf {
            name: name.to_string(),
            dtype,
            len,
            access,
            binding: at.binding(),
        };
        let partial_len = count as u64 * stride;
        let bufs = [
            temp("piece_means", means, partial_len, Access::Read),
            temp("piece_vars", vars, partial_len, Access::Read),
            Buf::input(&ins, 3),
            Buf::input(&ins, 4),
            Buf::output(&outs, 1),
            Buf::output(&outs, 2),
            Buf::output(&outs, 3),
            temp("mean", self.combined.0, c as u64, Access::Write),
            temp("var", self.combined.1, c as u64, Access::Write),
        ];
        let spec_uniforms = op.uniforms();
        let uniforms = Uniforms::new(&spec_uniforms);
        let scalars = [uniforms.param("eps")?, uniforms.param("momentum")?];
        let grid = plan_1d(c as u64, caps, 1)?;
        let mut k = KernelBuilder::new(format!("{}_combine", op.name()), grid.workgroup_size());
        let (m, params) = declare(&mut k, &bufs);
        let uni: Vec<E> = scalars.iter().map(|p| p.declare(&mut k)).collect();
        let total: usize = self.piece_rows.iter().sum();
        let weights: Vec<f64> = self
            .piece_rows
            .iter()
            .map(|&r| r as f64 / total.max(1) as f64)
            .collect();
        let kernel = k.build(|f| {
            grid.for_each_item(f, |f, ch| {
                let at = |k: usize| ch.clone() + (k as u64 * stride) as u32;
                let piece_means: Vec<E> = (0..count)
                    .map(|k| f.let_(&format!("mean{k}"), num.load(m[0], dtype, at(k))))
                    .collect();
                let weighted = |v: Vec<E>| -> E {
                    let mut terms = v.into_iter().zip(&weights).map(|(v, &w)| v * num.lit(w));
                    let first = terms.next().unwrap_or_else(|| num.lit(0.0));
                    terms.fold(first, |sum, t| sum + t)
                };
                let mean = f.let_("mean", weighted(piece_means.clone()));
                let spreads = piece_means
                    .iter()
                    .enumerate()
                    .map(|(k, mk)| {
                        let d = mk.clone() - mean.clone();
                        num.load(m[1], dtype, at(k)) + d.clone() * d
                    })
                    .collect();
                let var = f.let_("var", weighted(spreads));
                let rstd = (var.clone() + uni[0].clone()).rsqrt();
                let take = uni[1].clone();
                let keep = f.let_("keep", num.lit(1.0) - take.clone());
                let rm =
                    num.load(m[2], dtype, ch.clone()) * keep.clone() + take.clone() * mean.clone();
                let rv = num.load(m[3], dtype, ch.clone()) * keep + take * var.clone();
                let save_at = f.let_("at", ch.clone() * 2u32);
                f.store(m[4], save_at.clone(), num.narrow(mean.clone(), dtype));
                f.store(m[4], save_at + 1u32, num.narrow(rstd, dtype));
                f.store(m[5], ch.clone(), num.narrow(rm, dtype));
                f.store(m[6], ch.clone(), num.narrow(rv, dtype));
                f.store(m[7], ch.clone(), num.narrow(mean, dtype));
                f.store(m[8], ch, num.narrow(var, dtype));
            });
        })?;
        let buffers = params.iter().map(|b| b.binding.clone());
        let uniforms = scalars.iter().map(|u| u.binding.clone());
        Ok(Launch {
            kernel,
            grid: grid.grid,
            bindings: buffers.chain(uniforms).collect(),
        })
    }
}

/// Batch norm in inference whose item passes the limit: pieces of one item's channels
/// (each channel is normalised on its own), with their rows of the parameters and
/// running statistics.
fn inference_by_channels(spec: &BatchNormSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let pieces = channel_pieces(spec, caps, Whole::Input(3), Whole::Input(4))?;
    assemble(caps, Vec::new(), pieces)
}

/// The inference pieces of [`inference_by_channels`], normalising with the means and
/// variances at `mean` and `var` (`[C]` each).
fn channel_pieces(
    spec: &BatchNormSpec,
    caps: &TargetCaps,
    mean: Whole,
    var: Whole,
) -> Result<Vec<Piece>, LowerError> {
    let pieces = channel_blocks("batch_norm", &spec.shape, caps)?
        .into_iter()
        .map(|ChannelBlock { c0, at, shape, .. }| {
            let inputs = [Whole::Input(0), Whole::Input(1), Whole::Input(2), mean, var]
                .into_iter()
                .enumerate()
                .map(|(i, of)| Place::at(of, if i == 0 { at } else { c0 as u64 }))
                .collect();
            Piece {
                spec: OpSpec::from(BatchNormSpec {
                    shape,
                    training: false,
                    ..spec.clone()
                }),
                inputs,
                outputs: vec![Place::at(Whole::Output(0), at)],
                uniforms: PieceUniforms::Shared,
            }
        })
        .collect();
    Ok(pieces)
}

/// Batch norm in training whose item passes the limit: as [`batch_norm`]'s two
/// passes, with pieces of one item's channels. Each piece's statistics (its running
/// outputs with momentum 1) go into its item's row of partials at its channels, the
/// rows are combined as one-item pieces, then `y` is normalised per piece.
fn training_by_channels(spec: &BatchNormSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let (n, c) = (spec.shape[0], spec.channels());
    let blocks = channel_blocks("batch_norm", &spec.shape, caps)?;
    let dtype = spec.dtype;
    let stride = crate::lower::split::padded(c as u64);
    let temp = |len: u64| TempBuffer { dtype, len };
    let (zeros, scratch, means, vars, mean, var) = (0, 1, 2, 3, 4, 5);
    let temps = vec![
        temp(c as u64),
        temp(2 * c as u64),
        temp(n as u64 * stride),
        temp(n as u64 * stride),
        temp(c as u64),
        temp(c as u64),
    ];
    let mut pieces = vec![step(
        OpSpec::Fill(FillSpec {
            dtype,
            shape: vec![c],
            value: FillValue::Constant { value: 0.0 },
            offset: 0,
        }),
        Vec::new(),
        Place::whole(Whole::Temp(zeros)),
    )];
    for ChannelBlock { r, c0, at, shape } in blocks {
        let channel = |of: usize| Place::at(Whole::Temp(of), c0 as u64);
        let row = |of: usize| Place::at(Whole::Temp(of), r as u64 * stride + c0 as u64);
        pieces.push(Piece {
            spec: OpSpec::from(BatchNormSpec {
                shape,
                eps: 0.0,
                momentum: 1.0,
                ..spec.clone()
            }),
            inputs: vec![
                Place::at(Whole::Input(0), at),
                Place::at(Whole::Input(1), c0 as u64),
                Place::at(Whole::Input(2), c0 as u64),
                channel(zeros),
                channel(zeros),
            ],
            // y is written again by the second pass.
            outputs: vec![
                Place::at(Whole::Output(0), at),
                Place::at(Whole::Temp(scratch), 2 * c0 as u64),
                row(means),
                row(vars),
            ],
            // The pieces' momentum and eps are these constants, not the call's.
            uniforms: PieceUniforms::Own,
        });
    }
    let mut plan = Plan {
        temps,
        ..Plan::default()
    };
    assemble_into(&mut plan, caps, pieces)?;
    let piece_rows = vec![1; n];
    let combine = Combine {
        spec,
        piece_rows: &piece_rows,
        partials: (Whole::Temp(means), Whole::Temp(vars), stride),
        combined: (Whole::Temp(mean), Whole::Temp(var)),
    };
    plan.launches.push(combine.launch(caps)?);
    let second = channel_pieces(spec, caps, Whole::Temp(mean), Whole::Temp(var))?;
    assemble_into(&mut plan, caps, second)?;
    Ok(plan)
}

/// Batch norm backward whose item passes the limit: as [`batch_norm_backward`]'s two
/// passes, with pieces of one item's channels. Each piece's parameter-gradient
/// partials go into its item's row at its channels, the rows are summed, then `dx`
/// per piece from the whole batch's gradients (`given_grads`).
fn backward_by_channels(
    spec: &BatchNormBackwardSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let (n, c) = (spec.shape[0], spec.channels());
    let blocks = channel_blocks("batch_norm_backward", &spec.shape, caps)?;
    let dtype = spec.dtype;
    let stride = crate::lower::split::padded(c as u64);
    let temp = |len: u64| TempBuffer { dtype, len };
    let (dw_rows, db_rows, dw, db) = (0, 1, 2, 3);
    let temps = vec![
        temp(n as u64 * stride),
        temp(n as u64 * stride),
        temp(stride),
        temp(stride),
    ];
    let each = |pass: &dyn Fn(&ChannelBlock) -> Piece| blocks.iter().map(pass).collect::<Vec<_>>();
    let at = |of: Whole, e: u64| Place::at(of, e);
    let mut pieces = each(&|&ChannelBlock {
                                r,
                                c0,
                                at: e,
                                ref shape,
                            }| Piece {
        spec: OpSpec::from(BatchNormBackwardSpec {
            shape: shape.clone(),
            param_grads: true,
            given_grads: None,
            ..spec.clone()
        }),
        inputs: vec![
            at(Whole::Input(0), e),
            at(Whole::Input(1), e),
            at(Whole::Input(2), c0 as u64),
            at(Whole::Input(3), 2 * c0 as u64),
        ],
        // dx is written again by the second pass.
        outputs: vec![
            at(Whole::Output(0), e),
            Place::at(Whole::Temp(dw_rows), r as u64 * stride + c0 as u64),
            Place::at(Whole::Temp(db_rows), r as u64 * stride + c0 as u64),
        ],
        uniforms: PieceUniforms::Shared,
    });
    for (rows, sum) in [(dw_rows, dw), (db_rows, db)] {
        pieces.push(crate::lower::split::reduce_partials(
            dtype,
            crate::ops::ReduceFn::Sum,
            n,
            stride,
            Whole::Temp(rows),
            Whole::Temp(sum),
        ));
    }
    if spec.param_grads {
        for (sum, o) in [(dw, 1), (db, 2)] {
            pieces.push(copy_step(
                dtype,
                c,
                Place::at(Whole::Temp(sum), 0),
                Place::whole(Whole::Output(o)),
            ));
        }
    }
    let values = numel(&spec.shape) / c.max(1);
    pieces.extend(each(&|&ChannelBlock {
                             c0,
                             at: e,
                             ref shape,
                             ..
                         }| Piece {
        spec: OpSpec::from(BatchNormBackwardSpec {
            shape: shape.clone(),
            param_grads: false,
            given_grads: Some(values),
            ..spec.clone()
        }),
        inputs: vec![
            at(Whole::Input(0), e),
            at(Whole::Input(1), e),
            at(Whole::Input(2), c0 as u64),
            at(Whole::Temp(dw), c0 as u64),
            at(Whole::Temp(db), c0 as u64),
            at(Whole::Input(3), 2 * c0 as u64),
        ],
        outputs: vec![at(Whole::Output(0), e)],
        uniforms: PieceUniforms::Shared,
    }));
    assemble(caps, temps, pieces)
}

/// A piece of one item's channels: item `r`, channels from `c0` (`k` of them), its
/// data from element `at`, and the op's shape over it.
struct ChannelBlock {
    r: usize,
    c0: usize,
    at: u64,
    shape: Vec<usize>,
}

/// The channel blocks of every item of `shape` (`[N, C, ...]`) under `caps`' limit,
/// item by item.
fn channel_blocks(
    what: &str,
    shape: &[usize],
    caps: &TargetCaps,
) -> Result<Vec<ChannelBlock>, LowerError> {
    let limit = caps.kernel_limit();
    let (n, c) = (shape[0], shape[1]);
    let plane = numel(&shape[2..]);
    let per_piece = (limit / plane.max(1) as u64) as usize;
    if per_piece == 0 {
        return Err(LowerError::TooLarge {
            what: format!("{what}: elements of one channel of one item"),
            value: plane as u64,
            limit,
        });
    }
    let mut blocks = Vec::new();
    for r in 0..n {
        for c0 in (0..c).step_by(per_piece) {
            let mut piece = shape.to_vec();
            piece[0] = 1;
            piece[1] = per_piece.min(c - c0);
            blocks.push(ChannelBlock {
                r,
                c0,
                at: ((r * c + c0) * plane) as u64,
                shape: piece,
            });
        }
    }
    Ok(blocks)
}
