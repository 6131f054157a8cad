//! The tile kernel on matrix fragments (tensor cores), for f16 and bf16 operands with
//! f32 sums on devices whose caps say `matrix_fragments`.
//!
//! A workgroup of `WM × WN` warps computes a `BM × BN` tile of one `C_z`; each warp
//! owns a `FM·16 × FN·8` block of it as `FM × FN` accumulator fragments of the
//! `m16n8k16` multiply. A loop over `BK`-slabs of the reduction stages `A` as
//! `[BM][BK + 8]` and `B` as `[BN][BK + 8]` in shared memory, in the operands' own
//! type (the padding spreads a column's reads over the banks), neighbouring
//! invocations walking each operand's contiguous axis and zero-filling past the
//! matrix; after a barrier every warp loads its `A` fragments row-major and its `B`
//! fragments column-major from there and multiplies, `BK / 16` steps per slab.
//!
//! The epilogue goes through shared memory, one row of a warp's fragments at a time:
//! the warp stores them (f32) to its own `16 × FN·8` region, and after a barrier each
//! of its invocations takes the elements of that region one row at a time (coalesced)
//! through the engine's epilogue (`alpha`, `beta·C_in`, bias, activation, rounding)
//! into C.
//!
//! Each element of C is `C_in`'s epilogue applied to a sum of exact products of the
//! operands (f16 and bf16 products are exact in f32), summed by the tensor cores in
//! their own order, within the accumulation bound of docs/semantics.md ("Matrix
//! fragments"); the interpreter and the expansion sum them in order, one `fma` at a
//! time.

use super::kernel::Mems;
use super::schedule::{Tile, TileKernel};
use super::{add, div, rem, scale, BiasAxis, GemmCore, GemmOperand};
use crate::lower::math::bind;
use crate::lower::schedule::fold_grid;
use crate::lower::{Launch, LowerError, TargetCaps};
use kernelc_ir::builder::*;
use kernelc_ir::fragment::{FragmentLayout, FragmentRole, MmaShape};
use kernelc_ir::{Access, FragmentId, ScalarType};

/// The multiply every fragment uses.
const SHAPE: MmaShape = MmaShape::M16N8K16;
/// Reduction elements per slab.
const BK: u32 = 32;
/// Padding of a staged row (elements).
const PAD: u32 = 8;

/// The warps of a workgroup and the fragments of a warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MmaTile {
    /// Warps along M and N.
    pub wm: u32,
    pub wn: u32,
    /// Accumulator fragments of a warp along M and N.
    pub fm: u32,
    pub fn_: u32,
}

impl MmaTile {
    /// 8 warps, each 64 × 32: a 128 × 128 tile.
    const LARGE: MmaTile = MmaTile {
        wm: 2,
        wn: 4,
        fm: 4,
        fn_: 4,
    };
    /// 4 warps, each 32 × 32: a 64 × 64 tile.
    const SMALL: MmaTile = MmaTile {
        wm: 2,
        wn: 2,
        fm: 2,
        fn_: 4,
    };

    fn warps(&self) -> u32 {
        self.wm * self.wn
    }
    fn warp_rows(&self) -> u32 {
        self.fm * SHAPE.m
    }
    fn warp_cols(&self) -> u32 {
        self.fn_ * SHAPE.n
    }
    fn bm(&self) -> u32 {
        self.wm * self.warp_rows()
    }
    fn bn(&self) -> u32 {
        self.wn * self.warp_cols()
    }
    fn invocations(&self) -> u32 {
        self.warps() * kernelc_ir::fragment::WARP
    }

    /// The engine's tile record of this shape (for placement and the epilogue).
    fn as_tile(&self) -> Tile {
        Tile {
            bm: self.bm(),
            bn: self.bn(),
            bk: BK,
            ty: 1,
            tx: self.invocations(),
            tm: self.bm(),
            tn: self.bn() / self.invocations(),
            vn: 1,
            vm: 1,
            unroll: 1,
        }
    }

    fn shared_bytes(&self, input: ScalarType) -> u64 {
        let staged = (self.bm() + self.bn()) as u64 * (BK + PAD) as u64 * input.size_bytes() as u64;
        let epilogue = self.warps() as u64 * (SHAPE.m * self.warp_cols()) as u64 * 4;
        staged + epilogue
    }
}

