//! The tile schedule: the tile shape for a problem on a target, how each operand's slab
//! is staged, and whether the reduction is split (split-K). [`TileKernel`] holds these
//! decisions; `kernel.rs` writes the kernel they describe.

use super::{Axis, Gather, GemmCore, GemmOperand};
use crate::lower::TargetCaps;
use kernelc_ir::ScalarType;

// ---------------------------------------------------------------------------------------
// Tile configuration
// ---------------------------------------------------------------------------------------

/// The tile shape of one GEMM kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tile {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    /// Invocations along M and N.
    pub ty: u32,
    pub tx: u32,
    /// Micro-tile of one invocation per step.
    pub tm: u32,
    pub tn: u32,
    /// Lanes of accumulators and B reads (along N), and of A reads (along M).
    pub vn: u8,
    pub vm: u8,
    /// Reduction steps unrolled at build time per loop iteration.
    pub unroll: u32,
}

/// Workgroups the GPU heuristics aim to have in flight (about one per SM of a large
/// device): below it, tiles shrink or the reduction splits.
const TARGET_WORKGROUPS: u32 = 128;
/// Tile rows grouped together in the launch order, so that consecutive workgroups
/// share panels of A and B in cache.
pub(super) const GROUP_M: u32 = 8;
/// Padding of a shared row (elements) when staging stores transpose (fewer bank
/// conflicts); a multiple of every vector width.
const SHARED_PAD: u32 = 4;

impl Tile {
    pub fn invocations(&self) -> u32 {
        self.tx * self.ty
    }
    /// Micro-tiles per invocation along M and N.
    pub(super) fn steps(&self) -> (u32, u32) {
        (self.bm / (self.tm * self.ty), self.bn / (self.tn * self.tx))
    }
    pub(super) fn resident(&self) -> bool {
        self.steps() == (1, 1)
    }
    /// A tile of `ty × tx` invocations with `tm × tn` micro-tiles, `steps` of them per
    /// invocation along each axis, `bk` deep, reading `lanes`-wide vectors where the
    /// micro-tile allows (tests force tile shapes the heuristics would not pick).
    #[cfg(test)]
    pub(crate) fn forced(shape: (u32, u32, u32, u32, u32), steps: u32, lanes: u8) -> Tile {
        let (ty, tx, tm, tn, bk) = shape;
        Tile {
            bm: steps * ty * tm,
            bn: steps * tx * tn,
            ..Tile::of_invocations(ty, tx, tm, tn, bk, lanes as u32)
        }
    }
}

/// Lanes of a 16-byte (`caps.vector_width` f32 lanes) vector of `ty`.
pub(crate) fn vector_lanes(ty: ScalarType, caps: &TargetCaps) -> u8 {
    let bytes = 4 * caps.vector_width.max(1) as u32;
    match bytes / ty.size_bytes().max(1) {
        0 | 1 => 1,
        2 | 3 => 2,
        _ => 4,
    }
}

fn round_up(v: u32, to: u32) -> u32 {
    v.div_ceil(to) * to
}

impl Tile {
    /// `ty × tx` invocations of one `tm × tn` micro-tile each, `bk`-deep slabs,
    /// vectors of up to `v` lanes along N, and along M where `tm` is a multiple.
    fn of_invocations(ty: u32, tx: u32, tm: u32, tn: u32, bk: u32, v: u32) -> Tile {
        Tile {
            bm: ty * tm,
            bn: tx * tn,
            bk,
            ty,
            tx,
            tm,
            tn,
            vn: v.min(tn) as u8,
            vm: if tm % v == 0 { v as u8 } else { 1 },
            unroll: bk,
        }
    }

    /// The tile's name among a plan's schedules (`Tunable::choices`):
    /// `"simt 128x128x8 16x16 of 8x8"`.
    pub(crate) fn name(&self) -> String {
        format!(
            "simt {}x{}x{} {}x{} of {}x{}",
            self.bm, self.bn, self.bk, self.ty, self.tx, self.tm, self.tn
        )
    }
}

