//! The tile kernel on matrix fragments (tensor cores): f16 and bf16 operands with f32
//! sums (m16n8k16), and f64 (DMMA: m16n8k16 where the caps say `f64_m16_fragments`,
//! else m8n8k4), on devices whose caps say `matrix_fragments`.
//!
//! A workgroup of `WM × WN` warps computes a `BM × BN` tile of one `C_z`; each warp
//! owns a block of it as `FM × FN` accumulator fragments ([`MmaTile`]). A loop over
//! `BK`-slabs of the reduction stages `A` as `[BM][BK + pad]` and `B` as
//! `[BN][BK + pad]` in shared memory, in the operands' own type (the padding spreads a
//! column's reads over the banks): neighbouring invocations walk each operand's
//! contiguous axis, 4 elements per load where strides, offsets and extents allow,
//! zero past the matrix, and the next slab's loads are in flight in registers while
//! this one multiplies (with two stages, a whole slab ahead of their stores). Every warp loads its `A` and `B` fragments from the staged
//! slab (PTX reads 16-bit ones by `ldmatrix`, or `ldmatrix.trans` where the slab is
//! staged reduction-major) and multiplies, `BK / k` steps per slab. f16/bf16 tiles
//! stage two slabs (the next is stored while this one multiplies: one barrier per
//! slab); f64's one (two barriers per slab: store, multiply). On devices with
//! asynchronous copies (`cp.async`) the warpgroup tile is two warpgroups of
//! m64n256k16 (a 128 × 256 tile) that copy their slabs straight into shared memory,
//! 16 bytes per copy where the operand allows, four stages deep (three slabs in
//! flight while one multiplies, and the copies of the next issued while the tensor
//! cores work on this one); its epilogue's rows take the bytes of the larger staged
//! operand ([`kernelc_ir::SharedDecl::reuses`]). The `mma.sync` tiles copy too, four
//! stages deep, one barrier per slab, where both operands move in pieces of 4, 8 or
//! 16 bytes (not a gathered 16-bit operand's).
//!
//! The epilogue goes through shared memory, a few of a warp's fragments at a time:
//! the warp stores them to its own region, and after a barrier each of its
//! invocations takes the elements of that region one row at a time (coalesced)
//! through the engine's epilogue (`alpha`, `beta·C_in`, bias, activation, rounding)
//! into C.
//!
//! Each element of C is the epilogue applied to a sum of exact products (f16 and
//! bf16 products are exact in f32; f64's are fused), summed by the tensor cores in
//! their own order, within the accumulation bound of docs/semantics.md ("Matrix
//! fragments"); the interpreter and the expansion sum them in order, one `fma` at a
//! time.

use super::kernel::Mems;
use super::schedule::{Tile, TileKernel};
use super::{add, and_opt, div, rem, scale, GemmCore, GemmOperand};
use crate::lower::math::{bind, Num};
use crate::lower::{Launch, LowerError, TargetCaps};
use kernelc_ir::builder::*;
use kernelc_ir::fragment::{
    element_index_expr, swizzle_row, FragmentLayout, FragmentRole, MmaShape, TILE,
};
use kernelc_ir::{FragmentId, ScalarType};

/// The warps (or warpgroups: the shape's group) of a workgroup and the fragments of
/// one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MmaTile {
    /// Groups along M and N.
    pub wm: u32,
    pub wn: u32,
    /// Accumulator fragments of a group along M and N.
    pub fm: u32,
    pub fn_: u32,
    /// The multiply, its operands' and its sums' types.
    pub shape: MmaShape,
    pub input: ScalarType,
    pub acc: ScalarType,
    /// Reduction elements per slab, and the padding of a staged row.
    pub bk: u32,
    pub pad: u32,
    /// Slabs staged at once: 2 lets one slab be stored while the other multiplies
    /// (one barrier per slab instead of two).
    pub stages: u32,
    /// Whether slabs are staged by asynchronous copies (`stages − 1` slabs in
    /// flight while one multiplies; no registers in between), the epilogue's rows
    /// then in the bytes of the staged `A` slabs.
    pub copies: bool,
    /// Accumulator fragments of a warp's row that go through shared memory at once
    /// in the epilogue.
    pub epilogue_frags: u32,
}

impl MmaTile {
    /// f16/bf16 operands on m16n8k16: 8 warps of 64 × 32 (a 128 × 128 tile) or 4 of
    /// 32 × 32 (64 × 64), 32-deep slabs.
    fn half(input: ScalarType, large: bool) -> MmaTile {
        MmaTile {
            wm: 2,
            wn: if large { 4 } else { 2 },
            fm: if large { 4 } else { 2 },
            fn_: 4,
            shape: MmaShape::M16N8K16,
            input,
            acc: ScalarType::F32,
            bk: 32,
            pad: 8,
            stages: 2,
            copies: false,
            epilogue_frags: if large { 1 } else { 4 },
        }
    }

    /// TF32 (f32 operands rounded by the pack launches) on m16n8k8: the f16/bf16
    /// tiles' warps, 32-deep slabs (128 bytes a row, as theirs), a 4-element pad
    /// (each warp's scalar fragment reads then hit 32 banks).
    fn tf32(large: bool) -> MmaTile {
        MmaTile {
            shape: MmaShape::M16N8K8,
            input: ScalarType::F32,
            pad: 4,
            ..MmaTile::half(ScalarType::F32, large)
        }
    }

    /// f16/bf16 (TF32) on Hopper's `wgmma` (m64n128k16, m64n128k8): four
    /// warpgroups of 64 × 128 (a 256 × 128 tile: 85 flops per staged byte, where
    /// 128 × 128 has 64), slabs of one swizzled row deep (64 16-bit or 32 TF32
    /// elements) staged in the swizzled layouts the instruction reads (whole 128-byte
    /// rows: global loads of whole lines, shared stores and the tensor cores' reads
    /// without bank conflicts), two stages.
    fn warpgroup(input: ScalarType) -> MmaTile {
        MmaTile {
            wm: 4,
            wn: 1,
            fm: 1,
            fn_: 1,
            shape: if input == ScalarType::F32 {
                MmaShape::M64N128K8
            } else {
                MmaShape::M64N128K16
            },
            input,
            acc: ScalarType::F32,
            bk: swizzle_row(input),
            pad: 0,
            stages: 2,
            copies: false,
            epilogue_frags: 1,
        }
    }

    /// f64 on m16n8k16 (Hopper's DMMA shape): 8 warps of 32 × 32 (a 64 × 128 tile)
    /// or 4 (64 × 64), `bk`-deep slabs.
    fn double16(large: bool, bk: u32) -> MmaTile {
        MmaTile {
            fm: 2,
            shape: MmaShape::M16N8K16,
            bk,
            epilogue_frags: 2,
            ..MmaTile::double(large)
        }
    }

