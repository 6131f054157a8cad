//! Neighbourhood filters (blur, Sobel, sharpen) past one kernel's indices
//! ([`crate::lower::split`]): a piece's output rows read `halo` rows beyond them on
//! each side. Each piece filters a window of rows (starting aligned) into a
//! temporary, as an image of its own, and its rows that saw their whole
//! neighbourhood, or the true image edge, are copied into the output: the edges a
//! piece invents (clamp-to-edge of its window) never reach `y`.

use super::ImageFilterSpec;
use crate::lower::split::{assemble_into, rows_per_piece, Piece, PieceUniforms, Place};
use crate::lower::{LowerError, Plan, TargetCaps, TempBuffer, Whole};
use crate::ops::movement::large::{dense, plan_moves, Move};
use crate::spec::OpSpec;

/// The most elements of one window (so of the temporary holding it).
const WINDOW_ELEMENTS: u64 = 1 << 28;

pub(super) fn neighbourhood(
    spec: &ImageFilterSpec,
    caps: &TargetCaps,
    halo: usize,
) -> Result<Plan, LowerError> {
    let what = "image_filter";
    let limit = caps.kernel_limit();
    let row = (spec.width * spec.channels) as u64;
    let (h, rows) = (halo as u64, spec.height);
    // Interior rows per piece: its window of `interior + 2·halo` rows fits, and every
    // window starts at a multiple of the alignment.
    // Windows of at most 2^28 elements: the temporary stays a fraction of the image.
    let smallest = (2 * h + 1).saturating_mul(row);
    if smallest > limit.min(WINDOW_ELEMENTS) {
        return Err(LowerError::TooLarge {
            what: format!("{what}: elements of one row with its halo of {halo} rows each side"),
            value: smallest,
            limit: limit.min(WINDOW_ELEMENTS),
        });
    }
    let window_limit = limit.min(WINDOW_ELEMENTS) - 2 * h * row;
    let interior = rows_per_piece(what, window_limit, row, &[row])? as usize;
    let window = interior + 2 * halo;
    let mut plan = Plan {
        temps: vec![TempBuffer {
            dtype: spec.dtype,
            len: window as u64 * row,
        }],
        ..Plan::default()
    };
    let temp = Whole::Temp(0);
    let mut out_start = 0;
    for p in 0.. {
        if out_start >= rows {
            break;
        }
        let in_start = p * interior;
        let in_rows = window.min(rows - in_start);
        let out_end = ((p + 1) * interior + halo).min(rows);
        let piece = Piece {
            spec: OpSpec::from(ImageFilterSpec {
                height: in_rows,
                ..spec.clone()
            }),
            inputs: vec![Place::at(Whole::Input(0), in_start as u64 * row)],
            outputs: vec![Place::at(temp, 0)],
            uniforms: PieceUniforms::Shared,
        };
        assemble_into(&mut plan, caps, vec![piece])?;
        let kept = (out_end - out_start) as u64 * row;
        let copy = Move {
            dims: vec![kept as usize],
            from: dense(temp, (out_start - in_start) as u64 * row, &[kept as usize]),
            to: dense(Whole::Output(0), out_start as u64 * row, &[kept as usize]),
        };
        let moved = plan_moves(what, caps, spec.dtype, &[copy])?;
        plan.launches.extend(moved.launches);
        out_start = out_end;
    }
    Ok(plan)
}
