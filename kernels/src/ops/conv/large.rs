//! A convolution whose batch item passes one kernel's indices (`lower::split`): the
//! forward pass in blocks of output channels, each block reading its image whole with
//! its rows of the filter and the bias; the data gradient in blocks of input
//! channels, each reading its item's whole output gradient and its columns of the
//! filter (sliced into a temporary once per block). Refused with
//! [`LowerError::TooLarge`]: an image or output gradient, or one channel's plane, past
//! the limit alone, and the filter gradient of such an item.

use super::{Conv2dSpec, ConvPass};
use crate::lower::split::{assemble, step, Piece, PieceUniforms, Place};
use crate::lower::{LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::SliceSpec;
use crate::spec::OpSpec;

pub(super) fn by_out_channels(spec: &Conv2dSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let [oh, ow] = spec.out_size();
    let [kh, kw] = spec.window.kernel;
    let image = spec.in_channels * spec.height * spec.width;
    if image as u64 > limit {
        return Err(LowerError::TooLarge {
            what: "conv2d: elements of one input image".into(),
            value: image as u64,
            limit,
        });
    }
    let plane = oh * ow;
    let filter_row = spec.in_channels * kh * kw;
    let per_block = (limit / plane.max(filter_row).max(1) as u64) as usize;
    if per_block == 0 {
        return Err(LowerError::TooLarge {
            what: "conv2d: elements of one output channel's plane".into(),
            value: plane.max(filter_row) as u64,
            limit,
        });
    }
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
    if grad_out as u64 > limit {
        return Err(LowerError::TooLarge {
            what: "conv2d: elements of one item's output gradient".into(),
            value: grad_out as u64,
            limit,
        });
    }
    let plane = spec.height * spec.width;
    let filter_column = o * kh * kw;
    let per_block = (limit / plane.max(filter_column).max(1) as u64) as usize;
    if per_block == 0 {
        return Err(LowerError::TooLarge {
            what: "conv2d: elements of one input channel's plane".into(),
            value: plane.max(filter_column) as u64,
            limit,
        });
    }
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