    /// Two warpgroups of 64 × 256 (a 128 × 256 tile), for the copy pipeline.
    fn wide_warpgroup(input: ScalarType) -> MmaTile {
        let narrow = MmaTile::warpgroup(input);
        MmaTile {
            wm: 2,
            shape: MmaShape {
                n: 256,
                ..narrow.shape
            },
            ..narrow
        }
    }

    /// f64 on m8n8k4 (DMMA): 8 warps of 32 × 32 (a 64 × 128 tile) or 4 (64 × 64),
    /// 16-deep slabs.
    fn double(large: bool) -> MmaTile {
        MmaTile {
            wm: 2,
            wn: if large { 4 } else { 2 },
            fm: 4,
            fn_: 4,
            shape: MmaShape::M8N8K4,
            input: ScalarType::F64,
            acc: ScalarType::F64,
            bk: 16,
            pad: 4,
            stages: 1,
            copies: false,
            epilogue_frags: 4,
        }
    }

    /// The tile's name among a plan's schedules (`Tunable::choices`):
    /// `"mma m64n256k16 128x256x64 2x1 warpgroups 4 stages by copies"`.
    pub(crate) fn name(&self) -> String {
        let MmaShape { m, n, k } = self.shape;
        let staging = if self.copies { "copies" } else { "registers" };
        let group = if self.shape.is_warpgroup() {
            "warpgroups"
        } else {
            "warps"
        };
        format!(
            "mma m{m}n{n}k{k} {}x{}x{} {}x{} {group} {} stages by {staging}",
            self.bm(),
            self.bn(),
            self.bk,
            self.wm,
            self.wn,
            self.stages
        )
    }

    /// Elements of a warp's epilogue region: `epilogue_frags` fragments of a row.
    fn epilogue_region(&self) -> u32 {
        self.shape.m * self.shape.n * self.epilogue_frags
    }

    /// A staged row: the slab and its padding.
    fn row(&self) -> u32 {
        self.bk + self.pad
    }

    /// Groups (warps or warpgroups) of the workgroup.
    fn warps(&self) -> u32 {
        self.wm * self.wn
    }
    /// Invocations of a group.
    fn group(&self) -> u32 {
        self.shape.group()
    }
    /// Whether slabs are staged in the swizzled layouts (a warpgroup's operands).
    fn swizzled(&self) -> bool {
        self.shape.is_warpgroup()
    }
    fn warp_rows(&self) -> u32 {
        self.fm * self.shape.m
    }
    fn warp_cols(&self) -> u32 {
        self.fn_ * self.shape.n
    }
    fn bm(&self) -> u32 {
        self.wm * self.warp_rows()
    }
    fn bn(&self) -> u32 {
        self.wn * self.warp_cols()
    }
    fn invocations(&self) -> u32 {
        self.warps() * self.group()
    }

    /// The engine's tile record of this shape (for placement and the epilogue).
    fn as_tile(&self) -> Tile {
        Tile {
            bm: self.bm(),
            bn: self.bn(),
            bk: self.bk,
            ty: 1,
            tx: self.invocations(),
            tm: self.bm(),
            tn: self.bn() / self.invocations(),
            vn: 1,
            vm: 1,
            unroll: 1,
        }
    }

    /// At most (a slab staged either way round; with copies, the epilogue's rows in
    /// the `A` slabs' bytes).
    fn shared_bytes(&self) -> u64 {
        let slabs = |outer: u32| {
            (outer + self.pad) as u64
                * self.row() as u64
                * self.stages as u64
                * self.input.size_bytes() as u64
        };
        let (a, b) = (slabs(self.bm()), slabs(self.bn()));
        let epilogue =
            (self.warps() * self.epilogue_region()) as u64 * self.acc.size_bytes() as u64;
        if self.copies {
            a.max(b).max(epilogue) + a.min(b)
        } else {
            a + b + epilogue
        }
    }

    /// The tile staged by asynchronous copies, [`COPY_STAGES`] deep.
    fn with_copies(self) -> MmaTile {
        MmaTile {
            stages: COPY_STAGES,
            copies: true,
            ..self
        }
    }
}

/// Slabs of the copy pipeline: three in flight while one multiplies (the warpgroup
/// tile's four take 192 KiB, its epilogue's rows in the 128 KiB of the `B` slabs;
/// three ran 5% slower on an H200, five do not fit; the `mma.sync` tiles' take at
/// most 128 KiB).
const COPY_STAGES: u32 = 4;

/// The fragment tile for `core` on `caps`, or `None` where the SIMT tile serves: no
/// matrix units, other operand types, or `input_rounding`.
pub(crate) fn choose(core: &GemmCore, caps: &TargetCaps) -> Option<MmaTile> {
    if !eligible(core, caps) {
        return None;
    }
    let tiles = |t: MmaTile| tile_count(core, t);
    let large = if warpgroups(core, caps) {
        MmaTile::warpgroup(core.a.dtype)
    } else {
        kind(core, caps, true)?
    };
    // The large tile where it still fills about a device's worth of workgroups;
    // four warpgroups by copies down to about a third of one (H200, a packed bf16
    // convolution of 64 such tiles: 115 µs against 126 for the best `mma.sync`
    // tile and 144 for two warpgroups of 64 × 256).
    let warpgroup_copies = large.swizzled() && caps.async_copies;
    let few = tiles(large) < 96 && forced() == Forced::None;
    if warpgroup_copies && few && tiles(large) >= 48 {
        let narrow = MmaTile::warpgroup(core.a.dtype).with_copies();
        if fits(&narrow, caps) {
            return Some(narrow);
        }
    }
    let tile = if few { kind(core, caps, false)? } else { large };
    // Slabs through asynchronous copies where the device has them, both operands
    // move in pieces of 4, 8 or 16 bytes and the deeper stages fit; on warpgroups,
    // two of 64 × 256, which the copies leave the registers for (H200, bf16 4096³:
    // 612 TFLOP/s against 590 for four of 64 × 128).
    let copied = if tile.swizzled() && caps.async_copies {
        let wide = MmaTile::wide_warpgroup(core.a.dtype).with_copies();
        let warps = kind(core, caps, true).and_then(|t| copied(core, caps, t));
        // (Tests that force the large tiles keep the warpgroups.)
        let weigh = forced() == Forced::None;
        match warps.filter(|t| fits(t, caps)) {
            Some(warps) if weigh && warp_tiles_win(core, wide, warps) => Some(warps),
            _ => Some(wide),
        }
    } else {
        copied(core, caps, tile)
    };
    copied
        .filter(|t| fits(t, caps))
        .or_else(|| fits(&tile, caps).then_some(tile))
}

/// Workgroups `core` takes on tile `t` (its output tiles over the batch).
fn tile_count(core: &GemmCore, t: MmaTile) -> u64 {
    core.m.div_ceil(t.bm()) as u64 * core.n.div_ceil(t.bn()) as u64 * core.batch_count() as u64
}

/// Workgroups of a wave of the wide warpgroup tile, one per SM (an H100/H200 has
/// 132 SMs).
const WAVE: u64 = 132;

