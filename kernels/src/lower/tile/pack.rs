//! Packed operands: an operand copied, before the multiply, into a temporary laid out
//! reduction-major ("K-major"), its rows padded to a multiple of 16 bytes, by one
//! launch each: a tiled transpose through shared memory (32 × 32 tiles read along the
//! operand's contiguous axis, written along the reduction). Two reasons:
//!
//! * **TF32 mode** (`input_rounding: tf32` where the caps have matrix fragments): the
//!   TF32 multiplies take TF32 values, and `wgmma` reads them K-major only, so both
//!   operands are rounded as they are packed ([`GemmCore::tf32_operands`]); each element
//!   is rounded once, as the definition rounds it (nearest even,
//!   [`Num::round_to_tf32`]). Always, where it applies.
//! * **Gathered 16-bit operands** on caps with warpgroup fragments and asynchronous
//!   copies (a convolution's implicit im2col): the warpgroup tiles stage by 16-byte
//!   copies, which a gather of 2-byte elements cannot feed; packed, the problem runs on
//!   them. Offered beside the unpacked schedules, the heuristics' first choice for
//!   large problems (autotuning times both).
//!
//! A packed operand's absent elements (a convolution's padding) are zeros in the
//! temporary; a NaN sum is recomputed over the existing terms of the op's own operands
//! ([`GemmCore::packed_from`]), as the engine's "Absent elements" say.
//!
//! An operand whose every batch stride is 0 (one matrix broadcast over the batch) is
//! packed once; others per batch entry.

use super::mma::{vector_staging, warpgroups};
use super::{Axis, Gather, GemmCore, GemmOperand};
use crate::lower::math::{bind, Num};
use crate::lower::schedule::{linear_workgroup, TiledTranspose};
use crate::lower::{Binding, Launch, LowerError, PlanBuilder, TargetCaps};
use crate::ops::InputRounding;
use kernelc_ir::builder::*;
use kernelc_ir::{Access, ScalarType};

/// Rows and columns of a pack tile.
const PACK_TILE: u32 = 32;

/// Bytes a packed row is a multiple of (what one asynchronous copy moves).
const ROW_ALIGN_BYTES: u32 = 16;

/// Most bytes the temporaries of one problem's gathered operands may take.
const GATHERED_PACK_LIMIT: u64 = 1 << 30;

/// Multiply-adds from which the heuristics pack gathered operands (smaller problems
/// keep them in place unless tuning says otherwise: the pack's pass over the
/// operand is paid once per call).
const PREFER_PACKING_MULTIPLY_ADDS: u64 = 1 << 28;

/// The extent of the other operand's outer axis from which the heuristics pack a
/// gathered operand: unpacked, the tiles along it each gather it again (an H200,
/// bf16 3×3 convolutions: with 256 output channels the packed warpgroups ran 2×
/// faster than the unpacked tiles, with 128 7-8% slower: the pack's index arithmetic
/// is then paid once for nothing).
const PREFER_PACKING_REUSE: u32 = 256;

/// How a problem's packed form stands against its unpacked schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Preference {
    /// The only form (TF32 mode: the tensor cores need the packed operands).
    Only,
    /// Offered first (the heuristics' choice), the unpacked schedules after it.
    First,
    /// Offered after the unpacked schedules.
    Last,
}

/// A problem with some operands packed: the problem the engine then solves, and the
/// launches that fill its temporaries.
pub(super) struct Packed {
    pub core: GemmCore,
    pub preference: Preference,
    packings: Vec<Packing>,
}

/// One operand's pack.
struct Packing {
    /// Whether it is B (else A).
    is_b: bool,
    op: GemmOperand,
    /// The problem's batch dimensions.
    batch: Vec<u32>,
    /// The operand's extent along its outer axis (`m` for A, `n` for B).
    outer_len: u32,
    /// Elements of a packed row (the reduction, padded).
    row: u32,
    /// Matrices packed: 1 for a broadcast operand, else the batch's.
    matrices: u32,
    len: u32,
    /// Whether elements are rounded to TF32 on the way.
    tf32: bool,
    /// The temporary it fills (the plan's next ones, in order).
    temp: Binding,
}

