//! TF32 mode on tensor cores (`input_rounding: tf32` where the caps have matrix
//! fragments). The TF32 multiplies take operands that are TF32 values already and
//! read them reduction-major ("K-major", the only layout `wgmma` takes them in), so
//! each operand is first rounded and laid out that way into a temporary by a pack
//! launch: a tiled transpose through shared memory (32 × 32 tiles, read along the
//! operand's contiguous axis, written along the reduction, rows padded to a multiple
//! of 4 elements so that the multiply's copies move 16 bytes). The engine then
//! multiplies the temporaries ([`GemmCore::tf32_operands`]), its loads plain copies.
//! Each element is rounded once, as the definition rounds it; the rounding is the
//! reference's (nearest even, [`Num::round_to_tf32`]).
//!
//! An operand whose every batch stride is 0 (one matrix broadcast over the batch) is
//! packed once; others are packed per batch entry.

use super::{Axis, Gather, GemmCore, GemmOperand};
use crate::lower::math::{bind, Num};
use crate::lower::schedule::{fold_grid, linear_workgroup, tile_loop};
use crate::lower::{Launch, LowerError, PlanBuilder, TargetCaps};
use crate::ops::InputRounding;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// Rows and columns of a pack tile.
const PACK_TILE: u32 = 32;

/// Elements a packed row is a multiple of (16 bytes of f32).
const ROW_ALIGN: u32 = 4;

/// `core` with its operands packed for TF32 fragments, the pack launches appended to
/// `plan`; `None` where `core` is not a TF32 GEMM the device multiplies on fragments
/// (or its packed operands would not fit 32-bit indices): the engine then rounds as it
/// stages, on SIMT tiles.
pub(super) fn packed(
    core: &GemmCore,
    caps: &TargetCaps,
    plan: &mut PlanBuilder,
) -> Result<Option<GemmCore>, LowerError> {
    let applies = core.input_rounding == Some(InputRounding::Tf32)
        && caps.matrix_fragments
        && core.k > 0
        && core.m > 0
        && core.n > 0
        && core.a.dtype == ScalarType::F32
        && core.b.dtype == ScalarType::F32
        && !core.has_absent();
    if !applies {
        return Ok(None);
    }
    let (Some(pa), Some(pb)) = (
        Packing::new(core, &core.a, core.m),
        Packing::new(core, &core.b, core.n),
    ) else {
        return Ok(None);
    };
    let a = pa.emit(core, caps, plan)?;
    let b = pb.emit(core, caps, plan)?;
    Ok(Some(GemmCore {
        a,
        b,
        input_rounding: None,
        tf32_operands: true,
        ..core.clone()
    }))
}

/// How one operand is packed.
struct Packing<'o> {
    op: &'o GemmOperand,
    /// The operand's extent along its outer axis (`m` for A, `n` for B).
    outer_len: u32,
    /// Elements of a packed row (the reduction, padded).
    row: u32,
    /// Matrices packed: 1 for a broadcast operand, else the batch's.
    matrices: u32,
    len: u32,
}