/// `mma.sync`'s rate of multiply-adds on an SM as a fraction of `wgmma`'s (fitted
/// to the H200 runs below).
const WARP_RATE: f64 = 0.65;

/// Whether the `mma.sync` tile `warps` is expected to beat the wide warpgroup tile
/// `wide` on `core`. The wide tile's staged slabs take a whole SM, so each tile's
/// pipeline fill (`stages · bk` of the reduction) is exposed and its waves are whole;
/// several `mma.sync` tiles share an SM and hide both, at a lower rate. Short
/// reductions over about two waves favour them (H200, channels-last bf16 3×3
/// convolutions: 16×64×56² → 128, a reduction of 576 over 1.6 waves, ran in 82.8 µs
/// on `mma.sync` 128 × 128 against 105 on warpgroups of 128 × 256; 32×128×28² → 128,
/// 1152 over one wave, 77.8 against 72.9).
fn warp_tiles_win(core: &GemmCore, wide: MmaTile, warps: MmaTile) -> bool {
    let tiles = |t: MmaTile| tile_count(core, t);
    let k = core.k as f64;
    let waves = tiles(wide).div_ceil(WAVE) as f64;
    let wide_cost = waves * (k + (wide.stages * wide.bk) as f64);
    let area = (warps.bm() * warps.bn()) as f64 / (wide.bm() * wide.bn()) as f64;
    let warps_cost = tiles(warps) as f64 * area * k / (WAVE as f64 * WARP_RATE);
    warps_cost < wide_cost
}

/// Every fragment tile `core` may take on `caps`, [`choose`]'s first (empty where it
/// takes none): the alternatives autotuning times. Each tile kind the heuristics pick
/// between, staged by copies where they apply (else by registers), wherever it fits.
pub(crate) fn alternatives(core: &GemmCore, caps: &TargetCaps) -> Vec<MmaTile> {
    let Some(first) = choose(core, caps) else {
        return Vec::new();
    };
    let mut tiles = vec![first];
    let mut consider = |t: Option<MmaTile>| {
        if let Some(t) = t.filter(|t| fits(t, caps) && !tiles.contains(t)) {
            tiles.push(t);
        }
    };
    if warpgroups(core, caps) {
        let (wide, narrow) = (
            MmaTile::wide_warpgroup(core.a.dtype),
            MmaTile::warpgroup(core.a.dtype),
        );
        if caps.async_copies {
            consider(Some(wide.with_copies()));
            consider(Some(narrow.with_copies()));
        } else {
            consider(Some(narrow));
        }
    }
    for large in [true, false] {
        let mut kinds: Vec<MmaTile> = kind(core, caps, large).into_iter().collect();
        if core.a.dtype == ScalarType::F64 && caps.f64_m16_fragments {
            // The 32-deep slabs, the m8n8k4 tiles of older devices, and (on an H200
            // the small tile ran 10% faster than the large) 64 × 64 on 8 warps of
            // 16 × 32 and 64 × 32 on 4 of 32 × 16.
            kinds.extend([MmaTile::double16(large, 32), MmaTile::double(large)]);
            if !large {
                let small = MmaTile::double16(false, 16);
                kinds.extend([
                    MmaTile {
                        wm: 4,
                        fm: 1,
                        ..small
                    },
                    MmaTile { fn_: 2, ..small },
                ]);
            }
        }
        // Staged by registers only where copies cannot (they ran 1.2-2× slower on
        // an H200 wherever both could).
        for t in kinds {
            consider(copied(core, caps, t).or(Some(t)));
        }
    }
    tiles
}

/// Whether `core` may run on fragments on `caps` at all.
fn eligible(core: &GemmCore, caps: &TargetCaps) -> bool {
    caps.matrix_fragments
        && core.b.dtype == core.a.dtype
        && core.input_rounding.is_none()
        && (core.a.dtype != ScalarType::F32 || core.tf32_operands)
        && core.k > 0
}

/// The `mma.sync` tile (large or small) of `core`'s operand type on `caps`.
fn kind(core: &GemmCore, caps: &TargetCaps, large: bool) -> Option<MmaTile> {
    match core.a.dtype {
        ScalarType::F16 | ScalarType::Bf16 => Some(MmaTile::half(core.a.dtype, large)),
        ScalarType::F64 if caps.f64_m16_fragments => Some(MmaTile::double16(large, 16)),
        ScalarType::F64 => Some(MmaTile::double(large)),
        ScalarType::F32 if core.tf32_operands => Some(MmaTile::tf32(large)),
        _ => None,
    }
}

/// Whether `core` runs on warpgroups on `caps`: the device has them and both operands
/// stage 4-wide (gathered operands, such as a convolution's, run faster on the
/// `mma.sync` tile's 32-deep slabs: 49% of cuDNN against 33%, H200); TF32 ones lie
/// along the reduction (as TF32 mode packs them: `wgmma` reads no other way).
pub(super) fn warpgroups(core: &GemmCore, caps: &TargetCaps) -> bool {
    let along = |op: &GemmOperand, outer_len| {
        op.gather.contiguous(outer_len, core.k) == super::Axis::Reduction
    };
    let types = match core.a.dtype {
        ScalarType::F16 | ScalarType::Bf16 => true,
        ScalarType::F32 => core.tf32_operands && along(&core.a, core.m) && along(&core.b, core.n),
        _ => false,
    };
    caps.warpgroup_fragments
        && types
        && vector_staging(core, &core.a, core.m)
        && vector_staging(core, &core.b, core.n)
        && forced() != Forced::MmaSync
}

/// The `mma.sync` tile `t` staged by asynchronous copies, where the device has them
/// and both operands move in pieces of 4, 8 or 16 bytes.
fn copied(core: &GemmCore, caps: &TargetCaps, t: MmaTile) -> Option<MmaTile> {
    let both = copy_lanes(core, &core.a, core.m, t.bm(), t).is_some()
        && copy_lanes(core, &core.b, core.n, t.bn(), t).is_some();
    (caps.async_copies && !t.swizzled() && both).then(|| t.with_copies())
}

/// Whether tile `t` fits a workgroup of `caps`: the warpgroup and copy-staged tiles
/// opt into more shared memory than the plain limit.
fn fits(t: &MmaTile, caps: &TargetCaps) -> bool {
    let shared = if t.swizzled() || t.copies {
        caps.opt_in_shared_memory_limit()
    } else {
        caps.shared_memory_bytes
    };
    t.invocations() <= caps.max_invocations_per_workgroup && t.shared_bytes() <= shared as u64
}

/// Which large tile tests force on small shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
enum Forced {
    None,
    /// The large tile of the device (warpgroups where it has them).
    Large,
    /// The large `mma.sync` tile, even where the device has warpgroups.
    MmaSync,
}

#[cfg(test)]
use tests::forced;
#[cfg(not(test))]
fn forced() -> Forced {
    Forced::None
}

