//! A convolution whose batch item passes one kernel's indices (`lower::split`): the
//! forward pass in blocks of output channels, each block reading its image whole with
//! its rows of the filter and the bias; the data gradient in blocks of input
//! channels, each reading its item's whole output gradient and its columns of the
//! filter (sliced into a temporary once per block); the filter gradient in blocks of
//! output channels per item, each item's block added to the sum of those before (in
//! the compute type). Refused with [`LowerError::TooLarge`]: an image or output
//! gradient every block reads whole, or one channel's plane, past the limit alone.

use super::{Conv2dSpec, ConvPass};
use crate::lower::math::compute_type;
use crate::lower::split::{assemble, step, Piece, PieceUniforms, Place};
use crate::lower::split::{cast_step, vector_op};
use crate::lower::{LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::{BinaryFn, SliceSpec};
use crate::spec::OpSpec;

/// `value` elements of `what`, refused where they pass `limit`.
fn fits(what: &str, value: usize, limit: u64) -> Result<(), LowerError> {
    if value as u64 > limit {
        return Err(LowerError::TooLarge {
            what: format!("conv2d: elements of {what}"),
            value: value as u64,
            limit,
        });
    }
    Ok(())
}

/// Channels per block: as many as keep each block's `per_channel` elements (of every
/// tensor cut along them) within `limit`.
fn channels_per_block(what: &str, per_channel: usize, limit: u64) -> Result<usize, LowerError> {
    fits(what, per_channel, limit)?;
    Ok((limit / per_channel.max(1) as u64) as usize)
}

pub(super) fn by_out_channels(spec: &Conv2dSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let [oh, ow] = spec.out_size();
    let [kh, kw] = spec.window.kernel;
    let image = spec.in_channels * spec.height * spec.width;
    fits("one input image", image, limit)?;
    let plane = oh * ow;
    let filter_row = spec.in_channels * kh * kw;
    let per_block = channels_per_block("one output channel", plane.max(filter_row), limit)?;
    let o = spec.out_channels;
    let mut pieces = Vec::new();
    for r in 0..spec.batch {
        for o0 in (0..o).step_by(per_block) {
            let block = per_block.min(o - o0);
            let mut inputs = vec![
                Place::at(Whole::Input(0), (r * image) as u64),
                Place::at(Whole::Input(1), (o0 * filter_row) as u64),
            ];
            if spec.bias {
                inputs.push(Place::at(Whole::Input(2), o0 as u64));
            }
            pieces.push(Piece {
                spec: OpSpec::Conv2d(Conv2dSpec {
                    batch: 1,
                    out_channels: block,
                    ..spec.clone()
                }),
                inputs,
                outputs: vec![Place::at(Whole::Output(0), ((r * o + o0) * plane) as u64)],
                uniforms: PieceUniforms::Shared,
            });
        }
    }
    assemble(caps, Vec::new(), pieces)
}

/// The data gradient of an item past the limit: blocks of input channels.
pub(super) fn by_in_channels(spec: &Conv2dSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let [oh, ow] = spec.out_size();
    let [kh, kw] = spec.window.kernel;
    let (o, c) = (spec.out_channels, spec.in_channels);
    let grad_out = o * oh * ow;
    fits("one item's output gradient", grad_out, limit)?;
    let plane = spec.height * spec.width;
    let filter_column = o * kh * kw;
    let per_block = channels_per_block("one input channel", plane.max(filter_column), limit)?;
    let filter = Whole::Temp(0);
    let temps = vec![TempBuffer {
        dtype: spec.dtype,
        len: (per_block.min(c) * filter_column) as u64,
    }];
    let mut pieces = Vec::new();
    for c0 in (0..c).step_by(per_block) {
        let block = per_block.min(c - c0);
        pieces.push(step(
            OpSpec::Slice(SliceSpec {
                dtype: spec.dtype,
                shape: vec![o, c, kh, kw],
                starts: vec![0, c0, 0, 0],
                sizes: vec![o, block, kh, kw],
                steps: vec![1; 4],
            }),
            vec![Place::whole(Whole::Input(1))],
            Place::at(filter, 0),
        ));
        for r in 0..spec.batch {
            pieces.push(Piece {
                spec: OpSpec::Conv2d(Conv2dSpec {
                    pass: ConvPass::BackwardData,
                    batch: 1,
                    in_channels: block,
                    ..spec.clone()
                }),
                inputs: vec![
                    Place::at(Whole::Input(0), (r * grad_out) as u64),
                    Place::at(filter, 0),
                ],
                outputs: vec![Place::at(Whole::Output(0), ((r * c + c0) * plane) as u64)],
                uniforms: PieceUniforms::Shared,
            });
        }
    }
    assemble(caps, temps, pieces)
}

/// The filter gradient of items past the limit: per item, blocks of output channels
/// (their rows of the output gradient and of the filter gradient), each item's block
/// written into a temporary and added to the sum so far.
pub(super) fn filter_grad_by_out_channels(
    spec: &Conv2dSpec,
    caps: &TargetCaps,
) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let [oh, ow] = spec.out_size();
    let [kh, kw] = spec.window.kernel;
    let (o, c) = (spec.out_channels, spec.in_channels);
    let image = c * spec.height * spec.width;
    fits("one input image", image, limit)?;
    let plane = oh * ow;
    let filter_row = c * kh * kw;
    let per_block = channels_per_block("one output channel", plane.max(filter_row), limit)?;
    let (dtype, ct) = (spec.dtype, compute_type(spec.dtype));
    let narrow = ct != dtype;
    let filter = o * filter_row;
    let temp = |dtype, len: usize| TempBuffer {
        dtype,
        len: len as u64,
    };
    // An item's block of the gradient in the compute type; for a narrow dtype the
    // item's image and output-gradient block cast to it (so the pieces compute and
    // sum in f32, rounding once at the end) and the running sum.
    let block_t = Whole::Temp(0);
    let mut temps = vec![temp(ct, per_block.min(o) * filter_row)];
    let (image_t, grad_t, sum) = if narrow {
        temps.extend([
            temp(ct, image),
            temp(ct, per_block.min(o) * plane),
            temp(ct, filter),
        ]);
        (Whole::Temp(1), Whole::Temp(2), Whole::Temp(3))
    } else {
        (Whole::Input(0), Whole::Input(1), Whole::Output(0))
    };
    let add = |n: usize| vector_op(BinaryFn::Add, ct, n);
    let mut pieces = Vec::new();
    for r in 0..spec.batch {
        let image_at = if narrow {
            pieces.push(cast_step(
                dtype,
                ct,
                image,
                Place::at(Whole::Input(0), (r * image) as u64),
                Place::whole(image_t),
            ));
            Place::at(image_t, 0)
        } else {
            Place::at(image_t, (r * image) as u64)
        };
        for o0 in (0..o).step_by(per_block) {
            let block = per_block.min(o - o0);
            let n = block * filter_row;
            let at = (o0 * filter_row) as u64;
            let grad_at = ((r * o + o0) * plane) as u64;
            let grad = if narrow {
                pieces.push(cast_step(
                    dtype,
                    ct,
                    block * plane,
                    Place::at(Whole::Input(1), grad_at),
                    Place::at(grad_t, 0),
                ));
                Place::at(grad_t, 0)
            } else {
                Place::at(grad_t, grad_at)
            };
            // The first item writes the sum's block directly.
            let written = if r == 0 {
                Place::at(sum, at)
            } else {
                Place::at(block_t, 0)
            };
            pieces.push(Piece {
                spec: OpSpec::Conv2d(Conv2dSpec {
                    dtype: ct,
                    batch: 1,
                    out_channels: block,
                    ..spec.clone()
                }),
                inputs: vec![image_at, grad],
                outputs: vec![written],
                uniforms: PieceUniforms::Shared,
            });
            if r > 0 {
                pieces.push(step(
                    add(n),
                    vec![Place::at(sum, at), Place::at(block_t, 0)],
                    Place::at(sum, at),
                ));
            }
        }
    }
    if narrow {
        pieces.push(cast_step(
            ct,
            dtype,
            filter,
            Place::whole(sum),
            Place::whole(Whole::Output(0)),
        ));
    }
    assemble(caps, temps, pieces)
}