/// Every SIMT tile `core` may take on `caps`, [`choose_tile`]'s first: the
/// alternatives autotuning times. On a GPU, the two micro-tiles of the heuristics
/// (`8 × 8` over 128 × 128, `4 × 4` over 64 × 64) whichever it picked, the first with
/// 16-deep slabs too (1.5× the 8-deep one's speed at f32 4096³ on an H200; 32-deep
/// ones were slower than 16), and `8 × 8` on 128 invocations (64 × 128); on a CPU, a larger and a
/// flatter tile than its 32 × 32. Only tiles whose slabs fit the shared memory as
/// they are (a tile that must halve its slab is another's twin).
pub(crate) fn simt_alternatives(core: &GemmCore, caps: &TargetCaps) -> Vec<Tile> {
    let first = choose_tile(core, caps);
    let v = vector_lanes(core.compute(), caps) as u32;
    let tile = |(ty, tx, tm, tn, bk)| Tile::of_invocations(ty, tx, tm, tn, bk, v);
    let mut tiles = vec![first];
    let others: Vec<Tile> = if caps.is_serial() {
        let bk = |most: u32| round_up(core.k, 8).min(most);
        let serial = |bm: u32, bn: u32, bk: u32| Tile {
            bm: round_up(core.m, first.tm).min(bm),
            bn: round_up(core.n, first.tn).min(bn),
            bk,
            ..first
        };
        vec![serial(64, 64, bk(64)), serial(16, 64, bk(128))]
    } else if first.invocations() == 256 {
        vec![
            tile((16, 16, 8, 8, 8)),
            tile((16, 16, 4, 4, 16)),
            tile((16, 16, 8, 8, 16)),
            tile((8, 16, 8, 8, 8)),
        ]
    } else {
        Vec::new()
    };
    let fits = |t: &Tile| {
        TileKernel::new(core, caps, *t).shared_bytes() <= caps.shared_memory_bytes as u64
    };
    for t in others {
        if !tiles.contains(&t) && fits(&t) {
            tiles.push(t);
        }
    }
    tiles
}

/// Picks the tile for `core` on `caps` (see the module docs).
pub(crate) fn choose_tile(core: &GemmCore, caps: &TargetCaps) -> Tile {
    let compute = core.compute();
    let v = vector_lanes(compute, caps) as u32;
    if caps.is_serial() {
        let tm = 4;
        let tn = (2 * v).max(4);
        return Tile {
            bm: round_up(core.m, tm).min(32),
            bn: round_up(core.n, tn).min(32),
            bk: round_up(core.k, 8).min(128),
            ty: 1,
            tx: 1,
            tm,
            tn,
            vn: v as u8,
            vm: v.min(tm) as u8,
            unroll: 8,
        };
    }
    let budget = caps.invocations_1d().min(256);
    let (mut ty, mut tx) = (1u32, 1u32);
    while ty * tx * 2 <= budget {
        if tx <= ty {
            tx *= 2;
        } else {
            ty *= 2;
        }
    }
    let big_tiles =
        core.m.div_ceil(128) as u64 * core.n.div_ceil(128) as u64 * core.batch_count() as u64;
    let (tm, tn, bk) = if ty * tx >= 256
        && compute != ScalarType::F64
        && big_tiles >= 2 * TARGET_WORKGROUPS as u64
    {
        (8, 8, 8)
    } else {
        (4, 4, 16)
    };
    // Skinny problems (GEMV-like: a handful of rows or columns) get a flat tile,
    // so that a 64-row tile does not multiply mostly zero rows.
    if ty == tx && ty >= 4 && tm == 4 {
        let flat = (ty * tx / 4, 4);
        if core.m <= 16 && core.n >= 256 {
            (ty, tx) = (flat.1, flat.0);
        } else if core.n <= 16 && core.m >= 256 {
            (ty, tx) = flat;
        }
    }
    Tile::of_invocations(ty, tx, tm, tn, bk, v)
}

// ---------------------------------------------------------------------------------------
// Staging plans
// ---------------------------------------------------------------------------------------

/// How one operand's tile is loaded: along which axis neighbouring invocations walk,
/// and how many lanes each load has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stage {
    pub axis: Axis,
    pub lanes: u8,
}

fn stage_plan(
    op: &GemmOperand,
    batch: &[u32],
    outer_len: u32,
    k: u32,
    tile_outer: u32,
    bk: u32,
    v: u8,
) -> Stage {
    let axis = op.gather.contiguous(outer_len, k);
    let lanes = match op.gather {
        Gather::Strided { outer, reduction } if v > 1 => {
            let v32 = v as u32;
            let (unit, other, extent, other_extent, tile_extent) = match axis {
                Axis::Outer => (outer, reduction, outer_len, k, tile_outer),
                Axis::Reduction => (reduction, outer, k, outer_len, bk),
            };
            let batch_aligned = batch
                .iter()
                .zip(&op.batch_strides)
                .all(|(&count, &s)| count == 1 || s % v32 == 0);
            let ok = unit == 1
                && (other % v32 == 0 || other_extent == 1)
                && op.base % v32 == 0
                && batch_aligned
                && extent % v32 == 0
                && tile_extent % v32 == 0;
            if ok {
                v
            } else {
                1
            }
        }
        _ => 1,
    };
    Stage { axis, lanes }
}