impl TileKernel<'_> {
    /// The plan of the fragment tile `mt` (never split).
    pub(super) fn for_fragments<'c>(
        core: &'c GemmCore,
        caps: &TargetCaps,
        mt: MmaTile,
    ) -> TileKernel<'c> {
        TileKernel::new(core, caps, mt.as_tile())
    }

    /// The fragment tile kernel's launch.
    pub(super) fn build_mma(&self, caps: &TargetCaps, mt: MmaTile) -> Result<Launch, LowerError> {
        let core = self.core;
        let grid = self.grid(caps)?;
        let mut k = KernelBuilder::new(format!("{}_mma", core.name), [mt.invocations(), 1, 1]);
        let mut bindings = Vec::new();
        let (a, b) = self.operand_buffers(&mut k, &mut bindings);
        let exact = core.recompute_buffers(&mut k, &mut bindings, Some((a, b)));
        let e = core.epilogue_buffers(&mut k, &mut bindings);
        let staged = |op: &GemmOperand, outer_len: u32, outer: u32| {
            let along = op.gather.contiguous(outer_len, core.k) == super::Axis::Reduction;
            if along {
                outer * mt.row()
            } else {
                mt.bk * (outer + mt.pad)
            }
        };
        let a_stage = staged(&core.a, core.m, mt.bm());
        let b_stage = staged(&core.b, core.n, mt.bn());
        let a_sh = k.shared("a_tile", core.a.dtype, mt.stages * a_stage);
        let b_sh = k.shared("b_tile", core.b.dtype, mt.stages * b_stage);
        let c_len = mt.warps() * mt.epilogue_region();
        // The larger of the staged operands hosts the epilogue's rows.
        let host = if a_stage >= b_stage { a_sh } else { b_sh };
        let c_sh = if mt.copies {
            k.shared_reusing("c_rows", mt.acc, c_len, host)
        } else {
            k.shared("c_rows", mt.acc, c_len)
        };
        let mems = Mems {
            a,
            b,
            bias: e.bias,
            c_in: e.c_in,
            out: e.out,
            alpha: Some(e.alpha),
            beta: e.beta,
            a_sh,
            b_sh,
            acc_sh: Some(c_sh),
            exact,
        };
        let kernel = k.build(|f| self.mma_body(f, grid, &mems, mt, (a_stage, b_stage)))?;
        Ok(Launch {
            kernel,
            grid,
            bindings,
        })
    }

    fn mma_body(&self, f: &mut Body, grid: [u32; 3], m: &Mems, mt: MmaTile, stage_len: (u32, u32)) {
        let core = self.core;
        let place = self.place(f, grid);
        let input = core.a.dtype;
        let warp = f.let_("warp", div(place.tid.clone(), mt.group()));
        let lane = f.let_("lane", rem(place.tid.clone(), mt.group()));
        let wr = bind(
            f,
            "warp_row",
            scale(div(warp.clone(), mt.wn), mt.warp_rows()),
        );
        let wc = bind(
            f,
            "warp_col",
            scale(rem(warp.clone(), mt.wn), mt.warp_cols()),
        );
        let shape = mt.shape;
        let frag = |f: &mut Body, name: &str, role| f.fragment(name, role, shape, input);
        let fa: Vec<FragmentId> = (0..mt.fm).map(|_| frag(f, "a", FragmentRole::A)).collect();
        let fb: Vec<FragmentId> = (0..mt.fn_).map(|_| frag(f, "b", FragmentRole::B)).collect();
        let acc: Vec<Vec<FragmentId>> = (0..mt.fm)
            .map(|_| {
                (0..mt.fn_)
                    .map(|_| f.fragment("acc", FragmentRole::Accumulator, shape, mt.acc))
                    .collect()
            })
            .collect();
        for &c in acc.iter().flatten() {
            f.fill_fragment(c, Num::scalar(mt.acc).lit(0.0));
        }
        // The tile's origin, clamped to the last tile (which every workgroup that
        // gets here is at most): the value ranges then bound the staging loads.
        let last = |tiles: u32, size: u32| E::from(tiles.saturating_sub(1) * size);
        let m0 = bind(f, "m0c", place.m0.clone().min(last(self.tiles_m, mt.bm())));
        let n0 = bind(f, "n0c", place.n0.clone().min(last(self.tiles_n, mt.bn())));
        let sides = [
            Staging::new(
                core,
                &core.a,
                (m.a, m.a_sh),
                (core.m, mt.bm()),
                &m0,
                &place.off_a,
                mt,
            ),
            Staging::new(
                core,
                &core.b,
                (m.b, m.b_sh),
                (core.n, mt.bn()),
                &n0,
                &place.off_b,
                mt,
            ),
        ];
        let (row_a, row_b) = (sides[0].row, sides[1].row);
        let (bk, shape) = (mt.bk, mt.shape);
        let slabs = core.k.div_ceil(bk);
        // The next slab's global loads are in flight while this slab multiplies
        // (through registers; with copies, straight into their stage).
        let regs: Vec<Vec<Var>> = if mt.copies {
            vec![Vec::new(), Vec::new()]
        } else {
            sides.iter().map(|s| s.registers(f)).collect()
        };
        if !mt.copies {
            for (side, regs) in sides.iter().zip(&regs) {
                side.fetch(f, regs, &E::from(0u32));
            }
        }
        let store = |f: &mut Body, stage: &E| {
            let offsets = [stage_len.0, stage_len.1].map(|len| scale(stage.clone(), len));
            for ((side, regs), off) in sides.iter().zip(&regs).zip(offsets) {
                side.store(f, regs, &off);
            }
        };
        let fetch_next = |f: &mut Body, next: &E| {
            // `next` is below `slabs` where this runs; the clamp says so to the value
            // ranges.
            let next = next.clone().min(E::from(slabs - 1));
            let p0 = bind(f, "p0", scale(next, bk));
            for (side, regs) in sides.iter().zip(&regs) {
                side.fetch(f, regs, &p0);
            }
        };
        let multiply = |f: &mut Body, stage: &E| {
            let a_off = bind(f, "a_stage", scale(stage.clone(), stage_len.0));
            let b_off = bind(f, "b_stage", scale(stage.clone(), stage_len.1));
            for step in 0..bk / shape.k {
                let p = step * shape.k;
                // A staged row-major ([outer][bk]) is read row-major as A and
                // column-major as B; staged reduction-major ([bk][outer]), the other way.
                for (i, &a) in fa.iter().enumerate() {
                    let r = add(wr.clone(), E::from(i as u32 * shape.m));
                    let (at, layout) = sides[0].fragment_at(r, p, FragmentRole::A);
                    f.load_fragment(a, m.a_sh, add(a_off.clone(), at), row_a, layout);
                }
                for (j, &b) in fb.iter().enumerate() {
                    let c = add(wc.clone(), E::from(j as u32 * shape.n));
                    let (at, layout) = sides[1].fragment_at(c, p, FragmentRole::B);
                    f.load_fragment(b, m.b_sh, add(b_off.clone(), at), row_b, layout);
                }
                for (i, &a) in fa.iter().enumerate() {
                    for (j, &b) in fb.iter().enumerate() {
                        f.mma(acc[i][j], a, b, acc[i][j]);
                    }
                }
            }
        };
        if mt.copies {
            // Slab s multiplies from stage s mod S while the copies of the S − 1
            // slabs after it are in flight; at the top of each step, a wait for slab
            // s's copies (the S − 2 groups after it may stay in flight) and a barrier
            // (every invocation's copies of it visible, every warp done with the
            // stage the next copies go to). Every step commits a group, empty past
            // the last slab, so that the wait counts hold.
            let s = mt.stages;
            let copy_slab = |f: &mut Body, slab: &E| {
                // `slab` is below `slabs` where this runs; the clamp says so to the
                // value ranges.
                let slab = bind(f, "slab_c", slab.clone().min(E::from(slabs - 1)));
                let p0 = bind(f, "p0", scale(slab.clone(), bk));
                let stage = rem(slab, s);
                let offsets = [stage_len.0, stage_len.1].map(|len| scale(stage.clone(), len));
                for (side, off) in sides.iter().zip(&offsets) {
                    side.copy(f, &p0, off);
                }
            };
            for slab in 0..s - 1 {
                if slab < slabs {
                    copy_slab(f, &E::from(slab));
                }
                f.copy_commit();
            }
            f.for_("slab", 0u32, slabs, 1, |f, slab| {
                f.copy_wait(s - 2);
                f.barrier();
                // The multiplies first: on warpgroups they run while the next
                // copies are issued (into the stage slab s − 1 read, which every
                // warp is done with since the barrier).
                let stage = bind(f, "stage", rem(slab.clone(), s));
                multiply(f, &stage);
                let next = bind(f, "next", add(slab, E::from(s - 1)));
                f.if_(next.clone().lt(slabs), |f| copy_slab(f, &next));
                f.copy_commit();
            });
            // The epilogue's rows take the `A` slabs' bytes: every warp is done with
            // them first.
            f.barrier();
        } else if mt.stages == 2 {
            // Slab s multiplies from stage s mod 2 while slab s + 1, loaded into
            // registers during slab s − 1, is stored into the other, and slab s + 2's
            // loads start: a whole slab's multiply and barrier hide each load's
            // latency. One barrier per slab orders it all.
            store(f, &E::from(0u32));
            if slabs > 1 {
                fetch_next(f, &E::from(1u32));
            }
            f.barrier();
            f.for_("slab", 0u32, slabs, 1, |f, slab| {
                let stage = bind(f, "stage", rem(slab.clone(), 2));
                multiply(f, &stage);
                let next = bind(f, "next", add(slab, E::from(1u32)));
                f.if_(next.clone().lt(slabs), |f| {
                    store(f, &rem(next.clone(), 2));
                    let after = bind(f, "after", add(next.clone(), E::from(1u32)));
                    f.if_(after.clone().lt(slabs), |f| fetch_next(f, &after));
                });
                f.barrier();
            });
        } else {
            f.for_("slab", 0u32, slabs, 1, |f, slab| {
                store(f, &E::from(0u32));
                f.barrier();
                let next = bind(f, "next", add(slab, E::from(1u32)));
                f.if_(next.clone().lt(slabs), |f| fetch_next(f, &next));
                multiply(f, &E::from(0u32));
                // Every warp is done with the slab before the next one is stored.
                f.barrier();
            });
        }
        self.mma_epilogue(f, m, &place, mt, (&warp, &lane, &wr, &wc), &acc);
    }

    /// C through the engine's epilogue, one row of each warp's fragments at a time.
    fn mma_epilogue(
        &self,
        f: &mut Body,
        m: &Mems,
        place: &super::kernel::Place,
        mt: MmaTile,
        (warp, lane, wr, wc): (&E, &E, &E, &E),
        acc: &[Vec<FragmentId>],
    ) {
        let core = self.core;
        let Some(c_sh) = m.acc_sh else { return };
        let shape = mt.shape;
        let width = mt.epilogue_frags * shape.n;
        let region = bind(f, "region", scale(warp.clone(), mt.epilogue_region()));
        let chunks = acc.iter().enumerate().flat_map(|(i, row)| {
            row.chunks(mt.epilogue_frags as usize)
                .enumerate()
                .map(move |(j, chunk)| (i, j as u32 * width, chunk))
        });
        for (i, first_col, chunk) in chunks {
            for (j, &c) in chunk.iter().enumerate() {
                let at = add(region.clone(), E::from(j as u32 * shape.n));
                f.store_fragment(c, c_sh, at, width, FragmentLayout::RowMajor);
            }
            f.barrier();
            for q in 0..shape.m * width / mt.group() {
                let e = add(lane.clone(), E::from(q * mt.group()));
                let r = div(e.clone(), width);
                let col_in = rem(e.clone(), width);
                let row = bind(
                    f,
                    "row",
                    add(
                        add(place.m0.clone(), wr.clone()),
                        add(E::from(i as u32 * shape.m), r),
                    ),
                );
                let col = bind(
                    f,
                    "col",
                    add(
                        add(place.n0.clone(), wc.clone()),
                        add(E::from(first_col), col_in),
                    ),
                );
                let inside = row.clone().lt(core.m) & col.clone().lt(core.n);
                f.if_(inside, |f| {
                    let index = bind(
                        f,
                        "c_at",
                        add(
                            add(place.off_c.clone(), scale(row.clone(), core.c.ld)),
                            col.clone(),
                        ),
                    );
                    let mut sum = c_sh.at(add(region.clone(), e));
                    if let Some(terms) = m.exact {
                        // A NaN may be a `0·∞` of an absent element: summed again
                        // over the existing terms (the engine's "Absent elements").
                        let s = f.var("sum", sum);
                        f.if_(s.get().ne(s.get()), |f| {
                            let exact = core.exact_dot(f, terms, &place.z, &row, &col);
                            f.assign(s, exact);
                        });
                        sum = s.get();
                    }
                    let row_bias = self.row_bias(f, m, &row);
                    let v = self.finish_value(f, m, &index, &col, row_bias, sum, 1);
                    f.store(m.out, index, v);
                });
            }
            // The region is written again by the next row of fragments.
            f.barrier();
        }
    }
}