/// `core`'s packed form on `caps`, where it has one; its temporaries will be the
/// plan's `next_temp`-th and on.
pub(super) fn candidate(core: &GemmCore, caps: &TargetCaps, next_temp: usize) -> Option<Packed> {
    let nonempty = core.k > 0 && core.m > 0 && core.n > 0;
    if !nonempty || !caps.matrix_fragments || core.a.dtype != core.b.dtype {
        return None;
    }
    let tf32 = core.input_rounding == Some(InputRounding::Tf32)
        && core.a.dtype == ScalarType::F32
        && !core.has_absent();
    let gathered = caps.warpgroup_fragments
        && caps.async_copies
        && matches!(core.a.dtype, ScalarType::F16 | ScalarType::Bf16)
        && core.input_rounding.is_none();
    let (which, preference) = if tf32 {
        ([true, true], Preference::Only)
    } else if gathered {
        let which = [
            !vector_staging(core, &core.a, core.m),
            !vector_staging(core, &core.b, core.n),
        ];
        // The other operand's extent, where one is packed (the larger, where both are).
        let reuse = match which {
            [true, false] => core.n,
            [false, true] => core.m,
            _ => core.m.max(core.n),
        };
        let large = core.multiply_adds() >= PREFER_PACKING_MULTIPLY_ADDS;
        let preferred = large && reuse >= PREFER_PACKING_REUSE;
        (
            which,
            if preferred {
                Preference::First
            } else {
                Preference::Last
            },
        )
    } else {
        return None;
    };
    if which == [false, false] {
        return None;
    }
    let mut packings = Vec::new();
    for (i, (op, outer_len)) in [(&core.a, core.m), (&core.b, core.n)]
        .into_iter()
        .enumerate()
    {
        if which[i] {
            let temp = Binding::Temp(next_temp + packings.len());
            packings.push(Packing::new(
                core,
                caps,
                (i == 1, op),
                outer_len,
                tf32,
                temp,
            )?);
        }
    }
    let bytes: u64 = packings
        .iter()
        .map(|p| p.len as u64 * p.op.dtype.size_bytes() as u64)
        .sum();
    if !tf32 && bytes > GATHERED_PACK_LIMIT {
        return None;
    }
    let mut packed = GemmCore {
        packed_from: core
            .has_absent()
            .then(|| Box::new([core.a.clone(), core.b.clone()])),
        ..core.clone()
    };
    if tf32 {
        packed.input_rounding = None;
        packed.tf32_operands = true;
    }
    for p in &packings {
        let operand = p.operand();
        if p.is_b {
            packed.b = operand;
        } else {
            packed.a = operand;
        }
    }
    // Packed, a gathered problem must run on the warpgroups, or packing buys nothing
    // (a reduction that is no multiple of 4 keeps even a packed operand off them).
    if !tf32 && !warpgroups(&packed, caps) {
        return None;
    }
    Some(Packed {
        core: packed,
        preference,
        packings,
    })
}

impl Packed {
    /// Appends the temporaries and the pack launches to `plan` (whose next temporary
    /// must be the one `candidate` was told).
    pub(super) fn emit(
        &self,
        core: &GemmCore,
        caps: &TargetCaps,
        plan: &mut PlanBuilder,
    ) -> Result<(), LowerError> {
        for p in &self.packings {
            let temp = plan.temp(p.op.dtype, p.len as u64);
            if temp != p.temp {
                return Err(LowerError::Internal("a packed operand's temporary moved"));
            }
            let launch = p.launch(core, caps)?;
            plan.launches.push(launch);
        }
        Ok(())
    }
}

impl Packing {
    fn new(
        core: &GemmCore,
        caps: &TargetCaps,
        (is_b, op): (bool, &GemmOperand),
        outer_len: u32,
        tf32: bool,
        temp: Binding,
    ) -> Option<Packing> {
        let align = (ROW_ALIGN_BYTES / op.dtype.size_bytes()).max(1);
        let row = core.k.checked_next_multiple_of(align)?;
        let broadcast = op.batch_strides.iter().all(|&s| s == 0);
        let matrices = if broadcast { 1 } else { core.batch_count() };
        let len = (outer_len as u64 * row as u64).checked_mul(matrices as u64)?;
        let limit = caps.kernel_limit().min(i32::MAX as u64);
        let len = u32::try_from(len).ok().filter(|&l| l as u64 <= limit)?;
        Some(Packing {
            is_b,
            op: op.clone(),
            batch: core.batch.clone(),
            outer_len,
            row,
            matrices,
            len,
            tf32,
            temp,
        })
    }