// ---------------------------------------------------------------------------------------
// The plan of one tile kernel
// ---------------------------------------------------------------------------------------

/// Split-K: the reduction's slabs are divided among `splits` workgroups per tile, each
/// writing its partial tile to `partial` (`[splits][batch][M][ld]`, compute type).
#[derive(Clone, Copy, Debug)]
pub(super) struct SplitK {
    pub splits: u32,
    pub slabs_per_split: u32,
    pub ld: u32,
}

/// One tile kernel as planned: the tile, how each operand's slab is staged and into
/// shared rows of what length, the tile grid, and the split of the reduction.
pub(super) struct TileKernel<'a> {
    pub core: &'a GemmCore,
    pub tile: Tile,
    pub stage_a: Stage,
    pub stage_b: Stage,
    pub lda: u32,
    pub ldb: u32,
    pub split: Option<SplitK>,
    pub tiles_m: u32,
    pub tiles_n: u32,
    /// Whether C's placement allows `vn`-lane loads and stores.
    pub c_vector: bool,
}

impl<'a> TileKernel<'a> {
    /// The plan of `tile` for `core` on `caps`, unsplit.
    pub(super) fn new(core: &'a GemmCore, caps: &TargetCaps, tile: Tile) -> TileKernel<'a> {
        let v = vector_lanes(core.compute(), caps);
        let stage_a = stage_plan(&core.a, &core.batch, core.m, core.k, tile.bm, tile.bk, v);
        let stage_b = stage_plan(&core.b, &core.batch, core.n, core.k, tile.bn, tile.bk, v);
        // Transposing stores (neighbours along the reduction) get a padded row.
        let pad = |s: Stage| {
            if !caps.is_serial() && s.axis == Axis::Reduction {
                SHARED_PAD
            } else {
                0
            }
        };
        let vn = tile.vn as u32;
        let c = &core.c;
        let c_vector = vn > 1
            && c.ld % vn == 0
            && c.base % vn == 0
            && core.n % vn == 0
            && core
                .batch
                .iter()
                .zip(&c.batch_strides)
                .all(|(&count, &s)| count == 1 || s % vn == 0);
        TileKernel {
            core,
            tile,
            stage_a,
            stage_b,
            lda: tile.bm + pad(stage_a),
            ldb: tile.bn + pad(stage_b),
            split: None,
            tiles_m: core.m.div_ceil(tile.bm),
            tiles_n: core.n.div_ceil(tile.bn),
            c_vector,
        }
    }

    /// `BK`-slabs of the whole reduction.
    pub(super) fn slabs(&self) -> u32 {
        self.core.k.div_ceil(self.tile.bk)
    }

    /// Shared memory the kernel declares: the staged slabs, and the accumulators when
    /// they do not stay in registers.
    pub(super) fn shared_bytes(&self) -> u64 {
        let t = &self.tile;
        let mut elems = t.bk as u64 * (self.lda + self.ldb) as u64;
        if !t.resident() {
            elems += t.bm as u64 * t.bn as u64;
        }
        elems * self.core.compute().size_bytes() as u64
    }

    /// Workgroups launched: tiles × batches × splits.
    pub(super) fn workgroups(&self) -> u64 {
        self.tiles_m as u64
            * self.tiles_n as u64
            * self.core.batch_count() as u64
            * self.split.map_or(1, |s| s.splits) as u64
    }

    /// Splits the reduction when there are few tiles and many slabs (GPU only).
    pub(super) fn choose_split(&mut self, caps: &TargetCaps) {
        if caps.is_serial() {
            return;
        }
        let wgs = self.workgroups();
        let slabs = self.slabs();
        if wgs >= TARGET_WORKGROUPS as u64 / 2 || slabs < 16 {
            return;
        }
        let ld = round_up(self.core.n, self.tile.vn as u32);
        let per_split = self.core.batch_count() as u64 * self.core.m as u64 * ld as u64;
        let by_memory = (i32::MAX as u64 / per_split.max(1)).min(u32::MAX as u64) as u32;
        let wanted = (TARGET_WORKGROUPS as u64).div_ceil(wgs) as u32;
        let splits = wanted.min(slabs / 8).min(32).min(by_memory);
        if splits < 2 {
            return;
        }
        let slabs_per_split = slabs.div_ceil(splits);
        self.split = Some(SplitK {
            splits: slabs.div_ceil(slabs_per_split),
            slabs_per_split,
            ld,
        });
    }
}