/// Whether `op` (of extent `outer_len` along its outer axis) stages 4 elements per
/// load: strides, offsets and extents keep every vector aligned and whole inside or
/// outside the matrix.
pub(super) fn vector_staging(core: &GemmCore, op: &GemmOperand, outer_len: u32) -> bool {
    vector_lanes(core, op, outer_len, 4)
}

/// The elements of `op` (of extent `outer_len`, `outer` of it per tile) that one
/// asynchronous copy moves on tile `mt`: the most of 16, 8 or 4 bytes that its
/// strides, offsets and extents keep aligned and whole inside or outside the matrix,
/// and that split each slab evenly over the threads; `None` where none does (a
/// gathered 16-bit operand, whose pieces are 2 bytes).
fn copy_lanes(
    core: &GemmCore,
    op: &GemmOperand,
    outer_len: u32,
    outer: u32,
    mt: MmaTile,
) -> Option<u8> {
    let size = op.dtype.size_bytes();
    [16u32, 8, 4]
        .into_iter()
        .filter(|bytes| bytes % size == 0)
        .map(|bytes| bytes / size)
        .find(|&lanes| {
            let whole = (outer * mt.bk) % (lanes * mt.invocations()) == 0;
            let per_row = if op.gather.contiguous(outer_len, core.k) == super::Axis::Reduction {
                mt.bk
            } else {
                outer
            };
            let vectors = lanes == 1 || vector_lanes(core, op, outer_len, lanes as u8);
            whole && per_row % lanes == 0 && vectors
        })
        .map(|lanes| lanes as u8)
}