    /// The operand that reads the temporary.
    fn operand(&self) -> GemmOperand {
        // Per batch dimension, the packed matrices' distance (row-major over the
        // batch; 0 for a broadcast operand).
        let matrix = self.outer_len * self.row;
        let dims = self.batch.len();
        let mut batch_strides = vec![0u32; dims];
        if self.matrices > 1 {
            let mut inner = matrix;
            for d in (0..dims).rev() {
                batch_strides[d] = inner;
                inner = inner.saturating_mul(self.batch[d]);
            }
        }
        GemmOperand {
            name: format!("{}_packed", self.op.name),
            binding: self.temp.clone(),
            dtype: self.op.dtype,
            len: self.len as u64,
            base: 0,
            batch_strides,
            gather: Gather::Strided {
                outer: self.row,
                reduction: 1,
            },
        }
    }

    fn launch(&self, core: &GemmCore, caps: &TargetCaps) -> Result<Launch, LowerError> {
        let op = &self.op;
        let tiles_p = self.row.div_ceil(PACK_TILE);
        let tiles_o = self.outer_len.div_ceil(PACK_TILE);
        let count = tiles_p as u64 * tiles_o as u64 * self.matrices as u64;
        let t = TiledTranspose::new("packed operand tile count", count, PACK_TILE, caps)?;
        let grid = t.grid;
        let pitch = PACK_TILE + 1;
        let name = format!("{}_pack_{}", core.name, op.name);
        let mut k = KernelBuilder::new(name, t.workgroup);
        let src = k.buffer(op.name.clone(), op.dtype, op.len, Access::Read);
        let packed_name = format!("{}_packed", op.name);
        let dst = k.buffer(packed_name, op.dtype, self.len as u64, Access::Write);
        let tile = k.shared("tile", op.dtype, PACK_TILE * pitch);
        let outer_contiguous = op.gather.contiguous(self.outer_len, core.k) == Axis::Outer;
        let num = Num::scalar(op.dtype.value_type());
        let (outer_len, kk, row_len) = (self.outer_len, core.k, self.row);
        let kernel = k.build(|f| {
            let wg = f.let_("wg", linear_workgroup(grid));
            let p0 = f.let_("p0", (wg.clone() % tiles_p) * PACK_TILE);
            let rest = f.let_("rest", wg.clone() / tiles_p);
            let o0 = f.let_("o0", (rest.clone() % tiles_o) * PACK_TILE);
            let z = f.let_("z", rest / tiles_o);
            let src_off = core.batch_offset(f, "src_off", &z, &op.batch_strides, op.base);
            let dst_off = bind(f, "dst_off", z * (outer_len * row_len));
            // Read along the operand's contiguous axis (neighbouring invocations on
            // neighbouring addresses) into the tile as [outer][p]; an absent element
            // is zero.
            t.each(f, |f, row, col| {
                let (oi, pi) = if outer_contiguous {
                    (col, row)
                } else {
                    (row, col)
                };
                let (o, p) = (o0.clone() + oi.clone(), p0.clone() + pi.clone());
                let inside = o.clone().lt(outer_len) & p.clone().lt(kk);
                t.when(f, &wg, Some(inside), |f| {
                    let at = oi * pitch + pi;
                    let (index, exists) = op.gather.address(f, &o, &p);
                    let load = |f: &mut Body| {
                        let v = bind(f, "v", src.at(src_off.clone() + index.clone()));
                        let v = if self.tf32 { num.round_to_tf32(v) } else { v };
                        f.store(tile, at.clone(), v);
                    };
                    match exists {
                        None => load(f),
                        Some(cond) => {
                            f.if_else(cond, load, |f| f.store(tile, at.clone(), num.lit(0.0)))
                        }
                    }
                });
            });
            f.barrier();
            // Write along the reduction; a row's padding is zero.
            t.each(f, |f, row, col| {
                let (o, p) = (o0.clone() + row.clone(), p0.clone() + col.clone());
                let inside = o.clone().lt(outer_len) & p.clone().lt(row_len);
                t.when(f, &wg, Some(inside), |f| {
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
            bindings: vec![op.binding.clone(), self.temp.clone()],
        })
    }
}