impl<'o> Packing<'o> {
    fn new(core: &GemmCore, op: &'o GemmOperand, outer_len: u32) -> Option<Packing<'o>> {
        let row = core.k.checked_next_multiple_of(ROW_ALIGN)?;
        let broadcast = op.batch_strides.iter().all(|&s| s == 0);
        let matrices = if broadcast { 1 } else { core.batch_count() };
        let len = (outer_len as u64 * row as u64).checked_mul(matrices as u64)?;
        let len = u32::try_from(len).ok().filter(|&l| l <= i32::MAX as u32)?;
        Some(Packing {
            op,
            outer_len,
            row,
            matrices,
            len,
        })
    }

    /// The pack launch into a new temporary, and the operand that reads it.
    fn emit(
        &self,
        core: &GemmCore,
        caps: &TargetCaps,
        plan: &mut PlanBuilder,
    ) -> Result<GemmOperand, LowerError> {
        let temp = plan.temp(ScalarType::F32, self.len as u64);
        let launch = self.launch(core, caps, &temp)?;
        plan.launches.push(launch);
        // Per batch dimension, the packed matrices' distance (row-major over the
        // batch; 0 for a broadcast operand).
        let matrix = self.outer_len * self.row;
        let mut batch_strides = vec![0u32; core.batch.len()];
        if self.matrices > 1 {
            let mut inner = matrix;
            for (d, &count) in core.batch.iter().enumerate().rev() {
                batch_strides[d] = inner;
                inner = inner.saturating_mul(count);
            }
        }
        Ok(GemmOperand {
            name: format!("{}_tf32", self.op.name),
            binding: temp,
            dtype: ScalarType::F32,
            len: self.len as u64,
            base: 0,
            batch_strides,
            gather: Gather::Strided {
                outer: self.row,
                reduction: 1,
            },
        })
    }

    fn launch(
        &self,
        core: &GemmCore,
        caps: &TargetCaps,
        temp: &crate::lower::Binding,
    ) -> Result<Launch, LowerError> {
        let op = self.op;
        let tiles_p = self.row.div_ceil(PACK_TILE);
        let tiles_o = self.outer_len.div_ceil(PACK_TILE);
        let total = (tiles_p as u64 * tiles_o as u64)
            .checked_mul(self.matrices as u64)
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| LowerError::TooLarge {
                what: "TF32 pack tile count".into(),
                value: tiles_p as u64 * tiles_o as u64 * self.matrices as u64,
                limit: u32::MAX as u64,
            })?;
        let grid = fold_grid(total, caps)?;
        let folded = grid[0] as u64 * grid[1] as u64 != total as u64;
        let inv = caps.invocations_1d();
        let tx = inv.min(PACK_TILE);
        let ty = (inv / tx)
            .clamp(1, PACK_TILE)
            .min(caps.max_workgroup_size[1].max(1));
        let pitch = PACK_TILE + 1;
        let name = format!("{}_tf32_pack_{}", core.name, op.name);
        let mut k = KernelBuilder::new(name, [tx, ty, 1]);
        let src = k.buffer(op.name.clone(), op.dtype, op.len, Access::Read);
        let dst = k.buffer(
            format!("{}_tf32", op.name),
            ScalarType::F32,
            self.len as u64,
            Access::Write,
        );
        let tile = k.shared("tile", ScalarType::F32, PACK_TILE * pitch);
        let outer_contiguous = op.gather.contiguous(self.outer_len, core.k) == Axis::Outer;
        let num = Num::scalar(ScalarType::F32);
        let (outer_len, kk, row_len) = (self.outer_len, core.k, self.row);
        let kernel = k.build(|f| {
            let wg = f.let_("wg", linear_workgroup(grid));
            let p0 = f.let_("p0", (wg.clone() % tiles_p) * PACK_TILE);
            let rest = f.let_("rest", wg.clone() / tiles_p);
            let o0 = f.let_("o0", (rest.clone() % tiles_o) * PACK_TILE);
            let z = f.let_("z", rest / tiles_o);
            let src_off = core.batch_offset(f, "src_off", &z, &op.batch_strides, op.base);
            let dst_off = bind(f, "dst_off", z * (outer_len * row_len));
            let live = folded.then(|| wg.clone().lt(total));
            let guard = |cond: E| match &live {
                Some(l) => l.clone() & cond,
                None => cond,
            };
            let lx = if tx == 1 { E::from(0u32) } else { local_id(0) };
            let ly = if ty == 1 { E::from(0u32) } else { local_id(1) };
            // Read along the operand's contiguous axis (neighbouring invocations on
            // neighbouring addresses), rounded once, into the tile as [outer][p].
            tile_loop(f, (&lx, &ly), (tx, ty), PACK_TILE, |f, row, col| {
                let (oi, pi) = if outer_contiguous {
                    (col, row)
                } else {
                    (row, col)
                };
                let (o, p) = (o0.clone() + oi.clone(), p0.clone() + pi.clone());
                let inside = guard(o.clone().lt(outer_len) & p.clone().lt(kk));
                f.if_(inside, |f| {
                    let (at, _) = op.gather.address(f, &o, &p);
                    let v = bind(f, "v", src.at(src_off.clone() + at));
                    f.store(tile, oi * pitch + pi, num.round_to_tf32(v));
                });
            });
            f.barrier();
            // Write along the reduction; the row's padding is zero.
            tile_loop(f, (&lx, &ly), (tx, ty), PACK_TILE, |f, row, col| {
                let (o, p) = (o0.clone() + row.clone(), p0.clone() + col.clone());
                let inside = guard(o.clone().lt(outer_len) & p.clone().lt(row_len));
                f.if_(inside, |f| {
                    let at = bind(f, "at", dst_off.clone() + o * row_len + p.clone());
                    f.if_else(
                        p.lt(kk),
                        |f| f.store(dst, at.clone(), tile.at(row * pitch + col)),
                        |f| f.store(dst, at.clone(), num.lit(0.0)),
                    );
                });
            });
        })?;
        Ok(Launch {
            kernel,
            grid,
            bindings: vec![op.binding.clone(), temp.clone()],
        })
    }
}