/// Whether `op` stages `lanes` elements per load (see [`vector_staging`]).
fn vector_lanes(core: &GemmCore, op: &GemmOperand, outer_len: u32, lanes: u8) -> bool {
    let n = lanes as u32;
    let along_reduction = op.gather.contiguous(outer_len, core.k) == super::Axis::Reduction;
    let aligned_offsets = op.base % n == 0
        && core
            .batch
            .iter()
            .zip(&op.batch_strides)
            .all(|(&count, &s)| count == 1 || s % n == 0);
    // Vectors along the contiguous axis stay whole inside or outside the matrix.
    let whole = if along_reduction { core.k } else { outer_len } % n == 0;
    let neighbours = match op.gather {
        super::Gather::Strided {
            outer: so,
            reduction: sr,
        } => {
            if along_reduction {
                sr == 1 && so % n == 0
            } else {
                so == 1 && sr % n == 0
            }
        }
        super::Gather::Custom(ref g) => g.run() % n == 0,
        super::Gather::Split { .. } => false,
    };
    aligned_offsets && whole && neighbours
}

/// How one operand's `[outer][bk]` slab goes from global memory through registers
/// into shared memory: `lanes`-wide loads along the axis neighbouring invocations
/// walk where the operand's strides, offsets and extents keep every vector aligned
/// and whole inside or outside the matrix, else element by element.
struct Staging<'s> {
    op: &'s GemmOperand,
    mem: Mem,
    sh: Mem,
    /// The operand's extent along its outer axis, and the tile's.
    outer_len: u32,
    outer: u32,
    k: u32,
    origin: &'s E,
    off: &'s E,
    along_reduction: bool,
    lanes: u8,
    threads: u32,
    bk: u32,
    /// A staged row: `bk + pad` elements where the slab is `[outer][bk]` (neighbours
    /// along the reduction), `outer + pad` where it is `[bk][outer]`; swizzled, a
    /// band of 8 such rows (`8·bk` or `8·outer`).
    row: u32,
    /// Whether the slab is staged in the swizzled layout of its contiguous axis
    /// (`RowMajorSwizzled` with rows along it; `bk` is one row where that is the
    /// reduction).
    swizzled: bool,
}

impl<'s> Staging<'s> {
    fn new(
        core: &GemmCore,
        op: &'s GemmOperand,
        (mem, sh): (Mem, Mem),
        (outer_len, outer): (u32, u32),
        origin: &'s E,
        off: &'s E,
        mt: MmaTile,
    ) -> Staging<'s> {
        let along_reduction = op.gather.contiguous(outer_len, core.k) == super::Axis::Reduction;
        let lanes = if mt.copies {
            copy_lanes(core, op, outer_len, outer, mt).unwrap_or(1)
        } else if vector_staging(core, op, outer_len) {
            4
        } else {
            1
        };
        Staging {
            op,
            mem,
            sh,
            outer_len,
            outer,
            k: core.k,
            origin,
            off,
            along_reduction,
            lanes,
            threads: mt.invocations(),
            bk: mt.bk,
            row: match (mt.swizzled(), along_reduction) {
                (true, true) => TILE * mt.bk,
                (true, false) => TILE * outer,
                (false, true) => mt.row(),
                (false, false) => outer + mt.pad,
            },
            swizzled: mt.swizzled(),
        }
    }

    /// Loads of one thread per slab.
    fn count(&self) -> u32 {
        self.outer * self.bk / self.lanes as u32 / self.threads
    }

    fn zero(&self) -> E {
        Num {
            ty: self.op.dtype,
            lanes: self.lanes,
        }
        .lit(0.0)
    }

    fn registers(&self, f: &mut Body) -> Vec<Var> {
        (0..self.count())
            .map(|_| f.var("staged", self.zero()))
            .collect()
    }

    /// `(r, p)` in the slab of load `q` of this thread: the first element of its
    /// vector.
    fn coords(&self, q: u32) -> (E, E) {
        let lanes = self.lanes as u32;
        let v = add(local_id(0), E::from(q * self.threads));
        if self.along_reduction {
            let per_row = self.bk / lanes;
            (div(v.clone(), per_row), scale(rem(v, per_row), lanes))
        } else {
            let per_col = self.outer / lanes;
            (scale(rem(v.clone(), per_col), lanes), div(v, per_col))
        }
    }

    /// Where a fragment whose first outer index is `outer0` at reduction step `p`
    /// starts in the staged slab, and how its elements lie (A's rows and B's columns
    /// are the outer axis).
    fn fragment_at(&self, outer0: E, p: u32, role: FragmentRole) -> (E, FragmentLayout) {
        if self.swizzled {
            // Along the reduction: A by rows, B by columns (both "K-major"); across
            // it the other way. `outer0` is a multiple of 8 (of 64 across), `p` of
            // 16 (below 64 along).
            let (along, across) = match role {
                FragmentRole::A => (
                    FragmentLayout::RowMajorSwizzled,
                    FragmentLayout::ColMajorSwizzled,
                ),
                FragmentRole::B | FragmentRole::Accumulator => (
                    FragmentLayout::ColMajorSwizzled,
                    FragmentLayout::RowMajorSwizzled,
                ),
            };
            let band = self.row / TILE;
            return if self.along_reduction {
                (add(scale(outer0, band), E::from(p)), along)
            } else {
                (add(scale(outer0, TILE), E::from(p * band)), across)
            };
        }
        let outer_major = match role {
            FragmentRole::A => FragmentLayout::RowMajor,
            FragmentRole::B | FragmentRole::Accumulator => FragmentLayout::ColMajor,
        };
        let reduction_major = match role {
            FragmentRole::A => FragmentLayout::ColMajor,
            FragmentRole::B | FragmentRole::Accumulator => FragmentLayout::RowMajor,
        };
        if self.along_reduction {
            (add(scale(outer0, self.row), E::from(p)), outer_major)
        } else {
            (add(scale(E::from(p), self.row), outer0), reduction_major)
        }
    }

    /// Whether the element at `(rg, pg)` of the operand is inside its matrix (`None`:
    /// always, where the tiles and slabs divide it).
    fn inside(&self, rg: &E, pg: &E) -> Option<E> {
        let outer_edge = self.outer_len % self.outer != 0;
        let k_edge = self.k % self.bk != 0;
        match (outer_edge, k_edge) {
            (false, false) => None,
            (true, false) => Some(rg.clone().lt(self.outer_len)),
            (false, true) => Some(pg.clone().lt(self.k)),
            (true, true) => Some(rg.clone().lt(self.outer_len) & pg.clone().lt(self.k)),
        }
    }

    /// Starts copying this thread's pieces of the slab at reduction offset `p0` into
    /// the stage at `offset` (zeros past the matrix).
    fn copy(&self, f: &mut Body, p0: &E, offset: &E) {
        for q in 0..self.count() {
            let (r, p) = self.coords(q);
            let rg = bind(f, "rg", add(self.origin.clone(), r));
            let pg = bind(f, "pg", add(p0.clone(), p));
            let (at, exists) = self.op.gather.address(f, &rg, &pg);
            let valid = and_opt(self.inside(&rg, &pg), exists).unwrap_or_else(|| E::from(true));
            let src = add(self.off.clone(), at);
            let dst = self.shared_at(q, offset);
            f.copy_start((self.sh, dst), (self.mem, src), self.lanes, valid);
        }
    }

    /// Loads the slab at reduction offset `p0` into `regs` (zero past the matrix).
    fn fetch(&self, f: &mut Body, regs: &[Var], p0: &E) {
        for (q, &reg) in regs.iter().enumerate() {
            let (r, p) = self.coords(q as u32);
            let rg = bind(f, "rg", add(self.origin.clone(), r));
            let pg = bind(f, "pg", add(p0.clone(), p));
            let inside = self.inside(&rg, &pg);
            let load = |f: &mut Body| {
                let (at, exists) = self.op.gather.address(f, &rg, &pg);
                let index = add(self.off.clone(), at);
                let value = self.mem.load(index, self.lanes);
                match exists {
                    Some(cond) => {
                        f.assign(reg, self.zero());
                        f.if_(cond, |f| f.assign(reg, value));
                    }
                    None => f.assign(reg, value),
                }
            };
            match inside {
                None => load(f),
                Some(inside) => {
                    f.assign(reg, self.zero());
                    f.if_(inside, load);
                }
            }
        }
    }

    /// Stores `regs` into the shared slab starting at `offset` (its stage).
    fn store(&self, f: &mut Body, regs: &[Var], offset: &E) {
        for (q, &reg) in regs.iter().enumerate() {
            f.store(self.sh, self.shared_at(q as u32, offset), reg.get());
        }
    }

    /// Where this thread's piece `q` of a slab goes in the stage at `offset`: the
    /// piece's lanes are neighbours there too.
    fn shared_at(&self, q: u32, offset: &E) -> E {
        let (r, p) = self.coords(q);
        if self.swizzled {
            // The element's place in rows of `SWIZZLE_ROW` along the contiguous axis,
            // bands of 8 rows `row` apart, then the swizzle (of absolute indices:
            // every stage starts at a multiple of 512; the swizzle moves 8-element
            // pieces whole).
            let (major, minor) = if self.along_reduction { (r, p) } else { (p, r) };
            return element_index_expr(
                FragmentLayout::RowMajorSwizzled,
                self.op.dtype,
                offset.clone(),
                E::from(self.row),
                major,
                minor,
            );
        }
        let at = if self.along_reduction {
            add(scale(r, self.row), p)
        } else {
            add(scale(p, self.row), r)
        };
        add(offset.clone(), at)
    }
}

