//! A convolution whose batch item passes one kernel's indices (`lower::split`): the
//! forward pass in blocks of output channels, each block reading its image whole with
//! its rows of the filter and the bias. Refused with [`LowerError::TooLarge`]: an
//! image, or one output channel's plane, past the limit alone, and the backward
//! passes of such an item (their blocks would cut the filter across its rows).

use super::Conv2dSpec;
use crate::lower::split::{assemble, Piece, PieceUniforms, Place};
use crate::lower::{LowerError, Plan, TargetCaps, Whole};
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