/// The fragment tile for `core` on `caps`, or `None` where the SIMT tile serves: no
/// matrix units, other operand types, `input_rounding`, or operands with absent
/// elements (whose `0·∞` terms the SIMT engine keeps out of the sums).
pub(crate) fn choose(core: &GemmCore, caps: &TargetCaps) -> Option<MmaTile> {
    let half = matches!(core.a.dtype, ScalarType::F16 | ScalarType::Bf16);
    let eligible = caps.matrix_fragments
        && half
        && core.b.dtype == core.a.dtype
        && core.input_rounding.is_none()
        && !core.has_absent()
        && core.k > 0;
    if !eligible {
        return None;
    }
    let tiles = |t: MmaTile| {
        core.m.div_ceil(t.bm()) as u64 * core.n.div_ceil(t.bn()) as u64 * core.batch_count() as u64
    };
    // The large tile where it still fills about a device's worth of workgroups.
    let tile = if tiles(MmaTile::LARGE) >= 96 {
        MmaTile::LARGE
    } else {
        MmaTile::SMALL
    };
    let fits = tile.invocations() <= caps.max_invocations_per_workgroup
        && tile.shared_bytes(core.a.dtype) <= caps.shared_memory_bytes as u64;
    fits.then_some(tile)
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
        let compute = core.compute();
        let grid = fold_grid(
            u32::try_from(self.workgroups()).map_err(|_| LowerError::TooLarge {
                what: format!("{} workgroup count", core.name),
                value: self.workgroups(),
                limit: u32::MAX as u64,
            })?,
            caps,
        )?;
        let mut k = KernelBuilder::new(format!("{}_mma", core.name), [mt.invocations(), 1, 1]);
        let mut bindings = Vec::new();
        let a = k.buffer(core.a.name.clone(), core.a.dtype, core.a.len, Access::Read);
        bindings.push(core.a.binding.clone());
        let b = k.buffer(core.b.name.clone(), core.b.dtype, core.b.len, Access::Read);
        bindings.push(core.b.binding.clone());
        let bias = core.bias.as_ref().map(|bs| {
            bindings.push(bs.binding.clone());
            let len = match bs.along {
                BiasAxis::Rows => core.m,
                BiasAxis::Cols => core.n,
            };
            k.buffer("bias", bs.dtype, len as u64, Access::Read)
        });
        let c_in = core.prior.as_ref().map(|prior| {
            bindings.push(prior.c_in.clone());
            k.buffer("c_in", core.c.dtype, core.c.len, Access::Read)
        });
        bindings.push(core.c.binding.clone());
        let out = k.buffer(core.c.name.clone(), core.c.dtype, core.c.len, Access::Write);
        let alpha = Some(k.scalar("alpha", compute));
        bindings.push(core.alpha.clone());
        let beta = core.prior.as_ref().map(|prior| {
            bindings.push(prior.beta.clone());
            k.scalar("beta", compute)
        });
        let row = BK + PAD;
        let a_sh = k.shared("a_tile", core.a.dtype, mt.bm() * row);
        let b_sh = k.shared("b_tile", core.b.dtype, mt.bn() * row);
        let c_sh = k.shared(
            "c_rows",
            ScalarType::F32,
            mt.warps() * SHAPE.m * mt.warp_cols(),
        );
        let mems = Mems {
            a,
            b,
            bias,
            c_in,
            out,
            alpha,
            beta,
            a_sh,
            b_sh,
            acc_sh: Some(c_sh),
        };
        let kernel = k.build(|f| self.mma_body(f, grid, &mems, mt))?;
        Ok(Launch {
            kernel,
            grid,
            bindings,
        })
    }

    fn mma_body(&self, f: &mut Body, grid: [u32; 3], m: &Mems, mt: MmaTile) {
        let core = self.core;
        let place = self.place(f, grid);
        let input = core.a.dtype;
        let warp = f.let_("warp", div(place.tid.clone(), 32));
        let lane = f.let_("lane", rem(place.tid.clone(), 32));
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
        let frag = |f: &mut Body, name: &str, role| f.fragment(name, role, SHAPE, input);
        let fa: Vec<FragmentId> = (0..mt.fm).map(|_| frag(f, "a", FragmentRole::A)).collect();
        let fb: Vec<FragmentId> = (0..mt.fn_).map(|_| frag(f, "b", FragmentRole::B)).collect();
        let acc: Vec<Vec<FragmentId>> = (0..mt.fm)
            .map(|_| {
                (0..mt.fn_)
                    .map(|_| f.fragment("acc", FragmentRole::Accumulator, SHAPE, ScalarType::F32))
                    .collect()
            })
            .collect();
        for &c in acc.iter().flatten() {
            f.fill_fragment(c, 0f32);
        }
        let row = BK + PAD;
        let sides = [
            Staging::new(
                core,
                &core.a,
                (m.a, m.a_sh),
                (core.m, mt.bm()),
                &place.m0,
                &place.off_a,
                mt,
            ),
            Staging::new(
                core,
                &core.b,
                (m.b, m.b_sh),
                (core.n, mt.bn()),
                &place.n0,
                &place.off_b,
                mt,
            ),
        ];
        // The next slab's global loads are in flight while this slab multiplies.
        let regs: Vec<Vec<Var>> = sides.iter().map(|s| s.registers(f)).collect();
        for (side, regs) in sides.iter().zip(&regs) {
            side.fetch(f, regs, &E::from(0u32));
        }
        let slabs = core.k.div_ceil(BK);
        f.for_("slab", 0u32, slabs, 1, |f, slab| {
            for (side, regs) in sides.iter().zip(&regs) {
                side.store(f, regs);
            }
            f.barrier();
            let next = bind(f, "next", add(slab, E::from(1u32)));
            f.if_(next.clone().lt(slabs), |f| {
                let p0 = bind(f, "p0", scale(next.clone(), BK));
                for (side, regs) in sides.iter().zip(&regs) {
                    side.fetch(f, regs, &p0);
                }
            });
            for step in 0..BK / SHAPE.k {
                let p = step * SHAPE.k;
                for (i, &a) in fa.iter().enumerate() {
                    let r = add(wr.clone(), E::from(i as u32 * SHAPE.m));
                    f.load_fragment(
                        a,
                        m.a_sh,
                        add(scale(r, row), E::from(p)),
                        row,
                        FragmentLayout::RowMajor,
                    );
                }
                for (j, &b) in fb.iter().enumerate() {
                    let c = add(wc.clone(), E::from(j as u32 * SHAPE.n));
                    f.load_fragment(
                        b,
                        m.b_sh,
                        add(scale(c, row), E::from(p)),
                        row,
                        FragmentLayout::ColMajor,
                    );
                }
                for (i, &a) in fa.iter().enumerate() {
                    for (j, &b) in fb.iter().enumerate() {
                        f.mma(acc[i][j], a, b, acc[i][j]);
                    }
                }
            }
            // Every warp is done with the slab before the next one is stored.
            f.barrier();
        });
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
        let width = mt.warp_cols();
        let region = bind(f, "region", scale(warp.clone(), SHAPE.m * width));
        for (i, row_of) in acc.iter().enumerate() {
            for (j, &c) in row_of.iter().enumerate() {
                let at = add(region.clone(), E::from(j as u32 * SHAPE.n));
                f.store_fragment(c, c_sh, at, width, FragmentLayout::RowMajor);
            }
            f.barrier();
            for q in 0..SHAPE.m * width / 32 {
                let e = add(lane.clone(), E::from(q * 32));
                let r = div(e.clone(), width);
                let col_in = rem(e.clone(), width);
                let row = bind(
                    f,
                    "row",
                    add(
                        add(place.m0.clone(), wr.clone()),
                        add(E::from(i as u32 * SHAPE.m), r),
                    ),
                );
                let col = bind(f, "col", add(add(place.n0.clone(), wc.clone()), col_in));
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
                    let sum = c_sh.at(add(region.clone(), e));
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

#[cfg(test)]
mod tests {
    //! Every f16/bf16 GEMM case of the table through the fragment tile, in the
    //! interpreter as written and as the expansion makes it for other targets.

    use crate::conformance::{cases, check, Executor};
    use crate::lower::{lower, TargetCaps};
    use crate::spec::{OpKind, OpSpec};
    use kernelc_ir::interp::HostBuffer;
    use kernelc_ir::passes::expand_fragments;
    use kernelc_ir::ScalarType;

    struct Fragments {
        expanded: bool,
    }

    impl Executor for Fragments {
        fn name(&self) -> String {
            format!("fragment tiles (expanded: {})", self.expanded)
        }
        fn run(&self, spec: &OpSpec, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
            let mut plan = lower(spec, &TargetCaps::cuda_sm90()).map_err(|e| e.to_string())?;
            if !plan.launches.iter().any(|l| l.kernel.uses_fragments()) {
                return Err(format!("{} lowers to no fragment kernel", spec.name()));
            }
            if self.expanded {
                for launch in &mut plan.launches {
                    launch.kernel = expand_fragments(&launch.kernel);
                }
            }
            crate::conformance::interpret(&plan, spec, inputs)
        }
    }

    fn half_gemms() -> Vec<OpSpec> {
        cases::for_kind(OpKind::Gemm)
            .into_iter()
            .filter(|s| match s {
                OpSpec::Gemm(g) => {
                    matches!(g.dtype, ScalarType::F16 | ScalarType::Bf16)
                        && g.input_rounding.is_none()
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
        assert!(specs.len() >= 5, "{} f16/bf16 GEMM cases", specs.len());
        for expanded in [false, true] {
            let exec = Fragments { expanded };
            for spec in &specs {
                if let Err(e) = check(&exec, spec, 7) {
                    panic!("{}: {spec:?}: {e}", exec.name());
                }
            }
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

/// How one operand's `[outer][BK]` slab goes from global memory through registers
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
        let aligned_offsets = op.base % 4 == 0
            && core
                .batch
                .iter()
                .zip(&op.batch_strides)
                .all(|(&count, &s)| count == 1 || s % 4 == 0);
        let vector = match op.gather {
            super::Gather::Strided {
                outer: so,
                reduction: sr,
            } => {
                aligned_offsets
                    && if along_reduction {
                        sr == 1 && so % 4 == 0 && core.k % 4 == 0
                    } else {
                        so == 1 && sr % 4 == 0 && outer_len % 4 == 0
                    }
            }
            super::Gather::Split { .. } | super::Gather::Custom(_) => false,
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
            lanes: if vector { 4 } else { 1 },
            threads: mt.invocations(),
        }
    }

    /// Loads of one thread per slab.
    fn count(&self) -> u32 {
        self.outer * BK / self.lanes as u32 / self.threads
    }

    fn zero(&self) -> E {
        let z = E(kernelc_ir::Expr::Lit(kernelc_ir::Scalar::zero(
            self.op.dtype,
        )));
        if self.lanes == 1 {
            z
        } else {
            z.splat(self.lanes)
        }
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
            let per_row = BK / lanes;
            (div(v.clone(), per_row), scale(rem(v, per_row), lanes))
        } else {
            let per_col = self.outer / lanes;
            (scale(rem(v.clone(), per_col), lanes), div(v, per_col))
        }
    }

    /// Loads the slab at reduction offset `p0` into `regs` (zero past the matrix).
    fn fetch(&self, f: &mut Body, regs: &[Var], p0: &E) {
        for (q, &reg) in regs.iter().enumerate() {
            let (r, p) = self.coords(q as u32);
            let rg = bind(f, "rg", add(self.origin.clone(), r));
            let pg = bind(f, "pg", add(p0.clone(), p));
            f.assign(reg, self.zero());
            let inside = rg.clone().lt(self.outer_len) & pg.clone().lt(self.k);
            f.if_(inside, |f| {
                let (at, exists) = self.op.gather.address(f, &rg, &pg);
                let index = add(self.off.clone(), at);
                let value = self.mem.load(index, self.lanes);
                match exists {
                    Some(cond) => f.if_(cond, |f| f.assign(reg, value)),
                    None => f.assign(reg, value),
                }
            });
        }
    }

    /// Stores `regs` into the shared slab `[outer][BK + PAD]`.
    fn store(&self, f: &mut Body, regs: &[Var]) {
        for (q, &reg) in regs.iter().enumerate() {
            let (r, p) = self.coords(q as u32);
            let at = bind(f, "sh_at", add(scale(r, BK + PAD), p));
            if self.lanes == 1 {
                f.store(self.sh, at, reg.get());
            } else if self.along_reduction {
                f.store(self.sh, at, reg.get());
            } else {
                // Neighbours along the outer axis: one row each.
                for l in 0..self.lanes {
                    let row_l = add(at.clone(), E::from(l as u32 * (BK + PAD)));
                    f.store(self.sh, row_l, reg.get().lane(l));
                }
            }
        }
    }
}