#[cfg(test)]
mod tests {
    //! Every f16/bf16/f64 GEMM case of the table through the fragment tile, in the
    //! interpreter as written and as the expansion makes it for other targets.

    use crate::conformance::{cases, check, Executor, OnFragments};
    use crate::lower::{lower, TargetCaps};
    use crate::spec::{OpKind, OpSpec};
    use kernelc_ir::{MmaShape, ScalarType};

    use super::Forced;

    thread_local! {
        static FORCE: std::cell::Cell<Forced> = const { std::cell::Cell::new(Forced::None) };
    }

    /// Which large tile this test thread lowers every fragment GEMM with.
    pub(super) fn forced() -> Forced {
        FORCE.with(|f| f.get())
    }

    fn half_gemms() -> Vec<OpSpec> {
        cases::for_kind(OpKind::Gemm)
            .into_iter()
            .filter(|s| match s {
                OpSpec::Gemm(g) => {
                    let tf32 = g.input_rounding == Some(crate::ops::InputRounding::Tf32);
                    (matches!(
                        g.dtype,
                        ScalarType::F16 | ScalarType::Bf16 | ScalarType::F64
                    ) && g.input_rounding.is_none()
                        || tf32)
                        && g.k > 0
                        && s.outputs().iter().all(|o| o.numel() > 0)
                }
                _ => false,
            })
            .collect()
    }

    #[test]
    fn half_gemms_conform_on_fragments_and_expanded() {
        let specs = half_gemms();
        assert!(
            specs.len() >= 8,
            "{} f16/bf16/f64/TF32 GEMM cases",
            specs.len()
        );
        for expanded in [false, true] {
            let exec = OnFragments { expanded };
            for spec in &specs {
                if let Err(e) = check(&exec, spec, 7) {
                    panic!("{}: {spec:?}: {e}", exec.name());
                }
            }
        }
    }

    /// The large tiles (8 warps and a one-fragment epilogue on `mma.sync`, two
    /// warpgroups on `wgmma`) on the table's shapes, which pick the small ones on
    /// their own; the warpgroup tile expanded too.
    #[test]
    fn the_large_tiles_conform_too() {
        for (force, expanded) in [
            (Forced::MmaSync, false),
            (Forced::Large, false),
            (Forced::Large, true),
        ] {
            FORCE.with(|f| f.set(force));
            let exec = OnFragments { expanded };
            for spec in &half_gemms() {
                if let Err(e) = check(&exec, spec, 7) {
                    FORCE.with(|f| f.set(Forced::None));
                    panic!("{force:?} (expanded: {expanded}): {spec:?}: {e}");
                }
            }
        }
        FORCE.with(|f| f.set(Forced::None));
    }

    /// The warpgroup tile stages in tiles and multiplies with warpgroup shapes.
    #[test]
    fn half_gemms_on_sm90_caps_use_warpgroups_when_large() {
        use crate::spec::GemmSpec;
        let spec = OpSpec::Gemm(GemmSpec::new(ScalarType::Bf16, 2048, 2048, 1024));
        let plan = lower(&spec, &TargetCaps::cuda_sm90()).unwrap();
        let kernel = &plan.launches[0].kernel;
        assert!(kernel
            .fragments
            .iter()
            .all(|f| f.shape == MmaShape::M64N256K16));
        // A reduction as short as the warpgroups' pipeline fill: the `mma.sync` tiles,
        // several to an SM, hide it (`warp_tiles_win`).
        let short = OpSpec::Gemm(GemmSpec::new(ScalarType::Bf16, 2048, 2048, 256));
        let plan = lower(&short, &TargetCaps::cuda_sm90()).unwrap();
        let warps = &plan.launches[0].kernel;
        assert!(warps
            .fragments
            .iter()
            .all(|f| f.shape == MmaShape::M16N8K16));
        assert!(warps.uses_async_copies());
        assert_eq!(kernel.invocations_per_workgroup(), 256);
        // Staged by asynchronous copies, the epilogue's rows in the `B` slabs' bytes.
        assert!(kernel.uses_async_copies());
        assert!(kernel.shared.iter().any(|s| s.reuses.is_some()));
        assert!(
            kernel.shared_bytes() <= 192 * 1024,
            "{}",
            kernel.shared_bytes()
        );
        let caps = TargetCaps {
            async_copies: false,
            ..TargetCaps::cuda_sm90()
        };
        let plan = lower(&spec, &caps).unwrap();
        let kernel = &plan.launches[0].kernel;
        assert!(!kernel.uses_async_copies());
        assert!(kernel
            .fragments
            .iter()
            .all(|f| f.shape == MmaShape::M64N128K16));
        assert_eq!(kernel.invocations_per_workgroup(), 512);
        // Fewer tiles (64 of 256 × 128): four warpgroups of m64n128k16 by copies; fewer
        // still (32), the small `mma.sync` tile.
        let shapes = |m, n| {
            let spec = OpSpec::Gemm(GemmSpec::new(ScalarType::Bf16, m, n, 1024));
            let plan = lower(&spec, &TargetCaps::cuda_sm90()).unwrap();
            let kernel = plan.launches[0].kernel.clone();
            let shape = kernel.fragments[0].shape;
            (
                shape,
                kernel.invocations_per_workgroup(),
                kernel.uses_async_copies(),
            )
        };
        assert_eq!(shapes(1024, 2048), (MmaShape::M64N128K16, 512, true));
        assert_eq!(shapes(1024, 1024).0, MmaShape::M16N8K16);
        // No warpgroups without the cap.
        let caps = TargetCaps {
            warpgroup_fragments: false,
            ..TargetCaps::cuda_sm90()
        };
        let plan = lower(&spec, &caps).unwrap();
        assert!(plan.launches[0]
            .kernel
            .fragments
            .iter()
            .all(|f| !f.shape.is_warpgroup()));
    }

    /// The `mma.sync` tiles copy where both operands move in 4- to 16-byte pieces:
    /// f64 (DMMA) and f16 GEMMs do, a bf16 operand with an odd leading dimension
    /// does not (2-byte pieces).
    #[test]
    fn mma_sync_tiles_copy_where_the_operands_allow() {
        use crate::spec::GemmSpec;
        let copies = |spec: GemmSpec| {
            let plan = lower(&OpSpec::Gemm(spec), &TargetCaps::cuda_sm90()).unwrap();
            let kernel = &plan.launches[0].kernel;
            assert!(kernel.uses_fragments());
            assert!(kernel.fragments.iter().all(|f| !f.shape.is_warpgroup()));
            kernel.uses_async_copies()
        };
        assert!(copies(GemmSpec::new(ScalarType::F64, 2048, 2048, 256)));
        assert!(copies(GemmSpec::new(ScalarType::F16, 100, 72, 40)));
        // Without room to opt into, the copy stages do not fit: the register-staged
        // tile stays (ahead-of-time PTX, whose launches take no dynamic shared
        // memory).
        let small = TargetCaps {
            opt_in_shared_memory_bytes: 0,
            warpgroup_fragments: false,
            ..TargetCaps::cuda_sm90()
        };
        let spec = OpSpec::Gemm(GemmSpec::new(ScalarType::F16, 2048, 2048, 256));
        let plan = lower(&spec, &small).unwrap();
        let kernel = &plan.launches[0].kernel;
        assert!(kernel.uses_fragments() && !kernel.uses_async_copies());
        assert!(kernel.shared_bytes() <= 48 * 1024);
        let odd = GemmSpec {
            lda: Some(41),
            ..GemmSpec::new(ScalarType::Bf16, 100, 72, 41)
        };
        assert!(!copies(odd));
    }

    /// TF32 mode packs both operands (rounded, reduction-major) and multiplies them on
    /// TF32 fragments where the device has them; elsewhere, and for exact f32, the
    /// SIMT tiles run (never TF32 unasked).
    #[test]
    fn tf32_mode_packs_then_multiplies_on_tf32_fragments() {
        use crate::ops::InputRounding;
        use crate::spec::GemmSpec;
        let exact = GemmSpec::new(ScalarType::F32, 2048, 2048, 512);
        let tf32 = GemmSpec {
            input_rounding: Some(InputRounding::Tf32),
            ..exact.clone()
        };
        let plan = lower(&OpSpec::Gemm(tf32.clone()), &TargetCaps::cuda_sm90()).unwrap();
        let names: Vec<&str> = plan
            .launches
            .iter()
            .map(|l| l.kernel.name.as_str())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names[..2].iter().all(|n| n.contains("_pack_")), "{names:?}");
        assert_eq!(plan.temps.len(), 2);
        let kernel = &plan.launches[2].kernel;
        assert!(kernel.uses_async_copies());
        // Hopper: two warpgroups of m64n256k8; before it, `mma.sync` m16n8k8.
        let tf32_kind = |kernel: &kernelc_ir::Kernel, shape| {
            kernel
                .fragments
                .iter()
                .all(|f| f.shape == shape && f.elem == ScalarType::F32)
        };
        assert!(tf32_kind(kernel, MmaShape::M64N256K8));
        assert!(plan.tunable.unwrap().class.contains("rounded to tf32"));
        let sm80 = TargetCaps {
            warpgroup_fragments: false,
            ..TargetCaps::cuda_sm90()
        };
        let plan = lower(&OpSpec::Gemm(tf32.clone()), &sm80).unwrap();
        assert!(tf32_kind(&plan.launches[2].kernel, MmaShape::M16N8K8));
        for (spec, caps) in [
            (&exact, TargetCaps::cuda_sm90()),
            (&tf32, TargetCaps::cpu()),
            (&tf32, TargetCaps::gpu_baseline()),
        ] {
            let plan = lower(&OpSpec::Gemm(spec.clone()), &caps).unwrap();
            assert!(plan.temps.is_empty());
            assert!(plan.launches.iter().all(|l| !l.kernel.uses_fragments()));
        }
    }

    #[test]
    fn other_devices_keep_the_simt_tiles() {
        for spec in half_gemms() {
            for caps in [TargetCaps::cpu(), TargetCaps::gpu_baseline()] {
                let Ok(plan) = lower(&spec, &caps) else {
                    continue;
                };
                assert!(plan.launches.iter().all(|l| !l.kernel.uses_fragments()));
            }
        }
    }
}
